/*
 * The worker group's runner, on the agent's loop thread. Everything else
 * reports to it through one queue of events (agent__group_post): worker
 * exits (their pidfds, never polling), probes, output streams, timers, calls
 * back from the calls thread, membership news and stop requests from other
 * threads (those through `wake`). The queue is drained in order, one event
 * at a time: each becomes an input to the machine (machine.c, which alone
 * decides), and the runner performs the actions it returns, in order. A
 * transition that makes a helper post (starting workers in
 * generation_formed) finishes before that post is looked at: nothing
 * re-enters the machine. After each event the runner sends SETTLED, the
 * machine's one "every worker stopped" check.
 *
 * The runner decides nothing: what happens is the machine's; how it happens
 * (which signal, which event fields, which console line) is here and in the
 * helpers. docs/ARCHITECTURE.md has the state x input table.
 */
#include "agent/group.h"
#include "agent/failure_say.h"
#include "agent/memory.h"

#include "agent/console.h"
#include "agent/divergence.h"
#include "agent/generation_store.h"
#include "agent/health.h"
#include "agent/journal_events.h"
#include "agent/probes.h"
#include "agent/reaper.h"
#include "agent/slurm.h"
#include "agent/spares.h"
#include "agent/prestart.h"
#include "agent/quarantine.h"
#include "agent/summary.h"
#include "agent/waiting.h"
#include "agent/workers.h"
#include "common/clock.h"
#include "rdzv/rdzv.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

bool agent__group_is_running(const agent_group *group)
{
    return group->m.state == AGENT_RUNNING;
}
bool agent__group_is_stopping(const agent_group *group)
{
    return group->m.state == AGENT_STOPPING;
}
bool agent__group_in_rendezvous(const agent_group *group)
{
    return group->m.state == AGENT_RENDEZVOUS;
}
bool agent__group_is_done(const agent_group *group)
{
    return group->m.state == AGENT_DONE;
}

/* What the actions of one input may need from the event behind it. */
typedef struct step_context {
    agent_worker *worker;            /* WORKER_*, ABORT_ACKED */
    const char *reason;              /* WORKER_*: why; HEALTH(_GATE): the fatal finding */
    int exit_code, term_signal;      /* WORKER_* */
    agent_call *call;                /* CALL_DONE */
    const elastic_rdzv_cause *cause; /* MEMBERSHIP_CHANGE */
    elastic_rdzv_cause failure;      /* FAILURE -> REPORT_FAILURE: the cause shared */
    agent_call *classify;            /* REPORT_FAILURE -> CLASSIFY: the decision's call */
} step_context;

static void step(agent_group *group, const agent_input *in, step_context *ctx);

/* ---- effects: how the machine's actions happen ------------------------------------ */

static void write_summary(agent_group *group, agent_summary_kind kind, const step_context *ctx)
{
    int sig = group->m.stop_signal;
    const agent_next_call *next = agent__next_call_of(ctx->call);
    switch (kind) {
    case AGENT_SUMMARY_NONE: break;
    case AGENT_SUMMARY_SHUTDOWN:
        snprintf(group->summary, sizeof group->summary, "stopped by signal %d (%s)", sig,
                 sig > 0 ? strsignal(sig) : "request");
        break;
    case AGENT_SUMMARY_STOPPED_IN_RDZV:
        snprintf(group->summary, sizeof group->summary,
                 "stopped by signal %d during the rendezvous", sig);
        break;
    case AGENT_SUMMARY_STOPPED_IN_QUARANTINE:
        snprintf(group->summary, sizeof group->summary, "stopped by signal %d in quarantine", sig);
        break;
    case AGENT_SUMMARY_LEFT_OUT:
        snprintf(group->summary, sizeof group->summary,
                 "left out as a spare: the job succeeded without this node (every node of "
                 "generation %llu finished)",
                 next != NULL ? (unsigned long long)next->closed.generation : 0ULL);
        break;
    case AGENT_SUMMARY_UNHEALTHY_LEFT:
        snprintf(group->summary, sizeof group->summary,
                 "unhealthy: stepped aside and left (%s)", agent__health_reason(group));
        break;
    case AGENT_SUMMARY_EVICTED_LEFT:
        snprintf(group->summary, sizeof group->summary, "evicted as the job's straggler: left");
        break;
    case AGENT_SUMMARY_DIVERGED:
        snprintf(group->summary, sizeof group->summary, "%s", agent__divergence_summary(group));
        break;
    case AGENT_SUMMARY_BUG:
        snprintf(group->summary, sizeof group->summary, "%s", agent__failure_stop_line(group));
        break;
    case AGENT_SUMMARY_QUARANTINE_LEFT:
        snprintf(group->summary, sizeof group->summary, "%s: left",
                 agent__failure_quarantine_why(group));
        break;
    }
}

