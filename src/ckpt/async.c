/*
 * Asynchronous save: the caller's blobs are copied into a staging buffer
 * (in parallel on the worker pool) and a background thread writes and
 * commits them, so the training stall is the copy. One save in flight; the
 * next waits for it (back-pressure). The staging buffer is kept between
 * saves so only the first copy pays for page faults; that first copy has
 * the kernel populate each piece's pages in one call before copying it
 * (cheaper than a fault per 4 KiB page), on several threads at once.
 */
#include "ckpt/ckpt.h"
#include "common/clock.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL and the copy faults */
#endif

/* The staging copy, cut into pieces that the caller's thread and the pool
 * threads take in turn: when the pool threads are busy or not scheduled
 * (a loaded machine) the caller simply copies more itself, so the stall
 * stays near one memcpy and never waits for a thread that has not started. */
#define COPY_PIECE   (4u << 20)
#define COPY_HELPERS 16

typedef struct copy_piece {
    void *dst;
    const void *src;
    size_t len;
    bool populate; /* dst is fresh memory: populate it first */
} copy_piece;

typedef struct copy_job copy_job;

typedef struct copy_helper {
    ckpt_task task; /* first: the pool hands back &task */
    copy_job *job;
} copy_helper;

struct copy_job {
    copy_piece *pieces;
    size_t n, cap;
    atomic_size_t next;     /* the next piece to take */
    atomic_size_t finished; /* pieces copied */
    copy_helper helpers[COPY_HELPERS];
    size_t helpers_queued; /* submitted to the pool, not yet waited for */
};

struct ckpt_async {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a save was staged or finished, or stopping */
    bool busy, stop;
    bool held;     /* tests: a staged save waits until released */
    uint64_t step; /* of the staged / running save */
    int result;    /* of the last finished save */
    uint64_t result_step;
    char why[256];
    ckpt_worker_ctx *ctx; /* the background thread's own zstd contexts */
    uint8_t *stage;       /* staged data and names (mmap) */
    size_t stage_cap;
    bool stage_fresh;    /* not yet written: the next copy populates it */
    unsigned stage_maps; /* times the staging buffer was mapped (tests: reuse) */
    elastic_ckpt_blob *blobs;
    size_t blob_cap, n_blobs;
    copy_job copy;
};

/* Backs [p, p+len) with writable pages in one call instead of a fault per
 * page (measured here: 0.26-0.33 s for 512 MiB against 0.44-0.66 s of
 * faults). The range is widened to whole pages; a neighbour's page being
 * populated twice is harmless. A kernel without it leaves the faults. */
