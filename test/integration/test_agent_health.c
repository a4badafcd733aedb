/*
 * elasticrun with node health checks on one node, the GPUs the NVML
 * double's (test/nvml_double): a node short of a GPU never starts a worker
 * and ends "unhealthy"; an Xid 79 mid-run with no spare to take over stops
 * the workers as a failure, and the check before rejoining keeps the node out;
 * the checks are off with --health-checks off; and the flags' values are bounded.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "support/health_fixture.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

static int exit_code_of(pid_t pid, int timeout_ms)
{
    int status = 0;
    if (!agent_harness_wait_exit(pid, timeout_ms, &status)) {
        kill(pid, SIGKILL);
        FAIL("elasticrun did not exit within %d ms", timeout_ms);
    }
    if (WIFSIGNALED(status)) FAIL("elasticrun was killed by signal %d", WTERMSIG(status));
    return WEXITSTATUS(status);
}

/* The environment that points the agent at the double and an empty sysfs. */
static const char *const *double_env(void)
{
    static char lib[4200], state[4200], sysfs[4200];
    static const char *env[4];
    health_use_double();
    snprintf(lib, sizeof lib, "ELASTIC_NVML_LIBRARY=%s", getenv("ELASTIC_NVML_LIBRARY"));
    snprintf(state, sizeof state, "NVML_DOUBLE_STATE=%s", getenv("NVML_DOUBLE_STATE"));
    snprintf(sysfs, sizeof sysfs, "ELASTIC_HEALTH_SYSFS_ROOT=%s", test_tmpdir());
    env[0] = lib;
    env[1] = state;
    env[2] = sysfs;
    env[3] = NULL;
    return env;
}

TEST_TIMEOUT(agent_health_node_short_of_a_gpu_never_starts_a_worker, 60)
{
    const char *const *env = double_env();
    health_state("gpus 7\n");
    char events[512], report[512];
    agent_harness_path(events, sizeof events, "events.jsonl");
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--expected-gpus", "8");
    elasticrun_args_addf(&cmd, "--event-log=%s", events);
    elasticrun_args_add(&cmd, "--no-python", agent_harness_worker(), "--report", report);
    pid_t agent = elasticrun_args_spawn(&cmd, env, "agent");
    ASSERT_EQ(exit_code_of(agent, test_scaled_ms(30000)), 1);
    char *log = agent_harness_read_file(events);
    ASSERT(log != NULL);
    if (strstr(log, "\"event\":\"health_check\",") == NULL ||
        strstr(log, "\"check\":\"gpu_count\",\"gpu\":-1,") == NULL ||
        strstr(log,
               "\"value\":7,\"verdict\":\"fatal\",\"reason\":\"7 GPUs present, 8 expected\"") ==
            NULL ||
        strstr(log, "\"status\":\"unhealthy\",\"exit_code\":1,\"generations\":0") == NULL ||
        strstr(log, "worker_started") != NULL)
        FAIL("events:\n%s", log);
    free(log);
    char err[512];
    char *console = agent_harness_read_file(agent_harness_path(err, sizeof err, "agent.err"));
    ASSERT(console != NULL);
    if (strstr(console, "does not join the job: unhealthy (7 GPUs present, 8 expected)") == NULL)
        FAIL("console:\n%s", console);
    free(console);
    ASSERT(agent_harness_read_file(report) == NULL); /* no worker ever ran */
}

TEST_TIMEOUT(agent_health_xid_without_a_spare_stops_the_node_and_keeps_it_out, 90)
{
    const char *const *env = double_env();
    health_state("gpus 4\n");
    char events[512], report[512];
    agent_harness_path(events, sizeof events, "events.jsonl");
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--max-restarts", "3",
                        "--health-check-interval", "30");
    elasticrun_args_addf(&cmd, "--event-log=%s", events);
    elasticrun_args_add(&cmd, "--no-python", agent_harness_worker(), "--report", report,
                        "--sleep-ms", "600000");
    pid_t agent = elasticrun_args_spawn(&cmd, env, "agent");
    const char *started[] = { "start ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, started, 2, test_scaled_ms(20000)), 2);
    health_state("gpus 4\nxid 2 79\nlost 2\n");
    /* Well inside the 30 s period: the Xid runs a round at once. */
    ASSERT_EQ(exit_code_of(agent, test_scaled_ms(20000)), 1);
    char *log = agent_harness_read_file(events);
    ASSERT(log != NULL);
    if (strstr(log, "\"check\":\"xid\",\"gpu\":2,") == NULL ||
        strstr(log,
               "\"value\":79,\"verdict\":\"fatal\",\"reason\":\"Xid 79: the GPU has fallen off "
               "the bus\"") == NULL ||
        strstr(log, "\"event\":\"failure\",") == NULL ||
        strstr(log, "node unhealthy: GPU 2 (GPU-d0b1e000-0000-4000-8000-000000000002, "
                    "00000000:12:00.0): Xid 79: the GPU has fallen off the bus") == NULL ||
        strstr(log, "\"status\":\"unhealthy\",\"exit_code\":1,\"generations\":1") == NULL)
        FAIL("events:\n%s", log);
    free(log);
}

