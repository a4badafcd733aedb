/*
 * elasticrun on one node with real worker processes: restarts after a kill,
 * the restart budget and its root-cause summary, SIGTERM and SIGKILL of the
 * agent leaving no process behind, prompt success, and the command line's
 * exit code 2.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

#define START_MS 20000

static pid_t worker_pid(const char *report, const char *restart, int rank)
{
    char rank_needle[32], line[512];
    snprintf(rank_needle, sizeof rank_needle, "rank=%d ", rank);
    const char *needles[] = { "start ", rank_needle, restart, NULL };
    if (!agent_harness_nth_line(report, needles, 0, line, sizeof line))
        FAIL("no start line for rank %d (%s)", rank, restart);
    return (pid_t)agent_harness_line_field(line, "pid");
}

TEST_TIMEOUT(agent_restarts_killed_worker_with_the_same_world, 60)
{
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "3", "--max-restarts", "2",
                        "--no-python", agent_harness_worker(), "--report", report,
                        "--exit-after-restart", "1");
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "agent");
    const char *first[] = { "start ", "restart=0 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, first, 3, START_MS), 3);
    pid_t victim = worker_pid(report, "restart=0 ", 1);
    ASSERT_EQ(kill(victim, SIGKILL), 0);
    ASSERT_EQ(agent_harness_exit_code(agent, 30000), 0);
    const char *second[] = { "start ", "restart=1 ", "world=3 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, second, 3, 1000), 3);
    for (int rank = 0; rank < 3; rank++) {
        pid_t pid = worker_pid(report, "restart=1 ", rank);
        ASSERT(pid > 0);
        ASSERT_NE(pid, worker_pid(report, "restart=0 ", rank));
    }
}

TEST_TIMEOUT(agent_budget_exhausted_names_the_failing_rank, 60)
{
    char report[512], error_file[512], err_path[512];
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(error_file, sizeof error_file, "root_cause.json");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "3", "--max-restarts", "1",
                        "--error-file", error_file, "--no-python", agent_harness_worker(),
                        "--report", report, "--fail-rank", "2", "--fail-code", "7");
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "agent");
    int code = agent_harness_exit_code(agent, 30000);
    ASSERT_NE(code, 0);
    const char *starts[] = { "start ", "rank=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, starts, 2, 1000),
              2); /* the first run and one restart */
    char *err = agent_harness_read_file(agent_harness_path(err_path, sizeof err_path, "agent.err"));
    ASSERT(err != NULL);
    if (strstr(err, "restart budget exhausted") == NULL || strstr(err, "rank 2 ") == NULL ||
        strstr(err, "exit code 7") == NULL || strstr(err, "worker rank 2 fails on purpose") == NULL)
        FAIL("the summary misses the root cause:\n%s", err);
    free(err);
    char *json = agent_harness_read_file(error_file);
    ASSERT(json != NULL);
    ASSERT(strstr(json, "\"message\"") != NULL);
    ASSERT(strstr(json, "rank 2") != NULL);
    free(json);
}

/* SIG_IGN for SIGCHLD survives exec: an agent started that way must still
 * learn its workers' exit codes (the kernel would otherwise discard them). */
TEST_TIMEOUT(agent_started_with_sigchld_ignored_still_reports_exit_codes, 60)
{
    char report[512], err_path[512];
    agent_harness_path(report, sizeof report, "report");
    const char *argv[] = { "env",
                           "--ignore-signal=CHLD",
                           agent_harness_elasticrun(),
                           "--standalone",
                           "--nproc-per-node",
                           "2",
                           "--no-python",
                           agent_harness_worker(),
                           "--report",
                           report,
                           "--fail-rank",
                           "1",
                           "--fail-code",
                           "7",
                           NULL };
    pid_t agent = agent_harness_spawn("/usr/bin/env", argv, NULL, "agent");
    ASSERT_EQ(agent_harness_exit_code(agent, 30000), 1);
    char *err = agent_harness_read_file(agent_harness_path(err_path, sizeof err_path, "agent.err"));
    ASSERT(err != NULL);
    if (strstr(err, "rank 1 ") == NULL || strstr(err, "exit code 7") == NULL)
        FAIL("the summary lost the worker's exit code:\n%s", err);
    free(err);
}

