/*
 * The agent's decisions (src/agent/machine.c), driven row by row with no
 * process, socket, timer or clock: each case puts a machine in a state,
 * feeds one input and checks the actions, in order, and the next state.
 * Every row of the state x input table in docs/ARCHITECTURE.md names its
 * case (last column), and agent_machine_docs_table_matches_cases checks
 * both ways that the docs and these cases agree.
 */
#include "agent/machine.h"
#include "test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define END_OF_ACTIONS (-1)
#define ANY_STATE      (-1) /* a case of the "any" rows: run from `run_from`, state kept */

typedef struct machine_case {
    const char *name;
    int from;                              /* agent_state, or ANY_STATE */
    void (*given)(agent_machine *m);       /* what else is true before the input; NULL: nothing */
    agent_input in;
    int actions[AGENT_MACHINE_MAX_ACTIONS]; /* agent_action_kind..., END_OF_ACTIONS */
    agent_state to;                        /* ignored for ANY_STATE: the state must not change */
} machine_case;

/* A machine as it is in `state` along the usual path: generation 5 of a job
 * with 2 local workers, one generation formed here, health rechecked. */
static agent_machine machine_in(agent_state state)
{
    agent_machine m;
    agent__machine_init(&m);
    m.quarantine_ms = 60000;
    if (state == AGENT_IDLE) return m;
    m.generations = 1;
    m.generation = 5;
    m.nworkers = 2;
    m.health_recheck = false;
    m.state = state;
    switch (state) {
    case AGENT_RUNNING: m.running = 2; break;
    case AGENT_STOPPING:
        m.stop_reason = AGENT_STOP_FOR_RESTART;
        m.running = 1; /* one still to reap */
        m.health_recheck = true;
        break;
    case AGENT_ENDING: m.ending_call = AGENT_CALL_FINISH; break;
    case AGENT_QUARANTINED: m.health_recheck = true; break;
    default: break;
    }
    return m;
}

/* ---- the facts a case adds ------------------------------------------------------------ */

static void stop_asked(agent_machine *m)
{
    m->stop_signal = SIGTERM;
}
static void gating(agent_machine *m)
{
    m->health_gating = true;
    m->health_recheck = true;
}
static void gating_first_join(agent_machine *m)
{
    gating(m);
    m->generations = 0;
}
static void one_survivor(agent_machine *m)
{
    m->running = 1; /* in-process recovery kept one worker; the other slot is dead */
}
static void awaiting_spare(agent_machine *m)
{
    m->awaiting_spare = true; /* a dead slot waits for a starting spare */
    m->running = 1;
}
static void one_succeeded(agent_machine *m)
{
    m->succeeded = 1;
}
static void two_failed_before(agent_machine *m)
{
    m->local_failures = 2;
    m->restart_count = 2;
}
static void evict_in_flight(agent_machine *m)
{
    m->evict_in_flight = true;
}
static void all_reaped(agent_machine *m)
{
    m->running = 0;
}
static void survivor_left(agent_machine *m)
{
    m->running = 1; /* kept by in-process recovery (the case's kept = 1) */
}
static void output_draining(agent_machine *m)
{
    m->running = 0;
    m->closing_streams = 1;
}
static void shutdown_reaped(agent_machine *m)
{
    m->running = 0;
    m->stop_reason = AGENT_STOP_FOR_SHUTDOWN;
    m->stop_signal = SIGTERM;
}
static void shutdown_reaped_fenced(agent_machine *m)
{
    shutdown_reaped(m);
    m->fenced = true;
}
static void quarantine_reaped(agent_machine *m)
{
    m->running = 0;
    m->stop_reason = AGENT_STOP_FOR_QUARANTINE;
}
static void quarantine_zero_reaped(agent_machine *m)
{
    quarantine_reaped(m);
    m->quarantine_ms = 0;
}
static void quarantine_zero_unhealthy_reaped(agent_machine *m)
{
    quarantine_zero_reaped(m);
    m->stepped_aside_unhealthy = true;
}
static void ending_summary(agent_machine *m)
{
    m->ending_call = AGENT_CALL_SUMMARY;
}
static void ending_leave(agent_machine *m)
{
    m->ending_call = AGENT_CALL_LEAVE;
}
static void diverged_reaped(agent_machine *m)
{
    m->running = 0;
    m->stop_reason = AGENT_STOP_FOR_DIVERGENCE;
}
static void deciding(agent_machine *m)
{
    m->deciding = true; /* a local failure's CLASSIFY call is out; one worker still to reap */
}
static void deciding_reaped(agent_machine *m)
{
    m->deciding = true;
    m->running = 0;
}
static void held(agent_machine *m)
{
    m->deciding = m->held = true;
    m->running = 0;
}
static void ending_close_job(agent_machine *m)
{
    m->ending_call = AGENT_CALL_CLOSE_JOB;
    m->ending_exit_code = AGENT_EXIT_BUG;
    m->ending_status = AGENT_END_FAILED;
}
static void failure_stop(agent_machine *m)
{
    m->stop_for_failure = true; /* stopping for a worker's failure (here or elsewhere) */
}
static void held_two_deciding(agent_machine *m)
{
    held(m);
    m->deciding = 2; /* a late failure's CLASSIFY is out too */
}
static void fenced_twice(agent_machine *m)
{
    m->fenced_count = 2;
}
static void news_of_6_held(agent_machine *m)
{
    m->held_change = 6; /* generation 6 ended while next() was forming it */
}

#define A(...) { __VA_ARGS__, END_OF_ACTIONS }
#define NONE   { END_OF_ACTIONS }
#define CALL_BACK(ckind_, result_) \
    { .kind = AGENT_IN_CALL_DONE, .call_kind = (ckind_), .rc = (result_), .generation = 6, .nworkers = 2 }
#define CHANGE(ckind, gen, me) \
    { .kind = AGENT_IN_MEMBERSHIP_CHANGE, .cause_kind = (ckind), .generation = (gen), .about_me = (me) }

