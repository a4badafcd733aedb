/*
 * The etcd backend's batched operations against a real one-member etcd:
 * get_some (several keys, absent ones included, in one Txn), add_get with
 * two adds and no reads (two counters in one Txn, created when absent, exact
 * under contention), a
 * single key's wait that takes the value from its watch event, and a watch
 * from revision 0 that answers from one read when a key exists but still
 * reports a prefix whose keys came and went, and del_prefix (one node's keys
 * of a generation in one write); add_get (a join's adds and its view in one
 * Txn), set_leased_wait (the record and the assignment's read in one Txn,
 * then a watch), keys_at and watch_area (the monitor's watch, blind to the
 * area's assignment and record Puts, handing over the end mark's cause);
 * and what they save a join, counted by the nodes and by etcd.
 */
#include "support/etcd_fixture.h"
#include "support/rdzv_fixture.h"
#include "../../bench/etcd_counts.h"
#include "etcd/etcd.h"
#include "rdzv/backend.h"
#include "rdzv/backend_etcd.h"
#include "rdzv/rdzv.h"

#include <pthread.h>
#include <stdlib.h>

static rdzv__backend *open_backend(const etcd_cluster *c, const char *run_id)
{
    rdzv__etcd_conf conf = { .endpoints = c->endpoints, .timeout_ms = test_scaled_ms(5000) };
    rdzv__backend *b = NULL;
    ASSERT_OK(rdzv__backend_etcd_open(&conf, run_id, &b));
    return b;
}

static uint64_t messages(rdzv__backend *b)
{
    return __atomic_load_n(&b->traffic.messages, __ATOMIC_RELAXED);
}

TEST_TIMEOUT(rdzv_etcd_backend_get_some_reads_several_keys_in_one_message, 60)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    rdzv__backend *b = open_backend(&c, "some");
    ASSERT_OK(b->ops->set(b, "a", "one", 3));
    ASSERT_OK(b->ops->set(b, "c", "three", 5));
    int64_t counted = 0;
    ASSERT_OK(b->ops->add(b, "n", 1, &counted));
    const char *keys[] = { "a", "b", "c", "n" };
    void *values[4];
    size_t lens[4];
    uint64_t before = messages(b);
    ASSERT_OK(rdzv__etcd_get_some(b, keys, 4, values, lens));
    ASSERT_EQ(messages(b) - before, 1);
    ASSERT_STR_EQ((char *)values[0], "one");
    ASSERT(values[1] == NULL && lens[1] == 0); /* absent, not an error */
    ASSERT_STR_EQ((char *)values[2], "three");
    ASSERT_STR_EQ((char *)values[3], "1"); /* a counter reads as its count */
    for (int i = 0; i < 4; i++) elastic_free(values[i]);
    /* More keys than one Txn may hold is the caller's error, said so. */
    const char *many[ETCD__MAX_TXN_OPS + 1];
    void *many_values[ETCD__MAX_TXN_OPS + 1];
    size_t many_lens[ETCD__MAX_TXN_OPS + 1];
    for (int i = 0; i <= ETCD__MAX_TXN_OPS; i++) many[i] = "a";
    ASSERT_ERR(rdzv__etcd_get_some(b, many, ETCD__MAX_TXN_OPS + 1, many_values, many_lens),
               ELASTIC_EINVAL);
    b->ops->close(b);
    etcd_cluster_stop(&c);
}

typedef struct pair_adder {
    rdzv__backend *b;
    int64_t first[20], second[20];
    int rc;
} pair_adder;

/* Two counters +1 in one call: add_get with no reads (what add_pair was). */
static int add_pair(rdzv__backend *b, const char *key1, const char *key2, int64_t *r1, int64_t *r2)
{
    const char *keys[2] = { key1, key2 };
    int64_t sums[2] = { 0, 0 };
    int rc = b->ops->add_get(b, keys, 2, sums, NULL, 0, NULL, NULL);
    if (rc == 0) *r1 = sums[0], *r2 = sums[1];
    return rc;
}

static void *pair_main(void *arg)
{
    pair_adder *a = arg;
    for (int i = 0; i < 20 && a->rc == 0; i++)
        a->rc = add_pair(a->b, "count", "back", &a->first[i], &a->second[i]);
    return NULL;
}

