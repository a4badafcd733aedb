/* The job's failure history in the rendezvous' own keys
 * (src/agent/failure_history.c over src/rdzv/jobkv.c), on the c10d store and
 * on a real etcd: what nodes wrote is read back in generation order with the
 * policy's counters, a record that does not decode is skipped, the ring
 * stays bounded and keeps the newest, and a decision made over it outlives
 * the agent that wrote the first occurrence. */
#include "agent/failure_history.h"
#include "rdzv/rdzv.h"
#include "support/etcd_fixture.h"
#include "support/rdzv_fixture.h"

#include <stdio.h>

static failure_policy_entry entry(uint64_t generation, int64_t step, int rank, const char *node,
                                  int cls, const char *signature)
{
    failure_policy_entry e = { .generation = generation,
                               .step = step,
                               .rank = rank,
                               .cls = cls,
                               .time_ms = 1000 * generation };
    snprintf(e.node, sizeof e.node, "%s", node);
    snprintf(e.signature, sizeof e.signature, "%s", signature);
    e.signature_hash = 7 + strlen(signature);
    return e;
}

static elastic_rdzv *open_on_store(const rdzv_env *env, const char *run_id, rdzv_node *node)
{
    elastic_rdzv_opts o;
    rdzv_test_opts(&o, env, run_id, 1, 2);
    rdzv_node_open(node, &o);
    return node->rdzv;
}

static void config_of(failure_policy_config *c, int max_restarts)
{
    failure_policy__config_defaults(c, max_restarts);
    c->world_size = 4;
    c->nodes = 2;
}

TEST(agent_failure_history_round_trip_through_the_rendezvous)
{
    rdzv_env env;
    rdzv_env_start(&env);
    rdzv_node job, other;
    elastic_rdzv *r = open_on_store(&env, "job", &job);
    elastic_rdzv *o = open_on_store(&env, "other", &other);
    failure_policy_config c;
    config_of(&c, 10);
    failure_policy_entry b = entry(2, 37, 1, "n2", FC_UNKNOWN, "unknown|SIGKILL||");
    failure_policy_entry a =
        entry(1, 37, 0, "n1", FC_USER_CODE, "user_code|ValueError|t.py:4 in f|x");
    ASSERT_OK(agent__failure_history_put(r, &b));
    ASSERT_OK(agent__failure_history_put(r, &a));
    ASSERT_OK(agent__failure_history_put(r, &a)); /* a retried write: counted once */
    /* validated on the way back: junk in a slot, a key that is no slot */
    ASSERT_OK(rdzv__job_set(r, "agent/failures/0999", "junk", 4));
    ASSERT_OK(rdzv__job_set(r, "agent/failures/x", "F1\tjunk", 7));
    ASSERT_ERR(rdzv__job_set(r, "r/1/end", "x", 1), ELASTIC_EINVAL); /* not the agent's key */
    ASSERT_OK(agent__failure_history_put(o, &a)); /* another job's */
    static failure_policy_history h;
    ASSERT_OK(agent__failure_history_read(r, 2000, &c, &h));
    ASSERT_EQ(h.count, 2);
    ASSERT_EQ(h.entries[0].generation, (uint64_t)1);
    ASSERT_STR_EQ(h.entries[0].signature, a.signature);
    ASSERT_EQ(h.entries[1].generation, (uint64_t)2);
    ASSERT_EQ(h.budget_used, 2);
    /* the same bug at the same step in generation 4: the decider stops the job */
    failure_policy_entry again = entry(4, 37, 3, "n2", FC_USER_CODE, a.signature);
    failure_policy_result res;
    failure_policy__decide(&c, &h, &again, &res);
    ASSERT_EQ(res.decision, FD_STOP_BUG);
    ASSERT_EQ(res.rule, FR_REPEAT);
    ASSERT_EQ(res.seen_generations[0], (uint64_t)1);
    rdzv_node_close(&job);
    rdzv_node_close(&other);
    rdzv_env_stop(&env);
}

TEST(agent_failure_history_is_a_bounded_ring_of_the_newest)
{
    rdzv_env env;
    rdzv_env_start(&env);
    rdzv_node node;
    elastic_rdzv *r = open_on_store(&env, "ring", &node);
    failure_policy_config c;
    failure_policy__config_defaults(&c, 100000);
    c.quarantine_failures = 0;
    int total = AGENT_FAILURE_HISTORY_SLOTS + 20;
    for (int g = 1; g <= total; g++) {
        failure_policy_entry e = entry((uint64_t)g, g, 0, "n1", FC_UNKNOWN, "u");
        ASSERT_OK(agent__failure_history_put(r, &e));
    }
    char **keys = NULL;
    size_t n = 0;
    ASSERT_OK(rdzv__job_keys(r, "agent/failures/", 4 * AGENT_FAILURE_HISTORY_SLOTS, &keys, &n));
    ASSERT_EQ(n, (size_t)AGENT_FAILURE_HISTORY_SLOTS); /* the oldest overwritten */
    elastic_free(keys);
    static failure_policy_history h;
    ASSERT_OK(agent__failure_history_read(r, 5000, &c, &h));
    ASSERT_EQ(h.count, FAILURE_POLICY_MAX_ENTRIES);
    ASSERT_EQ(h.entries[0].generation, (uint64_t)(total - FAILURE_POLICY_MAX_ENTRIES + 1));
    ASSERT_EQ(h.entries[h.count - 1].generation, (uint64_t)total);
    rdzv_node_close(&node);
    rdzv_env_stop(&env);
}