TEST_TIMEOUT(agent_single_worker_failures_consume_the_budget, 60)
{
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--max-restarts", "2", "--no-python",
                        agent_harness_worker(), "--report", report, "--fail-rank", "0");
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "agent");
    ASSERT_EQ(agent_harness_exit_code(agent, 30000), 1);
    const char *starts[] = { "start ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, starts, 3, 1000),
              3); /* the first run and two restarts */
    const char *restarts[] = { "start ", "restart=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, restarts, 1, 1000), 1);
}

TEST_TIMEOUT(agent_copies_the_workers_error_file, 60)
{
    char report[512], error_file[512];
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(error_file, sizeof error_file, "root_cause.json");
    const char *worker_json = "{\"message\": {\"message\": \"ValueError: bad batch\"}}";
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--error-file", error_file,
                        "--no-python", agent_harness_worker(), "--report", report, "--fail-rank",
                        "1", "--error-file-text", worker_json);
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "agent");
    ASSERT_NE(agent_harness_exit_code(agent, 30000), 0);
    char *json = agent_harness_read_file(error_file);
    ASSERT(json != NULL);
    ASSERT_STR_EQ(json, worker_json);
    free(json);
}

/* Every worker and grandchild the report names is gone. */
static void assert_all_gone(const char *report, int expected_workers)
{
    const char *starts[] = { "start ", NULL };
    char line[512];
    for (int i = 0; i < expected_workers; i++) {
        if (!agent_harness_nth_line(report, starts, i, line, sizeof line))
            FAIL("missing start line %d", i);
        pid_t pid = (pid_t)agent_harness_line_field(line, "pid"),
              child = (pid_t)agent_harness_line_field(line, "child");
        if (!agent_harness_wait_gone(pid, 10000)) FAIL("worker %d outlived its agent", (int)pid);
        if (child > 0 && !agent_harness_wait_gone(child, 10000))
            FAIL("grandchild %d outlived its agent", (int)child);
    }
}

TEST_TIMEOUT(agent_sigterm_leaves_no_process_of_the_job, 60)
{
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "3", "--no-python",
                        agent_harness_worker(), "--report", report, "--grandchild");
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "agent");
    const char *starts[] = { "start ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, starts, 3, START_MS), 3);
    ASSERT_EQ(kill(agent, SIGTERM), 0);
    ASSERT_EQ(agent_harness_exit_code(agent, 20000), 128 + SIGTERM);
    assert_all_gone(report, 3);
}

TEST_TIMEOUT(agent_sigkill_takes_its_workers_along, 60)
{
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--no-python",
                        agent_harness_worker(), "--report", report);
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "agent");
    const char *starts[] = { "start ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, starts, 2, START_MS), 2);
    ASSERT_EQ(kill(agent, SIGKILL), 0);
    int status;
    ASSERT(agent_harness_wait_exit(agent, 10000, &status));
    assert_all_gone(report, 2);
}

TEST_TIMEOUT(agent_exits_zero_when_every_worker_succeeds, 60)
{
    char report[512], out_path[512];
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--tee", "1", "--no-python",
                        agent_harness_worker(), "--report", report, "--exit-after-restart", "0");
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "agent");
    ASSERT_EQ(agent_harness_exit_code(agent, 20000), 0);
    char *out = agent_harness_read_file(agent_harness_path(out_path, sizeof out_path, "agent.out"));
    ASSERT(out != NULL);
    if (strstr(out, "[default0]:rank 0 done\n") == NULL ||
        strstr(out, "[default1]:rank 1 done\n") == NULL)
        FAIL("tee'd output lacks the rank prefixes:\n%s", out);
    free(out);
}

TEST(agent_rejects_bad_flags_with_exit_code_2)
{
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nnodes", "3:2", "--no-python", "/bin/true");
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "agent");
    ASSERT_EQ(agent_harness_exit_code(agent, 10000), 2);
    char err_path[512];
    char *err = agent_harness_read_file(agent_harness_path(err_path, sizeof err_path, "agent.err"));
    ASSERT(err != NULL);
    ASSERT(strstr(err, "--nnodes") != NULL);
    ASSERT_EQ(strchr(err, '\n') - err + 1, (long)strlen(err)); /* one line */
    free(err);
}