TEST_TIMEOUT(rdzv_etcd_backend_add_pair_counts_both_exactly_under_contention, 90)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    /* Four clients start on absent counters at once: whoever creates them,
     * every result of each counter is handed out exactly once. */
    pair_adder adders[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        adders[i] = (pair_adder){ .b = open_backend(&c, "pair") };
        ASSERT_EQ(pthread_create(&threads[i], NULL, pair_main, &adders[i]), 0);
    }
    bool seen_first[81] = { false }, seen_second[81] = { false };
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        ASSERT_OK(adders[i].rc);
        for (int j = 0; j < 20; j++) {
            int64_t f = adders[i].first[j], s = adders[i].second[j];
            ASSERT(f >= 1 && f <= 80 && s >= 1 && s <= 80);
            if (seen_first[f] || seen_second[s])
                FAIL("add_pair returned %lld/%lld twice", (long long)f, (long long)s);
            seen_first[f] = seen_second[s] = true;
        }
    }
    rdzv__backend *b = adders[0].b;
    int64_t one = 0, two = 0;
    /* One counter and one absent key; then a plain number, which add_pair
     * still adds to (through add's compare-and-set). */
    uint64_t before = messages(b);
    ASSERT_OK(add_pair(b, "count", "fresh", &one, &two));
    ASSERT_EQ(one, 81);
    ASSERT_EQ(two, 1);
    ASSERT_EQ(messages(b) - before, 1);
    ASSERT_OK(b->ops->set(b, "plain", "40", 2));
    ASSERT_OK(add_pair(b, "fresh", "plain", &one, &two));
    ASSERT_EQ(one, 2);
    ASSERT_EQ(two, 41);
    ASSERT_OK(b->ops->set(b, "word", "abc", 3));
    ASSERT_ERR(add_pair(b, "fresh", "word", &one, &two), ELASTIC_EINVAL);
    /* A single add on an absent key is one request too (no create race). */
    before = messages(b);
    ASSERT_OK(b->ops->add(b, "single", 1, &one));
    ASSERT_EQ(one, 1);
    ASSERT_EQ(messages(b) - before, 1);
    for (int i = 0; i < 4; i++) adders[i].b->ops->close(adders[i].b);
    etcd_cluster_stop(&c);
}

typedef struct late_put {
    rdzv__backend *b;
    const char *key, *value;
    int delay_ms;
} late_put;

static void *late_put_main(void *arg)
{
    late_put *d = arg;
    struct timespec pause = { d->delay_ms / 1000, (long)(d->delay_ms % 1000) * 1000000L };
    nanosleep(&pause, NULL); /* late on purpose: the reader must be waiting */
    (void)d->b->ops->set(d->b, d->key, d->value, strlen(d->value));
    return NULL;
}

TEST_TIMEOUT(rdzv_etcd_backend_one_key_wait_takes_the_value_from_its_event, 60)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    rdzv__backend *b = open_backend(&c, "wait"), *writer = open_backend(&c, "wait");
    late_put d = { .b = writer, .key = "assignment", .value = "A1 rank 7", .delay_ms = 300 };
    pthread_t thread;
    ASSERT_EQ(pthread_create(&thread, NULL, late_put_main, &d), 0);
    const char *keys[] = { "assignment" };
    void *value = NULL;
    size_t len = 0;
    uint64_t before = messages(b);
    ASSERT_OK(b->ops->multi_get(b, keys, 1, test_scaled_ms(5000), &value, &len));
    pthread_join(thread, NULL);
    ASSERT_EQ(len, strlen("A1 rank 7"));
    ASSERT_STR_EQ((char *)value, "A1 rank 7");
    elastic_free(value);
    /* the read that missed and the watch whose event carried the value */
    ASSERT_EQ(messages(b) - before, 2);
    writer->ops->close(writer);
    b->ops->close(b);
    etcd_cluster_stop(&c);
}

