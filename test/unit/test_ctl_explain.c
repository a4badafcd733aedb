/* `elasticctl explain` (tools/elasticctl/explain*.c) over hand-written event
 * logs: the agent's own verdicts said as logged (the deterministic stop, its
 * rule and generations), and an older log's failures classified from their
 * events with the policy replayed (a consequence named with its cause, one
 * lost node logged by two nodes counted once, a replaced GPU spending nothing). */
#include "elasticctl/explain.h"
#include "elasticctl/goodput_classes.h"
#include "test.h"

#include <stdlib.h>

const char *ctl_last_error(void);
int ctl_explain(const char *const *paths, int count, const char *run_id, FILE *out);

static char *write_log(const char *name, const char *text)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    const char *dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    snprintf(p, sizeof paths[0], "%.400s/%.40s.%d", dir, name, (int)getpid());
    FILE *f = fopen(p, "w");
    if (f == NULL) return NULL;
    fputs(text, f);
    fclose(f);
    return p;
}

#define EV(ts, rest)  "{\"ts_ms\":" #ts ",\"run_id\":\"j\",\"node\":\"n1\",\"event\":" rest "}\n"
#define EV2(ts, rest) "{\"ts_ms\":" #ts ",\"run_id\":\"j\",\"node\":\"n2\",\"event\":" rest "}\n"

TEST(ctl_explain_says_the_agents_verdicts)
{
    const char *log = EV(1000, "\"agent_started\",\"max_restarts\":10") EV(
        1100, "\"generation_formed\",\"generation\":1,\"world_size\":2,\"group_world_size\":1")
        EV(2000,
           "\"failure_classified\",\"generation\":1,\"rank\":1,\"local_rank\":1,\"step\":36,"
           "\"class\":\"user_code\",\"consequence\":0,\"type\":\"ValueError\","
           "\"frame\":\"trainer.py:42 in check_batch\",\"message\":\"bad batch at step <n>\","
           "\"evidence\":\"stderr's traceback\",\"decision\":\"restart\",\"rule\":\"budget\","
           "\"why\":\"user code: restart 1 of 10\",\"budget_used\":1,\"exit_code\":1,\"signal\":0")
            EV(3000,
               "\"failure_classified\",\"generation\":2,\"rank\":1,\"local_rank\":1,\"step\":36,"
               "\"class\":\"user_code\",\"consequence\":0,\"type\":\"ValueError\","
               "\"frame\":\"trainer.py:42 in check_batch\",\"message\":\"bad batch at step <n>\","
               "\"evidence\":\"stderr's traceback\",\"decision\":\"stop_bug\",\"rule\":\"repeat\","
               "\"why\":\"the same error at step 36 in generations 1 and 2: a deterministic bug\","
               "\"budget_used\":1,\"exit_code\":1,\"signal\":0")
                EV(3100, "\"job_end\",\"status\":\"failed\",\"exit_code\":70");
    const char *path = write_log("explain_agent.jsonl", log);
    ASSERT(path != NULL);
    explain_report *r = calloc(1, sizeof *r);
    ASSERT_EQ(explain__load(&path, 1, NULL, r), 0);
    ASSERT_EQ(r->count, 2);
    ASSERT(r->failures[1].from_agent);
    ASSERT_EQ(r->failures[1].result.decision, FD_STOP_BUG);
    ASSERT_EQ(r->failures[1].result.rule, FR_REPEAT);
    ASSERT_EQ(r->exit_code, 70);
    ASSERT_EQ(explain__class_of_generation(r, 2), FC_USER_CODE);
    free(r);
    char text[8192] = "";
    FILE *out = fmemopen(text, sizeof text - 1, "w");
    ASSERT_EQ(ctl_explain(&path, 1, NULL, out), 0);
    fclose(out);
    ASSERT(strstr(text, "rule:      repeat: the same error at step 36 in generations 1 and 2") !=
           NULL);
    ASSERT(strstr(text, "decided:   stop now: a deterministic bug (exit 70)") != NULL);
    ASSERT(strstr(text,
                  "error:     ValueError at trainer.py:42 in check_batch: bad batch at step <n>") !=
           NULL);
    ASSERT(strstr(text, "look at:   the training code") != NULL);
    ASSERT(strstr(text, "the job ended: failed, exit 70") != NULL);
    ASSERT(strstr(text, "no failure_classified events") == NULL);
    remove(path);
}

/* A job closed past --max-infra-restarts: two nodes lost, no worker failed;
 * the end says which bound (job_end's why), a left-out node's end does not hide it. */