static void populate(void *p, size_t len)
{
    long size = sysconf(_SC_PAGESIZE);
    uintptr_t page = size > 0 ? (uintptr_t)size : 4096;
    uintptr_t start = (uintptr_t)p & ~(page - 1),
              end = ((uintptr_t)p + len + page - 1) & ~(page - 1);
    (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
}

static void copy_pieces(copy_job *job)
{
    for (size_t i; (i = atomic_fetch_add(&job->next, 1)) < job->n;) {
        if (job->pieces[i].populate) populate(job->pieces[i].dst, job->pieces[i].len);
        memcpy(job->pieces[i].dst, job->pieces[i].src, job->pieces[i].len);
        atomic_fetch_add(&job->finished, 1);
    }
}

static void run_copy_helper(ckpt_task *task, ckpt_worker_ctx *ctx)
{
    (void)ctx;
    copy_pieces(((copy_helper *)task)->job);
}

static int add_piece(copy_job *job, void *dst, const void *src, size_t len, bool fresh)
{
    if (job->n == job->cap) {
        size_t cap = job->cap ? job->cap * 2 : 256;
        copy_piece *grown = realloc(job->pieces, cap * sizeof *grown);
        if (grown == NULL) return elastic__fail(ELASTIC_ENOMEM, "async copy plan");
        job->pieces = grown;
        job->cap = cap;
    }
    job->pieces[job->n++] = (copy_piece){ dst, src, len, fresh };
    return 0;
}

/* Runs the planned pieces: helpers on the pool, the caller alongside. */
static void run_copy(elastic_ckpt *c, copy_job *job)
{
    /* Helpers of the previous copy found nothing left long ago; collect them
     * before their tasks are reused. */
    for (size_t i = 0; i < job->helpers_queued; i++)
        ckpt__pool_wait(c->pool, &job->helpers[i].task);
    job->helpers_queued = 0;
    atomic_store(&job->next, 0);
    atomic_store(&job->finished, 0);
    size_t helpers = c->pool ? (size_t)c->opts.threads : 0;
    if (helpers > COPY_HELPERS) helpers = COPY_HELPERS;
    if (helpers > job->n / 2) helpers = job->n / 2;
    for (size_t i = 0; i < helpers; i++) {
        job->helpers[i] = (copy_helper){ .task.run = run_copy_helper, .job = job };
        ckpt__pool_submit(c->pool, c->ctx, &job->helpers[i].task);
    }
    job->helpers_queued = helpers;
    copy_pieces(job);
    /* Only pieces a helper is copying right now remain: at most one each. */
    while (atomic_load(&job->finished) < job->n) sched_yield();
}

static void run_save(elastic_ckpt *c, ckpt_async *a)
{
    elastic_ckpt_txn *txn = NULL;
    int rc = ckpt__txn_begin(c, a->step, a->ctx, &txn);
    for (size_t i = 0; rc == 0 && i < a->n_blobs; i++) {
        pthread_mutex_lock(&a->lock);
        bool stop = a->stop;
        pthread_mutex_unlock(&a->lock);
        if (stop)
            rc = elastic__fail(ELASTIC_ECANCELED,
                               "the checkpoint handle was closed during the save");
        else
            rc = elastic_ckpt_put_flags(txn, a->blobs[i].name, a->blobs[i].data, a->blobs[i].len,
                                        a->blobs[i].flags);
    }
    if (rc == 0) {
        rc = elastic_ckpt_commit(txn);
    } else if (txn != NULL) {
        elastic_ckpt_abort(txn);
    }
    pthread_mutex_lock(&a->lock);
    a->result = rc;
    a->result_step = a->step;
    snprintf(a->why, sizeof a->why, "%s", rc ? elastic_last_error() : "");
    a->busy = false;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
    if (rc)
        ELASTIC_LOG_W("ckpt", "asynchronous save of step %" PRIu64 " failed: %s (%s)",
                      a->result_step, elastic_strerror(rc), a->why);
}

static void *async_main(void *arg)
{
    elastic_ckpt *c = arg;
    ckpt_async *a = c->async;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while ((!a->busy || a->held) && !a->stop) {
            /* Idle until a save is staged; the deadline only bounds each sleep. */
            struct timespec at = elastic__timespec_at(elastic__deadline_ms(60000));
            pthread_cond_timedwait(&a->changed, &a->lock, &at);
        }
        if (a->stop) break; /* a staged save is dropped: close() cancels it */
        pthread_mutex_unlock(&a->lock);
        run_save(c, a);
        pthread_mutex_lock(&a->lock);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

static int async_start(elastic_ckpt *c)
{
    ckpt_async *a = calloc(1, sizeof *a);
    if (a != NULL && (a->ctx = ckpt__ctx_new()) == NULL) {
        free(a);
        a = NULL;
    }
    if (a == NULL) return elastic__fail(ELASTIC_ENOMEM, "async checkpoint state");
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->changed, &attr);
    pthread_condattr_destroy(&attr);
    c->async = a;
    if (pthread_create(&a->thread, NULL, async_main, c) != 0) {
        c->async = NULL;
        pthread_mutex_destroy(&a->lock);
        pthread_cond_destroy(&a->changed);
        ckpt__ctx_free(a->ctx);
        free(a);
        return elastic__fail(ELASTIC_ESYS, "starting the checkpoint thread: %s", strerror(errno));
    }
    return 0;
}

void ckpt__async_stop(elastic_ckpt *c)
{
    ckpt_async *a = c->async;
    if (a == NULL) return;
    pthread_mutex_lock(&a->lock);
    a->stop = true;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->thread, NULL);
    for (size_t i = 0; i < a->copy.helpers_queued; i++)
        ckpt__pool_wait(c->pool, &a->copy.helpers[i].task);
    free(a->copy.pieces);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->changed);
    ckpt__ctx_free(a->ctx);
    if (a->stage) munmap(a->stage, a->stage_cap);
    free(a->blobs);
    free(a);
    c->async = NULL;
}

