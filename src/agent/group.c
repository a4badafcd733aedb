/*
 * The worker group's state machine, driven by libuv events on the agent's
 * loop thread (worker exits arrive through their pidfds, never by polling):
 *
 *   IDLE --start--> RENDEZVOUS --formed--> RUNNING --every worker exited 0--> DONE (0)
 *                     ^    |                  |
 *                     |    |                  | a local worker unhealthy (agent__group_worker_unhealthy),
 *                     |    |                  | the generation ended elsewhere, or SIGTERM/SIGINT
 *                     |    |                  v
 *                     +----|-- restart --- STOPPING (SIGTERM to every worker's process group,
 *                          |                  |       SIGKILL after the grace period)
 *                          |                  | shutdown: leave the rendezvous
 *                          v                  v
 *                        DONE <---------------+   (budget exhausted, job closed, too few nodes)
 *
 * An evicted straggler node (node_straggler.c) goes RUNNING -> STOPPING ->
 * QUARANTINED (a timer, --straggler-quarantine) -> RENDEZVOUS, or to DONE
 * when the quarantine is 0 (it leaves the job for good).
 *
 * Every transition happens on the loop thread; other threads (the calls
 * thread running rendezvous and store calls, membership news, signal
 * handlers) only post to `wake`. A job that ends here passes through ENDING
 * while its last store call (finish, leave, the summary) is in flight.
 */
#include "agent/group.h"

#include "common/clock.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static void begin_rendezvous(agent_group *group);
static void maybe_stopped(agent_group *group);
static void begin_quarantine(agent_group *group);
static void end_now(agent_group *group);

static void set_done(agent_group *group, int exit_code)
{
    group->state = AGENT_DONE;
    group->exit_code = exit_code;
    uv_timer_stop(&group->grace_timer);
}

static void emit_job_end(agent_group *group, const char *status)
{
    agent_event event;
    agent__event_begin(&event, group->events, "job_end");
    agent__event_str(&event, "status", status);
    agent__event_int(&event, "exit_code", group->exit_code);
    agent__event_int(&event, "generations", (int64_t)group->generations);
    agent__event_int(&event, "duration_ms", (int64_t)(elastic__now_ms() - group->started_ms));
    agent__event_int(&event, "restarts", group->current.restart_count);
    agent__event_int(&event, "lost_ms", (int64_t)group->lost_ms);
    agent__event_emit(group->events, &event);
    agent__console_job_end(group, status);
}

/* ---- stopping --------------------------------------------------------------- */

static void on_grace_expired(uv_timer_t *timer)
{
    agent_group *group = timer->data;
    ELASTIC_LOG_W("agent", "workers still alive %d ms after SIGTERM: SIGKILL",
                  group->opts->grace_period_ms);
    agent__workers_signal(group, SIGKILL);
}

/* SIGTERM to every worker's process group, SIGKILL after the grace period. */
static void stop_workers(agent_group *group, agent_stop_reason reason)
{
    group->state = AGENT_STOPPING;
    group->stop_reason = reason;
    group->stop_started_ms = elastic__now_ms();
    if (group->monitor != NULL) probe__monitor_pause(group->monitor);
    bool in_process =
        reason == AGENT_STOP_FOR_RESTART &&
        agent__inprocess_stop(group, group->unhealthy_local_rank, group->unhealthy_reason);
    if (in_process)
        group->inprocess_failure_ms = group->failure_ms;
    else
        agent__workers_signal(group, SIGTERM);
    if (group->running > 0)
        uv_timer_start(&group->grace_timer, on_grace_expired,
                       (uint64_t)group->opts->grace_period_ms, 0);
}

static void begin_stopping(agent_group *group, agent_stop_reason reason)
{
    stop_workers(group, reason);
    maybe_stopped(group); /* nothing was running: on at once */
}

/* The job is over here; `kind` is its last call, DONE follows when it is back. */
static void begin_ending(agent_group *group, int exit_code, const char *status, agent_call *call)
{
    group->state = AGENT_ENDING;
    group->ending_exit_code = exit_code;
    group->ending_status = status;
    uv_timer_stop(&group->grace_timer);
    agent__call_post(group, call);
}

