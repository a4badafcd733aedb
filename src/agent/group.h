/*
 * The worker group's state machine (group.c): the group's memory, owned by
 * the loop thread, and the one queue through which everything else reports
 * to it. Helpers post events (agent__group_post) and ask questions
 * (agent__group_is_*); only group.c changes the state.
 */
#ifndef ELASTIC_AGENT_GROUP_H
#define ELASTIC_AGENT_GROUP_H

#include "agent/agent.h"
#include "agent/calls.h"
#include "agent/generation_store.h"
#include "agent/machine.h"
#include "agent/oom.h"
#include "agent/reaper.h"
#include "agent/stream.h"
#include "agent/waiting.h"
#include "common/goodput.h"
#include "probe/probe.h"

#include <pthread.h>
#include <sys/types.h>
#include <uv.h>

typedef struct agent_membership agent_membership;
typedef struct agent_health agent_health;
typedef struct agent_events agent_events;
typedef struct agent_jobstore agent_jobstore;



typedef struct agent_exit_watch agent_exit_watch;
typedef struct agent_spare agent_spare;
typedef struct agent_spares agent_spares; /* private to spares.c */
typedef struct agent_prestarts agent_prestarts; /* private to prestart.c */
typedef struct agent_slurm agent_slurm;   /* private to slurm.c */
typedef struct agent_node_stats agent_node_stats; /* private to node_straggler.c */
typedef struct agent_memory agent_memory;         /* private to memory.c */
typedef struct agent_probes agent_probes;         /* private to probes.c */
typedef struct agent_goodput agent_goodput;       /* private to goodput.c */
typedef struct agent_inprocess agent_inprocess;   /* private to inprocess.c */
typedef struct agent_quarantine agent_quarantine; /* private to quarantine.c */
typedef struct agent_failures agent_failures;     /* private to failure_say.c */

typedef struct agent_worker {
    int local_rank;
    int rank;
    pid_t pid;                    /* leader of its own process group; 0: never started */
    bool running;                 /* started and not yet reaped */
    agent_exit_watch *exit_watch; /* its pidfd on the loop while running (exits.c); NULL: none */
    int exit_code;                /* -1 when killed by a signal */
    int term_signal;              /* 0 when it exited */
    uint64_t started_ms;          /* monotonic */
    agent_oom_mark oom;           /* its memory cgroup's OOM-kill count at start (oom.h) */
    bool oom_killed;              /* reaped: the OOM killer's SIGKILL (a witness saw it) */
    agent_stream out, err;
    char dir[768];        /* gen_<G>/rank_<R> under the log root */
    char error_file[800]; /* its TORCHELASTIC_ERROR_FILE */
    bool survivor;        /* in-process recovery: kept across the generation change */
    bool abort_acked;     /* in-process recovery: its abort hook ran */
    bool reconfiguring;   /* in-process recovery: RECONFIGURE sent, READY not yet back */
    bool awaiting_hello;  /* started (or promoted) in a recovery: its attach is timed */
    agent_spare *spare;   /* a promoted warm spare: its output streams are the spare's */
    bool waits_spare;     /* a recovery's dead slot waiting for a starting warm spare to park */
    bool started_ahead;   /* its process is an interpreter started ahead (prestart.c) */
} agent_worker;

/* The phases of the recovery in flight (phases.c, private to it). */
typedef struct agent_recovery_phases agent_recovery_phases;


/* What a helper or another thread reports to the group. */
typedef enum agent_group_event_kind {
    AGENT_GROUP_CHILDREN_EXITED,   /* a pidfd or SIGCHLD: reap whichever workers ended */
    AGENT_GROUP_WORKER_UNHEALTHY,  /* worker failed, or a probe says it hangs (reason, codes) */
    AGENT_GROUP_WORKER_FAULTED,    /* its library found the group broken; the process is fine */
    AGENT_GROUP_STREAM_CLOSED,     /* a worker's output stream finished closing */
    AGENT_GROUP_ABORT_ACKED,       /* in-process recovery: a survivor's abort hook ran */
    AGENT_GROUP_MEMBERSHIP_CHANGE, /* the generation must end (cause); any thread */
    AGENT_GROUP_STOP_REQUEST,      /* SIGTERM/SIGINT to the agent (signum) */
    AGENT_GROUP_CALL_DONE,         /* a call posted with agent__call_post is back (call) */
    AGENT_GROUP_EVICTED,           /* this node stepped aside as the job's straggler */
    AGENT_GROUP_GRACE_EXPIRED,     /* timer: workers still alive after SIGTERM */
    AGENT_GROUP_QUARANTINE_OVER,   /* timer: rejoin after a straggler's quarantine */
    AGENT_GROUP_HEALTH,            /* a health check round's report is in (health.c; any thread) */
    AGENT_GROUP_DIVERGED           /* checkpoint replicas diverged (divergence.c; reason, flags) */
} agent_group_event_kind;