/* Waits (lock held) until no save is in flight or the deadline passes. */
static bool wait_idle(ckpt_async *a, uint64_t deadline_ms)
{
    while (a->busy && elastic__ms_left(deadline_ms) > 0) {
        struct timespec at = elastic__timespec_at(deadline_ms);
        pthread_cond_timedwait(&a->changed, &a->lock, &at);
    }
    return !a->busy;
}

/* Room for the blob table and for names + data in the staging buffer. */
static int reserve_stage(ckpt_async *a, size_t n, size_t bytes)
{
    if (n > a->blob_cap) {
        free(a->blobs);
        a->blobs = malloc(n * sizeof *a->blobs);
        a->blob_cap = a->blobs ? n : 0;
        if (a->blobs == NULL) return elastic__fail(ELASTIC_ENOMEM, "async blob table");
    }
    if (bytes > a->stage_cap) {
        /* Not realloc: the old contents need no copying. mmap, not malloc,
         * so the pages are known fresh (populated by the copy) and go back
         * to the kernel at close. No MADV_HUGEPAGE: a huge page fault means
         * zeroing 2 MiB and maybe direct compaction inside the caller's
         * stall (measured 1.2-1.7 s for 512 MiB here, against 0.3 s for
         * populated 4 KiB pages); the kernel's THP default applies. */
        if (a->stage) munmap(a->stage, a->stage_cap);
        a->stage_cap = 0;
        void *stage = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (stage == MAP_FAILED) {
            a->stage = NULL;
            return elastic__fail(ELASTIC_ENOMEM, "async staging buffer of %zu bytes: %s", bytes,
                                 strerror(errno));
        }
        a->stage = stage;
        a->stage_cap = bytes;
        a->stage_fresh = true;
        a->stage_maps++;
    }
    return 0;
}

static int stage_blobs(elastic_ckpt *c, ckpt_async *a, const elastic_ckpt_blob *blobs, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t name_len = blobs[i].name ? strnlen(blobs[i].name, CKPT_MAX_NAME + 1) : 0;
        if (name_len == 0 || name_len > CKPT_MAX_NAME ||
            (blobs[i].data == NULL && blobs[i].len > 0))
            return elastic__fail(ELASTIC_EINVAL, "ckpt save_async: blob %zu has a bad name or data",
                                 i);
        size_t need = ((blobs[i].len + 63) & ~(size_t)63) + name_len + 1 + 64;
        if (need < blobs[i].len || bytes + need < bytes)
            return elastic__fail(ELASTIC_ERANGE, "ckpt save_async: too large");
        bytes += need;
    }
    int rc = reserve_stage(a, n, bytes ? bytes : 1);
    if (rc) return rc;
    size_t off = 0;
    a->copy.n = 0;
    bool fresh = a->stage_fresh;
    a->stage_fresh = false;
    for (size_t i = 0; i < n; i++) {
        uint8_t *data = a->stage + off;
        for (size_t done = 0; done < blobs[i].len && rc == 0; done += COPY_PIECE) {
            size_t len = blobs[i].len - done < COPY_PIECE ? blobs[i].len - done : COPY_PIECE;
            rc =
                add_piece(&a->copy, data + done, (const uint8_t *)blobs[i].data + done, len, fresh);
        }
        if (rc) return rc;
        off += (blobs[i].len + 63) & ~(size_t)63;
        char *name = (char *)a->stage + off;
        size_t name_len = strlen(blobs[i].name) + 1;
        memcpy(name, blobs[i].name, name_len);
        off += (name_len + 63) & ~(size_t)63;
        a->blobs[i] = (elastic_ckpt_blob){
            .name = name, .data = data, .len = blobs[i].len, .flags = blobs[i].flags
        };
    }
    run_copy(c, &a->copy);
    a->n_blobs = n;
    return 0;
}

int ckpt__async_hold(elastic_ckpt *c, bool hold)
{
    if (c->async == NULL) {
        int rc = async_start(c);
        if (rc) return rc;
    }
    pthread_mutex_lock(&c->async->lock);
    c->async->held = hold;
    pthread_cond_broadcast(&c->async->changed);
    pthread_mutex_unlock(&c->async->lock);
    return 0;
}

