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
#include "agent/stream.h"
#include "agent/waiting.h"
#include "common/goodput.h"
#include "probe/probe.h"

#include <pthread.h>
#include <sys/types.h>
#include <uv.h>

#define AGENT_REAPER_MAX_TOLD 1024 /* adopted processes remembered as told (reaper.c) */

typedef struct agent_membership agent_membership;
typedef struct agent_health agent_health;
typedef struct agent_events agent_events;
typedef struct agent_jobstore agent_jobstore;

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
    AGENT_STOP_FOR_QUARANTINE /* evicted as a straggler: quarantine, then rejoin */
} agent_stop_reason;

typedef struct agent_exit_watch agent_exit_watch;
typedef struct agent_spare agent_spare;

typedef struct agent_worker {
    int local_rank;
    int rank;
    pid_t pid;                    /* leader of its own process group; 0: never started */
    bool running;                 /* started and not yet reaped */
    agent_exit_watch *exit_watch; /* its pidfd on the loop while running (exits.c); NULL: none */
    int exit_code;                /* -1 when killed by a signal */
    int term_signal;              /* 0 when it exited */
    uint64_t started_ms;          /* monotonic */
    agent_stream out, err;
    char dir[768];        /* gen_<G>/rank_<R> under the log root */
    char error_file[800]; /* its TORCHELASTIC_ERROR_FILE */
    bool survivor;        /* in-process recovery: kept across the generation change */
    bool abort_acked;     /* in-process recovery: its abort hook ran */
    bool reconfiguring;   /* in-process recovery: RECONFIGURE sent, READY not yet back */
    bool awaiting_hello;  /* started (or promoted) in a recovery: its attach is timed */
    agent_spare *spare;   /* a promoted warm spare: its output streams are the spare's */
} agent_worker;

/* The phases of the recovery in flight (phases.c), for recovery_phases. */
#define AGENT_PHASES_MAX 8 /* named phases the workers report */
typedef struct agent_recovery_phases {
    bool active;           /* a failure is being recovered from */
    uint64_t failure_ms;   /* the agent saw it (monotonic) */
    int64_t detect_ms;     /* the failed worker's last heartbeat -> failure_ms; -1: unknown */
    uint64_t stopped_ms;   /* the generation stopped here (survivors aborted) */
    uint64_t formed_ms;    /* the next generation formed */
    uint64_t attached_ms;  /* the last replacement process attached */
    uint64_t generation;   /* the generation recovered into */
    int promoted, cold_started, awaiting_hello;
    int restored; /* local workers that reported "restore" */
    char names[AGENT_PHASES_MAX][32];
    uint64_t max_ns[AGENT_PHASES_MAX]; /* the slowest local rank's time per phase */
} agent_recovery_phases;

/* How the job ended for this node (job_end's status). */
typedef enum agent_end_status {
    AGENT_END_SUCCEEDED, /* every worker exited 0 */
    AGENT_END_FAILED,    /* the rendezvous failed (budget exhausted, job closed, ...) */
    AGENT_END_STOPPED,   /* SIGTERM/SIGINT to the agent */
    AGENT_END_EVICTED,   /* stepped aside as the job's straggler, for good */
    AGENT_END_UNHEALTHY, /* a fatal health check: did not join, or left the job */
    AGENT_END_LEFT_OUT   /* waited as a spare (or to rejoin) and the job succeeded without us */
} agent_end_status;

/* "succeeded", "failed", "stopped", "evicted", "left_out": job_end's status and the console's word. */
const char *agent__end_status_name(agent_end_status status);

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
    AGENT_GROUP_HEALTH             /* a health check round's report is in (health.c; any thread) */
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
} agent_group_event;

