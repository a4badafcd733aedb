/*
 * The worker group's state machine, on the agent's loop thread. Everything
 * else reports to it through one queue of events (agent__group_post): worker
 * exits (their pidfds, never polling), probes, output streams, timers, calls
 * back from the calls thread, membership news and stop requests from other
 * threads (those through `wake`). The queue is drained in order, one event
 * at a time, by on_event(): one switch per state. A transition that makes a
 * helper post (starting workers in generation_formed) finishes before that
 * event is looked at: nothing re-enters the machine. After each event the one
 * "every worker stopped" check runs (check_stopped).
 *
 *   IDLE --start--> RENDEZVOUS --formed--> RUNNING --all exited 0: finish--> ENDING --> DONE
 *                    ^    |                   |                                  ^
 *                    |    +-- failed: summary-|----------------------------------+
 *                    |                        | a local worker unhealthy, the    |
 *                    |                        | generation ended elsewhere,      |
 *                    |                        | SIGTERM/SIGINT, evicted          |
 *                    |                        v                                  |
 *                    +------ restart ----- STOPPING ------ shutdown: leave ------+
 *                    |                        | evicted (quarantine 0: DONE)
 *                    +------ timer ------ QUARANTINED
 *
 * (A stop request in RENDEZVOUS or QUARANTINED ends at once: DONE.)
 *
 * ENDING: the job is over here and its last store call (finish, leave, the
 * summary) is in flight; DONE follows when it is back. docs/ARCHITECTURE.md
 * has the full table (state x event -> action, next state).
 */
#include "agent/group.h"
#include "agent/memory.h"

#include "agent/console.h"
#include "agent/generation_store.h"
#include "agent/health.h"
#include "agent/journal.h"
#include "agent/probes.h"
#include "agent/reaper.h"
#include "agent/slurm.h"
#include "agent/spares.h"
#include "agent/summary.h"
#include "agent/waiting.h"
#include "agent/workers.h"
#include "common/clock.h"
#include "rdzv/rdzv.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

/* clang-format off */
static const char *const end_status_names[] = {
    [AGENT_END_SUCCEEDED] = "succeeded",
    [AGENT_END_FAILED] = "failed",
    [AGENT_END_STOPPED] = "stopped",
    [AGENT_END_EVICTED] = "evicted",
    [AGENT_END_UNHEALTHY] = "unhealthy",
    [AGENT_END_LEFT_OUT] = "left_out",
};
/* clang-format on */

const char *agent__end_status_name(agent_end_status status)
{
    return (unsigned)status < sizeof end_status_names / sizeof *end_status_names
               ? end_status_names[status]
               : "unknown";
}

bool agent__group_is_running(const agent_group *group)
{
    return group->state == AGENT_RUNNING;
}
bool agent__group_is_stopping(const agent_group *group)
{
    return group->state == AGENT_STOPPING;
}
bool agent__group_in_rendezvous(const agent_group *group)
{
    return group->state == AGENT_RENDEZVOUS;
}
bool agent__group_is_done(const agent_group *group)
{
    return group->state == AGENT_DONE;
}

static void begin_rendezvous(agent_group *group);

/* ---- endings ------------------------------------------------------------------- */

static void emit_job_end(agent_group *group, agent_end_status status)
{
    agent__goodput_generation_ended(group); /* a last generation that ended well */
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_JOB_END);
    agent__event_str(&event, "status", agent__end_status_name(status));
    agent__event_int(&event, "exit_code", group->exit_code);
    agent__event_int(&event, "generations", (int64_t)group->generations);
    agent__event_int(&event, "duration_ms", (int64_t)(elastic__now_ms() - group->started_ms));
    agent__event_int(&event, "restarts", group->current.restart_count);
    agent__event_int(&event, "lost_ms", (int64_t)group->lost_ms);
    agent__event_emit(group->events, &event);
    agent__console_job_end(group, status);
}

/* -> DONE: the job ended for this node. */
static void end_now(agent_group *group, int exit_code, agent_end_status status)
{
    agent__spares_stop(group);
    group->state = AGENT_DONE;
    group->exit_code = exit_code;
    uv_timer_stop(&group->grace_timer);
    emit_job_end(group, status);
}

/* -> ENDING: the job is over here; DONE follows when `call` (its last) is back. */
static void begin_ending(agent_group *group, int exit_code, agent_end_status status,
                         agent_call *call)
{
    agent__spares_stop(group);
    group->state = AGENT_ENDING;
    group->ending_exit_code = exit_code;
    group->ending_status = status;
    group->ending_call = call != NULL ? call->kind : AGENT_CALL_LEAVE;
    uv_timer_stop(&group->grace_timer);
    agent__call_post(group, call);
}

