/*
 * Ending a generation and shutting the job. The first cause wins one
 * compare-and-set on r/<g>/end; the winner consumes restart budget for a
 * FAILURE and then wakes every member with one multi_set that touches each
 * member's watched area (one message, O(1) bytes per member).
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

void rdzv__fill_cause(elastic_rdzv *r, elastic_rdzv_cause *cause, int kind, uint64_t generation,
                      const char *node_id, const char *reason)
{
    memset(cause, 0, sizeof *cause);
    cause->struct_size = sizeof *cause;
    cause->kind = kind;
    cause->generation = generation;
    cause->rank = -1;
    cause->exit_code = -1;
    snprintf(cause->node_id, sizeof cause->node_id, "%s", node_id != NULL ? node_id : r->node_id);
    snprintf(cause->reason, sizeof cause->reason, "%s", reason != NULL ? reason : "");
    cause->time_ms = elastic__wall_ms();
}

void rdzv__note_end(elastic_rdzv *r, uint64_t generation, const elastic_rdzv_cause *cause)
{
    pthread_mutex_lock(&r->lock);
    if (r->generation == generation && r->phase == RDZV__RUNNING) {
        r->phase = RDZV__ENDED;
        r->cause = *cause;
        pthread_cond_broadcast(&r->changed);
    }
    pthread_mutex_unlock(&r->lock);
}

/* Sets r/<g>/n/<slot>/e for every member: each member's monitor watches its
 * ring neighbour's area, so every monitor wakes exactly once. Where the
 * monitors' watch hands over the mark's value (watch_gives_end: etcd) the mark is
 * the encoded cause, so no monitor reads r/<g>/end after it; elsewhere "1"
 * (the store's one message stays small). */
static int wake_members(elastic_rdzv *r, uint64_t generation, const char *encoded, size_t len)
{
    bool carry = r->backend->ops->watch_gives_end;
    rdzv__info info;
    rdzv__record *members = NULL;
    int rc = rdzv__read_info(r, generation, r->keepalive_timeout_ms, &info, &members);
    if (rc != 0) return rc;
    size_t n = (size_t)info.group_world_size;
    char(*keys)[64] = calloc(n > 0 ? n : 1, sizeof *keys);
    const char **key_ptrs = calloc(n > 0 ? n : 1, sizeof *key_ptrs);
    const void **values = calloc(n > 0 ? n : 1, sizeof *values);
    size_t *lens = calloc(n > 0 ? n : 1, sizeof *lens);
    if (keys == NULL || key_ptrs == NULL || values == NULL || lens == NULL) {
        rc = elastic__fail(ELASTIC_ENOMEM, "rdzv: out of memory");
    } else if (n > 0) {
        for (size_t i = 0; i < n; i++) {
            rdzv__key_slot(keys[i], sizeof keys[i], generation, members[i].slot, "e");
            key_ptrs[i] = keys[i];
            values[i] = carry ? encoded : "1";
            lens[i] = carry ? len : 1;
        }
        rc = r->backend->ops->multi_set(r->backend, key_ptrs, values, lens, n);
    }
    free(keys);
    free(key_ptrs);
    free(values);
    free(lens);
    free(members);
    return rc;
}

/* A FAILURE consumes one restart from the job-wide budget; the first failure
 * is kept for the root-cause summary; past the budget the job shuts. */
static int consume_budget(elastic_rdzv *r, const elastic_rdzv_cause *cause, const char *encoded,
                          size_t len)
{
    int64_t used = 0;
    int rc = r->backend->ops->add(r->backend, "restarts", 1, &used);
    if (rc != 0) return rc;
    void *current = NULL;
    size_t clen = 0;
    rc = r->backend->ops->compare_set(r->backend, "first_failure", NULL, 0, encoded, len, &current,
                                      &clen);
    elastic_free(current);
    if (rc != 0) return rc;
    if (used <= r->max_restarts) return 0;
    ELASTIC_LOG_W("rdzv", "run %s: failure %" PRId64 " exceeds max_restarts %d; shutting the job",
                  r->run_id, used, r->max_restarts);
    return rdzv__shut_job(r, cause, true);
}

