/* The worker environment parser: the three modes, and rejection of every
 * malformed, out-of-range or inconsistent value with the variable named. */
#include "test.h"
#include "worker/env.h"

typedef struct vars {
    const char *pairs[32][2];
} vars;

static const char *lookup(void *ctx, const char *name)
{
    vars *v = ctx;
    for (int i = 0; i < 32 && v->pairs[i][0] != NULL; i++)
        if (strcmp(v->pairs[i][0], name) == 0) return v->pairs[i][1];
    return NULL;
}

#define AGENT_VARS                                                                              \
    { "RANK", "5" }, { "LOCAL_RANK", "1" }, { "WORLD_SIZE", "8" }, { "LOCAL_WORLD_SIZE", "4" }, \
        { "GROUP_RANK", "1" }, { "TORCHELASTIC_RESTART_COUNT", "2" },                           \
        { "TORCHELASTIC_RUN_ID", "job-7" }, { "MASTER_ADDR", "10.0.0.1" },                      \
        { "MASTER_PORT", "29500" }, { "ELASTIC_STORE_ENDPOINT", "127.0.0.1:4000" },             \
        { "ELASTIC_STORE_PREFIX", "rdzv/job-7/gen/3/" }, { "ELASTIC_GENERATION", "3" },         \
        { "ELASTIC_HEARTBEAT_SHM", "/tmp/x/heartbeat" }, { "ELASTIC_HEARTBEAT_SLOT", "1" },     \
    {                                                                                           \
        "ELASTIC_AGENT_SOCKET", "/tmp/x/agent.sock"                                             \
    }

/* Parses vars with one variable replaced (or added); returns the result. */
static int parse_with(const char *name, const char *value, worker__env *env)
{
    vars v = { { AGENT_VARS } };
    int i = 0;
    while (v.pairs[i][0] != NULL && strcmp(v.pairs[i][0], name) != 0) i++;
    v.pairs[i][0] = name;
    v.pairs[i][1] = value;
    return worker__env_parse(lookup, &v, env);
}

TEST(worker_env_alone_without_variables)
{
    vars v = { { { "MASTER_ADDR", "ignored" } } };
    worker__env env;
    ASSERT_OK(worker__env_parse(lookup, &v, &env));
    ASSERT_EQ(env.mode, WORKER__ALONE);
    ASSERT_EQ(env.info.rank, 0);
    ASSERT_EQ(env.info.world_size, 1);
    ASSERT_EQ(env.info.local_world_size, 1);
    ASSERT_EQ(env.info.attached, 0);
}

TEST(worker_env_reads_torchrun_variables)
{
    vars v = { { { "RANK", "3" },
                 { "WORLD_SIZE", "4" },
                 { "LOCAL_RANK", "1" },
                 { "LOCAL_WORLD_SIZE", "2" },
                 { "GROUP_RANK", "1" },
                 { "MASTER_ADDR", "node-a.example" },
                 { "MASTER_PORT", "29400" },
                 { "TORCHELASTIC_RUN_ID", "none" } } };
    worker__env env;
    ASSERT_OK(worker__env_parse(lookup, &v, &env));
    ASSERT_EQ(env.mode, WORKER__TORCHRUN);
    ASSERT_EQ(env.info.rank, 3);
    ASSERT_EQ(env.info.local_rank, 1);
    ASSERT_EQ(env.info.local_world_size, 2);
    ASSERT_EQ(env.info.group_rank, 1);
    ASSERT_EQ(env.info.master_port, 29400);
    ASSERT_STR_EQ(env.info.master_addr, "node-a.example");
    ASSERT_STR_EQ(env.info.run_id, "none");
    ASSERT_EQ(env.heartbeat_slot, -1);
}

TEST(worker_env_reads_agent_variables)
{
    vars v = { { AGENT_VARS } };
    worker__env env;
    ASSERT_OK(worker__env_parse(lookup, &v, &env));
    ASSERT_EQ(env.mode, WORKER__AGENT);
    ASSERT_EQ(env.info.generation, 3);
    ASSERT_EQ(env.info.restart_count, 2);
    ASSERT_EQ(env.info.attached, 1);
    ASSERT_EQ(env.heartbeat_slot, 1);
    ASSERT_STR_EQ(env.store_endpoint, "127.0.0.1:4000");
    ASSERT_STR_EQ(env.store_prefix, "rdzv/job-7/gen/3/");
    ASSERT_STR_EQ(env.heartbeat_shm, "/tmp/x/heartbeat");
    ASSERT_STR_EQ(env.agent_socket, "/tmp/x/agent.sock");
    ASSERT_STR_EQ(env.info.run_id, "job-7");
}

static void expect_rejected(const char *name, const char *value)
{
    worker__env env;
    int rc = parse_with(name, value, &env);
    if (rc != ELASTIC_EINVAL) FAIL("%s=\"%s\" was accepted (rc %d)", name, value, rc);
    if (strstr(elastic_last_error(), name) == NULL)
        FAIL("the detail \"%s\" does not name %s", elastic_last_error(), name);
}

