/*
 * The agent's runtime pieces on its libuv loop: worker processes and their
 * output, the membership (local or rendezvous), the event log, and the
 * worker group's state machine (group.c) that ties them together.
 */
#ifndef ELASTIC_AGENT_GROUP_H
#define ELASTIC_AGENT_GROUP_H

#include "agent/agent.h"
#include "probe/probe.h"

#include <pthread.h>
#include <sys/types.h>
#include <uv.h>

/* ---- processes (proc.c) ---------------------------------------------------- */

typedef struct agent_spawn {
    const char *path; /* resolved executable */
    const char *const *argv;
    const char *const *envp;
    const char *cwd; /* NULL: the agent's */
} agent_spawn;

/* Finds `name` on PATH (or checks a path with a slash) before forking. */
int agent__resolve_program(const char *name, char *path, size_t path_size);
/* Starts a worker as the leader of a new process group that dies with the
 * agent. out_read/err_read (NULL: inherit) receive the read ends of pipes
 * connected to its stdout/stderr. */
int agent__proc_spawn(const agent_spawn *spec, pid_t *pid, int *out_read, int *err_read);
/* Signals every process in a worker's process group (ESRCH is fine). */
void agent__proc_signal_group(pid_t pgid, int signum);

/* ---- worker output (output.c) ---------------------------------------------- */

#define AGENT_TAIL_BYTES 2048

typedef struct agent_stream {
    uv_pipe_t pipe;
    bool open;       /* the pipe handle is live (closing counts as live) */
    int console_fd;  /* where the console copy goes; -1: none */
    int file_fd;     /* the log file; -1: none */
    char prefix[56]; /* "[default3]:" when tee'd; "" otherwise */
    char line[1024]; /* partial line waiting for its prefix */
    size_t line_len;
    bool keep_tail; /* remember the last bytes (stderr) for the summary */
    char tail[2 * AGENT_TAIL_BYTES];
    size_t tail_len;
    void (*on_closed)(void *owner); /* after the handle closed */
    void *owner;
} agent_stream;

/* Starts relaying `fd` (owned from now on) on the loop. */
int agent__stream_open(uv_loop_t *loop, agent_stream *stream, int fd);
/* Reads what the exited worker left in the pipe, flushes, closes the file
 * and the handle (asynchronously: *closing_handles drops when done). */
void agent__stream_finish(agent_stream *stream);
/* The last bytes seen, at most size-1, NUL-terminated. */
size_t agent__stream_tail(const agent_stream *stream, char *out, size_t size);

/* ---- worker environment and command (env.c) -------------------------------- */

typedef struct agent_worker_env {
    const elastic_agent_opts *opts;
    const elastic_rdzv_result *generation;
    const char *run_id;
    const char *store_endpoint;
    const char *store_prefix;
    const char *store_token_file; /* the token's file in the agent's run directory; NULL: none */
    const char *error_file;
    int local_rank;
    const char *heartbeat_shm; /* the probe monitor's heartbeat file; NULL: none */
    const char *agent_socket;  /* its control socket; NULL: none */
} agent_worker_env;

/* A NULL-terminated environment: the agent's own minus what torchrun sets,
 * plus torchrun's variables and ours. Free with agent__strv_free(). */
int agent__env_build(const agent_worker_env *spec, char ***envp);

/* The worker's argv (python3 -u script args / the program itself) with
 * ${local_rank} substituted. Free with agent__strv_free(). */
int agent__command_build(const elastic_agent_opts *opts, int local_rank, char ***argv);
void agent__strv_free(char **strv);

/* ---- the workers' Python (python.c) ------------------------------------------ */

/* --python, else $PYTHON_EXEC, else "python3" (looked up on PATH). */
const char *agent__python_interpreter(const elastic_agent_opts *opts);
/* "/usr/bin/python3 (Python 3.11.2)", or why it is unknown. Runs it once. */
void agent__python_describe(const elastic_agent_opts *opts, char *out, size_t size);
/* elasticrun's start line on stderr: run id, workers, interpreter and version. */
void agent__python_start_line(const elastic_agent_opts *opts, const char *run_id);
/* A PYTHON_EXEC hint line when a worker's error text shows ModuleNotFoundError. */
bool agent__python_hint(const elastic_agent_opts *opts, const char *detail, char *out, size_t size);

/* ---- membership (membership_local.c, membership_rdzv.c) -------------------- */

typedef struct agent_membership agent_membership;
/* News that the current generation must end; runs on any thread. */
typedef void (*agent_change_fn)(void *user, const elastic_rdzv_cause *cause);

