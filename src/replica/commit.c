/*
 * The job-wide memory commit (replica.h, "memory-committed"): a step is
 * memory-committed once every node's shards of it have their R peer copies.
 * The nodes agree through the job's store, in rounds, without a leader:
 *
 *   memtier/g<gen>/round/<k>/step         the round's step: the first node to
 *                                         propose one sets it (compare_set); a
 *                                         node already past it that no longer
 *                                         holds it raises it to its newest
 *   memtier/g<gen>/round/<k>/committed    the record, written once by the node
 *                                         whose count completed the round
 *   memtier/g<gen>/count/<k>/<step>       nodes whose copies of that step are
 *                                         placed (outside the round's prefix,
 *                                         which the nodes watch)
 *
 * Rounds make the nodes replicate the same step: each one pushes the step
 * of the round, not whatever is newest on it (nodes that each pushed their
 * own newest could go on forever without a step every one of them pushed).
 * A step only rises within a round (a node behind waits until its trainer
 * saved it), and a round's step is greater than the previous round's, so
 * committed steps only grow.
 */
#include "replica/replica.h"

#include "common/parse_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static void round_key(char *out, size_t cap, uint64_t generation, uint64_t round, const char *what)
{
    snprintf(out, cap, "memtier/g%" PRIu64 "/round/%" PRIu64 "/%s", generation, round, what);
}

static int parse_step(const char *key, const void *value, size_t len, uint64_t *step)
{
    if (value == NULL || len == 0 || len > 20 ||
        elastic__parse_u64_n(NULL, value, len, 1, UINT64_MAX - 1, step) != 0)
        return elastic__fail(ELASTIC_EPROTO, "store key %s: not a step", key);
    return 0;
}

int replica__round_current(elastic_store *store, uint64_t generation, uint64_t round,
                           uint64_t *step)
{
    char key[96];
    round_key(key, sizeof key, generation, round, "step");
    void *value = NULL;
    size_t len = 0;
    *step = 0;
    int rc = elastic_store_try_get(store, key, &value, &len);
    if (rc == ELASTIC_ENOTFOUND) {
        elastic__clear_error();
        return 0;
    }
    if (rc == 0) rc = parse_step(key, value, len, step);
    elastic_free(value);
    return rc;
}

int replica__round_propose(elastic_store *store, uint64_t generation, uint64_t round,
                           uint64_t expected, uint64_t proposal, uint64_t *step)
{
    char key[96], want[24], had[24];
    round_key(key, sizeof key, generation, round, "step");
    int wlen = snprintf(want, sizeof want, "%" PRIu64, proposal);
    int hlen = snprintf(had, sizeof had, "%" PRIu64, expected);
    void *current = NULL;
    size_t clen = 0;
    int rc = elastic_store_compare_set(store, key, expected > 0 ? had : NULL,
                                       expected > 0 ? (size_t)hlen : 0, want, (size_t)wlen,
                                       &current, &clen);
    if (rc == 0) rc = parse_step(key, current, clen, step);
    elastic_free(current);
    return rc;
}

int replica__round_count_in(elastic_store *store, uint64_t generation, uint64_t round,
                            uint64_t step, int world, bool *completed)
{
    char key[96];
    *completed = false;
    /* Outside the round's prefix: the watchers wake for its step and its
     * record, not for every node's count (a raised step counts afresh). */
    snprintf(key, sizeof key, "memtier/g%" PRIu64 "/count/%" PRIu64 "/%" PRIu64, generation, round,
             step);
    int64_t count = 0;
    int rc = elastic_store_add(store, key, 1, &count);
    if (rc != 0 || count != world) return rc;
    /* The count is complete: this node writes the round's one record. */
    char text[24];
    int len = snprintf(text, sizeof text, "%" PRIu64, step);
    round_key(key, sizeof key, generation, round, "committed");
    rc = elastic_store_set(store, key, text, (size_t)len);
    *completed = rc == 0;
    return rc;
}

int replica__round_committed(elastic_store *store, uint64_t generation, uint64_t round, int wait_ms,
                             uint64_t *step)
{
    char key[96];
    round_key(key, sizeof key, generation, round, "committed");
    void *value = NULL;
    size_t len = 0;
    int rc = wait_ms > 0 ? elastic_store_get(store, key, wait_ms, &value, &len)
                         : elastic_store_try_get(store, key, &value, &len);
    if (rc == 0) rc = parse_step(key, value, len, step);
    elastic_free(value);
    return rc;
}

int replica__round_watch(elastic_store *store, uint64_t generation, uint64_t round,
                         uint64_t *revision, int wait_ms)
{
    char prefix[96];
    round_key(prefix, sizeof prefix, generation, round, "");
    uint64_t now = *revision;
    int rc = elastic_store_watch(store, prefix, *revision, wait_ms, &now);
    if (rc == 0) *revision = now;
    if (rc == ELASTIC_ETIMEDOUT) elastic__clear_error();
    return rc;
}

void replica__round_forget(elastic_store *store, uint64_t generation, uint64_t round, uint64_t step)
{
    char key[96];
    round_key(key, sizeof key, generation, round, "step");
    (void)elastic_store_delete(store, key);
    round_key(key, sizeof key, generation, round, "committed");
    (void)elastic_store_delete(store, key);
    snprintf(key, sizeof key, "memtier/g%" PRIu64 "/count/%" PRIu64 "/%" PRIu64, generation, round,
             step);
    (void)elastic_store_delete(store, key);
    elastic__clear_error(); /* absent already: nothing to forget */
}
