/* The job-wide failure policy (src/common/failure_policy.c): tables of
 * histories, each with the decision and the rule that must fire for the
 * last failure. */
#include "common/failure_policy.h"
#include "common/failure_record.h"
#include "test.h"

#include <stdio.h>

typedef struct fail {
    uint64_t generation;
    int64_t step;
    int rank;
    const char *node;
    int cls;
    const char *signature; /* the same text: the same bug */
    bool consequence, replaced;
    uint64_t time_s;
} fail;

static failure_policy_entry entry_of(const fail *f)
{
    failure_policy_entry e = { .generation = f->generation,
                               .step = f->step,
                               .rank = f->rank,
                               .cls = f->cls,
                               .consequence = f->consequence,
                               .replaced = f->replaced,
                               .time_ms = f->time_s * 1000 };
    snprintf(e.node, sizeof e.node, "%s", f->node != NULL ? f->node : "n1");
    snprintf(e.signature, sizeof e.signature, "%s", f->signature != NULL ? f->signature : "");
    uint64_t h = 1469598103934665603ull;
    for (const char *p = e.signature; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    e.signature_hash = h;
    return e;
}

/* Runs the failures in order through decide+record; returns the last result. */
static failure_policy_result run(const failure_policy_config *c, const fail *fails, int n)
{
    static failure_policy_history h;
    memset(&h, 0, sizeof h);
    failure_policy_result r = { 0 };
    for (int i = 0; i < n; i++) {
        failure_policy_entry e = entry_of(&fails[i]);
        failure_policy__decide(c, &h, &e, &r);
        failure_policy__record(&h, &e, &r);
    }
    return r;
}

/* One failure: generation, step, rank, node, class, signature, then
 * .consequence/.replaced/.time_s where they matter. */
#define F(g, s, r, n, c, sig, ...)                                                                \
    {                                                                                             \
        .generation = (g), .step = (s), .rank = (r), .node = (n), .cls = (c), .signature = (sig), \
        __VA_ARGS__                                                                               \
    }
#define BUG   "user_code|ValueError|trainer.py:41 in check_batch|bad batch at step <n>"
#define OTHER "user_code|KeyError|loader.py:9 in load|'x'"

typedef struct row {
    const char *name;
    int max_restarts, world_size, nodes;
    bool torchrun;
    fail fails[6];
    int count;
    int decision, rule;
    int budget_used;
} row;

TEST(common_failure_policy_rules_table)
{
    static const row rows[] = {
        { "first user-code failure spends one",
          10,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_USER_CODE, BUG) },
          1,
          FD_RESTART,
          FR_BUDGET,
          1 },
        { "the same bug at the same step in two generations stops",
          10,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_USER_CODE, BUG, .time_s = 1),
            F(2, 37, 0, "n1", FC_USER_CODE, BUG, .time_s = 2) },
          2,
          FD_STOP_BUG,
          FR_REPEAT,
          1 },
        { "...on another rank and node too",
          10,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_USER_CODE, BUG), F(2, 37, 3, "n2", FC_USER_CODE, BUG) },
          2,
          FD_STOP_BUG,
          FR_REPEAT,
          1 },
        { "the same bug at another step is not (yet) deterministic",
          10,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_USER_CODE, BUG), F(2, 112, 0, "n1", FC_USER_CODE, BUG) },
          2,
          FD_RESTART,
          FR_BUDGET,
          2 },
        { "another bug at the same step is not a repeat",
          10,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_USER_CODE, BUG), F(2, 37, 0, "n1", FC_USER_CODE, OTHER) },
          2,
          FD_RESTART,
          FR_BUDGET,
          2 },
        { "most ranks at once at one step stops in the first generation",
          10,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_USER_CODE, BUG), F(1, 37, 1, "n1", FC_USER_CODE, BUG),
            F(1, 37, 2, "n2", FC_USER_CODE, BUG) },
          3,
          FD_STOP_BUG,
          FR_MOST_RANKS,
          2 },
        { "half the ranks is not most",
          10,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_USER_CODE, BUG), F(1, 37, 1, "n1", FC_USER_CODE, BUG) },
          2,
          FD_RESTART,
          FR_BUDGET,
          2 },
        { "no steps reported: the signature in consecutive failed generations",
          10,
          2,
          1,
          false,
          { F(1, -1, 0, "n1", FC_USER_CODE, BUG), F(2, -1, 0, "n1", FC_USER_CODE, BUG) },
          2,
          FD_STOP_BUG,
          FR_REPEAT,
          1 },
        { "no steps reported: a different failure in between breaks the repeat",
          10,
          2,
          1,
          false,
          { F(1, -1, 0, "n1", FC_USER_CODE, BUG), F(2, -1, 0, "n1", FC_UNKNOWN, "unknown|exit 1||"),
            F(3, -1, 0, "n1", FC_USER_CODE, BUG) },
          3,
          FD_RESTART,
          FR_BUDGET,
          3 },
        { "an OOM twice at a step spends the budget (not the code's bug)",
          10,
          2,
          1,
          false,
          { F(1, 37, 0, "n1", FC_OOM, "oom|oom_kill||"),
            F(2, 37, 0, "n1", FC_OOM, "oom|oom_kill||") },
          2,
          FD_RESTART,
          FR_BUDGET,
          2 },
        { "a consequence decides nothing",
          10,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_UNKNOWN, "unknown|SIGKILL||"),
            F(1, 37, 1, "n2", FC_COMM, "communication|||", .consequence = true) },
          2,
          FD_NONE,
          FR_CONSEQUENCE,
          1 },
        { "torchrun counting: the repeat restarts anyway",
          10,
          4,
          2,
          true,
          { F(1, 37, 0, "n1", FC_USER_CODE, BUG), F(2, 37, 0, "n1", FC_USER_CODE, BUG) },
          2,
          FD_RESTART,
          FR_TORCHRUN,
          2 },
        { "torchrun counting: a replaced GPU spends one, past the budget it fails",
          0,
          4,
          2,
          true,
          { F(1, 37, 0, "n1", FC_HARDWARE, "hardware|||", .replaced = true) },
          1,
          FD_STOP_BUDGET,
          FR_TORCHRUN,
          1 },
        { "a fatal Xid replaced by a spare with --max-restarts 0 goes on",
          0,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_HARDWARE, "hardware|||", .replaced = true) },
          1,
          FD_RESTART_FREE,
          FR_HARDWARE,
          0 },
        { "hardware not replaced spends one",
          0,
          4,
          2,
          false,
          { F(1, 37, 0, "n1", FC_HARDWARE, "hardware|||") },
          1,
          FD_STOP_BUDGET,
          FR_BUDGET,
          1 },
        { "a lost node never spends",
          0,
          4,
          2,
          false,
          { F(1, 37, -1, "n2", FC_NODE_LOST, "node_lost|||") },
          1,
          FD_RESTART_FREE,
          FR_HARDWARE,
          0 },
        { "silent corruption replaced",
          0,
          4,
          2,
          false,
          { F(1, 37, -1, "n2", FC_SDC, "silent_corruption|||", .replaced = true) },
          1,
          FD_RESTART_FREE,
          FR_HARDWARE,
          0 },
        { "budget exhausted",
          1,
          4,
          2,
          false,
          { F(1, 5, 0, "n1", FC_UNKNOWN, "unknown|SIGKILL||"),
            F(2, 9, 1, "n2", FC_UNKNOWN, "unknown|SIGKILL||") },
          2,
          FD_STOP_BUDGET,
          FR_BUDGET,
          2 },
        { "operator stops",
          10,
          4,
          2,
          false,
          { F(1, 5, 0, "n1", FC_OPERATOR, "operator|SIGTERM||") },
          1,
          FD_STOP_OPERATOR,
          FR_OPERATOR,
          0 },
        { "three failures of one node within the hour: quarantined",
          10,
          4,
          2,
          false,
          { F(1, 5, 0, "n1", FC_UNKNOWN, "unknown|SIGKILL||", .time_s = 10),
            F(2, 9, 1, "n1", FC_UNKNOWN, "unknown|SIGKILL||", .time_s = 100),
            F(3, 19, 0, "n1", FC_UNKNOWN, "unknown|SIGKILL||", .time_s = 200) },
          3,
          FD_RESTART,
          FR_NODE_QUARANTINE,
          3 },
        { "...not when they are spread over more than the window",
          10,
          4,
          2,
          false,
          { F(1, 5, 0, "n1", FC_UNKNOWN, "unknown|SIGKILL||", .time_s = 10),
            F(2, 9, 1, "n1", FC_UNKNOWN, "unknown|SIGKILL||", .time_s = 2000),
            F(3, 19, 0, "n1", FC_UNKNOWN, "unknown|SIGKILL||", .time_s = 4000) },
          3,
          FD_RESTART,
          FR_BUDGET,
          3 },
        { "...not when every node fails as much",
          10,
          4,
          2,
          false,
          { F(1, 5, 0, "n1", FC_UNKNOWN, "u1", .time_s = 1),
            F(2, 5, 2, "n2", FC_UNKNOWN, "u2", .time_s = 2),
            F(3, 6, 0, "n1", FC_UNKNOWN, "u3", .time_s = 3),
            F(4, 6, 2, "n2", FC_UNKNOWN, "u4", .time_s = 4),
            F(5, 7, 0, "n1", FC_UNKNOWN, "u5", .time_s = 5),
            F(6, 7, 2, "n2", FC_UNKNOWN, "u6", .time_s = 6) },
          6,
          FD_RESTART,
          FR_BUDGET,
          6 },
        { "...never the job's only node",
          10,
          1,
          1,
          false,
          { F(1, 5, 0, "n1", FC_UNKNOWN, "u1", .time_s = 1),
            F(2, 9, 0, "n1", FC_UNKNOWN, "u2", .time_s = 2),
            F(3, 19, 0, "n1", FC_UNKNOWN, "u3", .time_s = 3) },
          3,
          FD_RESTART,
          FR_BUDGET,
          3 },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        failure_policy_config c;
        failure_policy__config_defaults(&c, r->max_restarts);
        c.world_size = r->world_size;
        c.nodes = r->nodes;
        c.torchrun_counting = r->torchrun;
        failure_policy_result res = run(&c, r->fails, r->count);
        if (res.decision != r->decision || res.rule != r->rule)
            FAIL("%s: %s by rule %s, expected %s by rule %s (%s)", r->name,
                 failure_policy__decision_name(res.decision), failure_policy__rule_name(res.rule),
                 failure_policy__decision_name(r->decision), failure_policy__rule_name(r->rule),
                 res.why);
        if (res.budget_used != r->budget_used)
            FAIL("%s: budget used %d, expected %d", r->name, res.budget_used, r->budget_used);
        if (res.why[0] == '\0') FAIL("%s: no sentence", r->name);
    }
}

