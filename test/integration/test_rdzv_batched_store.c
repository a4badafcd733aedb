/*
 * Rendezvous over the store's batches (joining in two messages, the monitor's
 * first read with its revision) and over a store server from before them,
 * which gets the calls it always got: both form and re-form after a lost
 * node, and the batches take fewer messages.
 */
#include "rdzv/rdzv.h"
#include "store/server.h"
#include "support/rdzv_fixture.h"

typedef struct phase_messages {
    double form, reform; /* backend messages per node */
} phase_messages;

static uint64_t messages(rdzv_node *nodes, int n, int skip)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        if (i != skip && nodes[i].rdzv != NULL)
            total += __atomic_load_n(&nodes[i].rdzv->backend->traffic.messages, __ATOMIC_RELAXED);
    return total;
}

/* Four nodes form; one is dropped; the three others re-form with their ranks' order. */
static phase_messages form_lose_reform(bool old_server)
{
    rdzv_env env;
    rdzv_env_start(&env);
    if (old_server) store__server_without_batch(env.server);
    elastic_rdzv_opts o;
    rdzv_node nodes[4];
    char ids[4][32];
    for (int i = 0; i < 4; i++) {
        rdzv_test_opts(&o, &env, "job", 1, 4);
        /* few guard checks, so the counts are the protocol's */
        o.keepalive_interval_ms = 1000;
        o.keepalive_timeout_ms = test_scaled_ms(5000);
        snprintf(ids[i], sizeof ids[i], "node-%d", i);
        o.node_id = ids[i];
        rdzv_node_open(&nodes[i], &o);
    }
    phase_messages m;
    uint64_t before = messages(nodes, 4, -1);
    rdzv_nodes_form(nodes, 4, 15000);
    m.form = (double)(messages(nodes, 4, -1) - before) / 4;
    rdzv_expect_group(nodes, 4);
    int victim = 0;
    while (nodes[victim].result.group_rank != 1) victim++;
    uint64_t first = nodes[victim].result.generation;
    rdzv_node_close(&nodes[victim]);
    rdzv_node *left[3];
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (i != victim) left[n++] = &nodes[i];
    for (int i = 0; i < 3; i++) {
        elastic_rdzv_cause cause = { .struct_size = sizeof cause };
        ASSERT_OK(elastic_rdzv_watch(left[i]->rdzv, test_scaled_ms(10000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
        ASSERT_STR_EQ(cause.node_id, ids[victim]);
    }
    int ranks[3];
    for (int i = 0; i < 3; i++) ranks[i] = left[i]->result.group_rank;
    before = messages(nodes, 4, victim);
    for (int i = 0; i < 3; i++) rdzv_node_join(left[i]);
    for (int i = 0; i < 3; i++) rdzv_node_expect_joined(left[i], 15000);
    m.reform = (double)(messages(nodes, 4, victim) - before) / 3;
    for (int i = 0; i < 3; i++) {
        ASSERT(left[i]->result.generation > first);
        ASSERT_EQ(left[i]->result.group_world_size, 3);
        ASSERT_EQ(left[i]->result.group_rank, ranks[i] == 0 ? 0 : ranks[i] - 1);
    }
    /* and the new generation is watched: losing another ends it too */
    rdzv_node *second = left[0]->result.group_rank == 0 ? left[1] : left[0];
    rdzv_node_close(second);
    for (int i = 0; i < 3; i++) {
        if (left[i] == second) continue;
        elastic_rdzv_cause cause = { .struct_size = sizeof cause };
        ASSERT_OK(elastic_rdzv_watch(left[i]->rdzv, test_scaled_ms(10000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
    }
    for (int i = 0; i < 3; i++)
        if (left[i] != second) rdzv_node_close(left[i]);
    rdzv_env_stop(&env);
    return m;
}

TEST_TIMEOUT(rdzv_over_batches_and_over_an_old_store_forms_and_reforms_alike, 90)
{
    phase_messages batched = form_lose_reform(false);
    phase_messages old = form_lose_reform(true);
    /* joining: read round, adds + view, record + wait (+ the monitor's first read)
     * against read round, add, record, round, closed, wait (+ watch, area) */
    fprintf(stderr, "# messages per node: form %.1f batched, %.1f old; re-form %.1f, %.1f\n",
            batched.form, old.form, batched.reform, old.reform);
    if (batched.form + 2 > old.form || batched.reform + 2 > old.reform)
        FAIL("messages per node: form %.1f batched, %.1f old; re-form %.1f batched, %.1f old",
             batched.form, old.form, batched.reform, old.reform);
}