static void finish_shutdown(agent_group *group)
{
    snprintf(group->summary, sizeof group->summary, "stopped by signal %d (%s)", group->stop_signal,
             group->stop_signal > 0 ? strsignal(group->stop_signal) : "request");
    if (group->fenced_wall_ms != 0 &&
        group->state != AGENT_RUNNING) { /* no member: nothing to leave */
        end_now(group, 128 + group->stop_signal, AGENT_END_STOPPED);
        return;
    }
    begin_ending(group, 128 + group->stop_signal, AGENT_END_STOPPED,
                 agent__call_new(AGENT_CALL_LEAVE));
}

/* ---- stopping ------------------------------------------------------------------- */

static void on_grace_expired(uv_timer_t *timer)
{
    agent__group_post(timer->data, &(agent_group_event){ .kind = AGENT_GROUP_GRACE_EXPIRED });
}

/* -> STOPPING: SIGTERM to every worker's process group, SIGKILL after the grace period. */
static void stop_workers(agent_group *group, agent_stop_reason reason)
{
    group->state = AGENT_STOPPING;
    group->stop_reason = reason;
    group->stop_started_ms = elastic__now_ms();
    if (group->monitor != NULL) probe__monitor_pause(group->monitor);
    bool in_process =
        reason == AGENT_STOP_FOR_RESTART &&
        agent__inprocess_stop(group, group->unhealthy_local_rank, group->unhealthy_reason);
    if (in_process) {
        group->inprocess_failure_ms = group->failure_ms;
    } else {
        if (reason == AGENT_STOP_FOR_SHUTDOWN) agent__workers_notice(group);
        agent__workers_signal(group, SIGTERM);
    }
    if (group->running > 0)
        uv_timer_start(&group->grace_timer, on_grace_expired,
                       (uint64_t)group->opts->grace_period_ms, 0);
}

static void on_quarantine_over(uv_timer_t *timer)
{
    agent__group_post(timer->data, &(agent_group_event){ .kind = AGENT_GROUP_QUARANTINE_OVER });
}

/* -> QUARANTINED (an evicted straggler, or a node a fatal health check made
 * step aside), or DONE when the quarantine is 0. */
static void begin_quarantine(agent_group *group)
{
    int ms = group->opts->straggler_quarantine_ms;
    if (ms <= 0) { /* out for good; counted gone already: nothing to leave */
        if (group->stepped_aside_unhealthy) {
            snprintf(group->summary, sizeof group->summary,
                     "unhealthy: stepped aside and left (%s)", agent__health_reason(group));
            end_now(group, 1, AGENT_END_UNHEALTHY);
            return;
        }
        snprintf(group->summary, sizeof group->summary, "evicted as the job's straggler: left");
        end_now(group, 0, AGENT_END_EVICTED);
        return;
    }
    group->health_recheck = true; /* its way back in starts with a fresh health round */
    group->state = AGENT_QUARANTINED;
    uv_timer_start(&group->quarantine_timer, on_quarantine_over, (uint64_t)ms, 0);
}

/* THE "every worker stopped" check, run after each event: every worker is
 * reaped (but those in-process recovery keeps) and its output drained, so
 * the generation is over here. */
static void check_stopped(agent_group *group)
{
    if (group->state != AGENT_STOPPING || group->running > agent__inprocess_kept(group) ||
        group->closing_streams > 0)
        return;
    uv_timer_stop(&group->grace_timer);
    uv_timer_stop(&group->ack_timer);
    agent__workers_signal(group, SIGKILL); /* grandchildren left in the workers' process groups */
    agent__goodput_generation_ended(group);
    agent__phases_stopped(group);
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_GENERATION_STOPPED);
    agent__event_int(&event, "generation", (int64_t)group->current.generation);
    agent__event_int(&event, "stop_ms", (int64_t)(elastic__now_ms() - group->stop_started_ms));
    agent__event_emit(group->events, &event);
    switch (group->stop_reason) {
    case AGENT_STOP_FOR_SHUTDOWN: finish_shutdown(group); break;
    case AGENT_STOP_FOR_QUARANTINE: begin_quarantine(group); break;
    default: begin_rendezvous(group); break;
    }
}

/* ---- the single place a local worker is declared unhealthy ---------------------- */

/* RUNNING -> STOPPING for a local worker's failure: stops the local workers
 * and ends the generation for every node with this cause (a failure: it
 * consumes the restart budget). keep_worker: its library found the group
 * broken while the process is fine (in-process recovery keeps it). */