typedef struct agent_group {
    uv_loop_t *loop;
    const elastic_agent_opts *opts;
    agent_membership *membership;
    agent_events *events;
    elastic_store *store;     /* job store (NULL when none): failure details are shared there */
    agent_jobstore *jobstore; /* etcd: the store per generation; NULL otherwise */
    const char *run_id;
    const char *node_id;
    const char *store_endpoint;
    const char *store_token_file; /* NULL: no token */
    char store_endpoint_buf[300]; /* etcd: the generation's, set when its NEXT is back */
    char store_token_buf[512];
    const char *log_root; /* per-generation directories go here */
    int log_root_fd;      /* ... opened through this descriptor (no link followed) */
    bool write_logs;      /* stdout.log / stderr.log files */

    agent_state state;
    agent_stop_reason stop_reason;
    elastic_rdzv_result current;
    uint64_t generations;
    agent_worker *workers;
    int nworkers;
    int running;   /* workers not yet reaped */
    int succeeded; /* workers of this generation that exited 0 */
    int closing_streams;

    uv_signal_t sigchld; /* started only where pidfds are unavailable (exits.c) */
    uv_timer_t grace_timer;
    uv_async_t wake; /* stop requests and membership news from other threads */

    /* Events posted to the state machine, drained in order on the loop
     * (agent__group_post); one posted while an event is being handled waits
     * in `nested` and goes first once that event is done. */
    struct agent_group_event *pending, *pending_tail;
    struct agent_group_event *nested, *nested_tail;
    bool draining;

    /* from other threads (guarded by lock) and from signal handlers (atomic) */
    pthread_mutex_t lock;
    bool wake_closed;        /* the wake async is closed: other threads' news is dropped */
    int pending_stop_signal; /* atomic; -1: none */
    struct agent_group_event *posted,
        *posted_tail;               /* from other threads, moved to pending by wake */
    agent_calls calls;              /* membership and store calls, off the loop (calls.c) */
    int ending_exit_code;           /* AGENT_ENDING: the exit code once the last call is back */
    agent_end_status ending_status; /* and the job_end status */
    agent_call_kind ending_call;    /* the last call in flight */
    uint64_t fenced_wall_ms;        /* when this node last fenced itself; 0: never */
    char fenced_reason[256];
    uint64_t store_lost_wall_ms; /* a call could not reach the store to end the generation */
    char store_lost_reason[256];

    int reaper_fd; /* the reaper's pipe (reaper.c); -1: none */
    pid_t reaper_pid;
    bool reaper_watching; /* its pipe is polled: a reaper that dies is replaced */
    pid_t reaper_zombie;  /* a replaced reaper not reaped yet; 0: none */
    uv_poll_t reaper_watch;
    bool reaper_unwatched;   /* the agent is closing: a reaper's end is expected */
    char reaper_cgroup[512]; /* the workers' cgroup v2, the agent's own while it runs; "": none */
    char reaper_parent_cgroup[400]; /* where the agent was (and returns before a normal exit) */
    char reaper_why[400];           /* why there is no cgroup ("" with one) */
    /* Without a cgroup the agent is a child subreaper; this timer looks for
     * the processes it adopted and tells the reaper of each once. */
    uv_timer_t reaper_scan;
    bool reaper_scanning;
    struct {
        pid_t pid;
        uint64_t start; /* /proc start time: a reused pid is another process */
    } reaper_told[AGENT_REAPER_MAX_TOLD];
    int reaper_n_told;
    uint64_t reaper_agent_start; /* the agent's /proc start time: descendants start later */

    probe__monitor *monitor; /* probes, metrics, the workers' channel (probes.c) */
    probe__job_straggler
        *job_straggler; /* job-wide node scores (node_straggler.c); NULL: none yet */
    uint64_t job_straggler_generation;
    bool node_stats_in_flight, node_straggler_reported;
    bool evict_in_flight;        /* at most one eviction call */
    bool evict_refused_logged;   /* "no spare" said once per generation */
    uv_timer_t quarantine_timer; /* AGENT_QUARANTINED: when to rejoin */
    agent_health *health;        /* node health checks (health.c); NULL: off */
    bool health_recheck;         /* the next join waits for a fresh health round */
    bool health_gating;          /* RENDEZVOUS: NEXT not posted yet, waiting for that round */
    bool stepped_aside_unhealthy; /* the quarantine is a fatal health check's */
    bool rejoining;              /* out of a quarantine: counted gone, nothing to leave */
    char probe_dir[96];          /* its heartbeat file and socket (short: a socket path) */
    /* The memory checkpoint tier (memory.c); memory NULL: none. */
    struct replica_service *memory;
    char memory_root[96], memory_dir[112];
    const char *node_addr; /* where peers reach this node's receiver */
    uint64_t restore_said; /* generation + 1 whose "resumed at" line was said */
    /* The generation's restore plan (the memory sync in NEXT), per local rank. */
    bool restore_planned;
    uint64_t restore_step;
    unsigned *restore_sources; /* CHANNEL__RESTORE_*; NONE: no plan for that rank */
    char (*restore_nodes)[72];
    int restore_count;
    uv_timer_t ack_timer;     /* in-process recovery: the abort acknowledgement deadline */
    int unhealthy_local_rank; /* the worker that ended the generation here; -1: none */
    char unhealthy_reason[300];
    int reconfiguring;             /* workers reconfigured in place whose READY is outstanding */
    uint64_t inprocess_failure_ms; /* the failure an in-process recovery is timed from */
    uint64_t inprocess_back_ms;    /* the latest READY so far (the workers' clock) */

    agent_spare *spares;         /* warm spares (spares.c): every record not yet freed */
    bool spares_disabled;        /* the trainer does not park: no more spares on this node */
    bool spares_closing;         /* the group is closing: nothing is restarted */
    uv_timer_t spare_timer;      /* a spare that has not parked in time is stopped */
    agent_recovery_phases phases;

    uint64_t started_ms, rendezvous_started_ms, stop_started_ms, failure_ms;
    int stop_signal;
    agent_failure local_failure;
    int exit_code;

    /* Slurm (slurm.c): the counts that make the job give up on this node */
    int local_failures;      /* workers of this node that failed, job-wide */
    int fenced_count;        /* times this node fenced itself */
    bool slurm_drain_posted; /* --slurm-drain: the drain call went out (once) */
    char slurm_lost[4][128]; /* Slurm node names of nodes lost from this node's generations */
    int slurm_lost_count;
    char summary[4096];

    /* what the console's job-end line sums up (console.c) */
    uint64_t lost_ms;     /* failure detected -> the group running again, summed */
    uint64_t steps_started_generation, steps_ended_generation; /* journaled for (goodput.c) */
    goodput_floor goodput_floor; /* the /metrics goodput counters' high-water marks */
    bool ckpt_step_valid; /* a worker reported a committed checkpoint */
    uint64_t ckpt_step, ckpt_wall_ms;
    int ckpt_rank;
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
