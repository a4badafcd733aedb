/*
 * The run's incarnation (issue 26): every node of a run gets the same one;
 * a job the operator starts again on a fresh store (a c10d job whose store
 * host was lost) counts generations from 1 again and gets a larger one, so
 * checkpoint fencing, which orders (incarnation, generation), still sees it
 * as newer. A job started again on etcd with the same run id finds its keys
 * there: its generations go on from the old job's and its incarnation stays.
 */
#include "support/etcd_fixture.h"
#include "support/rdzv_fixture.h"

#include "common/clock.h"

#include <unistd.h>

#define NODES 2

/* Forms one generation of NODES nodes; every node agrees on the incarnation. */
static void form(rdzv_node *nodes, const elastic_rdzv_opts *base, uint64_t *generation,
                 uint64_t *incarnation)
{
    char ids[NODES][32];
    for (int i = 0; i < NODES; i++) {
        elastic_rdzv_opts o = *base;
        snprintf(ids[i], sizeof ids[i], "node-%d", i);
        o.node_id = ids[i];
        rdzv_node_open(&nodes[i], &o);
    }
    rdzv_nodes_form(nodes, NODES, 20000);
    rdzv_expect_group(nodes, NODES);
    *generation = nodes[0].result.generation;
    *incarnation = nodes[0].result.incarnation;
    ASSERT(*incarnation != 0);
    for (int i = 1; i < NODES; i++) {
        ASSERT_EQ(nodes[i].result.generation, *generation);
        if (nodes[i].result.incarnation != *incarnation)
            FAIL("node %d has incarnation %llu, node 0 %llu", i,
                 (unsigned long long)nodes[i].result.incarnation, (unsigned long long)*incarnation);
    }
}

/* A later generation of the same run (a worker failed: the runs here have
 * max_restarts 1) keeps the incarnation. */
static void reform_keeps_incarnation(rdzv_node *nodes, uint64_t generation, uint64_t incarnation)
{
    elastic_rdzv_cause cause;
    memset(&cause, 0, sizeof cause);
    cause.struct_size = sizeof cause;
    cause.kind = ELASTIC_RDZV_FAILURE;
    cause.rank = 0;
    cause.exit_code = 3;
    snprintf(cause.reason, sizeof cause.reason, "worker 0 exited with 3");
    ASSERT_OK(elastic_rdzv_end_generation(nodes[0].rdzv, &cause));
    for (int i = 1; i < NODES; i++) {
        elastic_rdzv_cause seen = { .struct_size = sizeof seen };
        ASSERT_OK(elastic_rdzv_watch(nodes[i].rdzv, test_scaled_ms(10000), &seen));
    }
    rdzv_nodes_form(nodes, NODES, 20000);
    for (int i = 0; i < NODES; i++) {
        ASSERT(nodes[i].result.generation > generation);
        ASSERT_EQ(nodes[i].result.incarnation, incarnation);
    }
}

TEST_TIMEOUT(rdzv_a_job_started_again_on_a_fresh_store_counts_from_1_with_a_larger_incarnation, 90)
{
    rdzv_env first;
    rdzv_env_start(&first);
    elastic_rdzv_opts o;
    rdzv_test_opts(&o, &first, "again", NODES, NODES);
    o.max_restarts = 1;
    rdzv_node nodes[NODES];
    uint64_t generation, incarnation;
    uint64_t before = elastic__wall_ms();
    form(nodes, &o, &generation, &incarnation);
    ASSERT(incarnation >= before && incarnation <= elastic__wall_ms()); /* the wall clock, in ms */
    reform_keeps_incarnation(nodes, generation, incarnation);
    /* The store is lost with the whole job (c10d); the operator starts it
     * again on a new one, at least a millisecond later. */
    rdzv_nodes_close(nodes, NODES);
    rdzv_env_stop(&first);
    while (elastic__wall_ms() <= incarnation) usleep(1000);
    rdzv_env second;
    rdzv_env_start(&second);
    rdzv_test_opts(&o, &second, "again", NODES, NODES);
    uint64_t generation2, incarnation2;
    form(nodes, &o, &generation2, &incarnation2);
    ASSERT_EQ(generation2, 1); /* a fresh store: generations from 1 again */
    if (incarnation2 <= incarnation)
        FAIL("incarnation %llu after %llu", (unsigned long long)incarnation2,
             (unsigned long long)incarnation);
    rdzv_nodes_close(nodes, NODES);
    rdzv_env_stop(&second);
}