/* clang-format off */
static const machine_case cases[] = {
    /* IDLE */
    { "idle_start_asks_health_gate", AGENT_IDLE, NULL,
      { .kind = AGENT_IN_START, .quarantine_ms = 60000 },
      A(AGENT_ACT_BEGIN_RENDEZVOUS, AGENT_ACT_ASK_HEALTH_GATE), AGENT_RENDEZVOUS },
    { "idle_stop_leaves", AGENT_IDLE, NULL, { .kind = AGENT_IN_STOP_REQUEST, .signum = SIGTERM },
      A(AGENT_ACT_LOG_STOP_REQUEST, AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    /* RENDEZVOUS */
    { "rendezvous_formed_runs", AGENT_RENDEZVOUS, NULL, CALL_BACK(AGENT_CALL_NEXT, 0),
      A(AGENT_ACT_GENERATION_FORMED), AGENT_RUNNING },
    { "rendezvous_formed_waits_for_a_starting_spare", AGENT_RENDEZVOUS, one_survivor,
      { .kind = AGENT_IN_CALL_DONE, .call_kind = AGENT_CALL_NEXT, .generation = 6, .nworkers = 2,
        .spares_starting = 1 },
      A(AGENT_ACT_GENERATION_FORMED), AGENT_RUNNING },
    { "rendezvous_formed_a_parked_spare_needs_no_wait", AGENT_RENDEZVOUS, one_survivor,
      { .kind = AGENT_IN_CALL_DONE, .call_kind = AGENT_CALL_NEXT, .generation = 6, .nworkers = 2,
        .spares_parked = 1, .spares_starting = 1 },
      A(AGENT_ACT_GENERATION_FORMED), AGENT_RUNNING },
    { "rendezvous_formed_after_stop_leaves", AGENT_RENDEZVOUS, stop_asked,
      CALL_BACK(AGENT_CALL_NEXT, 0), A(AGENT_ACT_ADOPT_RESULT, AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    { "rendezvous_closed_finished_left_out", AGENT_RENDEZVOUS, NULL,
      { .kind = AGENT_IN_CALL_DONE, .call_kind = AGENT_CALL_NEXT, .rc = ELASTIC_ECLOSED,
        .closed_finished = true },
      A(AGENT_ACT_END_NOW), AGENT_DONE },
    { "rendezvous_closed_for_bug_exits_70", AGENT_RENDEZVOUS, NULL,
      { .kind = AGENT_IN_CALL_DONE, .call_kind = AGENT_CALL_NEXT, .rc = ELASTIC_ECLOSED,
        .closed_bug = true },
      A(AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    { "rendezvous_closed_infra_bound_exits_69", AGENT_RENDEZVOUS, NULL,
      { .kind = AGENT_IN_CALL_DONE, .call_kind = AGENT_CALL_NEXT, .rc = ELASTIC_ECLOSED,
        .closed_infra = true },
      A(AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    { "rendezvous_failed_summary", AGENT_RENDEZVOUS, NULL, CALL_BACK(AGENT_CALL_NEXT, ELASTIC_ECLOSED),
      A(AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    { "rendezvous_too_few_nodes_drains_lost", AGENT_RENDEZVOUS, NULL,
      CALL_BACK(AGENT_CALL_NEXT, ELASTIC_ENOTENOUGH),
      A(AGENT_ACT_SLURM_DRAIN_LOST, AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    { "rendezvous_stop_ends_now", AGENT_RENDEZVOUS, NULL,
      { .kind = AGENT_IN_STOP_REQUEST, .signum = SIGINT },
      A(AGENT_ACT_LOG_STOP_REQUEST, AGENT_ACT_END_NOW), AGENT_DONE },
    { "rendezvous_health_gate_go_joins", AGENT_RENDEZVOUS, NULL,
      { .kind = AGENT_IN_HEALTH_GATE, .gate = AGENT_HEALTH_GO }, A(AGENT_ACT_JOIN), AGENT_RENDEZVOUS },
    { "rendezvous_health_gate_wait", AGENT_RENDEZVOUS, NULL,
      { .kind = AGENT_IN_HEALTH_GATE, .gate = AGENT_HEALTH_WAIT }, NONE, AGENT_RENDEZVOUS },
    { "rendezvous_health_gate_stop_first_join", AGENT_RENDEZVOUS, gating_first_join,
      { .kind = AGENT_IN_HEALTH_GATE, .gate = AGENT_HEALTH_STOP },
      A(AGENT_ACT_SAY_UNHEALTHY, AGENT_ACT_END_NOW), AGENT_DONE },
    { "rendezvous_health_round_joins", AGENT_RENDEZVOUS, gating,
      { .kind = AGENT_IN_HEALTH, .gate_done = true }, A(AGENT_ACT_JOIN), AGENT_RENDEZVOUS },
    { "rendezvous_health_round_fatal_member_leaves", AGENT_RENDEZVOUS, gating,
      { .kind = AGENT_IN_HEALTH, .gate_done = true, .fatal = true },
      A(AGENT_ACT_SAY_UNHEALTHY, AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    { "rendezvous_health_round_not_asked_for", AGENT_RENDEZVOUS, gating,
      { .kind = AGENT_IN_HEALTH, .gate_done = false, .fatal = true }, NONE, AGENT_RENDEZVOUS },
    { "rendezvous_news_of_the_forming_generation_is_held", AGENT_RENDEZVOUS, NULL,
      CHANGE(ELASTIC_RDZV_NODE_LOST, 6, false), A(AGENT_ACT_HOLD_CHANGE), AGENT_RENDEZVOUS },
    { "rendezvous_news_of_the_last_generation_is_ignored", AGENT_RENDEZVOUS, NULL,
      CHANGE(ELASTIC_RDZV_NODE_LOST, 5, false), NONE, AGENT_RENDEZVOUS },
    { "rendezvous_formed_after_its_end_replays_the_news", AGENT_RENDEZVOUS, news_of_6_held,
      CALL_BACK(AGENT_CALL_NEXT, 0), A(AGENT_ACT_GENERATION_FORMED, AGENT_ACT_REPLAY_CHANGE),
      AGENT_RUNNING },
    /* RUNNING */
    { "running_health_fatal_steps_aside", AGENT_RUNNING, NULL,
      { .kind = AGENT_IN_HEALTH, .fatal = true }, A(AGENT_ACT_STEP_ASIDE_UNHEALTHY), AGENT_RUNNING },
    { "running_health_fatal_evict_in_flight", AGENT_RUNNING, evict_in_flight,
      { .kind = AGENT_IN_HEALTH, .fatal = true }, NONE, AGENT_RUNNING },
    { "running_one_exited_zero_waits", AGENT_RUNNING, NULL,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = 0 }, NONE, AGENT_RUNNING },
    { "running_all_exited_zero_finishes", AGENT_RUNNING, one_succeeded,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = 0 }, A(AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    { "running_worker_failed", AGENT_RUNNING, NULL,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = 3 },
      A(AGENT_ACT_FAILURE, AGENT_ACT_STOP_WORKERS, AGENT_ACT_REPORT_FAILURE, AGENT_ACT_CLASSIFY), AGENT_STOPPING },
    { "running_third_failure_left_to_the_policy", AGENT_RUNNING, two_failed_before,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = -1, .term_signal = SIGSEGV },
      A(AGENT_ACT_FAILURE, AGENT_ACT_STOP_WORKERS, AGENT_ACT_REPORT_FAILURE, AGENT_ACT_CLASSIFY),
      AGENT_STOPPING },
    { "running_worker_unhealthy", AGENT_RUNNING, NULL,
      { .kind = AGENT_IN_WORKER_UNHEALTHY, .exit_code = -1 },
      A(AGENT_ACT_FAILURE, AGENT_ACT_STOP_WORKERS, AGENT_ACT_REPORT_FAILURE, AGENT_ACT_CLASSIFY), AGENT_STOPPING },
    { "running_worker_faulted_kept", AGENT_RUNNING, NULL, { .kind = AGENT_IN_WORKER_FAULTED },
      A(AGENT_ACT_FAILURE, AGENT_ACT_STOP_WORKERS, AGENT_ACT_REPORT_FAILURE, AGENT_ACT_CLASSIFY), AGENT_STOPPING },
    { "running_generation_ended_elsewhere", AGENT_RUNNING, NULL,
      CHANGE(ELASTIC_RDZV_FAILURE, 5, false),
      A(AGENT_ACT_GENERATION_ENDED, AGENT_ACT_STOP_WORKERS), AGENT_STOPPING },
    { "running_fenced_kills_now", AGENT_RUNNING, NULL, CHANGE(ELASTIC_RDZV_FENCED, 5, true),
      A(AGENT_ACT_FENCED, AGENT_ACT_GENERATION_ENDED, AGENT_ACT_STOP_WORKERS,
        AGENT_ACT_KILL_WORKERS), AGENT_STOPPING },
    { "running_old_generation_ignored", AGENT_RUNNING, NULL, CHANGE(ELASTIC_RDZV_NODE_LOST, 4, false),
      NONE, AGENT_RUNNING },
    { "running_own_eviction_news_ignored", AGENT_RUNNING, evict_in_flight,
      CHANGE(ELASTIC_RDZV_NODE_LEFT, 5, true), NONE, AGENT_RUNNING },
    { "running_stop_shuts_down", AGENT_RUNNING, NULL, { .kind = AGENT_IN_STOP_REQUEST },
      A(AGENT_ACT_LOG_STOP_REQUEST, AGENT_ACT_STOP_WORKERS), AGENT_STOPPING },
    { "running_evicted_quarantines", AGENT_RUNNING, NULL, { .kind = AGENT_IN_EVICTED },
      A(AGENT_ACT_NO_FAILURE, AGENT_ACT_STOP_WORKERS), AGENT_STOPPING },
    { "running_diverged_minority_steps_aside", AGENT_RUNNING, NULL,
      { .kind = AGENT_IN_DIVERGED, .minority = true }, A(AGENT_ACT_STEP_ASIDE_DIVERGED),
      AGENT_RUNNING },
    { "running_diverged_minority_evict_in_flight", AGENT_RUNNING, evict_in_flight,
      { .kind = AGENT_IN_DIVERGED, .minority = true }, NONE, AGENT_RUNNING },
    { "running_diverged_majority_waits", AGENT_RUNNING, NULL, { .kind = AGENT_IN_DIVERGED }, NONE,
      AGENT_RUNNING },
    { "running_diverged_no_majority_stops", AGENT_RUNNING, NULL,
      { .kind = AGENT_IN_DIVERGED, .no_majority = true }, A(AGENT_ACT_STOP_WORKERS),
      AGENT_STOPPING },
    { "running_diverged_warn_reports_only", AGENT_RUNNING, NULL,
      { .kind = AGENT_IN_DIVERGED, .minority = true, .no_majority = true, .warn = true }, NONE,
      AGENT_RUNNING },
    { "running_spare_parked_starts_the_waiting_slot", AGENT_RUNNING, awaiting_spare,
      { .kind = AGENT_IN_SPARE_PARKED }, A(AGENT_ACT_START_WAITING), AGENT_RUNNING },
    { "running_spare_parked_nothing_waits", AGENT_RUNNING, NULL, { .kind = AGENT_IN_SPARE_PARKED },
      NONE, AGENT_RUNNING },
    /* STOPPING */
    { "stopping_spare_parked_ignored", AGENT_STOPPING, NULL, { .kind = AGENT_IN_SPARE_PARKED }, NONE,
      AGENT_STOPPING },
    { "stopping_abort_acked_keeps_survivor", AGENT_STOPPING, NULL, { .kind = AGENT_IN_ABORT_ACKED },
      A(AGENT_ACT_KEEP_SURVIVOR), AGENT_STOPPING },
    { "stopping_stop_becomes_shutdown", AGENT_STOPPING, NULL, { .kind = AGENT_IN_STOP_REQUEST },
      A(AGENT_ACT_LOG_STOP_REQUEST), AGENT_STOPPING },
    { "stopping_waits_for_workers", AGENT_STOPPING, NULL, { .kind = AGENT_IN_SETTLED }, NONE,
      AGENT_STOPPING },
    { "stopping_waits_for_output", AGENT_STOPPING, output_draining, { .kind = AGENT_IN_SETTLED },
      NONE, AGENT_STOPPING },
    { "stopping_stopped_restarts", AGENT_STOPPING, all_reaped, { .kind = AGENT_IN_SETTLED },
      A(AGENT_ACT_GENERATION_STOPPED, AGENT_ACT_BEGIN_RENDEZVOUS, AGENT_ACT_ASK_HEALTH_GATE),
      AGENT_RENDEZVOUS },
    { "stopping_kept_survivors_count_as_stopped", AGENT_STOPPING, survivor_left,
      { .kind = AGENT_IN_SETTLED, .kept = 1 },
      A(AGENT_ACT_GENERATION_STOPPED, AGENT_ACT_BEGIN_RENDEZVOUS, AGENT_ACT_ASK_HEALTH_GATE),
      AGENT_RENDEZVOUS },
    { "stopping_stopped_shutdown_leaves", AGENT_STOPPING, shutdown_reaped,
      { .kind = AGENT_IN_SETTLED }, A(AGENT_ACT_GENERATION_STOPPED, AGENT_ACT_BEGIN_ENDING),
      AGENT_ENDING },
    { "stopping_stopped_shutdown_fenced_ends", AGENT_STOPPING, shutdown_reaped_fenced,
      { .kind = AGENT_IN_SETTLED }, A(AGENT_ACT_GENERATION_STOPPED, AGENT_ACT_END_NOW), AGENT_DONE },
    { "stopping_stopped_quarantine", AGENT_STOPPING, quarantine_reaped, { .kind = AGENT_IN_SETTLED },
      A(AGENT_ACT_GENERATION_STOPPED, AGENT_ACT_QUARANTINE), AGENT_QUARANTINED },
    { "stopping_stopped_quarantine_zero_evicted", AGENT_STOPPING, quarantine_zero_reaped,
      { .kind = AGENT_IN_SETTLED }, A(AGENT_ACT_GENERATION_STOPPED, AGENT_ACT_END_NOW), AGENT_DONE },
    { "stopping_stopped_quarantine_zero_unhealthy", AGENT_STOPPING, quarantine_zero_unhealthy_reaped,
      { .kind = AGENT_IN_SETTLED }, A(AGENT_ACT_GENERATION_STOPPED, AGENT_ACT_END_NOW), AGENT_DONE },
    { "stopping_stopped_diverged_leaves_failed", AGENT_STOPPING, diverged_reaped,
      { .kind = AGENT_IN_SETTLED }, A(AGENT_ACT_GENERATION_STOPPED, AGENT_ACT_BEGIN_ENDING),
      AGENT_ENDING },
    { "stopping_stopped_holds_for_decision", AGENT_STOPPING, deciding_reaped,
      { .kind = AGENT_IN_SETTLED }, A(AGENT_ACT_GENERATION_STOPPED), AGENT_STOPPING },
    { "stopping_held_settled_again_nothing", AGENT_STOPPING, held, { .kind = AGENT_IN_SETTLED },
      NONE, AGENT_STOPPING },
    { "stopping_held_decided_restart_rejoins", AGENT_STOPPING, held, { .kind = AGENT_IN_DECIDED },
      A(AGENT_ACT_BEGIN_RENDEZVOUS, AGENT_ACT_ASK_HEALTH_GATE), AGENT_RENDEZVOUS },
    { "stopping_held_decided_bug_closes_job", AGENT_STOPPING, held,
      { .kind = AGENT_IN_DECIDED, .stop_bug = true }, A(AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    { "stopping_decided_bug_before_stopped", AGENT_STOPPING, deciding,
      { .kind = AGENT_IN_DECIDED, .stop_bug = true }, NONE, AGENT_STOPPING },
    { "stopping_held_decided_quarantine_steps_aside", AGENT_STOPPING, held,
      { .kind = AGENT_IN_DECIDED, .quarantine = true },
      A(AGENT_ACT_SLURM_GIVE_UP, AGENT_ACT_QUARANTINE), AGENT_QUARANTINED },
    { "stopping_decided_quarantine_before_stopped", AGENT_STOPPING, deciding,
      { .kind = AGENT_IN_DECIDED, .quarantine = true }, A(AGENT_ACT_SLURM_GIVE_UP),
      AGENT_STOPPING },
    { "stopping_held_stop_leaves", AGENT_STOPPING, held, { .kind = AGENT_IN_STOP_REQUEST },
      A(AGENT_ACT_LOG_STOP_REQUEST, AGENT_ACT_BEGIN_ENDING), AGENT_ENDING },
    { "stopping_worker_failed_by_itself_classified", AGENT_STOPPING, failure_stop,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = 1 }, A(AGENT_ACT_CLASSIFY_LATE), AGENT_STOPPING },
    { "stopping_worker_crashed_by_itself_classified", AGENT_STOPPING, failure_stop,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = -1, .term_signal = SIGSEGV },
      A(AGENT_ACT_CLASSIFY_LATE), AGENT_STOPPING },
    { "stopping_worker_ended_by_our_signal_not_classified", AGENT_STOPPING, failure_stop,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = -1, .term_signal = SIGTERM }, NONE,
      AGENT_STOPPING },
    { "stopping_worker_raised_before_our_signal_classified", AGENT_STOPPING, failure_stop,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = -1, .term_signal = SIGTERM, .raised = true },
      A(AGENT_ACT_CLASSIFY_LATE), AGENT_STOPPING },
    { "stopping_worker_exit_143_not_classified", AGENT_STOPPING, failure_stop,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = 128 + SIGTERM }, NONE, AGENT_STOPPING },
    { "stopping_worker_failed_after_node_lost_not_classified", AGENT_STOPPING, NULL,
      { .kind = AGENT_IN_WORKER_EXITED, .exit_code = 1 }, NONE, AGENT_STOPPING },
    { "stopping_held_decided_waits_for_late_classify", AGENT_STOPPING, held_two_deciding,
      { .kind = AGENT_IN_DECIDED }, NONE, AGENT_STOPPING },
    /* ENDING */
    { "ending_close_job_back_ends", AGENT_ENDING, ending_close_job,
      CALL_BACK(AGENT_CALL_CLOSE_JOB, 0), A(AGENT_ACT_END_NOW), AGENT_DONE },
    { "ending_decided_ignored", AGENT_ENDING, NULL, { .kind = AGENT_IN_DECIDED, .stop_bug = true },
      NONE, AGENT_ENDING },
    { "ending_call_back_ends", AGENT_ENDING, NULL, CALL_BACK(AGENT_CALL_FINISH, 0),
      A(AGENT_ACT_END_NOW), AGENT_DONE },
    { "ending_other_call_back_waits", AGENT_ENDING, NULL, CALL_BACK(AGENT_CALL_SHARE_FAILURE, 0),
      NONE, AGENT_ENDING },
    { "ending_stop_ends_now", AGENT_ENDING, ending_leave, { .kind = AGENT_IN_STOP_REQUEST },
      A(AGENT_ACT_LOG_STOP_REQUEST, AGENT_ACT_END_NOW), AGENT_DONE },
    { "ending_stop_waits_for_summary", AGENT_ENDING, ending_summary, { .kind = AGENT_IN_STOP_REQUEST },
      A(AGENT_ACT_LOG_STOP_REQUEST), AGENT_ENDING },
    /* QUARANTINED */
    { "quarantined_timer_rejoins", AGENT_QUARANTINED, NULL, { .kind = AGENT_IN_QUARANTINE_OVER },
      A(AGENT_ACT_QUARANTINE_ENDED, AGENT_ACT_BEGIN_RENDEZVOUS, AGENT_ACT_ASK_HEALTH_GATE),
      AGENT_RENDEZVOUS },
    { "quarantined_stop_ends_now", AGENT_QUARANTINED, NULL, { .kind = AGENT_IN_STOP_REQUEST },
      A(AGENT_ACT_LOG_STOP_REQUEST, AGENT_ACT_STOP_QUARANTINE_TIMER, AGENT_ACT_END_NOW), AGENT_DONE },
    /* DONE */
    { "done_stop_remembered", AGENT_DONE, NULL, { .kind = AGENT_IN_STOP_REQUEST },
      A(AGENT_ACT_LOG_STOP_REQUEST), AGENT_DONE },
    /* any state (run from STOPPING: the state must not change) */
    { "any_grace_expired_kills", ANY_STATE, NULL, { .kind = AGENT_IN_GRACE_EXPIRED },
      A(AGENT_ACT_KILL_WORKERS), AGENT_STOPPING },
    { "any_stream_closed_counts", ANY_STATE, output_draining, { .kind = AGENT_IN_STREAM_CLOSED },
      NONE, AGENT_STOPPING },
    { "any_worker_started_counts", ANY_STATE, NULL, { .kind = AGENT_IN_WORKER_STARTED }, NONE,
      AGENT_STOPPING },
    { "any_fenced_said", ANY_STATE, NULL, CHANGE(ELASTIC_RDZV_NODE_LOST, 5, true),
      A(AGENT_ACT_FENCED), AGENT_STOPPING },
    { "any_third_fence_gives_up", ANY_STATE, fenced_twice, CHANGE(ELASTIC_RDZV_FENCED, 5, true),
      A(AGENT_ACT_FENCED, AGENT_ACT_SLURM_GIVE_UP), AGENT_STOPPING },
    { "any_second_stop_ignored", ANY_STATE, stop_asked, { .kind = AGENT_IN_STOP_REQUEST }, NONE,
      AGENT_STOPPING },
    { "any_evict_call_back_clears_flag", ANY_STATE, evict_in_flight,
      CALL_BACK(AGENT_CALL_EVICT, 0), NONE, AGENT_STOPPING },
};
/* clang-format on */
#define NCASES ((int)(sizeof cases / sizeof *cases))

/* "stop_workers, begin_ending" */
static void describe(const int *kinds, int count, char *out, size_t size)
{
    out[0] = '\0';
    for (int i = 0; i < count; i++) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%s", i > 0 ? ", " : "",
                 agent__action_name((agent_action_kind)kinds[i]));
    }
    if (count == 0) snprintf(out, size, "(none)");
}

/* Runs one case; the machine afterwards in *after. */
static void run_case(const machine_case *c, agent_machine *after)
{
    agent_machine m = machine_in(c->from == ANY_STATE ? AGENT_STOPPING : (agent_state)c->from);
    if (c->given != NULL) c->given(&m);
    agent_actions out;
    agent__machine_step(&m, &c->in, &out);
    int want = 0, got[AGENT_MACHINE_MAX_ACTIONS];
    while (want < AGENT_MACHINE_MAX_ACTIONS && c->actions[want] != END_OF_ACTIONS) want++;
    for (int i = 0; i < out.count; i++) got[i] = out.at[i].kind;
    bool same = want == out.count;
    for (int i = 0; same && i < want; i++) same = got[i] == c->actions[i];
    if (!same) {
        char w[512], g[512];
        describe(c->actions, want, w, sizeof w);
        describe(got, out.count, g, sizeof g);
        FAIL("%s: actions [%s], expected [%s]", c->name, g, w);
    }
    agent_state to = c->from == ANY_STATE ? AGENT_STOPPING : c->to;
    if (m.state != to)
        FAIL("%s: ends in %s, expected %s", c->name, agent__state_name(m.state),
             agent__state_name(to));
    *after = m;
}

static void run_cases_from(int from)
{
    int ran = 0;
    for (int i = 0; i < NCASES; i++) {
        if (cases[i].from != from) continue;
        agent_machine after;
        run_case(&cases[i], &after);
        ran++;
    }
    ASSERT(ran > 0);
}

TEST(agent_machine_idle)
{
    run_cases_from(AGENT_IDLE);
}
TEST(agent_machine_rendezvous)
{
    run_cases_from(AGENT_RENDEZVOUS);
}
TEST(agent_machine_running)
{
    run_cases_from(AGENT_RUNNING);
}
TEST(agent_machine_stopping)
{
    run_cases_from(AGENT_STOPPING);
}
TEST(agent_machine_ending)
{
    run_cases_from(AGENT_ENDING);
}
TEST(agent_machine_quarantined)
{
    run_cases_from(AGENT_QUARANTINED);
}
TEST(agent_machine_done)
{
    run_cases_from(AGENT_DONE);
}
TEST(agent_machine_any_state)
{
    run_cases_from(ANY_STATE);
}

static const machine_case *find_case(const char *name)
{
    for (int i = 0; i < NCASES; i++)
        if (strcmp(cases[i].name, name) == 0) return &cases[i];
    return NULL;
}

/* The runner reads a stopped worker's words (error file, stderr tail) only
 * where the machine uses them: while the generation stops for a failure, to
 * restart. Everywhere else `raised` changes nothing, so it is not read. */
TEST(agent_machine_reads_raised_only_while_stopping_for_a_failure)
{
    agent_machine m = machine_in(AGENT_STOPPING);
    failure_stop(&m);
    ASSERT(agent__machine_reads_raised(&m));
    m.stop_reason = AGENT_STOP_FOR_QUARANTINE; /* our own eviction: no failure to classify */
    ASSERT(!agent__machine_reads_raised(&m));
    m = machine_in(AGENT_STOPPING); /* stopping for a lost node, not a worker's failure */
    ASSERT(!agent__machine_reads_raised(&m));
    const agent_state elsewhere[] = { AGENT_IDLE,   AGENT_RENDEZVOUS,  AGENT_RUNNING,
                                      AGENT_ENDING, AGENT_QUARANTINED, AGENT_DONE };
    for (size_t i = 0; i < sizeof elsewhere / sizeof elsewhere[0]; i++) {
        m = machine_in(elsewhere[i]);
        failure_stop(&m);
        ASSERT(!agent__machine_reads_raised(&m));
    }
    /* And where it reads it, the same exit with and without words differs. */
    agent_actions out;
    agent_input exited = { .kind = AGENT_IN_WORKER_EXITED, .exit_code = -1, .term_signal = SIGTERM };
    m = machine_in(AGENT_STOPPING);
    failure_stop(&m);
    agent__machine_step(&m, &exited, &out);
    ASSERT_EQ(out.count, 0);
    m = machine_in(AGENT_STOPPING);
    failure_stop(&m);
    exited.raised = true;
    agent__machine_step(&m, &exited, &out);
    ASSERT_EQ(out.count, 1);
    ASSERT_EQ(out.at[0].kind, AGENT_ACT_CLASSIFY_LATE);
}

/* The details a row of the table hides: what the actions carry. */
TEST(agent_machine_actions_carry_their_details)
{
    agent_machine after;
    agent_actions out;
    /* A stop's exit code is 128 + its signal; fenced: nothing to leave. */
    agent_machine m = machine_in(AGENT_IDLE);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_STOP_REQUEST, .signum = SIGINT }, &out);
    ASSERT_EQ(out.at[1].exit_code, 128 + SIGINT);
    ASSERT_EQ(out.at[1].call_kind, AGENT_CALL_LEAVE);
    ASSERT_EQ(out.at[1].status, AGENT_END_STOPPED);
    /* Too few nodes: the requeue's exit code. */
    run_case(find_case("rendezvous_too_few_nodes_drains_lost"), &after);
    ASSERT_EQ(after.ending_exit_code, AGENT_EXIT_TOO_FEW_NODES);
    ASSERT_EQ(after.ending_call, AGENT_CALL_SUMMARY);
    /* A formed generation resets the generation's counts. */
    run_case(find_case("rendezvous_formed_runs"), &after);
    ASSERT_EQ(after.generation, 6);
    ASSERT_EQ(after.generations, 2);
    ASSERT_EQ(after.succeeded, 0);
    ASSERT(!after.awaiting_spare); /* no spare starting: nothing waits */
    /* A dead slot no parked spare fills waits for the starting one; a parked one needs no wait. */
    m = machine_in(AGENT_RENDEZVOUS);
    m.running = 1;
    agent__machine_step(&m, &find_case("rendezvous_formed_waits_for_a_starting_spare")->in, &out);
    ASSERT(out.at[0].wait_spare && m.awaiting_spare);
    run_case(find_case("rendezvous_formed_a_parked_spare_needs_no_wait"), &after);
    ASSERT(!after.awaiting_spare);
    m = machine_in(AGENT_RENDEZVOUS); /* nothing dead: nothing to wait for */
    m.running = 2;
    agent__machine_step(&m, &find_case("rendezvous_formed_waits_for_a_starting_spare")->in, &out);
    ASSERT(!out.at[0].wait_spare && !m.awaiting_spare);
    run_case(find_case("running_spare_parked_starts_the_waiting_slot"), &after);
    ASSERT(!after.awaiting_spare); /* once */
    /* A failure while the slot waits: the wait ends with the generation. */
    m = machine_in(AGENT_RUNNING);
    m.awaiting_spare = true;
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_EXITED, .exit_code = 1 }, &out);
    ASSERT_EQ(m.state, AGENT_STOPPING);
    ASSERT(!m.awaiting_spare);
    /* A local failure: rechecked before rejoining; the stop is a restart; the worker kept when faulted. */
    m = machine_in(AGENT_RUNNING);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_FAULTED }, &out);
    ASSERT(m.health_recheck);
    ASSERT_EQ(m.stop_reason, AGENT_STOP_FOR_RESTART);
    ASSERT(out.at[0].keep_worker);
    /* A crash loop is the failure policy's to find: the machine only counts. */
    run_case(find_case("running_third_failure_left_to_the_policy"), &after);
    ASSERT_EQ(after.local_failures, 3);
    /* The policy's quarantine: the node gives up under Slurm (its own kind)
     * and stays out for --straggler-quarantine; with 0, it leaves (exit 0). */
    run_case(find_case("stopping_held_decided_quarantine_steps_aside"), &after);
    ASSERT(after.quarantined_failing && !after.held && !after.deciding);
    m = machine_in(AGENT_STOPPING);
    held(&m);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_DECIDED, .quarantine = true }, &out);
    ASSERT_EQ(out.at[0].give_up, AGENT_GIVE_UP_QUARANTINE);
    ASSERT_EQ(out.at[1].quarantine_ms, 60000);
    m = machine_in(AGENT_STOPPING);
    held(&m);
    m.quarantine_ms = 0;
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_DECIDED, .quarantine = true }, &out);
    ASSERT_EQ(m.state, AGENT_ENDING); /* a LEAVE call, after the drain's (calls run in order) */
    ASSERT_EQ(out.at[out.count - 1].kind, AGENT_ACT_BEGIN_ENDING);
    ASSERT_EQ(out.at[out.count - 1].call_kind, AGENT_CALL_LEAVE);
    ASSERT_EQ(out.at[out.count - 1].summary, AGENT_SUMMARY_QUARANTINE_LEFT);
    ASSERT_EQ(m.ending_exit_code, 0);
    ASSERT_EQ(m.ending_status, AGENT_END_EVICTED);
    /* A bug's stop wins over a quarantine decided with it. */
    m = machine_in(AGENT_STOPPING);
    held(&m);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_DECIDED, .stop_bug = true,
                                            .quarantine = true }, &out);
    ASSERT_EQ(m.state, AGENT_ENDING);
    ASSERT_EQ(m.ending_exit_code, AGENT_EXIT_BUG);
    /* Decided while workers still stop: once they are gone, the quarantine. */
    run_case(find_case("stopping_decided_quarantine_before_stopped"), &after);
    ASSERT_EQ(after.stop_reason, AGENT_STOP_FOR_QUARANTINE);
    after.running = 0;
    agent__machine_step(&after, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT_EQ(after.state, AGENT_QUARANTINED);
    m = machine_in(AGENT_RUNNING);
    m.local_failures = 2;
    m.restart_count = 9; /* most of the job's failures were elsewhere */
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_EXITED, .exit_code = 1 }, &out);
    ASSERT_EQ(out.count, 4);
    ASSERT(m.deciding); /* the CLASSIFY call is out: the rejoin waits for DECIDED */
    /* A deterministic bug: the deciding node closes the job and exits 70, its
     * line the summary; a node that finds the job closed for it exits 70 too. */
    run_case(find_case("stopping_held_decided_bug_closes_job"), &after);
    ASSERT_EQ(after.ending_call, AGENT_CALL_CLOSE_JOB);
    ASSERT_EQ(after.ending_exit_code, AGENT_EXIT_BUG);
    ASSERT_EQ(after.ending_status, AGENT_END_FAILED);
    ASSERT(!after.held && !after.deciding);
    m = machine_in(AGENT_STOPPING);
    held(&m);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_DECIDED, .stop_bug = true }, &out);
    ASSERT_EQ(out.at[0].summary, AGENT_SUMMARY_BUG);
    ASSERT_EQ(out.at[0].exit_code, 70);
    run_case(find_case("rendezvous_closed_for_bug_exits_70"), &after);
    ASSERT_EQ(after.ending_exit_code, AGENT_EXIT_BUG);
    ASSERT_EQ(after.ending_call, AGENT_CALL_SUMMARY);
    run_case(find_case("ending_close_job_back_ends"), &after);
    ASSERT_EQ(after.exit_code, AGENT_EXIT_BUG);
    /* Lost or replaced nodes past --max-infra-restarts: its own exit, no drain. */
    run_case(find_case("rendezvous_closed_infra_bound_exits_69"), &after);
    ASSERT_EQ(after.ending_exit_code, AGENT_EXIT_INFRA);
    ASSERT_EQ(after.ending_exit_code, 69);
    ASSERT_EQ(after.ending_call, AGENT_CALL_SUMMARY);
    ASSERT_EQ(after.ending_status, AGENT_END_FAILED);
    /* The decision before the workers are gone: the stop becomes the bug's,
     * and once they are gone the job closes. */
    run_case(find_case("stopping_decided_bug_before_stopped"), &after);
    ASSERT_EQ(after.stop_reason, AGENT_STOP_FOR_BUG);
    after.running = 0;
    agent__machine_step(&after, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT_EQ(out.count, 2);
    ASSERT_EQ(out.at[1].kind, AGENT_ACT_BEGIN_ENDING);
    ASSERT_EQ(out.at[1].call_kind, AGENT_CALL_CLOSE_JOB);
    /* A restart decided: the held node rejoins, nothing held any more. */
    run_case(find_case("stopping_held_decided_restart_rejoins"), &after);
    ASSERT(!after.held && !after.deciding);
    /* The quarantine's length; its end starts from a fresh health round. */
    run_case(find_case("stopping_stopped_quarantine"), &after);
    ASSERT(after.health_recheck);
    m = machine_in(AGENT_STOPPING);
    quarantine_reaped(&m);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT_EQ(out.at[1].quarantine_ms, 60000);
    /* Quarantine 0: an evicted straggler leaves with 0, an unhealthy node with 1. */
    run_case(find_case("stopping_stopped_quarantine_zero_evicted"), &after);
    ASSERT_EQ(after.exit_code, 0);
    run_case(find_case("stopping_stopped_quarantine_zero_unhealthy"), &after);
    ASSERT_EQ(after.exit_code, 1);
    /* Replicas with no majority: the job fails here (exit 1), leaving, the evidence its summary. */
    m = machine_in(AGENT_STOPPING);
    diverged_reaped(&m);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT_EQ(out.at[1].exit_code, 1);
    ASSERT_EQ(out.at[1].status, AGENT_END_FAILED);
    ASSERT_EQ(out.at[1].call_kind, AGENT_CALL_LEAVE);
    ASSERT_EQ(out.at[1].summary, AGENT_SUMMARY_DIVERGED);
    /* The counts. */
    run_case(find_case("any_stream_closed_counts"), &after);
    ASSERT_EQ(after.closing_streams, 0);
    run_case(find_case("any_worker_started_counts"), &after);
    ASSERT_EQ(after.running, 2);
    run_case(find_case("any_evict_call_back_clears_flag"), &after);
    ASSERT(!after.evict_in_flight);
    run_case(find_case("stopping_stop_becomes_shutdown"), &after);
    ASSERT_EQ(after.stop_reason, AGENT_STOP_FOR_SHUTDOWN);
    run_case(find_case("any_second_stop_ignored"), &after);
    ASSERT_EQ(after.stop_reason, AGENT_STOP_FOR_RESTART);
}

