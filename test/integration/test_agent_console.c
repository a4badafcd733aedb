/*
 * What a person sees on elasticrun's stderr: a failure, the group running
 * again and the job's summary (silenced by --quiet), the root cause said once
 * with the worker's error file as a traceback, "waiting for nodes" naming the
 * missing node, and one short line for an unreachable store.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "rdzv/rdzv.h"
#include "test.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>

#define RUN_MS 30000

static int run_to_end(const char *name, const elasticrun_args *cmd)
{
    pid_t pid = elasticrun_args_spawn(cmd, NULL, name);
    int status = 0;
    if (!agent_harness_wait_exit(pid, RUN_MS, &status)) {
        kill(pid, SIGKILL);
        FAIL("%s did not exit within %d ms", name, RUN_MS);
    }
    ASSERT(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static char *stderr_of(const char *name)
{
    char file[64], path[512];
    snprintf(file, sizeof file, "%s.err", name);
    char *text = agent_harness_read_file(agent_harness_path(path, sizeof path, file));
    ASSERT(text != NULL);
    return text;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *at = strstr(text, needle); at != NULL; at = strstr(at + 1, needle)) n++;
    return n;
}

/* The one line starting with `prefix`, copied into out. */
static bool line_starting(const char *text, const char *prefix, char *out, size_t size)
{
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        if (strncmp(line, prefix, strlen(prefix)) == 0) {
            snprintf(out, size, "%.*s", (int)len, line);
            return true;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    return false;
}

TEST_TIMEOUT(agent_console_says_failure_restart_and_summary_and_quiet_silences_them, 90)
{
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                        "--no-python", agent_harness_worker(), "--report", report, "--fail-rank",
                        "1", "--fail-code", "7", "--fail-until-restart", "1",
                        "--exit-after-restart", "1");
    ASSERT_EQ(run_to_end("loud", &cmd), 0);
    char *err = stderr_of("loud");
    char line[1024];
    if (!line_starting(err, "elasticrun: rank 1 (local rank 1, pid ", line, sizeof line) ||
        strstr(line, "failed: exit code 7; restarting (1 of 2 restarts left)") == NULL)
        FAIL("no failure line:\n%s", err);
    if (!line_starting(err, "elasticrun: generation ", line, sizeof line) ||
        strstr(line, "running: world size 2 (1 node), ") == NULL ||
        strstr(line, " after the failure") == NULL)
        FAIL("no running-again line:\n%s", err);
    if (!line_starting(err, "elasticrun: job succeeded after ", line, sizeof line) ||
        strstr(line, ": 2 generations, 1 restart, ") == NULL ||
        strstr(line, ": 2 generations, 1 restart, at least ") == NULL ||
        strstr(line, " s lost to failures (ETTR unknown: no steps reported, so redone work is "
                     "not counted)") == NULL)
        FAIL("no summary line (this worker reports no steps: ETTR unknown):\n%s", err);
    /* one line per event, nothing else (besides the start line naming the run) */
    ASSERT_EQ(count_of(err, "elasticrun: run "), 1);
    ASSERT_EQ(count_of(err, "elasticrun: "), 4);
    free(err);

    elasticrun_args quiet;
    elasticrun_args_init(&quiet);
    elasticrun_args_add(&quiet, "--quiet", "--standalone", "--nproc-per-node", "2",
                        "--max-restarts", "2", "--no-python", agent_harness_worker(), "--report",
                        report, "--fail-rank", "1", "--fail-code", "7", "--fail-until-restart", "1",
                        "--exit-after-restart", "1");
    ASSERT_EQ(run_to_end("quiet", &quiet), 0);
    err = stderr_of("quiet");
    if (strstr(err, "elasticrun: ") != NULL) FAIL("--quiet still printed:\n%s", err);
    ASSERT(strstr(err, "fails on purpose") != NULL); /* the workers' own output still flows */
    free(err);
}

TEST_TIMEOUT(agent_console_root_cause_is_said_once_with_the_error_file_as_a_traceback, 90)
{
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    const char *error_json =
        "{\"message\": {\"message\": \"ValueError: bad batch\", \"extraInfo\": {\"py_callstack\": "
        "\"Traceback (most recent call last):\\n  File \\\"train.py\\\", line 3, in <module>\\n"
        "    step()\\nValueError: bad batch\\n\", \"timestamp\": \"1\"}}}";
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--max-restarts", "0",
                        "--no-python", agent_harness_worker(), "--report", report, "--fail-rank",
                        "1", "--fail-code", "3", "--error-file-text", error_json);
    ASSERT_NE(run_to_end("traceback", &cmd), 0);
    char *err = stderr_of("traceback");
    char line[1024];
    if (!line_starting(err, "first failure: rank 1 on node ", line, sizeof line))
        FAIL("no root cause:\n%s", err);
    ASSERT_EQ(count_of(line, "exit code 3"), 1);
    ASSERT(strstr(err, "no restarts left (--max-restarts 0): the job fails") != NULL);
    if (strstr(err, "\n  Traceback (most recent call last):\n    File \"train.py\", line 3, in "
                    "<module>\n      step()\n"
                    "  ValueError: bad batch\n") == NULL)
        FAIL("the error file is not rendered as a traceback:\n%s", err);
    ASSERT(strstr(err, "\\n") == NULL);          /* no raw JSON escapes */
    ASSERT(strstr(err, "py_callstack") == NULL); /* nor the JSON itself */
    ASSERT_EQ(count_of(err, "ValueError: bad batch"), 1);
    free(err);
}

