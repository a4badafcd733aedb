/*
 * Sealing a round and publishing what it formed: the sealer wins one
 * compare-and-set on the round pointer, reads the join records once, commits
 * the generation record (another compare-and-set, which a recovering node may
 * win with "void" instead) and then sets one small assignment per slot in a
 * single multi_set, waking each node's own watch.
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* One slot's outcome and, for members, its assignment text. */
typedef struct slot_plan {
    size_t count;                   /* slots 1..count */
    char (*text)[RDZV__MAX_RECORD]; /* text[slot-1] */
    size_t *len;
} slot_plan;

static int plan_alloc(slot_plan *plan, size_t count, int fill_outcome)
{
    plan->count = count;
    plan->text = calloc(count > 0 ? count : 1, sizeof *plan->text);
    plan->len = calloc(count > 0 ? count : 1, sizeof *plan->len);
    if (plan->text == NULL || plan->len == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "rdzv: out of memory");
    rdzv__assignment a = { .outcome = fill_outcome };
    for (size_t i = 0; i < count; i++)
        plan->len[i] = rdzv__assignment_encode(&a, plan->text[i], RDZV__MAX_RECORD);
    return 0;
}

static void plan_free(slot_plan *plan)
{
    free(plan->text);
    free(plan->len);
}

/* One multi_set: r/<round>/formed and every slot's assignment. */
static int publish(elastic_rdzv *r, uint64_t round, int group_world_size, const slot_plan *plan)
{
    size_t n = plan->count + 1;
    char(*keys)[64] = calloc(n, sizeof *keys);
    const char **key_ptrs = calloc(n, sizeof *key_ptrs);
    const void **values = calloc(n, sizeof *values);
    size_t *lens = calloc(n, sizeof *lens);
    char formed[16];
    int rc = ELASTIC_ENOMEM;
    if (keys == NULL || key_ptrs == NULL || values == NULL || lens == NULL) goto out;
    rdzv__key_round(keys[0], sizeof keys[0], round, "formed");
    lens[0] = (size_t)snprintf(formed, sizeof formed, "%d", group_world_size);
    values[0] = formed;
    for (size_t i = 0; i < plan->count; i++) {
        rdzv__key_slot(keys[i + 1], sizeof keys[i + 1], round, (int)i + 1, "a");
        values[i + 1] = plan->text[i];
        lens[i + 1] = plan->len[i];
    }
    for (size_t i = 0; i < n; i++) key_ptrs[i] = keys[i];
    rc = r->backend->ops->multi_set(r->backend, key_ptrs, values, lens, n);
out:
    free(keys);
    free(key_ptrs);
    free(values);
    free(lens);
    return rc == ELASTIC_ENOMEM ? elastic__fail(rc, "rdzv: out of memory") : rc;
}

/* Commits r/<round>/info; *won false when another node committed first. */
static int commit_info(elastic_rdzv *r, uint64_t round, const rdzv__info *info,
                       const rdzv__record *members, bool *won)
{
    char key[64];
    char *blob = NULL;
    size_t len = 0;
    void *current = NULL;
    size_t clen = 0;
    rdzv__key_round(key, sizeof key, round, "info");
    int rc = rdzv__info_encode(info, members, &blob, &len);
    if (rc != 0) return rc;
    rc = r->backend->ops->compare_set(r->backend, key, NULL, 0, blob, len, &current, &clen);
    *won = rc == 0 && clen == len && memcmp(current, blob, len) == 0;
    elastic_free(current);
    free(blob);
    return rc;
}

/* Reads the join records of slots 1..count that are alive. A record still in
 * flight (its node added but has not written yet) gets keepalive_timeout to
 * appear; after that, only the listed ones count. */
static int read_records(elastic_rdzv *r, uint64_t round, size_t count, rdzv__record *out,
                        size_t *n_out)
{
    char(*keys)[64] = calloc(count, sizeof *keys);
    const char **key_ptrs = calloc(count, sizeof *key_ptrs);
    void **values = calloc(count, sizeof *values);
    size_t *lens = calloc(count, sizeof *lens);
    int rc = ELASTIC_ENOMEM;
    *n_out = 0;
    if (keys == NULL || key_ptrs == NULL || values == NULL || lens == NULL) goto out;
    for (size_t i = 0; i < count; i++) {
        rdzv__key_slot(keys[i], sizeof keys[i], round, (int)i + 1, "rec");
        key_ptrs[i] = keys[i];
    }
    rc = r->backend->ops->multi_get(r->backend, key_ptrs, count, r->keepalive_timeout_ms, values,
                                    lens);
    if (rc == ELASTIC_ETIMEDOUT || rc == ELASTIC_ENOTFOUND) {
        /* Some node died while joining: read the survivors one by one. */
        for (size_t i = 0; i < count; i++) {
            rc = r->backend->ops->get(r->backend, key_ptrs[i], &values[i], &lens[i]);
            if (rc == ELASTIC_ENOTFOUND)
                values[i] = NULL;
            else if (rc != 0)
                goto out;
        }
    } else if (rc != 0) {
        goto out;
    }
    rc = 0;
    for (size_t i = 0; i < count; i++) {
        if (values[i] == NULL) continue;
        rdzv__record *rec = &out[*n_out];
        if (rdzv__record_decode(values[i], lens[i], rec) != 0) {
            ELASTIC_LOG_W("rdzv", "run %s round %" PRIu64 ": ignoring slot %zu: %s", r->run_id,
                          round, i + 1, elastic_last_error());
            continue;
        }
        rec->slot = (int)i + 1;
        (*n_out)++;
    }
out:
    for (size_t i = 0; values != NULL && i < count; i++) elastic_free(values[i]);
    free(keys);
    free(key_ptrs);
    free(values);
    free(lens);
    return rc == ELASTIC_ENOMEM ? elastic__fail(rc, "rdzv: out of memory") : rc;
}