int rdzv__end(elastic_rdzv *r, uint64_t generation, const elastic_rdzv_cause *cause, bool *won)
{
    char key[64], encoded[RDZV__MAX_RECORD + sizeof cause->reason];
    elastic_rdzv_cause recorded = *cause;
    recorded.generation = generation;
    size_t len = rdzv__cause_encode(&recorded, encoded, sizeof encoded);
    if (len == 0) return elastic__fail(ELASTIC_EINVAL, "rdzv: cause does not encode");
    void *current = NULL;
    size_t clen = 0;
    rdzv__key_round(key, sizeof key, generation, "end");
    int rc = r->backend->ops->compare_set(r->backend, key, NULL, 0, encoded, len, &current, &clen);
    *won = rc == 0 && clen == len && memcmp(current, encoded, len) == 0;
    if (rc == 0 && !*won) rc = rdzv__cause_decode(current, clen, &recorded);
    elastic_free(current);
    if (rc != 0) return rc;
    if (*won) {
        ELASTIC_LOG_I("rdzv", "run %s: generation %" PRIu64 " ended (kind %d, node %s: %s)",
                      r->run_id, generation, recorded.kind, recorded.node_id, recorded.reason);
        if (recorded.kind == ELASTIC_RDZV_FAILURE) rc = consume_budget(r, &recorded, encoded, len);
        if (recorded.kind == ELASTIC_RDZV_NODE_LOST) rc = rdzv__consume_infra(r, &recorded);
        int wake_rc = wake_members(r, generation, encoded, len);
        if (rc == 0) rc = wake_rc;
    }
    rdzv__note_end(r, generation, &recorded);
    return rc;
}

/* Tells the nodes waiting in the open round that the job is shut. */
static int wake_waiting(elastic_rdzv *r, uint64_t round)
{
    char key[64];
    int64_t count = 0;
    rdzv__key_round(key, sizeof key, round, "count");
    int rc = rdzv__read_int(r, key, 0, &count);
    if (rc != 0 || count <= 0) return rc;
    if (count > RDZV__MAX_NODES * 4)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: bad count in %s", key);
    char(*keys)[64] = calloc((size_t)count, sizeof *keys);
    const char **key_ptrs = calloc((size_t)count, sizeof *key_ptrs);
    const void **values = calloc((size_t)count, sizeof *values);
    size_t *lens = calloc((size_t)count, sizeof *lens);
    if (keys == NULL || key_ptrs == NULL || values == NULL || lens == NULL) {
        rc = elastic__fail(ELASTIC_ENOMEM, "rdzv: out of memory");
    } else {
        for (int64_t i = 0; i < count; i++) {
            rdzv__key_slot(keys[i], sizeof keys[i], round, (int)i + 1, "a");
            key_ptrs[i] = keys[i];
            values[i] = "C";
            lens[i] = 1;
        }
        rc = r->backend->ops->multi_set(r->backend, key_ptrs, values, lens, (size_t)count);
    }
    free(keys);
    free(key_ptrs);
    free(values);
    free(lens);
    return rc;
}

int rdzv__shut_job(elastic_rdzv *r, const elastic_rdzv_cause *cause, bool budget)
{
    char value[RDZV__MAX_RECORD + sizeof cause->reason + 4];
    value[0] = budget ? 'B' : 'C';
    value[1] = ' ';
    size_t len = rdzv__cause_encode(cause, value + 2, sizeof value - 2);
    if (len == 0) return elastic__fail(ELASTIC_EINVAL, "rdzv: cause does not encode");
    void *current = NULL;
    size_t clen = 0;
    int rc = r->backend->ops->compare_set(r->backend, "closed", NULL, 0, value, len + 2, &current,
                                          &clen);
    elastic_free(current);
    if (rc != 0) return rc;
    /* A round may be sealed meanwhile: follow the pointer until it holds still
     * (sealers check "closed" before publishing, so this converges). */
    rdzv__round_ptr ptr, again;
    for (int attempt = 0; attempt < 8; attempt++) {
        rc = rdzv__read_round(r, &ptr);
        if (rc != 0) return rc;
        uint64_t running = ptr.open_round - 1;
        int size = 0;
        elastic_rdzv_cause ended;
        if (running >= 1 && rdzv__read_formed(r, running, 0, &size) == 0 && size > 0 &&
            rdzv__read_end(r, running, &ended) == ELASTIC_ENOTFOUND) {
            elastic_rdzv_cause closing;
            bool won;
            rdzv__fill_cause(r, &closing, ELASTIC_RDZV_JOB_ENDED, running, cause->node_id,
                             budget ? "restart budget exhausted" : "job closed");
            rc = rdzv__end(r, running, &closing, &won);
            if (rc != 0) return rc;
        }
        rc = wake_waiting(r, ptr.open_round);
        if (rc == 0) rc = rdzv__read_round(r, &again);
        if (rc != 0 || again.open_round == ptr.open_round) return rc;
    }
    return 0;
}
