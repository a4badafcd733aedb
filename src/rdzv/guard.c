/*
 * Self-fencing: a lost lease is lost membership. While this node is in a
 * generation, the guard thread renews its lease with one answered round trip
 * per keep-alive interval (two per timeout in a large job). When the store says the lease ended, the store is
 * gone, or no answer came for the keep-alive timeout, the others have re-formed
 * (or will) without us: the generation ends here as FENCED, the on_change
 * callback tells the agent to stop its workers, and next() joins as a new member.
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

void rdzv__fence(elastic_rdzv *r, uint64_t generation, const char *reason)
{
    elastic_rdzv_cause cause;
    rdzv__fill_cause(r, &cause, ELASTIC_RDZV_FENCED, generation, r->node_id, reason);
    pthread_mutex_lock(&r->lock);
    bool ours = r->generation == generation && r->phase == RDZV__RUNNING;
    if (ours) r->fenced = true;
    pthread_mutex_unlock(&r->lock);
    if (!ours) return;
    ELASTIC_LOG_I("rdzv", "run %s: node %s fenced out of generation %" PRIu64 ": %s", r->run_id,
                  r->node_id, generation, reason);
    rdzv__note_end(r, generation, &cause);
    rdzv__notify(r, generation, &cause);
}

/* Waits (lock held) until `at`, a phase change or stop. */
static void wait_until(elastic_rdzv *r, uint64_t at)
{
    struct timespec ts = elastic__timespec_at(at);
    if (!r->stopping) pthread_cond_timedwait(&r->changed, &r->lock, &ts);
}

/* One check; returns true when the node was fenced. */
static bool check_once(elastic_rdzv *r, uint64_t generation, uint64_t lease, uint64_t *last_ok_ms)
{
    uint64_t sent_ms = elastic__now_ms();
    uint64_t silent_ms = sent_ms - *last_ok_ms;
    /* Wait for the answer no longer than the lease can still live. */
    int budget = (int)(silent_ms < (uint64_t)r->keepalive_timeout_ms
                           ? (uint64_t)r->keepalive_timeout_ms - silent_ms
                           : 0);
    int rc = r->backend->ops->lease_check(r->backend, lease, budget > 50 ? budget : 50);
    char reason[256];
    if (rc == 0) {
        *last_ok_ms = sent_ms;
        return false;
    }
    if (rc == ELASTIC_ENOTFOUND ||
        rc == ELASTIC_EPERM) { /* EPERM: no longer this connection's lease */
        snprintf(reason, sizeof reason, "the store ended our lease (silent for %" PRIu64 " ms)",
                 silent_ms);
    } else if (rc == ELASTIC_ECONNECT || rc == ELASTIC_ECLOSED) {
        snprintf(reason, sizeof reason, "lost the store: %.200s", elastic_last_error());
    } else if (elastic__now_ms() - *last_ok_ms >= (uint64_t)r->keepalive_timeout_ms) {
        snprintf(reason, sizeof reason,
                 "no answer from the store for %" PRIu64 " ms (keep-alive timeout %d ms)",
                 elastic__now_ms() - *last_ok_ms, r->keepalive_timeout_ms);
    } else {
        return false; /* slow, not yet lost: the next check decides */
    }
    rdzv__fence(r, generation, reason);
    return true;
}

/* How often the guard asks: every keep-alive interval; in a job whose
 * liveness was stretched for its size (rdzv__scale_liveness), twice per
 * timeout, with the store client's one-way keep-alives renewing in between:
 * the answered check costs the store a reply and the node a wake-up, and at
 * 16k nodes half of them is what keeps the store's answers in time. The fence
 * bound is one timeout after the last answered check either way; what the
 * slower pace gives up is slack for one late answer after a quick one
 * (timeout/2 instead of timeout - interval), kept for the small jobs. */
static uint64_t check_period_ms(const elastic_rdzv *r)
{
    int half_timeout = r->keepalive_timeout_ms / 2;
    if (!r->liveness_scaled || r->keepalive_interval_ms > half_timeout)
        return (uint64_t)r->keepalive_interval_ms;
    return (uint64_t)half_timeout;
}

/* Half to one keep-alive interval, spread by a per-node random number. */
static uint64_t first_check_delay_ms(const elastic_rdzv *r, unsigned *seed)
{
    uint64_t half = (uint64_t)r->keepalive_interval_ms / 2;
    return half + (half > 0 ? (uint64_t)rand_r(seed) % (half + 1) : 0);
}

static void *guard_main(void *arg)
{
    elastic_rdzv *r = arg;
    uint64_t guarded = 0, last_ok_ms = 0, due_ms = 0;
    /* Only spreads timing; nothing depends on it being unpredictable. */
    unsigned seed = (unsigned)(elastic__now_ms() ^ (uintptr_t)r ^ (uintptr_t)&seed);
    pthread_mutex_lock(&r->lock);
    while (!r->stopping) {
        if (r->phase != RDZV__RUNNING || r->fenced) {
            /* Nothing to guard until a generation runs: joining, ending and
             * stopping broadcast r->changed, so no timed wake-ups (thousands
             * of idle nodes would wake twice a second each for nothing). */
            guarded = 0;
            wait_until(r, UINT64_MAX);
            continue;
        }
        uint64_t generation = r->generation, lease = r->guard_lease;
        if (guarded != generation) {
            /* Joining used the lease just now (the ticker's keep-alives kept
             * it while we waited). The first check waits half to one interval,
             * a different share on every node: every member joins at the same
             * moment, and N checks at once would queue behind the
             * generation's own traffic at the store and time out together. */
            guarded = generation;
            last_ok_ms = elastic__now_ms();
            due_ms = last_ok_ms + first_check_delay_ms(r, &seed);
        }
        /* r->changed is broadcast for other reasons too: wait out the interval. */
        if (elastic__now_ms() < due_ms) {
            wait_until(r, due_ms);
            continue;
        }
        pthread_mutex_unlock(&r->lock);
        uint64_t started_ms = elastic__now_ms();
        bool fenced = check_once(r, generation, lease, &last_ok_ms);
        pthread_mutex_lock(&r->lock);
        due_ms = fenced ? 0 : started_ms + check_period_ms(r);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

int rdzv__guard_start(elastic_rdzv *r)
{
    if (r->backend->ops
            ->outlives_clients) { /* etcd: its keeper reports a lost lease (lease_lost.c) */
        ELASTIC_LOG_D("rdzv", "run %s: fencing on the backend's lease-lost report only", r->run_id);
        return 0;
    }
    if (pthread_create(&r->guard, NULL, guard_main, r) != 0)
        return elastic__fail(ELASTIC_ESYS, "rdzv: cannot start the lease guard thread");
    r->guard_running = true;
    return 0;
}

void rdzv__guard_stop(elastic_rdzv *r)
{
    if (!r->guard_running) return;
    pthread_mutex_lock(&r->lock);
    r->stopping = true;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->guard, NULL);
    r->guard_running = false;
}