static void emit_job_end(agent_group *group, agent_end_status status)
{
    agent__goodput_generation_ended(group); /* a last generation that ended well */
    /* A failed end says why (explain prints it): the summary's first line. */
    char why[400] = "";
    if (status == AGENT_END_FAILED)
        snprintf(why, sizeof why, "%.*s", (int)strcspn(group->summary, "\n"), group->summary);
    agent__ev_job_end(
        group->job.events,
        &(agent_ev_job_end){ .status = agent__end_status_name(status),
                             .exit_code = group->m.exit_code,
                             .generations = group->m.generations,
                             .duration_ms = (int64_t)(elastic__now_ms() - group->clock.started_ms),
                             .restarts = group->current.restart_count,
                             .lost_ms = (int64_t)group->clock.lost_ms,
                             .why = why });
    agent__console_job_end(group, status);
}

/* ENDING's last call: the summary of a failed rendezvous carries its closing cause. */
static agent_call *ending_call(agent_group *group, const agent_action *a, const step_context *ctx)
{
    if (a->call_kind == AGENT_CALL_CLOSE_JOB) return agent__failure_close_call(group);
    if (a->call_kind == AGENT_CALL_SUMMARY)
        return agent__summary_call(group, agent__next_call_of(ctx->call));
    agent_membership_call *call = agent__membership_call_new(group, a->call_kind);
    return call != NULL ? &call->base : NULL;
}

static void on_grace_expired(uv_timer_t *timer)
{
    agent__group_post(timer->data, &(agent_group_event){ .kind = AGENT_GROUP_GRACE_EXPIRED });
}

/* SIGTERM to every worker's process group (or in-process recovery's abort),
 * SIGKILL after the grace period. */
static void stop_workers(agent_group *group, agent_stop_reason reason)
{
    group->clock.stop_started_ms = elastic__now_ms();
    if (group->monitor != NULL) probe__monitor_pause(group->monitor);
    bool in_process =
        reason == AGENT_STOP_FOR_RESTART &&
        agent__inprocess_stop(group, group->unhealthy.local_rank, group->unhealthy.reason);
    if (in_process) {
        agent__inprocess_failed_at(group, group->clock.failure_ms);
    } else {
        if (reason == AGENT_STOP_FOR_SHUTDOWN) agent__workers_notice(group);
        agent__workers_signal(group, SIGTERM, true);
    }
    if (group->m.running > 0)
        uv_timer_start(&group->grace_timer, on_grace_expired,
                       (uint64_t)group->job.opts->grace_period_ms, 0);
}

static void generation_stopped(agent_group *group)
{
    uv_timer_stop(&group->grace_timer);
    agent__inprocess_stopped(group);
    agent__workers_signal(group, SIGKILL, true); /* grandchildren left in the workers' process groups */
    agent__goodput_generation_ended(group);
    agent__phases_stopped(group);
    agent__ev_generation_stopped(
        group->job.events,
        &(agent_ev_generation_stopped){
            .generation = group->current.generation,
            .stop_ms = (int64_t)(elastic__now_ms() - group->clock.stop_started_ms) });
}

/* The rendezvous' record of a worker's own failure (ctx: the exit being handled). */
static void failure_cause_of(const agent_group *group, const step_context *ctx,
                             elastic_rdzv_cause *cause)
{
    *cause = (elastic_rdzv_cause){ .struct_size = sizeof *cause,
                                   .kind = ELASTIC_RDZV_FAILURE,
                                   .generation = group->current.generation,
                                   .rank = ctx->worker->rank,
                                   .exit_code = ctx->exit_code,
                                   .signal = ctx->term_signal,
                                   .time_ms = elastic__wall_ms() };
    snprintf(cause->node_id, sizeof cause->node_id, "%s", group->job.node_id);
    snprintf(cause->reason, sizeof cause->reason, "%s", ctx->reason);
}

/* A local worker's failure, before its workers stop: the cause every node
 * is told, the recovery's clock and phases, the rank that ended it. */
static void failure_noted(agent_group *group, step_context *ctx, bool keep_worker)
{
    agent_worker *worker = ctx->worker;
    group->clock.failure_ms = elastic__now_ms();
    elastic_rdzv_cause *cause = &ctx->failure;
    failure_cause_of(group, ctx, cause);
    /* The generation's store host died and the worker died of it: a lost
     * node, not a failure of ours (it costs no budget). */
    if (agent__jobstore_lost(group->store.jobstore, group->current.generation)) {
        cause->kind =
            ELASTIC_RDZV_NODE_LOST; /* named by its address: never this node, which is no loss */
        snprintf(cause->node_id, sizeof cause->node_id, "%.127s", group->current.master_addr);
        snprintf(cause->reason, sizeof cause->reason, "job store host lost (rank %d: %.150s)",
                 worker->rank, ctx->reason);
    }
    agent__phases_failure(group, keep_worker ? NULL : worker);
    group->unhealthy.local_rank = keep_worker ? -1 : worker->local_rank;
    snprintf(group->unhealthy.reason, sizeof group->unhealthy.reason, "rank %d: %s", worker->rank,
             ctx->reason);
}

