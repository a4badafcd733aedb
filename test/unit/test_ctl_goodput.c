/* The goodput accounting (src/common/goodput.c) and elasticctl's report of it
 * (tools/elasticctl/goodput*.c) over hand-written event logs whose every
 * millisecond is known: the issue's example (a rank killed 20 steps after the
 * checkpoint at step 150: the redone steps count), two nodes with a lost node
 * and a hang, a generation that fails before its first step, logs without step
 * events, and a random-log property (buckets never negative, always summing to
 * the wall time). */
#include "common/text.h"
#include "elasticctl/goodput.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>

/* The loader wraps its errors with ctl_last_error(), which is elasticctl's
 * fail.c; linked into the suite, elastic__fail is the library's, whose detail
 * is elastic_last_error(). */
const char *ctl_last_error(void);
const char *ctl_last_error(void)
{
    return elastic_last_error();
}

#define NEAR(a, b)                                                                              \
    do {                                                                                        \
        double near_a = (a), near_b = (b);                                                      \
        if (fabs(near_a - near_b) > 0.01) FAIL("%s = %.4f, expected %.4f", #a, near_a, near_b); \
    } while (0)

static char *write_log(const char *name, const char *text)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    const char *dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    if ((size_t)snprintf(p, sizeof paths[0], "%.400s/%.40s.%d", dir, name, (int)getpid()) >=
        sizeof paths[0])
        return NULL;
    FILE *f = fopen(p, "w");
    if (f == NULL) return NULL;
    fputs(text, f);
    fclose(f);
    return p;
}

static goodput_report *account_logs(const char *const *texts, int count)
{
    const char *paths[4] = { NULL };
    char name[32];
    for (int i = 0; i < count; i++) {
        snprintf(name, sizeof name, "goodput_%d.jsonl", i);
        paths[i] = write_log(name, texts[i]);
        if (paths[i] == NULL) return NULL;
    }
    timeline t;
    goodput_report *r = NULL;
    int rc = timeline__load(paths, count, NULL, &t);
    if (rc == 0) rc = goodput__of_timeline(&t, &r);
    if (rc == 0) timeline__free(&t);
    for (int i = 0; i < count; i++) remove(paths[i]);
    if (rc != 0) fprintf(stderr, "# goodput: %s\n", elastic_last_error());
    return r;
}

#define EV(ts, rest) "{\"ts_ms\":" #ts ",\"run_id\":\"job1\",\"node\":\"a\"," rest "}\n"

/* The issue's job: 4 workers, 20 ms steps, a checkpoint every 50 steps, rank
 * 2 killed at step 170; the job resumes at 150 and redoes 20 steps (400 ms). */
static const char issue_log[] = EV(1000, "\"event\":\"agent_started\"")
    EV(1010, "\"event\":\"generation_formed\",\"generation\":1,\"world_size\":4") EV(
        1100, "\"event\":\"steps_started\",\"generation\":1,\"step\":0,\"first_step_ms\":1100,"
              "\"restore_ms\":0")
        EV(4100,
           "\"event\":\"checkpoint\",\"generation\":1,\"rank\":0,\"local_rank\":0,\"step\":150,"
           "\"saved_ms\":4100") EV(4510, "\"event\":\"failure\",\"generation\":1,\"rank\":2,"
                                         "\"local_rank\":2,\"exit_code\":-1,"
                                         "\"signal\":9,\"reason\":\"killed by signal 9 (SIGKILL)\"")
            EV(4520,
               "\"event\":\"steps_ended\",\"generation\":1,\"last_step\":170,\"last_step_ms\":4500,"
               "\"step_us\":20000,\"save_stall_ms\":0")
                EV(4520, "\"event\":\"generation_stopped\",\"generation\":1,\"stop_ms\":10") EV(
                    4530, "\"event\":\"generation_formed\",\"generation\":2,\"world_size\":4")
                    EV(4700,
                       "\"event\":\"steps_started\",\"generation\":2,\"step\":150,\"first_step_"
                       "ms\":4700,"
                       "\"restore_ms\":50") EV(7700, "\"event\":\"steps_ended\",\"generation\":2,"
                                                     "\"last_step\":300,\"last_step_ms\":7700,"
                                                     "\"step_us\":20000,\"save_stall_ms\":20")
                        EV(7750, "\"event\":\"job_end\",\"status\":\"succeeded\",\"exit_code\":0");