TEST_TIMEOUT(agent_console_root_cause_of_a_killed_worker_names_the_signal_once, 90)
{
    char report[512], line[1024];
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "1", "--no-python",
                        agent_harness_worker(), "--report", report, "--sleep-ms", "60000");
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "killed");
    const char *started[] = { "start ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, started, 1, RUN_MS), 1);
    ASSERT(agent_harness_nth_line(report, started, 0, line, sizeof line));
    ASSERT_EQ(kill((pid_t)agent_harness_line_field(line, "pid"), SIGKILL), 0);
    int status = 0;
    ASSERT(agent_harness_wait_exit(agent, RUN_MS, &status));
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    char *err = stderr_of("killed");
    if (!line_starting(err, "first failure: rank 0 on node ", line, sizeof line))
        FAIL("no root cause:\n%s", err);
    ASSERT_EQ(count_of(line, "killed by signal 9"), 1);
    ASSERT(strstr(line, "(SIGKILL)") != NULL);
    ASSERT(strstr(err, "elasticrun: job failed after ") != NULL);
    free(err);
}

TEST_TIMEOUT(agent_console_waiting_for_nodes_names_the_missing_node, 180)
{
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64], report[512];
    int port = 0;
    ASSERT_OK(elastic_store_server_get_port(server, &port));
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    agent_harness_path(report, sizeof report, "report");
    pid_t agents[2];
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", i);
        elasticrun_args cmd;
        elasticrun_args_init(&cmd);
        elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "waiting",
                            "--rdzv-conf", "is_host=0,last_call_timeout=1", "--local-addr",
                            "127.0.0.1", "--no-python", agent_harness_worker(), "--report", report,
                            "--sleep-ms", "120000");
        agents[i] = elasticrun_args_spawn(&cmd, NULL, name);
    }
    const char *started[] = { "start ", "world=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, started, 2, 60000), 2);
    ASSERT_EQ(kill(agents[1], SIGKILL),
              0); /* node1's workers die with it (they follow their agent) */
    char host[128] = "node", missing[200], err_path[512];
    gethostname(host, sizeof host - 1);
    snprintf(missing, sizeof missing, "missing: %s-%d", host, (int)agents[1]);
    const char *waiting[] = { "elasticrun: waiting for nodes: ", " 1 joined, 2 wanted, ", missing,
                              NULL };
    agent_harness_path(err_path, sizeof err_path, "node0.err");
    if (agent_harness_wait_lines(err_path, waiting, 2, 40000) <
        2) { /* repeated, every few seconds */
        char *err = stderr_of("node0");
        kill(agents[0], SIGKILL);
        FAIL("node0 does not say it waits for node1 (%s):\n%s", missing, err);
    }
    const char *lost[] = { "elasticrun: node ", " lost ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(err_path, lost, 1, 1000), 1);
    kill(agents[0], SIGTERM);
    int status;
    ASSERT(agent_harness_wait_exit(agents[0], 30000, &status));
    int unused;
    agent_harness_wait_exit(agents[1], 1000, &unused);
    elastic_store_server_close(server);
}

TEST_TIMEOUT(agent_console_unreachable_store_is_one_short_line_with_the_errno, 60)
{
    /* A port nobody listens on: a server's, after it stopped. */
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64];
    int port = 0;
    ASSERT_OK(elastic_store_server_get_port(server, &port));
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    elastic_store_server_close(server);
    char ctl[512];
    snprintf(ctl, sizeof ctl, "%s", test_bin_path("elasticctl"));
    const char *argv[] = { "elasticctl", "store", "get", "k", "--endpoint", endpoint, NULL };
    pid_t pid = agent_harness_spawn(ctl, argv, NULL, "ctl");
    int status = 0;
    ASSERT(agent_harness_wait_exit(pid, 30000, &status));
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    char *err = stderr_of("ctl");
    ASSERT_EQ(count_of(err, "\n"), 1);
    ASSERT_LT(strlen(err), 200);
    ASSERT_EQ(count_of(err, "connect to store"), 1);
    if (strstr(err, "Connection refused (ECONNREFUSED)") == NULL)
        FAIL("the errno is lost: %s", err);
    free(err);
}