static void end_generation_for(agent_group *group, agent_worker *worker, const char *reason,
                               int exit_code, int term_signal, bool keep_worker)
{
    group->failure_ms = elastic__now_ms();
    elastic_rdzv_cause cause = { .struct_size = sizeof cause,
                                 .kind = ELASTIC_RDZV_FAILURE,
                                 .generation = group->current.generation,
                                 .rank = worker->rank,
                                 .exit_code = exit_code,
                                 .signal = term_signal,
                                 .time_ms = elastic__wall_ms() };
    snprintf(cause.node_id, sizeof cause.node_id, "%s", group->node_id);
    snprintf(cause.reason, sizeof cause.reason, "%s", reason);
    /* The generation's store host died and the worker died of it: a lost
     * node, not a failure of ours (it costs no budget). */
    if (agent__jobstore_lost(group->jobstore, group->current.generation)) {
        cause.kind =
            ELASTIC_RDZV_NODE_LOST; /* named by its address: never this node, which is no loss */
        snprintf(cause.node_id, sizeof cause.node_id, "%.127s", group->current.master_addr);
        snprintf(cause.reason, sizeof cause.reason, "job store host lost (rank %d: %.150s)",
                 worker->rank, reason);
    }
    agent__phases_failure(group, keep_worker ? NULL : worker);
    group->unhealthy_local_rank = keep_worker ? -1 : worker->local_rank;
    group->health_recheck = true; /* a failure here: checked before this node rejoins */
    snprintf(group->unhealthy_reason, sizeof group->unhealthy_reason, "rank %d: %s", worker->rank,
             reason);
    /* Workers first: every millisecond here is a millisecond of recovery. The
     * next rendezvous waits (check_stopped) until the generation ended. */
    stop_workers(group, AGENT_STOP_FOR_RESTART);
    agent__failure_record(group, worker, &cause); /* locally first: the store may be gone */
    agent__console_failure(group, worker, &cause);
    agent_event event;
    agent__event_worker(&event, group, AGENT_EVENT_FAILURE, worker);
    agent__event_int(&event, "exit_code", exit_code);
    agent__event_int(&event, "signal", term_signal);
    agent__event_str(&event, "reason", reason);
    agent__event_emit(group->events, &event);
    /* The store calls run off the loop, in order: the end precedes the next rendezvous. */
    agent__failure_share(group, &cause);
    agent_call *end = agent__call_new(AGENT_CALL_END);
    if (end != NULL) end->cause = cause;
    agent__call_post(group, end);
}

/* ---- worker exits ------------------------------------------------------------------ */

/* Each reaped worker, in rank order, in whichever state the group is. */
static void on_worker_exit(agent_group *group, agent_worker *worker)
{
    agent_event event;
    agent__event_worker(&event, group, AGENT_EVENT_WORKER_EXITED, worker);
    agent__event_int(&event, "exit_code", worker->exit_code);
    agent__event_int(&event, "signal", worker->term_signal);
    agent__event_int(&event, "runtime_ms", (int64_t)(elastic__now_ms() - worker->started_ms));
    agent__event_emit(group->events, &event);
    if (group->state != AGENT_RUNNING) return;
    if (worker->exit_code == 0) {
        if (++group->succeeded < group->nworkers) return;
        begin_ending(group, 0, AGENT_END_SUCCEEDED, agent__call_new(AGENT_CALL_FINISH));
        return;
    }
    char reason[128];
    if (worker->term_signal != 0)
        agent__describe_exit(-1, worker->term_signal, reason, sizeof reason);
    else
        snprintf(reason, sizeof reason, "exited with code %d", worker->exit_code);
    end_generation_for(group, worker, reason, worker->exit_code, worker->term_signal, false);
    /* A crash loop is this node's: at least 3 of the job's failures, and most
     * of them (a bug that crashes every node is no reason to drain one). */
    int job_failures = group->current.restart_count + 1;
    if (++group->local_failures >= AGENT_GIVE_UP_FAILURES &&
        2 * group->local_failures > job_failures) {
        char why[256];
        snprintf(why, sizeof why,
                 "crash loop: %d worker failures on this node (last: rank %d %.100s)",
                 group->local_failures, worker->rank, reason);
        agent__slurm_give_up(group, why);
    }
}

/* ---- rendezvous ---------------------------------------------------------------------- */