/* ... and once they are stopping: recorded here first (the store may be
 * gone), said, shared, and the generation ended for every node. */
static void failure_reported(agent_group *group, step_context *ctx)
{
    agent_worker *worker = ctx->worker;
    agent__failure_record(group, worker, &ctx->failure);
    ctx->classify = agent__failure_say(group, worker, &ctx->failure); /* said once decided */
    agent__ev_failure(group->job.events,
                      &(agent_ev_failure){ .worker = agent__ev_worker_of(group, worker),
                                           .exit_code = ctx->exit_code,
                                           .signal = ctx->term_signal,
                                           .reason = ctx->reason });
    /* The store calls run off the loop, in order: the end precedes the next rendezvous. */
    agent__failure_share(group, &ctx->failure);
    agent_membership_call *end = agent__membership_call_new(group, AGENT_CALL_END);
    if (end != NULL) end->cause = ctx->failure;
    agent__call_post(group, end != NULL ? &end->base : NULL);
}

/* ... and decided job-wide (the failure policy): the CLASSIFY call, after
 * the END (calls run in order); DECIDED answers it. Out of memory: decided
 * now, as before the policy (a restart). */
static void classify(agent_group *group, step_context *ctx)
{
    agent_call *call = ctx->classify;
    ctx->classify = NULL;
    if (call != NULL) {
        agent__call_post(group, call);
        return;
    }
    agent_input in = { .kind = AGENT_IN_DECIDED };
    step(group, &in, &(step_context){ 0 });
}

/* A worker that failed by itself while the generation stops for a failure:
 * its own failure decided job-wide (the CLASSIFY call only: the generation's
 * end is said, nothing shared, no END); DECIDED answers it. Died of a lost
 * store host, or out of memory: nothing to decide (DECIDED now). */
static void classify_late(agent_group *group, step_context *ctx)
{
    agent_worker *worker = ctx->worker;
    elastic_rdzv_cause cause;
    failure_cause_of(group, ctx, &cause);
    agent_call *call = NULL;
    if (!agent__jobstore_lost(group->store.jobstore, group->current.generation))
        call = agent__failure_say_late(group, worker, &cause);
    if (call != NULL) {
        agent__call_post(group, call);
        return;
    }
    agent_input in = { .kind = AGENT_IN_DECIDED };
    step(group, &in, &(step_context){ 0 });
}

/* RENDEZVOUS -> RUNNING: the generation's event, its workers, the spares. */
static void generation_formed(agent_group *group, agent_next_call *call, bool wait_spare)
{
    const elastic_rdzv_result *result = &call->result;
    agent__memory_apply(group, call);
    group->current = *result;
    agent__ev_generation_formed(
        group->job.events,
        &(agent_ev_generation_formed){
            .generation = result->generation,
            .group_rank = result->group_rank,
            .group_world_size = result->group_world_size,
            .rank_base = result->rank_base,
            .local_world_size = result->local_world_size,
            .world_size = result->world_size,
            .restart_count = result->restart_count,
            .rendezvous_ms = (int64_t)(elastic__now_ms() - group->clock.rendezvous_started_ms) });
    agent__node_stats_generation_formed(group);
    agent__probes_generation_started(group);
    agent__phases_formed(group);
    if (agent__workers_start(group, wait_spare) != 0)
        return; /* a worker that could not start is posted as unhealthy: handled next */
    agent__spares_fill(group); /* the first ones; after a recovery, once it is over */
    if (group->clock.failure_ms != 0 && group->monitor != NULL &&
        !agent__inprocess_reconfiguring(group))
        probe__monitor_record_recovery(
            group->monitor, (double)(elastic__now_ms() - group->clock.failure_ms) / 1000.0, false);
    if (group->clock.failure_ms != 0) {
        uint64_t recovery_ms = elastic__now_ms() - group->clock.failure_ms;
        agent__ev_restarted(group->job.events,
                            &(agent_ev_recovered){ .generation = result->generation,
                                                   .recovery_ms = (int64_t)recovery_ms });
        group->clock.lost_ms += recovery_ms;
        agent__console_running_again(group, recovery_ms);
        group->clock.failure_ms = 0;
    }
}

/* The generation ended elsewhere, or this node was fenced: said, and the
 * recovery's clock starts (the workers stop next). */
static void generation_ended(agent_group *group, const elastic_rdzv_cause *cause)
{
    bool fenced =
        cause->kind == ELASTIC_RDZV_FENCED ||
        (cause->kind == ELASTIC_RDZV_NODE_LOST && strcmp(cause->node_id, group->job.node_id) == 0);
    agent__ev_generation_ended(group->job.events,
                               &(agent_ev_generation_ended){ .generation = cause->generation,
                                                             .cause = cause->kind,
                                                             .by_node = cause->node_id,
                                                             .rank = cause->rank,
                                                             .reason = cause->reason });
    if (!fenced) agent__console_ended_elsewhere(group, cause); /* the fenced line said it */
    if (cause->kind == ELASTIC_RDZV_NODE_LOST) agent__slurm_note_lost(group, cause->node_id);
    group->clock.failure_ms = elastic__now_ms();
    agent__phases_failure(group, NULL);
    group->unhealthy.local_rank = -1;
    snprintf(group->unhealthy.reason, sizeof group->unhealthy.reason, "%.100s: %.150s",
             cause->node_id, cause->reason);
}

