/*
 * A committed step opened for reading (view.c) and the blob reader that
 * works on it (read.c): the commit record, and per rank an open shard file
 * with its decoded manifest.
 */
#ifndef ELASTIC_CKPT_VIEW_H
#define ELASTIC_CKPT_VIEW_H

#include "ckpt/ckpt.h"

#include <limits.h>
#include <sys/types.h>

typedef struct ckpt_shard_view {
    int fd; /* -1: not on this rank's storage */
    char path[PATH_MAX + 128];
    ckpt_manifest m;
} ckpt_shard_view;

struct ckpt_step_view {
    uint64_t step;
    char step_dir[PATH_MAX];
    ckpt_commit_record record;
    ckpt_shard_view *shards; /* record.world entries */
    bool verified_full;
    ino_t commit_ino; /* identity of the COMMIT file the view was built from */
    uint64_t commit_mtime_ns;
};

/* Opens a step afresh (the caller frees it). */
int ckpt__view_open(elastic_ckpt *c, uint64_t step, int verify, ckpt_step_view **view);
/* The handle's cached view of the step, opened when needed (owned by the handle). */
int ckpt__view_get(elastic_ckpt *c, uint64_t step, int verify, ckpt_step_view **view);
/* Checks every chunk's checksum in every present shard. */
int ckpt__view_verify_data(elastic_ckpt *c, ckpt_step_view *v);

#endif /* ELASTIC_CKPT_VIEW_H */
