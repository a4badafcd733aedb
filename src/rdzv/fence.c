/*
 * Fencing: when the backend reports this node's lease lost (cut off from
 * the coordination service past the lease's TTL), the others already treat
 * the node as gone and may re-form without it, so its generation ends here
 * at once, with one clear log line, and the agent stops its workers.
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>

void rdzv__on_lease_lost(void *user, uint64_t lease, const char *why)
{
    elastic_rdzv *r = user;
    pthread_mutex_lock(&r->lock);
    bool current = r->lease == lease;
    uint64_t generation = r->generation;
    bool running = r->phase == RDZV__RUNNING;
    pthread_mutex_unlock(&r->lock);
    if (!current) return;
    __atomic_store_n(&r->lease_lost, 1, __ATOMIC_RELEASE);
    ELASTIC_LOG_E("rdzv", "run %s: node %s FENCED: its lease ended (%s); %s", r->run_id, r->node_id, why,
                  running ? "the generation ends here and its workers stop" : "it takes a new lease to join again");
    if (!running) return;
    elastic_rdzv_cause cause;
    char reason[200];
    snprintf(reason, sizeof reason, "fenced: lease lost (%.150s)", why);
    rdzv__fill_cause(r, &cause, ELASTIC_RDZV_NODE_LOST, generation, r->node_id, reason);
    rdzv__note_end(r, generation, &cause);
    rdzv__notify(r, generation, &cause);
}
