/*
 * Each local failure classified, decided job-wide and said (issue 37):
 * the worker's own words (its error file, else the tail of its stderr) go
 * through the classifier (src/common/failure_class.c); the CLASSIFY call
 * records the failure in the job's history and runs the policy over it
 * (failure_decide_run below, on the calls thread); when it is back the
 * failure_classified event says the class, the decision and the rule, and a
 * deterministic bug stops the job (the machine's DECIDED input) with one
 * console line naming the cause, the frame and the generations.
 *
 * What the agent acts on: the policy's stop for a deterministic bug (rules
 * most_ranks and repeat; not under --torchrun-restarts), and its node
 * quarantine (rule node_quarantine: the node steps aside for
 * --straggler-quarantine and gives up under Slurm). Every other failure
 * of a worker spends one restart of --max-restarts as before (the
 * rendezvous counts it; a lost job store host spends none), and that is the
 * decision said. The policy's free restarts for replaced hardware are the
 * rendezvous' (a lost or stepped-aside node spends none, bounded by
 * --max-infra-restarts).
 */
#include "agent/failure_say.h"

#include "agent/console.h"
#include "agent/failure_decide.h"
#include "agent/failure_evidence.h"
#include "agent/failure_history.h"
#include "agent/failure_report.h"
#include "agent/journal_events.h"
#include "agent/membership.h"
#include "agent/spares.h"
#include "agent/summary.h"
#include "probe/probe.h"
#include "rdzv/rdzv.h"
#include "common/clock.h"
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The closing cause's reason starts with this: how the other nodes know. */
#define BUG_REASON_PREFIX "deterministic bug: "

struct agent_failures {
    failure_policy_history memory; /* no job store: this node's history (the calls thread's) */
    agent_failure_counts counts;
    char stop_line[1024];
    uint64_t stop_generation;
    char quarantine_why[320]; /* the policy's quarantine of this node, in words; "" none */
    /* A failure decided "restart", its console line held until the
     * generation's stop settles (agent__failure_say_pending): another rank
     * failing by itself meanwhile may still make it a deterministic bug. */
    bool pending;
    agent_failure_then pending_then;
    char pending_head[640], pending_kind[512];
};

static agent_failures *failures_of(agent_group *group)
{
    if (group->failures == NULL) group->failures = calloc(1, sizeof *group->failures);
    return group->failures;
}

/* What the rendezvous' counting does with it: a FAILURE spends one restart
 * job-wide; a lost store host's (NODE_LOST) spends none. */
static void today_of(const agent_group *group, const elastic_rdzv_cause *cause, bool torchrun,
                     failure_policy_result *out)
{
    *out = (failure_policy_result){ .rule = torchrun ? FR_TORCHRUN : FR_BUDGET };
    int max = group->current.max_restarts;
    out->budget_used = group->current.restart_count + 1;
    if (cause->kind == ELASTIC_RDZV_FAILURE) {
        out->spends = true;
        out->decision = out->budget_used > max ? FD_STOP_BUDGET : FD_RESTART;
        snprintf(out->why, sizeof out->why, "every failure spends one restart: %d of %d%s",
                 out->budget_used, max,
                 out->decision == FD_STOP_BUDGET ? ", past the budget: the job fails" : "");
    } else {
        out->budget_used--;
        out->rule = FR_HARDWARE;
        out->decision = FD_RESTART_FREE;
        snprintf(out->why, sizeof out->why, "the job store's host was lost: no restart spent");
    }
}

/* The CLASSIFY call: this failure recorded in the job's history and decided
 * there (calls thread), its decision the machine's DECIDED input (loop). */
typedef struct classify_call {
    agent_call base;
    agent_membership *membership; /* its rendezvous keeps the history; none: memory */
    agent_classify *classify;
    /* The failure's console line, said with its decision (it used to say
     * "restarting" a moment before the policy stopped the job); a call
     * dropped undecided (the agent leaving) says it without one. */
    const agent_group *group;
    bool say; /* false: said already, or a late failure's (the log says it) */
    char head[640], kind[512];
} classify_call;

static void say_failure(classify_call *cc, agent_failure_then then)
{
    if (!cc->say) return;
    cc->say = false;
    agent__console_failure_said(cc->group, cc->head, then, cc->kind);
}

/* The held line said now, as `then` (the pending decision, or the stop that
 * replaced it). */
static void say_held(const agent_group *group, agent_failures *f, agent_failure_then then)
{
    if (f == NULL || !f->pending) return;
    f->pending = false;
    agent__console_failure_said(group, f->pending_head, then, f->pending_kind);
}

