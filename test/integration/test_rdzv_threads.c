/*
 * Rendezvous with nodes as threads over a real store on loopback: forming at
 * max and after last call, late nodes, lost nodes, spares, stable ranks,
 * the job-wide restart budget, timeouts, closing, finishing and leaving.
 */
#include "support/rdzv_fixture.h"

TEST(rdzv_forms_at_max_nodes_without_waiting_for_last_call)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    for (int i = 0; i < 3; i++) {
        rdzv_test_opts(&o, &env, "job", 2, 3);
        o.local_world_size = i + 1;
        rdzv_node_open(&nodes[i], &o);
    }
    rdzv_nodes_form(nodes, 3, 15000);
    rdzv_expect_group(nodes, 3);
    for (int i = 0; i < 3; i++) {
        const elastic_rdzv_result *res = &nodes[i].result;
        ASSERT_EQ(res->world_size, 6);
        ASSERT_EQ(res->local_world_size, i + 1);
        /* rank_base is the sum of the workers of the nodes ranked before. */
        int base = 0;
        for (int j = 0; j < 3; j++)
            if (nodes[j].result.group_rank < res->group_rank)
                base += nodes[j].result.local_world_size;
        ASSERT_EQ(res->rank_base, base);
        ASSERT(res->master_port > 0);
        ASSERT_STR_EQ(res->master_addr, "127.0.0.1");
    }
    rdzv_nodes_close(nodes, 3);
    rdzv_env_stop(&env);
}

TEST(rdzv_forms_after_last_call_once_min_nodes_are_in)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[2];
    rdzv_test_opts(&o, &env, "job", 2, 4);
    o.last_call_timeout_ms = 1500;
    rdzv_nodes_open(nodes, 2, &o);
    uint64_t start = rdzv_test_now_ms();
    rdzv_nodes_form(nodes, 2, 20000);
    uint64_t took = rdzv_test_now_ms() - start;
    rdzv_expect_group(nodes, 2);
    /* Not before the last call ran out: nobody reached max_nodes. */
    if (took < 1400)
        FAIL("formed after %llu ms, before the 1500 ms last call", (unsigned long long)took);
    rdzv_nodes_close(nodes, 2);
    rdzv_env_stop(&env);
}

