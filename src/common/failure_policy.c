/*
 * The failure policy (failure_policy.h): the rules in order, each a few
 * lines, over a bounded history. No I/O, no clock (times come in the entries).
 */
#include "common/failure_policy.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const decision_names[FD_DECISIONS] = {
    [FD_NONE] = "none",
    [FD_RESTART] = "restart",
    [FD_RESTART_FREE] = "restart_free",
    [FD_STOP_BUG] = "stop_bug",
    [FD_STOP_BUDGET] = "stop_budget",
    [FD_STOP_HARDWARE] = "stop_hardware",
    [FD_STOP_OPERATOR] = "stop_operator",
};

static const char *const rule_names[FR_RULES] = {
    [FR_CONSEQUENCE] = "consequence", [FR_TORCHRUN] = "torchrun",
    [FR_OPERATOR] = "operator",       [FR_MOST_RANKS] = "most_ranks",
    [FR_REPEAT] = "repeat",           [FR_NODE_QUARANTINE] = "node_quarantine",
    [FR_HARDWARE] = "hardware",       [FR_BUDGET] = "budget",
};

const char *failure_policy__decision_name(int decision)
{
    return decision >= 0 && decision < FD_DECISIONS ? decision_names[decision] : "none";
}

const char *failure_policy__rule_name(int rule)
{
    return rule >= 0 && rule < FR_RULES ? rule_names[rule] : "budget";
}

int failure_policy__rule_of_name(const char *name)
{
    for (int i = 0; name != NULL && i < FR_RULES; i++)
        if (strcmp(name, rule_names[i]) == 0) return i;
    return -1;
}

int failure_policy__decision_of_name(const char *name)
{
    for (int i = 0; name != NULL && i < FD_DECISIONS; i++)
        if (strcmp(name, decision_names[i]) == 0) return i;
    return -1;
}

void failure_policy__config_defaults(failure_policy_config *config, int max_restarts)
{
    memset(config, 0, sizeof *config);
    config->max_restarts = max_restarts;
    config->hardware_restarts = 100;
    config->quarantine_failures = 3;
    config->quarantine_window_ms = 3600 * 1000;
    config->world_size = 1;
    config->nodes = 1;
}

static bool same_signature(const failure_policy_entry *a, const failure_policy_entry *b)
{
    return a->signature_hash == b->signature_hash && strcmp(a->signature, b->signature) == 0;
}

/* most_ranks: distinct ranks of latest's generation with its signature at its step. */
static int ranks_at_step(const failure_policy_history *h, const failure_policy_entry *latest)
{
    int ranks[FAILURE_POLICY_MAX_ENTRIES + 1];
    int n = 0;
    ranks[n++] = latest->rank;
    for (int i = 0; i < h->count; i++) {
        const failure_policy_entry *e = &h->entries[i];
        if (e->generation != latest->generation || e->step != latest->step || e->rank < 0 ||
            e->consequence || !same_signature(e, latest))
            continue;
        bool seen = false;
        for (int j = 0; j < n && !seen; j++) seen = ranks[j] == e->rank;
        if (!seen) ranks[n++] = e->rank;
    }
    return n;
}

/* repeat: the earliest generation before latest's with its signature at its
 * step. A trainer that reports no steps (-1 on both) is matched by the
 * signature alone, and only against the generation that failed just before. */
static const failure_policy_entry *earlier_occurrence(const failure_policy_history *h,
                                                      const failure_policy_entry *latest)
{
    uint64_t previous_failed = 0; /* the newest generation before latest's with a failure */
    for (int i = 0; i < h->count; i++) {
        const failure_policy_entry *e = &h->entries[i];
        if (e->generation < latest->generation && !e->consequence &&
            e->generation > previous_failed)
            previous_failed = e->generation;
    }
    for (int i = 0; i < h->count; i++) {
        const failure_policy_entry *e = &h->entries[i];
        if (e->generation >= latest->generation || e->consequence || !same_signature(e, latest))
            continue;
        if (latest->step >= 0 && e->step == latest->step) return e;
        if (latest->step < 0 && e->step < 0 && e->generation == previous_failed) return e;
    }
    return NULL;
}

