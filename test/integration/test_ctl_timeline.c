/*
 * `elasticctl timeline` and `elasticctl summary` on a known two-node event
 * log: lanes per node and worker, generation spans, failure / hang / restart /
 * fence / waiting marks, checkpoint ticks, the text summary; bad logs are
 * refused naming the file and line.
 */
#include "elasticctl/timeline.h"
#include "support/agent_harness.h"
#include "test.h"

#include <sys/wait.h>

/* Node a: two workers; rank 1 fails in generation 1, restart; in generation
 * 2 rank 0 hangs; the job then ends. Node b: one worker; fenced once. */
static const char log_a[] =
    "{\"ts_ms\":1000,\"event\":\"agent_started\",\"run_id\":\"job9\",\"node\":\"a\"}\n"
    "{\"ts_ms\":1100,\"event\":\"generation_formed\",\"run_id\":\"job9\",\"node\":\"a\","
    "\"generation\":1,\"world_size\":3,\"group_world_size\":2}\n"
    "{\"ts_ms\":1110,\"event\":\"worker_started\",\"run_id\":\"job9\",\"node\":\"a\","
    "\"generation\":1,\"rank\":0,\"local_rank\":0,\"pid\":10}\n"
    "{\"ts_ms\":1111,\"event\":\"worker_started\",\"run_id\":\"job9\",\"node\":\"a\","
    "\"generation\":1,\"rank\":1,\"local_rank\":1,\"pid\":11}\n"
    "{\"ts_ms\":2000,\"event\":\"checkpoint\",\"run_id\":\"job9\",\"node\":\"a\",\"generation\":1,"
    "\"rank\":0,\"local_rank\":0,\"step\":10,\"saved_ms\":1990}\n"
    "{\"ts_ms\":3000,\"event\":\"worker_exited\",\"run_id\":\"job9\",\"node\":\"a\",\"generation\":"
    "1,\"rank\":1,\"local_rank\":1,\"pid\":11,\"exit_code\":-1,\"signal\":9}\n"
    "{\"ts_ms\":3000,\"event\":\"failure\",\"run_id\":\"job9\",\"node\":\"a\",\"generation\":1,"
    "\"rank\":1,\"local_rank\":1,\"pid\":11,\"exit_code\":-1,\"signal\":9,\"reason\":\"killed by "
    "signal 9 (SIGKILL)\"}\n"
    "{\"ts_ms\":3050,\"event\":\"worker_exited\",\"run_id\":\"job9\",\"node\":\"a\",\"generation\":"
    "1,\"rank\":0,\"local_rank\":0,\"pid\":10,\"exit_code\":-1,\"signal\":15}\n"
    "{\"ts_ms\":3060,\"event\":\"generation_stopped\",\"run_id\":\"job9\",\"node\":\"a\","
    "\"generation\":1,\"stop_ms\":60}\n"
    "{\"ts_ms\":3500,\"event\":\"waiting\",\"run_id\":\"job9\",\"node\":\"a\",\"joined\":1,\"min_"
    "nodes\":2,\"waited_ms\":440,\"missing\":\"b\"}\n"
    "{\"ts_ms\":4000,\"event\":\"generation_formed\",\"run_id\":\"job9\",\"node\":\"a\","
    "\"generation\":2,\"world_size\":3,\"group_world_size\":2}\n"
    "{\"ts_ms\":4010,\"event\":\"worker_started\",\"run_id\":\"job9\",\"node\":\"a\","
    "\"generation\":2,\"rank\":0,\"local_rank\":0,\"pid\":12}\n"
    "{\"ts_ms\":4011,\"event\":\"worker_started\",\"run_id\":\"job9\",\"node\":\"a\","
    "\"generation\":2,\"rank\":1,\"local_rank\":1,\"pid\":13}\n"
    "{\"ts_ms\":4012,\"event\":\"restarted\",\"run_id\":\"job9\",\"node\":\"a\",\"generation\":2,"
    "\"recovery_ms\":1012}\n"
    "{\"ts_ms\":5000,\"event\":\"checkpoint\",\"run_id\":\"job9\",\"node\":\"a\",\"generation\":2,"
    "\"rank\":1,\"local_rank\":1,\"step\":20,\"saved_ms\":4990}\n"
    "{\"ts_ms\":6000,\"event\":\"probe_failed\",\"run_id\":\"job9\",\"node\":\"a\",\"generation\":"
    "2,\"probe\":\"hang\",\"rank\":0,\"local_rank\":0,\"last_step\":20,\"reason\":\"hang: rank 0 "
    "sent no heartbeat for 2000 ms\"}\n"
    "{\"ts_ms\":6100,\"event\":\"job_end\",\"run_id\":\"job9\",\"node\":\"a\",\"status\":"
    "\"failed\",\"exit_code\":1,\"generations\":2}\n";

