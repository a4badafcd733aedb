/*
 * The job-wide bound on infrastructure failures (rdzv__consume_infra,
 * src/rdzv/infra_bound.c): a generation a lost node or a member stepping
 * aside for a spare ended spends none of max_restarts, but such ends are
 * counted in the rendezvous' own state, per hour; past max_infra_restarts
 * within one the job is closed with a cause that names the bound, and every
 * node's next() says so. A window an hour old, or corrupt, starts anew.
 */
#include "support/rdzv_fixture.h"
#include "common/clock.h"
#include "rdzv/backend.h"
#include "rdzv/rdzv.h"

static void expect_closed_for_infra(rdzv_node *node, const char *bound, const char *last_node)
{
    ASSERT_ERR(rdzv_node_wait(node, 15000), ELASTIC_ECLOSED);
    elastic_rdzv_cause closed = { .struct_size = sizeof closed };
    bool budget = true;
    ASSERT_OK(rdzv__read_closed(node->rdzv, &closed, &budget));
    ASSERT(!budget);
    ASSERT(rdzv__cause_is_infra(&closed));
    ASSERT(strstr(closed.reason, bound) != NULL);
    ASSERT(strstr(closed.reason, last_node) != NULL);
    /* none of max_restarts was spent on the way */
    elastic_rdzv_cause first = { .struct_size = sizeof first };
    ASSERT_ERR(elastic_rdzv_first_failure(node->rdzv, &first), ELASTIC_ENOTFOUND);
}

TEST(rdzv_infra_bound_default_is_20_within_an_hour)
{
    elastic_rdzv_opts o;
    ASSERT_OK(elastic_rdzv_opts_init(&o, sizeof o));
    ASSERT_EQ(o.max_infra_restarts, 20);
    o.run_id = "x";
    o.endpoint = "127.0.0.1:1";
    o.max_infra_restarts = -1;
    elastic_rdzv *r = NULL;
    ASSERT_ERR(elastic_rdzv_open(&o, &r), ELASTIC_EINVAL);
}

TEST(rdzv_infra_bound_step_asides_close_the_job_past_it)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "infra", 1, 3); /* max_restarts 0: a FAILURE would shut the job */
    o.max_infra_restarts = 1;
    const char *names[3] = { "a", "b", "c" };
    for (int i = 0; i < 3; i++) {
        o.node_id = names[i];
        rdzv_node_open(&nodes[i], &o);
    }
    rdzv_nodes_form(nodes, 3, 15000);
    /* An hour-old window full of ends has closed: this one opens a new one. */
    char old[64];
    snprintf(old, sizeof old, "%llu 50",
             (unsigned long long)(elastic__wall_ms() - RDZV__INFRA_WINDOW_MS - 1000));
    rdzv__backend *b = nodes[0].rdzv->backend;
    ASSERT_OK(b->ops->set(b, "infra_window", old, strlen(old)));
    /* The first step-aside is within the bound: the other two re-form. */
    rdzv__step_aside_result r;
    ASSERT_OK(rdzv__step_aside(nodes[2].rdzv, "unhealthy: test Xid 79", &r));
    ASSERT(r.stepped_aside);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(elastic_rdzv_watch(nodes[i].rdzv, test_scaled_ms(10000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LEFT);
    }
    rdzv_nodes_form(nodes, 2, 15000);
    ASSERT_EQ(nodes[0].result.group_world_size, 2);
    ASSERT_EQ(nodes[0].result.restart_count, 0);
    void *window = NULL;
    size_t len = 0;
    ASSERT_OK(b->ops->get(b, "infra_window", &window, &len));
    ASSERT(len > 2 && strcmp((char *)window + len - 2, " 1") == 0); /* a new window, one end */
    elastic_free(window);
    /* The second passes it: the job is closed for every node. */
    ASSERT_OK(rdzv__step_aside(nodes[1].rdzv, "unhealthy: test Xid 48", &r));
    ASSERT(r.stepped_aside);
    ASSERT_OK(elastic_rdzv_watch(nodes[0].rdzv, test_scaled_ms(10000), &cause));
    rdzv_node_join(&nodes[0]);
    expect_closed_for_infra(&nodes[0], "--max-infra-restarts 1", "node b");
    rdzv_nodes_close(nodes, 3);
    rdzv_env_stop(&env);
}

TEST(rdzv_infra_bound_lost_node_closes_the_job_at_zero)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[2];
    rdzv_test_opts(&o, &env, "infra0", 1, 2);
    o.max_restarts = 5; /* plenty: only the bound on lost nodes ends it */
    o.max_infra_restarts = 0;
    const char *names[2] = { "a", "b" };
    for (int i = 0; i < 2; i++) {
        o.node_id = names[i];
        rdzv_node_open(&nodes[i], &o);
    }
    rdzv_nodes_form(nodes, 2, 15000);
    /* A corrupt window is input like any other: a new one opens. */
    rdzv__backend *b = nodes[0].rdzv->backend;
    ASSERT_OK(b->ops->set(b, "infra_window", "junk", 4));
    rdzv_node_close(&nodes[1]); /* its lease ends: the survivor finds it lost */
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_OK(elastic_rdzv_watch(nodes[0].rdzv, test_scaled_ms(15000), &cause));
    ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
    rdzv_node_join(&nodes[0]);
    expect_closed_for_infra(&nodes[0], "--max-infra-restarts 0", "node b");
    rdzv_nodes_close(nodes, 2);
    rdzv_env_stop(&env);
}