static void end_now(agent_group *group)
{
    set_done(group, group->ending_exit_code);
    emit_job_end(group, group->ending_status);
}

static void finish_shutdown(agent_group *group)
{
    snprintf(group->summary, sizeof group->summary, "stopped by signal %d (%s)", group->stop_signal,
             group->stop_signal > 0 ? strsignal(group->stop_signal) : "request");
    if (group->fenced_wall_ms != 0 &&
        group->state != AGENT_RUNNING) { /* no member: nothing to leave */
        group->ending_exit_code = 128 + group->stop_signal;
        group->ending_status = "stopped";
        end_now(group);
        return;
    }
    begin_ending(group, 128 + group->stop_signal, "stopped", agent__call_new(AGENT_CALL_LEAVE));
}

/* ---- quarantine of an evicted straggler node ------------------------------------ */

static void on_quarantine_over(uv_timer_t *timer)
{
    agent_group *group = timer->data;
    if (group->state != AGENT_QUARANTINED) return;
    ELASTIC_LOG_I("agent", "quarantine over: rejoining the job as a waiting node");
    agent_event event;
    agent__event_begin(&event, group->events, "quarantine_ended");
    agent__event_int(&event, "generation", (int64_t)group->current.generation);
    agent__event_emit(group->events, &event);
    begin_rendezvous(group);
}

/* The generation ended by our own eviction (no budget spent): stop the
 * workers now; the quarantine starts once they are gone. */
void agent__group_quarantine(agent_group *group)
{
    if (group->state != AGENT_RUNNING) return;
    group->failure_ms = 0; /* no failure: the next start is no "restart" of ours */
    stop_workers(group, AGENT_STOP_FOR_QUARANTINE);
    maybe_stopped(group);
}

static void begin_quarantine(agent_group *group)
{
    int ms = group->opts->straggler_quarantine_ms;
    if (ms <= 0) { /* out for good; counted gone already: nothing to leave */
        snprintf(group->summary, sizeof group->summary, "evicted as the job's straggler: left");
        group->ending_exit_code = 0;
        group->ending_status = "evicted";
        end_now(group);
        return;
    }
    group->state = AGENT_QUARANTINED;
    uv_timer_start(&group->quarantine_timer, on_quarantine_over, (uint64_t)ms, 0);
}

/* Every worker is reaped and its output drained: the generation is over here. */
static void maybe_stopped(agent_group *group)
{
    if (group->state != AGENT_STOPPING || group->running > agent__inprocess_kept(group) ||
        group->closing_streams > 0)
        return;
    uv_timer_stop(&group->grace_timer);
    uv_timer_stop(&group->ack_timer);
    agent__workers_signal(group, SIGKILL); /* grandchildren left in the workers' process groups */
    agent_event event;
    agent__event_begin(&event, group->events, "generation_stopped");
    agent__event_int(&event, "generation", (int64_t)group->current.generation);
    agent__event_int(&event, "stop_ms", (int64_t)(elastic__now_ms() - group->stop_started_ms));
    agent__event_emit(group->events, &event);
    if (group->stop_reason == AGENT_STOP_FOR_SHUTDOWN) {
        finish_shutdown(group);
        return;
    }
    if (group->stop_reason == AGENT_STOP_FOR_QUARANTINE) {
        begin_quarantine(group);
        return;
    }
    begin_rendezvous(group);
}

void agent__group_maybe_stopped(agent_group *group)
{
    maybe_stopped(group);
}

void agent__group_stream_closed(agent_group *group)
{
    group->closing_streams--;
    maybe_stopped(group);
}

/* ---- the single place a local worker is declared unhealthy ------------------ */

static void end_generation_for(agent_group *group, agent_worker *worker, const char *reason,
                               int exit_code, int term_signal, bool keep_worker);

void agent__group_worker_unhealthy(agent_group *group, agent_worker *worker, const char *reason,
                                   int exit_code, int term_signal)
{
    end_generation_for(group, worker, reason, exit_code, term_signal, false);
}