/* A whole life, input after input: start, a failure, the restart, success. */
TEST(agent_machine_a_failure_then_success)
{
    agent_machine m;
    agent__machine_init(&m);
    agent_actions out;
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_START, .quarantine_ms = 1000 }, &out);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_HEALTH_GATE, .gate = AGENT_HEALTH_GO },
                        &out);
    ASSERT_EQ(out.at[0].kind, AGENT_ACT_JOIN);
    agent_input formed = { .kind = AGENT_IN_CALL_DONE,
                           .call_kind = AGENT_CALL_NEXT,
                           .generation = 1,
                           .nworkers = 2 };
    agent__machine_step(&m, &formed, &out);
    ASSERT_EQ(m.state, AGENT_RUNNING);
    for (int i = 0; i < 2; i++) agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_STARTED }, &out);
    /* rank 1 is killed; its output still drains */
    agent__machine_step(&m,
                        &(agent_input){ .kind = AGENT_IN_WORKER_EXITED,
                                        .exit_code = -1,
                                        .term_signal = SIGKILL,
                                        .streams_closing = 2 },
                        &out);
    ASSERT_EQ(m.state, AGENT_STOPPING);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT_EQ(out.count, 0); /* rank 0 still runs */
    agent__machine_step(&m,
                        &(agent_input){ .kind = AGENT_IN_WORKER_EXITED,
                                        .exit_code = -1,
                                        .term_signal = SIGTERM },
                        &out);
    ASSERT_EQ(out.count, 0); /* stopping: an exit is no new failure */
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT_EQ(out.count, 0); /* output still draining */
    for (int i = 0; i < 2; i++) agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_STREAM_CLOSED }, &out);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT_EQ(m.state, AGENT_STOPPING); /* stopped, held for the failure policy's decision */
    ASSERT(m.held);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_DECIDED }, &out); /* restart */
    ASSERT_EQ(m.state, AGENT_RENDEZVOUS);
    ASSERT_EQ(out.at[out.count - 1].kind, AGENT_ACT_ASK_HEALTH_GATE); /* a failure: rechecked */
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_HEALTH_GATE, .gate = AGENT_HEALTH_GO },
                        &out);
    formed.generation = 2;
    formed.restart_count = 1;
    agent__machine_step(&m, &formed, &out);
    for (int i = 0; i < 2; i++) agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_STARTED }, &out);
    for (int i = 0; i < 2; i++)
        agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_EXITED }, &out);
    ASSERT_EQ(m.state, AGENT_ENDING);
    ASSERT_EQ(m.ending_call, AGENT_CALL_FINISH);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_CALL_DONE, .call_kind = AGENT_CALL_FINISH },
                        &out);
    ASSERT_EQ(m.state, AGENT_DONE);
    ASSERT_EQ(m.exit_code, 0);
    ASSERT_EQ(m.generations, 2);
    ASSERT_EQ(m.local_failures, 1);
}