static const char log_b[] =
    "{\"ts_ms\":1000,\"event\":\"agent_started\",\"run_id\":\"job9\",\"node\":\"b\"}\n"
    "{\"ts_ms\":1100,\"event\":\"generation_formed\",\"run_id\":\"job9\",\"node\":\"b\","
    "\"generation\":1,\"world_size\":3,\"group_world_size\":2}\n"
    "{\"ts_ms\":1105,\"event\":\"worker_started\",\"run_id\":\"job9\",\"node\":\"b\","
    "\"generation\":1,\"rank\":2,\"local_rank\":0,\"pid\":20}\n"
    "{\"ts_ms\":3001,\"event\":\"generation_ended\",\"run_id\":\"job9\",\"node\":\"b\","
    "\"generation\":1,\"cause\":1,\"by_node\":\"a\",\"rank\":1,\"reason\":\"killed by signal 9 "
    "(SIGKILL)\"}\n"
    "{\"ts_ms\":3200,\"event\":\"fenced\",\"run_id\":\"job9\",\"node\":\"b\",\"generation\":1,"
    "\"reason\":\"lease lost\"}\n"
    "{\"ts_ms\":3300,\"event\":\"worker_exited\",\"run_id\":\"job9\",\"node\":\"b\",\"generation\":"
    "1,\"rank\":2,\"local_rank\":0,\"pid\":20,\"exit_code\":-1,\"signal\":15}\n"
    "{\"ts_ms\":3310,\"event\":\"generation_stopped\",\"run_id\":\"job9\",\"node\":\"b\","
    "\"generation\":1,\"stop_ms\":300}\n"
    "{\"ts_ms\":3999,\"event\":\"generation_formed\",\"run_id\":\"job9\",\"node\":\"b\","
    "\"generation\":2,\"world_size\":3,\"group_world_size\":2}\n"
    "{\"ts_ms\":4005,\"event\":\"worker_started\",\"run_id\":\"job9\",\"node\":\"b\","
    "\"generation\":2,\"rank\":2,\"local_rank\":0,\"pid\":21}\n"
    "{\"ts_ms\":4006,\"event\":\"restarted\",\"run_id\":\"job9\",\"node\":\"b\",\"generation\":2,"
    "\"recovery_ms\":1005}\n"
    "{\"ts_ms\":4500,\"event\":\"some_future_event\",\"run_id\":\"job9\",\"node\":\"b\"}\n"
    "{\"ts_ms\":6200,\"event\":\"job_end\",\"run_id\":\"job9\",\"node\":\"b\",\"status\":"
    "\"failed\",\"exit_code\":1,\"generations\":2}\n";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(text, f);
    fclose(f);
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *at = strstr(text, needle); at != NULL; at = strstr(at + 1, needle)) n++;
    return n;
}

