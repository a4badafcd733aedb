/*
 * The agent's decisions: what each input means in each state (machine.h).
 * Pure: it reads the machine and the input and writes the machine and the
 * actions, nothing else, so test/unit/test_agent_machine.c drives it row by
 * row of the table in docs/ARCHITECTURE.md with no process, socket or timer.
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
 * An input first does what it means in any state (bookkeeping: a worker
 * counted, a stream closed, the first stop request remembered), then goes
 * to its state's function. SETTLED, which the runner sends after each event
 * it handled, is the one "every worker stopped" check.
 */
#include "agent/machine.h"

#include <signal.h>
#include <stddef.h>

/* ---- names -------------------------------------------------------------------------- */

/* clang-format off */
static const char *const state_names[] = {
    [AGENT_IDLE] = "IDLE", [AGENT_RENDEZVOUS] = "RENDEZVOUS", [AGENT_RUNNING] = "RUNNING",
    [AGENT_STOPPING] = "STOPPING", [AGENT_ENDING] = "ENDING",
    [AGENT_QUARANTINED] = "QUARANTINED", [AGENT_DONE] = "DONE",
};
static const char *const input_names[AGENT_IN_KINDS] = {
    [AGENT_IN_START] = "start", [AGENT_IN_HEALTH_GATE] = "health_gate",
    [AGENT_IN_WORKER_STARTED] = "worker_started", [AGENT_IN_WORKER_EXITED] = "worker_exited",
    [AGENT_IN_WORKER_UNHEALTHY] = "worker_unhealthy", [AGENT_IN_WORKER_FAULTED] = "worker_faulted",
    [AGENT_IN_STREAM_CLOSED] = "stream_closed", [AGENT_IN_ABORT_ACKED] = "abort_acked",
    [AGENT_IN_MEMBERSHIP_CHANGE] = "membership_change", [AGENT_IN_STOP_REQUEST] = "stop_request",
    [AGENT_IN_CALL_DONE] = "call_done", [AGENT_IN_EVICT_ASKED] = "evict_asked",
    [AGENT_IN_EVICTED] = "evicted", [AGENT_IN_GRACE_EXPIRED] = "grace_expired",
    [AGENT_IN_QUARANTINE_OVER] = "quarantine_over", [AGENT_IN_HEALTH] = "health",
    [AGENT_IN_SETTLED] = "settled", [AGENT_IN_DIVERGED] = "diverged",
    [AGENT_IN_DECIDED] = "decided", [AGENT_IN_SPARE_PARKED] = "spare_parked",
};
static const char *const action_names[AGENT_ACT_KINDS] = {
    [AGENT_ACT_BEGIN_RENDEZVOUS] = "begin_rendezvous",
    [AGENT_ACT_ASK_HEALTH_GATE] = "ask_health_gate", [AGENT_ACT_JOIN] = "join",
    [AGENT_ACT_GENERATION_FORMED] = "generation_formed",
    [AGENT_ACT_START_WAITING] = "start_waiting",
    [AGENT_ACT_ADOPT_RESULT] = "adopt_result", [AGENT_ACT_FAILURE] = "failure",
    [AGENT_ACT_REPORT_FAILURE] = "report_failure", [AGENT_ACT_CLASSIFY] = "classify",
    [AGENT_ACT_CLASSIFY_LATE] = "classify_late",
    [AGENT_ACT_GENERATION_ENDED] = "generation_ended", [AGENT_ACT_STOP_WORKERS] = "stop_workers",
    [AGENT_ACT_KILL_WORKERS] = "kill_workers", [AGENT_ACT_KEEP_SURVIVOR] = "keep_survivor",
    [AGENT_ACT_GENERATION_STOPPED] = "generation_stopped", [AGENT_ACT_FENCED] = "fenced",
    [AGENT_ACT_HOLD_CHANGE] = "hold_change", [AGENT_ACT_REPLAY_CHANGE] = "replay_change",
    [AGENT_ACT_STEP_ASIDE_UNHEALTHY] = "step_aside_unhealthy",
    [AGENT_ACT_STEP_ASIDE_DIVERGED] = "step_aside_diverged",
    [AGENT_ACT_NO_FAILURE] = "no_failure", [AGENT_ACT_QUARANTINE] = "quarantine",
    [AGENT_ACT_QUARANTINE_ENDED] = "quarantine_ended",
    [AGENT_ACT_STOP_QUARANTINE_TIMER] = "stop_quarantine_timer",
    [AGENT_ACT_SAY_UNHEALTHY] = "say_unhealthy",
    [AGENT_ACT_SLURM_DRAIN_LOST] = "slurm_drain_lost",
    [AGENT_ACT_SLURM_GIVE_UP] = "slurm_give_up",
    [AGENT_ACT_LOG_STOP_REQUEST] = "log_stop_request",
    [AGENT_ACT_BEGIN_ENDING] = "begin_ending", [AGENT_ACT_END_NOW] = "end_now",
};
static const char *const end_status_names[] = {
    [AGENT_END_SUCCEEDED] = "succeeded", [AGENT_END_FAILED] = "failed",
    [AGENT_END_STOPPED] = "stopped", [AGENT_END_EVICTED] = "evicted",
    [AGENT_END_UNHEALTHY] = "unhealthy", [AGENT_END_LEFT_OUT] = "left_out",
};
/* clang-format on */