TEST(rdzv_late_node_waits_then_joins_the_next_generation)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "job", 2, 3);
    o.last_call_timeout_ms = 200;
    rdzv_nodes_open(nodes, 3, &o);
    rdzv_nodes_form(nodes, 2, 15000);
    rdzv_expect_group(nodes, 2);
    uint64_t first = nodes[0].result.generation;
    rdzv_node_join(&nodes[2]);
    /* The members learn that a node waits and there is room. */
    for (int i = 0; i < 2; i++) {
        elastic_rdzv_cause cause = { .struct_size = sizeof cause };
        ASSERT_OK(elastic_rdzv_watch(nodes[i].rdzv, test_scaled_ms(15000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODES_WAITING);
        ASSERT_EQ(cause.generation, first);
    }
    int old_rank[2] = { nodes[0].result.group_rank, nodes[1].result.group_rank };
    rdzv_node_join(&nodes[0]);
    rdzv_node_join(&nodes[1]);
    for (int i = 0; i < 3; i++) rdzv_node_expect_joined(&nodes[i], 15000);
    rdzv_expect_group(nodes, 3);
    ASSERT(nodes[0].result.generation > first);
    /* Survivors keep their order; the newcomer is appended. */
    ASSERT_EQ(nodes[0].result.group_rank, old_rank[0]);
    ASSERT_EQ(nodes[1].result.group_rank, old_rank[1]);
    ASSERT_EQ(nodes[2].result.group_rank, 2);
    rdzv_nodes_close(nodes, 3);
    rdzv_env_stop(&env);
}

TEST(rdzv_lost_node_ends_the_generation_and_the_others_reform)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    char ids[3][32];
    for (int i = 0; i < 3; i++) {
        rdzv_test_opts(&o, &env, "job", 1, 3);
        snprintf(ids[i], sizeof ids[i], "node-%d", i);
        o.node_id = ids[i];
        rdzv_node_open(&nodes[i], &o);
    }
    rdzv_nodes_form(nodes, 3, 15000);
    /* Drop the middle-ranked node: its lease ends with its handle. */
    int victim = 0;
    while (nodes[victim].result.group_rank != 1) victim++;
    uint64_t first = nodes[victim].result.generation;
    rdzv_node_close(&nodes[victim]);
    rdzv_node *left[2];
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (i != victim) left[n++] = &nodes[i];
    for (int i = 0; i < 2; i++) {
        elastic_rdzv_cause cause = { .struct_size = sizeof cause };
        ASSERT_OK(elastic_rdzv_watch(left[i]->rdzv, test_scaled_ms(10000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
        ASSERT_STR_EQ(cause.node_id, ids[victim]);
        ASSERT_EQ(cause.generation, first);
    }
    int before[2] = { left[0]->result.group_rank, left[1]->result.group_rank };
    for (int i = 0; i < 2; i++) rdzv_node_join(left[i]);
    for (int i = 0; i < 2; i++) rdzv_node_expect_joined(left[i], 15000);
    ASSERT(left[0]->result.generation > first);
    ASSERT_EQ(left[0]->result.group_world_size, 2);
    /* Relative order kept: rank 0 stays 0, rank 2 becomes 1. */
    for (int i = 0; i < 2; i++) ASSERT_EQ(left[i]->result.group_rank, before[i] == 0 ? 0 : 1);
    ASSERT_EQ(left[0]->result.restart_count, 0); /* a lost node is no failure */
    for (int i = 0; i < 2; i++) rdzv_node_close(left[i]);
    rdzv_env_stop(&env);
}

TEST(rdzv_spare_is_promoted_when_a_member_is_lost)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "job", 1, 2);
    rdzv_nodes_open(nodes, 3, &o);
    rdzv_nodes_form(nodes, 2, 15000);
    uint64_t first = nodes[0].result.generation;
    rdzv_node_join(&nodes[2]); /* the job is full: a spare */
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_ERR(elastic_rdzv_watch(nodes[0].rdzv, test_scaled_ms(500), &cause), ELASTIC_ETIMEDOUT);
    int survivor = nodes[0].result.group_rank == 0 ? 0 : 1;
    rdzv_node_close(&nodes[1 - survivor]);
    ASSERT_OK(elastic_rdzv_watch(nodes[survivor].rdzv, test_scaled_ms(10000), &cause));
    ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
    rdzv_node_join(&nodes[survivor]);
    rdzv_node_expect_joined(&nodes[survivor], 15000);
    rdzv_node_expect_joined(&nodes[2], 15000);
    ASSERT(nodes[2].result.generation > first);
    ASSERT_EQ(nodes[2].result.group_world_size, 2);
    ASSERT_EQ(nodes[survivor].result.group_rank, 0);
    ASSERT_EQ(nodes[2].result.group_rank, 1);
    rdzv_node_close(&nodes[survivor]);
    rdzv_node_close(&nodes[2]);
    rdzv_env_stop(&env);
}

static void fail_generation(rdzv_node *node, int rank, int exit_code)
{
    elastic_rdzv_cause cause;
    memset(&cause, 0, sizeof cause);
    cause.struct_size = sizeof cause;
    cause.kind = ELASTIC_RDZV_FAILURE;
    cause.rank = rank;
    cause.exit_code = exit_code;
    snprintf(cause.reason, sizeof cause.reason, "worker %d exited with %d", rank, exit_code);
    ASSERT_OK(elastic_rdzv_end_generation(node->rdzv, &cause));
}

/* A member slow to rejoin after its generation ended (its workers slow to
 * stop) guesses the next round, which the others sealed without it, and one
 * more after that. Found in the chaos soak's etcd history: the node joined
 * the long-sealed round, waited three keep-alive timeouts in it, then voided
 * it again. It must see at once that the round is past and join the open
 * one: a newcomer there ends the running generation, which has room, at
 * once. */
TEST(rdzv_member_that_rejoins_late_skips_rounds_sealed_without_it)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "late", 2, 3);
    o.max_restarts = 5;
    o.last_call_timeout_ms = 200;
    rdzv_nodes_open(nodes, 3, &o);
    rdzv_nodes_form(nodes, 3, 15000);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    /* Generations 2 and 3 form without node 2, which is slow to rejoin. */
    for (int round = 0; round < 2; round++) {
        fail_generation(&nodes[0], 0, 1);
        for (int i = 0; i < 2; i++) {
            ASSERT_OK(elastic_rdzv_watch(nodes[i].rdzv, test_scaled_ms(10000), &cause));
            rdzv_node_join(&nodes[i]);
        }
        for (int i = 0; i < 2; i++) rdzv_node_expect_joined(&nodes[i], 15000);
        ASSERT_EQ(nodes[0].result.group_world_size, 2);
    }
    ASSERT_EQ(nodes[0].result.generation, 3u);
    ASSERT_OK(elastic_rdzv_watch(nodes[2].rdzv, 0, &cause)); /* generation 1 ended for it too */
    uint64_t asked = rdzv_test_now_ms();
    rdzv_node_join(&nodes[2]);
    /* Generation 3 has room: the newcomer in round 4 ends it. A node that
     * first waited in round 2 would end it only after three keep-alive
     * timeouts (3 s here). */
    ASSERT_OK(elastic_rdzv_watch(nodes[0].rdzv, test_scaled_ms(10000), &cause));
    uint64_t took = rdzv_test_now_ms() - asked;
    ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODES_WAITING);
    if (took > (uint64_t)test_scaled_ms(1000))
        FAIL("the late member ended generation 3 after %llu ms (it waited in round 2)",
             (unsigned long long)took);
    for (int i = 0; i < 2; i++) {
        if (i == 1) ASSERT_OK(elastic_rdzv_watch(nodes[1].rdzv, test_scaled_ms(10000), &cause));
        rdzv_node_join(&nodes[i]);
    }
    for (int i = 0; i < 3; i++) rdzv_node_expect_joined(&nodes[i], 15000);
    ASSERT_EQ(nodes[2].result.generation, 4u);
    ASSERT_EQ(nodes[2].result.group_world_size, 3);
    rdzv_nodes_close(nodes, 3);
    rdzv_env_stop(&env);
}

