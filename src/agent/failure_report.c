/*
 * The event, the console line and the counters of a classified failure
 * (failure_report.h).
 */
#include "agent/failure_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void agent__failure_event_of(const agent_failure_facts *f, const failure_verdict *v,
                             const failure_policy_result *r, char hash[17],
                             agent_ev_failure_classified *out)
{
    snprintf(hash, 17, "%016" PRIx64, v->signature_hash);
    *out = (agent_ev_failure_classified){
        .generation = f->generation,
        .rank = f->rank,
        .local_rank = f->local_rank,
        .step = f->step,
        .exit_code = f->exit_code,
        .signal = f->signal,
        .cls = failure__class_name(v->cls),
        .consequence = v->consequence,
        .cause_rank = f->cause_rank,
        .type = v->type,
        .frame = v->frame,
        .message = v->message,
        .signature = hash,
        .evidence = v->evidence,
        .decision = failure_policy__decision_name(r->decision),
        .rule = failure_policy__rule_name(r->rule),
        .why = r->why,
        .budget_used = r->budget_used,
        .max_restarts = f->max_restarts,
        .quarantine = r->quarantine,
    };
}

/* "ValueError at trainer.py:42 in check_batch: bad batch at step <n>", or the
 * evidence when no error was read. */
static void error_text(const failure_verdict *v, char *out, size_t size)
{
    if (v->type[0] == '\0' && v->frame[0] == '\0') {
        snprintf(out, size, "%s", v->evidence);
        return;
    }
    snprintf(out, size, "%s%s%s%s%s", v->type, v->frame[0] ? " at " : "", v->frame,
             v->message[0] ? ": " : "", v->message);
}

void agent__failure_console_line(const agent_failure_facts *f, const failure_verdict *v,
                                 const failure_policy_result *r, char *out, size_t size)
{
    char error[FAILURE_TYPE_MAX + FAILURE_FRAME_MAX + FAILURE_MESSAGE_MAX + 16];
    error_text(v, error, sizeof error);
    char step[40] = "";
    if (f->step >= 0) snprintf(step, sizeof step, " at step %" PRId64, f->step);
    if (r->decision == FD_STOP_BUG) {
        if (r->rule == FR_MOST_RANKS)
            snprintf(out, size,
                     "stopping the job: a deterministic bug in the training code: %s%s, on %d "
                     "ranks at once in generation %" PRIu64 "; restarting would replay it "
                     "(exit 70)",
                     error, step, r->ranks_at_step, r->seen_generations[1]);
        else
            snprintf(out, size,
                     "stopping the job: a deterministic bug in the training code: %s%s, in "
                     "generations %" PRIu64 " and %" PRIu64 "; restarting would replay it "
                     "(exit 70)",
                     error, step, r->seen_generations[0], r->seen_generations[1]);
        return;
    }
    char who[48];
    if (f->rank >= 0)
        snprintf(who, sizeof who, "rank %d", f->rank);
    else
        snprintf(who, sizeof who, "a node");
    if (v->consequence) {
        char cause[48] = "an earlier failure";
        if (f->cause_rank >= 0) snprintf(cause, sizeof cause, "rank %d's failure", f->cause_rank);
        snprintf(out, size, "%s failed as a consequence of %s: %s (%s)", who, cause,
                 failure__class_label(v->cls), error);
        return;
    }
    snprintf(out, size, "%s failed: %s (%s)%s: %s", who, failure__class_label(v->cls), error, step,
             r->why); /* the why names a quarantine too */
}

void agent__failure_count(agent_failure_counts *c, const failure_verdict *v,
                          const failure_policy_result *r)
{
    if (v->cls >= 0 && v->cls < FC_CLASSES) c->by_class[v->cls]++;
    if (r->decision >= 0 && r->decision < FD_DECISIONS) c->by_decision[r->decision]++;
    if (v->consequence) c->consequences++;
}

void agent__failure_counts_render(const agent_failure_counts *c, elastic__text *out)
{
    elastic__text_printf(out, "# HELP elastic_failures_total failures this node recorded, by "
                              "class (docs/OPERATIONS.md, \"Why each failure happened\")\n"
                              "# TYPE elastic_failures_total counter\n");
    for (int k = 0; k < FC_CLASSES; k++)
        elastic__text_printf(out, "elastic_failures_total{class=\"%s\"} %" PRIu64 "\n",
                             failure__class_name(k), c->by_class[k]);
    elastic__text_printf(out, "# HELP elastic_failure_decisions_total what the failure policy "
                              "decided for them\n"
                              "# TYPE elastic_failure_decisions_total counter\n");
    for (int d = 0; d < FD_DECISIONS; d++)
        elastic__text_printf(out, "elastic_failure_decisions_total{decision=\"%s\"} %" PRIu64 "\n",
                             failure_policy__decision_name(d), c->by_decision[d]);
    elastic__text_printf(out,
                         "# HELP elastic_failure_consequences_total failures caused by "
                         "another rank's failing first\n"
                         "# TYPE elastic_failure_consequences_total counter\n"
                         "elastic_failure_consequences_total %" PRIu64 "\n",
                         c->consequences);
}