#define NAME_OF(table, i) \
    ((unsigned)(i) < sizeof(table) / sizeof *(table) && (table)[i] != NULL ? (table)[i] : "unknown")

const char *agent__state_name(agent_state state)
{
    return NAME_OF(state_names, state);
}
const char *agent__input_name(agent_input_kind kind)
{
    return NAME_OF(input_names, kind);
}
const char *agent__action_name(agent_action_kind kind)
{
    return NAME_OF(action_names, kind);
}
const char *agent__end_status_name(agent_end_status status)
{
    return NAME_OF(end_status_names, status);
}

/* ---- building blocks ------------------------------------------------------------------ */

static agent_action *act(agent_actions *out, agent_action_kind kind)
{
    /* The longest sequence a step produces is 7 actions; the bound is a
     * programming error, never input: the last slot is reused rather than
     * writing past the array. */
    agent_action *a = &out->at[out->count < AGENT_MACHINE_MAX_ACTIONS ? out->count++
                                                                      : AGENT_MACHINE_MAX_ACTIONS - 1];
    *a = (agent_action){ .kind = kind };
    return a;
}

/* -> DONE: the job ended for this node. */
static void end_now(agent_machine *m, agent_actions *out, int exit_code, agent_end_status status,
                    agent_summary_kind summary)
{
    m->state = AGENT_DONE;
    m->exit_code = exit_code;
    agent_action *a = act(out, AGENT_ACT_END_NOW);
    a->exit_code = exit_code;
    a->status = status;
    a->summary = summary;
}

/* -> ENDING: the job is over here; DONE follows when `call` (its last) is back. */
static void begin_ending(agent_machine *m, agent_actions *out, int exit_code,
                         agent_end_status status, agent_call_kind call, agent_summary_kind summary)
{
    m->state = AGENT_ENDING;
    m->ending_exit_code = exit_code;
    m->ending_status = status;
    m->ending_call = call;
    agent_action *a = act(out, AGENT_ACT_BEGIN_ENDING);
    a->exit_code = exit_code;
    a->status = status;
    a->call_kind = call;
    a->summary = summary;
}

/* A stop request's end: leave the rendezvous, unless this node was fenced
 * (no member any more: nothing to leave). */