TEST(ctl_goodput_counts_the_redone_steps_restart_and_restore_of_a_killed_rank)
{
    const char *logs[] = { issue_log };
    goodput_report *r = account_logs(logs, 1);
    ASSERT(r != NULL);
    NEAR(r->wall_ms, 6750);
    ASSERT(r->steps_known);
    NEAR(r->step_ms, 20);
    ASSERT_EQ(r->line_count, 2u); /* the start, the failure */
    const goodput_line *start = &r->lines[0], *kill = &r->lines[1];
    ASSERT_EQ(start->cause, GP_CAUSE_START);
    NEAR(start->ms[GP_RENDEZVOUS], 10);
    NEAR(start->ms[GP_RESTART], 90);
    ASSERT_EQ(kill->cause, GP_CAUSE_FAILURE);
    ASSERT_EQ(kill->last_step, 170);
    ASSERT_EQ(kill->restored_step, 150);
    NEAR(kill->ms[GP_DETECTION], 10); /* last step 4500 -> failure seen 4510 */
    NEAR(kill->ms[GP_STOPPING], 10);
    NEAR(kill->ms[GP_RENDEZVOUS], 10);
    NEAR(kill->ms[GP_RESTART], 120); /* formed 4530 -> first step 4700, less the restore */
    NEAR(kill->ms[GP_RESTORE], 50);
    NEAR(kill->ms[GP_REDONE], 400); /* steps 150..170 again, at 20 ms */
    NEAR(kill->lost_ms, 600);
    NEAR(r->failures_ms, 600);
    NEAR(r->lost_ms[GP_CKPT_STALL], 20);
    NEAR(r->lost_ms[GP_IDLE], 50); /* last step 7700 -> job end 7750 */
    NEAR(r->productive_ms, 3000 + 2980);
    NEAR(r->ettr, 5980.0 / 6750.0);
    double sum = r->productive_ms;
    for (int b = 0; b < GP_BUCKETS; b++) sum += r->lost_ms[b];
    NEAR(sum, r->wall_ms);
    ASSERT_EQ(r->cause_count[GP_CAUSE_FAILURE], 1);
    NEAR(r->cause_ms[GP_CAUSE_FAILURE], 600);

    /* The same numbers in every output. */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ASSERT_OK(goodput__write_text(r, "job1", out));
    fclose(out);
    if (strstr(text, "ETTR 88.6%\n") == NULL ||
        strstr(text, "lost to failures: 0.600 s\n") == NULL ||
        strstr(text, "failure       1 170->150") == NULL || strstr(text, "redone 0.400 s") == NULL)
        FAIL("text:\n%s", text);
    free(text);
    out = open_memstream(&text, &len);
    ASSERT_OK(goodput__write_json(r, "job1", out));
    fclose(out);
    if (strstr(text, "\"ettr\":0.885926") == NULL || strstr(text, "\"failures_s\":0.600") == NULL ||
        strstr(text, "\"cause\":\"failure\",\"generation\":1,\"at_s\":3.510,\"last_step\":170,"
                     "\"restored_step\":150,\"lost_s\":0.600") == NULL)
        FAIL("json:\n%s", text);
    free(text);
    out = open_memstream(&text, &len);
    ASSERT_OK(goodput__write_svg(r, "job1", out));
    fclose(out);
    if (strncmp(text, "<?xml", 5) != 0 || strstr(text, "</svg>\n") == NULL ||
        strstr(text, "<g class=\"disruption\" data-cause=\"failure\">") == NULL ||
        strstr(text, "<title>failure: redone 0.400 s</title>") == NULL ||
        strstr(text, "<g class=\"piece productive\">") == NULL)
        FAIL("svg:\n%s", text);
    free(text);
    out = open_memstream(&text, &len);
    goodput__write_verdict(r, out);
    fclose(out);
    ASSERT_STR_EQ(
        text, "goodput: ETTR 88.6% (5.980 s productive of 6.750 s), 0.600 s lost to failures; "
              "most time lost: redone 0.400 s\n");
    free(text);
    free(r);
}