/* RENDEZVOUS -> RUNNING. */
static void generation_formed(agent_group *group, const elastic_rdzv_result *result)
{
    group->current = *result;
    group->generations++;
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_GENERATION_FORMED);
    agent__event_int(&event, "generation", (int64_t)result->generation);
    agent__event_int(&event, "group_rank", result->group_rank);
    agent__event_int(&event, "group_world_size", result->group_world_size);
    agent__event_int(&event, "rank_base", result->rank_base);
    agent__event_int(&event, "local_world_size", result->local_world_size);
    agent__event_int(&event, "world_size", result->world_size);
    agent__event_int(&event, "restart_count", result->restart_count);
    agent__event_int(&event, "rendezvous_ms",
                     (int64_t)(elastic__now_ms() - group->rendezvous_started_ms));
    agent__event_emit(group->events, &event);
    group->state = AGENT_RUNNING;
    group->succeeded = 0;
    group->rejoining = group->stepped_aside_unhealthy = false;
    group->evict_refused_logged = false;
    agent__probes_generation_started(group);
    agent__phases_formed(group);
    if (agent__workers_start(group) != 0)
        return; /* a worker that could not start is posted as unhealthy: handled next */
    agent__spares_fill(group); /* the first ones; after a recovery, once it is over */
    if (group->failure_ms != 0 && group->monitor != NULL && group->reconfiguring == 0)
        probe__monitor_record_recovery(
            group->monitor, (double)(elastic__now_ms() - group->failure_ms) / 1000.0, false);
    if (group->failure_ms != 0) {
        uint64_t recovery_ms = elastic__now_ms() - group->failure_ms;
        agent__event_begin(&event, group->events, AGENT_EVENT_RESTARTED);
        agent__event_int(&event, "generation", (int64_t)result->generation);
        agent__event_int(&event, "recovery_ms", (int64_t)recovery_ms);
        agent__event_emit(group->events, &event);
        group->lost_ms += recovery_ms;
        agent__console_running_again(group, recovery_ms);
        group->failure_ms = 0;
    }
}

/* RENDEZVOUS x next() back: RUNNING, or the job ends here. */
static void rendezvous_finished(agent_group *group, agent_call *call)
{
    if (group->stop_signal != 0) { /* SIGTERM arrived while we waited */
        if (call->rc == 0) group->current = call->result;
        finish_shutdown(group);
        return;
    }
    if (call->rc == 0) {
        agent__memory_apply(group, call);
        generation_formed(group, &call->result);
        return;
    }
    /* Every member of the job's last generation finished while we waited (a
     * spare, or a fenced node rejoining): the job succeeded; we were not needed. */
    if (call->rc == ELASTIC_ECLOSED && call->closed_known && !call->closed_budget &&
        rdzv__cause_is_finished(&call->closed)) {
        snprintf(group->summary, sizeof group->summary,
                 "left out as a spare: the job succeeded without this node (every node of "
                 "generation %llu finished)",
                 (unsigned long long)call->closed.generation);
        end_now(group, 0, AGENT_END_LEFT_OUT); /* closed: no round to leave */
        return;
    }
    /* Too few nodes is its own code: under Slurm the recipe requeues on it,
     * and the lost nodes are drained first so the requeue cannot land on one. */
    if (call->rc == ELASTIC_ENOTENOUGH) agent__slurm_drain_lost(group);
    agent_call *summary = agent__summary_call(group, call->rc, call->error);
    if (summary != NULL) {
        summary->closed_known = call->closed_known;
        summary->closed_budget = call->closed_budget;
        summary->closed = call->closed;
    }
    begin_ending(group, call->rc == ELASTIC_ENOTENOUGH ? AGENT_EXIT_TOO_FEW_NODES : 1,
                 AGENT_END_FAILED, summary);
}

/* RENDEZVOUS, cleared to join: the next() call. */
static void join_rendezvous(agent_group *group)
{
    group->health_gating = group->health_recheck = false;
    agent__waiting_start(group);
    agent_call *next = agent__call_new(AGENT_CALL_NEXT);
    if (next != NULL) next->jobstore = group->jobstore;
    agent__call_post(group, next);
}

/* RENDEZVOUS -> DONE/ENDING: a fatal health check before joining; the node
 * does not join and says why. A member of the last generation leaves, so
 * that the others do not wait for it; a node that never joined or comes out
 * of a quarantine is counted gone already. */
static void end_unhealthy(agent_group *group, const char *reason)
{
    group->health_gating = false;
    snprintf(group->summary, sizeof group->summary, "unhealthy, did not join: %s", reason);
    agent__console(group, "node %s does not join the job: unhealthy (%s)", group->node_id, reason);
    if (group->generations == 0 || group->rejoining) {
        end_now(group, 1, AGENT_END_UNHEALTHY);
        return;
    }
    begin_ending(group, 1, AGENT_END_UNHEALTHY, agent__call_new(AGENT_CALL_LEAVE));
}

/* -> RENDEZVOUS; after the start, a local failure or a quarantine the join
 * first waits for a fresh round of health checks (docs/HEALTH.md). */
static void begin_rendezvous(agent_group *group)
{
    group->state = AGENT_RENDEZVOUS;
    group->rendezvous_started_ms = elastic__now_ms();
    if (group->health_recheck) {
        char reason[300];
        switch (agent__health_gate(group, reason, sizeof reason)) {
        case AGENT_HEALTH_WAIT: group->health_gating = true; return; /* AGENT_GROUP_HEALTH */
        case AGENT_HEALTH_STOP: end_unhealthy(group, reason); return;
        case AGENT_HEALTH_GO: break;
        }
    }
    join_rendezvous(group);
}

