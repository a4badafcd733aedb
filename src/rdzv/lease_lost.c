/*
 * Fencing: when the backend reports this node's lease lost (cut off from
 * the coordination service past the lease's TTL), the others already treat
 * the node as gone and may re-form without it, so its generation ends here
 * at once (as FENCED: see guard.c, which does the same for backends that can
 * be asked whether the lease lives), and the agent stops its workers.
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
    /* The agent prints the one console line (it knows what it stops). */
    ELASTIC_LOG_I("rdzv", "run %s: node %s FENCED: its lease ended (%s); %s", r->run_id, r->node_id,
                  why,
                  running ? "the generation ends here and its workers stop"
                          : "it takes a new lease to join again");
    if (!running) return;
    char reason[200];
    snprintf(reason, sizeof reason, "lease lost (%.150s)", why);
    rdzv__fence(r, generation, reason); /* FENCED, and the next join is a new member's (guard.c) */
}