#define EB(ts, rest) "{\"ts_ms\":" #ts ",\"run_id\":\"job1\",\"node\":\"b\"," rest "}\n"

/* Two nodes: node b's lease ends (a's log says so first); later a worker of a
 * hangs. The later of two nodes' forming starts training; the earliest notice
 * of a generation's end counts; "job ended" (cause 5) is no disruption. */
static const char two_a[] = EV(0, "\"event\":\"agent_started\"") EV(
    100, "\"event\":\"generation_formed\",\"generation\":1")
    EV(300, "\"event\":\"steps_started\",\"generation\":1,\"step\":0,\"first_step_ms\":300") EV(
        2000, "\"event\":\"generation_ended\",\"generation\":1,\"cause\":2,\"reason\":\"lease\"")
        EV(2010, "\"event\":\"steps_ended\",\"generation\":1,\"last_step\":90,\"last_step_ms\":"
                 "1200") EV(2100, "\"event\":\"generation_stopped\",\"generation\":1")
            EV(2500, "\"event\":\"generation_formed\",\"generation\":2") EV(
                2800,
                "\"event\":\"steps_started\",\"generation\":2,\"step\":50,\"first_step_ms\":2800")
                EV(5000, "\"event\":\"probe_failed\",\"generation\":2,\"probe\":\"hang\","
                         "\"reason\":\"hang\"") EV(5001, "\"event\":\"failure\",\"generation\":2,"
                                                         "\"local_rank\":0,\"reason\":\"hang\"")
                    EV(5010,
                       "\"event\":\"steps_ended\",\"generation\":2,\"last_step\":150,\"last_step_"
                       "ms\":3800") EV(5050, "\"event\":\"generation_stopped\",\"generation\":2")
                        EV(5100, "\"event\":\"generation_formed\",\"generation\":3")
                            EV(5300, "\"event\":\"steps_started\",\"generation\":3,\"step\":150,"
                                     "\"first_step_ms\":5300")
                                EV(6300, "\"event\":\"steps_ended\",\"generation\":3,\"last_step\":"
                                         "250,\"last_step_ms\":6300")
                                    EV(6300, "\"event\":\"generation_ended\",\"generation\":3,"
                                             "\"cause\":5,\"reason\":\"done\"")
                                        EV(6400, "\"event\":\"job_end\",\"status\":\"succeeded\"");
static const char two_b[] = EB(0, "\"event\":\"agent_started\"")
    EB(150, "\"event\":\"generation_formed\",\"generation\":1") EB(
        320, "\"event\":\"steps_started\",\"generation\":1,\"step\":0,\"first_step_ms\":320")
        EB(2600, "\"event\":\"generation_formed\",\"generation\":2") EB(
            2790, "\"event\":\"steps_started\",\"generation\":2,\"step\":50,\"first_step_ms\":2790")
            EB(5020, "\"event\":\"generation_ended\",\"generation\":2,\"cause\":1,\"reason\":\"a "
                     "failed\"") EB(5030, "\"event\":\"steps_ended\",\"generation\":2,\"last_"
                                          "step\":149,\"last_step_ms\":3790")
                EB(5040, "\"event\":\"generation_stopped\",\"generation\":2")
                    EB(5150, "\"event\":\"generation_formed\",\"generation\":3")
                        EB(5290, "\"event\":\"steps_started\",\"generation\":3,\"step\":150,"
                                 "\"first_step_ms\":5290")
                            EB(6300, "\"event\":\"steps_ended\",\"generation\":3,\"last_step\":250,"
                                     "\"last_step_ms\":6300")
                                EB(6350, "\"event\":\"job_end\",\"status\":\"succeeded\"");