TEST_TIMEOUT(agent_console_status_lists_workers_that_do_not_heartbeat, 90)
{
    char report[512], err_path[512], line[512], endpoint[64];
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(err_path, sizeof err_path, "silent.err");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--metrics-port", "0",
                        "--monitor-interval", "0.2", "--no-python", agent_harness_worker(),
                        "--report", report, "--sleep-ms", "60000");
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "silent");
    const char *announced[] = { "metrics on http://", NULL }, *started[] = { "start ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(err_path, announced, 1, RUN_MS), 1);
    ASSERT_EQ(agent_harness_wait_lines(report, started, 2, RUN_MS), 2);
    ASSERT(agent_harness_nth_line(err_path, announced, 0, line, sizeof line));
    ASSERT_EQ(sscanf(strstr(line, "http://") + 7, "%63[^/]", endpoint), 1);
    char flag[128], ctl_path[1024], out_path[512];
    snprintf(flag, sizeof flag, "--endpoint=%s", endpoint);
    snprintf(ctl_path, sizeof ctl_path, "%s", test_bin_path("elasticctl"));
    const char *ctl[] = { "elasticctl", "status", flag, NULL };
    int status = 0;
    ASSERT(agent_harness_wait_exit(agent_harness_spawn(ctl_path, ctl, NULL, "status"), 20000,
                                   &status));
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *out =
        agent_harness_read_file(agent_harness_path(out_path, sizeof out_path, "status.out"));
    ASSERT(out != NULL);
    for (int rank = 0; rank < 2; rank++) {
        char needle[32], row[256], pid[16];
        snprintf(needle, sizeof needle, "rank=%d ", rank);
        const char *mine[] = { "start ", needle, NULL };
        ASSERT(agent_harness_nth_line(report, mine, 0, line, sizeof line));
        snprintf(pid, sizeof pid, "%ld", agent_harness_line_field(line, "pid"));
        /* rank, local rank, pid, alive, uptime, then "-" for step, steps/s, heartbeat, straggler */
        int matched = 0;
        for (const char *at = out; at != NULL && *at != '\0' && !matched;
             at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL) {
            char r[16], l[16], p[16], alive[8], up[24], step[16], rate[16], hb[16], score[16];
            snprintf(row, sizeof row, "%.*s", (int)strcspn(at, "\n"), at);
            if (sscanf(row, "%15s %15s %15s %7s %23s %15s %15s %15s %15s", r, l, p, alive, up, step,
                       rate, hb, score) == 9 &&
                r[0] >= '0' && r[0] <= '9' && atoi(r) == rank) {
                matched = 1;
                if (strcmp(p, pid) != 0 || strcmp(alive, "yes") != 0 || up[strlen(up) - 1] != 's' ||
                    strcmp(step, "-") != 0 || strcmp(rate, "-") != 0 || strcmp(hb, "-") != 0)
                    FAIL("rank %d's row is wrong (pid %s): %s\n%s", rank, pid, row, out);
            }
        }
        if (!matched) FAIL("no row for rank %d:\n%s", rank, out);
    }
    free(out);
    kill(agent, SIGTERM);
    ASSERT(agent_harness_wait_exit(agent, 30000, &status));
}

TEST_TIMEOUT(agent_console_summary_names_the_last_checkpoint_a_worker_saved, 90)
{
    char dir[512], ckpt[600], events[600], trainer[1024];
    agent_harness_path(dir, sizeof dir, "ckpt-job");
    mkdir(dir, 0755);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    mkdir(ckpt, 0755);
    snprintf(events, sizeof events, "%s/events.jsonl", dir);
    snprintf(trainer, sizeof trainer, "%s", test_example_path("demo_trainer"));
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--event-log", events,
                        "--no-python", trainer, "--ckpt-dir", ckpt, "--steps", "60", "--step-ms",
                        "2", "--ckpt-every", "10");
    ASSERT_EQ(run_to_end("ckpt", &cmd), 0);
    char *err = stderr_of("ckpt");
    char line[1024];
    if (!line_starting(err, "elasticrun: job succeeded after ", line, sizeof line) ||
        strstr(line, ", last checkpoint step 60 (rank ") == NULL)
        FAIL("the summary does not name step 60:\n%s", err);
    free(err);
    /* Every worker's last save reaches the event log (at the latest when it exits). */
    const char *saved[] = { "\"event\":\"checkpoint\"", "\"step\":60,", NULL };
    ASSERT_EQ(agent_harness_wait_lines(events, saved, 2, 1000), 2);
}

/* A spare waiting while the job runs says so (nobody is missing), and when
 * the job succeeds without it, it exits 0 saying it was left out (issue 26:
 * it exited 1 with "the job failed: ... run was closed"). */