TEST_TIMEOUT(agent_health_checks_off_run_no_checks, 60)
{
    const char *const *env = double_env();
    health_state("gpus 7\n");
    char events[512], report[512];
    agent_harness_path(events, sizeof events, "events.jsonl");
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "1", "--expected-gpus", "8",
                        "--health-checks", "off");
    elasticrun_args_addf(&cmd, "--event-log=%s", events);
    elasticrun_args_add(&cmd, "--no-python", agent_harness_worker(), "--report", report,
                        "--exit-after-restart", "0");
    pid_t agent = elasticrun_args_spawn(&cmd, env, "agent");
    ASSERT_EQ(exit_code_of(agent, test_scaled_ms(30000)), 0);
    char *log = agent_harness_read_file(events);
    ASSERT(log != NULL);
    if (strstr(log, "health_check") != NULL || strstr(log, "\"status\":\"succeeded\"") == NULL)
        FAIL("events:\n%s", log);
    free(log);
}

TEST(agent_health_flags_default_parse_and_refuse_bad_values)
{
    elastic_agent_opts o;
    ASSERT_OK(elastic_agent_opts_init(&o, sizeof o));
    ASSERT_STR_EQ(o.health_checks, "auto");
    ASSERT_EQ(o.health_check_interval_ms, 30000);
    ASSERT_EQ(o.health_check_timeout_ms, 60000);
    ASSERT_EQ(o.expected_gpus, 0);
    ASSERT(o.health_check_cmd == NULL);
    const char *good[] = { "elasticrun",
                           "--health-checks=gpu,network",
                           "--health-check-interval",
                           "0",
                           "--health-check-cmd",
                           "dcgmi diag -r 1",
                           "--health-check-timeout=2.5",
                           "--expected-gpus",
                           "8",
                           "--health-temperature-max",
                           "90",
                           "train.py",
                           NULL };
    ASSERT_OK(elastic_agent_parse_args(12, good, NULL, &o));
    ASSERT_STR_EQ(o.health_checks, "gpu,network");
    ASSERT_EQ(o.health_check_interval_ms, 0);
    ASSERT_STR_EQ(o.health_check_cmd, "dcgmi diag -r 1");
    ASSERT_EQ(o.health_check_timeout_ms, 2500);
    ASSERT_EQ(o.expected_gpus, 8);
    ASSERT_EQ(o.health_temperature_max, 90);
    static const char *const bad[][2] = { { "--health-checks", "gpu,disk" },
                                          { "--health-checks", "gpu," },
                                          { "--health-checks", "" },
                                          { "--health-check-timeout", "0" },
                                          { "--health-check-interval", "-1" },
                                          { "--expected-gpus", "65" },
                                          { "--health-temperature-max", "200" },
                                          { "--health-check-cmd", "" } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        elastic_agent_opts fresh;
        ASSERT_OK(elastic_agent_opts_init(&fresh, sizeof fresh));
        const char *argv[] = { "elasticrun", bad[i][0], bad[i][1], "train.py", NULL };
        int rc = elastic_agent_parse_args(4, argv, NULL, &fresh);
        if (rc != ELASTIC_EINVAL) FAIL("%s %s was accepted", bad[i][0], bad[i][1]);
        if (strstr(elastic_last_error(), bad[i][0] + 2) == NULL &&
            strstr(elastic_last_error(), "health") == NULL &&
            strstr(elastic_last_error(), "gpus") == NULL)
            FAIL("%s %s: the error does not name the flag: %s", bad[i][0], bad[i][1],
                 elastic_last_error());
    }
}
