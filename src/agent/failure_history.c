/*
 * The job's failure history in the rendezvous' keys (failure_history.h).
 */
#include "agent/failure_history.h"

#include "common/common.h"
#include "common/failure_record.h"
#include "common/parse_int.h"
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING_PREFIX "agent/failures/"
#define RING_SEQ    "agent/failures_seq"

int agent__failure_history_put(elastic_rdzv *r, const failure_policy_entry *entry)
{
    char key[64], value[FAILURE_RECORD_MAX];
    size_t len = failure_record__encode(entry, value, sizeof value);
    if (len == 0) return elastic__fail(ELASTIC_EINVAL, "failure record does not encode");
    int64_t seq = 0;
    int rc = rdzv__job_add(r, RING_SEQ, 1, &seq);
    if (rc != 0) return rc;
    if (seq < 1) return elastic__fail(ELASTIC_ECORRUPT, "bad %s: %" PRId64, RING_SEQ, seq);
    snprintf(key, sizeof key, RING_PREFIX "%04" PRId64,
             (seq - 1) % AGENT_FAILURE_HISTORY_SLOTS);
    return rdzv__job_set(r, key, value, len);
}

static int by_time(const void *a, const void *b)
{
    const failure_policy_entry *x = a, *y = b;
    if (x->generation != y->generation) return x->generation < y->generation ? -1 : 1;
    if (x->time_ms != y->time_ms) return x->time_ms < y->time_ms ? -1 : 1;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return strcmp(x->node, y->node);
}

static bool same_entry(const failure_policy_entry *a, const failure_policy_entry *b)
{
    return a->generation == b->generation && a->rank == b->rank && strcmp(a->node, b->node) == 0;
}

/* Only "agent/failures/<slot>" with a slot of the ring: anything else under
 * the prefix is no record of ours. */
static bool ring_key(const char *key)
{
    size_t plen = strlen(RING_PREFIX), len = strlen(key);
    int64_t slot = 0;
    return len > plen && len - plen <= 8 &&
           elastic__parse_i64(NULL, key + plen, 0, AGENT_FAILURE_HISTORY_SLOTS - 1, &slot) == 0;
}

/* The ring's records, decoded (the rest skipped), sorted, one per failure. */
static int read_ring(elastic_rdzv *r, int timeout_ms, failure_policy_entry *entries, size_t *count)
{
    *count = 0;
    char **keys = NULL;
    size_t n = 0, kept = 0;
    int rc = rdzv__job_keys(r, RING_PREFIX, AGENT_FAILURE_HISTORY_SLOTS + 16, &keys, &n);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (ring_key(keys[i]) && kept < AGENT_FAILURE_HISTORY_SLOTS) keys[kept++] = keys[i];
    void **values = kept > 0 ? calloc(kept, sizeof *values) : NULL;
    size_t *lens = kept > 0 ? calloc(kept, sizeof *lens) : NULL;
    if (rc == 0 && kept > 0 && (values == NULL || lens == NULL))
        rc = elastic__fail(ELASTIC_ENOMEM, "out of memory");
    if (rc == 0 && kept > 0)
        rc = rdzv__job_multi_get(r, (const char *const *)keys, kept, timeout_ms, values, lens);
    for (size_t i = 0; rc == 0 && i < kept; i++)
        if (values[i] != NULL && failure_record__decode(values[i], lens[i], &entries[*count]) == 0)
            (*count)++;
    for (size_t i = 0; values != NULL && i < kept; i++) elastic_free(values[i]);
    free(values);
    free(lens);
    elastic_free(keys);
    if (rc != 0) return rc;
    qsort(entries, *count, sizeof *entries, by_time);
    size_t unique = 0; /* a retried write leaves two copies: one counts */
    for (size_t i = 0; i < *count; i++)
        if (unique == 0 || !same_entry(&entries[unique - 1], &entries[i]))
            entries[unique++] = entries[i];
    *count = unique;
    return 0;
}

int agent__failure_history_read(elastic_rdzv *r, int timeout_ms,
                                const failure_policy_config *config, failure_policy_history *out)
{
    memset(out, 0, sizeof *out);
    failure_policy_entry *entries = calloc(AGENT_FAILURE_HISTORY_SLOTS, sizeof *entries);
    if (entries == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    size_t count = 0;
    int rc = read_ring(r, timeout_ms, entries, &count);
    /* the newest the policy holds, replayed for its counters */
    size_t first = count > FAILURE_POLICY_MAX_ENTRIES ? count - FAILURE_POLICY_MAX_ENTRIES : 0;
    for (size_t i = first; rc == 0 && i < count; i++) {
        failure_policy_result res;
        failure_policy__decide(config, out, &entries[i], &res);
        failure_policy__record(out, &entries[i], &res);
    }
    free(entries);
    return rc;
}

int agent__failure_history_decide(elastic_rdzv *r, int timeout_ms,
                                  const failure_policy_config *config,
                                  const failure_policy_entry *latest, failure_policy_result *out)
{
    int rc = latest->consequence ? 0 : agent__failure_history_put(r, latest);
    if (rc != 0) return rc;
    failure_policy_history *all = calloc(1, sizeof *all);
    failure_policy_history *before = calloc(1, sizeof *before);
    if (all == NULL || before == NULL) rc = elastic__fail(ELASTIC_ENOMEM, "out of memory");
    if (rc == 0) rc = agent__failure_history_read(r, timeout_ms, config, all);
    /* The history as it stood before latest (what came in the same generation
     * earlier counts: another rank's failure at the same step is most_ranks'). */
    for (int i = 0; rc == 0 && i < all->count; i++) {
        const failure_policy_entry *e = &all->entries[i];
        if (same_entry(e, latest)) continue;
        if (e->generation > latest->generation ||
            (e->generation == latest->generation && e->time_ms > latest->time_ms))
            continue; /* after it: not what it is judged against */
        failure_policy_result res;
        failure_policy__decide(config, before, e, &res);
        failure_policy__record(before, e, &res);
    }
    if (rc == 0) failure_policy__decide(config, before, latest, out);
    free(before);
    free(all);
    return rc;
}