/* The first occurrence decided by one agent, which then goes away; the
 * second, on another node's new agent, is found over the same history. A
 * consequence is never written. */
static void decide_across_agents(elastic_rdzv *first_agent, elastic_rdzv *(*reopen)(void *),
                                 void *arg, rdzv_node *closing)
{
    failure_policy_config c;
    config_of(&c, 10);
    const char *bug = "user_code|ValueError|trainer.py:42 in check_batch|bad batch at step <n>";
    failure_policy_entry first = entry(1, 36, 1, "n1", FC_USER_CODE, bug);
    failure_policy_result res;
    ASSERT_OK(agent__failure_history_decide(first_agent, 2000, &c, &first, &res));
    ASSERT_EQ(res.decision, FD_RESTART);
    ASSERT_EQ(res.budget_used, 1);
    failure_policy_entry peer = entry(1, 36, 2, "n2", FC_COMM, "comm|||");
    peer.consequence = true;
    ASSERT_OK(agent__failure_history_decide(first_agent, 2000, &c, &peer, &res));
    ASSERT_EQ(res.decision, FD_NONE);
    rdzv_node_close(closing); /* the agent that decided is gone */
    elastic_rdzv *r = reopen(arg);
    failure_policy_entry second = entry(2, 36, 3, "n3", FC_USER_CODE, bug);
    ASSERT_OK(agent__failure_history_decide(r, 2000, &c, &second, &res));
    ASSERT_EQ(res.decision, FD_STOP_BUG);
    ASSERT_EQ(res.rule, FR_REPEAT);
    ASSERT_EQ(res.seen_generations[0], (uint64_t)1);
    ASSERT_EQ(res.seen_generations[1], (uint64_t)2);
    static failure_policy_history h;
    ASSERT_OK(agent__failure_history_read(r, 2000, &c, &h));
    ASSERT_EQ(h.count, 2); /* the two causes; the consequence was not written */
    /* deciding again for the same failure (a retried call) gives the same answer */
    ASSERT_OK(agent__failure_history_decide(r, 2000, &c, &second, &res));
    ASSERT_EQ(res.decision, FD_STOP_BUG);
    c.torchrun_counting = true;
    ASSERT_OK(agent__failure_history_decide(r, 2000, &c, &second, &res));
    ASSERT_EQ(res.decision, FD_RESTART);
    ASSERT_EQ(res.rule, FR_TORCHRUN);
}

typedef struct reopen_ctx {
    rdzv_env *env;
    elastic_rdzv_opts *etcd; /* NULL: the store */
    rdzv_node node;
} reopen_ctx;

static elastic_rdzv *reopen(void *arg)
{
    reopen_ctx *ctx = arg;
    if (ctx->etcd == NULL) return open_on_store(ctx->env, "job", &ctx->node);
    rdzv_node_open(&ctx->node, ctx->etcd);
    return ctx->node.rdzv;
}

TEST(agent_failure_history_outlives_the_deciding_agent_on_the_store)
{
    rdzv_env env;
    rdzv_env_start(&env);
    rdzv_node first;
    reopen_ctx ctx = { .env = &env };
    decide_across_agents(open_on_store(&env, "job", &first), reopen, &ctx, &first);
    rdzv_node_close(&ctx.node);
    rdzv_env_stop(&env);
}

TEST_TIMEOUT(agent_failure_history_outlives_the_deciding_agent_on_etcd, 60)
{
    etcd_cluster cluster;
    etcd_cluster_start(&cluster, 1);
    rdzv_env unused = { 0 };
    elastic_rdzv_opts o;
    rdzv_test_opts(&o, &unused, "histjob", 1, 2);
    o.endpoint = NULL;
    o.backend = ELASTIC_RDZV_BACKEND_ETCD;
    o.etcd_endpoints = cluster.endpoints;
    o.keepalive_interval_ms = 200;
    o.keepalive_timeout_ms = test_scaled_ms(1000);
    rdzv_node first;
    rdzv_node_open(&first, &o);
    reopen_ctx ctx = { .etcd = &o };
    decide_across_agents(first.rdzv, reopen, &ctx, &first);
    rdzv_node_close(&ctx.node);
    etcd_cluster_stop(&cluster);
}
