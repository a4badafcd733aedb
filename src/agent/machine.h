/*
 * The agent's decisions (machine.c): a pure state machine over the worker
 * group's life. One function per state decides what an input means and
 * returns the actions to take; it touches no process, socket, timer or
 * clock, so a test drives it with a table of inputs (test/unit/
 * test_agent_machine.c). The runner, group.c, turns the world into inputs
 * (a reaped worker, a call back, a timer) and performs the actions in the
 * order given (stop the workers, post a call, write an event, end the job).
 *
 * Only machine.c writes an agent_machine; everyone else reads it.
 * docs/ARCHITECTURE.md, "The agent", has the state x input table; a test
 * checks that every row of it has a case in the table tests.
 */
#ifndef ELASTIC_AGENT_MACHINE_H
#define ELASTIC_AGENT_MACHINE_H

#include "agent/agent.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum agent_state {
    AGENT_IDLE,        /* created, not started */
    AGENT_RENDEZVOUS,  /* waiting for the next generation to form */
    AGENT_RUNNING,     /* this generation's workers run */
    AGENT_STOPPING,    /* workers got SIGTERM (SIGKILL after the grace period) */
    AGENT_ENDING,      /* over here; a last call (finish, leave, summary) is in flight */
    AGENT_QUARANTINED, /* evicted as a straggler: out of the rounds until the timer */
    AGENT_DONE         /* the job ended for this node: see exit_code */
} agent_state;

typedef enum agent_stop_reason {
    AGENT_STOP_NONE,
    AGENT_STOP_FOR_RESTART,   /* the generation ended: rendezvous again */
    AGENT_STOP_FOR_SHUTDOWN,  /* SIGTERM/SIGINT to the agent: leave and exit */
    AGENT_STOP_FOR_QUARANTINE, /* evicted as a straggler, or quarantined by the failure
                                  policy: quarantine, then rejoin */
    AGENT_STOP_FOR_DIVERGENCE, /* replicas diverged with no majority: the job stops */
    AGENT_STOP_FOR_BUG         /* the failure policy found a deterministic bug: the job stops */
} agent_stop_reason;

/* How the job ended for this node (job_end's status). */
typedef enum agent_end_status {
    AGENT_END_SUCCEEDED, /* every worker exited 0 */
    AGENT_END_FAILED,    /* the rendezvous failed (budget exhausted, job closed, ...) */
    AGENT_END_STOPPED,   /* SIGTERM/SIGINT to the agent */
    AGENT_END_EVICTED,   /* stepped aside as the job's straggler, for good */
    AGENT_END_UNHEALTHY, /* a fatal health check: did not join, or left the job */
    AGENT_END_LEFT_OUT   /* waited as a spare (or to rejoin) and the job succeeded without us */
} agent_end_status;

/* The calls off the loop (calls.c runs them). */
typedef enum agent_call_kind {
    AGENT_CALL_NEXT,          /* the next rendezvous */
    AGENT_CALL_END,           /* end the generation with `cause` */
    AGENT_CALL_FINISH,        /* every local worker succeeded */
    AGENT_CALL_LEAVE,         /* shutting down */
    AGENT_CALL_SHARE_FAILURE, /* put a failure's detail in the job store (key, value) */
    AGENT_CALL_SUMMARY,       /* write the root-cause summary (reads the store) */
    AGENT_CALL_NODE_STATS,    /* publish this node's straggler statistic, read all */
    AGENT_CALL_EVICT,         /* this node is the job's straggler: step aside if it may */
    AGENT_CALL_SLURM_DRAIN,   /* scontrol drains this node (key: node, value: why) */
    AGENT_CALL_CLASSIFY,      /* record a local failure in the job's history, decide (policy) */
    AGENT_CALL_CLOSE_JOB,     /* close the job for a deterministic bug (the others read why) */
    AGENT_CALL_QUARANTINE_LOOK /* quarantined: is the job closed? (its done may end the quarantine) */
} agent_call_kind;

/* What the health module says before a join (health.c asks the checks). */
typedef enum agent_health_gate {
    AGENT_HEALTH_GO,   /* checks off, or the round asked for is in and not fatal */
    AGENT_HEALTH_WAIT, /* a fresh round is asked for: a HEALTH input brings it */
    AGENT_HEALTH_STOP  /* that round is in and fatal (reason) */
} agent_health_gate;

