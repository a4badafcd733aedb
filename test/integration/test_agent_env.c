/*
 * The torchrun environment contract: every variable torch 1.13's
 * LocalElasticAgent sets, with the values torchrun would give, plus ours;
 * and the per-generation, per-rank log directory.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include "common/clock.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* The value of NAME in an environment dump ("NAME=value" lines). */
static const char *env_value(const char *dump, const char *name, char *out, size_t size)
{
    char needle[128];
    snprintf(needle, sizeof needle, "\n%s=", name);
    const char *at = strstr(dump, needle);
    if (at == NULL && strncmp(dump, needle + 1, strlen(needle + 1)) == 0) at = dump - 1;
    if (at == NULL) return NULL;
    at += strlen(needle);
    size_t len = strcspn(at, "\n");
    snprintf(out, size, "%.*s", (int)len, at);
    return out;
}

#define ASSERT_ENV(dump, name, expected)                                                       \
    do {                                                                                       \
        char value_[512];                                                                      \
        if (env_value(dump, name, value_, sizeof value_) == NULL) FAIL("%s is not set", name); \
        ASSERT_STR_EQ(value_, expected);                                                       \
    } while (0)

static void run_to_success(const elasticrun_args *cmd, const char *const *env)
{
    pid_t agent = elasticrun_args_spawn(cmd, env, "agent");
    int status = 0;
    if (!agent_harness_wait_exit(agent, 30000, &status)) {
        kill(agent, SIGKILL);
        FAIL("elasticrun did not finish");
    }
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
}