static void finish_shutdown(agent_machine *m, agent_actions *out)
{
    int exit_code = 128 + m->stop_signal;
    if (m->fenced)
        end_now(m, out, exit_code, AGENT_END_STOPPED, AGENT_SUMMARY_SHUTDOWN);
    else
        begin_ending(m, out, exit_code, AGENT_END_STOPPED, AGENT_CALL_LEAVE,
                     AGENT_SUMMARY_SHUTDOWN);
}

/* -> STOPPING. */
static void stop_workers(agent_machine *m, agent_actions *out, agent_stop_reason reason)
{
    m->state = AGENT_STOPPING;
    m->awaiting_spare = false; /* the next generation starts its own slots */
    m->stop_reason = reason;
    m->stop_for_failure = false; /* a worker's failure's stop says so after */
    act(out, AGENT_ACT_STOP_WORKERS)->stop_reason = reason;
}

static void join(agent_machine *m, agent_actions *out)
{
    m->health_gating = m->health_recheck = false;
    act(out, AGENT_ACT_JOIN);
}

/* -> RENDEZVOUS; after the start, a local failure or a quarantine the join
 * first waits for a fresh round of health checks (docs/HEALTH.md). */
static void begin_rendezvous(agent_machine *m, agent_actions *out)
{
    m->state = AGENT_RENDEZVOUS;
    act(out, AGENT_ACT_BEGIN_RENDEZVOUS);
    if (m->health_recheck)
        act(out, AGENT_ACT_ASK_HEALTH_GATE); /* answered by HEALTH_GATE */
    else
        join(m, out);
}

/* A fatal health round before joining: the node does not join. A member of
 * the last generation leaves so that the others do not wait for it; a node
 * that never joined or comes out of a quarantine is counted gone already. */
static void end_unhealthy(agent_machine *m, agent_actions *out)
{
    m->health_gating = false;
    act(out, AGENT_ACT_SAY_UNHEALTHY);
    if (m->generations == 0 || m->rejoining)
        end_now(m, out, 1, AGENT_END_UNHEALTHY, AGENT_SUMMARY_NONE);
    else
        begin_ending(m, out, 1, AGENT_END_UNHEALTHY, AGENT_CALL_LEAVE, AGENT_SUMMARY_NONE);
}

/* -> QUARANTINED, or DONE when the quarantine is 0 (counted gone already:
 * nothing to leave). */
static void begin_quarantine(agent_machine *m, agent_actions *out)
{
    if (m->quarantine_ms <= 0) {
        if (m->stepped_aside_unhealthy)
            end_now(m, out, 1, AGENT_END_UNHEALTHY, AGENT_SUMMARY_UNHEALTHY_LEFT);
        else if (m->quarantined_failing) /* out for good; the LEAVE waits for the drain before it */
            begin_ending(m, out, 0, AGENT_END_EVICTED, AGENT_CALL_LEAVE,
                         AGENT_SUMMARY_QUARANTINE_LEFT);
        else
            end_now(m, out, 0, AGENT_END_EVICTED, AGENT_SUMMARY_EVICTED_LEFT);
        return;
    }
    m->health_recheck = true; /* its way back in starts with a fresh health round */
    m->state = AGENT_QUARANTINED;
    act(out, AGENT_ACT_QUARANTINE)->quarantine_ms = m->quarantine_ms;
}

/* RUNNING -> STOPPING for a local worker's failure: it ends the generation
 * for every node (a failure: it consumes the restart budget), and the
 * job-wide failure policy decides whether the job goes on at all: this node
 * rejoins only once its DECIDED is back (a deterministic bug stops the job
 * instead of replaying it). */
static void local_failure(agent_machine *m, agent_actions *out, bool keep_worker)
{
    m->health_recheck = true; /* a failure here: checked before this node rejoins */
    act(out, AGENT_ACT_FAILURE)->keep_worker = keep_worker;
    /* Workers first: every millisecond here is a millisecond of recovery. */
    stop_workers(m, out, AGENT_STOP_FOR_RESTART);
    m->stop_for_failure = true;
    act(out, AGENT_ACT_REPORT_FAILURE)->keep_worker = keep_worker;
    m->deciding++;
    act(out, AGENT_ACT_CLASSIFY); /* after the END call: calls run in order */
}

