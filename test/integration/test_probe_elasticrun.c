/* The probes through elasticrun, end to end: a hung worker is detected within
 * the timeout plus one probe interval with its stack in its log and the group
 * recovers; in-process recovery keeps the survivors' processes and the toy
 * training result is still right; the metrics endpoint is scraped, parsed and
 * summarised by `elasticctl status`; and the trainer runs alone as well. */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "support/metrics_page.h"
#include "probe/probe.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

static char helper[1024];

static const char *probe_worker(void)
{
    snprintf(helper, sizeof helper, "%s", test_helper_path("probe_worker"));
    return helper;
}

static void expect_exit(pid_t pid, int timeout_ms, int code, const char *name)
{
    int status = 0;
    if (!agent_harness_wait_exit(pid, timeout_ms, &status)) {
        kill(pid, SIGKILL);
        char path[512];
        char *err = agent_harness_read_file(agent_harness_path(path, sizeof path, name));
        FAIL("%s did not exit in time; stderr:\n%s", name, err ? err : "");
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != code) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s.err", test_tmpdir(), name);
        char *err = agent_harness_read_file(path);
        FAIL("%s ended with status 0x%x, not exit %d; stderr:\n%s", name, status, code,
             err ? err : "");
    }
}

TEST_TIMEOUT(probe_elasticrun_hang_detected_stack_logged_group_recovers, 120)
{
    char events[512], logs[512];
    agent_harness_path(events, sizeof events, "events.jsonl");
    agent_harness_path(logs, sizeof logs, "logs");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nproc-per-node", "2", "--max-restarts", "1", "--hang-timeout", "1",
                        "--monitor-interval", "0.2");
    elasticrun_args_addf(&cmd, "--log-dir=%s", logs);
    elasticrun_args_addf(&cmd, "--event-log=%s", events);
    elasticrun_args_add(&cmd, "--no-python", probe_worker(), "hangrank", "1", "30");
    pid_t pid = elasticrun_args_spawn(&cmd, NULL, "elasticrun");
    expect_exit(pid, 90000, 0, "elasticrun"); /* recovered: the second generation succeeded */
    const char *needles[] = { "\"probe_failed\"", "\"probe\":\"hang\"", "\"rank\":1",
                              "\"last_step\":30", NULL };
    char line[4096];
    if (!agent_harness_nth_line(events, needles, 0, line, sizeof line))
        FAIL("no hang event:\n%s", agent_harness_read_file(events));
    const char *silence = strstr(line, "no heartbeat for ");
    ASSERT(silence != NULL);
    long silent_ms = strtol(silence + strlen("no heartbeat for "), NULL, 10);
    if (silent_ms < 1000 || silent_ms > test_scaled_ms(1000 + 200 + 300))
        FAIL("detected after %ld ms of silence (timeout 1000 ms, interval 200 ms)", silent_ms);
    char log_path[700];
    snprintf(log_path, sizeof log_path, "%s/none/gen_1/rank_1/stderr.log", logs);
    char *log = agent_harness_read_file(log_path);
    ASSERT(log != NULL);
    if (strstr(log, "hang_here") == NULL &&
        strstr(log, "backtrace requested by the agent's hang probe") == NULL)
        FAIL("no stack of the hung worker in %s:\n%s", log_path, log);
    free(log);
    const char *formed[] = { "\"generation_formed\"", "\"generation\":2", NULL };
    ASSERT(agent_harness_nth_line(events, formed, 0, line, sizeof line));
}

/* "started rank=R ... pid=P" (generation G) for a rank, from the workers' output. */
static long pid_of(const char *out, const char *kind, int rank, int generation)
{
    char needle_rank[32], needle_gen[32];
    snprintf(needle_rank, sizeof needle_rank, "rank=%d ", rank);
    snprintf(needle_gen, sizeof needle_gen, "generation=%d ", generation);
    const char *needles[] = { kind, needle_rank, needle_gen, NULL };
    char line[512];
    if (!agent_harness_nth_line(out, needles, 0, line, sizeof line)) return -1;
    return agent_harness_line_field(line, "pid");
}