TEST(rdzv_restart_budget_is_shared_by_the_whole_job)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[2];
    rdzv_test_opts(&o, &env, "job", 2, 2);
    o.max_restarts = 1;
    rdzv_nodes_open(nodes, 2, &o);
    rdzv_nodes_form(nodes, 2, 15000);
    fail_generation(&nodes[0], 3, 7);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_OK(elastic_rdzv_watch(nodes[1].rdzv, test_scaled_ms(10000), &cause));
    ASSERT_EQ(cause.kind, ELASTIC_RDZV_FAILURE);
    ASSERT_EQ(cause.exit_code, 7);
    rdzv_nodes_form(nodes, 2, 15000);
    ASSERT_EQ(nodes[0].result.restart_count, 1);
    ASSERT_EQ(nodes[1].result.restart_count, 1);
    /* The second failure comes from the other node: still the same budget. */
    fail_generation(&nodes[1], 1, 9);
    ASSERT_OK(elastic_rdzv_watch(nodes[0].rdzv, test_scaled_ms(10000), &cause));
    for (int i = 0; i < 2; i++) {
        rdzv_node_join(&nodes[i]);
        ASSERT_EQ(rdzv_node_wait(&nodes[i], 15000), ELASTIC_EBUDGET);
    }
    ASSERT_OK(elastic_rdzv_first_failure(nodes[1].rdzv, &cause));
    ASSERT_EQ(cause.rank, 3);
    ASSERT_EQ(cause.exit_code, 7);
    ASSERT_STR_EQ(cause.reason, "worker 3 exited with 7");
    rdzv_nodes_close(nodes, 2);
    rdzv_env_stop(&env);
}

