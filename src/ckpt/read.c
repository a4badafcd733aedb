/*
 * Reading: the latest valid step, blobs (chunks read, checked and
 * decompressed in parallel on the worker pool straight into the caller's
 * memory), and the listings of steps and blob names.
 */
#include "ckpt/ckpt.h"

#include "common/clock.h"
#include "ckpt/view.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct read_task {
    ckpt_task task; /* first: the pool hands back &task */
    const ckpt_shard_view *shard;
    const ckpt_chunk *chunk;
    uint8_t *dst; /* NULL: verify only */
    int rc;
    char why[200];
} read_task;

static void run_read(ckpt_task *task, ckpt_worker_ctx *ctx)
{
    read_task *r = (read_task *)task;
    const ckpt_chunk *ch = r->chunk;
    bool into_dst = r->dst != NULL && ch->codec == CKPT_CODEC_RAW;
    uint8_t *stored = into_dst ? r->dst : ckpt__ctx_scratch(ctx, ch->stored_len);
    if (stored == NULL) r->rc = elastic__fail(ELASTIC_ENOMEM, "chunk buffer");
    uint64_t hash = 0; /* read and hashed in one pass: the bytes cross memory once */
    if (r->rc == 0)
        r->rc = ckpt__pread_hashed(r->shard->fd, stored, ch->stored_len, ch->offset,
                                   r->shard->path, &hash);
    if (r->rc == 0 && hash != ch->hash)
        r->rc =
            elastic__fail(ELASTIC_ECORRUPT, "%s: chunk at offset %" PRIu64 ": checksum mismatch",
                          r->shard->path, ch->offset);
    if (r->rc == 0 && r->dst != NULL && !into_dst)
        r->rc = ckpt__ctx_decompress(ctx, stored, ch->stored_len, r->dst, ch->raw_len);
    if (r->rc) snprintf(r->why, sizeof r->why, "%s", elastic_last_error());
}

/* Runs one task per chunk (dst NULL: checksums only), a bounded window at a time. */
static int run_chunks(elastic_ckpt *c, const ckpt_shard_view *s, const ckpt_chunk *chunks, size_t n,
                      uint8_t *dst)
{
    enum { WINDOW = 32 };
    read_task tasks[WINDOW];
    size_t submitted = 0, finished = 0;
    uint64_t dst_off = 0;
    int rc = 0;
    while (finished < n) {
        while (submitted < n && submitted - finished < WINDOW && rc == 0) {
            read_task *t = &tasks[submitted % WINDOW];
            *t = (read_task){ .task.run = run_read,
                              .shard = s,
                              .chunk = &chunks[submitted],
                              .dst = dst ? dst + dst_off : NULL };
            dst_off += chunks[submitted].raw_len;
            submitted++;
            ckpt__pool_submit(c->pool, c->ctx, &t->task);
        }
        if (finished == submitted) break;
        read_task *t = &tasks[finished % WINDOW];
        ckpt__pool_wait(c->pool, &t->task);
        finished++;
        if (t->rc && rc == 0) rc = elastic__fail(t->rc, "%s", t->why);
    }
    return rc;
}

int ckpt__view_verify_data(elastic_ckpt *c, ckpt_step_view *v)
{
    for (uint32_t r = 0; r < v->record.world; r++) {
        const ckpt_shard_view *s = &v->shards[r];
        if (s->fd < 0) continue;
        int rc = run_chunks(c, s, s->m.chunks, s->m.chunk_count, NULL);
        if (rc) return rc;
    }
    return 0;
}

/* ---- finding a blob -------------------------------------------------------- */

/* A blob of one rank's shard. */
static int find_blob(const ckpt_step_view *v, int rank, const char *name,
                     const ckpt_shard_view **shard, const ckpt_blob **blob)
{
    if (rank < 0 || (uint32_t)rank >= v->record.world)
        return elastic__fail(ELASTIC_EINVAL, "rank %d: step %" PRIu64 " has %" PRIu32 " shards",
                             rank, v->step, v->record.world);
    *shard = &v->shards[rank];
    *blob = (*shard)->fd >= 0 ? ckpt__manifest_find(&(*shard)->m, name) : NULL;
    if (*blob == NULL)
        return elastic__fail(ELASTIC_ENOTFOUND,
                             "no blob \"%s\" in rank %d's shard of step %" PRIu64, name, rank,
                             v->step);
    return 0;
}