/* This node lost its lease: it is no member of the generation any more. */
static void fenced(agent_group *group, const elastic_rdzv_cause *cause)
{
    group->losses.fenced_wall_ms = cause->time_ms != 0 ? cause->time_ms : elastic__wall_ms();
    snprintf(group->losses.fenced_reason, sizeof group->losses.fenced_reason, "%s", cause->reason);
    agent__ev_fenced(group->job.events, &(agent_ev_fenced){ .generation = cause->generation,
                                                            .running = group->m.running,
                                                            .store = group->store.endpoint,
                                                            .reason = cause->reason });
    /* Said once, on the console; with --quiet the log still says it. */
    if (group->job.opts->quiet)
        ELASTIC_LOG_E("agent",
                      "fenced out of generation %llu (%s): killing %d local worker(s) now, then "
                      "rejoining as a new member",
                      (unsigned long long)cause->generation, cause->reason, group->m.running);
    agent__console_fenced(group, cause->generation, cause->reason, group->m.running);
}

static void slurm_give_up(agent_group *group, agent_give_up_kind kind)
{
    char why[256];
    if (kind == AGENT_GIVE_UP_FENCED) {
        snprintf(why, sizeof why, "fenced %d times (lost its lease: node or network unreliable)",
                 group->m.fenced_count);
    } else {
        snprintf(why, sizeof why, "%s", agent__failure_quarantine_why(group));
    }
    agent__slurm_give_up(group, why);
}

static void say_unhealthy(agent_group *group, const char *reason)
{
    snprintf(group->summary, sizeof group->summary, "unhealthy, did not join: %s", reason);
    agent__console(group, "node %s does not join the job: unhealthy (%s)", group->job.node_id,
                   reason);
}

static void join(agent_group *group)
{
    agent__waiting_start(group);
    agent_next_call *next = agent__next_call_new(group);
    agent__call_post(group, next != NULL ? &next->base : NULL);
}

static void ask_health_gate(agent_group *group, step_context *ctx)
{
    char reason[300];
    agent_input in = { .kind = AGENT_IN_HEALTH_GATE };
    in.gate = agent__health_gate(group, reason, sizeof reason);
    step_context gate = { .reason = reason };
    (void)ctx;
    step(group, &in, &gate);
}

/* The machine's input for news from the rendezvous. */
static agent_input change_input(const agent_group *group, const elastic_rdzv_cause *cause)
{
    return (agent_input){ .kind = AGENT_IN_MEMBERSHIP_CHANGE,
                          .cause_kind = cause->kind,
                          .generation = cause->generation,
                          .about_me = strcmp(cause->node_id, group->job.node_id) == 0 };
}

/* The news held while next() formed the generation it is about: now that it
 * runs here, the news goes in as it would have, had it come now (the workers
 * GENERATION_FORMED just started stop again). */
static void replay_change(agent_group *group)
{
    ELASTIC_LOG_I("agent", "generation %llu ended while it was forming here: %s",
                  (unsigned long long)group->held_change.generation, group->held_change.reason);
    elastic_rdzv_cause cause = group->held_change;
    agent_input in = change_input(group, &cause);
    step(group, &in, &(step_context){ .cause = &cause });
}

