/*
 * What the checkpointing trainers of test/helpers/ (ckpt_step_worker,
 * slurm_trainer) share: their checkpoint, their report lines, their resume step and one step
 * of "training". Header
 * only: each helper is one program of its own .c file.
 */
#ifndef ELASTIC_TEST_HELPERS_TRAINER_COMMON_H
#define ELASTIC_TEST_HELPERS_TRAINER_COMMON_H

#include "elastic.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The shared directory's checkpoint for this rank, commits through the
 * job's store, no compression, fsync or threads; NULL (said on stderr) when
 * it cannot be opened. */
static inline elastic_ckpt *
trainer_open_checkpoint(const char *dir, const elastic_worker_info *info, elastic_store *store)
{
    elastic_ckpt_opts opts;
    elastic_ckpt_opts_init(&opts, sizeof opts);
    opts.rank = (uint32_t)info->rank;
    opts.world = (uint32_t)info->world_size;
    opts.generation = info->generation;
    opts.store = store;
    opts.shared_storage = 1;
    opts.compression = ELASTIC_CKPT_NONE;
    opts.fsync = ELASTIC_CKPT_FSYNC_NONE;
    opts.threads = 0;
    opts.commit_timeout_ms = 10000;
    elastic_ckpt *ckpt = NULL;
    if (elastic_ckpt_open(dir, &opts, &ckpt) != 0) {
        fprintf(stderr, "ckpt open: %s\n", elastic_last_error());
        return NULL;
    }
    return ckpt;
}

/* Appends one line to the report file. */
static inline void trainer_report(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t ignored = write(fd, line, strlen(line)); /* one write: lines of workers do not mix */
    (void)ignored;
    close(fd);
}

/* The step the newest checkpoint saved (its "step" blob), 0 without one.
 * 0, or 5 (the trainers' exit code for it) when that checkpoint cannot be read. */
static inline int trainer_resume_step(elastic_ckpt *ckpt, uint64_t *step)
{
    uint64_t latest = 0;
    *step = 0;
    if (elastic_ckpt_latest(ckpt, &latest) != 0) return 0;
    void *data = NULL;
    size_t len = 0;
    if (elastic_ckpt_read(ckpt, latest, "step", &data, &len) != 0 || len != sizeof *step) {
        fprintf(stderr, "ckpt read of step %" PRIu64 ": %s\n", latest, elastic_last_error());
        return 5;
    }
    memcpy(step, data, sizeof *step);
    elastic_free(data);
    return 0;
}

/* One step: step_ms of "training", then *step + 1 saved (the "step" blob,
 * replicated) and *step advanced. 0, or -1 with the failed save said on
 * stderr (the caller decides whether that ends it). */
static inline int trainer_step(elastic_ckpt *ckpt, int rank, int step_ms, uint64_t *step)
{
    struct timespec step_time = { step_ms / 1000, (long)(step_ms % 1000) * 1000000L };
    nanosleep(&step_time, NULL); /* the "training" of one step */
    ++*step;
    elastic_ckpt_blob blob = {
        .name = "step", .data = step, .len = sizeof *step, .flags = ELASTIC_CKPT_REPLICATED
    };
    if (elastic_ckpt_save(ckpt, *step, &blob, 1) == 0) return 0;
    fprintf(stderr, "rank %d: save of step %" PRIu64 ": %s\n", rank, *step, elastic_last_error());
    return -1;
}

#endif /* ELASTIC_TEST_HELPERS_TRAINER_COMMON_H */