TEST_TIMEOUT(rdzv_etcd_backend_watch_from_zero_reads_once_and_sees_past_deletes, 60)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    rdzv__backend *b = open_backend(&c, "zero");
    uint64_t revision = 0, again = 0;
    ASSERT_OK(b->ops->set(b, "area/rec", "1", 1));
    /* Keys exist: changed since revision 0, answered by one read at once. */
    ASSERT_OK(b->ops->watch(b, "area/", 0, test_scaled_ms(2000), &revision));
    ASSERT(revision > 0);
    /* From the revision it answered, only news counts. */
    ASSERT_ERR(b->ops->watch(b, "area/", revision, 300, &again), ELASTIC_ETIMEDOUT);
    ASSERT_OK(b->ops->del(b, "area/rec"));
    ASSERT_OK(b->ops->watch(b, "area/", revision, test_scaled_ms(2000), &again));
    ASSERT(again > revision);
    /* A prefix that is empty now but had keys changed since 0 as well: a
     * member that came and went before anyone watched is still news. */
    again = 0;
    ASSERT_OK(b->ops->watch(b, "area/", 0, test_scaled_ms(2000), &again));
    ASSERT(again > 0);
    /* A prefix that never had a key waits. */
    ASSERT_ERR(b->ops->watch(b, "never/", 0, 300, &again), ELASTIC_ETIMEDOUT);
    b->ops->close(b);
    etcd_cluster_stop(&c);
}

TEST_TIMEOUT(rdzv_etcd_backend_del_prefix_clears_one_area_in_one_write, 60)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    rdzv__backend *b = open_backend(&c, "clear");
    ASSERT(b->ops->del_prefix != NULL);
    ASSERT_OK(b->ops->set(b, "r/1/n/1/rec", "R", 1));
    ASSERT_OK(b->ops->set(b, "r/1/n/1/a", "A", 1));
    ASSERT_OK(b->ops->set(b, "r/1/n/10/rec", "R", 1)); /* shares the digits, not the area */
    uint64_t before = messages(b);
    ASSERT_OK(b->ops->del_prefix(b, "r/1/n/1/"));
    ASSERT_EQ(messages(b) - before, 1);
    void *value = NULL;
    size_t len = 0;
    ASSERT_ERR(b->ops->get(b, "r/1/n/1/rec", &value, &len), ELASTIC_ENOTFOUND);
    ASSERT_ERR(b->ops->get(b, "r/1/n/1/a", &value, &len), ELASTIC_ENOTFOUND);
    ASSERT_OK(b->ops->get(b, "r/1/n/10/rec", &value, &len));
    elastic_free(value);
    ASSERT_OK(b->ops->del_prefix(b, "r/1/n/1/"));          /* nothing left: still fine */
    ASSERT_ERR(b->ops->del_prefix(b, ""), ELASTIC_EINVAL); /* never the whole run */
    b->ops->close(b);
    etcd_cluster_stop(&c);
}

TEST_TIMEOUT(rdzv_etcd_backend_add_get_adds_then_reads_what_the_adds_left_in_one_txn, 60)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    rdzv__backend *b = open_backend(&c, "addget");
    ASSERT_OK(b->ops->set(b, "round", "3 2 node-1", 10));
    const char *adds[2] = { "count", "back" }, *gets[3] = { "round", "count", "absent" };
    int64_t sums[2] = { 0, 0 };
    void *values[3];
    size_t lens[3];
    for (int64_t expect = 1; expect <= 3; expect++) {
        uint64_t before = messages(b);
        ASSERT_OK(b->ops->add_get(b, adds, 2, sums, gets, 3, values, lens));
        ASSERT_EQ(messages(b) - before, 1); /* absent counters too: created in the same Txn */
        ASSERT_EQ(sums[0], expect);
        ASSERT_EQ(sums[1], expect);
        ASSERT_STR_EQ((char *)values[0], "3 2 node-1");
        char text[24];
        snprintf(text, sizeof text, "%lld", (long long)expect);
        ASSERT_STR_EQ((char *)values[1], text); /* the read sees this Txn's add */
        ASSERT(values[2] == NULL && lens[2] == 0);
        for (int i = 0; i < 3; i++) elastic_free(values[i]);
    }
    /* A counter that holds a plain number is still added to (add's loop),
     * and the reads are made after it. */
    ASSERT_OK(b->ops->set(b, "back", "40", 2));
    ASSERT_OK(b->ops->add_get(b, adds, 2, sums, gets + 1, 1, values, lens));
    ASSERT_EQ(sums[0], 4);
    ASSERT_EQ(sums[1], 41);
    ASSERT_STR_EQ((char *)values[0], "4");
    elastic_free(values[0]);
    ASSERT_OK(b->ops->set(b, "back", "abc", 3));
    ASSERT_ERR(b->ops->add_get(b, adds, 2, sums, gets, 1, values, lens), ELASTIC_EINVAL);
    ASSERT(values[0] == NULL);
    ASSERT_ERR(b->ops->add_get(b, adds, 0, sums, gets, 1, values, lens), ELASTIC_EINVAL);
    /* Guarded on a key's absence: added while "fresh" is absent, in one
     * request; once it exists, nothing added and the reads alone. */
    const char *guessed[1] = { "guess" }, *view[2] = { "fresh", "guess" };
    bool added = false;
    uint64_t before = messages(b);
    ASSERT_OK(b->ops->add_get_unless(b, "fresh", guessed, 1, sums, view, 2, values, lens, &added));
    ASSERT_EQ(messages(b) - before, 1);
    ASSERT(added);
    ASSERT_EQ(sums[0], 1);
    ASSERT(values[0] == NULL);
    ASSERT_STR_EQ((char *)values[1], "1");
    elastic_free(values[1]);
    ASSERT_OK(b->ops->set(b, "fresh", "2 1 node-0", 10));
    before = messages(b);
    ASSERT_OK(b->ops->add_get_unless(b, "fresh", guessed, 1, sums, view, 2, values, lens, &added));
    ASSERT_EQ(messages(b) - before, 1);
    ASSERT(!added);
    ASSERT_EQ(sums[0], 0);
    ASSERT_STR_EQ((char *)values[0], "2 1 node-0");
    ASSERT_STR_EQ((char *)values[1], "1"); /* not added to */
    for (int i = 0; i < 2; i++) elastic_free(values[i]);
    b->ops->close(b);
    etcd_cluster_stop(&c);
}