/* The failing node's own failures within the window, latest's included, and
 * whether they are most of the job's there (a bug that fails every node is
 * no reason to take one out). */
static int node_failures(const failure_policy_config *c, const failure_policy_history *h,
                         const failure_policy_entry *latest, bool *most)
{
    int mine = 1, all = 1;
    for (int i = 0; i < h->count; i++) {
        const failure_policy_entry *e = &h->entries[i];
        if (e->consequence || e->cls == FC_OPERATOR || e->time_ms > latest->time_ms ||
            latest->time_ms - e->time_ms > c->quarantine_window_ms)
            continue;
        all++;
        if (strcmp(e->node, latest->node) == 0) mine++;
    }
    *most = 2 * mine > all;
    return mine;
}

static bool free_class(const failure_policy_entry *e)
{
    switch (e->cls) {
    case FC_NODE_LOST:
    case FC_STRAGGLER: return true; /* the job re-forms or a spare steps in: never its fault */
    case FC_HARDWARE:
    case FC_SDC: return e->replaced;
    default: return false;
    }
}

static void spend(const failure_policy_config *c, failure_policy_result *out)
{
    out->spends = true;
    out->budget_used++;
    out->decision = out->budget_used > c->max_restarts ? FD_STOP_BUDGET : FD_RESTART;
}

/* consequence: a rank that failed because another had is not a failure of
 * its own; the first one's entry decides. */
static bool decide_consequence(const failure_policy_entry *latest, failure_policy_result *out)
{
    if (!latest->consequence) return false;
    out->decision = FD_NONE;
    out->rule = FR_CONSEQUENCE;
    snprintf(out->why, sizeof out->why,
             "rank %d failed because another rank had failed first: that failure decides",
             latest->rank);
    return true;
}

/* torchrun: every failure spends a restart, whatever it was. */
static bool decide_torchrun(const failure_policy_config *c, failure_policy_result *out)
{
    if (!c->torchrun_counting) return false;
    out->rule = FR_TORCHRUN;
    spend(c, out);
    snprintf(out->why, sizeof out->why, "torchrun's counting: restart %d of %d%s", out->budget_used,
             c->max_restarts,
             out->decision == FD_STOP_BUDGET ? ", past the budget: the job fails" : "");
    return true;
}

/* operator: stopped from outside, which no restart should undo. */
static bool decide_operator(const failure_policy_entry *latest, failure_policy_result *out)
{
    if (latest->cls != FC_OPERATOR) return false;
    out->decision = FD_STOP_OPERATOR;
    out->rule = FR_OPERATOR;
    snprintf(out->why, sizeof out->why, "stopped from outside: the job ends, nothing spent");
    return true;
}

/* most_ranks: the user's code failing the same way on most ranks at one
 * step is deterministic; a restart would replay it. */
static bool decide_most_ranks(const failure_policy_config *c, const failure_policy_history *h,
                              const failure_policy_entry *latest, failure_policy_result *out)
{
    if (latest->cls != FC_USER_CODE || latest->step < 0 || c->world_size < 2) return false;
    int n = ranks_at_step(h, latest);
    if (2 * n <= c->world_size) return false;
    out->decision = FD_STOP_BUG;
    out->rule = FR_MOST_RANKS;
    out->ranks_at_step = n;
    out->seen_generations[0] = out->seen_generations[1] = latest->generation;
    snprintf(out->why, sizeof out->why,
             "the same error on %d of %d ranks at step %" PRId64 " of generation %" PRIu64
             ": a deterministic bug, restarting replays it",
             n, c->world_size, latest->step, latest->generation);
    return true;
}

/* repeat: the user's code failing the same way as in an earlier generation
 * (at the same step) is deterministic too. */