/* Any state: a round of health checks is in. Before joining it decides the
 * join; while running a fatal verdict makes this node step aside. */
static void health_report(agent_group *group)
{
    agent_health_news news;
    if (!agent__health_take(group, &news)) return;
    if (group->state == AGENT_RENDEZVOUS && group->health_gating) {
        if (!news.gate_done) return;
        if (news.fatal)
            end_unhealthy(group, news.reason);
        else
            join_rendezvous(group);
        return;
    }
    if (news.fatal && group->state == AGENT_RUNNING) agent__health_step_aside(group, news.reason);
}

/* Any state: what a call's result changes whatever the state (the loop
 * applies it; the calls thread only wrote the call). */
static void apply_call(agent_group *group, agent_call *call)
{
    if (call->rc != 0 && call->kind != AGENT_CALL_NEXT && call->kind != AGENT_CALL_SLURM_DRAIN)
        ELASTIC_LOG_W("agent", "%s: %s (%s)",
                      call->kind == AGENT_CALL_END          ? "ending the generation"
                      : call->kind == AGENT_CALL_FINISH     ? "finishing"
                      : call->kind == AGENT_CALL_LEAVE      ? "leaving the rendezvous"
                      : call->kind == AGENT_CALL_NODE_STATS ? "exchanging straggler statistics"
                      : call->kind == AGENT_CALL_EVICT && call->health ? "stepping aside, unhealthy"
                      : call->kind == AGENT_CALL_EVICT ? "stepping aside as a straggler"
                                                       : "sharing the failure's detail",
                      elastic_err_name(call->rc), call->error);
    /* The store did not answer the end of a generation: remembered, since
     * the rendezvous fails next for that reason (c10d: its host is gone). */
    if (call->kind == AGENT_CALL_END &&
        (call->rc == ELASTIC_ECONNECT || call->rc == ELASTIC_ETIMEDOUT) &&
        group->store_lost_wall_ms == 0) {
        group->store_lost_wall_ms = elastic__wall_ms();
        snprintf(group->store_lost_reason, sizeof group->store_lost_reason, "%s", call->error);
    }
    if (call->kind == AGENT_CALL_NEXT) {
        agent__waiting_stop(group);
        if (call->store_changed) { /* etcd: this generation's store replaces the last one */
            elastic_store_close(group->store);
            group->store = call->store;
            call->store = NULL;
            call->store_changed = false;
            snprintf(group->store_endpoint_buf, sizeof group->store_endpoint_buf, "%s",
                     call->endpoint);
            group->store_endpoint = group->store_endpoint_buf;
            if (call->token_file_changed) {
                snprintf(group->store_token_buf, sizeof group->store_token_buf, "%s",
                         call->token_file);
                group->store_token_file =
                    call->token_file[0] != '\0' ? group->store_token_buf : NULL;
            }
        }
    }
    if (call->kind == AGENT_CALL_SUMMARY)
        snprintf(group->summary, sizeof group->summary, "%s", call->summary);
    if (call->kind == AGENT_CALL_NODE_STATS) agent__node_stats_done(group, call);
    if (call->kind == AGENT_CALL_EVICT && !agent__health_evict_done(group, call))
        agent__node_evict_done(group, call);
    if (call->kind == AGENT_CALL_SLURM_DRAIN) agent__slurm_drain_done(group, call);
}

/* ---- news from other threads ------------------------------------------------------- */

/* This node lost its lease: it is no member of the generation any more. */
static void handle_fenced(agent_group *group, const elastic_rdzv_cause *cause)
{
    group->fenced_wall_ms = cause->time_ms != 0 ? cause->time_ms : elastic__wall_ms();
    snprintf(group->fenced_reason, sizeof group->fenced_reason, "%s", cause->reason);
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_FENCED);
    agent__event_int(&event, "generation", (int64_t)cause->generation);
    agent__event_int(&event, "running", group->running);
    agent__event_str(&event, "store", group->store_endpoint);
    agent__event_str(&event, "reason", cause->reason);
    agent__event_emit(group->events, &event);
    /* Said once, on the console; with --quiet the log still says it. */
    if (group->opts->quiet)
        ELASTIC_LOG_E("agent",
                      "fenced out of generation %llu (%s): killing %d local worker(s) now, then "
                      "rejoining as a new member",
                      (unsigned long long)cause->generation, cause->reason, group->running);
    agent__console_fenced(group, cause->generation, cause->reason, group->running);
    if (++group->fenced_count >= AGENT_GIVE_UP_FENCES) {
        char why[96];
        snprintf(why, sizeof why, "fenced %d times (lost its lease: node or network unreliable)",
                 group->fenced_count);
        agent__slurm_give_up(group, why);
    }
}