static int run_ctl(const char *const *argv, const char *name)
{
    char ctl[1024];
    snprintf(ctl, sizeof ctl, "%s", test_bin_path("elasticctl"));
    int status = 0;
    ASSERT(agent_harness_wait_exit(agent_harness_spawn(ctl, argv, NULL, name), 20000, &status));
    ASSERT(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static char *output_of(const char *name, const char *suffix)
{
    char file[64], path[512];
    snprintf(file, sizeof file, "%s.%s", name, suffix);
    char *text = agent_harness_read_file(agent_harness_path(path, sizeof path, file));
    ASSERT(text != NULL);
    return text;
}

TEST_TIMEOUT(ctl_timeline_svg_of_two_nodes_has_lanes_spans_marks_and_ticks, 60)
{
    char a[512], b[512], svg_path[512];
    write_file(agent_harness_path(a, sizeof a, "a.jsonl"), log_a);
    write_file(agent_harness_path(b, sizeof b, "b.jsonl"), log_b);
    agent_harness_path(svg_path, sizeof svg_path, "job.svg");
    const char *argv[] = { "elasticctl", "timeline", a, b, "-o", svg_path, NULL };
    ASSERT_EQ(run_ctl(argv, "timeline"), 0);
    char *svg = agent_harness_read_file(svg_path);
    ASSERT(svg != NULL);
    ASSERT(strncmp(svg, "<?xml", 5) == 0);
    ASSERT(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"") != NULL);
    ASSERT(strstr(svg, "</svg>\n") != NULL);
    ASSERT_EQ(count_of(svg, "<g class=\"lane node\" data-node=\"a\""), 1);
    ASSERT_EQ(count_of(svg, "<g class=\"lane node\" data-node=\"b\""), 1);
    ASSERT_EQ(count_of(svg, "<g class=\"lane worker\" data-node=\"a\""),
              2); /* local ranks 0 and 1 */
    ASSERT_EQ(count_of(svg, "<g class=\"lane worker\" data-node=\"b\""), 1);
    ASSERT_EQ(count_of(svg, "<g class=\"span generation\">"), 4); /* two generations on two nodes */
    ASSERT_EQ(count_of(svg, "<g class=\"span rendezvous\">"), 4); /* before each generation */
    ASSERT_EQ(count_of(svg, "<g class=\"span worker failed\">"),
              2); /* the killed rank 1, the hung rank 0 */
    ASSERT_EQ(count_of(svg, "<g class=\"span worker stopped\">"), 4);
    ASSERT_EQ(count_of(svg, "<g class=\"mark failure\">"), 1);
    ASSERT_EQ(count_of(svg, "<g class=\"mark hang\">"), 1);
    ASSERT_EQ(count_of(svg, "<g class=\"mark ended\">"), 1);
    ASSERT_EQ(count_of(svg, "<g class=\"mark restart\">"), 2);
    ASSERT_EQ(count_of(svg, "<g class=\"mark fence\">"), 1);
    ASSERT_EQ(count_of(svg, "<g class=\"mark waiting\">"), 1);
    ASSERT_EQ(count_of(svg, "<g class=\"tick checkpoint\">"), 2);
    ASSERT_EQ(count_of(svg, "<g class=\"mark end\">"), 2);
    ASSERT(strstr(svg, "<title>+5.000 s: hang: rank 0 sent no heartbeat for 2000 ms</title>") !=
           NULL);
    ASSERT(strstr(svg, "<title>+0.990 s: rank 0 saved checkpoint step 10</title>") != NULL);
    ASSERT(strstr(svg, ">0 s</text>") != NULL &&
           strstr(svg, ">5 s</text>") != NULL); /* the time axis */
    free(svg);
}

TEST_TIMEOUT(ctl_timeline_summary_prints_the_same_as_text, 60)
{
    char a[512], b[512];
    write_file(agent_harness_path(a, sizeof a, "a.jsonl"), log_a);
    write_file(agent_harness_path(b, sizeof b, "b.jsonl"), log_b);
    const char *argv[] = { "elasticctl", "summary", b, a, NULL };
    ASSERT_EQ(run_ctl(argv, "summary"), 0);
    char *text = output_of("summary", "out");
    if (strstr(text, "job job9: 2 nodes, 5.200 s of events, failed\n") == NULL ||
        strstr(
            text,
            "totals: last generation 2, 1 failure (1 hang), 1 restart, 1.000 s lost to failures") ==
            NULL ||
        /* The goodput accounting: killed at 2.000, both nodes formed again at 3.000; these
         * logs have no step events, so generations count as training. */
        strstr(text, "goodput: ETTR 75.0% (3.900 s productive of 5.200 s), 1.000 s lost to "
                     "failures (no step events: redone work not counted)\n") == NULL ||
        strstr(text, "1 fence, 2 checkpoint events, last step 20 (rank 1 on a)") == NULL ||
        strstr(text,
               "node a (2 worker lanes): gen 1 [+0.100, +2.060 s] gen 2 [+3.000, +5.100 s]") ==
            NULL ||
        strstr(text, "+    2.000 s  a                        rank 1 failed: killed by signal 9 "
                     "(SIGKILL)\n") == NULL ||
        strstr(text, "+    2.200 s  b                        fenced: lease lost\n") == NULL ||
        strstr(text, "waiting for nodes: 1 joined; missing: b\n") == NULL)
        FAIL("summary:\n%s", text);
    free(text);
}

/* A straggler node's eviction is one mark, with its score and replacement. */
TEST_TIMEOUT(ctl_timeline_marks_a_straggler_eviction, 60)
{
    static const char log_c[] =
        "{\"ts_ms\":1000,\"event\":\"agent_started\",\"run_id\":\"job7\",\"node\":\"slow\"}\n"
        "{\"ts_ms\":1100,\"event\":\"generation_formed\",\"run_id\":\"job7\",\"node\":\"slow\","
        "\"generation\":1,\"world_size\":4,\"group_world_size\":2}\n"
        "{\"ts_ms\":7000,\"event\":\"straggler_evicted\",\"run_id\":\"job7\",\"node\":\"slow\","
        "\"generation\":1,\"straggler\":\"slow\",\"score\":\"0.333\",\"step_time_ms\":60,"
        "\"spares_waiting\":1,\"replacement\":\"spare\",\"quarantine_ms\":8000}\n";
    char c[512];
    write_file(agent_harness_path(c, sizeof c, "c.jsonl"), log_c);
    const char *argv[] = { "elasticctl", "summary", c, NULL };
    ASSERT_EQ(run_ctl(argv, "evicted"), 0);
    char *text = output_of("evicted", "out");
    const char *mark = "+    6.000 s  slow                     probe: evicted as the job's "
                       "straggler (score 0.333); replaced by spare\n";
    if (strstr(text, mark) == NULL) FAIL("summary:\n%s", text);
    free(text);
}

/* A node health check that is not ok is a mark naming the GPU; stepping aside is another. */
TEST_TIMEOUT(ctl_timeline_marks_health_verdicts_and_the_step_aside, 60)
{
    static const char log_h[] =
        "{\"ts_ms\":1000,\"event\":\"agent_started\",\"run_id\":\"job7\",\"node\":\"sick\"}\n"
        "{\"ts_ms\":1100,\"event\":\"generation_formed\",\"run_id\":\"job7\",\"node\":\"sick\","
        "\"generation\":1,\"world_size\":4,\"group_world_size\":2}\n"
        "{\"ts_ms\":3000,\"event\":\"health_check\",\"run_id\":\"job7\",\"node\":\"sick\","
        "\"check\":\"temperature\",\"gpu\":3,\"uuid\":\"GPU-c\",\"pci_bus_id\":\"00000000:13:00."
        "0\","
        "\"port\":\"\",\"value\":95,\"verdict\":\"ok\",\"reason\":\"95 C\"}\n"
        "{\"ts_ms\":5000,\"event\":\"health_check\",\"run_id\":\"job7\",\"node\":\"sick\","
        "\"check\":\"xid\",\"gpu\":5,\"uuid\":\"GPU-e\",\"pci_bus_id\":\"00000000:15:00.0\","
        "\"port\":\"\",\"value\":79,\"verdict\":\"fatal\","
        "\"reason\":\"Xid 79: the GPU has fallen off the bus\"}\n"
        "{\"ts_ms\":5100,\"event\":\"health_stepped_aside\",\"run_id\":\"job7\",\"node\":\"sick\","
        "\"generation\":1,\"reason\":\"GPU 5: Xid 79\",\"replacement\":\"spare\"}\n";
    char h[512];
    write_file(agent_harness_path(h, sizeof h, "h.jsonl"), log_h);
    const char *argv[] = { "elasticctl", "summary", h, NULL };
    ASSERT_EQ(run_ctl(argv, "health"), 0);
    char *text = output_of("health", "out");
    if (strstr(text,
               "+    4.000 s  sick                     probe: health fatal: xid GPU 5: Xid 79: "
               "the GPU has fallen off the bus\n") == NULL ||
        strstr(text, "probe: stepped aside, unhealthy: GPU 5: Xid 79; replaced by spare\n") ==
            NULL ||
        strstr(text, "temperature") != NULL) /* an ok verdict is no mark */
        FAIL("summary:\n%s", text);
    free(text);
}

TEST_TIMEOUT(ctl_timeline_refuses_bad_logs_naming_file_and_line, 60)
{
    char a[512], bad[512], other[512], out[512];
    write_file(agent_harness_path(a, sizeof a, "a.jsonl"), log_a);
    write_file(agent_harness_path(bad, sizeof bad, "bad.jsonl"),
               "{\"ts_ms\":1,\"event\":\"agent_started\",\"run_id\":\"job9\",\"node\":\"a\"}\n{"
               "\"ts_ms\":2,\"event\":\n");
    write_file(agent_harness_path(other, sizeof other, "other.jsonl"),
               "{\"ts_ms\":1,\"event\":\"agent_started\",\"run_id\":\"job8\",\"node\":\"z\"}\n");
    agent_harness_path(out, sizeof out, "never.svg");
    const char *malformed[] = { "elasticctl", "timeline", a, bad, "-o", out, NULL };
    ASSERT_EQ(run_ctl(malformed, "malformed"), 1);
    char *err = output_of("malformed", "err");
    if (strstr(err, "bad.jsonl:2: JSON: ") == NULL) FAIL("%s", err);
    free(err);
    const char *mixed[] = { "elasticctl", "summary", a, other, NULL };
    ASSERT_EQ(run_ctl(mixed, "mixed"), 1);
    err = output_of("mixed", "err");
    if (strstr(err, "two jobs (job9 and job8): pick one with --run-id") == NULL) FAIL("%s", err);
    free(err);
    const char *picked[] = { "elasticctl", "summary", a, other, "--run-id", "job8", NULL };
    ASSERT_EQ(run_ctl(picked, "picked"), 0);
    char *text = output_of("picked", "out");
    ASSERT(strstr(text, "job job8: 1 node") != NULL);
    free(text);
    const char *no_output[] = { "elasticctl", "timeline", a, NULL };
    ASSERT_EQ(run_ctl(no_output, "no_output"), 2);
    const char *missing[] = { "elasticctl", "summary", "/nonexistent/x.jsonl", NULL };
    ASSERT_EQ(run_ctl(missing, "missing"), 1);
    /* a line over the bound */
    char *long_line = malloc(TIMELINE_MAX_LINE * 2);
    ASSERT(long_line != NULL);
    memset(long_line, ' ', TIMELINE_MAX_LINE * 2 - 2);
    long_line[TIMELINE_MAX_LINE * 2 - 2] = '\n';
    long_line[TIMELINE_MAX_LINE * 2 - 1] = '\0';
    write_file(bad, long_line);
    free(long_line);
    const char *too_long[] = { "elasticctl", "summary", bad, NULL };
    ASSERT_EQ(run_ctl(too_long, "too_long"), 1);
    err = output_of("too_long", "err");
    if (strstr(err, "bad.jsonl:1: a line longer than 8192 bytes") == NULL) FAIL("%s", err);
    free(err);
}