TEST_TIMEOUT(rdzv_etcd_backend_set_leased_wait_writes_and_reads_in_one_txn_then_watches, 60)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    rdzv__backend *b = open_backend(&c, "slw"), *writer = open_backend(&c, "slw");
    uint64_t lease = 0, revision = 0;
    ASSERT_OK(b->ops->lease_grant(b, test_scaled_ms(5000), 500, &lease));
    /* The assignment is there already: one request. */
    ASSERT_OK(writer->ops->set(writer, "r/1/n/1/a", "A-first", 7));
    void *value = NULL;
    size_t len = 0;
    uint64_t before = messages(b);
    ASSERT_OK(b->ops->set_leased_wait(b, "r/1/n/1/rec", "R1", 2, lease, "r/1/n/1/a", 1000, &value,
                                      &len, &revision));
    ASSERT_EQ(messages(b) - before, 1);
    ASSERT_STR_EQ((char *)value, "A-first");
    elastic_free(value);
    ASSERT(revision > 0);
    void *rec = NULL;
    size_t rec_len = 0;
    ASSERT_OK(b->ops->get(b, "r/1/n/1/rec", &rec, &rec_len));
    ASSERT_STR_EQ((char *)rec, "R1");
    elastic_free(rec);
    /* The same record written again (a re-sent request) keeps the revision
     * it was created at: a monitor follows from there. */
    uint64_t again = 0;
    ASSERT_OK(b->ops->set_leased_wait(b, "r/1/n/1/rec", "R1", 2, lease, "r/1/n/1/a", 1000, &value,
                                      &len, &again));
    elastic_free(value);
    ASSERT_EQ(again, revision);
    /* Not there yet: the watch from the Txn's revision carries it. */
    late_put d = { .b = writer, .key = "r/1/n/2/a", .value = "A-late", .delay_ms = 300 };
    pthread_t thread;
    ASSERT_EQ(pthread_create(&thread, NULL, late_put_main, &d), 0);
    uint64_t second = 0;
    before = messages(b);
    ASSERT_OK(b->ops->set_leased_wait(b, "r/1/n/2/rec", "R2", 2, lease, "r/1/n/2/a",
                                      test_scaled_ms(5000), &value, &len, &second));
    pthread_join(thread, NULL);
    ASSERT_EQ(messages(b) - before, 2);
    ASSERT_STR_EQ((char *)value, "A-late");
    elastic_free(value);
    ASSERT(second > revision);
    /* No answer in time: the record is written all the same. */
    ASSERT_ERR(b->ops->set_leased_wait(b, "r/1/n/3/rec", "R3", 2, lease, "r/1/n/3/a", 200, &value,
                                       &len, &revision),
               ELASTIC_ETIMEDOUT);
    ASSERT(value == NULL);
    ASSERT_OK(b->ops->get(b, "r/1/n/3/rec", &rec, &rec_len));
    elastic_free(rec);
    /* A lease that ended: nothing written, said as the set's ENOTFOUND. */
    ASSERT_OK(b->ops->lease_revoke(b, lease));
    ASSERT_ERR(b->ops->set_leased_wait(b, "r/1/n/4/rec", "R4", 2, lease, "r/1/n/4/a", 200, &value,
                                       &len, &revision),
               ELASTIC_ENOTFOUND);
    ASSERT_ERR(b->ops->get(b, "r/1/n/4/rec", &rec, &rec_len), ELASTIC_ENOTFOUND);
    writer->ops->close(writer);
    b->ops->close(b);
    etcd_cluster_stop(&c);
}