/* This node itself lost (FENCED, or named lost by the others). */
static bool is_fenced(const agent_input *in)
{
    return in->cause_kind == ELASTIC_RDZV_FENCED ||
           (in->cause_kind == ELASTIC_RDZV_NODE_LOST && in->about_me);
}

/* ---- one function per state ---------------------------------------------------------------- */

static void on_idle(agent_machine *m, const agent_input *in, agent_actions *out)
{
    if (in->kind == AGENT_IN_START) {
        m->quarantine_ms = in->quarantine_ms;
        begin_rendezvous(m, out);
    }
    if (in->kind == AGENT_IN_STOP_REQUEST) finish_shutdown(m, out);
}

/* A recovery's dead slots (the survivors still run) that no parked spare
 * fills wait for a spare that is still starting: it is ahead of a cold
 * start in the same start-up, so waiting for it is never slower (its wait
 * is bounded by its startup timeout; spares.c says when it is over). */
static bool awaits_spare(const agent_machine *m, const agent_input *in)
{
    int dead = in->nworkers - m->running;
    return dead > in->spares_parked && in->spares_starting > 0;
}

/* RENDEZVOUS x next() back: RUNNING, or the job ends here. */
static void rendezvous_finished(agent_machine *m, const agent_input *in, agent_actions *out)
{
    bool replay = in->rc == 0 && m->held_change == in->generation;
    m->held_change = 0;
    if (m->stop_signal != 0) { /* SIGTERM arrived while we waited */
        if (in->rc == 0) {
            m->generation = in->generation;
            act(out, AGENT_ACT_ADOPT_RESULT);
        }
        finish_shutdown(m, out);
        return;
    }
    if (in->rc == 0) {
        m->state = AGENT_RUNNING;
        m->generation = in->generation;
        m->generations++;
        m->restart_count = in->restart_count;
        m->nworkers = in->nworkers;
        m->succeeded = 0;
        m->rejoining = m->stepped_aside_unhealthy = m->quarantined_failing = false;
        m->awaiting_spare = awaits_spare(m, in);
        act(out, AGENT_ACT_GENERATION_FORMED)->wait_spare = m->awaiting_spare;
        if (replay) act(out, AGENT_ACT_REPLAY_CHANGE); /* it ended before we could run it */
        return;
    }
    /* Every member of the job's last generation finished while we waited (a
     * spare, or a fenced node rejoining): the job succeeded without us. */
    if (in->rc == ELASTIC_ECLOSED && in->closed_finished) {
        end_now(m, out, 0, AGENT_END_LEFT_OUT, AGENT_SUMMARY_LEFT_OUT); /* no round to leave */
        return;
    }
    /* Another node's failure policy closed the job for a deterministic bug:
     * every node exits as the deciding one does; the summary says its cause. */
    if (in->rc == ELASTIC_ECLOSED && in->closed_bug) {
        begin_ending(m, out, AGENT_EXIT_BUG, AGENT_END_FAILED, AGENT_CALL_SUMMARY,
                     AGENT_SUMMARY_NONE);
        return;
    }
    /* Lost or replaced nodes ended more generations than --max-infra-restarts:
     * the fleet keeps failing under the job; its own code, no drain (the
     * summary names the bound and the last node). */
    if (in->rc == ELASTIC_ECLOSED && in->closed_infra) {
        begin_ending(m, out, AGENT_EXIT_INFRA, AGENT_END_FAILED, AGENT_CALL_SUMMARY,
                     AGENT_SUMMARY_NONE);
        return;
    }
    /* Too few nodes is its own code: under Slurm the recipe requeues on it,
     * and the lost nodes are drained first so the requeue cannot land on one. */
    if (in->rc == ELASTIC_ENOTENOUGH) act(out, AGENT_ACT_SLURM_DRAIN_LOST);
    begin_ending(m, out, in->rc == ELASTIC_ENOTENOUGH ? AGENT_EXIT_TOO_FEW_NODES : 1,
                 AGENT_END_FAILED, AGENT_CALL_SUMMARY, AGENT_SUMMARY_NONE);
}