/* One action, as the machine asked. */
static void perform(agent_group *group, const agent_action *a, step_context *ctx)
{
    switch (a->kind) {
    case AGENT_ACT_BEGIN_RENDEZVOUS: group->clock.rendezvous_started_ms = elastic__now_ms(); break;
    case AGENT_ACT_ASK_HEALTH_GATE: ask_health_gate(group, ctx); break;
    case AGENT_ACT_JOIN: join(group); break;
    case AGENT_ACT_GENERATION_FORMED:
        generation_formed(group, agent__next_call_of(ctx->call), a->wait_spare);
        break;
    case AGENT_ACT_START_WAITING: agent__workers_start_waiting(group); break;
    case AGENT_ACT_ADOPT_RESULT: group->current = agent__next_call_of(ctx->call)->result; break;
    case AGENT_ACT_FAILURE: failure_noted(group, ctx, a->keep_worker); break;
    case AGENT_ACT_REPORT_FAILURE: failure_reported(group, ctx); break;
    case AGENT_ACT_CLASSIFY: classify(group, ctx); break;
    case AGENT_ACT_CLASSIFY_LATE: classify_late(group, ctx); break;
    case AGENT_ACT_GENERATION_ENDED: generation_ended(group, ctx->cause); break;
    case AGENT_ACT_STOP_WORKERS: stop_workers(group, a->stop_reason); break;
    case AGENT_ACT_KILL_WORKERS: agent__workers_signal(group, SIGKILL, true); break;
    case AGENT_ACT_KEEP_SURVIVOR:
        if (ctx->worker->survivor) ctx->worker->abort_acked = true;
        break;
    case AGENT_ACT_GENERATION_STOPPED: generation_stopped(group); break;
    case AGENT_ACT_FENCED: fenced(group, ctx->cause); break;
    case AGENT_ACT_HOLD_CHANGE: group->held_change = *ctx->cause; break;
    case AGENT_ACT_REPLAY_CHANGE: replay_change(group); break;
    case AGENT_ACT_STEP_ASIDE_UNHEALTHY: agent__health_step_aside(group, ctx->reason); break;
    case AGENT_ACT_STEP_ASIDE_DIVERGED: agent__health_step_aside(group, ctx->reason); break;
    case AGENT_ACT_NO_FAILURE: group->clock.failure_ms = 0; break;
    case AGENT_ACT_QUARANTINE:
        agent__quarantine_start(group, a->quarantine_ms);
        break;
    case AGENT_ACT_QUARANTINE_ENDED: {
        ELASTIC_LOG_I("agent", "quarantine over: rejoining the job as a waiting node");
        agent__ev_quarantine_ended(group->job.events, group->current.generation);
        break;
    }
    case AGENT_ACT_STOP_QUARANTINE_TIMER: agent__quarantine_stop(group); break;
    case AGENT_ACT_SAY_UNHEALTHY: say_unhealthy(group, ctx->reason); break;
    case AGENT_ACT_SLURM_DRAIN_LOST: agent__slurm_drain_lost(group); break;
    case AGENT_ACT_SLURM_GIVE_UP: slurm_give_up(group, a->give_up); break;
    case AGENT_ACT_LOG_STOP_REQUEST:
        ELASTIC_LOG_I("agent", "stop requested (signal %d)", group->m.stop_signal);
        break;
    case AGENT_ACT_BEGIN_ENDING:
        write_summary(group, a->summary, ctx);
        agent__spares_stop(group);
        agent__prestart_stop(group);
        uv_timer_stop(&group->grace_timer);
        agent__call_post(group, ending_call(group, a, ctx));
        break;
    case AGENT_ACT_END_NOW:
        write_summary(group, a->summary, ctx);
        agent__spares_stop(group);
        agent__prestart_stop(group);
        uv_timer_stop(&group->grace_timer);
        emit_job_end(group, a->status);
        break;
    case AGENT_ACT_KINDS: break;
    }
}

/* One input through the machine, then its actions in order. */
static void step(agent_group *group, const agent_input *in, step_context *ctx)
{
    agent_actions actions;
    agent__machine_step(&group->m, in, &actions);
    for (int i = 0; i < actions.count; i++) perform(group, &actions.at[i], ctx);
    /* A failure's "restarting" line, held while the stop settles (failure_say.c). */
    if (group->m.state != AGENT_STOPPING) agent__failure_say_pending(group);
}

void agent__group_store_lost(agent_group *group, const char *why)
{
    if (group->losses.store_lost_wall_ms != 0) return;
    group->losses.store_lost_wall_ms = elastic__wall_ms();
    snprintf(group->losses.store_lost_reason, sizeof group->losses.store_lost_reason, "%s", why);
}

void agent__group_tell(agent_group *group, agent_input_kind kind)
{
    step(group, &(agent_input){ .kind = kind }, &(step_context){ 0 });
}

/* ---- events into inputs ------------------------------------------------------------------- */

/* Each reaped worker, in rank order, whatever the state. */
static void on_worker_exit(agent_group *group, agent_worker *worker, int streams_closing)
{
    agent__ev_worker_exited(group->job.events,
                            &(agent_ev_worker_exited){
                                .worker = agent__ev_worker_of(group, worker),
                                .exit_code = worker->exit_code,
                                .signal = worker->term_signal,
                                .runtime_ms = (int64_t)(elastic__now_ms() - worker->started_ms) });
    char reason[128];
    if (worker->oom_killed) /* its SIGKILL was the OOM killer's (workers.c saw a witness) */
        snprintf(reason, sizeof reason, "%s", AGENT_OOM_REASON);
    else if (worker->term_signal != 0)
        agent__describe_exit(-1, worker->term_signal, reason, sizeof reason);
    else
        snprintf(reason, sizeof reason, "exited with code %d", worker->exit_code);
    /* Ended by a stop signal: whether it had raised an error of its own
     * first (its words are read only when the machine will ask). */
    bool stop_signal = worker->term_signal == SIGTERM || worker->term_signal == SIGKILL ||
                       worker->exit_code == 128 + SIGTERM || worker->exit_code == 128 + SIGKILL;
    bool ask = stop_signal && agent__machine_reads_raised(&group->m);
    agent_input in = { .kind = AGENT_IN_WORKER_EXITED,
                       .exit_code = worker->exit_code,
                       .term_signal = worker->term_signal,
                       .raised = ask && agent__failure_raised(worker),
                       .streams_closing = streams_closing };
    step_context ctx = { .worker = worker,
                         .reason = reason,
                         .exit_code = worker->exit_code,
                         .term_signal = worker->term_signal };
    step(group, &in, &ctx);
}

