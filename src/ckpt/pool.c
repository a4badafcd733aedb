/*
 * A small fixed pool of worker threads for chunk compression, verification
 * and parallel reads, each with its own zstd contexts and scratch buffer.
 * Tasks are finite CPU/disk work; the FIFO is bounded by the callers, which
 * never have more than a window of tasks outstanding.
 */
#include "ckpt/ckpt.h"
#include "common/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <zstd.h>

struct ckpt_worker_ctx {
    ZSTD_CCtx *cctx;
    int cctx_level;
    ZSTD_CCtx *probe; /* at PROBE_LEVEL, for quick looks */
    ZSTD_DCtx *dctx;
    void *scratch;
    size_t scratch_len;
};

struct ckpt_pool {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a task was queued, or stopping */
    pthread_cond_t done; /* a task finished */
    ckpt_task *head, *tail;
    bool stopping;
    int threads;
    pthread_t *tids;
};

ckpt_worker_ctx *ckpt__ctx_new(void)
{
    return calloc(1, sizeof(ckpt_worker_ctx));
}

void ckpt__ctx_free(ckpt_worker_ctx *ctx)
{
    if (ctx == NULL) return;
    ZSTD_freeCCtx(ctx->cctx);
    ZSTD_freeCCtx(ctx->probe);
    ZSTD_freeDCtx(ctx->dctx);
    free(ctx->scratch);
    free(ctx);
}

void *ckpt__ctx_scratch(ckpt_worker_ctx *ctx, size_t len)
{
    if (ctx->scratch_len >= len) return ctx->scratch;
    free(ctx->scratch);
    ctx->scratch = malloc(len);
    ctx->scratch_len = ctx->scratch ? len : 0;
    return ctx->scratch;
}

/* Whether compressing a chunk pays is judged on a prefix (the sample), so
 * data that does not pay costs little: float weights shrink by ~10% through
 * their exponent bytes, which saves less disk time than compressing costs
 * (on save and on every load). Data that shrinks to a tenth (zeros, masks,
 * counters) always pays; data that shrinks by a fifth pays only when this
 * thread compresses it faster than its share of the disk's rate. */
#define SAMPLE_BYTES      (64u << 10)
#define ALWAYS_PAYS_RATIO 0.10
#define MAY_PAY_RATIO     0.80

/* The quick probe: zstd's fastest mode finds runs and repeats but does no
 * entropy coding, so it passes over random or float bytes at ~3 GB/s; a
 * 16 KiB look costs a few microseconds, against ~160 us for the sample. */
#define PROBE_BYTES (16u << 10)
#define PROBE_LEVEL (-7)

/* Whether the quick probe shrinks the chunk's prefix to a tenth. */
static bool probe_finds_repeats(ckpt_worker_ctx *ctx, const void *src, size_t len, void *dst,
                                size_t dst_cap)
{
    if (ctx->probe == NULL) {
        if ((ctx->probe = ZSTD_createCCtx()) == NULL) return false;
        ZSTD_CCtx_setParameter(ctx->probe, ZSTD_c_compressionLevel, PROBE_LEVEL);
    }
    size_t n = len < PROBE_BYTES ? len : PROBE_BYTES;
    size_t packed = ZSTD_compress2(ctx->probe, dst, dst_cap, src, n);
    return !ZSTD_isError(packed) && (double)packed <= ALWAYS_PAYS_RATIO * (double)n;
}

int ckpt__ctx_compress(ckpt_worker_ctx *ctx, int level, const void *src, size_t len, void *dst,
                       size_t dst_cap, uint64_t min_bps, bool quick, size_t *out_len)
{
    if (quick && !probe_finds_repeats(ctx, src, len, dst, dst_cap)) return ELASTIC_ELIMIT;
    if (ctx->cctx == NULL && (ctx->cctx = ZSTD_createCCtx()) == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "zstd context");
    if (ctx->cctx_level != level) {
        ZSTD_CCtx_reset(ctx->cctx, ZSTD_reset_session_and_parameters);
        ZSTD_CCtx_setParameter(ctx->cctx, ZSTD_c_compressionLevel, level);
        ctx->cctx_level = level;
    }
    if (len > 2 * SAMPLE_BYTES) {
        uint64_t start = elastic__now_ns();
        size_t sample = ZSTD_compress2(ctx->cctx, dst, dst_cap, src, SAMPLE_BYTES);
        uint64_t took_ns = elastic__now_ns() - start + 1;
        if (ZSTD_isError(sample)) return ELASTIC_ELIMIT;
        double ratio = (double)sample / SAMPLE_BYTES,
               bps = (double)SAMPLE_BYTES * 1e9 / (double)took_ns;
        bool pays = ratio <= ALWAYS_PAYS_RATIO ||
                    (ratio <= MAY_PAY_RATIO && (min_bps == 0 || bps >= (double)min_bps));
        if (!pays) return ELASTIC_ELIMIT;
    }
    size_t n = ZSTD_compress2(ctx->cctx, dst, dst_cap, src, len);
    if (ZSTD_isError(n) || n > len - len / 8) return ELASTIC_ELIMIT;
    *out_len = n;
    return 0;
}

