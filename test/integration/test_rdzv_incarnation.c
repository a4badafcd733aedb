/*
 * The run's incarnation (issue 26): every node of a run gets the same one;
 * a job the operator starts again on a fresh store (a c10d job whose store
 * host was lost) counts generations from 1 again and gets a larger one, so
 * checkpoint fencing, which orders (incarnation, generation), still sees it
 * as newer. (On etcd the run's keys stay: test_rdzv_etcd.c.)
 */
#include "support/rdzv_fixture.h"

#include "common/clock.h"

#include <unistd.h>

#define NODES 2

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
    rdzv_nodes_form_one_incarnation(nodes, NODES, &o, &generation, &incarnation);
    ASSERT(incarnation >= before && incarnation <= elastic__wall_ms()); /* the wall clock, in ms */
    rdzv_nodes_fail_and_reform(nodes, NODES, generation, incarnation);
    /* The store is lost with the whole job (c10d); the operator starts it
     * again on a new one, at least a millisecond later. */
    rdzv_nodes_close(nodes, NODES);
    rdzv_env_stop(&first);
    while (elastic__wall_ms() <= incarnation) usleep(1000);
    rdzv_env second;
    rdzv_env_start(&second);
    rdzv_test_opts(&o, &second, "again", NODES, NODES);
    uint64_t generation2, incarnation2;
    rdzv_nodes_form_one_incarnation(nodes, NODES, &o, &generation2, &incarnation2);
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
