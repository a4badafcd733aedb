/*
 * The job's incarnation: one number every node of a run agrees on, written
 * once (the first time any node asks: the sealer of the first round) into
 * the key "incarnation" by compare-and-set and never changed after. It is
 * the writer's wall clock in ms, so a job an operator starts again on a fresh
 * store (a c10d job whose store host was lost) gets a larger one than the job
 * before it, and checkpoint fencing orders (incarnation, generation) instead
 * of the generation alone, which counts from 1 again on a fresh store.
 *
 * Clock skew between the nodes of one run does not matter: one node writes
 * the value and every other reads it. Between two runs on the same
 * checkpoint directory it matters only when the second run's writer's clock
 * is behind the first one's by more than the time between the two starts
 * (the whole first run, at least up to its first checkpoint, and the
 * restart), which NTP-synchronised clusters never see.
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>

#define INCARNATION_KEY "incarnation"

static int parse(elastic_rdzv *r, const void *value, size_t len, uint64_t *out)
{
    int64_t v = 0;
    if (rdzv__parse_int(value, len, 1, INT64_MAX, &v) != 0)
        return elastic__fail(ELASTIC_ECORRUPT,
                             "rdzv: run %s: key " INCARNATION_KEY
                             " holds no incarnation (%zu bytes)",
                             r->run_id, len);
    *out = (uint64_t)v;
    return 0;
}

int rdzv__incarnation(elastic_rdzv *r, uint64_t *out)
{
    uint64_t cached = __atomic_load_n(&r->incarnation, __ATOMIC_ACQUIRE);
    if (cached != 0) {
        *out = cached;
        return 0;
    }
    void *value = NULL;
    size_t len = 0;
    int rc = r->backend->ops->get(r->backend, INCARNATION_KEY, &value, &len);
    if (rc == ELASTIC_ENOTFOUND) {
        char mine[24];
        uint64_t now = elastic__wall_ms();
        int mine_len = snprintf(mine, sizeof mine, "%" PRIu64, now > 0 ? now : 1);
        /* Only if absent: whoever wins, every node reads the winner's value. */
        rc = r->backend->ops->compare_set(r->backend, INCARNATION_KEY, NULL, 0, mine,
                                          (size_t)mine_len, &value, &len);
    }
    if (rc == 0) rc = parse(r, value, len, out);
    elastic_free(value);
    if (rc == 0) __atomic_store_n(&r->incarnation, *out, __ATOMIC_RELEASE);
    return rc;
}