TEST(ctl_explain_names_the_infra_bound)
{
    const char *log =
        EV(1000, "\"agent_started\",\"max_restarts\":3")
            EV(2000, "\"generation_ended\",\"generation\":1,\"cause\":2,\"by_node\":\"n3\","
                     "\"reason\":\"lease expired\"")
                EV(3000, "\"generation_ended\",\"generation\":2,\"cause\":2,\"by_node\":\"n3\","
                         "\"reason\":\"lease expired\"")
                    EV(3100, "\"job_end\",\"status\":\"failed\",\"exit_code\":69,\"why\":\"the job "
                             "failed: infrastructure failures past their bound: lost or "
                             "replaced nodes ended 2 generations within an hour, "
                             "--max-infra-restarts 1 (last: node n3, lease expired) (closed by "
                             "node n1, generation 2; exit 69)\"") EV2(3200, "\"job_end\",\"status\":\"left_out\",\"exit_code\":0");
    const char *path = write_log("explain_infra.jsonl", log);
    ASSERT(path != NULL);
    char text[8192] = "";
    FILE *out = fmemopen(text, sizeof text - 1, "w");
    ASSERT_EQ(ctl_explain(&path, 1, NULL, out), 0);
    fclose(out);
    ASSERT(strstr(text, "the job ended: failed, exit 69") != NULL);
    ASSERT(strstr(text, "why:       infrastructure failures past their bound: lost or replaced "
                        "nodes ended 2 generations within an hour, --max-infra-restarts 1") !=
           NULL);
    ASSERT(strstr(text, "class:     node lost") != NULL);
    remove(path);
}

TEST(ctl_explain_replays_an_older_log)
{
    /* clang-format off */
    const char *n1 =
        EV(1000, "\"agent_started\",\"max_restarts\":0")
        EV(1100, "\"generation_formed\",\"generation\":1,\"world_size\":4,\"group_world_size\":2")
        EV(2000, "\"failure\",\"generation\":1,\"rank\":0,\"local_rank\":0,\"exit_code\":-1,"
                 "\"signal\":9,\"reason\":\"killed by signal 9\"")
        EV(2600, "\"steps_ended\",\"generation\":1,\"last_step\":120")
        EV(4000, "\"replica_divergence\",\"generation\":2,\"step\":40,\"committed\":1")
        EV(4500, "\"replica_divergence\",\"generation\":2,\"rank\":1,\"step\":50,"
                 "\"committed\":0,\"reason\":\"rank 1's replica differs\"")
        EV(5000, "\"health_stepped_aside\",\"generation\":2,\"reason\":\"Xid 79\","
                 "\"spares_waiting\":1,\"replacement\":\"n3\"")
        EV(9000, "\"job_end\",\"status\":\"succeeded\",\"exit_code\":0");
    const char *n2 =
        EV2(1100, "\"generation_formed\",\"generation\":1,\"world_size\":4,\"group_world_size\":2")
        EV2(2050, "\"failure\",\"generation\":1,\"rank\":2,\"local_rank\":0,\"exit_code\":1,"
                  "\"signal\":0,\"reason\":\"exited with code 1\"")
        EV2(5001, "\"generation_ended\",\"generation\":2,\"cause\":2,\"by_node\":\"n9\","
                  "\"reason\":\"lease lapsed\"")
        EV(5002, "\"generation_ended\",\"generation\":2,\"cause\":2,\"by_node\":\"n9\","
                 "\"reason\":\"lease lapsed\"");
    /* clang-format on */
    const char *paths[2] = { write_log("explain_n1.jsonl", n1), write_log("explain_n2.jsonl", n2) };
    ASSERT(paths[0] != NULL && paths[1] != NULL);
    explain_report *r = calloc(1, sizeof *r);
    ASSERT_EQ(explain__load(paths, 2, NULL, r), 0);
    /* the SIGKILL, its consequence, the divergence acted on (not the warned
     * one), the stepped-aside node, one lost node (logged twice) */
    ASSERT_EQ(r->count, 5);
    ASSERT(!r->failures[0].from_agent);
    ASSERT_EQ(r->failures[0].verdict.cls, FC_UNKNOWN);
    /* steps_ended is the node's furthest rank's, not the failed one's */
    ASSERT_EQ(r->failures[0].step, -1);
    ASSERT_EQ(r->failures[0].result.decision, FD_STOP_BUDGET); /* --max-restarts 0 */
    ASSERT(r->failures[1].verdict.consequence);
    ASSERT_EQ(r->failures[1].cause_rank, 0);
    ASSERT_EQ(r->failures[1].result.decision, FD_NONE);
    ASSERT_EQ(r->failures[2].verdict.cls, FC_SDC);
    ASSERT_EQ(r->failures[2].step, 50);
    ASSERT_EQ(r->failures[3].verdict.cls, FC_HARDWARE);
    ASSERT_EQ(r->failures[3].result.decision, FD_RESTART_FREE);
    ASSERT_EQ(r->failures[4].verdict.cls, FC_NODE_LOST);
    ASSERT_STR_EQ(r->failures[4].node, "n9");
    /* the SIGKILL's and the divergence's (no replacement named): lost nodes spend none */
    ASSERT_EQ(r->failures[4].result.budget_used, 2);
    char text[16384] = "";
    FILE *out = fmemopen(text, sizeof text - 1, "w");
    ASSERT_EQ(explain__write_text(r, out), 0);
    fclose(out);
    ASSERT(strstr(text, "no failure_classified events") != NULL);
    ASSERT(strstr(text, "(a consequence of rank 0's failure)") != NULL);
    ASSERT(strstr(text, "restart, no restart spent (replaced)") != NULL);
    free(r);
    remove(paths[0]);
    remove(paths[1]);
}