/* A decision to restart: its line waits for the stop to settle. */
static void hold_failure(agent_failures *f, classify_call *cc, agent_failure_then then)
{
    if (!cc->say) return;
    say_held(cc->group, f, f->pending_then); /* an older one (not expected): said as it was */
    cc->say = false;
    f->pending = true;
    f->pending_then = then;
    snprintf(f->pending_head, sizeof f->pending_head, "%s", cc->head);
    snprintf(f->pending_kind, sizeof f->pending_kind, "%s", cc->kind);
}

void agent__failure_say_pending(agent_group *group)
{
    agent_failures *f = group->failures;
    if (f != NULL) say_held(group, f, f->pending_then);
}

static void classify_run(agent_call *call)
{
    classify_call *cc = (classify_call *)call;
    /* The generation's end as the rendezvous recorded it (this node's END
     * ran first: calls run in order); one node alone has none. */
    elastic_rdzv *handle = agent__membership_handle(cc->membership);
    elastic_rdzv_cause won = { .struct_size = sizeof won };
    if (handle != NULL && elastic_rdzv_watch(handle, 0, &won) == 0)
        agent__failure_note_peer(cc->classify, &won);
    agent__failure_decide_run(handle, cc->classify);
    /* Quarantined: the survivors' round need not wait for this node. */
    if (handle != NULL && cc->classify->result.quarantine)
        (void)rdzv__stay_out(handle, cc->classify->entry.generation);
    call->rc = 0; /* its own rc: a decision always comes back */
}

static void classify_done(agent_group *group, agent_call *call, agent_input *in)
{
    in->kind = AGENT_IN_DECIDED; /* the decision is the machine's input */
    in->stop_bug = agent__failure_decided(group, call);
    in->quarantine = agent__failure_quarantined(call);
}

static void classify_release(agent_call *call)
{
    classify_call *cc = (classify_call *)call;
    say_failure(cc, AGENT_FAILURE_UNDECIDED);
    free(cc->classify);
}

static const agent_call_type classify_type = { classify_run, classify_done, classify_release };

agent_call *agent__failure_say(agent_group *group, agent_worker *worker,
                               const elastic_rdzv_cause *cause)
{
    char kind[512];
    size_t kind_size = sizeof kind;
    /* This failure's own record (group->local_failure keeps the job's first). */
    agent_failure failure =
        (agent_failure){ .valid = true, .cause = *cause, .local_rank = worker->local_rank };
    agent__failure_words(worker, &failure);
    failure_evidence evidence;
    /* The OOM witness read as the worker was reaped (workers.c). */
    agent__failure_evidence(&failure, NULL, cause->reason, worker->oom_killed, NULL, false, -1,
                            &evidence);
    failure_verdict verdict;
    failure__classify(&evidence, &verdict);
    if (verdict.type[0] != '\0' || verdict.frame[0] != '\0')
        snprintf(kind, kind_size, "%s: %s%s%s%s%s", failure__class_label(verdict.cls), verdict.type,
                 verdict.frame[0] ? " at " : "", verdict.frame, verdict.message[0] ? ": " : "",
                 verdict.message);
    else
        snprintf(kind, kind_size, "%s: %s", failure__class_label(verdict.cls), verdict.evidence);

    agent_failures *f = failures_of(group);
    classify_call *call = agent__call_alloc(sizeof *call, AGENT_CALL_CLASSIFY, &classify_type);
    agent_classify *c = call != NULL ? calloc(1, sizeof *c) : NULL;
    char head[640];
    agent__console_failure_head(group, worker, cause, head, sizeof head);
    if (f == NULL || c == NULL) {
        free(call);
        ELASTIC_LOG_E("agent", "out of memory deciding a failure: it restarts as before");
        agent__console_failure_said(group, head, AGENT_FAILURE_RESTARTS, kind);
        return NULL;
    }
    call->classify = c;
    call->group = group;
    call->say = true;
    snprintf(call->head, sizeof call->head, "%s", head);
    snprintf(call->kind, sizeof call->kind, "%s", kind);
    call->membership = group->membership;
    c->verdict = verdict;
    /* With no rendezvous (one node) this node's own history decides. */
    c->memory = &f->memory;
    failure_policy__config_defaults(&c->config, group->current.max_restarts);
    c->config.torchrun_counting = group->job.opts->torchrun_restarts != 0;
    c->config.world_size = group->current.world_size;
    c->config.nodes = group->current.group_world_size;
    /* The failing rank's last heartbeat step (-1: it never beat): the
     * "same step in two generations" of the repeat rule, for trainers that beat. */
    int64_t step = group->monitor != NULL
                       ? probe__monitor_last_step(group->monitor, worker->local_rank)
                       : -1;
    c->entry = (failure_policy_entry){ .generation = cause->generation,
                                       .step = step,
                                       .rank = worker->rank,
                                       .cls = verdict.cls,
                                       .consequence = verdict.consequence,
                                       .signature_hash = verdict.signature_hash,
                                       .time_ms = cause->time_ms };
    snprintf(c->entry.node, sizeof c->entry.node, "%s", group->job.node_id);
    snprintf(c->entry.signature, sizeof c->entry.signature, "%s", verdict.signature);
    c->facts = (agent_failure_facts){ .generation = cause->generation,
                                      .rank = worker->rank,
                                      .local_rank = worker->local_rank,
                                      .step = step,
                                      .exit_code = cause->exit_code,
                                      .signal = cause->signal,
                                      .cause_rank = -1,
                                      .max_restarts = group->current.max_restarts };
    today_of(group, cause, c->config.torchrun_counting, &c->today);
    return &call->base;
}