typedef struct agent_group_event {
    struct agent_group_event *next;
    agent_group_event_kind kind;
    agent_worker *worker;       /* WORKER_*, ABORT_ACKED */
    int exit_code, term_signal; /* WORKER_UNHEALTHY */
    char reason[256];           /* WORKER_UNHEALTHY, WORKER_FAULTED */
    elastic_rdzv_cause cause;   /* MEMBERSHIP_CHANGE */
    int signum;                 /* STOP_REQUEST */
    agent_call *call;           /* CALL_DONE: freed after it was handled */
    bool unhealthy;             /* EVICTED: stepped aside for a fatal health check */
    bool minority, no_majority, warn; /* DIVERGED: as agent_input's */
} agent_group_event;

/* The queue of events to the runner. On the loop: pending, and nested for
 * what the handling of one event posts (it goes first once that event is
 * done). From other threads, under lock: posted, moved to pending by the
 * wake async; from signal handlers, atomically: pending_stop_signal. */
typedef struct agent_group_queue {
    uv_async_t wake; /* stop requests and membership news from other threads */
    struct agent_group_event *pending, *pending_tail;
    struct agent_group_event *nested, *nested_tail;
    bool draining;
    pthread_mutex_t lock;
    bool wake_closed;        /* the wake async is closed: other threads' news is dropped */
    int pending_stop_signal; /* atomic; -1: none */
    unsigned stop_requests;  /* atomic; how many arrived: a store host serving after a stop
                              * leaves on the next one */
    struct agent_group_event *posted, *posted_tail;
} agent_group_queue;

/* The runner's (group.c's) own records: only group.c writes them; the
 * machine decides on none of them. */
typedef struct agent_losses {
    uint64_t fenced_wall_ms; /* when this node last fenced itself; 0: never */
    char fenced_reason[256];
    uint64_t store_lost_wall_ms; /* a call could not reach the store to end the generation */
    char store_lost_reason[256];
} agent_losses;

typedef struct agent_unhealthy {
    int local_rank; /* the worker that ended the generation here; -1: none */
    char reason[300];
} agent_unhealthy;

typedef struct agent_group_clock { /* monotonic */
    uint64_t started_ms, rendezvous_started_ms, stop_started_ms, failure_ms;
    uint64_t lost_ms; /* failure detected -> the group running again, summed (console.c) */
} agent_group_clock;

/* The job as this node runs it: set once by agent.c before the group
 * starts, read-only after (the loop and the calls thread read it unlocked). */
typedef struct agent_job_config {
    const elastic_agent_opts *opts;
    agent_events *events; /* the journal */
    const char *run_id;
    const char *node_id;
    const char *node_addr; /* where peers reach this node's receiver */
    const char *log_root;  /* per-generation directories go here */
    int log_root_fd;       /* ... opened through this descriptor (no link followed) */
    bool write_logs;       /* stdout.log / stderr.log files */
} agent_job_config;

