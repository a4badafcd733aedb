/*
 * How many requests a node sends etcd to join, and that the batched calls
 * behind those counts (add_get_unless, add_get, set_leased_wait, keys_at,
 * watch_area) keep
 * their promises: six nodes form and re-form after a lost one, once over the
 * calls as they are and once with the batched ones taken away (the calls
 * the backend made before them), against a real one-member etcd. The counts
 * are the nodes' own (one per request: keep-alives are not counted) beside
 * what etcd counted itself (its Raft proposals, from /metrics).
 */
#include "support/etcd_fixture.h"
#include "support/rdzv_fixture.h"
#include "../../bench/etcd_counts.h"
#include "rdzv/rdzv.h"

#include <stdlib.h>

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
        if (!batched) { /* the calls the backend made before its batches */
            rdzv__backend *b = nodes[i].rdzv->backend;
            unbatched_ops[i] = *b->ops;
            unbatched_ops[i].add_get = NULL;
            unbatched_ops[i].add_get_unless = NULL;
            unbatched_ops[i].set_leased_wait = NULL;
            unbatched_ops[i].keys_at = NULL;
            unbatched_ops[i].watch_area = NULL;
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
    /* Without the batches a newcomer sends 6 (the adds, the record, the
     * view, the assignment's read and watch apart) and a survivor 6 (with
     * the end's read), each before its monitor's first look. */
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
