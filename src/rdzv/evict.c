/*
 * A member stepping aside from its running generation (a persistent
 * straggler evicting itself): only when a spare waits in the open round or
 * the job keeps min_nodes without it; the end costs no restart budget.
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* The live join records of the open round (spares waiting while the
 * generation runs; a dead spare's record went with its lease) and the node
 * id of the lowest slot among them, the likely replacement. */
static int waiting_spares(elastic_rdzv *r, uint64_t round, int *waiting, char *first,
                          size_t first_size)
{
    char prefix[64];
    char **names = NULL;
    size_t n = 0;
    snprintf(prefix, sizeof prefix, "r/%" PRIu64 "/n/", round);
    int rc = r->backend->ops->keys(r->backend, prefix, (size_t)RDZV__MAX_NODES * 8, &names, &n);
    if (rc != 0) return rc;
    const char *lowest = NULL;
    int64_t lowest_slot = 0;
    *waiting = 0;
    size_t prefix_len = strlen(prefix);
    for (size_t i = 0; i < n; i++) {
        /* "r/<round>/n/<slot>/rec": other keys of the slot are not records. */
        size_t len = strlen(names[i]);
        int64_t slot = 0;
        if (len < prefix_len + 5 || strcmp(names[i] + len - 4, "/rec") != 0 ||
            rdzv__parse_int(names[i] + prefix_len, len - prefix_len - 4, 1, INT32_MAX, &slot) != 0)
            continue;
        (*waiting)++;
        if (lowest == NULL || slot < lowest_slot) {
            lowest = names[i];
            lowest_slot = slot;
        }
    }
    first[0] = '\0';
    void *value = NULL;
    size_t len = 0;
    rdzv__record rec;
    if (lowest != NULL && r->backend->ops->get(r->backend, lowest, &value, &len) == 0 &&
        rdzv__record_decode(value, len, &rec) == 0)
        snprintf(first, first_size, "%s", rec.node_id);
    elastic_free(value);
    elastic_free(names);
    return 0;
}

int rdzv__stay_out(elastic_rdzv *r, uint64_t generation)
{
    pthread_mutex_lock(&r->lock);
    bool mine = r->phase == RDZV__ENDED && r->generation == generation &&
                r->stayed_out != generation;
    if (mine) r->stayed_out = generation;
    pthread_mutex_unlock(&r->lock);
    if (!mine) return 0;
    char key[64];
    int64_t gone = 0;
    rdzv__key_round(key, sizeof key, generation, "gone");
    return r->backend->ops->add(r->backend, key, 1, &gone);
}

int rdzv__step_aside(elastic_rdzv *r, const char *reason, rdzv__step_aside_result *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&r->lock);
    bool running = r->phase == RDZV__RUNNING;
    uint64_t generation = r->generation;
    int size = r->group_world_size;
    pthread_mutex_unlock(&r->lock);
    if (!running)
        return elastic__fail(ELASTIC_ESTATE, "rdzv: run %s: no generation to leave", r->run_id);
    int rc =
        waiting_spares(r, generation + 1, &out->waiting, out->replacement, sizeof out->replacement);
    if (rc != 0) return rc;
    if (out->waiting == 0 && size - 1 < r->min_nodes) return 0; /* no one takes over; too few */
    elastic_rdzv_cause cause;
    if (rdzv__read_end(r, generation, &cause) != ELASTIC_ENOTFOUND) return 0; /* ended already */
    /* Counted gone first: the survivors' next round must not wait for us. */
    char key[64];
    int64_t gone = 0;
    rdzv__key_round(key, sizeof key, generation, "gone");
    rc = r->backend->ops->add(r->backend, key, 1, &gone);
    if (rc != 0) return rc;
    rdzv__fill_cause(r, &cause, ELASTIC_RDZV_NODE_LEFT, generation, NULL, reason);
    bool won = false;
    rc = rdzv__end(r, generation, &cause, &won);
    if (rc == 0 && !won) /* another cause won: we are still a member of the re-formation */
        (void)r->backend->ops->add(r->backend, key, -1, &gone);
    out->generation = generation;
    out->stepped_aside = rc == 0 && won;
    /* A spare (or the rest) takes over: free, but bounded job-wide. */
    if (out->stepped_aside) rc = rdzv__consume_infra(r, &cause);
    return rc;
}