TEST_TIMEOUT(rdzv_etcd_backend_watch_area_wakes_for_what_a_monitor_follows_only, 60)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    rdzv__backend *b = open_backend(&c, "area"), *other = open_backend(&c, "area");
    ASSERT(b->ops->keys_at != NULL && b->ops->watch_area != NULL);
    ASSERT_OK(other->ops->set(other, "r/1/n/2/rec", "R", 1));
    char **names = NULL;
    size_t n = 0;
    uint64_t listed = 0, revision = 0;
    ASSERT_OK(b->ops->keys_at(b, "r/1/n/2/", 16, &names, &n, &listed));
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(names[0], "r/1/n/2/rec");
    elastic_free(names);
    ASSERT(listed > 0);
    /* The sealer's assignment and a record written again are no change. */
    ASSERT_OK(other->ops->set(other, "r/1/n/2/a", "A", 1));
    ASSERT_OK(other->ops->set(other, "r/1/n/2/rec", "R", 1));
    void *end = NULL;
    size_t end_len = 0;
    ASSERT_ERR(b->ops->watch_area(b, "r/1/n/2/", listed, 300, &revision, &end, &end_len),
               ELASTIC_ETIMEDOUT);
    /* The record's end is, with no value handed over. */
    ASSERT_OK(other->ops->del(other, "r/1/n/2/rec"));
    ASSERT_OK(
        b->ops->watch_area(b, "r/1/n/2/", listed, test_scaled_ms(2000), &revision, &end, &end_len));
    ASSERT(revision > listed);
    ASSERT(end == NULL);
    /* The end mark is, and hands over what it holds. */
    uint64_t after_delete = revision;
    ASSERT_OK(other->ops->set(other, "r/1/n/2/e", "C1 the cause", 12));
    ASSERT_OK(b->ops->watch_area(b, "r/1/n/2/", after_delete, test_scaled_ms(2000), &revision, &end,
                                 &end_len));
    ASSERT(revision > after_delete);
    ASSERT(end != NULL);
    ASSERT_EQ(end_len, 12);
    ASSERT_STR_EQ((char *)end, "C1 the cause");
    elastic_free(end);
    /* A kick (any other key of the area) wakes it too. */
    uint64_t after_end = revision;
    ASSERT_OK(other->ops->set(other, "r/1/n/2/x1", "1", 1));
    ASSERT_OK(b->ops->watch_area(b, "r/1/n/2/", after_end, test_scaled_ms(2000), &revision, &end,
                                 &end_len));
    ASSERT(revision > after_end && end == NULL);
    /* Not an area: refused, said so. */
    ASSERT_ERR(b->ops->watch_area(b, "r/1/n/2", after_end, 100, &revision, &end, &end_len),
               ELASTIC_EINVAL);
    other->ops->close(other);
    b->ops->close(b);
    etcd_cluster_stop(&c);
}

/* ---- requests per join ----
 * How many requests a node sends etcd to join with those calls: six nodes form and re-form after a lost one, once over the
 * calls as they are and once with the composites made as plain calls in
 * sequence (backend_seq.c, as a store server from before batches gets
 * them), against a real one-member etcd. The counts
 * are the nodes' own (one per request: keep-alives are not counted) beside
 * what etcd counted itself (its Raft proposals, from /metrics).
 */

#define NODES 6

typedef struct counted_join {
    rdzv_node *node;
    uint64_t at_return; /* the node's messages right when next() returned */
} counted_join;

static uint64_t messages_of(elastic_rdzv *r)
{
    return __atomic_load_n(&r->backend->traffic.messages, __ATOMIC_RELAXED);
}