TEST_TIMEOUT(agent_console_spare_left_out_when_the_job_succeeds_exits_0_and_says_so, 120)
{
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64], report[512], done[512];
    int port = 0;
    ASSERT_OK(elastic_store_server_get_port(server, &port));
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(done, sizeof done, "done");
    pid_t agents[3];
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", i);
        elasticrun_args cmd;
        elasticrun_args_init(&cmd);
        elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "spare",
                            "--rdzv-conf", "is_host=0,last_call_timeout=1", "--local-addr",
                            "127.0.0.1", "--no-python", agent_harness_worker(), "--report", report,
                            "--exit-when-file", done);
        agents[i] = elasticrun_args_spawn(&cmd, NULL, name);
        if (i == 1) { /* node0 and node1 run the job before the spare comes */
            const char *started[] = { "start ", "world=2 ", NULL };
            ASSERT_EQ(agent_harness_wait_lines(report, started, 2, 60000), 2);
        }
    }
    /* The spare waits in the open round while generation 1 runs: rdzv's look
     * (the waiting line's) counts it and names nobody missing. */
    elastic_store *store = NULL;
    ASSERT_OK(elastic_store_connect(endpoint, NULL, &store));
    rdzv__look seen = { .joined = -1 };
    for (int waited_ms = 0; waited_ms < 40000; waited_ms += 50) {
        if (rdzv__look_open_round(store, "spare", "observer", 1, &seen) == 0 && seen.joined >= 1)
            break;
        usleep(50000);
    }
    elastic_store_close(store);
    if (seen.joined < 1) {
        for (int k = 0; k < 3; k++) kill(agents[k], SIGKILL);
        FAIL("the spare never joined the open round:\n%s", stderr_of("node2"));
    }
    ASSERT_EQ(seen.running_generation, 1);
    ASSERT_EQ(seen.running_nodes, 2);
    ASSERT_EQ(seen.missing_count, 0);
    int fd = open(done, O_WRONLY | O_CREAT, 0644); /* the job's worker exits 0 */
    ASSERT(fd >= 0);
    close(fd);
    int status[3];
    for (int i = 0; i < 3; i++) {
        if (!agent_harness_wait_exit(agents[i], 30000, &status[i])) {
            for (int k = 0; k < 3; k++) kill(agents[k], SIGKILL);
            FAIL("node%d did not exit after the job succeeded", i);
        }
        ASSERT(WIFEXITED(status[i]));
        ASSERT_EQ(WEXITSTATUS(status[i]), 0);
    }
    char *err = stderr_of("node2");
    if (strstr(err, "left out as a spare: the job succeeded without this node") == NULL ||
        strstr(err, "the job failed") != NULL || strstr(err, "missing:") != NULL)
        FAIL("the spare's console is not truthful:\n%s", err);
    free(err);
    elastic_store_server_close(server);
}

/* A job that failed gives no ETTR (its last failure cost the rest of the job;
 * "ETTR 100.0%" was printed for it), and with no steps reported the time lost
 * is a lower bound. */
TEST_TIMEOUT(agent_console_gives_no_ettr_for_a_failed_job, 90)
{
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--no-python",
                        agent_harness_worker(), "--report", report, "--fail-rank", "1",
                        "--fail-code", "7");
    ASSERT(run_to_end("failed", &cmd) != 0);
    char *err = stderr_of("failed");
    char line[1024];
    if (!line_starting(err, "elasticrun: job failed after ", line, sizeof line) ||
        strstr(line, "at least ") == NULL ||
        strstr(line, " s lost to failures (no ETTR for a failed job; no steps reported)") == NULL)
        FAIL("no failed-job summary without an ETTR:\n%s", err);
    ASSERT(strstr(err, "ETTR 100") == NULL);
    free(err);
}

/* An unmodified script (this worker never attaches to the agent) under
 * --in-process-recovery cannot be kept: the group restarts, and the console
 * says why once instead of in silence. */
TEST_TIMEOUT(agent_console_says_when_in_process_recovery_has_no_attached_worker, 90)
{
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--in-process-recovery",
                        "--no-python", agent_harness_worker(), "--report", report,
                        "--fail-rank", "1", "--fail-code", "7", "--fail-until-restart", "1",
                        "--exit-after-restart", "1");
    ASSERT_EQ(run_to_end("unattached", &cmd), 0); /* the default budget of 3 covers the failure */
    char *err = stderr_of("unattached");
    ASSERT_EQ(count_of(err, "--in-process-recovery: no worker is attached to elasticrun (the "
                            "script does not use libelastic"),
              1);
    ASSERT(strstr(err, "restarting (2 of 3 restarts left)") != NULL);
    free(err);
}