bool agent__failure_raised(agent_worker *worker)
{
    agent_failure words = { .valid = true, .local_rank = worker->local_rank };
    agent__failure_words(worker, &words);
    if (words.detail[0] == '\0') return false;
    failure_evidence evidence;
    agent__failure_evidence(&words, NULL, "", false, NULL, false, -1, &evidence);
    failure_verdict verdict;
    failure__classify(&evidence, &verdict);
    return verdict.cls == FC_USER_CODE;
}

agent_call *agent__failure_say_late(agent_group *group, agent_worker *worker,
                                    const elastic_rdzv_cause *cause)
{
    agent_call *call = agent__failure_say(group, worker, cause);
    if (call == NULL) return NULL;
    ((classify_call *)call)->say = false; /* said in the log below, not on the console */
    failure_policy_result *today = &((classify_call *)call)->classify->today;
    *today = (failure_policy_result){ .rule = today->rule,
                                      .decision = FD_RESTART,
                                      .budget_used = group->current.restart_count + 1 };
    snprintf(today->why, sizeof today->why,
             "failed while the generation stopped for an earlier failure: no restart of its own");
    ELASTIC_LOG_I("agent", "rank %d failed while the generation stopped: %s", worker->rank,
                  ((classify_call *)call)->kind);
    return call;
}

/* ---- the calls thread ---------------------------------------------------------------------- */

void agent__failure_note_peer(agent_classify *c, const elastic_rdzv_cause *won)
{
    failure_verdict *v = &c->verdict;
    if (won == NULL || won->kind != ELASTIC_RDZV_FAILURE ||
        won->generation != c->entry.generation || v->consequence ||
        (v->cls != FC_COMM && v->cls != FC_HANG))
        return;
    /* Its own failure won (this node's END): no one came first. */
    if (won->rank == c->entry.rank && strcmp(won->node_id, c->entry.node) == 0) return;
    if (won->time_ms > c->entry.time_ms) return; /* ended later: not what broke it */
    v->consequence = true;
    c->entry.consequence = true;
    c->facts.cause_rank = won->rank;
    size_t len = strlen(v->evidence);
    snprintf(v->evidence + len, sizeof v->evidence - len,
             ", after rank %d's failure had ended generation %llu", won->rank,
             (unsigned long long)won->generation);
}

void agent__failure_decide_run(elastic_rdzv *rdzv, agent_classify *c)
{
    c->result = c->today;
    failure_policy_result policy;
    if (rdzv == NULL) { /* one node: its own history, in order */
        failure_policy__decide(&c->config, c->memory, &c->entry, &policy);
        failure_policy__record(c->memory, &c->entry, &policy);
    } else {
        c->rc = agent__failure_history_decide(rdzv, AGENT_FAILURE_DECIDE_TIMEOUT_MS, &c->config,
                                              &c->entry, &policy);
        if (c->rc != 0) {
            snprintf(c->error, sizeof c->error, "%s", elastic_last_error());
            return;
        }
    }
    /* The decisions the agent acts on; the rest are the rendezvous'. A
     * consequence decides nothing: its END lost, so it spent no restart. */
    if (policy.decision == FD_STOP_BUG || policy.decision == FD_NONE) {
        c->result = policy;
        return;
    }
    if (!policy.quarantine || c->result.decision == FD_STOP_BUDGET) return; /* it ends anyway */
    /* Its node quarantined on top of the restart (rule node_quarantine). */
    c->result.quarantine = true;
    c->result.rule = FR_NODE_QUARANTINE;
    c->result.node_failures = policy.node_failures;
    const char *q = strstr(policy.why, "; node ");
    size_t used = strlen(c->result.why);
    if (q != NULL) snprintf(c->result.why + used, sizeof c->result.why - used, "%s", q);
}

/* ---- the loop ------------------------------------------------------------------------------ */