TEST(rdzv_membership_changes_do_not_consume_the_budget)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "job", 2, 3); /* max_restarts 0 */
    o.last_call_timeout_ms = 200;
    rdzv_nodes_open(nodes, 3, &o);
    rdzv_nodes_form(nodes, 2, 15000);
    rdzv_node_join(&nodes[2]); /* nodes waiting: ends generation 1 */
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_OK(elastic_rdzv_watch(nodes[0].rdzv, test_scaled_ms(10000), &cause));
    ASSERT_OK(elastic_rdzv_watch(nodes[1].rdzv, test_scaled_ms(10000), &cause));
    rdzv_node_join(&nodes[0]);
    rdzv_node_join(&nodes[1]);
    for (int i = 0; i < 3; i++) rdzv_node_expect_joined(&nodes[i], 15000);
    ASSERT_EQ(nodes[2].result.restart_count, 0);
    ASSERT_ERR(elastic_rdzv_first_failure(nodes[0].rdzv, &cause), ELASTIC_ENOTFOUND);
    rdzv_nodes_close(nodes, 3);
    rdzv_env_stop(&env);
}

TEST(rdzv_below_min_nodes_fails_after_the_join_timeout)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node node;
    rdzv_test_opts(&o, &env, "job", 2, 2);
    o.join_timeout_ms = 500;
    rdzv_node_open(&node, &o);
    rdzv_node_join(&node);
    ASSERT_EQ(rdzv_node_wait(&node, 15000), ELASTIC_ENOTENOUGH);
    ASSERT(strstr(node.detail, "min_nodes is 2") != NULL);
    rdzv_node_close(&node);
    rdzv_env_stop(&env);
}

TEST(rdzv_closed_job_answers_closed_to_every_node)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "job", 1, 2);
    rdzv_nodes_open(nodes, 3, &o);
    rdzv_nodes_form(nodes, 2, 15000);
    rdzv_node_join(&nodes[2]); /* a spare, waiting */
    ASSERT_OK(elastic_rdzv_end_job(nodes[0].rdzv));
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_OK(elastic_rdzv_watch(nodes[1].rdzv, test_scaled_ms(10000), &cause));
    ASSERT_EQ(cause.kind, ELASTIC_RDZV_JOB_ENDED);
    ASSERT_EQ(rdzv_node_wait(&nodes[2], 15000), ELASTIC_ECLOSED);
    for (int i = 0; i < 2; i++) {
        rdzv_node_join(&nodes[i]);
        ASSERT_EQ(rdzv_node_wait(&nodes[i], 15000), ELASTIC_ECLOSED);
    }
    rdzv_node late;
    rdzv_test_opts(&o, &env, "job", 1, 2);
    rdzv_node_open(&late, &o);
    rdzv_node_join(&late);
    ASSERT_EQ(rdzv_node_wait(&late, 15000), ELASTIC_ECLOSED);
    rdzv_node_close(&late);
    rdzv_nodes_close(nodes, 3);
    rdzv_env_stop(&env);
}

TEST(rdzv_two_runs_on_one_store_do_not_interfere)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node a[2], b[2];
    for (int i = 0; i < 2; i++) {
        rdzv_test_opts(&o, &env, "run-a", 2, 2);
        rdzv_node_open(&a[i], &o);
        rdzv_test_opts(&o, &env, "run-b", 2, 2);
        o.local_world_size = 4;
        rdzv_node_open(&b[i], &o);
    }
    for (int i = 0; i < 2; i++) {
        rdzv_node_join(&a[i]);
        rdzv_node_join(&b[i]);
    }
    for (int i = 0; i < 2; i++) {
        rdzv_node_expect_joined(&a[i], 15000);
        rdzv_node_expect_joined(&b[i], 15000);
    }
    rdzv_expect_group(a, 2);
    rdzv_expect_group(b, 2);
    ASSERT_EQ(a[0].result.world_size, 2);
    ASSERT_EQ(b[0].result.world_size, 8);
    /* Closing one run leaves the other running. */
    ASSERT_OK(elastic_rdzv_end_job(a[0].rdzv));
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_ERR(elastic_rdzv_watch(b[0].rdzv, test_scaled_ms(300), &cause), ELASTIC_ETIMEDOUT);
    for (int i = 0; i < 2; i++) {
        rdzv_node_close(&a[i]);
        rdzv_node_close(&b[i]);
    }
    rdzv_env_stop(&env);
}

