/*
 * A member stepping aside (the straggler eviction's rendezvous half,
 * src/rdzv/evict.c): refused while no spare waits and min_nodes needs it;
 * with a spare waiting it ends the generation as NODE_LEFT, names the spare,
 * costs no budget, and the others re-form at once (it is counted gone).
 */
#include "support/rdzv_fixture.h"
#include "rdzv/rdzv.h"

static void open_named(rdzv_node *node, elastic_rdzv_opts *o, const char *name)
{
    o->node_id = name;
    rdzv_node_open(node, o);
}

TEST(rdzv_step_aside_waits_for_a_spare_then_hands_over_without_budget)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "aside", 2, 2); /* max_restarts 0: a FAILURE would shut the job */
    open_named(&nodes[0], &o, "fast");
    open_named(&nodes[1], &o, "slow");
    open_named(&nodes[2], &o, "spare");
    rdzv_nodes_form(nodes, 2, 15000);
    uint64_t first = nodes[0].result.generation;
    rdzv__step_aside_result r;
    ASSERT_OK(rdzv__step_aside(nodes[1].rdzv, "straggler evicted: test", &r));
    ASSERT(!r.stepped_aside); /* 2:2 and nobody waiting: it must stay */
    ASSERT_EQ(r.waiting, 0);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_ERR(elastic_rdzv_watch(nodes[0].rdzv, 0, &cause), ELASTIC_ETIMEDOUT);
    rdzv_node_join(&nodes[2]); /* the job is full: a spare */
    /* Asked again until the spare's record is there (each miss paced by a bounded watch). */
    uint64_t deadline = rdzv_test_now_ms() + (uint64_t)test_scaled_ms(10000);
    do {
        ASSERT_OK(rdzv__step_aside(nodes[1].rdzv, "straggler evicted: test", &r));
        if (!r.stepped_aside)
            ASSERT_ERR(elastic_rdzv_watch(nodes[0].rdzv, 50, &cause), ELASTIC_ETIMEDOUT);
    } while (!r.stepped_aside && rdzv_test_now_ms() < deadline);
    ASSERT(r.stepped_aside);
    ASSERT_EQ(r.waiting, 1);
    ASSERT_STR_EQ(r.replacement, "spare");
    ASSERT_EQ(r.generation, first);
    ASSERT_OK(elastic_rdzv_watch(nodes[0].rdzv, test_scaled_ms(10000), &cause));
    ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LEFT);
    ASSERT_STR_EQ(cause.node_id, "slow");
    /* The survivor does not wait for the evicted node (last call is 60 s here). */
    uint64_t started = rdzv_test_now_ms();
    rdzv_node_join(&nodes[0]);
    rdzv_node_expect_joined(&nodes[0], 15000);
    rdzv_node_expect_joined(&nodes[2], 15000);
    ASSERT(rdzv_test_now_ms() - started < (uint64_t)test_scaled_ms(10000));
    ASSERT(nodes[2].result.generation > first);
    ASSERT_EQ(nodes[2].result.group_world_size, 2);
    ASSERT_EQ(nodes[0].result.restart_count, 0);
    ASSERT_ERR(elastic_rdzv_first_failure(nodes[0].rdzv, &cause), ELASTIC_ENOTFOUND);
    rdzv_nodes_close(nodes, 3);
    rdzv_env_stop(&env);
}

TEST(rdzv_step_aside_allowed_when_min_nodes_keeps_the_job)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "aside3", 2, 3);
    rdzv_nodes_open(nodes, 3, &o);
    rdzv_nodes_form(nodes, 3, 15000);
    rdzv__step_aside_result r;
    ASSERT_OK(rdzv__step_aside(nodes[2].rdzv, "straggler evicted: test", &r));
    ASSERT(r.stepped_aside);
    ASSERT_EQ(r.waiting, 0);
    ASSERT_STR_EQ(r.replacement, "");
    /* Stepping aside twice in one generation: nothing more happens. */
    ASSERT_ERR(rdzv__step_aside(nodes[2].rdzv, "again", &r), ELASTIC_ESTATE);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(elastic_rdzv_watch(nodes[i].rdzv, test_scaled_ms(10000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LEFT);
        rdzv_node_join(&nodes[i]);
    }
    for (int i = 0; i < 2; i++) rdzv_node_expect_joined(&nodes[i], 15000);
    rdzv_expect_group(nodes, 2);
    ASSERT_EQ(nodes[0].result.restart_count, 0);
    rdzv_nodes_close(nodes, 3);
    rdzv_env_stop(&env);
}