/* Runs the toy training job on 3 workers with in-process recovery (plus the
 * given ack timeout), expects exit 0 and the right result on every rank;
 * leaves the workers' output in out and the event log in events. */
static void run_training(int steps, const char *ack_timeout, const char *const *env, char *out,
                         char *events)
{
    agent_harness_path(events, 512, "events.jsonl");
    agent_harness_path(out, 512, "elasticrun.out");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nproc-per-node", "3", "--max-restarts", "1",
                        "--in-process-recovery", "--abort-ack-timeout", ack_timeout);
    elasticrun_args_addf(&cmd, "--event-log=%s", events);
    elasticrun_args_add(&cmd, "--no-python", probe_worker(), "train");
    elasticrun_args_addf(&cmd, "%d", steps);
    elasticrun_args_add(&cmd, test_tmpdir());
    pid_t pid = elasticrun_args_spawn(&cmd, env, "elasticrun");
    expect_exit(pid, 90000, 0, "elasticrun");
    char *text = agent_harness_read_file(out);
    ASSERT(text != NULL);
    for (int rank = 0; rank < 3; rank++) {
        char expected[80];
        snprintf(expected, sizeof expected, "result x=%d steps=%d rank=%d ",
                 steps * (steps + 1) / 2, steps, rank);
        if (strstr(text, expected) == NULL) FAIL("rank %d has no correct result:\n%s", rank, text);
    }
    free(text);
}

TEST_TIMEOUT(probe_elasticrun_in_process_recovery_keeps_survivors, 120)
{
    char out[512], events[512];
    const char *env[] = { "PROBE_FAIL_RANK=2", "PROBE_FAIL_STEP=30", NULL };
    run_training(100, "5", env, out, events);
    char *text = agent_harness_read_file(out);
    ASSERT(text != NULL && strstr(text, "failing at step 30") != NULL);
    free(text);
    for (int rank = 0; rank < 2; rank++) { /* the survivors: same process, reconfigured */
        long started = pid_of(out, "started ", rank, 1),
             reconfigured = pid_of(out, "reconfigured ", rank, 2);
        ASSERT(started > 0);
        ASSERT_EQ(reconfigured, started);
        ASSERT_EQ(pid_of(out, "started ", rank, 2), -1);
    }
    long failed = pid_of(out, "started ", 2, 1), replacement = pid_of(out, "started ", 2, 2);
    ASSERT(failed > 0 && replacement > 0 && failed != replacement);
    const char *kept[] = { "\"worker_reconfigured\"", "\"generation\":2", NULL };
    ASSERT_EQ(agent_harness_wait_lines(events, kept, 2, 1000), 2);
    const char *done[] = { "\"reconfigured\"", "\"recovery_ms\"", NULL };
    ASSERT_EQ(agent_harness_wait_lines(events, done, 1, 1000), 1);
}

TEST_TIMEOUT(probe_elasticrun_unacknowledged_abort_restarts_the_worker, 120)
{
    char out[512], events[512];
    const char *env[] = { "PROBE_FAIL_RANK=2", "PROBE_FAIL_STEP=20", "PROBE_STUCK_ABORT_RANK=1",
                          NULL };
    run_training(60, "1", env, out, events);
    /* rank 0 kept its process; rank 1 (stuck in its hook) and rank 2 were started again */
    ASSERT(pid_of(out, "started ", 0, 1) > 0);
    ASSERT_EQ(pid_of(out, "reconfigured ", 0, 2), pid_of(out, "started ", 0, 1));
    ASSERT(pid_of(out, "started ", 1, 2) > 0);
    ASSERT(pid_of(out, "started ", 1, 2) != pid_of(out, "started ", 1, 1));
    ASSERT(pid_of(out, "started ", 2, 2) > 0);
}