typedef struct agent_membership_ops {
    bool next_blocks; /* run next() on a helper thread */
    int (*next)(agent_membership *m, elastic_rdzv_result *result);
    int (*end_generation)(agent_membership *m, const elastic_rdzv_cause *cause);
    int (*finish)(agent_membership *m);
    int (*leave)(agent_membership *m);
    int (*first_failure)(agent_membership *m, elastic_rdzv_cause *cause);
    void (*destroy)(agent_membership *m);
} agent_membership_ops;

struct agent_membership {
    const agent_membership_ops *ops;
};

/* One node that needs no one's agreement: generations, budget and the first
 * failure are kept in memory. */
int agent__membership_local(int nproc, int max_restarts, const char *master_addr,
                            agent_membership **m);

/* Several nodes: elastic_rdzv_* over the job's store; on_change runs on the
 * rendezvous' thread when the current generation must end. */
int agent__membership_rdzv(const elastic_rdzv_opts *opts, agent_change_fn on_change, void *user,
                           agent_membership **m);
/* The same on etcd: every generation also gets its own job store (jobstore, not owned). */
typedef struct agent_jobstore agent_jobstore;
int agent__membership_etcd(const elastic_rdzv_opts *opts, agent_jobstore *jobstore,
                           agent_change_fn on_change, void *user, agent_membership **m);
/* The rendezvous handle of a membership made by either (NULL otherwise). */
elastic_rdzv *agent__membership_handle(agent_membership *m);

/* ---- the job's store per generation (jobstore.c, --rdzv-backend etcd-v3) ---- */

typedef struct agent_jobstore {
    /* Set by the agent. */
    const char *bind_host;      /* where a hosted store listens */
    const char *advertise_host; /* how the other nodes reach it */
    const char
        *fixed_token;    /* the job's configured token (every node has it); NULL: random per host */
    int read_timeout_ms; /* store calls (0: the client's default) */
    int lookup_timeout_ms; /* how long to wait for the host's endpoint */
    char *endpoint;        /* the group's store_endpoint buffer, updated per generation */
    size_t endpoint_size;
    const char *token_dir; /* the agent's private run directory (workers' token file) */
    char *token_file;      /* its path buffer, and the group's pointer to it */
    size_t token_file_size;
    const char **group_token_file;
    elastic_store **group_store; /* the group's store handle, replaced per generation */
    /* Own state. */
    elastic_store_server *server; /* while this node hosts (it was group rank 0) */
    char host_token[40];          /* the random token of the store we host (no fixed token) */
    char written_token[128];      /* the random token in the workers' file now ("" none) */
    uint64_t published;           /* the last generation we published a store for */
    int logged_port;
    /* Watches the generation's store connection: its host dying is a lost
     * node (no budget), reported before the workers' own errors can end the
     * generation as their FAILURE. */
    pthread_t watcher;
    bool watching;
    int watcher_stop; /* atomic */
    elastic_rdzv *watch_rdzv;
    elastic_store *watch_store;
    uint64_t watch_generation;
    uint64_t lost_generation; /* atomic: the generation whose store host was lost; 0: none */
    char watch_key[300];
} agent_jobstore;

/* After next(): host and publish (group rank 0) or look up and connect. */
int agent__jobstore_attach(agent_jobstore *js, elastic_rdzv *r, const elastic_rdzv_result *result);
bool agent__jobstore_hosting(const agent_jobstore *js);
/* Whether generation's store host was lost: the watcher saw it, or one
 * request on our connection to that store fails to reach it (loop thread). */
bool agent__jobstore_lost(agent_jobstore *js, uint64_t generation);
void agent__jobstore_close(agent_jobstore *js);

/* ---- membership and store calls off the loop (calls.c) --------------------- */

typedef enum agent_call_kind {
    AGENT_CALL_NEXT,          /* the next rendezvous */
    AGENT_CALL_END,           /* end the generation with `cause` */
    AGENT_CALL_FINISH,        /* every local worker succeeded */
    AGENT_CALL_LEAVE,         /* shutting down */
    AGENT_CALL_SHARE_FAILURE, /* put a failure's detail in the job store (key, value) */
    AGENT_CALL_SUMMARY,       /* write the root-cause summary (reads the store) */
    AGENT_CALL_NODE_STATS,    /* publish this node's straggler statistic, read all */
    AGENT_CALL_EVICT          /* this node is the job's straggler: step aside if it may */
} agent_call_kind;

