/*
 * elastic_worker_barrier: every worker of the generation adds itself to a
 * counter in the generation's key space; the last one in sets a "done" key
 * the others wait on. Keys die with the generation's prefix.
 */
#include "common/clock.h"
#include "worker/worker.h"

#include <stdio.h>
#include <stdlib.h>

/* Waits are cut into slices so an abort ends the barrier promptly. */
#define BARRIER_SLICE_MS 100

static int wait_done(elastic_worker *w, const char *done_key, uint64_t deadline)
{
    for (;;) {
        if (__atomic_load_n(&w->changed, __ATOMIC_ACQUIRE))
            return elastic__fail(ELASTIC_ERECONFIGURE, "the generation ended during the barrier");
        int left = elastic__ms_left(deadline);
        if (left == 0)
            return elastic__fail(ELASTIC_ETIMEDOUT, "barrier: not every worker arrived in time");
        void *value = NULL;
        size_t len = 0;
        int rc = elastic_store_get(w->store, done_key,
                                   left < BARRIER_SLICE_MS ? left : BARRIER_SLICE_MS, &value, &len);
        elastic_free(value);
        if (rc != ELASTIC_ETIMEDOUT) return rc;
    }
}

ELASTIC_EXTERN int elastic_worker_barrier(elastic_worker *w, int timeout_ms)
{
    if (w == NULL) return elastic__fail(ELASTIC_EINVAL, "worker is NULL");
    elastic__clear_error();
    if (w->store == NULL) {
        if (w->env.info.world_size == 1) return 0;
        return elastic__fail(ELASTIC_EUNSUPPORTED, "barrier: no store (not started by elasticrun)");
    }
    uint64_t deadline = elastic__deadline_ms(
        timeout_ms == ELASTIC_TIMEOUT_DEFAULT ? w->opts.store_timeout_ms : timeout_ms);
    uint64_t seq = ++w->barrier_seq;
    char count_key[96], done_key[96];
    snprintf(count_key, sizeof count_key, "worker/barrier/%llu/count", (unsigned long long)seq);
    snprintf(done_key, sizeof done_key, "worker/barrier/%llu/done", (unsigned long long)seq);
    int64_t arrived = 0;
    int rc = elastic_store_add(w->store, count_key, 1, &arrived);
    if (rc != 0) return rc;
    if (arrived > w->env.info.world_size)
        return elastic__fail(ELASTIC_ESTATE, "barrier %llu: %lld arrivals for %d workers",
                             (unsigned long long)seq, (long long)arrived, w->env.info.world_size);
    if (arrived == w->env.info.world_size) return elastic_store_set(w->store, done_key, "1", 1);
    return wait_done(w, done_key, deadline);
}