/* This rank's shard first, then a replicated copy in any shard. */
static int find_any(const ckpt_step_view *v, uint32_t own_rank, const char *name,
                    const ckpt_shard_view **shard, const ckpt_blob **blob)
{
    if (own_rank < v->record.world && find_blob(v, (int)own_rank, name, shard, blob) == 0) return 0;
    for (uint32_t r = 0; r < v->record.world; r++) {
        const ckpt_shard_view *s = &v->shards[r];
        const ckpt_blob *b = s->fd >= 0 ? ckpt__manifest_find(&s->m, name) : NULL;
        if (b != NULL && (b->flags & ELASTIC_CKPT_REPLICATED)) {
            *shard = s;
            *blob = b;
            return 0;
        }
    }
    return elastic__fail(ELASTIC_ENOTFOUND, "no blob \"%s\" for rank %" PRIu32 " in step %" PRIu64,
                         name, own_rank, v->step);
}

static int lookup(elastic_ckpt *c, uint64_t step, int rank, const char *name,
                  const ckpt_shard_view **shard, const ckpt_blob **blob)
{
    if (name == NULL) return elastic__fail(ELASTIC_EINVAL, "blob name is NULL");
    ckpt_step_view *v;
    int rc = ckpt__view_get(c, step, ELASTIC_CKPT_VERIFY_MANIFEST, &v);
    if (rc) return rc;
    if (rank == ELASTIC_CKPT_ANY_RANK)
        rc = find_any(v, c->opts.rank, name, shard, blob);
    else
        rc = find_blob(v, rank, name, shard, blob);
    if (rc == 0 && (*blob)->raw_len > c->opts.max_blob_bytes)
        return elastic__fail(ELASTIC_ELIMIT,
                             "blob \"%s\" has %" PRIu64 " bytes, more than max_blob_bytes", name,
                             (*blob)->raw_len);
    if (rc == 0 && (*blob)->raw_len > SIZE_MAX / 2)
        return elastic__fail(ELASTIC_ELIMIT, "blob too large for memory");
    return rc;
}

static int read_blob(elastic_ckpt *c, const ckpt_shard_view *s, const ckpt_blob *b, void *dst)
{
    int rc = run_chunks(c, s, &s->m.chunks[b->first_chunk], b->chunk_count, dst);
    if (rc == 0) __atomic_fetch_add(&c->read_bytes, b->raw_len, __ATOMIC_RELAXED);
    return rc;
}

static int read_alloc(elastic_ckpt *c, uint64_t step, int rank, const char *name, void **data,
                      size_t *len)
{
    elastic__clear_error();
    if (c == NULL || data == NULL || len == NULL)
        return elastic__fail(ELASTIC_EINVAL, "ckpt read: NULL argument");
    const ckpt_shard_view *s;
    const ckpt_blob *b;
    int rc = lookup(c, step, rank, name, &s, &b);
    if (rc) return rc;
    void *buf = ckpt__alloc_large((size_t)b->raw_len);
    if (buf == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "blob \"%s\" of %" PRIu64 " bytes", name, b->raw_len);
    rc = read_blob(c, s, b, buf);
    if (rc) {
        free(buf);
        return rc;
    }
    *data = buf;
    *len = (size_t)b->raw_len;
    return 0;
}

/* ---- the calls, before the lock ---------------------------------------------- */

static int latest_unlocked(elastic_ckpt *c, uint64_t *step)
{
    elastic__clear_error();
    if (c == NULL || step == NULL)
        return elastic__fail(ELASTIC_EINVAL, "ckpt latest: NULL argument");
    uint64_t *all;
    size_t n;
    int rc = ckpt__scan_steps(c->dir, &all, &n);
    if (rc) return rc;
    rc = ELASTIC_ENOTFOUND;
    for (size_t i = n; i-- > 0 && rc != 0;) {
        ckpt_step_view *v;
        rc = ckpt__view_get(c, all[i], c->opts.verify, &v);
        if (rc == 0)
            *step = all[i];
        else if (rc == ELASTIC_ENOTFOUND)
            ELASTIC_LOG_I("ckpt", "skipping step %" PRIu64 ": %s", all[i], elastic_last_error());
        else
            ELASTIC_LOG_W("ckpt", "skipping step %" PRIu64 ": %s (%s)", all[i],
                          elastic_strerror(rc), elastic_last_error());
    }
    free(all);
    if (rc) return elastic__fail(ELASTIC_ENOTFOUND, "no valid checkpoint in %s", c->dir);
    return 0;
}

static int read_unlocked(elastic_ckpt *c, uint64_t step, const char *name, void **data, size_t *len)
{
    return read_alloc(c, step, ELASTIC_CKPT_ANY_RANK, name, data, len);
}

static int read_shard_unlocked(elastic_ckpt *c, uint64_t step, int rank, const char *name,
                               void **data, size_t *len)
{
    return read_alloc(c, step, rank, name, data, len);
}