static void on_rendezvous(agent_machine *m, const agent_input *in, agent_actions *out)
{
    switch (in->kind) {
    case AGENT_IN_CALL_DONE:
        if (in->call_kind == AGENT_CALL_NEXT) rendezvous_finished(m, in, out);
        break;
    case AGENT_IN_HEALTH_GATE:
        if (in->gate == AGENT_HEALTH_WAIT)
            m->health_gating = true; /* a HEALTH input brings the round */
        else if (in->gate == AGENT_HEALTH_STOP)
            end_unhealthy(m, out);
        else
            join(m, out);
        break;
    case AGENT_IN_HEALTH:
        if (!m->health_gating || !in->gate_done) break;
        if (in->fatal)
            end_unhealthy(m, out);
        else
            join(m, out);
        break;
    case AGENT_IN_STOP_REQUEST: /* next() blocks on its thread: no workers to stop */
        end_now(m, out, 128 + m->stop_signal, AGENT_END_STOPPED, AGENT_SUMMARY_STOPPED_IN_RDZV);
        break;
    case AGENT_IN_MEMBERSHIP_CHANGE:
        /* News about a generation newer than ours is about the one next() is
         * forming: the rendezvous made us a member, and the generation ended
         * (a member lost, our own fence) while the call still runs (its job
         * store attach, the memory tier's plan). Dropping it would start
         * workers for a generation nobody ends again: kept for NEXT's return. */
        if (in->generation > m->generation) {
            m->held_change = in->generation;
            act(out, AGENT_ACT_HOLD_CHANGE);
        }
        break;
    default: break;
    }
}

/* RUNNING x a reaped worker: the job's end here, or a failure. */
static void worker_exited(agent_machine *m, const agent_input *in, agent_actions *out)
{
    if (in->exit_code == 0) {
        if (++m->succeeded < m->nworkers) return;
        begin_ending(m, out, 0, AGENT_END_SUCCEEDED, AGENT_CALL_FINISH, AGENT_SUMMARY_NONE);
        return;
    }
    local_failure(m, out, false);
    m->local_failures++; /* a crash loop is the failure policy's to find (DECIDED) */
}

/* RUNNING x the generation ended elsewhere (or we were fenced) -> STOPPING. */
static void generation_ended(agent_machine *m, const agent_input *in, agent_actions *out)
{
    if (in->generation != m->generation) return;
    /* Our own eviction, told by the rendezvous before the call is back: the
     * call's result stops the workers for the quarantine, not a restart. */
    if (m->evict_in_flight && in->cause_kind == ELASTIC_RDZV_NODE_LEFT && in->about_me) return;
    act(out, AGENT_ACT_GENERATION_ENDED);
    stop_workers(m, out, AGENT_STOP_FOR_RESTART);
    /* A worker's failure there: ours failing by themselves now may be the same
     * bug. A lost node's end is not: ours failing of it are its consequence. */
    m->stop_for_failure = in->cause_kind == ELASTIC_RDZV_FAILURE;
    if (is_fenced(in)) act(out, AGENT_ACT_KILL_WORKERS); /* now, not after a grace period */
}

/* RUNNING x the checkpoint replicas diverged (silent data corruption; the
 * step is committed nowhere). Warn mode: reported only. The node whose
 * replica the majority does not hold steps aside as if unhealthy (a spare
 * takes its place; the job restores the newest step the replicas agreed on);
 * the others wait for that. No majority: nobody can say which copy is right,
 * so the job stops (every node hears the same evidence and stops). */