static bool decide_repeat(const failure_policy_history *h, const failure_policy_entry *latest,
                          failure_policy_result *out)
{
    if (latest->cls != FC_USER_CODE) return false;
    const failure_policy_entry *before = earlier_occurrence(h, latest);
    if (before == NULL) return false;
    out->decision = FD_STOP_BUG;
    out->rule = FR_REPEAT;
    out->seen_generations[0] = before->generation;
    out->seen_generations[1] = latest->generation;
    char at[48] = "";
    if (latest->step >= 0) snprintf(at, sizeof at, " at step %" PRId64, latest->step);
    snprintf(out->why, sizeof out->why,
             "the same error%s in generations %" PRIu64 " and %" PRIu64
             ": a deterministic bug, restarting replays it",
             at, before->generation, latest->generation);
    return true;
}

/* hardware or budget: a restart the job is not to blame for comes from the
 * free (but bounded) count; any other spends the budget. */
static void charge_restart(const failure_policy_config *c, const failure_policy_entry *latest,
                           failure_policy_result *out)
{
    const char *label = failure__class_label(latest->cls);
    if (free_class(latest)) {
        out->rule = FR_HARDWARE;
        out->hardware_used++;
        out->decision =
            out->hardware_used > c->hardware_restarts ? FD_STOP_HARDWARE : FD_RESTART_FREE;
        snprintf(out->why, sizeof out->why, "%s%s: no restart spent (%d of %d free restarts)%s",
                 label, latest->replaced ? ", replaced" : "", out->hardware_used,
                 c->hardware_restarts,
                 out->decision == FD_STOP_HARDWARE ? ", past their bound: the job fails" : "");
    } else {
        out->rule = FR_BUDGET;
        spend(c, out);
        snprintf(out->why, sizeof out->why, "%s: restart %d of %d%s", label, out->budget_used,
                 c->max_restarts,
                 out->decision == FD_STOP_BUDGET ? ", past the budget: the job fails" : "");
    }
}

/* node_quarantine: on top of the restart, a node with most of the job's
 * recent failures (and a job with other nodes to go on) is taken out. */
static void quarantine_node(const failure_policy_config *c, const failure_policy_history *h,
                            const failure_policy_entry *latest, failure_policy_result *out)
{
    bool most = false;
    out->node_failures = node_failures(c, h, latest, &most);
    out->quarantine = c->quarantine_failures > 0 && c->nodes > 1 && latest->node[0] != '\0' &&
                      out->node_failures >= c->quarantine_failures && most;
    if (!out->quarantine) return;
    out->rule = FR_NODE_QUARANTINE;
    size_t used = strlen(out->why);
    snprintf(out->why + used, sizeof out->why - used,
             "; node %s failed %d times within %" PRIu64 " s: quarantined", latest->node,
             out->node_failures, c->quarantine_window_ms / 1000);
}

/* The rules in order: the first five decide alone when they apply; any
 * other failure is charged a restart (a free one or one of the budget), and
 * its node may be quarantined as well. */
void failure_policy__decide(const failure_policy_config *c, const failure_policy_history *h,
                            const failure_policy_entry *latest, failure_policy_result *out)
{
    memset(out, 0, sizeof *out);
    out->budget_used = h->budget_used;
    out->hardware_used = h->hardware_used;
    if (decide_consequence(latest, out) || decide_torchrun(c, out) ||
        decide_operator(latest, out) || decide_most_ranks(c, h, latest, out) ||
        decide_repeat(h, latest, out))
        return;
    charge_restart(c, latest, out);
    quarantine_node(c, h, latest, out);
}

void failure_policy__record(failure_policy_history *h, const failure_policy_entry *latest,
                            const failure_policy_result *result)
{
    if (h->count == FAILURE_POLICY_MAX_ENTRIES) {
        memmove(&h->entries[0], &h->entries[1], (size_t)(h->count - 1) * sizeof h->entries[0]);
        h->count--;
    }
    h->entries[h->count++] = *latest;
    h->budget_used = result->budget_used;
    h->hardware_used = result->hardware_used;
}