static void *join_main(void *arg)
{
    counted_join *j = arg;
    j->node->rc = elastic_rdzv_next(j->node->rdzv, &j->node->result);
    j->at_return = messages_of(j->node->rdzv);
    if (j->node->rc != 0)
        snprintf(j->node->detail, sizeof j->node->detail, "%s", elastic_last_error());
    return NULL;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Joins the nodes at once; counts[i]: what each sent from `before[i]` to its
 * return, sorted (the sealer and the node that reported a loss do more). */
static void join_counted(rdzv_node **nodes, int n, const uint64_t *before, uint64_t *counts)
{
    counted_join joins[NODES];
    pthread_t threads[NODES];
    for (int i = 0; i < n; i++) {
        joins[i] = (counted_join){ .node = nodes[i] };
        nodes[i]->result = (elastic_rdzv_result){ .struct_size = sizeof nodes[i]->result };
        ASSERT_EQ(pthread_create(&threads[i], NULL, join_main, &joins[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        if (nodes[i]->rc != 0) FAIL("join %d: %s", i, nodes[i]->detail);
        counts[i] = joins[i].at_return - before[i];
    }
    qsort(counts, (size_t)n, sizeof *counts, compare_u64);
}

typedef struct phase_counts {
    uint64_t form[NODES], reform[NODES - 1]; /* per node, sorted */
    double proposals;                        /* etcd's, over both phases */
} phase_counts;

static rdzv__backend_ops unbatched_ops[NODES];

/* A listing with no revision, as a store server from before batches says. */
static int keys_at_unsaid(rdzv__backend *b, const char *prefix, size_t max, char ***keys, size_t *n,
                          uint64_t *revision)
{
    *keys = NULL;
    *n = 0;
    return ELASTIC_EUNSUPPORTED;
}

static phase_counts form_lose_reform(const etcd_cluster *c, const char *run_id, bool batched)
{
    elastic_rdzv_opts o;
    rdzv_node nodes[NODES];
    rdzv_node *all[NODES], *left[NODES - 1];
    char ids[NODES][32];
    uint64_t before[NODES];
    for (int i = 0; i < NODES; i++) {
        rdzv_env unused = { 0 };
        rdzv_test_opts(&o, &unused, run_id, 1, NODES);
        o.endpoint = NULL;
        o.backend = ELASTIC_RDZV_BACKEND_ETCD;
        o.etcd_endpoints = c->endpoints;
        o.keepalive_interval_ms = 200;
        o.keepalive_timeout_ms = test_scaled_ms(2000);
        snprintf(ids[i], sizeof ids[i], "node-%d", i);
        o.node_id = ids[i];
        rdzv_node_open(&nodes[i], &o);
        all[i] = &nodes[i];
        if (!batched) { /* the plain calls in sequence (backend_seq.c), not the batches */
            rdzv__backend *b = nodes[i].rdzv->backend;
            unbatched_ops[i] = *b->ops;
            unbatched_ops[i].add_get = rdzv__seq_add_get;
            unbatched_ops[i].add_get_unless = rdzv__seq_add_get_unless;
            unbatched_ops[i].set_leased_wait = rdzv__seq_set_leased_wait;
            unbatched_ops[i].keys_at = keys_at_unsaid;
            unbatched_ops[i].watch_area = rdzv__seq_watch_area;
            b->ops = &unbatched_ops[i];
        }
        before[i] = messages_of(nodes[i].rdzv);
    }
    phase_counts m;
    etcd_counts etcd0, etcd1;
    ASSERT_EQ(etcd_counts_read(c->endpoints, &etcd0), 0);
    join_counted(all, NODES, before, m.form);
    rdzv_expect_group(nodes, NODES);
    int victim = 0;
    while (nodes[victim].result.group_rank != 2) victim++;
    uint64_t first = nodes[victim].result.generation;
    rdzv_node_close(&nodes[victim]); /* its lease is revoked: the record goes at once */
    int n = 0;
    for (int i = 0; i < NODES; i++)
        if (i != victim) {
            before[n] = messages_of(nodes[i].rdzv);
            left[n++] = &nodes[i];
        }
    for (int i = 0; i < n; i++) {
        elastic_rdzv_cause cause = { .struct_size = sizeof cause };
        int rc = elastic_rdzv_watch(left[i]->rdzv, test_scaled_ms(10000), &cause);
        if (rc != 0)
            FAIL("%s: node %d (rank %d) did not see rank 2 lost: %s",
                 batched ? "batched" : "unbatched", i, left[i]->result.group_rank,
                 elastic_last_error());
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
        ASSERT_STR_EQ(cause.node_id, ids[victim]);
        ASSERT_EQ(cause.generation, first);
    }
    join_counted(left, n, before, m.reform);
    ASSERT_EQ(etcd_counts_read(c->endpoints, &etcd1), 0);
    m.proposals = etcd1.v[ETCD_PROPOSALS] - etcd0.v[ETCD_PROPOSALS];
    for (int i = 0; i < n; i++) {
        ASSERT(left[i]->result.generation > first);
        ASSERT_EQ(left[i]->result.group_world_size, NODES - 1);
        ASSERT_EQ(left[i]->result.generation, left[0]->result.generation);
    }
    /* the new generation is watched too: losing another ends it */
    rdzv_node *second = left[0]->result.group_rank == 0 ? left[1] : left[0];
    const char *second_id = ids[second - nodes];
    rdzv_node_close(second);
    for (int i = 0; i < n; i++) {
        if (left[i] == second) continue;
        elastic_rdzv_cause cause = { .struct_size = sizeof cause };
        ASSERT_OK(elastic_rdzv_watch(left[i]->rdzv, test_scaled_ms(10000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
        ASSERT_STR_EQ(cause.node_id, second_id);
    }
    for (int i = 0; i < n; i++)
        if (left[i] != second) rdzv_node_close(left[i]);
    return m;
}

TEST_TIMEOUT(rdzv_etcd_a_node_joins_and_rejoins_in_three_requests, 120)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    phase_counts batched = form_lose_reform(&c, "batched", true);
    phase_counts unbatched = form_lose_reform(&c, "unbatched", false);
    const phase_counts *both[2] = { &batched, &unbatched };
    for (int k = 0; k < 2; k++) {
        fprintf(stderr, "# %s: requests a node, form", k == 0 ? "batched" : "unbatched");
        for (int i = 0; i < NODES; i++)
            fprintf(stderr, " %llu", (unsigned long long)both[k]->form[i]);
        fprintf(stderr, "; re-form");
        for (int i = 0; i < NODES - 1; i++)
            fprintf(stderr, " %llu", (unsigned long long)both[k]->reform[i]);
        fprintf(stderr, "; etcd proposals %.0f\n", both[k]->proposals);
    }
    /* A newcomer and a survivor alike: the adds with the view (a newcomer's
     * guarded on round 1 being open: no read of the round pointer first),
     * the record with the assignment's read, its watch; a survivor's wake
     * carried the cause. Each may also have started its monitor's watch by
     * the time next() returned; the sealer and the reporter do more. */
    for (int i = 0; i < NODES / 2; i++)
        if (batched.form[i] > 4)
            FAIL("a newcomer sent %llu requests to join", (unsigned long long)batched.form[i]);
    for (int i = 0; i < (NODES - 1) / 2; i++)
        if (batched.reform[i] > 4)
            FAIL("a survivor sent %llu requests to rejoin", (unsigned long long)batched.reform[i]);
    /* Without the batches (backend_seq.c's plain calls) a newcomer sent 8
     * here (the round's read, the add, three reads, the record, the
     * assignment's read and watch) and a survivor 10 (two adds, four reads,
     * the record, the assignment's read and watch, the end's read), each
     * before its monitor's first look. */
    if (batched.form[0] + 2 > unbatched.form[0] || batched.reform[0] + 2 > unbatched.reform[0])
        FAIL("the batches save too little: the quietest node's form %llu vs %llu, re-form "
             "%llu vs %llu",
             (unsigned long long)batched.form[0], (unsigned long long)unbatched.form[0],
             (unsigned long long)batched.reform[0], (unsigned long long)unbatched.reform[0]);
    /* The same writes, batched or not: one Raft round for a join's adds, one
     * for its record. Give or take the monitors' wake-up kicks and lease
     * bookkeeping, which follow the timing, not the protocol (a node more
     * in each would be 6). */
    if (batched.proposals > unbatched.proposals + 2)
        FAIL("etcd proposals: %.0f batched, %.0f without", batched.proposals, unbatched.proposals);
    etcd_cluster_stop(&c);
}
