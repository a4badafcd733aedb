/*
 * Asynchronous save: the caller's blobs are copied into a staging buffer
 * (in parallel on the worker pool) and a background thread writes and
 * commits them, so the training stall is the copy. One save in flight; the
 * next waits for it (back-pressure). The staging buffer is kept between
 * saves so only the first copy pays for page faults.
 */
#include "ckpt/ckpt.h"
#include "common/clock.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

struct ckpt_async {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;    /* a save was staged or finished, or stopping */
    bool busy, stop;
    bool held;                 /* tests: a staged save waits until released */
    uint64_t step;             /* of the staged / running save */
    int result;                /* of the last finished save */
    uint64_t result_step;
    char why[256];
    ckpt_worker_ctx *ctx;      /* the background thread's own zstd contexts */
    uint8_t *stage;            /* staged data and names */
    size_t stage_cap;
    elastic_ckpt_blob *blobs;
    size_t blob_cap, n_blobs;
};

typedef struct copy_task {
    ckpt_task task;            /* first: the pool hands back &task */
    const void *src;
    void *dst;
    size_t len;
} copy_task;

static void run_copy(ckpt_task *task, ckpt_worker_ctx *ctx)
{
    copy_task *t = (copy_task *)task;
    memcpy(t->dst, t->src, t->len);
}

/* memcpy split over the pool threads and the caller's thread. */
static void parallel_copy(elastic_ckpt *c, void *dst, const void *src, size_t len)
{
    enum { MAX_PARTS = 16, MIN_PART = 4u << 20 };
    size_t parts = c->pool ? (size_t)c->opts.threads + 1 : 1;
    if (parts > MAX_PARTS) parts = MAX_PARTS;
    if (len / parts < MIN_PART) parts = len / MIN_PART ? len / MIN_PART : 1;
    size_t part = (len / parts + 4095) & ~(size_t)4095;
    copy_task tasks[MAX_PARTS];
    size_t submitted = 0, off = 0;
    while (len - off > part) {
        tasks[submitted] = (copy_task){.task.run = run_copy, .src = (const uint8_t *)src + off,
                                       .dst = (uint8_t *)dst + off, .len = part};
        ckpt__pool_submit(c->pool, c->ctx, &tasks[submitted++].task);
        off += part;
    }
    memcpy((uint8_t *)dst + off, (const uint8_t *)src + off, len - off);
    for (size_t i = 0; i < submitted; i++) ckpt__pool_wait(c->pool, &tasks[i].task);
}

static void run_save(elastic_ckpt *c, ckpt_async *a)
{
    elastic_ckpt_txn *txn = NULL;
    int rc = ckpt__txn_begin(c, a->step, a->ctx, &txn);
    for (size_t i = 0; rc == 0 && i < a->n_blobs; i++) {
        pthread_mutex_lock(&a->lock);
        bool stop = a->stop;
        pthread_mutex_unlock(&a->lock);
        if (stop) rc = elastic__fail(ELASTIC_ECANCELED, "the checkpoint handle was closed during the save");
        else rc = elastic_ckpt_put_flags(txn, a->blobs[i].name, a->blobs[i].data, a->blobs[i].len, a->blobs[i].flags);
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
    if (rc) ELASTIC_LOG_W("ckpt", "asynchronous save of step %" PRIu64 " failed: %s (%s)", a->result_step,
                          elastic_strerror(rc), a->why);
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
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->changed);
    ckpt__ctx_free(a->ctx);
    free(a->stage);
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
        free(a->stage); /* not realloc: the old contents need no copying */
        a->stage = ckpt__alloc_large(bytes);
        a->stage_cap = a->stage ? bytes : 0;
        if (a->stage == NULL) return elastic__fail(ELASTIC_ENOMEM, "async staging buffer of %zu bytes", bytes);
    }
    return 0;
}

static int stage_blobs(elastic_ckpt *c, ckpt_async *a, const elastic_ckpt_blob *blobs, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t name_len = blobs[i].name ? strnlen(blobs[i].name, CKPT_MAX_NAME + 1) : 0;
        if (name_len == 0 || name_len > CKPT_MAX_NAME || (blobs[i].data == NULL && blobs[i].len > 0))
            return elastic__fail(ELASTIC_EINVAL, "ckpt save_async: blob %zu has a bad name or data", i);
        size_t need = ((blobs[i].len + 63) & ~(size_t)63) + name_len + 1 + 64;
        if (need < blobs[i].len || bytes + need < bytes) return elastic__fail(ELASTIC_ERANGE, "ckpt save_async: too large");
        bytes += need;
    }
    int rc = reserve_stage(a, n, bytes ? bytes : 1);
    if (rc) return rc;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t *data = a->stage + off;
        if (blobs[i].len) parallel_copy(c, data, blobs[i].data, blobs[i].len);
        off += (blobs[i].len + 63) & ~(size_t)63;
        char *name = (char *)a->stage + off;
        size_t name_len = strlen(blobs[i].name) + 1;
        memcpy(name, blobs[i].name, name_len);
        off += (name_len + 63) & ~(size_t)63;
        a->blobs[i] = (elastic_ckpt_blob){.name = name, .data = data, .len = blobs[i].len, .flags = blobs[i].flags};
    }
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

ELASTIC_EXTERN int elastic_ckpt_save_async(elastic_ckpt *c, uint64_t step, const elastic_ckpt_blob *blobs, size_t n,
                                           int timeout_ms)
{
    elastic__clear_error();
    if (c == NULL || (blobs == NULL && n > 0)) return elastic__fail(ELASTIC_EINVAL, "ckpt save_async: NULL argument");
    if (c->async == NULL) {
        int rc = async_start(c);
        if (rc) return rc;
    }
    ckpt_async *a = c->async;
    pthread_mutex_lock(&a->lock);
    bool idle = wait_idle(a, elastic__deadline_ms(timeout_ms));
    pthread_mutex_unlock(&a->lock);
    if (!idle) return elastic__fail(ELASTIC_EBUSY, "the previous asynchronous save (step %" PRIu64 ") is still running", a->step);
    if (!ckpt__txn_try_claim(c)) return elastic__fail(ELASTIC_EBUSY, "a checkpoint transaction is open");
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
    return 0;
}

ELASTIC_EXTERN int elastic_ckpt_async_wait(elastic_ckpt *c, int timeout_ms, uint64_t *step)
{
    elastic__clear_error();
    if (c == NULL) return elastic__fail(ELASTIC_EINVAL, "ckpt async_wait: NULL");
    ckpt_async *a = c->async;
    if (a == NULL) return 0;
    pthread_mutex_lock(&a->lock);
    bool idle = wait_idle(a, elastic__deadline_ms(timeout_ms));
    int rc = idle ? a->result : elastic__fail(ELASTIC_ETIMEDOUT, "step %" PRIu64 " is still being saved", a->step);
    if (idle && step) *step = a->result_step;
    if (idle && rc) elastic__fail(rc, "%s", a->why);
    pthread_mutex_unlock(&a->lock);
    return rc;
}