static void diverged(agent_machine *m, const agent_input *in, agent_actions *out)
{
    if (in->warn) return;
    if (in->no_majority) {
        stop_workers(m, out, AGENT_STOP_FOR_DIVERGENCE);
        return;
    }
    if (in->minority && !m->evict_in_flight) act(out, AGENT_ACT_STEP_ASIDE_DIVERGED);
}

static void on_running(agent_machine *m, const agent_input *in, agent_actions *out)
{
    switch (in->kind) {
    case AGENT_IN_WORKER_EXITED: worker_exited(m, in, out); break;
    case AGENT_IN_WORKER_UNHEALTHY: local_failure(m, out, false); break;
    case AGENT_IN_WORKER_FAULTED: local_failure(m, out, true); break;
    case AGENT_IN_MEMBERSHIP_CHANGE: generation_ended(m, in, out); break;
    case AGENT_IN_STOP_REQUEST: stop_workers(m, out, AGENT_STOP_FOR_SHUTDOWN); break;
    case AGENT_IN_HEALTH:
        /* A fatal round: step aside for a spare; one step-aside at a time. */
        if (in->fatal && !m->evict_in_flight) act(out, AGENT_ACT_STEP_ASIDE_UNHEALTHY);
        break;
    case AGENT_IN_DIVERGED: diverged(m, in, out); break;
    case AGENT_IN_SPARE_PARKED: /* the spare parked, or will not: the waiting slots start */
        if (!m->awaiting_spare) break;
        m->awaiting_spare = false;
        act(out, AGENT_ACT_START_WAITING);
        break;
    case AGENT_IN_EVICTED:
        /* The generation ended by our own eviction (no budget spent): stop the
         * workers now; the quarantine starts once they are gone. */
        act(out, AGENT_ACT_NO_FAILURE);
        stop_workers(m, out, AGENT_STOP_FOR_QUARANTINE);
        break;
    default: break;
    }
}

static void after_stopped(agent_machine *m, agent_actions *out);

bool agent__machine_reads_raised(const agent_machine *m)
{
    return m->state == AGENT_STOPPING && m->stop_for_failure &&
           m->stop_reason == AGENT_STOP_FOR_RESTART;
}

/* A worker that ended by itself, not by our stop: a non-zero exit that is
 * not the shell's form of SIGTERM/SIGKILL, a signal the agent does not
 * send (SIGSEGV, SIGABRT), or one that raised its own error first (a
 * traceback or its error file) and met our SIGTERM as it exited: a bug on
 * every rank at once is raised on each before the first rank's stop. */
static bool failed_by_itself(const agent_input *in)
{
    if (in->raised) return true;
    if (in->term_signal != 0) return in->term_signal != SIGTERM && in->term_signal != SIGKILL;
    return in->exit_code != 0 && in->exit_code != 128 + SIGTERM && in->exit_code != 128 + SIGKILL;
}

/* STOPPING x a worker that failed by itself while the generation stops for
 * a worker's failure (another node's end heard first, or a local rank's): the
 * generation's end was said already, but this rank's own failure goes to
 * the job-wide history too (a CLASSIFY call only: no END, no restart
 * spent), so a bug on most ranks at once stops the job in this generation
 * (most_ranks) and not at its replay. The rejoin waits for its DECIDED. A
 * rank that failed only because a peer died inside a collective is decided
 * a consequence there (its class and the generation's end), not a cause. */
static void failed_while_stopping(agent_machine *m, const agent_input *in, agent_actions *out)
{
    if (!agent__machine_reads_raised(m) || !failed_by_itself(in)) return;
    m->deciding++;
    act(out, AGENT_ACT_CLASSIFY_LATE);
}

/* STOPPING x the failure policy's answer to this node's failure. A
 * deterministic bug stops the job (exit AGENT_EXIT_BUG) instead of the
 * restart; anything else restarts as the rendezvous' budget allows. */