typedef struct agent_call {
    struct agent_call *next;
    agent_call_kind kind;
    elastic_rdzv_cause cause; /* END */
    char key[512];            /* SHARE_FAILURE */
    char value[AGENT_TAIL_BYTES + 1];
    int summary_rc;             /* SUMMARY: the error that ends the job */
    int rc;                     /* the result */
    char error[256];            /* its detail (SUMMARY: the input detail) */
    elastic_rdzv_result result; /* NEXT */
    uint64_t generation; /* NODE_STATS: key is ours, value our record, prefix the generation's */
    char prefix[256];
    unsigned node_count; /* NODE_STATS: the generation's nodes, and what was read (by group rank) */
    probe__node_stat *node_stats;
    bool *node_present;
    bool evicted;          /* EVICT (reason in `value`): this node's end won */
    int waiting;           /* EVICT: spares waiting in the open round */
    char replacement[128]; /* EVICT: the likely replacement's node id; "": unknown */
    double score;          /* EVICT: the verdict it acts on */
    uint64_t step_ms;
} agent_call;

typedef struct agent_calls {
    bool started, busy, stopping;
    pthread_t thread;
    pthread_cond_t wake; /* with the group's lock */
    agent_call *queue;   /* posted, not yet run */
    agent_call *done;    /* run, waiting for the loop */
} agent_calls;

struct agent_group;
agent_call *agent__call_new(agent_call_kind kind);
void agent__call_free(agent_call *call);
/* Runs the call on the calls thread (inline for in-memory membership); its
 * result comes back on the loop through agent__group_call_done. NULL: no memory. */
void agent__call_post(struct agent_group *group, agent_call *call);
/* On the loop (the wake async): hands finished calls to agent__group_call_done. */
void agent__calls_drain(struct agent_group *group);
/* false when a call is still blocked: the group must stay allocated. */
bool agent__calls_stop(struct agent_group *group);

/* ---- event log (events.c) -------------------------------------------------- */

typedef struct agent_events agent_events;
typedef struct agent_event {
    char text[4096];
    size_t len;
    bool overflow;
} agent_event;

/* path NULL: events are only logged at debug level. */
int agent__events_open(const char *path, const char *run_id, const char *node_id,
                       agent_events **events);
void agent__events_close(agent_events *events);
void agent__event_begin(agent_event *event, const agent_events *events, const char *name);
void agent__event_int(agent_event *event, const char *key, int64_t value);
void agent__event_str(agent_event *event, const char *key, const char *value);
void agent__event_emit(agent_events *events, agent_event *event);
/* JSON string escaping (into out, NUL-terminated, truncated to size). */
void agent__json_escape(const char *text, char *out, size_t size);

/* ---- the worker group (group.c, workers.c, summary.c) ----------------------- */

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
} agent_worker;

/* A failure this node saw first-hand, for the root-cause summary. */
typedef struct agent_failure {
    bool valid;
    elastic_rdzv_cause cause;
    int local_rank;
    char detail[AGENT_TAIL_BYTES + 1]; /* its error file, else the tail of its stderr */
    bool detail_is_error_file;
} agent_failure;

typedef struct agent_group agent_group;

/* waiting.c: the periodic look at a slow rendezvous. */
typedef struct agent_waiting {
    agent_group *group;
    uv_timer_t timer;
    uv_work_t work;
    bool in_flight;
    uint64_t last_generation; /* whose members should be back; 0: none */
    int joined;               /* results of the last look (-1: unknown) */
    int missing_count;
    char missing[512];
} agent_waiting;

struct agent_group {
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
    const char *log_root;         /* per-generation directories go here */
    int log_root_fd;              /* ... opened through this descriptor (no link followed) */
    bool write_logs;              /* stdout.log / stderr.log files */

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

    /* from other threads (guarded by lock) and from signal handlers (atomic) */
    pthread_mutex_t lock;
    int pending_stop_signal; /* atomic; -1: none */
    bool change_pending;
    elastic_rdzv_cause change;
    agent_calls calls;         /* membership and store calls, off the loop (calls.c) */
    int ending_exit_code;      /* AGENT_ENDING: the exit code once the last call is back */
    const char *ending_status; /* and the job_end status */
    uint64_t fenced_wall_ms;   /* when this node last fenced itself; 0: never */
    char fenced_reason[256];

    int reaper_fd; /* the reaper's pipe (reaper.c); -1: none */
    pid_t reaper_pid;
    bool reaper_watching; /* its pipe is polled: a reaper that dies is replaced */
    pid_t reaper_zombie;  /* a replaced reaper not reaped yet; 0: none */
    uv_poll_t reaper_watch;
    bool reaper_unwatched;   /* the agent is closing: a reaper's end is expected */
    char reaper_cgroup[512]; /* the workers' cgroup v2, the agent's own while it runs; "": none */
    char reaper_parent_cgroup[400]; /* where the agent was (and returns before a normal exit) */

