/*
 * Shared set-up for the rendezvous tests: a store server on a free loopback
 * port and simulated nodes, each a thread running elastic_rdzv_next() so a
 * test can start several joins at once and wait (with deadlines) for them.
 */
#ifndef ELASTIC_TEST_RDZV_FIXTURE_H
#define ELASTIC_TEST_RDZV_FIXTURE_H

#include "test.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

typedef struct rdzv_env {
    elastic_store_server *server;
    char endpoint[64];
} rdzv_env;

typedef struct rdzv_node {
    elastic_rdzv *rdzv;
    pthread_t thread;
    bool joining;
    int rc;           /* of the last next() */
    char detail[512]; /* its elastic_last_error() */
    elastic_rdzv_result result;
    pthread_mutex_t lock;
    pthread_cond_t done;
    bool finished;
} rdzv_node;

static inline uint64_t rdzv_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void rdzv_env_start(rdzv_env *env)
{
    ASSERT_OK(elastic_store_server_start(NULL, &env->server));
    snprintf(env->endpoint, sizeof env->endpoint, "127.0.0.1:%d", test_server_port(env->server));
}

static inline void rdzv_env_stop(rdzv_env *env)
{
    elastic_store_server_close(env->server);
}

/* Options for a node of run `run_id` with generous test timeouts. */
static inline void rdzv_test_opts(elastic_rdzv_opts *o, const rdzv_env *env, const char *run_id,
                                  int min_nodes, int max_nodes)
{
    elastic_rdzv_opts_init(o, sizeof *o);
    o->endpoint = env->endpoint;
    o->run_id = run_id;
    o->min_nodes = min_nodes;
    o->max_nodes = max_nodes;
    o->join_timeout_ms = test_scaled_ms(20000);
    o->last_call_timeout_ms = 60000; /* groups below max_nodes form only where a test asks */
    o->keepalive_interval_ms = 100;
    o->keepalive_timeout_ms = test_scaled_ms(1000);
    o->node_addr = "127.0.0.1";
}

static inline void rdzv_node_open(rdzv_node *node, const elastic_rdzv_opts *o)
{
    memset(node, 0, sizeof *node);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&node->lock, NULL);
    pthread_cond_init(&node->done, &attr);
    pthread_condattr_destroy(&attr);
    ASSERT_OK(elastic_rdzv_open(o, &node->rdzv));
}

static void *rdzv_node_main(void *arg)
{
    rdzv_node *node = arg;
    elastic_rdzv_result result = { .struct_size = sizeof result };
    int rc = elastic_rdzv_next(node->rdzv, &result);
    pthread_mutex_lock(&node->lock);
    node->rc = rc;
    snprintf(node->detail, sizeof node->detail, "%s", elastic_last_error());
    if (rc == 0) node->result = result;
    node->finished = true;
    pthread_cond_broadcast(&node->done);
    pthread_mutex_unlock(&node->lock);
    return NULL;
}

/* Starts next() on the node's own thread. */
static inline void rdzv_node_join(rdzv_node *node)
{
    node->finished = false;
    node->joining = true;
    if (pthread_create(&node->thread, NULL, rdzv_node_main, node) != 0) FAIL("pthread_create");
}