/* The health module's newest report, as the machine's HEALTH input. */
static void on_health(agent_group *group)
{
    agent_health_news news;
    if (!agent__health_take(group, &news)) return;
    agent_input in = { .kind = AGENT_IN_HEALTH, .gate_done = news.gate_done, .fatal = news.fatal };
    step(group, &in, &(step_context){ .reason = news.reason });
}

/* A call back: its own done applies the result and makes the machine's input. */
static void on_call_done(agent_group *group, agent_call *call)
{
    agent_input in = { .kind = AGENT_IN_CALL_DONE, .call_kind = call->kind, .rc = call->rc };
    call->type->done(group, call, &in);
    /* In a recovery, a dead slot no parked spare fills may wait for a starting one. */
    if (call->kind == AGENT_CALL_NEXT && in.rc == 0 && agent__phases_recovering(group, NULL))
        agent__spares_count(group, &in.spares_parked, &in.spares_starting);
    step(group, &in, &(step_context){ .call = call });
}

/* One event from the queue. */
static void on_event(agent_group *group, const agent_group_event *ev)
{
    agent_input in = { 0 };
    step_context ctx = { .worker = ev->worker,
                         .reason = ev->reason,
                         .exit_code = ev->exit_code,
                         .term_signal = ev->term_signal };
    switch (ev->kind) {
    case AGENT_GROUP_CHILDREN_EXITED:
        agent__workers_reap(group, on_worker_exit); /* each exit by the state it finds */
        agent__spares_reap(group);
        return;
    case AGENT_GROUP_HEALTH: on_health(group); return;
    case AGENT_GROUP_CALL_DONE: on_call_done(group, ev->call); return;
    case AGENT_GROUP_STREAM_CLOSED: in.kind = AGENT_IN_STREAM_CLOSED; break;
    case AGENT_GROUP_GRACE_EXPIRED:
        ELASTIC_LOG_W("agent", "workers still alive %d ms after SIGTERM: SIGKILL",
                      group->job.opts->grace_period_ms);
        in.kind = AGENT_IN_GRACE_EXPIRED;
        break;
    case AGENT_GROUP_WORKER_UNHEALTHY:
        in = (agent_input){ .kind = AGENT_IN_WORKER_UNHEALTHY,
                            .exit_code = ev->exit_code,
                            .term_signal = ev->term_signal };
        break;
    case AGENT_GROUP_WORKER_FAULTED:
        in.kind = AGENT_IN_WORKER_FAULTED;
        ctx.exit_code = -1, ctx.term_signal = 0;
        break;
    case AGENT_GROUP_ABORT_ACKED: in.kind = AGENT_IN_ABORT_ACKED; break;
    case AGENT_GROUP_MEMBERSHIP_CHANGE:
        in = change_input(group, &ev->cause);
        ctx.cause = &ev->cause;
        break;
    case AGENT_GROUP_STOP_REQUEST:
        in = (agent_input){ .kind = AGENT_IN_STOP_REQUEST, .signum = ev->signum };
        break;
    case AGENT_GROUP_EVICTED:
        in = (agent_input){ .kind = AGENT_IN_EVICTED, .unhealthy = ev->unhealthy };
        break;
    case AGENT_GROUP_QUARANTINE_OVER: in.kind = AGENT_IN_QUARANTINE_OVER; break;
    case AGENT_GROUP_DIVERGED:
        in = (agent_input){ .kind = AGENT_IN_DIVERGED,
                            .minority = ev->minority,
                            .no_majority = ev->no_majority,
                            .warn = ev->warn };
        break;
    }
    step(group, &in, &ctx);
}

/* After each event: is a stopping generation over? */
static void settle(agent_group *group)
{
    agent_input in = { .kind = AGENT_IN_SETTLED, .kept = agent__inprocess_kept(group) };
    step(group, &in, &(step_context){ 0 });
}

/* ---- the queue ---------------------------------------------------------------------------- */

static void free_event(agent_group_event *ev)
{
    if (ev->kind == AGENT_GROUP_CALL_DONE) agent__call_free(ev->call);
    free(ev);
}

static void enqueue(agent_group *group, agent_group_event *ev)
{
    ev->next = NULL;
    if (group->queue.pending_tail != NULL)
        group->queue.pending_tail->next = ev;
    else
        group->queue.pending = ev;
    group->queue.pending_tail = ev;
}

static agent_group_event *copy_event(const agent_group_event *event)
{
    agent_group_event *ev = malloc(sizeof *ev);
    if (ev == NULL) {
        ELASTIC_LOG_E("agent", "out of memory posting an event (%d)", (int)event->kind);
        return NULL;
    }
    *ev = *event;
    return ev;
}

/* What the machine's own handling of one event posted (a worker that could
 * not start, an eviction accepted) goes first, in the order posted: it is
 * the consequence of that event, as if it had been handled inline, but only
 * once the transition that caused it is complete. */