void agent__group_worker_faulted(agent_group *group, agent_worker *worker, const char *reason)
{
    end_generation_for(group, worker, reason, -1, 0, true);
}

static void end_generation_for(agent_group *group, agent_worker *worker, const char *reason,
                               int exit_code, int term_signal, bool keep_worker)
{
    if (group->state != AGENT_RUNNING) return; /* already stopping: the first cause wins */
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
    group->unhealthy_local_rank = keep_worker ? -1 : worker->local_rank;
    snprintf(group->unhealthy_reason, sizeof group->unhealthy_reason, "rank %d: %s", worker->rank,
             reason);
    /* Workers first: every millisecond here is a millisecond of recovery. The
     * next rendezvous waits (maybe_stopped below) until the generation ended. */
    stop_workers(group, AGENT_STOP_FOR_RESTART);
    agent__failure_record(group, worker, &cause); /* locally first: the store may be gone */
    agent__console_failure(group, worker, &cause);
    agent_event event;
    agent__event_worker(&event, group, "failure", worker);
    agent__event_int(&event, "exit_code", exit_code);
    agent__event_int(&event, "signal", term_signal);
    agent__event_str(&event, "reason", reason);
    agent__event_emit(group->events, &event);
    /* The store calls run off the loop, in order: the end precedes the next rendezvous. */
    agent__failure_share(group, &cause);
    agent_call *end = agent__call_new(AGENT_CALL_END);
    if (end != NULL) end->cause = cause;
    agent__call_post(group, end);
    maybe_stopped(group);
}

/* ---- worker exits ------------------------------------------------------------ */

static void on_worker_exit(agent_group *group, agent_worker *worker)
{
    agent_event event;
    agent__event_worker(&event, group, "worker_exited", worker);
    agent__event_int(&event, "exit_code", worker->exit_code);
    agent__event_int(&event, "signal", worker->term_signal);
    agent__event_int(&event, "runtime_ms", (int64_t)(elastic__now_ms() - worker->started_ms));
    agent__event_emit(group->events, &event);
    if (group->state != AGENT_RUNNING) return;
    if (worker->exit_code == 0) {
        if (++group->succeeded < group->nworkers) return;
        begin_ending(group, 0, "succeeded", agent__call_new(AGENT_CALL_FINISH));
        return;
    }
    char reason[128];
    if (worker->term_signal != 0)
        agent__describe_exit(-1, worker->term_signal, reason, sizeof reason);
    else
        snprintf(reason, sizeof reason, "exited with code %d", worker->exit_code);
    agent__group_worker_unhealthy(group, worker, reason, worker->exit_code, worker->term_signal);
}

void agent__group_workers_exited(agent_group *group)
{
    agent__workers_reap(group, on_worker_exit);
    maybe_stopped(group);
}

/* ---- rendezvous ---------------------------------------------------------------- */

static void generation_formed(agent_group *group, const elastic_rdzv_result *result)
{
    group->current = *result;
    group->generations++;
    agent_event event;
    agent__event_begin(&event, group->events, "generation_formed");
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
    group->evict_refused_logged = false;
    agent__probes_generation_started(group);
    if (agent__workers_start(group) != 0)
        return; /* a worker that could not start is a failure already handled */
    if (group->failure_ms != 0 && group->monitor != NULL && group->reconfiguring == 0)
        probe__monitor_record_recovery(
            group->monitor, (double)(elastic__now_ms() - group->failure_ms) / 1000.0, false);
    if (group->failure_ms != 0) {
        uint64_t recovery_ms = elastic__now_ms() - group->failure_ms;
        agent__event_begin(&event, group->events, "restarted");
        agent__event_int(&event, "generation", (int64_t)result->generation);
        agent__event_int(&event, "recovery_ms", (int64_t)recovery_ms);
        agent__event_emit(group->events, &event);
        group->lost_ms += recovery_ms;
        agent__console_running_again(group, recovery_ms);
        group->failure_ms = 0;
    }
}