/* This node itself lost (FENCED, or named lost by the others): its lease
 * lapsed, so the others may already run without it. */
static bool is_fenced(const agent_group *group, const elastic_rdzv_cause *cause)
{
    return cause->kind == ELASTIC_RDZV_FENCED ||
           (cause->kind == ELASTIC_RDZV_NODE_LOST && strcmp(cause->node_id, group->node_id) == 0);
}

/* RUNNING x the generation ended elsewhere (or we were fenced) -> STOPPING. */
static void generation_ended(agent_group *group, const elastic_rdzv_cause *cause)
{
    bool fenced = is_fenced(group, cause);
    if (cause->generation != group->current.generation) return;
    /* Our own eviction, told by the rendezvous before the call is back: the
     * call's result stops the workers for the quarantine, not a restart. */
    if (group->evict_in_flight && cause->kind == ELASTIC_RDZV_NODE_LEFT &&
        strcmp(cause->node_id, group->node_id) == 0)
        return;
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_GENERATION_ENDED);
    agent__event_int(&event, "generation", (int64_t)cause->generation);
    agent__event_int(&event, "cause", cause->kind);
    agent__event_str(&event, "by_node", cause->node_id);
    agent__event_int(&event, "rank", cause->rank);
    agent__event_str(&event, "reason", cause->reason);
    agent__event_emit(group->events, &event);
    if (!fenced) agent__console_ended_elsewhere(group, cause); /* the fenced line said it */
    if (cause->kind == ELASTIC_RDZV_NODE_LOST) agent__slurm_note_lost(group, cause->node_id);
    group->failure_ms = elastic__now_ms();
    agent__phases_failure(group, NULL);
    group->unhealthy_local_rank = -1;
    snprintf(group->unhealthy_reason, sizeof group->unhealthy_reason, "%.100s: %.150s",
             cause->node_id, cause->reason);
    stop_workers(group, AGENT_STOP_FOR_RESTART);
    if (fenced) agent__workers_signal(group, SIGKILL); /* now, not after a grace period */
}

/* A stop request, where its state says what it means. */
static void stop_requested(agent_group *group, int signum)
{
    group->stop_signal = signum > 0 ? signum : SIGTERM;
    ELASTIC_LOG_I("agent", "stop requested (signal %d)", group->stop_signal);
}

/* ---- the transitions: one switch per state --------------------------------------------- */

static void on_idle(agent_group *group, const agent_group_event *ev)
{
    if (ev->kind == AGENT_GROUP_STOP_REQUEST) finish_shutdown(group);
}

static void on_rendezvous(agent_group *group, const agent_group_event *ev)
{
    switch (ev->kind) {
    case AGENT_GROUP_CALL_DONE:
        if (ev->call->kind == AGENT_CALL_NEXT) rendezvous_finished(group, ev->call);
        break;
    case AGENT_GROUP_STOP_REQUEST: /* next() blocks on its thread: no workers to stop */
        snprintf(group->summary, sizeof group->summary,
                 "stopped by signal %d during the rendezvous", group->stop_signal);
        end_now(group, 128 + group->stop_signal, AGENT_END_STOPPED);
        break;
    default: break;
    }
}

static void on_running(agent_group *group, const agent_group_event *ev)
{
    switch (ev->kind) {
    case AGENT_GROUP_WORKER_UNHEALTHY:
        end_generation_for(group, ev->worker, ev->reason, ev->exit_code, ev->term_signal, false);
        break;
    case AGENT_GROUP_WORKER_FAULTED:
        end_generation_for(group, ev->worker, ev->reason, -1, 0, true);
        break;
    case AGENT_GROUP_MEMBERSHIP_CHANGE: generation_ended(group, &ev->cause); break;
    case AGENT_GROUP_STOP_REQUEST: stop_workers(group, AGENT_STOP_FOR_SHUTDOWN); break;
    case AGENT_GROUP_EVICTED:
        /* The generation ended by our own eviction (no budget spent): stop the
         * workers now; the quarantine starts once they are gone. */
        group->failure_ms = 0; /* no failure: the next start is no "restart" of ours */
        stop_workers(group, AGENT_STOP_FOR_QUARANTINE);
        break;
    default: break;
    }
}

static void on_stopping(agent_group *group, const agent_group_event *ev)
{
    switch (ev->kind) {
    case AGENT_GROUP_ABORT_ACKED:
        if (ev->worker->survivor) ev->worker->abort_acked = true;
        break;
    case AGENT_GROUP_STOP_REQUEST: group->stop_reason = AGENT_STOP_FOR_SHUTDOWN; break;
    default: break;
    }
}