TEST(rdzv_finished_node_leaves_without_reforming_the_others)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "job", 1, 2);
    rdzv_nodes_open(nodes, 3, &o);
    rdzv_nodes_form(nodes, 2, 15000);
    rdzv_node_join(&nodes[2]); /* a spare */
    ASSERT_OK(elastic_rdzv_finish(nodes[0].rdzv));
    rdzv_node_close(&nodes[0]); /* its lease ends too */
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_ERR(elastic_rdzv_watch(nodes[1].rdzv, test_scaled_ms(1500), &cause), ELASTIC_ETIMEDOUT);
    /* The last member finishing completes the job: the spare is told. */
    ASSERT_OK(elastic_rdzv_finish(nodes[1].rdzv));
    ASSERT_EQ(rdzv_node_wait(&nodes[2], 15000), ELASTIC_ECLOSED);
    rdzv_node_close(&nodes[1]);
    rdzv_node_close(&nodes[2]);
    rdzv_env_stop(&env);
}

TEST(rdzv_leaving_node_makes_the_others_reform)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[3];
    rdzv_test_opts(&o, &env, "job", 1, 3);
    rdzv_nodes_open(nodes, 3, &o);
    rdzv_nodes_form(nodes, 3, 15000);
    ASSERT_OK(elastic_rdzv_leave(nodes[2].rdzv));
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(elastic_rdzv_watch(nodes[i].rdzv, test_scaled_ms(10000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LEFT);
    }
    rdzv_nodes_form(nodes, 2, 15000);
    rdzv_expect_group(nodes, 2);
    ASSERT_EQ(nodes[0].result.restart_count, 0);
    elastic_rdzv_result ignored = { .struct_size = sizeof ignored };
    ASSERT_ERR(elastic_rdzv_next(nodes[2].rdzv, &ignored), ELASTIC_ESTATE);
    rdzv_nodes_close(nodes, 3);
    rdzv_env_stop(&env);
}

typedef struct change_seen {
    pthread_mutex_t lock;
    pthread_cond_t called;
    int calls;
    int kind;
    pthread_t thread;
} change_seen;

static void on_change(void *user, const elastic_rdzv_cause *cause)
{
    change_seen *seen = user;
    pthread_mutex_lock(&seen->lock);
    seen->calls++;
    seen->kind = cause->kind;
    seen->thread = pthread_self();
    pthread_cond_broadcast(&seen->called);
    pthread_mutex_unlock(&seen->lock);
}

TEST(rdzv_change_callback_runs_once_per_generation_on_the_library_thread)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[2];
    change_seen seen = { .lock = PTHREAD_MUTEX_INITIALIZER, .called = PTHREAD_COND_INITIALIZER };
    rdzv_test_opts(&o, &env, "job", 2, 2);
    o.max_restarts = 5;
    rdzv_nodes_open(nodes, 2, &o);
    ASSERT_OK(elastic_rdzv_on_change(nodes[1].rdzv, on_change, &seen));
    rdzv_nodes_form(nodes, 2, 15000);
    fail_generation(&nodes[0], 0, 1);
    fail_generation(&nodes[0], 0, 2); /* the first cause wins */
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    ASSERT_OK(elastic_rdzv_watch(nodes[1].rdzv, test_scaled_ms(10000), &cause));
    ASSERT_EQ(cause.exit_code, 1);
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_sec += test_scaled_ms(10000) / 1000;
    pthread_mutex_lock(&seen.lock);
    while (seen.calls == 0 && pthread_cond_timedwait(&seen.called, &seen.lock, &at) == 0) continue;
    int calls = seen.calls;
    pthread_mutex_unlock(&seen.lock);
    ASSERT_EQ(calls, 1);
    ASSERT_EQ(seen.kind, ELASTIC_RDZV_FAILURE);
    ASSERT(!pthread_equal(seen.thread, pthread_self()));
    rdzv_nodes_close(nodes, 2);
    rdzv_env_stop(&env);
}

