/*
 * A generation nobody watches any more. When every node of a job on etcd is
 * killed at once (a cancelled allocation, a power cut), no ring monitor is
 * left to see a member's lease end, and the last generation stays in etcd
 * formed and never ended. The job started again with the same run id (the
 * fixed --rdzv-id of a launch script) would wait as spares of it for ever.
 *
 * So a node waiting in the next round looks, at each of its round's checks,
 * at one member of the running generation, picked at random: a member whose
 * record is gone (its lease ended) and that did not finish ends the
 * generation, as its ring neighbour would have, and the waiting nodes form
 * the next one. One member suffices: while any node of the job lives, a
 * monitor sees a loss within a round trip; only when all are dead is nobody
 * looking, and then every member's record goes. Four small reads a check,
 * whatever the job's size. The store backend needs none of this (a new
 * store holds no old generation), and it costs it nothing but the reads.
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* What one member's area holds now. */
static int read_member(elastic_rdzv *r, uint64_t generation, int slot, bool *member, bool *alive,
                       char *node_id)
{
    char key[64];
    void *value = NULL;
    size_t len = 0;
    rdzv__assignment a;
    *member = *alive = false;
    rdzv__key_slot(key, sizeof key, generation, slot, "a");
    int rc = r->backend->ops->get(r->backend, key, &value, &len);
    if (rc == 0) rc = rdzv__assignment_decode(value, len, &a);
    elastic_free(value);
    if (rc == ELASTIC_ENOTFOUND) return 0; /* joined after the seal: no member */
    if (rc != 0) return rc;
    if (a.outcome != RDZV__ASSIGNED) return 0;
    *member = true;
    char prefix[64];
    char **names = NULL;
    size_t n = 0;
    rdzv__key_slot(prefix, sizeof prefix, generation, slot, "");
    rc = r->backend->ops->keys(r->backend, prefix, 16, &names, &n);
    if (rc != 0) return rc;
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < n; i++) {
        const char *name = strncmp(names[i], prefix, plen) == 0 ? names[i] + plen : names[i];
        if (strcmp(name, "rec") == 0 || strcmp(name, "done") == 0) *alive = true;
    }
    elastic_free(names);
    /* The member's own id is its ring predecessor's next_node_id: not at
     * hand here; the slot names it in the cause instead. */
    snprintf(node_id, RDZV__MAX_ID, "slot %d", slot);
    return 0;
}

int rdzv__end_if_orphaned(elastic_rdzv *r, uint64_t running)
{
    elastic_rdzv_cause cause;
    int rc = rdzv__read_end(r, running, &cause);
    if (rc != ELASTIC_ENOTFOUND) return rc; /* ended already (0), or an error */
    char key[64];
    int64_t count = 0;
    rdzv__key_round(key, sizeof key, running, "count");
    if ((rc = rdzv__read_int(r, key, 0, &count)) != 0) return rc;
    if (count < 1 || count > INT32_MAX / 2) return 0;
    /* Only spreads which member is looked at; nothing depends on it. */
    unsigned seed = (unsigned)(elastic__now_ms() ^ (uintptr_t)r);
    int slot = 1 + (int)((unsigned)rand_r(&seed) % (unsigned)count);
    bool member, alive;
    char node_id[RDZV__MAX_ID];
    if ((rc = read_member(r, running, slot, &member, &alive, node_id)) != 0) return rc;
    if (!member || alive) return 0;
    ELASTIC_LOG_I("rdzv",
                  "run %s: member in slot %d of generation %" PRIu64
                  " is gone and nobody ended the generation: ending it",
                  r->run_id, slot, running);
    rdzv__report_lost(r, running, node_id);
    return 0;
}