TEST_TIMEOUT(probe_elasticrun_metrics_scraped_and_status, 90)
{
    char err[512];
    agent_harness_path(err, sizeof err, "elasticrun.err");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nproc-per-node", "2", "--metrics-port", "0", "--monitor-interval",
                        "0.2", "--straggler-window", "5", "--no-python", probe_worker(), "steady",
                        "20");
    pid_t pid = elasticrun_args_spawn(&cmd, NULL, "elasticrun");
    char endpoint[64];
    metrics_endpoint_from(err, 30000, endpoint, sizeof endpoint);
    elastic__text page;
    double step = -1;
    for (int attempt = 0; attempt < test_scaled_ms(300) && step < 10;
         attempt++) { /* until both have stepped */
        elastic__text_init(&page, 1 << 22);
        int status = 0;
        ASSERT_OK(elastic__http_get(endpoint, "/metrics", 5000, &page, &status));
        ASSERT_EQ(status, 200);
        step = metrics_sample(page.data, "elastic_worker_step", "rank", "1");
        if (step < 10)
            elastic__text_free(&page);
        else
            break;
        usleep(50000); /* the workers' progress, not a synchronisation */
    }
    ASSERT(step >= 10);
    ASSERT_EQ(metrics_sample(page.data, "elastic_generation", NULL, NULL), 1);
    ASSERT_EQ(metrics_sample(page.data, "elastic_workers_alive", NULL, NULL), 2);
    ASSERT_EQ(metrics_sample(page.data, "elastic_healthy", NULL, NULL), 1);
    ASSERT(metrics_sample(page.data, "elastic_worker_heartbeat_age_seconds", "rank", "0") >= 0);
    /* The goodput accounting, live: training, so a ratio above 0; counters per bucket. */
    double ratio = metrics_sample(page.data, "elastic_goodput_ratio", NULL, NULL);
    if (!(ratio > 0 && ratio <= 1)) FAIL("elastic_goodput_ratio %g:\n%s", ratio, page.data);
    ASSERT(metrics_sample(page.data, "elastic_goodput_wall_seconds_total", NULL, NULL) > 0);
    ASSERT(metrics_sample(page.data, "elastic_goodput_productive_seconds_total", NULL, NULL) > 0);
    ASSERT(strstr(page.data, "elastic_goodput_lost_seconds_total{bucket=\"redone\"} ") != NULL);
    elastic__text_free(&page);

    char status_flag[128];
    snprintf(status_flag, sizeof status_flag, "--endpoint=%s", endpoint);
    const char *ctl[] = { "elasticctl", "status", status_flag, NULL };
    char ctl_path[1024];
    snprintf(ctl_path, sizeof ctl_path, "%s", test_bin_path("elasticctl"));
    pid_t ctl_pid = agent_harness_spawn(ctl_path, ctl, NULL, "status");
    expect_exit(ctl_pid, 20000, 0, "status");
    char out_path[512];
    char *out =
        agent_harness_read_file(agent_harness_path(out_path, sizeof out_path, "status.out"));
    ASSERT(out != NULL);
    if (strstr(out, "generation 1 ") == NULL || strstr(out, "workers 2/2 alive") == NULL ||
        strstr(out, "health: healthy") == NULL)
        FAIL("status output:\n%s", out);
    free(out);
    kill(pid, SIGTERM);
    int status = 0;
    ASSERT(agent_harness_wait_exit(pid, 30000, &status));
}

TEST_TIMEOUT(probe_trainer_without_agent_runs_alone, 60)
{
    const char *argv[] = { "probe_worker", "train", "20", test_tmpdir(), NULL };
    static const char *const clean[] = {
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "ELASTIC_STORE_ENDPOINT", NULL
    };
    for (int i = 0; clean[i] != NULL; i++) unsetenv(clean[i]);
    pid_t pid = agent_harness_spawn(probe_worker(), argv, NULL, "alone");
    expect_exit(pid, 30000, 0, "alone");
    char out_path[512];
    char *out = agent_harness_read_file(agent_harness_path(out_path, sizeof out_path, "alone.out"));
    ASSERT(out != NULL);
    ASSERT(strstr(out, "started rank=0 world=1 generation=0") != NULL);
    ASSERT(strstr(out, "result x=210 steps=20 rank=0") != NULL);
    free(out);
}