static void on_ending(agent_group *group, const agent_group_event *ev)
{
    switch (ev->kind) {
    case AGENT_GROUP_CALL_DONE:
        if (ev->call->kind == AGENT_CALL_FINISH || ev->call->kind == AGENT_CALL_LEAVE ||
            ev->call->kind == AGENT_CALL_SUMMARY)
            end_now(group, group->ending_exit_code, group->ending_status);
        break;
    case AGENT_GROUP_STOP_REQUEST:
        /* Don't wait for the store to finish or leave; a failed job's summary
         * is its report: that one is waited for. */
        if (group->ending_call != AGENT_CALL_SUMMARY)
            end_now(group, group->ending_exit_code, group->ending_status);
        break;
    default: break;
    }
}

static void on_quarantined(agent_group *group, const agent_group_event *ev)
{
    switch (ev->kind) {
    case AGENT_GROUP_QUARANTINE_OVER: {
        ELASTIC_LOG_I("agent", "quarantine over: rejoining the job as a waiting node");
        agent_event event;
        agent__event_begin(&event, group->events, AGENT_EVENT_QUARANTINE_ENDED);
        agent__event_int(&event, "generation", (int64_t)group->current.generation);
        agent__event_emit(group->events, &event);
        group->rejoining = true;
        begin_rendezvous(group);
        break;
    }
    case AGENT_GROUP_STOP_REQUEST: /* no workers; counted gone: nothing to leave */
        uv_timer_stop(&group->quarantine_timer);
        snprintf(group->summary, sizeof group->summary, "stopped by signal %d in quarantine",
                 group->stop_signal);
        end_now(group, 128 + group->stop_signal, AGENT_END_STOPPED);
        break;
    default: break;
    }
}

/* One event: first what it means in any state, then the state's switch. */
static void on_event(agent_group *group, const agent_group_event *ev)
{
    switch (ev->kind) { /* any state */
    case AGENT_GROUP_CHILDREN_EXITED:
        agent__workers_reap(group, on_worker_exit); /* each exit by the state it finds */
        agent__spares_reap(group);
        return;
    case AGENT_GROUP_STREAM_CLOSED: group->closing_streams--; return;
    case AGENT_GROUP_HEALTH: health_report(group); return;
    case AGENT_GROUP_GRACE_EXPIRED:
        ELASTIC_LOG_W("agent", "workers still alive %d ms after SIGTERM: SIGKILL",
                      group->opts->grace_period_ms);
        agent__workers_signal(group, SIGKILL);
        return;
    case AGENT_GROUP_CALL_DONE: apply_call(group, ev->call); break;
    case AGENT_GROUP_MEMBERSHIP_CHANGE:
        if (is_fenced(group, &ev->cause) && ev->cause.generation == group->current.generation)
            handle_fenced(group, &ev->cause);
        break;
    case AGENT_GROUP_STOP_REQUEST:
        if (group->stop_signal != 0) return; /* the first one counts */
        stop_requested(group, ev->signum);
        break;
    default: break;
    }
    switch (group->state) {
    case AGENT_IDLE: on_idle(group, ev); break;
    case AGENT_RENDEZVOUS: on_rendezvous(group, ev); break;
    case AGENT_RUNNING: on_running(group, ev); break;
    case AGENT_STOPPING: on_stopping(group, ev); break;
    case AGENT_ENDING: on_ending(group, ev); break;
    case AGENT_QUARANTINED: on_quarantined(group, ev); break;
    case AGENT_DONE: break; /* stop_signal tells a store host to stop serving */
    }
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
    if (group->pending_tail != NULL)
        group->pending_tail->next = ev;
    else
        group->pending = ev;
    group->pending_tail = ev;
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
    if (group->nested == NULL) return;
    group->nested_tail->next = group->pending;
    if (group->pending == NULL) group->pending_tail = group->nested_tail;
    group->pending = group->nested;
    group->nested = group->nested_tail = NULL;
}

/* Runs the queue to empty, one event at a time, each followed by the stopped check. */
static void drain(agent_group *group)
{
    if (group->draining) return;
    group->draining = true;
    take_nested(group);
    while (group->pending != NULL) {
        agent_group_event *ev = group->pending;
        group->pending = ev->next;
        if (group->pending == NULL) group->pending_tail = NULL;
        on_event(group, ev);
        free_event(ev);
        take_nested(group);
        check_stopped(group);
        take_nested(group);
    }
    group->draining = false;
}