static void rendezvous_finished(agent_group *group, int rc, const elastic_rdzv_result *result,
                                const char *error)
{
    agent__waiting_stop(group);
    if (group->state != AGENT_RENDEZVOUS) return; /* stopped while next() blocked */
    if (group->stop_signal != 0) {                /* SIGTERM arrived while we waited */
        if (rc == 0) group->current = *result;
        finish_shutdown(group);
        return;
    }
    if (rc == 0) {
        generation_formed(group, result);
        return;
    }
    agent_call *summary = agent__call_new(AGENT_CALL_SUMMARY);
    if (summary != NULL) {
        summary->summary_rc = rc;
        snprintf(summary->error, sizeof summary->error, "%s", error);
    }
    begin_ending(group, 1, "failed", summary);
}

static void begin_rendezvous(agent_group *group)
{
    group->state = AGENT_RENDEZVOUS;
    group->rendezvous_started_ms = elastic__now_ms();
    agent__waiting_start(group);
    agent__call_post(group, agent__call_new(AGENT_CALL_NEXT));
}

void agent__group_call_done(agent_group *group, agent_call *call)
{
    if (call->rc != 0 && call->kind != AGENT_CALL_NEXT)
        ELASTIC_LOG_W("agent", "%s: %s (%s)",
                      call->kind == AGENT_CALL_END          ? "ending the generation"
                      : call->kind == AGENT_CALL_FINISH     ? "finishing"
                      : call->kind == AGENT_CALL_LEAVE      ? "leaving the rendezvous"
                      : call->kind == AGENT_CALL_NODE_STATS ? "exchanging straggler statistics"
                      : call->kind == AGENT_CALL_EVICT      ? "stepping aside as a straggler"
                                                            : "sharing the failure's detail",
                      elastic_err_name(call->rc), call->error);
    switch (call->kind) {
    case AGENT_CALL_NEXT: rendezvous_finished(group, call->rc, &call->result, call->error); break;
    case AGENT_CALL_NODE_STATS: agent__node_stats_done(group, call); break;
    case AGENT_CALL_EVICT: agent__node_evict_done(group, call); break;
    case AGENT_CALL_FINISH:
    case AGENT_CALL_LEAVE:
    case AGENT_CALL_SUMMARY:
        if (group->state == AGENT_ENDING) end_now(group);
        break;
    default: break;
    }
}

/* ---- news from other threads ------------------------------------------------------ */

/* This node lost its lease: it is no member of the generation any more. */
static void handle_fenced(agent_group *group, const elastic_rdzv_cause *cause)
{
    group->fenced_wall_ms = cause->time_ms != 0 ? cause->time_ms : elastic__wall_ms();
    snprintf(group->fenced_reason, sizeof group->fenced_reason, "%s", cause->reason);
    agent_event event;
    agent__event_begin(&event, group->events, "fenced");
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
}

static void handle_change(agent_group *group, const elastic_rdzv_cause *cause)
{
    /* This node itself lost (FENCED, or named lost by the others): its lease
     * lapsed, so the others may already run without it. */
    bool fenced =
        cause->kind == ELASTIC_RDZV_FENCED ||
        (cause->kind == ELASTIC_RDZV_NODE_LOST && strcmp(cause->node_id, group->node_id) == 0);
    if (fenced && cause->generation == group->current.generation) handle_fenced(group, cause);
    if (group->state != AGENT_RUNNING || cause->generation != group->current.generation) return;
    /* Our own eviction, told by the rendezvous before the call is back: the
     * call's result stops the workers for the quarantine, not a restart. */
    if (group->evict_in_flight && cause->kind == ELASTIC_RDZV_NODE_LEFT &&
        strcmp(cause->node_id, group->node_id) == 0)
        return;
    agent_event event;
    agent__event_begin(&event, group->events, "generation_ended");
    agent__event_int(&event, "generation", (int64_t)cause->generation);
    agent__event_int(&event, "cause", cause->kind);
    agent__event_str(&event, "by_node", cause->node_id);
    agent__event_int(&event, "rank", cause->rank);
    agent__event_str(&event, "reason", cause->reason);
    agent__event_emit(group->events, &event);
    if (!fenced) agent__console_ended_elsewhere(group, cause); /* the fenced line said it */
    group->failure_ms = elastic__now_ms();
    group->unhealthy_local_rank = -1;
    snprintf(group->unhealthy_reason, sizeof group->unhealthy_reason, "%.100s: %.150s",
             cause->node_id, cause->reason);
    stop_workers(group, AGENT_STOP_FOR_RESTART);
    if (fenced) agent__workers_signal(group, SIGKILL); /* now, not after a grace period */
    maybe_stopped(group);
}

