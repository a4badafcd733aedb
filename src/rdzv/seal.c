/*
 * Completing a round: deciding that it is complete (max_nodes reached, all
 * expected survivors back, or last call over), sealing it with one
 * compare-and-set on the round pointer, and publishing one small assignment
 * per node so each waits on its own key (O(1) bytes per node).
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* Counts the join records still alive (leases not ended) under round/n/. */
static int count_alive_records(elastic_rdzv *r, uint64_t round, int64_t *alive)
{
    char prefix[64];
    char **names = NULL;
    size_t n = 0;
    snprintf(prefix, sizeof prefix, "r/%" PRIu64 "/n/", round);
    int rc = r->backend->ops->keys(r->backend, prefix, (size_t)RDZV__MAX_NODES * 8, &names, &n);
    if (rc != 0) return rc;
    *alive = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len >= 4 && strcmp(names[i] + len - 4, "/rec") == 0) (*alive)++;
    }
    elastic_free(names);
    return 0;
}

/* Whether round `round`, whose previous round formed a generation of
 * prev_size nodes that has ended, has every survivor back (or waited long
 * enough for the missing ones). */
static int survivors_ready(elastic_rdzv *r, const rdzv__seal_hint *hint, int prev_size, bool *ready)
{
    char key[64];
    uint64_t round = hint->round;
    int64_t gone = hint->gone, back = hint->back;
    bool timer_fired = hint->timer_fired;
    uint64_t joined_at_ms = hint->joined_at_ms;
    rdzv__key_round(key, sizeof key, round - 1, "gone");
    int rc = hint->have_gone ? 0 : rdzv__read_int(r, key, 0, &gone);
    if (rc == 0 && back < 0) {
        rdzv__key_round(key, sizeof key, round, "back");
        rc = rdzv__read_int(r, key, 0, &back);
    }
    if (rc != 0) return rc;
    *ready = back >= prev_size - gone;
    if (*ready || !timer_fired) return 0;
    /* A survivor may have died after the end (not counted in gone) or be slow
     * to stop its workers: count those still alive, wait for them only until
     * last call. */
    int64_t alive = 0;
    rc = count_alive_records(r, round - 1, &alive);
    if (rc != 0) return rc;
    *ready = back >= alive || elastic__now_ms() >= joined_at_ms + (uint64_t)r->last_call_timeout_ms;
    return 0;
}

/* The previous round: *size of the generation it formed (0: none) and
 * whether that generation has ended. */
static int previous_round(elastic_rdzv *r, uint64_t round, int *size, bool *ended)
{
    *size = 0;
    *ended = true;
    if (round <= 1) return 0;
    int rc = rdzv__read_formed(r, round - 1, 0, size);
    if (rc != 0 || *size == 0) return rc; /* ENOTFOUND: its sealer is still publishing */
    elastic_rdzv_cause cause;
    rc = rdzv__read_end(r, round - 1, &cause);
    *ended = rc == 0;
    return rc == ELASTIC_ENOTFOUND ? 0 : rc;
}

bool rdzv__may_seal(const elastic_rdzv *r, const rdzv__round_ptr *ptr, const rdzv__seal_hint *hint)
{
    if (ptr->open_round != hint->round) return false;
    if (hint->prev_size < 0 && hint->round > 1) return true; /* it reads the previous round */
    if (hint->prev_size <= 0) return hint->slot >= r->max_nodes;
    if (!hint->have_gone || hint->back < 0) return true;
    return hint->back >= hint->prev_size - hint->gone; /* the last survivor back */
}

int rdzv__maybe_seal(elastic_rdzv *r, const rdzv__round_ptr *known, const rdzv__seal_hint *hint)
{
    rdzv__round_ptr ptr;
    int rc = 0;
    if (known != NULL)
        ptr = *known;
    else
        rc = rdzv__read_round(r, &ptr);
    if (rc != 0 || ptr.open_round != hint->round) return rc;
    int prev_size = hint->prev_size;
    bool prev_ended = true;
    if (prev_size < 0) {
        rc = previous_round(r, hint->round, &prev_size, &prev_ended);
        if (rc == ELASTIC_ENOTFOUND) return 0;
        if (rc != 0) return rc;
        if (!prev_ended) return 0; /* spares wait while it runs */
    }
    /* count >= slot: read it only when the slot does not settle the question. */
    int64_t count = hint->slot;
    if (prev_size == 0 && !hint->timer_fired && count < r->max_nodes) return 0;
    bool ready = false;
    if (prev_size > 0) {
        /* Survivors first: all but the last one back stop here, without
         * reading the count (every survivor back took a slot: count >= back). */
        rc = survivors_ready(r, hint, prev_size, &ready);
        if (rc != 0 || !ready) return rc;
        if (hint->back > count) count = hint->back;
    }
    if (hint->timer_fired || count < r->min_nodes) {
        char key[64];
        rdzv__key_round(key, sizeof key, hint->round, "count");
        if (hint->have_count && !hint->timer_fired)
            count = hint->count; /* read with the join, after this node's add */
        else
            rc = rdzv__read_int(r, key, 0, &count);
        if (rc != 0 || count < r->min_nodes) return rc;
    }
    if (prev_size == 0) {
        /* First formation: at once at max_nodes, else the last call runs from
         * the arrival of node min_nodes (slots after it time out later). */
        ready = count >= r->max_nodes ||
                (hint->timer_fired && hint->slot >= r->min_nodes &&
                 elastic__now_ms() >= hint->joined_at_ms + (uint64_t)r->last_call_timeout_ms);
    }
    return ready ? rdzv__seal(r, &ptr, prev_size > 0) : 0;
}