static void decided(agent_machine *m, const agent_input *in, agent_actions *out)
{
    if (in->stop_bug && m->stop_reason == AGENT_STOP_FOR_RESTART)
        m->stop_reason = AGENT_STOP_FOR_BUG;
    /* The policy's node quarantine (this node in K of the job's recent
     * failures, most of them): it stays out for the quarantine and gives up
     * under Slurm (drained with --slurm-drain), as a crash loop. */
    if (in->quarantine && !in->stop_bug && m->stop_reason == AGENT_STOP_FOR_RESTART) {
        m->stop_reason = AGENT_STOP_FOR_QUARANTINE;
        m->quarantined_failing = true;
        act(out, AGENT_ACT_SLURM_GIVE_UP)->give_up = AGENT_GIVE_UP_QUARANTINE;
    }
    /* workers still stopping (SETTLED goes on), or another CLASSIFY still out */
    if (!m->held || m->deciding > 0) return;
    m->held = false;
    after_stopped(m, out);
}

static void on_stopping(agent_machine *m, const agent_input *in, agent_actions *out)
{
    switch (in->kind) {
    case AGENT_IN_ABORT_ACKED: act(out, AGENT_ACT_KEEP_SURVIVOR); break;
    case AGENT_IN_WORKER_EXITED: failed_while_stopping(m, in, out); break;
    case AGENT_IN_STOP_REQUEST:
        m->stop_reason = AGENT_STOP_FOR_SHUTDOWN;
        if (m->held) { /* no need to wait for the decision to leave */
            m->held = false;
            after_stopped(m, out);
        }
        break;
    case AGENT_IN_DECIDED: decided(m, in, out); break;
    default: break;
    }
}

static void on_ending(agent_machine *m, const agent_input *in, agent_actions *out)
{
    switch (in->kind) {
    case AGENT_IN_CALL_DONE:
        if (in->call_kind == AGENT_CALL_FINISH || in->call_kind == AGENT_CALL_LEAVE ||
            in->call_kind == AGENT_CALL_SUMMARY || in->call_kind == AGENT_CALL_CLOSE_JOB)
            end_now(m, out, m->ending_exit_code, m->ending_status, AGENT_SUMMARY_NONE);
        break;
    case AGENT_IN_STOP_REQUEST:
        /* Don't wait for the store to finish or leave; a failed job's summary
         * is its report: that one is waited for. */
        if (m->ending_call != AGENT_CALL_SUMMARY)
            end_now(m, out, m->ending_exit_code, m->ending_status, AGENT_SUMMARY_NONE);
        break;
    default: break;
    }
}

static void on_quarantined(agent_machine *m, const agent_input *in, agent_actions *out)
{
    switch (in->kind) {
    case AGENT_IN_QUARANTINE_OVER:
        act(out, AGENT_ACT_QUARANTINE_ENDED);
        m->rejoining = true;
        begin_rendezvous(m, out);
        break;
    case AGENT_IN_STOP_REQUEST: /* no workers; counted gone: nothing to leave */
        act(out, AGENT_ACT_STOP_QUARANTINE_TIMER);
        end_now(m, out, 128 + m->stop_signal, AGENT_END_STOPPED,
                AGENT_SUMMARY_STOPPED_IN_QUARANTINE);
        break;
    default: break;
    }
}

/* THE "every worker stopped" check, after each event the runner handled:
 * every worker is reaped (but those in-process recovery keeps) and its
 * output drained, so the generation is over here. */
static void settled(agent_machine *m, const agent_input *in, agent_actions *out)
{
    if (m->state != AGENT_STOPPING || m->held || m->running > in->kept || m->closing_streams > 0)
        return;
    act(out, AGENT_ACT_GENERATION_STOPPED);
    /* A restart waits for the failure policy's decision on this node's
     * failure: the job may stop instead (DECIDED releases it). */
    if (m->deciding > 0 && m->stop_reason == AGENT_STOP_FOR_RESTART) {
        m->held = true;
        return;
    }
    after_stopped(m, out);
}