/* The deterministic stop names the generations; the hardware bound stops a
 * fleet-wide outage; the history stays bounded and keeps its counters. */
TEST(common_failure_policy_names_generations_and_bounds)
{
    failure_policy_config c;
    failure_policy__config_defaults(&c, 10);
    c.world_size = 4;
    c.nodes = 2;
    fail two[] = { F(3, 37, 0, "n1", FC_USER_CODE, BUG), F(5, 37, 1, "n1", FC_USER_CODE, BUG) };
    failure_policy_result r = run(&c, two, 2);
    ASSERT_EQ(r.decision, FD_STOP_BUG);
    ASSERT_EQ(r.seen_generations[0], (uint64_t)3);
    ASSERT_EQ(r.seen_generations[1], (uint64_t)5);
    ASSERT(strstr(r.why, "generations 3 and 5") != NULL);

    c.hardware_restarts = 2;
    fail lost[] = { F(1, 1, -1, "a", FC_NODE_LOST, "l"), F(2, 1, -1, "b", FC_NODE_LOST, "l"),
                    F(3, 1, -1, "c", FC_NODE_LOST, "l") };
    r = run(&c, lost, 3);
    ASSERT_EQ(r.decision, FD_STOP_HARDWARE);
    ASSERT_EQ(r.hardware_used, 3);
    ASSERT_EQ(r.budget_used, 0);

    static failure_policy_history h;
    memset(&h, 0, sizeof h);
    failure_policy__config_defaults(&c, 1000000);
    c.quarantine_failures = 0;
    for (int i = 0; i < FAILURE_POLICY_MAX_ENTRIES + 10; i++) {
        fail f = F((uint64_t)i + 1, i, 0, "n1", FC_UNKNOWN, "u");
        failure_policy_entry e = entry_of(&f);
        failure_policy__decide(&c, &h, &e, &r);
        failure_policy__record(&h, &e, &r);
    }
    ASSERT_EQ(h.count, FAILURE_POLICY_MAX_ENTRIES);
    ASSERT_EQ(h.budget_used, FAILURE_POLICY_MAX_ENTRIES + 10);
    ASSERT_EQ(h.entries[0].generation, (uint64_t)11);
}