int ckpt__ctx_decompress(ckpt_worker_ctx *ctx, const void *src, size_t len, void *dst,
                         size_t raw_len)
{
    if (ctx->dctx == NULL && (ctx->dctx = ZSTD_createDCtx()) == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "zstd context");
    size_t n = ZSTD_decompressDCtx(ctx->dctx, dst, raw_len, src, len);
    if (ZSTD_isError(n)) return elastic__fail(ELASTIC_ECORRUPT, "zstd: %s", ZSTD_getErrorName(n));
    if (n != raw_len)
        return elastic__fail(ELASTIC_ECORRUPT, "zstd: %zu bytes instead of %zu", n, raw_len);
    return 0;
}

static void *worker_main(void *arg)
{
    ckpt_pool *pool = arg;
    ckpt_worker_ctx *ctx = ckpt__ctx_new();
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (pool->head == NULL && !pool->stopping) {
            /* Idle until work arrives; the deadline only bounds each sleep. */
            struct timespec at = elastic__timespec_at(elastic__deadline_ms(60000));
            pthread_cond_timedwait(&pool->work, &pool->lock, &at);
        }
        if (pool->head == NULL) break;
        ckpt_task *task = pool->head;
        pool->head = task->next;
        if (pool->head == NULL) pool->tail = NULL;
        pthread_mutex_unlock(&pool->lock);
        task->run(task, ctx);
        pthread_mutex_lock(&pool->lock);
        task->done = 1;
        pthread_cond_broadcast(&pool->done);
    }
    pthread_mutex_unlock(&pool->lock);
    ckpt__ctx_free(ctx);
    return NULL;
}

int ckpt__pool_threads(const ckpt_pool *pool)
{
    return pool != NULL && pool->threads > 0 ? pool->threads : 1;
}

int ckpt__pool_start(int threads, ckpt_pool **out)
{
    ckpt_pool *pool = calloc(1, sizeof *pool);
    if (pool == NULL || (pool->tids = calloc((size_t)threads, sizeof *pool->tids)) == NULL) {
        free(pool);
        return elastic__fail(ELASTIC_ENOMEM, "checkpoint worker pool");
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work, &attr);
    pthread_cond_init(&pool->done, &attr);
    pthread_condattr_destroy(&attr);
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&pool->tids[i], NULL, worker_main, pool) != 0) {
            pool->threads = i;
            ckpt__pool_stop(pool);
            return elastic__fail(ELASTIC_ESYS, "starting checkpoint worker thread: %s",
                                 strerror(errno));
        }
    }
    pool->threads = threads;
    *out = pool;
    return 0;
}

void ckpt__pool_stop(ckpt_pool *pool)
{
    if (pool == NULL) return;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->threads; i++) pthread_join(pool->tids[i], NULL);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->work);
    pthread_cond_destroy(&pool->done);
    free(pool->tids);
    free(pool);
}

void ckpt__pool_submit(ckpt_pool *pool, ckpt_worker_ctx *inline_ctx, ckpt_task *task)
{
    task->next = NULL;
    if (pool == NULL) {
        task->run(task, inline_ctx);
        task->done = 1;
        return;
    }
    task->done = 0;
    pthread_mutex_lock(&pool->lock);
    if (pool->tail)
        pool->tail->next = task;
    else
        pool->head = task;
    pool->tail = task;
    pthread_cond_signal(&pool->work);
    pthread_mutex_unlock(&pool->lock);
}

void ckpt__pool_wait(ckpt_pool *pool, ckpt_task *task)
{
    if (pool == NULL) return;
    pthread_mutex_lock(&pool->lock);
    while (!task->done) {
        /* Tasks are finite work; the deadline only bounds each sleep. */
        struct timespec at = elastic__timespec_at(elastic__deadline_ms(60000));
        pthread_cond_timedwait(&pool->done, &pool->lock, &at);
    }
    pthread_mutex_unlock(&pool->lock);
}