static int read_into_unlocked(elastic_ckpt *c, uint64_t step, const char *name, void *buf,
                              size_t cap, size_t *len)
{
    elastic__clear_error();
    if (c == NULL || len == NULL || (buf == NULL && cap > 0))
        return elastic__fail(ELASTIC_EINVAL, "ckpt read_into: NULL argument");
    const ckpt_shard_view *s;
    const ckpt_blob *b;
    int rc = lookup(c, step, ELASTIC_CKPT_ANY_RANK, name, &s, &b);
    if (rc) return rc;
    *len = (size_t)b->raw_len;
    if (b->raw_len > cap)
        return elastic__fail(ELASTIC_ELIMIT, "blob \"%s\" has %" PRIu64 " bytes, the buffer %zu",
                             name, b->raw_len, cap);
    return read_blob(c, s, b, buf);
}

static int blob_len_unlocked(elastic_ckpt *c, uint64_t step, const char *name, size_t *len)
{
    elastic__clear_error();
    if (c == NULL || len == NULL)
        return elastic__fail(ELASTIC_EINVAL, "ckpt blob_len: NULL argument");
    const ckpt_shard_view *s;
    const ckpt_blob *b;
    int rc = lookup(c, step, ELASTIC_CKPT_ANY_RANK, name, &s, &b);
    if (rc == 0) *len = (size_t)b->raw_len;
    return rc;
}

static int list_steps_unlocked(elastic_ckpt *c, uint64_t **steps, size_t *n)
{
    elastic__clear_error();
    if (c == NULL || steps == NULL || n == NULL)
        return elastic__fail(ELASTIC_EINVAL, "ckpt list_steps: NULL argument");
    int rc = ckpt__valid_steps(c, c->opts.verify, SIZE_MAX, steps, n);
    for (size_t i = 0; rc == 0 && i < *n / 2; i++) { /* newest first -> oldest first */
        uint64_t tmp = (*steps)[i];
        (*steps)[i] = (*steps)[*n - 1 - i];
        (*steps)[*n - 1 - i] = tmp;
    }
    return rc;
}

static int step_info_unlocked(elastic_ckpt *c, uint64_t step, uint32_t *world, uint64_t *generation)
{
    elastic__clear_error();
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "ckpt step_info: NULL argument");
    ckpt_step_view *v;
    int rc = ckpt__view_get(c, step, ELASTIC_CKPT_VERIFY_MANIFEST, &v);
    if (rc) return rc;
    if (world) *world = v->record.world;
    if (generation) *generation = v->record.generation;
    return 0;
}

/* Whether the name is visible to list_blobs for `rank`. */
static bool listed(const ckpt_step_view *v, int rank, uint32_t own, uint32_t shard_rank,
                   const ckpt_blob *b)
{
    if (rank != ELASTIC_CKPT_ANY_RANK) return true;
    if (shard_rank == own) return true;
    if (!(b->flags & ELASTIC_CKPT_REPLICATED)) return false;
    /* Listed once: skip it when own shard or an earlier shard already has it. */
    if (own < v->record.world && v->shards[own].fd >= 0 &&
        ckpt__manifest_find(&v->shards[own].m, b->name))
        return false;
    for (uint32_t r = 0; r < shard_rank; r++) {
        const ckpt_blob *e =
            v->shards[r].fd >= 0 ? ckpt__manifest_find(&v->shards[r].m, b->name) : NULL;
        if (e && (e->flags & ELASTIC_CKPT_REPLICATED)) return false;
    }
    return true;
}

static int list_blobs_unlocked(elastic_ckpt *c, uint64_t step, int rank, char ***names, size_t *n)
{
    elastic__clear_error();
    if (c == NULL || names == NULL || n == NULL)
        return elastic__fail(ELASTIC_EINVAL, "ckpt list_blobs: NULL argument");
    ckpt_step_view *v;
    int rc = ckpt__view_get(c, step, ELASTIC_CKPT_VERIFY_MANIFEST, &v);
    if (rc) return rc;
    if (rank != ELASTIC_CKPT_ANY_RANK && (rank < 0 || (uint32_t)rank >= v->record.world))
        return elastic__fail(ELASTIC_EINVAL, "rank %d: step %" PRIu64 " has %" PRIu32 " shards",
                             rank, step, v->record.world);
    uint32_t first = rank == ELASTIC_CKPT_ANY_RANK ? 0 : (uint32_t)rank;
    uint32_t last = rank == ELASTIC_CKPT_ANY_RANK ? v->record.world : (uint32_t)rank + 1;
    size_t count = 0, bytes = 0;
    for (int pass = 0; pass < 2; pass++) {
        char **out = pass ? *names : NULL;
        char *text = pass ? (char *)(out + count) : NULL;
        size_t k = 0;
        for (uint32_t r = first; r < last; r++) {
            const ckpt_shard_view *s = &v->shards[r];
            for (size_t i = 0; s->fd >= 0 && i < s->m.blob_count; i++) {
                const ckpt_blob *b = &s->m.blobs[i];
                if (!listed(v, rank, c->opts.rank, r, b)) continue;
                size_t len = strlen(b->name) + 1;
                if (pass == 0) {
                    count++;
                    bytes += len;
                    continue;
                }
                memcpy(text, b->name, len);
                out[k++] = text;
                text += len;
            }
        }
        if (pass == 0 && (*names = malloc(count * sizeof(char *) + bytes + 1)) == NULL)
            return elastic__fail(ELASTIC_ENOMEM, "blob list");
    }
    *n = count;
    return 0;
}