static void take_nested(agent_group *group)
{
    if (group->queue.nested == NULL) return;
    group->queue.nested_tail->next = group->queue.pending;
    if (group->queue.pending == NULL) group->queue.pending_tail = group->queue.nested_tail;
    group->queue.pending = group->queue.nested;
    group->queue.nested = group->queue.nested_tail = NULL;
}

/* Runs the queue to empty, one event at a time, each followed by the stopped check. */
static void drain(agent_group *group)
{
    if (group->queue.draining) return;
    group->queue.draining = true;
    take_nested(group);
    while (group->queue.pending != NULL) {
        agent_group_event *ev = group->queue.pending;
        group->queue.pending = ev->next;
        if (group->queue.pending == NULL) group->queue.pending_tail = NULL;
        on_event(group, ev);
        free_event(ev);
        take_nested(group);
        settle(group);
        take_nested(group);
    }
    group->queue.draining = false;
}

void agent__group_post(agent_group *group, const agent_group_event *event)
{
    agent_group_event *ev = copy_event(event);
    if (ev == NULL) {
        if (event->kind == AGENT_GROUP_CALL_DONE) agent__call_free(event->call);
        return;
    }
    if (group->queue.draining) { /* from inside the machine: once the current event is handled */
        ev->next = NULL;
        if (group->queue.nested_tail != NULL)
            group->queue.nested_tail->next = ev;
        else
            group->queue.nested = ev;
        group->queue.nested_tail = ev;
        return;
    }
    enqueue(group, ev); /* from a loop callback: now */
    drain(group);
}

void agent__group_worker_unhealthy(agent_group *group, agent_worker *worker, const char *reason,
                                   int exit_code, int term_signal)
{
    agent_group_event ev = { .kind = AGENT_GROUP_WORKER_UNHEALTHY,
                             .worker = worker,
                             .exit_code = exit_code,
                             .term_signal = term_signal };
    snprintf(ev.reason, sizeof ev.reason, "%s", reason);
    agent__group_post(group, &ev);
}

void agent__group_worker_faulted(agent_group *group, agent_worker *worker, const char *reason)
{
    agent_group_event ev = { .kind = AGENT_GROUP_WORKER_FAULTED, .worker = worker };
    snprintf(ev.reason, sizeof ev.reason, "%s", reason);
    agent__group_post(group, &ev);
}

/* The wake async: what other threads posted joins the queue, the stop
 * request first, then the calls back (a formed generation first: a change
 * may be news about it), then the rest. */
static void on_wake(uv_async_t *handle)
{
    agent_group *group = handle->data;
    int signum = __atomic_exchange_n(&group->queue.pending_stop_signal, -1, __ATOMIC_ACQ_REL);
    if (signum >= 0) {
        agent_group_event *ev =
            copy_event(&(agent_group_event){ .kind = AGENT_GROUP_STOP_REQUEST, .signum = signum });
        if (ev != NULL) enqueue(group, ev);
    }
    agent_call *done = agent__calls_take_done(group);
    while (done != NULL) {
        agent_call *next = done->next;
        agent_group_event *ev =
            copy_event(&(agent_group_event){ .kind = AGENT_GROUP_CALL_DONE, .call = done });
        if (ev != NULL)
            enqueue(group, ev);
        else
            agent__call_free(done);
        done = next;
    }
    pthread_mutex_lock(&group->queue.lock);
    agent_group_event *posted = group->queue.posted;
    group->queue.posted = group->queue.posted_tail = NULL;
    pthread_mutex_unlock(&group->queue.lock);
    while (posted != NULL) {
        agent_group_event *next = posted->next;
        enqueue(group, posted);
        posted = next;
    }
    drain(group);
}

/* Any thread. A newer change replaces one not looked at yet (the latest news counts). */
void agent__group_on_change(void *user, const elastic_rdzv_cause *cause)
{
    agent_group *group = user;
    pthread_mutex_lock(&group->queue.lock);
    agent_group_event *ev = NULL;
    for (agent_group_event *at = group->queue.posted; at != NULL && ev == NULL; at = at->next)
        if (at->kind == AGENT_GROUP_MEMBERSHIP_CHANGE) ev = at;
    if (ev == NULL && (ev = calloc(1, sizeof *ev)) != NULL) {
        ev->kind = AGENT_GROUP_MEMBERSHIP_CHANGE;
        if (group->queue.posted_tail != NULL)
            group->queue.posted_tail->next = ev;
        else
            group->queue.posted = ev;
        group->queue.posted_tail = ev;
    }
    if (ev != NULL) ev->cause = *cause;
    /* Sent under the lock: the loop closes the async only after marking it
     * closed under the same lock (libuv aborts on a send to a closed one).
     * A fence can come after the job ended here, the rendezvous' guard
     * still running; nobody listens then. */
    if (!group->queue.wake_closed) uv_async_send(&group->queue.wake);
    pthread_mutex_unlock(&group->queue.lock);
    if (ev == NULL) ELASTIC_LOG_E("agent", "out of memory: membership news dropped");
}