TEST(ctl_goodput_merges_nodes_and_names_each_disruption_by_its_first_notice)
{
    const char *logs[] = { two_b, two_a };
    goodput_report *r = account_logs(logs, 2);
    ASSERT(r != NULL);
    NEAR(r->wall_ms, 6400);
    ASSERT_EQ(r->line_count, 3u);
    const goodput_line *lost = &r->lines[1], *hang = &r->lines[2];
    ASSERT_EQ(lost->cause, GP_CAUSE_NODE_LOST);
    ASSERT_EQ(hang->cause, GP_CAUSE_HANG);    /* the probe before the failure it causes */
    NEAR(r->lines[0].ms[GP_RENDEZVOUS], 150); /* both nodes formed at 150 */
    NEAR(r->lines[0].ms[GP_RESTART], 170);    /* the later first step: 320 */
    /* Generation 1: steps 0..90 over 320..1200 (9.78 ms a step); redone 90 -> 50. */
    NEAR(lost->ms[GP_DETECTION], 800); /* last step 1200 -> the lease's end at 2000 */
    NEAR(lost->ms[GP_STOPPING], 100);
    NEAR(lost->ms[GP_RENDEZVOUS], 500); /* stopped 2100 -> b formed 2600 */
    NEAR(lost->ms[GP_RESTART], 200);    /* -> a's first step 2800 */
    NEAR(lost->ms[GP_REDONE], 40 * (880.0 / 90.0));
    NEAR(hang->ms[GP_DETECTION], 1200); /* last progress 3800 -> the hang probe at 5000 */
    NEAR(hang->ms[GP_STOPPING], 50);
    NEAR(hang->ms[GP_REDONE], 0); /* resumed at 150, the last step reached */
    ASSERT_EQ(hang->last_step, 150);
    NEAR(r->lost_ms[GP_IDLE], 100);
    double sum = r->productive_ms;
    for (int b = 0; b < GP_BUCKETS; b++) sum += r->lost_ms[b];
    NEAR(sum, r->wall_ms);
    free(r);
}

TEST(ctl_goodput_a_generation_failing_before_its_first_step_stays_in_recovery)
{
    goodput_record rec[] = {
        { .ts_ms = 0, .kind = GP_START, .generation = -1 },
        { .ts_ms = 10, .kind = GP_FORMED, .generation = 1 },
        { .ts_ms = 20, .kind = GP_STEPS_STARTED, .generation = 1, .a = 0, .b = 20 },
        { .ts_ms = 1000, .kind = GP_DISRUPTION, .cause = GP_CAUSE_FAILURE, .generation = 1 },
        { .ts_ms = 1001, .kind = GP_STEPS_ENDED, .generation = 1, .a = 98, .b = 1000 },
        { .ts_ms = 1010, .kind = GP_STOPPED, .generation = 1 },
        { .ts_ms = 1020, .kind = GP_FORMED, .generation = 2 },
        { .ts_ms = 1500, .kind = GP_DISRUPTION, .cause = GP_CAUSE_FAILURE, .generation = 2 },
        { .ts_ms = 1510, .kind = GP_STOPPED, .generation = 2 },
        { .ts_ms = 1520, .kind = GP_FORMED, .generation = 3 },
        { .ts_ms = 1600, .kind = GP_STEPS_STARTED, .generation = 3, .a = 50, .b = 1600 },
        { .ts_ms = 2600, .kind = GP_STEPS_ENDED, .generation = 3, .a = 150, .b = 2600 },
        { .ts_ms = 2600, .kind = GP_END },
    };
    goodput_report *r = malloc(sizeof *r);
    ASSERT(r != NULL);
    ASSERT_OK(goodput__account(rec, sizeof rec / sizeof rec[0], 0, r));
    ASSERT_EQ(r->line_count, 3u);
    const goodput_line *first = &r->lines[1], *second = &r->lines[2];
    NEAR(first->ms[GP_REDONE], 48 * 10); /* 98 -> 50 (generation 3's first step), 10 ms a step */
    NEAR(first->ms[GP_RESTART], 480);    /* formed 1020, still starting when it failed at 1500 */
    NEAR(second->ms[GP_DETECTION], 0);
    NEAR(second->ms[GP_STOPPING], 10);
    NEAR(second->ms[GP_RESTART], 80);
    NEAR(r->productive_ms, 980 - 480 + 1000);
    NEAR(r->ettr, 1500.0 / 2600.0);
    free(r);
}