TEST(rdzv_next_while_the_generation_runs_is_a_state_error)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node node;
    rdzv_test_opts(&o, &env, "job", 1, 1);
    rdzv_node_open(&node, &o);
    rdzv_nodes_form(&node, 1, 15000);
    elastic_rdzv_result again = { .struct_size = sizeof again };
    ASSERT_ERR(elastic_rdzv_next(node.rdzv, &again), ELASTIC_ESTATE);
    rdzv_node_close(&node);
    rdzv_env_stop(&env);
}

static volatile int spin_stop;

static void *spin(void *arg)
{
    volatile uint64_t counter = 0;
    while (!__atomic_load_n(&spin_stop, __ATOMIC_RELAXED)) counter++;
    return NULL;
}

TEST(rdzv_busy_cpus_do_not_evict_a_live_node)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[2];
    rdzv_test_opts(&o, &env, "job", 2, 2);
    o.keepalive_interval_ms = 100;
    o.keepalive_timeout_ms = test_scaled_ms(1500);
    rdzv_nodes_open(nodes, 2, &o);
    rdzv_nodes_form(nodes, 2, 15000);
    /* Saturate every CPU from this process (the callers' threads), while the
     * keep-alives ride on the store client's own thread. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int spinners = cpus > 0 && cpus < 16 ? (int)cpus * 2 : 8;
    pthread_t threads[32];
    for (int i = 0; i < spinners; i++) ASSERT_EQ(pthread_create(&threads[i], NULL, spin, NULL), 0);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    int rc = elastic_rdzv_watch(nodes[0].rdzv, test_scaled_ms(4000), &cause);
    __atomic_store_n(&spin_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < spinners; i++) pthread_join(threads[i], NULL);
    if (rc != ELASTIC_ETIMEDOUT)
        FAIL("generation ended under load: kind %d, %s", cause.kind, cause.reason);
    rdzv_nodes_close(nodes, 2);
    rdzv_env_stop(&env);
}

/* Keys left under a prefix of the store, waiting (bounded) for deletions. */
static size_t keys_left(const rdzv_env *env, const char *prefix, int timeout_ms)
{
    elastic_store *store = NULL;
    ASSERT_OK(elastic_store_connect(env->endpoint, NULL, &store));
    uint64_t deadline = rdzv_test_now_ms() + (uint64_t)test_scaled_ms(timeout_ms), revision = 0;
    size_t n = 0;
    for (;;) {
        char **names = NULL;
        ASSERT_OK(elastic_store_keys(store, prefix, 1000, &names, &n));
        elastic_free(names);
        uint64_t now = rdzv_test_now_ms();
        if (n == 0 || now >= deadline) break;
        int rc = elastic_store_watch(store, prefix, revision, (int)(deadline - now), &revision);
        if (rc != 0 && rc != ELASTIC_ETIMEDOUT) FAIL("watch: %s", elastic_err_name(rc));
    }
    elastic_store_close(store);
    return n;
}

TEST(rdzv_keys_of_old_rounds_are_deleted)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[2];
    rdzv_test_opts(&o, &env, "job", 2, 2);
    o.max_restarts = 10;
    rdzv_nodes_open(nodes, 2, &o);
    rdzv_nodes_form(nodes, 2, 15000);
    for (int round = 0; round < 3; round++) {
        fail_generation(&nodes[round % 2], 0, 1);
        elastic_rdzv_cause cause = { .struct_size = sizeof cause };
        ASSERT_OK(elastic_rdzv_watch(nodes[(round + 1) % 2].rdzv, test_scaled_ms(10000), &cause));
        rdzv_nodes_form(nodes, 2, 15000);
    }
    ASSERT_EQ(nodes[0].result.generation, 4);
    /* Generations 1 and 2 are over: nothing of them stays in the store. */
    ASSERT_EQ(keys_left(&env, "rdzv/job/r/1/", 10000), 0);
    ASSERT_EQ(keys_left(&env, "rdzv/job/r/2/", 10000), 0);
    rdzv_nodes_close(nodes, 2);
    rdzv_env_stop(&env);
}