/* What happened: the runner's facts, one input at a time. */
typedef enum agent_input_kind {
    AGENT_IN_START,            /* the agent starts */
    AGENT_IN_HEALTH_GATE,      /* the answer to AGENT_ACT_ASK_HEALTH_GATE (gate) */
    AGENT_IN_WORKER_STARTED,   /* a worker (or a promoted spare) runs */
    AGENT_IN_WORKER_EXITED,    /* reaped (exit_code, term_signal; streams now closing) */
    AGENT_IN_WORKER_UNHEALTHY, /* failed, hangs, or could not start (exit_code, term_signal) */
    AGENT_IN_WORKER_FAULTED,   /* its library found the group broken; the process is fine */
    AGENT_IN_STREAM_CLOSED,    /* a worker's output stream finished closing */
    AGENT_IN_ABORT_ACKED,      /* in-process recovery: a survivor's abort hook ran */
    AGENT_IN_MEMBERSHIP_CHANGE, /* the generation must end (cause_kind, generation, about_me) */
    AGENT_IN_STOP_REQUEST,     /* SIGTERM/SIGINT to the agent (signum) */
    AGENT_IN_CALL_DONE,        /* a call is back (call_kind, rc, closed_finished) */
    AGENT_IN_EVICT_ASKED,      /* a step-aside (EVICT) call went out: one at a time */
    AGENT_IN_EVICTED,          /* this node stepped aside (unhealthy: for its health) */
    AGENT_IN_GRACE_EXPIRED,    /* timer: workers still alive after SIGTERM */
    AGENT_IN_QUARANTINE_OVER,  /* timer: rejoin after a quarantine */
    AGENT_IN_HEALTH,           /* a health round is in (gate_done, fatal) */
    AGENT_IN_SETTLED,          /* an event was handled: is a stopping generation over? */
    AGENT_IN_DIVERGED,         /* checkpoint replicas diverged (minority, no_majority, warn) */
    AGENT_IN_DECIDED,          /* the CLASSIFY call is back: the job-wide decision (stop_bug) */
    AGENT_IN_SPARE_PARKED,     /* the warm spare a slot waits for parked, exited or timed out */
    AGENT_IN_KINDS
} agent_input_kind;

typedef struct agent_input {
    agent_input_kind kind;
    int exit_code, term_signal; /* WORKER_EXITED, WORKER_UNHEALTHY */
    bool raised; /* WORKER_EXITED: its error file or stderr shows an error it raised itself */
    int streams_closing;        /* WORKER_EXITED: its output streams still open */
    int signum;                 /* STOP_REQUEST */
    agent_call_kind call_kind;  /* CALL_DONE */
    int rc;                     /* CALL_DONE: the call's result */
    bool closed_finished;       /* CALL_DONE NEXT: the job closed because every member finished */
    bool closed_bug;            /* CALL_DONE NEXT: the job closed for a deterministic bug */
    bool closed_infra;          /* CALL_DONE NEXT: closed past --max-infra-restarts */
    bool stop_bug;              /* DECIDED: the policy found a deterministic bug: stop the job */
    bool quarantine;            /* DECIDED: the policy quarantined this node (K failures in its window) */
    elastic_rdzv_cause_kind cause_kind; /* MEMBERSHIP_CHANGE */
    uint64_t generation;        /* MEMBERSHIP_CHANGE: the generation it ends; CALL_DONE NEXT: formed */
    int restart_count;          /* CALL_DONE NEXT: the formed generation's */
    int nworkers;               /* CALL_DONE NEXT: local workers of the formed generation */
    int spares_parked;          /* CALL_DONE NEXT, in a recovery: warm spares parked */
    int spares_starting;        /* ... and started, alive, within their startup timeout, not parked */
    bool about_me;              /* MEMBERSHIP_CHANGE: it names this node */
    agent_health_gate gate;     /* HEALTH_GATE */
    bool gate_done, fatal;      /* HEALTH */
    bool unhealthy;             /* EVICTED: stepped aside for a fatal health check */
    int kept;                   /* SETTLED: workers in-process recovery keeps running */
    int quarantine_ms;          /* START: --straggler-quarantine */
    bool minority;              /* DIVERGED: this node holds a replica the majority does not */
    bool no_majority;           /* DIVERGED: no value more than half the ranks hold */
    bool warn;                  /* DIVERGED: --on-divergence=warn (the step committed) */
} agent_input;

