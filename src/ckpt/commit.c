/*
 * The global commit: a step becomes the latest only when every rank of the
 * generation committed its shard. With shared storage the rank that finds
 * every shard in place (the last to rename its own) writes the step's commit
 * record; with a store the record goes through the store (commit_store.c).
 */
#include "ckpt/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int ckpt__shard_digest(const char *path, ckpt_shard_digest *digest, ckpt_trailer *trailer,
                       uint64_t *incarnation)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ckpt__fail_errno(errno, "open", path);
    struct stat st;
    uint8_t raw[CKPT_TRAILER_BYTES];
    int rc = fstat(fd, &st) == 0 ? 0 : ckpt__fail_errno(errno, "stat", path);
    if (rc == 0 && (uint64_t)st.st_size < CKPT_HEADER_BYTES + CKPT_TRAILER_BYTES)
        rc = elastic__fail(ELASTIC_ECORRUPT, "%s: truncated (%lld bytes)", path,
                           (long long)st.st_size);
    if (rc == 0) rc = ckpt__pread_all(fd, raw, sizeof raw, (uint64_t)st.st_size - sizeof raw, path);
    /* The header from the same file (one open: a rename between two
     * would pair one file's digest with another's incarnation). */
    ckpt_header h = { 0 };
    uint8_t *header = incarnation != NULL && rc == 0 ? malloc(CKPT_HEADER_BYTES) : NULL;
    if (incarnation != NULL && rc == 0 && header == NULL)
        rc = elastic__fail(ELASTIC_ENOMEM, "reading %s", path);
    if (header != NULL && (rc = ckpt__pread_all(fd, header, CKPT_HEADER_BYTES, 0, path)) == 0 &&
        (rc = ckpt__header_decode(header, CKPT_HEADER_BYTES, &h)) != 0)
        rc = ckpt__fail_in(rc, path);
    free(header);
    close(fd);
    ckpt_trailer t;
    if (rc == 0 && (rc = ckpt__trailer_decode(raw, sizeof raw, &t)) != 0)
        rc = ckpt__fail_in(rc, path);
    if (rc) return rc;
    if (incarnation != NULL) *incarnation = h.incarnation;
    digest->file_size = (uint64_t)st.st_size;
    digest->manifest_hash = t.manifest_hash;
    if (trailer) *trailer = t;
    return 0;
}

int ckpt__write_commit_record(elastic_ckpt *c, const ckpt_commit_record *r)
{
    bytes__buf buf = { 0 };
    int rc = ckpt__commit_encode(r, &buf);
    char step_dir[PATH_MAX], tag[32];
    ckpt__step_dir(c->dir, r->step, step_dir, sizeof step_dir);
    snprintf(tag, sizeof tag, "r%" PRIu32, c->opts.rank);
    if (rc == 0)
        rc = ckpt__write_file_atomic(step_dir, CKPT_COMMIT_NAME, tag, buf.data, buf.len,
                                     c->opts.fsync == ELASTIC_CKPT_FSYNC_FULL, c->opts.file_mode);
    free(buf.data);
    return rc;
}

/* A fenced generation can never commit this step (each of its ranks is
 * refused the same way), so the shards it wrote for it are removed: a
 * crash-looping old generation, or a job restarted by an operator, must not
 * fill the disk with them. Only its own incarnation's: a later incarnation's
 * generation of the same number (a job started again counts from 1) may own
 * a shard of that name here. */
void ckpt__drop_generation_shards(const elastic_ckpt *c, const char *step_dir)
{
    char path[PATH_MAX + 128], shard[96];
    for (uint32_t rank = 0; rank < c->opts.world; rank++) {
        ckpt__shard_name(rank, c->opts.generation, shard, sizeof shard);
        snprintf(path, sizeof path, "%s/%s", step_dir, shard);
        if (ckpt__shard_is_own_incarnation(c, path)) unlink(path);
    }
}

/* Shared storage: when every rank's shard of this generation is in place,
 * write the record. Not finding them all is not an error: a later rank will. */
static int shared_dir_commit(elastic_ckpt *c, uint64_t step, const ckpt_shard_digest *own)
{
    const elastic_ckpt_opts *o = &c->opts;
    ckpt_commit_record r = { .step = step, .generation = o->generation, .world = o->world };
    r.shards = calloc(o->world, sizeof *r.shards);
    if (r.shards == NULL) return elastic__fail(ELASTIC_ENOMEM, "commit record");
    char step_dir[PATH_MAX], path[PATH_MAX + 128], shard[96];
    ckpt__step_dir(c->dir, step, step_dir, sizeof step_dir);
    bool all_there = true;
    for (uint32_t rank = 0; rank < o->world && all_there; rank++) {
        if (rank == o->rank) {
            r.shards[rank] = *own;
            continue;
        }
        ckpt__shard_name(rank, o->generation, shard, sizeof shard);
        snprintf(path, sizeof path, "%s/%s", step_dir, shard);
        uint64_t incarnation = 0;
        int rc = ckpt__shard_digest(path, &r.shards[rank], NULL,
                                    o->generation != 0 ? &incarnation : NULL);
        if (rc == ELASTIC_ECORRUPT)
            ELASTIC_LOG_W("ckpt", "step %" PRIu64 ": not committing: %s", step,
                          elastic_last_error());
        /* A shard of this name from an earlier incarnation (the job before
         * an operator restart left the step uncommitted) is not this
         * generation's: its rank here replaces it and commits then. */
        all_there = rc == 0 && (o->generation == 0 || incarnation == o->incarnation);
    }
    int rc = all_there ? ckpt__fence_check(c, step) : 0;
    if (all_there && rc == ELASTIC_ESTATE) ckpt__drop_generation_shards(c, step_dir);
    if (all_there && rc == 0) {
        rc = ckpt__write_commit_record(c, &r);
        /* A newer generation that started meanwhile wins: take the record back. */
        if (rc == 0 && (rc = ckpt__fence_check(c, step)) != 0) {
            snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
            unlink(path);
            if (rc == ELASTIC_ESTATE) ckpt__drop_generation_shards(c, step_dir);
        }
        if (rc == 0)
            ELASTIC_LOG_D("ckpt", "step %" PRIu64 " committed by rank %" PRIu32, step, o->rank);
    }
    ckpt__commit_free(&r);
    if (rc == 0 && all_there) ckpt__apply_retention(c);
    return rc;
}

int ckpt__global_commit(elastic_ckpt *c, uint64_t step, const ckpt_shard_digest *digest,
                        const ckpt_replica_record *replicas)
{
    if (c->opts.store != NULL) return ckpt__store_commit(c, step, digest, replicas);
    return shared_dir_commit(c, step, digest);
}