typedef struct agent_group {
    uv_loop_t *loop;
    /* What this node runs with: set once by agent.c before the group starts. */
    agent_job_config job;
    agent_membership *membership;
    agent_store_link store; /* the job store; a new generation's applied by generation_store.c */
    /* The machine's memory: state, counts and flags its decisions read.
     * Only machine.c writes it (agent__machine_step, through the runner). */
    agent_machine m;

    elastic_rdzv_result current;
    /* The news HOLD_CHANGE kept while next() formed its generation (group.c). */
    elastic_rdzv_cause held_change;
    agent_worker *workers;
    int nworkers;

    uv_signal_t sigchld; /* started only where pidfds are unavailable (exits.c) */
    uv_timer_t grace_timer;
    agent_group_queue queue; /* the events the runner drains (group.c; calls.c hands back) */
    agent_calls calls;              /* membership and store calls, off the loop (calls.c) */
    agent_losses losses;            /* for the root-cause summary (summary.c reads it) */
    agent_unhealthy unhealthy;      /* the worker that ended the generation here */
    agent_group_clock clock;        /* when things began, for the journal and the console */

    agent_reaper *reaper; /* the reaper process and cgroup (reaper.c) */

    probe__monitor *monitor; /* probes, metrics, the workers' channel (probes.c) */
    agent_node_stats *node_stats; /* job-wide straggler scores (node_straggler.c) */
    agent_quarantine *quarantine; /* AGENT_QUARANTINED: when to rejoin (quarantine.c) */
    agent_health *health;         /* node health checks (health.c); NULL: off */
    struct agent_divergence_state *divergence; /* divergence.c's; NULL until a report */
    agent_failures *failures; /* failure_say.c's: counters, stop line; NULL until a failure */
    agent_probes *probes;         /* the run directory, the newest checkpoint (probes.c) */
    agent_memory *memory;         /* the memory checkpoint tier and restore plan (memory.c) */
    agent_inprocess *inprocess;    /* in-process recovery's record (inprocess.c) */

    agent_spares *spares; /* warm spares (spares.c) */
    agent_prestarts *prestarts; /* interpreters started ahead (prestart.c) */
    agent_recovery_phases *phases; /* the recovery in flight (phases.c) */

    agent_failure local_failure;

    agent_slurm *slurm; /* --slurm-drain's record (slurm.c) */
    char summary[4096];

    agent_goodput *goodput; /* the steps journaled, the /metrics floor (goodput.c) */
    agent_waiting waiting;
} agent_group;

int agent__group_init(agent_group *group, uv_loop_t *loop);
/* Starts the first rendezvous; the loop does the rest until state is DONE. */
void agent__group_start(agent_group *group);
/* Queues `event` (copied) for the state machine, on the loop thread. Never
 * handled inside this call when the machine is busy: a transition that
 * makes a helper post (workers_start in generation_formed) finishes first,
 * then its posts are handled, before events that were already waiting. */
void agent__group_post(agent_group *group, const agent_group_event *event);
/* Any thread: posts an event of `kind` with no payload (the health runner's
 * thread after each round); waits in the queue like membership news. */
void agent__group_post_from_thread(agent_group *group, agent_group_event_kind kind);
/* A fact for the machine that needs no event of its own (a worker
 * started, a step-aside call went out), taken at once. */
void agent__group_tell(agent_group *group, agent_input_kind kind);
/* An END call could not reach the store (the first time is kept, for the
 * summary: the rendezvous fails next for that reason). */
void agent__group_store_lost(agent_group *group, const char *why);
/* Shorthands for the worker events. */
void agent__group_worker_unhealthy(agent_group *group, agent_worker *worker, const char *reason,
                                   int exit_code, int term_signal);
void agent__group_worker_faulted(agent_group *group, agent_worker *worker, const char *reason);
/* Async-signal-safe: stop gracefully, leave, finish. */
void agent__group_request_stop(agent_group *group, int signum);
/* Membership news (any thread). */
void agent__group_on_change(void *group, const elastic_rdzv_cause *cause);
/* What helpers may ask (the state itself is group.c's). */
bool agent__group_is_running(const agent_group *group);    /* workers of the generation run */
bool agent__group_is_stopping(const agent_group *group);   /* they are being stopped */
bool agent__group_in_rendezvous(const agent_group *group); /* waiting for a generation */
bool agent__group_is_done(const agent_group *group);
/* Closes the group's handles (the loop must then run until they closed). */
/* false when a rendezvous is still blocked in next() (stopped meanwhile): the
 * group's memory must then stay allocated until the process exits. */
bool agent__group_close(agent_group *group);
void agent__group_destroy(agent_group *group);

#endif /* ELASTIC_AGENT_GROUP_H */