void agent__group_post(agent_group *group, const agent_group_event *event)
{
    agent_group_event *ev = copy_event(event);
    if (ev == NULL) {
        if (event->kind == AGENT_GROUP_CALL_DONE) agent__call_free(event->call);
        return;
    }
    if (group->draining) { /* from inside the machine: once the current event is handled */
        ev->next = NULL;
        if (group->nested_tail != NULL)
            group->nested_tail->next = ev;
        else
            group->nested = ev;
        group->nested_tail = ev;
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
    int signum = __atomic_exchange_n(&group->pending_stop_signal, -1, __ATOMIC_ACQ_REL);
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
    pthread_mutex_lock(&group->lock);
    agent_group_event *posted = group->posted;
    group->posted = group->posted_tail = NULL;
    pthread_mutex_unlock(&group->lock);
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
    pthread_mutex_lock(&group->lock);
    agent_group_event *ev = NULL;
    for (agent_group_event *at = group->posted; at != NULL && ev == NULL; at = at->next)
        if (at->kind == AGENT_GROUP_MEMBERSHIP_CHANGE) ev = at;
    if (ev == NULL && (ev = calloc(1, sizeof *ev)) != NULL) {
        ev->kind = AGENT_GROUP_MEMBERSHIP_CHANGE;
        if (group->posted_tail != NULL)
            group->posted_tail->next = ev;
        else
            group->posted = ev;
        group->posted_tail = ev;
    }
    if (ev != NULL) ev->cause = *cause;
    /* Sent under the lock: the loop closes the async only after marking it
     * closed under the same lock (libuv aborts on a send to a closed one).
     * A fence can come after the job ended here, the rendezvous' guard
     * still running; nobody listens then. */
    if (!group->wake_closed) uv_async_send(&group->wake);
    pthread_mutex_unlock(&group->lock);
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
    pthread_mutex_lock(&group->lock);
    if (group->posted_tail != NULL)
        group->posted_tail->next = ev;
    else
        group->posted = ev;
    group->posted_tail = ev;
    pthread_mutex_unlock(&group->lock);
    uv_async_send(&group->wake);
}

void agent__group_request_stop(agent_group *group, int signum)
{
    __atomic_store_n(&group->pending_stop_signal, signum > 0 ? signum : 0, __ATOMIC_RELEASE);
    uv_async_send(&group->wake);
}

/* ---- life cycle ------------------------------------------------------------------------------ */

int agent__group_init(agent_group *group, uv_loop_t *loop)
{
    group->loop = loop;
    group->pending_stop_signal = -1;
    group->reaper_fd = -1;
    group->state = AGENT_IDLE;
    group->unhealthy_local_rank = -1;
    group->health_recheck = true; /* the first join waits for the first health round */
    int rc = pthread_mutex_init(&group->lock, NULL);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "mutex: %s", strerror(rc));
    if ((rc = agent__exits_init(group)) != 0 ||
        (rc = uv_timer_init(loop, &group->grace_timer)) != 0 ||
        (rc = uv_async_init(loop, &group->wake, on_wake)) != 0 ||
        (rc = uv_timer_init(loop, &group->ack_timer)) != 0 ||
        (rc = uv_timer_init(loop, &group->quarantine_timer)) != 0)
        return elastic__fail(ELASTIC_ESYS, "agent loop: %s", uv_strerror(rc));
    group->grace_timer.data = group->wake.data = group->ack_timer.data = group;
    group->quarantine_timer.data = group;
    if ((rc = agent__spares_init(group)) != 0) return rc;
    return agent__waiting_init(group);
}

void agent__group_start(agent_group *group)
{
    group->started_ms = elastic__now_ms();
    group->draining = true; /* the first call may come back inline (in-memory membership) */
    begin_rendezvous(group);
    group->draining = false;
    drain(group);
}

bool agent__group_close(agent_group *group)
{
    agent__spares_close(group);
    agent__exits_close(group);
    agent__reaper_unwatch(group);
    uv_close((uv_handle_t *)&group->grace_timer, NULL);
    pthread_mutex_lock(&group->lock); /* no thread sends to the wake async from now on */
    group->wake_closed = true;
    pthread_mutex_unlock(&group->lock);
    uv_close((uv_handle_t *)&group->wake, NULL);
    uv_close((uv_handle_t *)&group->ack_timer, NULL);
    uv_close((uv_handle_t *)&group->quarantine_timer, NULL);
    agent__waiting_close(group);
    /* A rendezvous or store call cannot be interrupted: its thread keeps
     * using the group until it returns. The process is about to exit; our
     * lease ends with it, so the other nodes re-form without us. */
    return agent__calls_stop(group);
}

void agent__group_destroy(agent_group *group)
{
    free(group->restore_sources);
    free(group->restore_nodes);
    group->restore_sources = NULL;
    group->restore_nodes = NULL;
    take_nested(group);
    while (group->pending != NULL) {
        agent_group_event *next = group->pending->next;
        free_event(group->pending);
        group->pending = next;
    }
    while (group->posted != NULL) {
        agent_group_event *next = group->posted->next;
        free(group->posted);
        group->posted = next;
    }
    free(group->workers);
    group->workers = NULL;
    agent__spares_destroy(group);
    pthread_mutex_destroy(&group->lock);
}