/* ---- public: one read at a time per handle --------------------------------- */

/* Reads share the handle's cached step view and its decompression contexts:
 * a read from another thread would free the view under this one. Calls on
 * one handle are serialised here, as include/elastic/ckpt.h promises. */

ELASTIC_EXTERN int elastic_ckpt_latest(elastic_ckpt *c, uint64_t *step)
{
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_ckpt_latest: NULL handle");
    uint64_t started_ns = elastic__now_ns();
    pthread_mutex_lock(&c->read_lock);
    int rc = latest_unlocked(c, step);
    pthread_mutex_unlock(&c->read_lock);
    ckpt__report_restore(elastic__now_ns() - started_ns);
    return rc;
}

ELASTIC_EXTERN int elastic_ckpt_read(elastic_ckpt *c, uint64_t step, const char *name, void **data,
                                     size_t *len)
{
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_ckpt_read: NULL handle");
    uint64_t started_ns = elastic__now_ns();
    pthread_mutex_lock(&c->read_lock);
    int rc = read_unlocked(c, step, name, data, len);
    pthread_mutex_unlock(&c->read_lock);
    ckpt__report_restore(elastic__now_ns() - started_ns);
    return rc;
}

ELASTIC_EXTERN int elastic_ckpt_read_shard(elastic_ckpt *c, uint64_t step, int rank,
                                           const char *name, void **data, size_t *len)
{
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_ckpt_read_shard: NULL handle");
    uint64_t started_ns = elastic__now_ns();
    pthread_mutex_lock(&c->read_lock);
    int rc = read_shard_unlocked(c, step, rank, name, data, len);
    pthread_mutex_unlock(&c->read_lock);
    ckpt__report_restore(elastic__now_ns() - started_ns);
    return rc;
}

ELASTIC_EXTERN int elastic_ckpt_read_into(elastic_ckpt *c, uint64_t step, const char *name,
                                          void *buf, size_t cap, size_t *len)
{
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_ckpt_read_into: NULL handle");
    uint64_t started_ns = elastic__now_ns();
    pthread_mutex_lock(&c->read_lock);
    int rc = read_into_unlocked(c, step, name, buf, cap, len);
    pthread_mutex_unlock(&c->read_lock);
    ckpt__report_restore(elastic__now_ns() - started_ns);
    return rc;
}

ELASTIC_EXTERN int elastic_ckpt_blob_len(elastic_ckpt *c, uint64_t step, const char *name,
                                         size_t *len)
{
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_ckpt_blob_len: NULL handle");
    pthread_mutex_lock(&c->read_lock);
    int rc = blob_len_unlocked(c, step, name, len);
    pthread_mutex_unlock(&c->read_lock);
    return rc;
}

ELASTIC_EXTERN int elastic_ckpt_list_steps(elastic_ckpt *c, uint64_t **steps, size_t *n)
{
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_ckpt_list_steps: NULL handle");
    pthread_mutex_lock(&c->read_lock);
    int rc = list_steps_unlocked(c, steps, n);
    pthread_mutex_unlock(&c->read_lock);
    return rc;
}

ELASTIC_EXTERN int elastic_ckpt_step_info(elastic_ckpt *c, uint64_t step, uint32_t *world,
                                          uint64_t *generation)
{
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_ckpt_step_info: NULL handle");
    pthread_mutex_lock(&c->read_lock);
    int rc = step_info_unlocked(c, step, world, generation);
    pthread_mutex_unlock(&c->read_lock);
    return rc;
}

ELASTIC_EXTERN int elastic_ckpt_list_blobs(elastic_ckpt *c, uint64_t step, int rank, char ***names,
                                           size_t *n)
{
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_ckpt_list_blobs: NULL handle");
    pthread_mutex_lock(&c->read_lock);
    int rc = list_blobs_unlocked(c, step, rank, names, n);
    pthread_mutex_unlock(&c->read_lock);
    return rc;
}