TEST(worker_env_rejects_out_of_range_ranks)
{
    expect_rejected("RANK", "8");
    expect_rejected("LOCAL_RANK", "4");
    expect_rejected("WORLD_SIZE", "0");
    expect_rejected("WORLD_SIZE", "99999999");
    expect_rejected("LOCAL_WORLD_SIZE", "9");
    expect_rejected("GROUP_RANK", "8");
    expect_rejected("MASTER_PORT", "0");
    expect_rejected("MASTER_PORT", "65536");
    expect_rejected("ELASTIC_HEARTBEAT_SLOT", "4096");
}

TEST(worker_env_rejects_malformed_numbers)
{
    expect_rejected("RANK", "");
    expect_rejected("RANK", "-1");
    expect_rejected("RANK", "+1");
    expect_rejected("RANK", " 1");
    expect_rejected("RANK", "1x");
    expect_rejected("TORCHELASTIC_RESTART_COUNT", "99999999999999999999999");
    expect_rejected("ELASTIC_GENERATION", "0x10");
    expect_rejected("ELASTIC_INCARNATION", "");
    expect_rejected("ELASTIC_INCARNATION", "-5");
    expect_rejected("ELASTIC_INCARNATION", "17646e9");
    expect_rejected("ELASTIC_INCARNATION", "99999999999999999999999");
}

/* The run's incarnation comes with the generation; without it (an older
 * agent) it is 0. */
TEST(worker_env_reads_the_incarnation)
{
    worker__env env;
    ASSERT_OK(parse_with("ELASTIC_INCARNATION", "1764600000123", &env));
    ASSERT(env.info.incarnation == 1764600000123ull);
    ASSERT_EQ(env.info.generation, 3);
    vars v = { { AGENT_VARS } };
    ASSERT_OK(worker__env_parse(lookup, &v, &env));
    ASSERT(env.info.incarnation == 0);
}

TEST(worker_env_rejects_bad_strings)
{
    expect_rejected("TORCHELASTIC_RUN_ID", "job\n7");
    expect_rejected("TORCHELASTIC_RUN_ID", "job 7");
    expect_rejected("MASTER_ADDR", "host;rm");
    expect_rejected("ELASTIC_STORE_ENDPOINT", "no-port");
    expect_rejected("ELASTIC_STORE_ENDPOINT", "host:99999");
    expect_rejected("ELASTIC_STORE_ENDPOINT",
                    "host:"); /* the store client's grammar: common/endpoint.c */
    expect_rejected("ELASTIC_STORE_ENDPOINT", "::1:4000");
    expect_rejected("ELASTIC_STORE_ENDPOINT", "[::1]:0");
    expect_rejected("ELASTIC_HEARTBEAT_SHM", "relative/path");
    expect_rejected("ELASTIC_AGENT_SOCKET", "relative.sock");
    char long_id[200];
    memset(long_id, 'a', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    expect_rejected("TORCHELASTIC_RUN_ID", long_id);
}

TEST(worker_env_reads_a_bracketed_ipv6_store_endpoint)
{
    worker__env env;
    ASSERT_OK(parse_with("ELASTIC_STORE_ENDPOINT", "[::1]:4000", &env));
    ASSERT_STR_EQ(env.store_endpoint, "[::1]:4000");
}

TEST(worker_env_rejects_incomplete_sets)
{
    worker__env env;
    vars rank_only = { { { "RANK", "0" } } };
    ASSERT_ERR(worker__env_parse(lookup, &rank_only, &env), ELASTIC_EINVAL);
    vars store_only = { { { "ELASTIC_STORE_ENDPOINT", "127.0.0.1:1" } } };
    ASSERT_ERR(worker__env_parse(lookup, &store_only, &env), ELASTIC_EINVAL);
    vars no_generation = { { { "RANK", "0" },
                             { "WORLD_SIZE", "1" },
                             { "ELASTIC_STORE_ENDPOINT", "127.0.0.1:1" },
                             { "ELASTIC_STORE_PREFIX", "p/" } } };
    ASSERT_ERR(worker__env_parse(lookup, &no_generation, &env), ELASTIC_EINVAL);
    vars shm_without_slot = { { { "RANK", "0" },
                                { "WORLD_SIZE", "1" },
                                { "ELASTIC_STORE_ENDPOINT", "127.0.0.1:1" },
                                { "ELASTIC_STORE_PREFIX", "p/" },
                                { "ELASTIC_GENERATION", "1" },
                                { "ELASTIC_HEARTBEAT_SHM", "/tmp/hb" } } };
    ASSERT_ERR(worker__env_parse(lookup, &shm_without_slot, &env), ELASTIC_EINVAL);
}