/* Issue 37's race: this node hears another node's end of the generation
 * before its own rank's failure; that failure still reaches the job-wide
 * history (CLASSIFY_LATE), the rejoin waits for its decision, and a
 * deterministic bug found there closes the job in this generation. */
TEST(agent_machine_failure_after_the_end_elsewhere_is_decided)
{
    agent_machine m = machine_in(AGENT_RUNNING);
    agent_actions out;
    agent__machine_step(&m, &(agent_input)CHANGE(ELASTIC_RDZV_FAILURE, 5, false), &out);
    ASSERT_EQ(m.state, AGENT_STOPPING);
    ASSERT_EQ(m.deciding, 0); /* the end is the other node's: nothing of ours to decide */
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_EXITED, .exit_code = 1 }, &out);
    ASSERT_EQ(out.count, 1);
    ASSERT_EQ(out.at[0].kind, AGENT_ACT_CLASSIFY_LATE);
    ASSERT_EQ(m.deciding, 1);
    /* the other rank: our SIGTERM ended it, no failure of its own */
    agent__machine_step(&m,
                        &(agent_input){ .kind = AGENT_IN_WORKER_EXITED,
                                        .exit_code = -1,
                                        .term_signal = SIGTERM },
                        &out);
    ASSERT_EQ(out.count, 0);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT(m.held); /* stopped; the rejoin waits for the decision */
    ASSERT_EQ(m.state, AGENT_STOPPING);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_DECIDED, .stop_bug = true }, &out);
    ASSERT_EQ(m.state, AGENT_ENDING);
    ASSERT_EQ(m.ending_call, AGENT_CALL_CLOSE_JOB);
    ASSERT_EQ(m.ending_exit_code, AGENT_EXIT_BUG);
    ASSERT_EQ(m.local_failures, 0); /* not this node's crash loop: it ended nothing */

    /* A lost node's end: our ranks failing of it are its consequence. */
    m = machine_in(AGENT_RUNNING);
    agent__machine_step(&m, &(agent_input)CHANGE(ELASTIC_RDZV_NODE_LOST, 5, false), &out);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_EXITED, .exit_code = 1 }, &out);
    ASSERT_EQ(out.count, 0);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_EXITED, .exit_code = 1 }, &out);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT_EQ(m.state, AGENT_RENDEZVOUS); /* restarted at once: nothing decided */

    /* Our own failure, then the second local rank's by itself: both decided;
     * the rejoin waits for both answers. */
    m = machine_in(AGENT_RUNNING);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_EXITED, .exit_code = 1 }, &out);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_WORKER_EXITED, .exit_code = 1 }, &out);
    ASSERT_EQ(out.at[0].kind, AGENT_ACT_CLASSIFY_LATE);
    ASSERT_EQ(m.deciding, 2);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_SETTLED }, &out);
    ASSERT(m.held);
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_DECIDED }, &out);
    ASSERT_EQ(m.state, AGENT_STOPPING); /* one answer still out */
    agent__machine_step(&m, &(agent_input){ .kind = AGENT_IN_DECIDED }, &out);
    ASSERT_EQ(m.state, AGENT_RENDEZVOUS);
}