TEST(ctl_goodput_without_step_events_counts_generations_as_training_and_says_so)
{
    goodput_record rec[] = {
        { .ts_ms = 0, .kind = GP_START, .generation = -1 },
        { .ts_ms = 100, .kind = GP_FORMED, .generation = 1 },
        { .ts_ms = 1100, .kind = GP_DISRUPTION, .cause = GP_CAUSE_FAILURE, .generation = 1 },
        { .ts_ms = 1150, .kind = GP_STOPPED, .generation = 1 },
        { .ts_ms = 1200, .kind = GP_FORMED, .generation = 2 },
        { .ts_ms = 2200, .kind = GP_END },
    };
    goodput_report *r = malloc(sizeof *r);
    ASSERT(r != NULL);
    ASSERT_OK(goodput__account(rec, sizeof rec / sizeof rec[0], 0, r));
    ASSERT(!r->steps_known);
    NEAR(r->productive_ms, 2000);
    NEAR(r->lines[1].ms[GP_STOPPING], 50);
    NEAR(r->lines[1].ms[GP_RENDEZVOUS], 50);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    goodput__write_verdict(r, out);
    fclose(out);
    ASSERT(strstr(text, "redone work not counted") != NULL);
    free(text);
    ASSERT_EQ(goodput__account(rec, 0, 0, r), ELASTIC_EINVAL);
    free(r);
}

/* Whatever the records say (late, missing, out of order), no bucket goes
 * negative and everything sums to the wall time. */
TEST(ctl_goodput_random_records_always_sum_to_the_wall_time)
{
    goodput_report *r = malloc(sizeof *r);
    ASSERT(r != NULL);
    uint64_t seed = 12345;
    for (int round = 0; round < 300; round++) {
        goodput_record rec[40];
        size_t n = 0;
        uint64_t ts = 0;
        for (; n < sizeof rec / sizeof rec[0]; n++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            ts += (seed >> 33) % 500;
            rec[n] = (goodput_record){ .ts_ms = ts,
                                       .kind = (int)((seed >> 20) % GP_KINDS),
                                       .cause = (int)((seed >> 10) % GP_CAUSES),
                                       .generation = (int64_t)((seed >> 40) % 5),
                                       .a = (int64_t)((seed >> 8) % 300) - 1,
                                       .b = (int64_t)(ts + (seed >> 50) % 900) - 400,
                                       .c = (int64_t)((seed >> 3) % 400),
                                       .d = (int64_t)((seed >> 5) % 200) };
        }
        ASSERT_OK(goodput__account(rec, n, 0, r));
        double sum = r->productive_ms;
        ASSERT(r->productive_ms >= 0);
        for (int b = 0; b < GP_BUCKETS; b++) {
            ASSERT(r->lost_ms[b] >= 0);
            sum += r->lost_ms[b];
        }
        if (fabs(sum - r->wall_ms) > 0.001)
            FAIL("round %d: %.3f accounted of %.3f wall", round, sum, r->wall_ms);
        ASSERT(r->ettr >= 0 && r->ettr <= 1);
    }
    free(r);
}