TEST(common_failure_policy_names_round_trip)
{
    for (int i = 0; i < FR_RULES; i++)
        ASSERT_EQ(failure_policy__rule_of_name(failure_policy__rule_name(i)), i);
    for (int i = 0; i < FD_DECISIONS; i++)
        ASSERT_EQ(failure_policy__decision_of_name(failure_policy__decision_name(i)), i);
    ASSERT_EQ(failure_policy__rule_of_name("x"), -1);
}

/* The store's form of an entry: round trip, and every malformed text refused. */
TEST(common_failure_policy_record_round_trips_and_refuses_bad_text)
{
    fail f = F(7, 37, 3, "host-a-123", FC_USER_CODE, BUG, .replaced = true, .time_s = 1700000000);
    failure_policy_entry e = entry_of(&f), back;
    char text[FAILURE_RECORD_MAX];
    size_t len = failure_record__encode(&e, text, sizeof text);
    ASSERT(len > 0);
    ASSERT_EQ(failure_record__decode(text, len, &back), 0);
    ASSERT_EQ(back.generation, e.generation);
    ASSERT_EQ(back.step, e.step);
    ASSERT_EQ(back.rank, e.rank);
    ASSERT_EQ(back.cls, e.cls);
    ASSERT_EQ(back.replaced, e.replaced);
    ASSERT_EQ(back.time_ms, e.time_ms);
    ASSERT_EQ(back.signature_hash, e.signature_hash);
    ASSERT_STR_EQ(back.node, e.node);
    ASSERT_STR_EQ(back.signature, e.signature);
    static const char *const bad[] = {
        "",
        "F2\t1\t2\t3\t1\t0\t0\t5\t00000000000000ff\tn\ts",
        "F1\t1\t2\t3\t99\t0\t0\t5\t00000000000000ff\tn\ts", /* no such class */
        "F1\t-4\t2\t3\t1\t0\t0\t5\t00000000000000ff\tn\ts", /* negative generation */
        "F1\t1\t2\t3\t1\t2\t0\t5\t00000000000000ff\tn\ts",  /* consequence not 0/1 */
        "F1\t1\t2x\t3\t1\t0\t0\t5\t00000000000000ff\tn\ts", /* junk in a number */
        "F1\t1\t2\t3\t1\t0\t0\t5\t-0000000000000ff\tn\ts",  /* a signed hash */
        "F1\t1\t2\t3\t1\t0\t0\t5\t00000000000000ff\t\ts",   /* no node */
        "F1\t1\t2\t3\t1\t0\t0\t5\t00000000000000ff\tn",     /* no signature */
        "F1\t1\t2\t3\t1\t0\t0\t5\t00000000000000ff\tn\ts\nF1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (failure_record__decode(bad[i], strlen(bad[i]), &back) != -1)
            FAIL("accepted \"%s\"", bad[i]);
    snprintf(e.node, sizeof e.node, "a\tb");
    ASSERT_EQ(failure_record__encode(&e, text, sizeof text), (size_t)0);
}