bool agent__failure_decided(agent_group *group, agent_call *call)
{
    if (call->kind != AGENT_CALL_CLASSIFY) return false;
    const agent_classify *c = ((const classify_call *)call)->classify;
    agent_failures *f = group->failures;
    if (c == NULL || f == NULL) return false;
    agent_failure_then then = c->result.decision == FD_STOP_BUG       ? AGENT_FAILURE_STOPS
                              : c->result.decision == FD_RESTART_FREE ? AGENT_FAILURE_RESTARTS_FREE
                                                                      : AGENT_FAILURE_RESTARTS;
    if (then == AGENT_FAILURE_STOPS) {
        say_held(group, f, AGENT_FAILURE_STOPS); /* the first failure's line says the stop too */
        say_failure((classify_call *)call, then);
    } else {
        hold_failure(f, (classify_call *)call, then);
    }
    if (c->rc != 0)
        ELASTIC_LOG_W("agent",
                      "deciding the failure of rank %d job-wide: %s (%s); it restarts "
                      "as before",
                      c->facts.rank, elastic_err_name(c->rc), c->error);
    char hash[17];
    agent_ev_failure_classified ev;
    agent__failure_event_of(&c->facts, &c->verdict, &c->result, hash, &ev);
    agent__ev_failure_classified(group->job.events, &ev);
    agent__failure_count(&f->counts, &c->verdict, &c->result);
    if (c->result.quarantine && c->result.decision != FD_STOP_BUG) {
        snprintf(f->quarantine_why, sizeof f->quarantine_why,
                 "quarantined by the failure policy: %d failures of this node within %llu s, "
                 "most of the job's (last: rank %d, %s)",
                 c->result.node_failures,
                 (unsigned long long)(c->config.quarantine_window_ms / 1000), c->facts.rank,
                 failure__class_label(c->verdict.cls));
        agent__console(group, "node %s steps aside: %s", group->job.node_id, f->quarantine_why);
    }
    if (c->result.decision != FD_STOP_BUG) return false;
    agent__failure_console_line(&c->facts, &c->verdict, &c->result, f->stop_line,
                                sizeof f->stop_line);
    f->stop_generation = c->facts.generation;
    /* Said once: the job's summary (elasticrun prints it as it exits 70). */
    ELASTIC_LOG_I("agent", "%s", f->stop_line);
    return true;
}

agent_call *agent__failure_close_call(agent_group *group)
{
    agent_membership_call *call = agent__membership_call_new(group, AGENT_CALL_CLOSE_JOB);
    if (call == NULL) return NULL;
    const agent_failures *f = group->failures;
    elastic_rdzv_cause *cause = &call->cause;
    *cause = (elastic_rdzv_cause){ .struct_size = sizeof *cause,
                                   .kind = ELASTIC_RDZV_JOB_ENDED,
                                   .generation = f != NULL ? f->stop_generation : 0,
                                   .time_ms = elastic__wall_ms() };
    snprintf(cause->node_id, sizeof cause->node_id, "%s", group->job.node_id);
    /* "stopping the job: a deterministic bug in the training code: X" -> "deterministic bug: X" */
    const char *line = f != NULL ? f->stop_line : "";
    const char *what = strstr(line, "training code: ");
    /* bounded by the cause's reason (its end is the least needed: "(exit 70)") */
    int room = (int)(sizeof cause->reason - strlen(BUG_REASON_PREFIX) - 1);
    snprintf(cause->reason, sizeof cause->reason, BUG_REASON_PREFIX "%.*s", room,
             what != NULL ? what + strlen("training code: ") : line);
    return &call->base;
}

bool agent__failure_closed_for_bug(const elastic_rdzv_cause *cause)
{
    return cause->kind == ELASTIC_RDZV_JOB_ENDED &&
           strncmp(cause->reason, BUG_REASON_PREFIX, strlen(BUG_REASON_PREFIX)) == 0;
}

bool agent__failure_quarantined(const agent_call *call)
{
    if (call->kind != AGENT_CALL_CLASSIFY) return false;
    const agent_classify *c = ((const classify_call *)call)->classify;
    return c != NULL && c->result.quarantine && c->result.decision != FD_STOP_BUG;
}

const char *agent__failure_quarantine_why(const agent_group *group)
{
    return group->failures != NULL ? group->failures->quarantine_why : "";
}

const char *agent__failure_stop_line(const agent_group *group)
{
    return group->failures != NULL ? group->failures->stop_line : "";
}

void agent__failure_render_metrics(agent_group *group, elastic__text *out)
{
    agent_failure_counts none = { 0 };
    agent__failure_counts_render(group->failures != NULL ? &group->failures->counts : &none, out);
}

void agent__failures_free(agent_group *group)
{
    free(group->failures);
    group->failures = NULL;
}