/* The chaos soak's generation 35: a member was lost while the others' next()
 * still ran (its memory-tier plan waited on the lost member); the news came
 * before the call was back. It is held, and once the generation runs here
 * it ends it, as news arriving a moment later would have. */
static void hold_then_form(agent_machine *m, const agent_input *news, uint64_t formed)
{
    agent_actions out;
    *m = machine_in(AGENT_RENDEZVOUS);
    agent__machine_step(m, news, &out);
    agent_input back = CALL_BACK(AGENT_CALL_NEXT, 0);
    back.generation = formed;
    agent__machine_step(m, &back, &out);
    ASSERT_EQ(m->state, AGENT_RUNNING);
    ASSERT_EQ(m->held_change, 0u);
    ASSERT_EQ(out.at[0].kind, AGENT_ACT_GENERATION_FORMED);
    ASSERT_EQ(out.count, formed == news->generation ? 2 : 1);
    m->running = 2; /* the workers GENERATION_FORMED started */
}

TEST(agent_machine_news_during_the_rendezvous_ends_the_generation_once_formed)
{
    agent_machine m;
    agent_actions out;
    agent_input lost = CHANGE(ELASTIC_RDZV_NODE_LOST, 6, false);
    hold_then_form(&m, &lost, 6);
    agent__machine_step(&m, &lost, &out); /* what REPLAY_CHANGE feeds in */
    ASSERT_EQ(m.state, AGENT_STOPPING);
    ASSERT_EQ(out.at[0].kind, AGENT_ACT_GENERATION_ENDED);
    ASSERT_EQ(out.at[1].kind, AGENT_ACT_STOP_WORKERS);
    ASSERT(!m.stop_for_failure); /* a lost node: no decision of ours to wait for */

    /* Our own fence in that window counts as a fence once it is replayed. */
    agent_input fence = CHANGE(ELASTIC_RDZV_FENCED, 6, true);
    hold_then_form(&m, &fence, 6);
    agent__machine_step(&m, &fence, &out);
    ASSERT(m.fenced);
    ASSERT_EQ(m.fenced_count, 1);
    ASSERT_EQ(m.state, AGENT_STOPPING);
    ASSERT_EQ(out.at[out.count - 1].kind, AGENT_ACT_KILL_WORKERS);

    /* News of a generation next() did not give us (it ended that one itself
     * and formed the next) is not replayed. */
    hold_then_form(&m, &lost, 7);
    ASSERT_EQ(m.generation, 7u);
}