/* Which summary line the runner writes with a job's end. */
typedef enum agent_summary_kind {
    AGENT_SUMMARY_NONE,
    AGENT_SUMMARY_SHUTDOWN,        /* "stopped by signal N (name)" */
    AGENT_SUMMARY_STOPPED_IN_RDZV, /* stopped during the rendezvous */
    AGENT_SUMMARY_STOPPED_IN_QUARANTINE,
    AGENT_SUMMARY_LEFT_OUT,       /* every member finished while this node waited */
    AGENT_SUMMARY_UNHEALTHY_LEFT, /* stepped aside unhealthy, quarantine 0 */
    AGENT_SUMMARY_EVICTED_LEFT,   /* evicted straggler, quarantine 0 */
    AGENT_SUMMARY_DIVERGED,       /* replicas diverged with no majority: the evidence */
    AGENT_SUMMARY_BUG,            /* a deterministic bug: the policy's line (cause, frame, generations) */
    AGENT_SUMMARY_QUARANTINE_LEFT /* quarantined by the failure policy, quarantine 0: left */
} agent_summary_kind;

/* What to do. The runner performs them in order. */
typedef enum agent_action_kind {
    AGENT_ACT_BEGIN_RENDEZVOUS,   /* the rendezvous starts (its clock) */
    AGENT_ACT_ASK_HEALTH_GATE,    /* ask the health module; answer with HEALTH_GATE (always last) */
    AGENT_ACT_JOIN,               /* the NEXT call (and the slow-rendezvous watch) */
    AGENT_ACT_GENERATION_FORMED,  /* apply the NEXT result; start the workers, fill spares (wait_spare) */
    AGENT_ACT_START_WAITING,      /* the slots that waited for a spare: promote it, or cold-start */
    AGENT_ACT_ADOPT_RESULT,       /* a formed generation a stop overtook: remember it only */
    AGENT_ACT_FAILURE,            /* a local worker's failure: its time, cause, phases (keep_worker) */
    AGENT_ACT_REPORT_FAILURE,     /* ... then record, console, event, share, the END call */
    AGENT_ACT_CLASSIFY,           /* ... then the CLASSIFY call; DECIDED answers it */
    AGENT_ACT_CLASSIFY_LATE,      /* a worker failed by itself while stopping: CLASSIFY only */
    AGENT_ACT_GENERATION_ENDED,   /* it ended elsewhere (or we were fenced): event, console */
    AGENT_ACT_STOP_WORKERS,       /* SIGTERM or in-process abort; grace timer (stop_reason) */
    AGENT_ACT_KILL_WORKERS,       /* SIGKILL to the workers' process groups now */
    AGENT_ACT_KEEP_SURVIVOR,      /* in-process recovery: the acknowledging worker stays */
    AGENT_ACT_GENERATION_STOPPED, /* every worker stopped: timers, last SIGKILL, event */
    AGENT_ACT_FENCED,             /* this node lost its lease: event, console */
    AGENT_ACT_HOLD_CHANGE,        /* news about the generation next() is forming: keep its cause */
    AGENT_ACT_REPLAY_CHANGE,      /* ... it formed: feed the kept news in now, as if it came now */
    AGENT_ACT_STEP_ASIDE_UNHEALTHY, /* a fatal round while running: ask to step aside */
    AGENT_ACT_STEP_ASIDE_DIVERGED, /* this node's replica diverged: step aside as if unhealthy */
    AGENT_ACT_NO_FAILURE,         /* our own eviction: the next start is no restart of ours */
    AGENT_ACT_QUARANTINE,         /* start the quarantine timer (ms) */
    AGENT_ACT_QUARANTINE_ENDED,   /* the quarantine is over: event */
    AGENT_ACT_STOP_QUARANTINE_TIMER,
    AGENT_ACT_SAY_UNHEALTHY,      /* summary and console: this node does not join (why) */
    AGENT_ACT_SLURM_DRAIN_LOST,   /* too few nodes: drain the lost ones before a requeue */
    AGENT_ACT_SLURM_GIVE_UP,      /* the policy quarantined this node, or it fenced too often (give_up) */
    AGENT_ACT_LOG_STOP_REQUEST,
    AGENT_ACT_BEGIN_ENDING,       /* stop spares; post the last call (call_kind); DONE when back */
    AGENT_ACT_END_NOW,            /* stop spares; job_end (status, exit_code) -> DONE */
    AGENT_ACT_KINDS
} agent_action_kind;