/* A corrupt incarnation key is refused with the key's name, not taken as 0. */
TEST_TIMEOUT(rdzv_a_corrupt_incarnation_in_the_store_is_refused, 60)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_store *store;
    ASSERT_OK(elastic_store_connect(env.endpoint, NULL, &store));
    ASSERT_OK(elastic_store_set(store, "rdzv/bad/incarnation", "12ab", 4));
    elastic_store_close(store);
    elastic_rdzv_opts o;
    rdzv_test_opts(&o, &env, "bad", 1, 1);
    o.join_timeout_ms = test_scaled_ms(5000);
    rdzv_node node;
    rdzv_node_open(&node, &o);
    rdzv_node_join(&node);
    int rc = rdzv_node_wait(&node, 10000);
    ASSERT_EQ(rc, ELASTIC_ECORRUPT);
    ASSERT(strstr(node.detail, "incarnation") != NULL);
    rdzv_node_close(&node);
    rdzv_env_stop(&env);
}

static void etcd_opts(elastic_rdzv_opts *o, const etcd_cluster *c, const char *run_id)
{
    rdzv_env unused = { 0 };
    rdzv_test_opts(o, &unused, run_id, NODES, NODES);
    o->max_restarts = 1;
    o->endpoint = NULL;
    o->backend = ELASTIC_RDZV_BACKEND_ETCD;
    o->etcd_endpoints = c->endpoints;
    o->keepalive_interval_ms = 200;
    o->keepalive_timeout_ms = test_scaled_ms(1000);
}

/* etcd keeps the run's keys when every agent is gone: the job started
 * again with the same run id goes on from the old generations (so the
 * fence needs no incarnation there) and keeps its incarnation. */
TEST_TIMEOUT(rdzv_etcd_a_job_started_again_with_its_run_id_goes_on_with_its_generations, 120)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    elastic_rdzv_opts o;
    etcd_opts(&o, &c, "again");
    rdzv_node nodes[NODES];
    uint64_t generation, incarnation;
    form(nodes, &o, &generation, &incarnation);
    reform_keeps_incarnation(nodes, generation, incarnation);
    uint64_t last = nodes[0].result.generation;
    /* The last generation is ended before every node goes: a full one whose
     * members all vanish without ending it can keep the nodes started again
     * waiting as spares of it (a limit of its own, not this test's). */
    elastic_rdzv_cause cause;
    memset(&cause, 0, sizeof cause);
    cause.struct_size = sizeof cause;
    cause.kind = ELASTIC_RDZV_NODE_LEFT;
    cause.rank = -1;
    cause.exit_code = -1;
    snprintf(cause.reason, sizeof cause.reason, "every node goes");
    ASSERT_OK(elastic_rdzv_end_generation(nodes[0].rdzv, &cause));
    elastic_rdzv_cause seen = { .struct_size = sizeof seen };
    ASSERT_OK(elastic_rdzv_watch(nodes[1].rdzv, test_scaled_ms(10000), &seen));
    rdzv_nodes_close(nodes, NODES);
    etcd_opts(&o, &c, "again");
    uint64_t generation2, incarnation2;
    form(nodes, &o, &generation2, &incarnation2);
    if (generation2 <= last)
        FAIL("generation %llu after the old job's %llu", (unsigned long long)generation2,
             (unsigned long long)last);
    ASSERT_EQ(incarnation2, incarnation);
    rdzv_nodes_close(nodes, NODES);
    etcd_cluster_stop(&c);
}