TEST(ctl_goodput_metrics_are_counters_that_never_go_back)
{
    goodput_record rec[] = {
        { .ts_ms = 0, .kind = GP_START, .generation = -1 },
        { .ts_ms = 0, .kind = GP_FORMED, .generation = 1 },
        { .ts_ms = 0, .kind = GP_STEPS_STARTED, .generation = 1, .a = 0, .b = 0 },
        { .ts_ms = 1000, .kind = GP_DISRUPTION, .cause = GP_CAUSE_FAILURE, .generation = 1 },
        { .ts_ms = 1000, .kind = GP_STEPS_ENDED, .generation = 1, .a = 100, .b = 1000 },
        { .ts_ms = 1000, .kind = GP_STOPPED, .generation = 1 },
        { .ts_ms = 1000, .kind = GP_FORMED, .generation = 2 },
        { .ts_ms = 1100, .kind = GP_STEPS_STARTED, .generation = 2, .a = 50, .b = 1100 },
    };
    goodput_report *r = malloc(sizeof *r);
    ASSERT(r != NULL);
    goodput_floor floor = { 0 };
    /* Before generation 2 stepped, the failure's redone work is unknown. */
    ASSERT_OK(goodput__account(rec, 7, 1050, r));
    elastic__text page;
    elastic__text_init(&page, 1 << 16);
    goodput__render_metrics(r, &floor, &page);
    if (strstr(page.data, "elastic_goodput_productive_seconds_total 1.000\n") == NULL ||
        strstr(page.data, "# TYPE elastic_goodput_lost_seconds_total counter\n") == NULL)
        FAIL("%s", page.data);
    elastic__text_free(&page);
    /* Then it resumed at 50: 500 ms of that second were redone, yet the
     * productive counter stays at its high-water mark. */
    ASSERT_OK(goodput__account(rec, 8, 1100, r));
    NEAR(r->productive_ms, 500);
    elastic__text_init(&page, 1 << 16);
    goodput__render_metrics(r, &floor, &page);
    if (strstr(page.data, "elastic_goodput_productive_seconds_total 1.000\n") == NULL ||
        strstr(page.data, "elastic_goodput_lost_seconds_total{bucket=\"redone\"} 0.500\n") ==
            NULL ||
        strstr(page.data, "elastic_goodput_lost_seconds_total{bucket=\"restart\"} 0.100\n") ==
            NULL ||
        strstr(page.data, "elastic_goodput_ratio 0.454545\n") == NULL)
        FAIL("%s", page.data);
    elastic__text_free(&page);
    free(r);
}

/* The agent feeds its own journal lines to the accounting
 * (goodput__record_of_line); elasticctl reads the same lines back through
 * the timeline: both must come to the same numbers. */
TEST(ctl_goodput_of_journal_lines_equals_goodput_of_the_logs_read_back)
{
    const char *const logs[] = { issue_log, two_a };
    for (int l = 0; l < 2; l++) {
        const char *one[] = { logs[l] };
        goodput_report *by_ctl = account_logs(one, 1);
        ASSERT(by_ctl != NULL);
        goodput_record rec[64];
        size_t n = 0;
        for (const char *at = logs[l]; *at != '\0' && n < 64;) {
            const char *nl = strchr(at, '\n');
            if (goodput__record_of_line(at, (size_t)(nl - at), &rec[n])) n++;
            at = nl + 1;
        }
        /* Time order, as the agent writes them (the checkpoint's saved_ms may be earlier). */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && rec[j].ts_ms < rec[j - 1].ts_ms; j--) {
                goodput_record swap = rec[j];
                rec[j] = rec[j - 1];
                rec[j - 1] = swap;
            }
        goodput_report *by_agent = malloc(sizeof *by_agent);
        ASSERT(by_agent != NULL);
        ASSERT_OK(goodput__account(rec, n, 0, by_agent));
        NEAR(by_agent->wall_ms, by_ctl->wall_ms);
        NEAR(by_agent->productive_ms, by_ctl->productive_ms);
        NEAR(by_agent->failures_ms, by_ctl->failures_ms);
        ASSERT_EQ(by_agent->line_count, by_ctl->line_count);
        for (int b = 0; b < GP_BUCKETS; b++) NEAR(by_agent->lost_ms[b], by_ctl->lost_ms[b]);
        free(by_agent);
        free(by_ctl);
    }
    goodput_record r;
    const char *other = "{\"event\":\"worker_started\",\"ts_ms\":1}", *junk = "not json";
    ASSERT(!goodput__record_of_line(other, strlen(other), &r));
    ASSERT(!goodput__record_of_line(junk, strlen(junk), &r));
    const char *failure = "{\"event\":\"failure\",\"ts_ms\":5,\"generation\":2}";
    ASSERT(goodput__record_of_line(failure, strlen(failure), &r));
    ASSERT_EQ(r.kind, GP_DISRUPTION);
    ASSERT_EQ(r.generation, 2);
}