/* Why a node gives up under Slurm: the failure policy quarantined it (its
 * failures within the policy's window), or it fenced itself too often. */
typedef enum agent_give_up_kind { AGENT_GIVE_UP_QUARANTINE, AGENT_GIVE_UP_FENCED } agent_give_up_kind;

typedef struct agent_action {
    agent_action_kind kind;
    agent_stop_reason stop_reason; /* STOP_WORKERS */
    bool keep_worker;              /* FAILURE: the process is fine (in-process recovery) */
    bool wait_spare;               /* GENERATION_FORMED: dead slots no parked spare fills wait
                                      for a starting one (START_WAITING starts them) */
    agent_call_kind call_kind;     /* BEGIN_ENDING */
    agent_end_status status;       /* BEGIN_ENDING, END_NOW */
    int exit_code;                 /* BEGIN_ENDING, END_NOW */
    agent_summary_kind summary;    /* BEGIN_ENDING, END_NOW */
    int quarantine_ms;             /* QUARANTINE */
    agent_give_up_kind give_up;    /* SLURM_GIVE_UP */
} agent_action;

#define AGENT_MACHINE_MAX_ACTIONS 12
typedef struct agent_actions {
    agent_action at[AGENT_MACHINE_MAX_ACTIONS];
    int count;
} agent_actions;

/* The machine's memory: every field a decision depends on. */
typedef struct agent_machine {
    agent_state state;
    agent_stop_reason stop_reason;
    int stop_signal;      /* the first stop request's signal; 0: none */
    int quarantine_ms;    /* --straggler-quarantine (START brings it) */
    uint64_t generation;  /* the current (last formed) generation */
    uint64_t generations; /* generations formed on this node */
    int restart_count;    /* the job's, as of the current generation */
    int nworkers;         /* local workers of the current generation */
    int succeeded;        /* of them, exited 0 */
    int running;          /* workers (promoted spares too) started and not reaped */
    int closing_streams;  /* reaped workers' output still draining */
    bool fenced;          /* this node lost its lease at least once */
    int fenced_count;     /* how often */
    int local_failures;   /* this node's worker failures, job-wide */
    bool health_recheck;  /* the next join waits for a fresh health round */
    bool health_gating;   /* RENDEZVOUS: the join waits for that round */
    bool rejoining;       /* out of a quarantine: counted gone, nothing to leave */
    bool stepped_aside_unhealthy; /* the quarantine is a fatal health check's */
    bool quarantined_failing; /* the quarantine is the failure policy's (this node's failures) */
    bool evict_in_flight; /* one step-aside call at a time */
    int deciding;         /* local failures' CLASSIFY calls out: each DECIDED answers one */
    bool stop_for_failure; /* STOPPING for a worker's failure, here or elsewhere */
    bool held;            /* STOPPING: every worker stopped, the rejoin waits for DECIDED */
    bool awaiting_spare;  /* RUNNING: a dead slot waits for a starting spare (SPARE_PARKED) */
    uint64_t held_change; /* RENDEZVOUS: news came about this generation before next() gave it */
    agent_call_kind ending_call; /* ENDING: the last call in flight */
    int ending_exit_code;
    agent_end_status ending_status;
    int exit_code;        /* DONE */
} agent_machine;

/* A machine in IDLE; the first join waits for the first health round. */
void agent__machine_init(agent_machine *m);
/* One input: the machine's new memory in *m, what to do in *out (cleared first). */
void agent__machine_step(agent_machine *m, const agent_input *in, agent_actions *out);

/* Whether a WORKER_EXITED's `raised` matters now: only while the generation
 * stops for a worker's failure (STOPPING, to restart). The runner reads a
 * worker's words only then: an error file or a stderr tail per stopped
 * worker is not free. */
bool agent__machine_reads_raised(const agent_machine *m);

/* Names, for the docs' table, logs and tests. */
const char *agent__state_name(agent_state state);
const char *agent__input_name(agent_input_kind kind);
const char *agent__action_name(agent_action_kind kind);
/* "succeeded", "failed", "stopped", "evicted", "left_out": job_end's status and the console's word. */
const char *agent__end_status_name(agent_end_status status);

#endif /* ELASTIC_AGENT_MACHINE_H */