    probe__monitor *monitor; /* probes, metrics, the workers' channel (probes.c) */
    probe__job_straggler
        *job_straggler; /* job-wide node scores (node_straggler.c); NULL: none yet */
    uint64_t job_straggler_generation;
    bool node_stats_in_flight, node_straggler_reported;
    bool evict_in_flight;        /* at most one eviction call */
    bool evict_refused_logged;   /* "no spare" said once per generation */
    uv_timer_t quarantine_timer; /* AGENT_QUARANTINED: when to rejoin */
    char probe_dir[96];          /* its heartbeat file and socket (short: a socket path) */
    uv_timer_t ack_timer;        /* in-process recovery: the abort acknowledgement deadline */
    int unhealthy_local_rank;    /* the worker that ended the generation here; -1: none */
    char unhealthy_reason[300];
    int reconfiguring;             /* workers reconfigured in place whose READY is outstanding */
    uint64_t inprocess_failure_ms; /* the failure an in-process recovery is timed from */
    uint64_t inprocess_back_ms;    /* the latest READY so far (the workers' clock) */

    uint64_t started_ms, rendezvous_started_ms, stop_started_ms, failure_ms;
    int stop_signal;
    agent_failure local_failure;
    int exit_code;
    char summary[4096];

    /* what the console's job-end line sums up (console.c) */
    uint64_t lost_ms;     /* failure detected -> the group running again, summed */
    bool ckpt_step_valid; /* a worker reported a committed checkpoint */
    uint64_t ckpt_step, ckpt_wall_ms;
    int ckpt_rank;
    agent_waiting waiting;
};

/* The workers' key space in the job store for the current generation. */
void agent__worker_store_prefix(const agent_group *group, char *out, size_t size);

int agent__group_init(agent_group *group, uv_loop_t *loop);
/* Starts the first rendezvous; the loop does the rest until state is DONE. */
void agent__group_start(agent_group *group);
/* THE place where a local worker is declared unhealthy (it failed, or a probe
 * says it hangs): stops the local workers and ends the generation for every
 * node with this cause (a failure: it consumes the restart budget). */
void agent__group_worker_unhealthy(agent_group *group, agent_worker *worker, const char *reason,
                                   int exit_code, int term_signal);
/* The same for a worker whose library found the group broken (an NCCL
 * timeout or error) while the process itself is fine: in-process recovery
 * keeps it like the other healthy workers. */
void agent__group_worker_faulted(agent_group *group, agent_worker *worker, const char *reason);
/* A worker's output stream finished closing. */
void agent__group_stream_closed(agent_group *group);
/* Async-signal-safe: stop gracefully, leave, finish. */
void agent__group_request_stop(agent_group *group, int signum);
/* Membership news (any thread). */
void agent__group_on_change(void *group, const elastic_rdzv_cause *cause);
/* Closes the group's handles (the loop must then run until they closed). */
/* false when a rendezvous is still blocked in next() (stopped meanwhile): the
 * group's memory must then stay allocated until the process exits. */
bool agent__group_close(agent_group *group);
void agent__group_destroy(agent_group *group);

/* workers.c: start and reap this generation's workers. */
/* Begins a worker event: name, generation, rank, local_rank, pid. */
void agent__event_worker(agent_event *event, const agent_group *group, const char *name,
                         const agent_worker *worker);
int agent__workers_start(agent_group *group);
void agent__workers_reap(agent_group *group, void (*on_exit)(agent_group *, agent_worker *));
void agent__workers_signal(agent_group *group, int signum);
/* group.c: reaps whichever workers exited and moves the state machine on. */
void agent__group_workers_exited(agent_group *group);

/* exits.c: a worker's exit reaches the loop through its pidfd (SIGCHLD where
 * pidfds are unavailable). start() right after spawning; stop() once reaped. */
int agent__exits_init(agent_group *group);
void agent__exits_close(agent_group *group);
void agent__exit_watch_start(agent_group *group, agent_worker *worker);
void agent__exit_watch_stop(agent_worker *worker);

/* probes.c: the probe monitor on the group's loop, and its hooks. */
int agent__probes_start(agent_group *group);
void agent__probes_stop(agent_group *group);
void agent__probes_generation_started(agent_group *group);
void agent__probes_worker_starting(agent_group *group, agent_worker *worker);
void agent__probes_worker_started(agent_group *group, agent_worker *worker);
void agent__probes_worker_exited(agent_group *group, agent_worker *worker);

