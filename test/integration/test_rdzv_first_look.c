/*
 * The monitor's first look at its ring neighbour's area. A neighbour whose
 * record went before that look (a killed node whose connection closed while
 * the monitor thread had not run yet, a node that finished at once) must be
 * acted on from the look itself: the watch goes on from the look's revision,
 * so no later change in the area would tell. A gate on the backend's keys_at
 * (the first look's one call) holds the looks until the neighbour is gone,
 * which under load happens by chance (test_rdzv_process.c's killed node).
 */
#include "rdzv/rdzv.h"
#include "support/rdzv_fixture.h"

/* Holds every keys_at of the nodes it is put on until opened. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool open;
    int arrived; /* keys_at calls that reached the gate */
    const rdzv__backend_ops *real;
    rdzv__backend_ops ops;
} gate;

static int gated_keys_at(rdzv__backend *b, const char *prefix, size_t max, char ***keys, size_t *n,
                         uint64_t *revision)
{
    /* Bounded: a test that fails before opening must not hang the monitor. */
    uint64_t deadline = rdzv_test_now_ms() + (uint64_t)test_scaled_ms(20000);
    pthread_mutex_lock(&gate.lock);
    gate.arrived++;
    pthread_cond_broadcast(&gate.changed);
    while (!gate.open && rdzv_test_now_ms() < deadline) {
        struct timespec at = { (time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L };
        pthread_cond_timedwait(&gate.changed, &gate.lock, &at);
    }
    pthread_mutex_unlock(&gate.lock);
    return gate.real->keys_at(b, prefix, max, keys, n, revision);
}

static void gate_init(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&gate.lock, NULL);
    pthread_cond_init(&gate.changed, &attr);
    pthread_condattr_destroy(&attr);
    gate.open = false;
    gate.arrived = 0;
    gate.real = NULL;
}

/* Before the node joins (its monitor reads the ops only once it is a member). */
static void gate_put_on(rdzv_node *node)
{
    if (gate.real == NULL) {
        gate.real = node->rdzv->backend->ops;
        gate.ops = *gate.real;
        gate.ops.keys_at = gated_keys_at;
    }
    ASSERT(node->rdzv->backend->ops == gate.real);
    node->rdzv->backend->ops = &gate.ops;
}

static void gate_wait_arrivals(int count, int timeout_ms)
{
    uint64_t deadline = rdzv_test_now_ms() + (uint64_t)test_scaled_ms(timeout_ms);
    pthread_mutex_lock(&gate.lock);
    while (gate.arrived < count && rdzv_test_now_ms() < deadline) {
        struct timespec at = { (time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L };
        pthread_cond_timedwait(&gate.changed, &gate.lock, &at);
    }
    int arrived = gate.arrived;
    pthread_mutex_unlock(&gate.lock);
    if (arrived < count) FAIL("%d of %d first looks reached the gate in time", arrived, count);
}

static void gate_open(void)
{
    pthread_mutex_lock(&gate.lock);
    gate.open = true;
    pthread_cond_broadcast(&gate.changed);
    pthread_mutex_unlock(&gate.lock);
}

/* Three nodes "node-0".."node-2" form one generation; the first looks of
 * node-0's and node-1's monitors wait at the gate. */
static void form_three_with_held_looks(rdzv_env *env, rdzv_node *nodes, char ids[3][32])
{
    gate_init();
    rdzv_env_start(env);
    elastic_rdzv_opts o;
    for (int i = 0; i < 3; i++) {
        rdzv_test_opts(&o, env, "job", 1, 3);
        snprintf(ids[i], sizeof ids[i], "node-%d", i);
        o.node_id = ids[i];
        rdzv_node_open(&nodes[i], &o);
        if (i < 2) gate_put_on(&nodes[i]);
    }
    rdzv_nodes_form(nodes, 3, 15000);
    rdzv_expect_group(nodes, 3);
    gate_wait_arrivals(2, 10000);
}

static void expect_lost(rdzv_node *node, const char *lost_id)
{
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_OK(elastic_rdzv_watch(node->rdzv, test_scaled_ms(10000), &cause));
    ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
    ASSERT_STR_EQ(cause.node_id, lost_id);
}

TEST(rdzv_neighbour_gone_before_the_monitors_first_look_is_reported)
{
    rdzv_env env;
    rdzv_node nodes[3];
    char ids[3][32];
    form_three_with_held_looks(&env, nodes, ids);
    uint64_t first = nodes[0].result.generation;
    /* Its lease ends (the record goes) before anyone has looked. */
    rdzv_node_close(&nodes[2]);
    gate_open();
    for (int i = 0; i < 2; i++) expect_lost(&nodes[i], ids[2]);
    rdzv_nodes_form(nodes, 2, 15000);
    ASSERT(nodes[0].result.generation > first);
    ASSERT_EQ(nodes[0].result.group_world_size, 2);
    rdzv_nodes_close(nodes, 2);
    rdzv_env_stop(&env);
}

TEST(rdzv_neighbour_finished_before_the_monitors_first_look_is_skipped)
{
    rdzv_env env;
    rdzv_node nodes[3];
    char ids[3][32];
    form_three_with_held_looks(&env, nodes, ids);
    /* node-2's successor: its watcher must follow on to it past node-2. */
    char after[RDZV__MAX_ID];
    pthread_mutex_lock(&nodes[2].rdzv->lock);
    snprintf(after, sizeof after, "%s", nodes[2].rdzv->watch_next_id);
    pthread_mutex_unlock(&nodes[2].rdzv->lock);
    int next = strcmp(after, ids[0]) == 0 ? 0 : 1, watcher = 1 - next;
    ASSERT_STR_EQ(after, ids[next]);
    ASSERT_OK(elastic_rdzv_finish(nodes[2].rdzv));
    gate_open();
    /* Only the skip puts a watch on the successor's area: its loss then
     * reaches the watcher (node-2, which watched it, has left). */
    rdzv_node_close(&nodes[next]);
    expect_lost(&nodes[watcher], ids[next]);
    rdzv_node_close(&nodes[watcher]);
    rdzv_node_close(&nodes[2]);
    rdzv_env_stop(&env);
}