/* Silent data corruption (issue 36): a replica_divergence the job acted on
 * (committed 0) is a disruption of its own cause, "silent_corruption", in
 * elasticctl's report and in the agent's accounting alike; its redone work
 * is the steps from the newest agreed step (110) to where the job stopped
 * (125). Warn mode (committed 1) loses nothing: no disruption. */
TEST(ctl_goodput_a_replica_divergence_is_silent_corruption_with_its_redone_steps)
{
    static const char log[] = EV(1000, "\"event\":\"agent_started\"") EV(
        1010, "\"event\":\"generation_formed\",\"generation\":1,\"world_size\":3")
        EV(1100, "\"event\":\"steps_started\",\"generation\":1,\"step\":0,\"first_step_ms\":1100,"
                 "\"restore_ms\":0")
            EV(3510, "\"event\":\"replica_divergence\",\"generation\":1,\"step\":120,\"tier\":"
                     "\"memory\",\"mode\":\"stop\",\"committed\":0,\"reason\":\"step 120\"")
                EV(3600, "\"event\":\"steps_ended\",\"generation\":1,\"last_step\":125,"
                         "\"last_step_ms\":3600,\"step_us\":20000,\"save_stall_ms\":0")
                    EV(3600, "\"event\":\"generation_stopped\",\"generation\":1,\"stop_ms\":10")
                        EV(3700, "\"event\":\"generation_formed\",\"generation\":2,\"world_"
                                 "size\":3")
                            EV(3800, "\"event\":\"steps_started\",\"generation\":2,\"step\":110,"
                                     "\"first_step_ms\":3800,\"restore_ms\":5")
                                EV(5600, "\"event\":\"steps_ended\",\"generation\":2,\"last_"
                                         "step\":200,\"last_step_ms\":5600,\"step_us\":20000,"
                                         "\"save_stall_ms\":0")
                                    EV(5650, "\"event\":\"job_end\",\"status\":\"succeeded\","
                                             "\"exit_code\":0");
    const char *one[] = { log };
    goodput_report *r = account_logs(one, 1);
    ASSERT(r != NULL);
    ASSERT_EQ(r->cause_count[GP_CAUSE_SILENT_CORRUPTION], 1);
    ASSERT_STR_EQ(goodput__cause_name(GP_CAUSE_SILENT_CORRUPTION), "silent_corruption");
    NEAR(r->lost_ms[GP_REDONE], 15 * 20.0); /* steps 110..125 done twice */
    ASSERT(r->cause_ms[GP_CAUSE_SILENT_CORRUPTION] >= 15 * 20.0);
    free(r);
    goodput_record rec;
    const char *acted = "{\"event\":\"replica_divergence\",\"ts_ms\":5,\"generation\":1,"
                        "\"committed\":0}",
               *warned = "{\"event\":\"replica_divergence\",\"ts_ms\":5,\"generation\":1,"
                         "\"committed\":1}";
    ASSERT(goodput__record_of_line(acted, strlen(acted), &rec));
    ASSERT_EQ(rec.kind, GP_DISRUPTION);
    ASSERT_EQ(rec.cause, GP_CAUSE_SILENT_CORRUPTION);
    ASSERT(!goodput__record_of_line(warned, strlen(warned), &rec));
}