TEST_TIMEOUT(agent_sets_the_torchrun_environment, 60)
{
    char report[512], env_dir[512], log_dir[512], path[700];
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(env_dir, sizeof env_dir, "env");
    agent_harness_path(log_dir, sizeof log_dir, "logs");
    mkdir(env_dir, 0755);
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nnodes=1", "--nproc_per_node=2", "--max-restarts", "3", "--role",
                        "trainer", "--rdzv-id", "envjob", "--log-dir", log_dir, "--no-python",
                        agent_harness_worker(), "--report", report, "--env-dir", env_dir,
                        "--exit-after-restart", "0");
    const char *env[] = { "NCCL_ASYNC_ERROR_HANDLING=0", "RANK=99", /* RANK is ours to set */
                          "ELASTIC_ETCD_PASSWORD=agent-only", NULL };
    unsetenv("OMP_NUM_THREADS");
    unsetenv("TORCH_NCCL_ASYNC_ERROR_HANDLING");
    uint64_t started_ms = elastic__wall_ms();
    run_to_success(&cmd, env);
    char first_incarnation[512] = "";
    for (int rank = 0; rank < 2; rank++) {
        snprintf(path, sizeof path, "%s/restart0_rank%d.env", env_dir, rank);
        char *dump = agent_harness_read_file(path);
        if (dump == NULL) FAIL("rank %d wrote no environment", rank);
        char expected[700];
        snprintf(expected, sizeof expected, "%d", rank);
        ASSERT_ENV(dump, "RANK", expected);
        ASSERT_ENV(dump, "LOCAL_RANK", expected);
        ASSERT_ENV(dump, "ROLE_RANK", expected);
        ASSERT_ENV(dump, "GROUP_RANK", "0");
        ASSERT_ENV(dump, "ROLE_NAME", "trainer");
        ASSERT_ENV(dump, "LOCAL_WORLD_SIZE", "2");
        ASSERT_ENV(dump, "WORLD_SIZE", "2");
        ASSERT_ENV(dump, "GROUP_WORLD_SIZE", "1");
        ASSERT_ENV(dump, "ROLE_WORLD_SIZE", "2");
        ASSERT_ENV(dump, "TORCHELASTIC_RESTART_COUNT", "0");
        ASSERT_ENV(dump, "TORCHELASTIC_MAX_RESTARTS", "3");
        ASSERT_ENV(dump, "TORCHELASTIC_RUN_ID", "envjob");
        ASSERT_ENV(dump, "TORCHELASTIC_USE_AGENT_STORE", "False");
        ASSERT_ENV(dump, "NCCL_ASYNC_ERROR_HANDLING", "0"); /* inherited */
        ASSERT_ENV(dump, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
        ASSERT_ENV(dump, "OMP_NUM_THREADS", "1");
        ASSERT_ENV(dump, "ELASTIC_RUN_ID", "envjob");
        ASSERT_ENV(dump, "ELASTIC_GENERATION", "1");
        ASSERT_ENV(dump, "ELASTIC_STORE_PREFIX", "job/envjob/gen/1/");
        snprintf(expected, sizeof expected, "%s/envjob/gen_1/rank_%d/error.json", log_dir, rank);
        ASSERT_ENV(dump, "TORCHELASTIC_ERROR_FILE", expected);
        char value[512];
        /* The run's incarnation: the agent's start, in wall-clock ms, the same for every rank. */
        ASSERT(env_value(dump, "ELASTIC_INCARNATION", value, sizeof value) != NULL);
        unsigned long long incarnation = strtoull(value, NULL, 10);
        if (incarnation < started_ms || incarnation > elastic__wall_ms())
            FAIL("ELASTIC_INCARNATION=%s is not the agent's start", value);
        if (rank == 0) snprintf(first_incarnation, sizeof first_incarnation, "%s", value);
        ASSERT_STR_EQ(value, first_incarnation);
        ASSERT(env_value(dump, "MASTER_ADDR", value, sizeof value) != NULL);
        ASSERT(env_value(dump, "MASTER_PORT", value, sizeof value) != NULL && atoi(value) > 0 &&
               atoi(value) < 65536);
        ASSERT(env_value(dump, "ELASTIC_STORE_ENDPOINT", value, sizeof value) != NULL &&
               strchr(value, ':') != NULL);
        /* The token is not in the environment; a private file holds it. */
        ASSERT(env_value(dump, "ELASTIC_STORE_TOKEN", value, sizeof value) == NULL);
        /* Nor is the etcd password the agent may read from its own environment. */
        ASSERT(env_value(dump, "ELASTIC_ETCD_PASSWORD", value, sizeof value) == NULL);
        ASSERT(env_value(dump, "ELASTIC_STORE_TOKEN_FILE", value, sizeof value) != NULL &&
               strstr(value, "/store_token") != NULL);
        ASSERT(strstr(dump, "#token_file_mode=600\n") != NULL);
        ASSERT(strstr(dump, "#store_check=ok\n") != NULL);
        free(dump);
        snprintf(path, sizeof path, "%s/envjob/gen_1/rank_%d/stdout.log", log_dir, rank);
        char *log = agent_harness_read_file(path);
        if (log == NULL) FAIL("no %s", path);
        snprintf(expected, sizeof expected, "rank %d done\n", rank);
        ASSERT_STR_EQ(log, expected);
        free(log);
    }
}

TEST_TIMEOUT(agent_substitutes_local_rank_and_keeps_user_variables, 60)
{
    char report[512], env_dir[512], path[700];
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(env_dir, sizeof env_dir, "env");
    mkdir(env_dir, 0755);
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nproc-per-node", "1", "--no-python", agent_harness_worker(),
                        "--report", report, "--env-dir", env_dir, "--exit-after-restart", "0",
                        "--tag", "lr${local_rank}");
    const char *env[] = { "MY_SETTING=kept", "OMP_NUM_THREADS=7", NULL };
    run_to_success(&cmd, env);
    snprintf(path, sizeof path, "%s/restart0_rank0.env", env_dir);
    char *dump = agent_harness_read_file(path);
    ASSERT(dump != NULL);
    ASSERT_ENV(dump, "MY_SETTING", "kept");
    ASSERT_ENV(dump, "OMP_NUM_THREADS", "7");
    ASSERT_ENV(dump, "WORLD_SIZE", "1");
    ASSERT_ENV(dump, "TORCHELASTIC_RUN_ID", "none");
    free(dump);
    const char *tagged[] = { "start ", "tag=lr0", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, tagged, 1, 1000), 1);
}