ELASTIC_EXTERN int elastic_ckpt_save_async(elastic_ckpt *c, uint64_t step,
                                           const elastic_ckpt_blob *blobs, size_t n, int timeout_ms)
{
    elastic__clear_error();
    if (c == NULL || (blobs == NULL && n > 0))
        return elastic__fail(ELASTIC_EINVAL, "ckpt save_async: NULL argument");
    if (step == UINT64_MAX)
        return elastic__fail(ELASTIC_EINVAL, "ckpt: step UINT64_MAX can never be superseded");
    if (c->async == NULL) {
        int rc = async_start(c);
        if (rc) return rc;
    }
    ckpt_async *a = c->async;
    uint64_t started_ns = elastic__now_ns();
    pthread_mutex_lock(&a->lock);
    bool idle = wait_idle(a, elastic__deadline_ms(timeout_ms));
    pthread_mutex_unlock(&a->lock);
    if (!idle)
        return elastic__fail(ELASTIC_EBUSY,
                             "the previous asynchronous save (step %" PRIu64 ") is still running",
                             a->step);
    if (!ckpt__txn_try_claim(c))
        return elastic__fail(ELASTIC_EBUSY, "a checkpoint transaction is open");
    /* Idle and claimed: the background thread does not touch the stage now. */
    int rc = stage_blobs(c, a, blobs, n);
    if (rc) {
        ckpt__txn_release(c);
        return rc;
    }
    pthread_mutex_lock(&a->lock);
    a->step = step;
    a->busy = true;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
    ckpt__report_stall(elastic__now_ns() - started_ns); /* waiting and staging held the caller */
    return 0;
}

ELASTIC_EXTERN int elastic_ckpt_async_reserve(elastic_ckpt *c, size_t bytes)
{
    elastic__clear_error();
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "ckpt async_reserve: NULL");
    /* Names and alignment take a little more than the data: a slack of
     * 1 MiB plus 1/256 covers thousands of blobs. */
    size_t want = bytes + bytes / 256 + (1u << 20);
    if (want < bytes)
        return elastic__fail(ELASTIC_ERANGE, "ckpt async_reserve: %zu bytes is too large", bytes);
    if (c->async == NULL) {
        int rc = async_start(c);
        if (rc) return rc;
    }
    ckpt_async *a = c->async;
    pthread_mutex_lock(&a->lock);
    bool idle = wait_idle(a, elastic__deadline_ms(-1));
    pthread_mutex_unlock(&a->lock);
    if (!idle || !ckpt__txn_try_claim(c))
        return elastic__fail(ELASTIC_EBUSY, "a checkpoint transaction is open");
    int rc = reserve_stage(a, 1, want);
    /* Back every page now (writing, so the kernel backs it), so that the
     * first save_async pays only for its copy. */
    if (rc == 0 && a->stage_fresh) {
        if (madvise(a->stage, a->stage_cap, MADV_POPULATE_WRITE) != 0)
            for (size_t at = 0; at < a->stage_cap; at += 4096)
                ((volatile uint8_t *)a->stage)[at] = 0;
        a->stage_fresh = false;
    }
    ckpt__txn_release(c);
    return rc;
}

ELASTIC_EXTERN int elastic_ckpt_async_wait(elastic_ckpt *c, int timeout_ms, uint64_t *step)
{
    elastic__clear_error();
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "ckpt async_wait: NULL");
    ckpt_async *a = c->async;
    if (a == NULL) return 0;
    pthread_mutex_lock(&a->lock);
    bool idle = wait_idle(a, elastic__deadline_ms(timeout_ms));
    int rc =
        idle ? a->result
             : elastic__fail(ELASTIC_ETIMEDOUT, "step %" PRIu64 " is still being saved", a->step);
    if (idle && step) *step = a->result_step;
    if (idle && rc) elastic__fail(rc, "%s", a->why);
    pthread_mutex_unlock(&a->lock);
    return rc;
}

unsigned ckpt__async_stage_maps(const elastic_ckpt *c)
{
    return c->async ? c->async->stage_maps : 0;
}