static void store_put(const rdzv_env *env, const char *key, const char *value)
{
    elastic_store *store = NULL;
    ASSERT_OK(elastic_store_connect(env->endpoint, NULL, &store));
    ASSERT_OK(elastic_store_set(store, key, value, strlen(value)));
    elastic_store_close(store);
}

TEST(rdzv_corrupt_round_pointer_is_a_clear_error)
{
    rdzv_env env;
    rdzv_env_start(&env);
    store_put(&env, "rdzv/job/round", "7 x\n\001garbage");
    elastic_rdzv_opts o;
    rdzv_node node;
    rdzv_test_opts(&o, &env, "job", 1, 1);
    rdzv_node_open(&node, &o);
    rdzv_node_join(&node);
    ASSERT_EQ(rdzv_node_wait(&node, 15000), ELASTIC_ECORRUPT);
    ASSERT(strstr(node.detail, "corrupt round pointer") != NULL);
    rdzv_node_close(&node);
    rdzv_env_stop(&env);
}

TEST(rdzv_corrupt_join_record_is_left_out_of_the_generation)
{
    rdzv_env env;
    rdzv_env_start(&env);
    /* A bogus "node" took slot 1 of round 1 and wrote garbage as its record. */
    elastic_store *store = NULL;
    int64_t slot = 0;
    ASSERT_OK(elastic_store_connect(env.endpoint, NULL, &store));
    ASSERT_OK(elastic_store_add(store, "rdzv/job/r/1/count", 1, &slot));
    ASSERT_OK(elastic_store_set(store, "rdzv/job/r/1/n/1/rec", "R1 8 99999999 x y", 17));
    elastic_rdzv_opts o;
    rdzv_node nodes[2];
    rdzv_test_opts(&o, &env, "job", 2, 3); /* slot 3 reaches max_nodes */
    rdzv_nodes_open(nodes, 2, &o);
    rdzv_nodes_form(nodes, 2, 15000);
    rdzv_expect_group(nodes, 2);
    /* The bogus slot was told it is not in. */
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_try_get(store, "rdzv/job/r/1/n/1/a", &value, &len));
    ASSERT_EQ(len, 1);
    ASSERT_EQ(((const char *)value)[0], 'X');
    elastic_free(value);
    elastic_store_close(store);
    rdzv_nodes_close(nodes, 2);
    rdzv_env_stop(&env);
}

TEST(rdzv_two_neighbours_lost_at_once_still_reform)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[4];
    rdzv_test_opts(&o, &env, "job", 1, 4);
    rdzv_nodes_open(nodes, 4, &o);
    rdzv_nodes_form(nodes, 4, 15000);
    /* Ranks 1 and 2 go together: rank 2's only watcher (rank 1) is gone too,
     * so the survivors find the second loss by counting live records. */
    rdzv_node *left[2];
    int n = 0;
    for (int i = 0; i < 4; i++) {
        int rank = nodes[i].result.group_rank;
        if (rank == 1 || rank == 2)
            rdzv_node_close(&nodes[i]);
        else
            left[n++] = &nodes[i];
    }
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(elastic_rdzv_watch(left[i]->rdzv, test_scaled_ms(10000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
    }
    for (int i = 0; i < 2; i++) rdzv_node_join(left[i]);
    for (int i = 0; i < 2; i++) rdzv_node_expect_joined(left[i], 15000);
    ASSERT_EQ(left[0]->result.group_world_size, 2);
    ASSERT_EQ(left[0]->result.generation, left[1]->result.generation);
    rdzv_nodes_close(nodes, 4);
    rdzv_env_stop(&env);
}