void agent__group_post_from_thread(agent_group *group, agent_group_event_kind kind)
{
    agent_group_event *ev = calloc(1, sizeof *ev);
    if (ev == NULL) {
        ELASTIC_LOG_E("agent", "out of memory posting an event (%d)", (int)kind);
        return;
    }
    ev->kind = kind;
    pthread_mutex_lock(&group->queue.lock);
    if (group->queue.posted_tail != NULL)
        group->queue.posted_tail->next = ev;
    else
        group->queue.posted = ev;
    group->queue.posted_tail = ev;
    pthread_mutex_unlock(&group->queue.lock);
    uv_async_send(&group->queue.wake);
}

void agent__group_request_stop(agent_group *group, int signum)
{
    __atomic_store_n(&group->queue.pending_stop_signal, signum > 0 ? signum : 0, __ATOMIC_RELEASE);
    __atomic_add_fetch(&group->queue.stop_requests, 1, __ATOMIC_ACQ_REL);
    uv_async_send(&group->queue.wake);
}

/* ---- life cycle ------------------------------------------------------------------------------ */

int agent__group_init(agent_group *group, uv_loop_t *loop)
{
    group->loop = loop;
    group->queue.pending_stop_signal = -1;
    agent__machine_init(&group->m);
    group->unhealthy.local_rank = -1;
    int rc = pthread_mutex_init(&group->queue.lock, NULL);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "mutex: %s", strerror(rc));
    if ((rc = agent__reaper_init(group)) != 0) return rc;
    if ((rc = agent__slurm_init(group)) != 0) return rc;
    if ((rc = agent__node_stats_init(group)) != 0) return rc;
    if ((rc = agent__memory_init(group)) != 0) return rc;
    if ((rc = agent__probes_init(group)) != 0) return rc;
    if ((rc = agent__goodput_init(group)) != 0) return rc;
    if ((rc = agent__inprocess_init(group)) != 0) return rc;
    if ((rc = agent__phases_init(group)) != 0) return rc;
    if ((rc = agent__exits_init(group)) != 0 ||
        (rc = uv_timer_init(loop, &group->grace_timer)) != 0 ||
        (rc = uv_async_init(loop, &group->queue.wake, on_wake)) != 0)
        return elastic__fail(ELASTIC_ESYS, "agent loop: %s", uv_strerror(rc));
    group->grace_timer.data = group->queue.wake.data = group;
    if ((rc = agent__quarantine_init(group)) != 0) return rc;
    if ((rc = agent__spares_init(group)) != 0) return rc;
    if ((rc = agent__prestart_init(group)) != 0) return rc;
    return agent__waiting_init(group);
}

void agent__group_start(agent_group *group)
{
    group->clock.started_ms = elastic__now_ms();
    group->queue.draining = true; /* the first call may come back inline (in-memory membership) */
    step(group,
         &(agent_input){ .kind = AGENT_IN_START,
                         .quarantine_ms = group->job.opts->straggler_quarantine_ms },
         &(step_context){ 0 });
    group->queue.draining = false;
    drain(group);
}

bool agent__group_close(agent_group *group)
{
    agent__spares_close(group);
    agent__prestart_close(group);
    agent__exits_close(group);
    agent__reaper_unwatch(group);
    uv_close((uv_handle_t *)&group->grace_timer, NULL);
    pthread_mutex_lock(&group->queue.lock); /* no thread sends to the wake async from now on */
    group->queue.wake_closed = true;
    pthread_mutex_unlock(&group->queue.lock);
    uv_close((uv_handle_t *)&group->queue.wake, NULL);
    agent__inprocess_close(group);
    agent__quarantine_close(group);
    agent__waiting_close(group);
    /* A rendezvous or store call cannot be interrupted: its thread keeps
     * using the group until it returns. The process is about to exit; our
     * lease ends with it, so the other nodes re-form without us. */
    return agent__calls_stop(group);
}

void agent__group_destroy(agent_group *group)
{
    agent__memory_destroy(group);
    agent__probes_destroy(group);
    agent__goodput_destroy(group);
    agent__inprocess_destroy(group);
    agent__phases_destroy(group);
    take_nested(group);
    while (group->queue.pending != NULL) {
        agent_group_event *next = group->queue.pending->next;
        free_event(group->queue.pending);
        group->queue.pending = next;
    }
    while (group->queue.posted != NULL) {
        agent_group_event *next = group->queue.posted->next;
        free(group->queue.posted);
        group->queue.posted = next;
    }
    free(group->workers);
    group->workers = NULL;
    agent__divergence_free(group);
    agent__failures_free(group);
    agent__spares_destroy(group);
    agent__prestart_destroy(group);
    agent__reaper_destroy(group);
    agent__slurm_destroy(group);
    agent__node_stats_destroy(group);
    pthread_mutex_destroy(&group->queue.lock);
}