static void handle_stop_request(agent_group *group, int signum)
{
    if (group->stop_signal != 0) return;
    group->stop_signal = signum > 0 ? signum : SIGTERM;
    ELASTIC_LOG_I("agent", "stop requested (signal %d)", group->stop_signal);
    if (group->state == AGENT_RUNNING)
        begin_stopping(group, AGENT_STOP_FOR_SHUTDOWN);
    else if (group->state == AGENT_STOPPING)
        group->stop_reason = AGENT_STOP_FOR_SHUTDOWN;
    else if (group->state == AGENT_ENDING && strcmp(group->ending_status, "failed") != 0)
        end_now(group); /* don't wait for the store */
    else if (group->state == AGENT_IDLE)
        finish_shutdown(group);
    else if (group->state == AGENT_QUARANTINED) { /* no workers; counted gone: nothing to leave */
        uv_timer_stop(&group->quarantine_timer);
        set_done(group, 128 + group->stop_signal);
        snprintf(group->summary, sizeof group->summary, "stopped by signal %d in quarantine",
                 group->stop_signal);
        emit_job_end(group, "stopped");
    } else if (group->state ==
               AGENT_RENDEZVOUS) { /* next() blocks on its thread: no workers to stop */
        set_done(group, 128 + group->stop_signal);
        snprintf(group->summary, sizeof group->summary,
                 "stopped by signal %d during the rendezvous", group->stop_signal);
        emit_job_end(group, "stopped");
    }
    /* DONE: stop_signal tells a store host to stop serving. */
}

static void on_wake(uv_async_t *handle)
{
    agent_group *group = handle->data;
    int signum = __atomic_exchange_n(&group->pending_stop_signal, -1, __ATOMIC_ACQ_REL);
    if (signum >= 0) handle_stop_request(group, signum);
    pthread_mutex_lock(&group->lock);
    bool changed = group->change_pending;
    elastic_rdzv_cause cause = group->change;
    group->change_pending = false;
    pthread_mutex_unlock(&group->lock);
    agent__calls_drain(group); /* a formed generation first: the change may be news about it */
    if (changed) handle_change(group, &cause);
}

void agent__group_on_change(void *user, const elastic_rdzv_cause *cause)
{
    agent_group *group = user;
    pthread_mutex_lock(&group->lock);
    group->change = *cause;
    group->change_pending = true;
    pthread_mutex_unlock(&group->lock);
    uv_async_send(&group->wake);
}

void agent__group_request_stop(agent_group *group, int signum)
{
    __atomic_store_n(&group->pending_stop_signal, signum > 0 ? signum : 0, __ATOMIC_RELEASE);
    uv_async_send(&group->wake);
}

/* ---- life cycle ----------------------------------------------------------------------- */

int agent__group_init(agent_group *group, uv_loop_t *loop)
{
    group->loop = loop;
    group->pending_stop_signal = -1;
    group->reaper_fd = -1;
    group->state = AGENT_IDLE;
    group->unhealthy_local_rank = -1;
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
    return agent__waiting_init(group);
}

void agent__group_start(agent_group *group)
{
    group->started_ms = elastic__now_ms();
    begin_rendezvous(group);
}

bool agent__group_close(agent_group *group)
{
    agent__exits_close(group);
    agent__reaper_unwatch(group);
    uv_close((uv_handle_t *)&group->grace_timer, NULL);
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
    free(group->workers);
    group->workers = NULL;
    pthread_mutex_destroy(&group->lock);
}