static int publish_generation(elastic_rdzv *r, uint64_t round, size_t count,
                              uint64_t prev_generation, uint64_t incarnation)
{
    rdzv__record *records = calloc(count > 0 ? count : 1, sizeof *records);
    rdzv__assignment *assigned = calloc(count > 0 ? count : 1, sizeof *assigned);
    slot_plan plan = { 0 };
    size_t valid = 0;
    int rc = records == NULL || assigned == NULL
                 ? elastic__fail(ELASTIC_ENOMEM, "rdzv: out of memory")
                 : 0;
    if (rc == 0) rc = read_records(r, round, count, records, &valid);
    size_t admitted =
        rc == 0 ? rdzv__order_members(records, valid, prev_generation, r->max_nodes) : 0;
    int64_t restarts = 0;
    if (rc == 0) rc = rdzv__read_int(r, "restarts", 0, &restarts);
    bool formed = admitted >= (size_t)r->min_nodes;
    rdzv__info info = { .formed = formed,
                        .generation = round,
                        .group_world_size = formed ? (int)admitted : 0,
                        .sealed_count = (int)count,
                        .restart_count = (int)restarts };
    bool won = false;
    if (rc == 0) rc = commit_info(r, round, &info, records, &won);
    if (rc != 0 || !won) goto out;
    bool closed = rdzv__check_closed(r) != 0;
    rc = plan_alloc(&plan, count, closed ? RDZV__CLOSED : formed ? RDZV__EXCLUDED : RDZV__VOID);
    if (rc != 0) goto out;
    if (formed && !closed) {
        rdzv__assign_all(records, admitted, round, (int)restarts, assigned);
        for (size_t i = 0; i < admitted; i++) {
            size_t at = (size_t)records[i].slot - 1;
            assigned[i].incarnation = incarnation;
            plan.len[at] = rdzv__assignment_encode(&assigned[i], plan.text[at], RDZV__MAX_RECORD);
        }
    }
    ELASTIC_LOG_I("rdzv", "run %s: generation %" PRIu64 " %s with %zu of %zu node(s)", r->run_id,
                  round, formed ? "formed" : "void", admitted, count);
    rc = publish(r, round, info.group_world_size, &plan);
    /* Round-2 ended before round-1 could form: nobody reads its keys now. */
    if (rc == 0 && round > 2) rdzv__forget_round(r, round - 2);
out:
    plan_free(&plan);
    free(records);
    free(assigned);
    return rc;
}

int rdzv__seal(elastic_rdzv *r, const rdzv__round_ptr *ptr, bool prev_formed)
{
    uint64_t round = ptr->open_round;
    char key[64], desired[RDZV__MAX_ID + 48];
    int64_t count = 0;
    rdzv__key_round(key, sizeof key, round, "count");
    int rc = rdzv__read_int(r, key, 0, &count);
    if (rc != 0) return rc;
    if (count < 1 || count > INT32_MAX)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: bad count in %s", key);
    /* Known before the seal (one read, once per handle; the first round's
     * sealer creates it), so a sealed round never waits on it. */
    uint64_t incarnation = 0;
    if ((rc = rdzv__incarnation(r, &incarnation)) != 0) return rc;
    /* The sealer's id makes the new value unique, so "current == desired"
     * means this node won. */
    int dlen =
        snprintf(desired, sizeof desired, "%" PRIu64 " %d %s", round + 1, (int)count, r->node_id);
    void *current = NULL;
    size_t clen = 0;
    rc = r->backend->ops->compare_set(r->backend, "round", ptr->len > 0 ? ptr->raw : NULL, ptr->len,
                                      desired, (size_t)dlen, &current, &clen);
    bool won = rc == 0 && clen == (size_t)dlen && memcmp(current, desired, clen) == 0;
    elastic_free(current);
    if (rc != 0 || !won) return rc;
    return publish_generation(r, round, (size_t)count, prev_formed ? round - 1 : 0, incarnation);
}

int rdzv__void_orphan(elastic_rdzv *r, uint64_t round)
{
    char key[64];
    int64_t count = 0;
    rdzv__key_round(key, sizeof key, round, "count");
    int rc = rdzv__read_int(r, key, 0, &count);
    if (rc != 0) return rc;
    if (count < 0 || count > INT32_MAX)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: bad count in %s", key);
    rdzv__info info = { .formed = false, .generation = round, .sealed_count = (int)count };
    bool won = false;
    rc = commit_info(r, round, &info, NULL, &won);
    if (rc != 0 || !won) return rc;
    ELASTIC_LOG_W("rdzv", "run %s: round %" PRIu64 " lost its sealer; voided", r->run_id, round);
    slot_plan plan = { 0 };
    rc = plan_alloc(&plan, (size_t)count, RDZV__VOID);
    if (rc == 0) rc = publish(r, round, 0, &plan);
    plan_free(&plan);
    return rc;
}

void rdzv__forget_round(elastic_rdzv *r, uint64_t round)
{
    static const char *const names[] = { "count", "back",   "gone", "finished",
                                         "info",  "formed", "end" };
    char key[64];
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(names); i++) {
        rdzv__key_round(key, sizeof key, round, names[i]);
        (void)r->backend->ops->del(r->backend, key);
    }
}

void rdzv__forget_slot(elastic_rdzv *r, uint64_t round, int slot)
{
    /* The slot's whole area (its wake-up and done marks too: nobody
     * watches a generation that has ended for everyone): one write on etcd. */
    char key[64];
    rdzv__key_slot(key, sizeof key, round, slot, "");
    (void)r->backend->ops->del_prefix(r->backend, key);
}