TEST(ctl_explain_refuses_bad_logs)
{
    const char *path = write_log("explain_bad.jsonl", "{\"ts_ms\":1}\n");
    explain_report *r = calloc(1, sizeof *r);
    ASSERT_EQ(explain__load(&path, 1, NULL, r), ELASTIC_EPROTO);
    ASSERT(strstr(ctl_last_error(), ":1:") != NULL);
    remove(path);
    path = write_log("explain_two.jsonl",
                     "{\"ts_ms\":1,\"run_id\":\"a\",\"node\":\"n\",\"event\":\"failure\"}\n"
                     "{\"ts_ms\":2,\"run_id\":\"b\",\"node\":\"n\",\"event\":\"failure\"}\n");
    ASSERT_EQ(explain__load(&path, 1, NULL, r), ELASTIC_EINVAL);
    ASSERT_EQ(explain__load(&path, 1, "b", r), 0);
    ASSERT_EQ(r->count, 1);
    remove(path);
    free(r);
}

/* goodput's per-class table: each disruption's lost time goes to its
 * generation's causing class (explain's), the start and re-forms to none,
 * and a hang nobody classified to "hang" by the accounting's own cause. */
TEST(ctl_explain_goodput_classes_use_the_same_classes)
{
    goodput_report *g = calloc(1, sizeof *g);
    explain_report *e = calloc(1, sizeof *e);
    ASSERT(g != NULL && e != NULL);
    g->line_count = 5;
    g->lines[0] = (goodput_line){ .cause = GP_CAUSE_START, .generation = 1, .lost_ms = 1000 };
    g->lines[1] = (goodput_line){ .cause = GP_CAUSE_FAILURE, .generation = 1, .lost_ms = 3000 };
    g->lines[2] = (goodput_line){ .cause = GP_CAUSE_FAILURE, .generation = 2, .lost_ms = 4000 };
    g->lines[3] = (goodput_line){ .cause = GP_CAUSE_HANG, .generation = 3, .lost_ms = 500 };
    g->lines[4] = (goodput_line){ .cause = GP_CAUSE_MEMBERSHIP, .generation = 4, .lost_ms = 700 };
    e->count = 3;
    e->failures[0].generation = 1;
    e->failures[0].verdict.cls = FC_USER_CODE;
    e->failures[1].generation = 2;
    e->failures[1].verdict.cls = FC_COMM;
    e->failures[1].verdict.consequence = true; /* not the cause */
    e->failures[2].generation = 2;
    e->failures[2].verdict.cls = FC_OOM;
    goodput_classes c;
    goodput__classes_of(g, e, &c);
    ASSERT_EQ(c.count[FC_USER_CODE], 1);
    ASSERT_EQ(c.count[FC_OOM], 1);
    ASSERT_EQ(c.count[FC_COMM], 0);
    ASSERT_EQ(c.count[FC_HANG], 1);
    ASSERT(c.ms[FC_OOM] == 4000 && c.ms[FC_USER_CODE] == 3000 && c.ms[FC_HANG] == 500);
    char text[512] = "";
    FILE *out = fmemopen(text, sizeof text - 1, "w");
    goodput__write_classes_text(&c, out);
    fclose(out);
    ASSERT_STR_EQ(
        text, "lost per failure class: user code 3.000 s (1), OOM 4.000 s (1), hang 0.500 s (1)\n");
    free(g);
    free(e);
}