/* ---- the docs' table and these cases agree ------------------------------------------------ */

/* Cell `index` (0-based) of a "| a | b | ... |" line, trimmed, backticks dropped. */
static void cell(const char *line, int index, char *out, size_t size)
{
    const char *at = line;
    for (int i = 0; i <= index; i++) {
        at = strchr(at, '|');
        ASSERT(at != NULL);
        at++;
    }
    const char *end = strchr(at, '|');
    ASSERT(end != NULL);
    while (at < end && (*at == ' ' || *at == '`')) at++;
    while (end > at && (end[-1] == ' ' || end[-1] == '`')) end--;
    snprintf(out, size, "%.*s", (int)(end - at), at);
}

static int state_by_name(const char *name)
{
    if (strcmp(name, "any") == 0) return ANY_STATE;
    for (int s = AGENT_IDLE; s <= AGENT_DONE; s++)
        if (strcmp(agent__state_name((agent_state)s), name) == 0) return s;
    FAIL("docs/ARCHITECTURE.md: no state is named \"%s\"", name);
}

TEST(agent_machine_docs_table_matches_cases)
{
    char *doc = test_source_text("docs/ARCHITECTURE.md");
    const char *table = strstr(doc, "| state | input | action | next | case |");
    ASSERT(table != NULL);
    bool documented[NCASES];
    memset(documented, 0, sizeof documented);
    const char *line = strchr(table, '\n') + 1;
    line = strchr(line, '\n') + 1; /* the |---| line */
    int rows = 0;
    while (*line == '|') {
        char state[32], next[64], name[96];
        cell(line, 0, state, sizeof state);
        cell(line, 3, next, sizeof next);
        cell(line, 4, name, sizeof name);
        const machine_case *c = find_case(name);
        if (c == NULL) FAIL("docs/ARCHITECTURE.md: row case %s has no table test", name);
        documented[c - cases] = true;
        int from = state_by_name(state);
        if (from != c->from)
            FAIL("%s: the docs say state %s, the case starts in %s", name, state,
                 c->from == ANY_STATE ? "any" : agent__state_name((agent_state)c->from));
        if (from != ANY_STATE && strcmp(next, agent__state_name(c->to)) != 0)
            FAIL("%s: the docs say next %s, the case ends in %s", name, next,
                 agent__state_name(c->to));
        rows++;
        line = strchr(line, '\n');
        if (line == NULL) break;
        line++;
    }
    ASSERT(rows > 0);
    for (int i = 0; i < NCASES; i++)
        if (!documented[i]) FAIL("case %s is in no row of docs/ARCHITECTURE.md", cases[i].name);
    free(doc);
}