/* inprocess.c: --in-process-recovery. stop() aborts the healthy workers
 * instead of stopping them (false: not in this mode); kept() counts those that
 * acknowledged; reconfigure() moves a kept worker into the current generation. */
bool agent__inprocess_stop(agent_group *group, int failed_local_rank, const char *reason);
int agent__inprocess_kept(const agent_group *group);
int agent__inprocess_reconfigure(agent_group *group, agent_worker *worker);
void agent__inprocess_on_control(void *user, int slot, int type, uint64_t generation,
                                 uint64_t sent_ns);
/* group.c: re-checks whether the stopping generation is over. */
void agent__group_maybe_stopped(agent_group *group);

/* group.c: a call posted with agent__call_post is back (on the loop). */
void agent__group_call_done(agent_group *group, agent_call *call);

/* ---- job-wide straggler scores (node_straggler.c) ---------------------------- */

#define AGENT_NODE_STAT_INTERVAL_MS \
    2000 /* how often a node publishes and reads the job's statistics */
/* The monitor's node statistic (loop thread): posts the publish-and-read call. */
void agent__node_stat(void *user, const probe__node_stat *stat);
/* Runs on the calls thread: one set, one key listing, one multi-get. */
void agent__node_stats_exchange(agent_group *group, agent_call *call);
/* Back on the loop: scores, /metrics, the node_straggler event. */
void agent__node_stats_done(agent_group *group, agent_call *call);
void agent__node_stats_free(agent_group *group);
/* Runs on the calls thread: step aside from the generation if a spare waits. */
void agent__node_evict_run(agent_group *group, agent_call *call);
/* Back on the loop: the event, the console line, the quarantine. */
void agent__node_evict_done(agent_group *group, agent_call *call);
/* group.c: stops the workers of an evicted node (its generation has ended). */
void agent__group_quarantine(agent_group *group);

/* reaper.c: a process that kills every worker's process group (and cgroup)
 * and removes the run directory when the agent dies, SIGKILL included. */
int agent__reaper_start(agent_group *group);
/* A worker now leads process group `pgid` (replacing old_pgid, 0: none). */
void agent__reaper_track(agent_group *group, pid_t old_pgid, pid_t pgid);
void agent__reaper_stop(agent_group *group);
/* Stops watching the reaper (before the loop closes; the reaper stays). */
void agent__reaper_unwatch(agent_group *group);
/* Removes the run directories of dead agents under tmp. */
void agent__reaper_sweep_stale(const char *tmp);

/* console.c: one line on stderr per event a person needs (nothing with --quiet). */
void agent__console(const agent_group *group, const char *fmt, ...) ELASTIC__PRINTF(2, 3);
void agent__console_failure(const agent_group *group, const agent_worker *worker,
                            const elastic_rdzv_cause *cause);
void agent__console_ended_elsewhere(const agent_group *group, const elastic_rdzv_cause *cause);
void agent__console_running_again(const agent_group *group, uint64_t recovery_ms);
/* This node lost its membership lease (group.c's handle_fenced). */
void agent__console_fenced(const agent_group *group, uint64_t generation, const char *reason,
                           int killed);
/* This node gave way to a spare as the job's straggler (node_straggler.c). */
void agent__console_evicted(const agent_group *group, const agent_call *call);
void agent__console_job_end(const agent_group *group, const char *status);
/* "killed by signal 9 (SIGKILL)", "exit code 3", or "" when neither. */
void agent__describe_exit(int exit_code, int term_signal, char *out, size_t size);
/* A cause's reason said once (a probe's words plus how the worker ended). */
void agent__describe_cause(const elastic_rdzv_cause *cause, char *out, size_t size);

/* waiting.c: "waiting for nodes" lines while a rendezvous is slow. */
int agent__waiting_init(agent_group *group);
void agent__waiting_start(agent_group *group);
void agent__waiting_stop(agent_group *group);
void agent__waiting_close(agent_group *group);

/* errorfile.c: a worker's torchrun error file as indented traceback lines;
 * 0 when it is not such JSON (the caller shows it as it is). */
size_t agent__error_file_render(const char *json, char *out, size_t size);

/* summary.c: root cause, error file and the failure's details in the store. */
/* Records the first local failure in memory (never blocks); share() posts its
 * detail to the job store off the loop. */
void agent__failure_record(agent_group *group, agent_worker *worker,
                           const elastic_rdzv_cause *cause);
void agent__failure_share(agent_group *group, const elastic_rdzv_cause *cause);
void agent__summary_write(agent_group *group, int rc, const char *why);

#endif /* ELASTIC_AGENT_GROUP_H */