/* STOPPING, every worker stopped: what the stop was for. */
static void after_stopped(agent_machine *m, agent_actions *out)
{
    switch (m->stop_reason) {
    case AGENT_STOP_FOR_SHUTDOWN: finish_shutdown(m, out); break;
    case AGENT_STOP_FOR_QUARANTINE: begin_quarantine(m, out); break;
    case AGENT_STOP_FOR_DIVERGENCE: /* leave: the others stop for the same evidence */
        begin_ending(m, out, 1, AGENT_END_FAILED, AGENT_CALL_LEAVE, AGENT_SUMMARY_DIVERGED);
        break;
    case AGENT_STOP_FOR_BUG: /* close the job: the others read why and exit the same way */
        begin_ending(m, out, AGENT_EXIT_BUG, AGENT_END_FAILED, AGENT_CALL_CLOSE_JOB,
                     AGENT_SUMMARY_BUG);
        break;
    default: begin_rendezvous(m, out); break;
    }
}

/* ---- any state first ------------------------------------------------------------------------ */

/* What the input means whatever the state; false when that is all it means. */
static bool in_any_state(agent_machine *m, const agent_input *in, agent_actions *out)
{
    switch (in->kind) {
    case AGENT_IN_WORKER_STARTED: m->running++; return false;
    case AGENT_IN_WORKER_EXITED:
        m->running--;
        m->closing_streams += in->streams_closing;
        return true;
    case AGENT_IN_STREAM_CLOSED: m->closing_streams--; return false;
    case AGENT_IN_GRACE_EXPIRED: act(out, AGENT_ACT_KILL_WORKERS); return false;
    case AGENT_IN_EVICT_ASKED: m->evict_in_flight = true; return false;
    case AGENT_IN_SETTLED: settled(m, in, out); return false;
    case AGENT_IN_CALL_DONE:
        if (in->call_kind == AGENT_CALL_EVICT) m->evict_in_flight = false;
        return true;
    case AGENT_IN_EVICTED:
        if (in->unhealthy) m->stepped_aside_unhealthy = true;
        return true;
    case AGENT_IN_DECIDED:
        if (m->deciding > 0) m->deciding--;
        return true;
    case AGENT_IN_MEMBERSHIP_CHANGE:
        if (is_fenced(in) && in->generation == m->generation) {
            m->fenced = true;
            act(out, AGENT_ACT_FENCED);
            if (++m->fenced_count >= AGENT_GIVE_UP_FENCES)
                act(out, AGENT_ACT_SLURM_GIVE_UP)->give_up = AGENT_GIVE_UP_FENCED;
        }
        return true;
    case AGENT_IN_STOP_REQUEST:
        if (m->stop_signal != 0) return false; /* the first one counts */
        m->stop_signal = in->signum > 0 ? in->signum : SIGTERM;
        act(out, AGENT_ACT_LOG_STOP_REQUEST);
        return true;
    default: return true;
    }
}

void agent__machine_init(agent_machine *m)
{
    *m = (agent_machine){ .state = AGENT_IDLE,
                          .health_recheck = true, /* the first join waits for the first round */
                          .ending_call = AGENT_CALL_LEAVE };
}

void agent__machine_step(agent_machine *m, const agent_input *in, agent_actions *out)
{
    out->count = 0;
    if (!in_any_state(m, in, out)) return;
    switch (m->state) {
    case AGENT_IDLE: on_idle(m, in, out); break;
    case AGENT_RENDEZVOUS: on_rendezvous(m, in, out); break;
    case AGENT_RUNNING: on_running(m, in, out); break;
    case AGENT_STOPPING: on_stopping(m, in, out); break;
    case AGENT_ENDING: on_ending(m, in, out); break;
    case AGENT_QUARANTINED: on_quarantined(m, in, out); break;
    case AGENT_DONE: break; /* stop_signal tells a store host to stop serving */
    }
}
