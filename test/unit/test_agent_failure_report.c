/* What the agent says about a classified failure (src/agent/failure_report.c):
 * the console's one line for a restart, a consequence and the deterministic
 * stop; the event's fields as explain reads them back; the /metrics counters. */
#include "agent/failure_report.h"
#include "test.h"

static void classify_python(failure_verdict *v)
{
    failure_evidence e = {
        .source = FS_WORKER_EXIT,
        .exit_code = 1,
        .stderr_tail = "Traceback (most recent call last):\n"
                       "  File \"/j/trainer.py\", line 42, in check_batch\n"
                       "ValueError: bad batch at step 37: label out of range\n",
    };
    failure__classify(&e, v);
}

/* The facts both tests report: rank 1's failure at step 36 in generation 2. */
static agent_failure_facts rank_1_at_step_36(void)
{
    return (agent_failure_facts){ .generation = 2,
                                  .rank = 1,
                                  .local_rank = 1,
                                  .step = 36,
                                  .exit_code = 1,
                                  .cause_rank = -1,
                                  .max_restarts = 10 };
}

TEST(agent_failure_report_console_lines)
{
    failure_verdict v;
    classify_python(&v);
    agent_failure_facts f = rank_1_at_step_36();
    failure_policy_result r = { .decision = FD_RESTART, .rule = FR_BUDGET };
    snprintf(r.why, sizeof r.why, "user code: restart 1 of 10");
    char line[1024];
    agent__failure_console_line(&f, &v, &r, line, sizeof line);
    ASSERT_STR_EQ(line, "rank 1 failed: user code (ValueError at trainer.py:42 in check_batch: "
                        "bad batch at step <n>: label out of range) at step 36: user code: "
                        "restart 1 of 10");
    r = (failure_policy_result){ .decision = FD_STOP_BUG,
                                 .rule = FR_REPEAT,
                                 .seen_generations = { 1, 2 } };
    agent__failure_console_line(&f, &v, &r, line, sizeof line);
    ASSERT_STR_EQ(line, "stopping the job: a deterministic bug in the training code: ValueError "
                        "at trainer.py:42 in check_batch: bad batch at step <n>: label out of "
                        "range at step 36, in generations 1 and 2; restarting would replay it "
                        "(exit 70)");
    failure_evidence killed = {
        .source = FS_WORKER_EXIT, .signal = 9, .exit_code = -1, .peer_failed_first = true
    };
    failure__classify(&killed, &v);
    f.cause_rank = 3;
    r = (failure_policy_result){ .decision = FD_NONE, .rule = FR_CONSEQUENCE };
    agent__failure_console_line(&f, &v, &r, line, sizeof line);
    const char *want = "rank 1 failed as a consequence of rank 3's failure: unknown (";
    if (strncmp(line, want, strlen(want)) != 0) FAIL("console line \"%s\"", line);
}

TEST(agent_failure_report_event_fields)
{
    failure_verdict v;
    classify_python(&v);
    agent_failure_facts f = rank_1_at_step_36();
    failure_policy_result r = { .decision = FD_STOP_BUG, .rule = FR_REPEAT, .budget_used = 1 };
    snprintf(r.why, sizeof r.why, "the same \"error\" twice");
    char path[4096];
    snprintf(path, sizeof path, "%s/classified.jsonl", test_tmpdir());
    agent_events *events = NULL;
    ASSERT_OK(agent__events_open(path, "run", "node-1", &events));
    agent_ev_failure_classified ev;
    char hash[17];
    agent__failure_event_of(&f, &v, &r, hash, &ev);
    agent__ev_failure_classified(events, &ev);
    agent__events_close(events);
    FILE *in = fopen(path, "r");
    ASSERT(in != NULL);
    char line[8192] = "";
    ASSERT(fgets(line, sizeof line, in) != NULL);
    fclose(in);
    ASSERT(strstr(line, "\"event\":\"failure_classified\"") != NULL);
    ASSERT(strstr(line, "\"class\":\"user_code\"") != NULL);
    ASSERT(strstr(line, "\"frame\":\"trainer.py:42 in check_batch\"") != NULL);
    ASSERT(strstr(line, "\"decision\":\"stop_bug\"") != NULL);
    ASSERT(strstr(line, "\"rule\":\"repeat\"") != NULL);
    ASSERT(strstr(line, "\"why\":\"the same \\\"error\\\" twice\"") != NULL);
    ASSERT(strstr(line, "\"step\":36") != NULL);
    ASSERT(strlen(hash) == 16);
}

TEST(agent_failure_report_counters)
{
    agent_failure_counts c;
    memset(&c, 0, sizeof c);
    failure_verdict v;
    classify_python(&v);
    failure_policy_result r = { .decision = FD_RESTART };
    agent__failure_count(&c, &v, &r);
    r.decision = FD_STOP_BUG;
    agent__failure_count(&c, &v, &r);
    elastic__text t;
    elastic__text_init(&t, 1 << 16);
    agent__failure_counts_render(&c, &t);
    ASSERT(!t.overflow);
    ASSERT(strstr(t.data, "elastic_failures_total{class=\"user_code\"} 2\n") != NULL);
    ASSERT(strstr(t.data, "elastic_failures_total{class=\"oom\"} 0\n") != NULL);
    ASSERT(strstr(t.data, "elastic_failure_decisions_total{decision=\"stop_bug\"} 1\n") != NULL);
    ASSERT(strstr(t.data, "elastic_failure_consequences_total 0\n") != NULL);
    elastic__text_free(&t);
}