/* Waits (up to timeout_ms) for the join to return; returns its code. */
static inline int rdzv_node_wait(rdzv_node *node, int timeout_ms)
{
    uint64_t deadline = rdzv_test_now_ms() + (uint64_t)test_scaled_ms(timeout_ms);
    pthread_mutex_lock(&node->lock);
    struct timespec at = { (time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L };
    while (!node->finished && rdzv_test_now_ms() < deadline)
        pthread_cond_timedwait(&node->done, &node->lock, &at);
    bool finished = node->finished;
    pthread_mutex_unlock(&node->lock);
    if (!finished) FAIL("rendezvous did not return within %d ms", timeout_ms);
    pthread_join(node->thread, NULL);
    node->joining = false;
    return node->rc;
}

/* Joins and expects success. */
static inline void rdzv_node_expect_joined(rdzv_node *node, int timeout_ms)
{
    int rc = rdzv_node_wait(node, timeout_ms);
    if (rc != 0) FAIL("next: %s (%s)", elastic_err_name(rc), node->detail);
}

static inline void rdzv_node_close(rdzv_node *node)
{
    if (node->joining) (void)rdzv_node_wait(node, 30000);
    elastic_rdzv_free(node->rdzv);
    node->rdzv = NULL;
    pthread_mutex_destroy(&node->lock);
    pthread_cond_destroy(&node->done);
}

/* Opens n nodes with the same options. */
static inline void rdzv_nodes_open(rdzv_node *nodes, int n, const elastic_rdzv_opts *o)
{
    for (int i = 0; i < n; i++) rdzv_node_open(&nodes[i], o);
}

static inline void rdzv_nodes_close(rdzv_node *nodes, int n)
{
    for (int i = 0; i < n; i++)
        if (nodes[i].rdzv != NULL) rdzv_node_close(&nodes[i]);
}

/* Starts n joins and waits for all of them to succeed. */
static inline void rdzv_nodes_form(rdzv_node *nodes, int n, int timeout_ms)
{
    for (int i = 0; i < n; i++) rdzv_node_join(&nodes[i]);
    for (int i = 0; i < n; i++) rdzv_node_expect_joined(&nodes[i], timeout_ms);
}

/* Checks that the nodes agree on one generation with ranks 0..n-1. */
static inline void rdzv_expect_group(rdzv_node *nodes, int n)
{
    bool seen[64] = { false };
    for (int i = 0; i < n; i++) {
        const elastic_rdzv_result *res = &nodes[i].result;
        ASSERT_EQ(res->generation, nodes[0].result.generation);
        ASSERT_EQ(res->group_world_size, n);
        ASSERT(res->group_rank >= 0 && res->group_rank < n && res->group_rank < 64);
        ASSERT(!seen[res->group_rank]);
        seen[res->group_rank] = true;
        ASSERT_EQ(res->master_port, nodes[0].result.master_port);
        ASSERT_STR_EQ(res->master_addr, nodes[0].result.master_addr);
    }
}

/* Opens n nodes ("node-<i>") with base's options and forms one generation;
 * every node must agree on its generation and on a non-zero incarnation. */
static inline void rdzv_nodes_form_one_incarnation(rdzv_node *nodes, int n,
                                                   const elastic_rdzv_opts *base,
                                                   uint64_t *generation, uint64_t *incarnation)
{
    char ids[16][32];
    if (n > 16) FAIL("rdzv_nodes_form_one_incarnation: at most 16 nodes");
    for (int i = 0; i < n; i++) {
        elastic_rdzv_opts o = *base;
        snprintf(ids[i], sizeof ids[i], "node-%d", i);
        o.node_id = ids[i];
        rdzv_node_open(&nodes[i], &o);
    }
    rdzv_nodes_form(nodes, n, 20000);
    rdzv_expect_group(nodes, n);
    *generation = nodes[0].result.generation;
    *incarnation = nodes[0].result.incarnation;
    ASSERT(*incarnation != 0);
    for (int i = 1; i < n; i++) {
        ASSERT_EQ(nodes[i].result.generation, *generation);
        if (nodes[i].result.incarnation != *incarnation)
            FAIL("node %d has incarnation %llu, node 0 %llu", i,
                 (unsigned long long)nodes[i].result.incarnation, (unsigned long long)*incarnation);
    }
}

/* Node 0 ends the generation with a FAILURE (the run needs max_restarts
 * >= 1), the others see it, all re-form: a later generation, the same
 * incarnation. */
static inline void rdzv_nodes_fail_and_reform(rdzv_node *nodes, int n, uint64_t generation,
                                              uint64_t incarnation)
{
    elastic_rdzv_cause cause;
    memset(&cause, 0, sizeof cause);
    cause.struct_size = sizeof cause;
    cause.kind = ELASTIC_RDZV_FAILURE;
    cause.rank = 0;
    cause.exit_code = 3;
    snprintf(cause.reason, sizeof cause.reason, "worker 0 exited with 3");
    ASSERT_OK(elastic_rdzv_end_generation(nodes[0].rdzv, &cause));
    for (int i = 1; i < n; i++) {
        elastic_rdzv_cause seen = { .struct_size = sizeof seen };
        ASSERT_OK(elastic_rdzv_watch(nodes[i].rdzv, test_scaled_ms(10000), &seen));
    }
    rdzv_nodes_form(nodes, n, 20000);
    for (int i = 0; i < n; i++) {
        ASSERT(nodes[i].result.generation > generation);
        ASSERT_EQ(nodes[i].result.incarnation, incarnation);
    }
}

#endif /* ELASTIC_TEST_RDZV_FIXTURE_H */
