/*
 * The agent side of the probes: pure decision logic (hang, straggler), the
 * pieces that act (stack dumps, user probes, the control server, the metrics
 * endpoint) and the monitor that runs them all on the agent's libuv loop.
 * Only src/probe/, the agent and the tests include this.
 */
#ifndef ELASTIC_PROBE_H
#define ELASTIC_PROBE_H

#include "channel/channel.h"
#include "probe/progress.h"
#include "common/common.h"
#include "common/http.h"
#include "common/text.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* ---- hang (hang.c): pure ------------------------------------------------ */

typedef struct probe__hang_state {
    uint64_t started_ns;     /* worker start, or generation start for a survivor */
    uint64_t baseline_beats; /* beats already counted at started_ns */
} probe__hang_state;

/* Starts (or re-starts, for a new generation) watching a slot. */
void probe__hang_start(probe__hang_state *state, const channel__hb_snapshot *snapshot,
                       uint64_t now_ns);
/* When the worker will count as hung if it stays silent (monotonic ns; 0:
 * never): the monitor arms a timer for the earliest one. */
uint64_t probe__hang_deadline(const probe__hang_state *state, const channel__hb_snapshot *snapshot,
                              uint64_t hang_timeout_ns, uint64_t startup_timeout_ns);
/* How long the worker has been silent and the limit that applies: the
 * startup timeout before its first beat since started_ns, the hang timeout
 * after. Returns true when silent_ns exceeds that limit. */
bool probe__hang_check(const probe__hang_state *state, const channel__hb_snapshot *snapshot,
                       uint64_t now_ns, uint64_t hang_timeout_ns, uint64_t startup_timeout_ns,
                       uint64_t *silent_ns, bool *started);

/* ---- straggler (straggler.c): pure --------------------------------------- */

typedef struct probe__straggler probe__straggler;

/* ranks: workers scored together; window: samples kept per rank (>= 1). */
int probe__straggler_create(unsigned ranks, unsigned window, probe__straggler **out);
void probe__straggler_free(probe__straggler *s);
/* Forgets every rank's history (a new generation). */
void probe__straggler_reset(probe__straggler *s);
/* Adds one sample for a rank: cumulative step-time sum and step count, as in
 * the heartbeat slot (the straggler takes the deltas itself). */
void probe__straggler_sample(probe__straggler *s, unsigned rank, uint64_t sum_ns, uint64_t steps);
/* The rank's mean step time over the window in ns, or 0 with no data. */
double probe__straggler_step_ns(const probe__straggler *s, unsigned rank);
/* score[i] = median step time / rank i's (1 = typical, 0.5 = twice as slow);
 * -1 for a rank without data. Needs two ranks with data, else all -1. */
void probe__straggler_scores(const probe__straggler *s, double *scores);
/* Counts, per rank, consecutive evaluations with a score below threshold and
 * returns the slowest rank that reached `rounds` of them, or -1. */
int probe__straggler_evaluate(probe__straggler *s, double threshold, unsigned rounds,
                              double *scores);
/* The scoring rule itself, over any n items (a node's ranks, a job's nodes):
 * scores[i] = median of the times > 0 / times[i], -1 where times[i] <= 0 or
 * fewer than two have data; below[i] counts consecutive calls under the
 * threshold (NULL: scores only). Returns the slowest item at `rounds`, or -1. */
int probe__straggler_judge(const double *times, unsigned n, double threshold, unsigned rounds,
                           unsigned *below, double *scores);
/* The node's statistic for the job-wide scores: the median of its ranks'
 * window step times in ns, 0 while no rank has two samples. */
double probe__straggler_node_step_ns(const probe__straggler *s);

/* ---- job-wide straggler (job_straggler.c): pure ---------------------------- */

#define PROBE__NODE_STAT_BYTES 192 /* a published record, bounded */
#define PROBE__JOB_MAX_NODES   4096

/* One node's record in the store: "v1 <steps> <step_ns> <node_id>". */
typedef struct probe__node_stat {
    uint64_t steps;   /* steps its ranks finished this generation (the least of them) */
    uint64_t step_ns; /* median of its ranks' window step times; 0: no data yet */
    char node_id[128];
} probe__node_stat;

int probe__node_stat_format(const probe__node_stat *st, char *buf, size_t size);
/* Validates a record read from the store (ELASTIC_EPROTO when malformed). */
int probe__node_stat_parse(const char *buf, size_t len, probe__node_stat *out);

typedef struct probe__job_straggler probe__job_straggler;
int probe__job_straggler_create(unsigned nodes, probe__job_straggler **out);
void probe__job_straggler_free(probe__job_straggler *j);
/* One round over every node's record (present[i]: node i published one).
 * A node is scored only once it has warmup_steps steps and advanced since
 * the last round; scores[i] as probe__straggler_judge. Returns the slowest
 * node that stayed under the threshold `rounds` rounds in a row, or -1. */
int probe__job_straggler_evaluate(probe__job_straggler *j, const probe__node_stat *stats,
                                  const bool *present, uint64_t warmup_steps, double threshold,
                                  unsigned rounds, double *scores);

/* ---- stack dumps (stacks.c) ---------------------------------------------- */

typedef struct probe__stack_dump probe__stack_dump;
/* how: "gdb", "eu-stack", "signal" or "none"; ok: something was written. */
typedef void (*probe__stack_done_fn)(void *user, const char *how, bool ok);

/* Writes the stacks of pid's threads to log_fd: gdb (thread apply all bt) or
 * eu-stack when one is on PATH and works within timeout_ms; otherwise (or
 * when timeout_ms is under a second and fallback_signal is set) sends
 * fallback_signal (the worker library's backtrace handler; 0: none). Runs on
 * the loop; done runs once, on the loop. The dump keeps its own dup of log_fd. */
int probe__stack_dump_start(uv_loop_t *loop, int pid, int log_fd, int fallback_signal,
                            int timeout_ms, probe__stack_done_fn done, void *user,
                            probe__stack_dump **out);
/* Stops a dump in progress (done is not called). */
void probe__stack_dump_cancel(probe__stack_dump *dump);
/* The debugger that would be used ("gdb", "eu-stack") or NULL; cached. */
const char *probe__stack_debugger(void);

/* ---- user probes (userprobe.c) ------------------------------------------- */

/* A callback probe: 0 healthy, anything else unhealthy with a reason. Runs on the loop. */
typedef int (*probe__user_fn)(void *user, char *reason, size_t reason_size);
typedef void (*probe__user_result_fn)(void *user, bool healthy, const char *reason);
typedef struct probe__user_probe probe__user_probe;

/* Runs `command` (through /bin/sh -c; exit 0 = healthy, a timeout or anything
 * else = unhealthy) or `fn` every interval_ms on the loop; result runs after each. */
int probe__user_probe_start(uv_loop_t *loop, const char *command, probe__user_fn fn, void *fn_user,
                            int interval_ms, int timeout_ms, probe__user_result_fn result,
                            void *user, probe__user_probe **out);
void probe__user_probe_stop(probe__user_probe *probe);

/* ---- metrics endpoint (metrics.c) ---------------------------------------- */

typedef struct probe__metrics_server probe__metrics_server;
/* Fills the body of /metrics; returns the /healthz verdict (true = healthy)
 * and a reason when unhealthy. */
typedef void (*probe__metrics_render_fn)(void *user, elastic__text *metrics);
typedef bool (*probe__health_fn)(void *user, char *reason, size_t size);

/* Listens on host:port (port 0: a free one) on the loop. */
int probe__metrics_start(uv_loop_t *loop, const char *host, int port,
                         probe__metrics_render_fn render, probe__health_fn health, void *user,
                         probe__metrics_server **out);
int probe__metrics_port(const probe__metrics_server *server);
/* Closes the listener and every connection; frees once the loop has let go. */
void probe__metrics_stop(probe__metrics_server *server);

/* Prometheus label value escaping (\\, \", \n) into out (always terminated). */
void probe__prom_escape(const char *in, char *out, size_t size);

/* ---- control server (control_server.c): the agent's end of the worker socket ------ */

typedef struct probe__control probe__control;
/* A message from the worker in `slot` (HELLO, ABORT_ACK, READY) or its
 * disconnection (type 0); generation from the payload, sent_ns the worker's
 * CLOCK_MONOTONIC when it sent it (0: not given), so the agent can time the
 * worker's own progress rather than its own scheduling. */
typedef void (*probe__control_fn)(void *user, int slot, int type, uint64_t generation,
                                  uint64_t sent_ns);

int probe__control_start(uv_loop_t *loop, const char *path, unsigned slots, probe__control_fn fn,
                         void *user, probe__control **out);
/* Sends a frame to the worker in slot; ELASTIC_ENOTFOUND when it has not said hello. */
int probe__control_send(probe__control *c, unsigned slot, int type, const char *payload);
bool probe__control_connected(const probe__control *c, unsigned slot);
/* A worker's FAULT or EVENT (after its hello) with the parsed payload, valid
 * during the call. Without a handler set, those frames are dropped. */
typedef void (*probe__control_report_fn)(void *user, int slot, int type, const channel__kv *kv);
void probe__control_on_report(probe__control *c, probe__control_report_fn fn, void *user);
void probe__control_stop(probe__control *c);

/* ---- the monitor (monitor.c): all probes for one agent --------------------- */

typedef struct probe__monitor probe__monitor;

typedef struct probe__failure {
    const char *probe; /* "hang", "startup", "straggler", "user", "nccl_timeout", "nccl_error" */
    int local_rank;    /* -1: the node (user probe) */
    int rank;          /* -1 when unknown */
    uint64_t last_step;
    uint64_t silent_ms; /* hang/startup: heartbeat silence when detected */
    char reason[256];   /* one line for the event log and the rdzv cause */
} probe__failure;

typedef void (*probe__failure_fn)(void *user, const probe__failure *failure);
/* Seen on the probe tick or at the worker's exit, on the loop thread. */
typedef void (*probe__checkpoint_fn)(void *user, int local_rank, int rank, uint64_t step,
                                     uint64_t wall_ms);

typedef struct probe__monitor_opts {
    uv_loop_t *loop;     /* the agent's loop; every callback runs on it */
    const char *run_dir; /* where the heartbeat file and the control socket go */
    unsigned local_world_size;
    /* Control slots past the workers' for warm spares to park in (slot
     * local_world_size + i); they have no heartbeat slot and no probes. */
    unsigned spare_slots;
    const char *run_id, *node_id; /* labels on the metrics page */
    int interval_ms;              /* probe timer; default 1000, at most hang_timeout / 2 */
    int hang_timeout_ms;          /* silence after the first beat; 0: no hang probe */
    int startup_timeout_ms;       /* silence before the first beat; default max(600000, hang) */
    int stack_dump_timeout_ms;    /* debugger / backtrace deadline; default 15000 */
    int stack_dump_budget_ms; /* what a hang's stacks may add to it; 0 (default): a twentieth of the
                                      * timeout that fired, at least 100 ms (under 1 s: no debugger) */
    unsigned straggler_window;  /* samples per rank; 0: no straggler scoring */
    double straggler_threshold; /* a score below it is slow; default 0.7 */
    unsigned
        straggler_rounds; /* consecutive slow rounds that make a persistent straggler; 0: only log */
    const char *user_probe_command; /* or user_probe_fn; at most one */
    probe__user_fn user_probe_fn;
    void *user_probe_user;
    int user_probe_interval_ms;     /* default 10000 */
    int user_probe_timeout_ms;      /* default 5000 */
    const char *metrics_host;       /* default "127.0.0.1" */
    int metrics_port;               /* -1: no endpoint (default); 0: a free port */
    probe__failure_fn on_failure;   /* a worker or the node is unhealthy: end the generation */
    probe__failure_fn on_straggler; /* a persistent straggler (the agent's eviction policy) */
    probe__control_fn on_control;   /* worker hello / abort ack / ready / disconnect; may be NULL */
    probe__checkpoint_fn on_checkpoint; /* a worker saved a checkpoint step; may be NULL */
    /* The tier (CHANNEL__TIER_*) of that step, beside on_checkpoint; may be NULL. */
    void (*on_checkpoint_tier)(void *user, int local_rank, int rank, uint64_t step, unsigned tier);
    /* A worker restored (CHANNEL__RESTORE_* source, step, bytes, microseconds); may be NULL. */
    void (*on_restored)(void *user, int local_rank, int rank, unsigned source, uint64_t step,
                        uint64_t bytes, uint64_t us);
    /* An event a worker's library reported (NAME=nccl_comm_built ...); may be NULL. */
    void (*on_worker_event)(void *user, int local_rank, int rank, const channel__kv *kv);
    /* Every node_stat_interval_ms (0: never) while not paused: this node's
     * statistic for the job-wide straggler scores (the agent publishes it). */
    int node_stat_interval_ms;
    void (*on_node_stat)(void *user, const probe__node_stat *stat);
    /* Once a generation, on the probe tick: every running worker has reported
     * a step (the generation trains); may be NULL. */
    void (*on_steps_started)(void *user, const probe__progress *progress);
    /* Appends the agent's own lines to each /metrics page (the goodput
     * counters); may be NULL. */
    void (*on_render)(void *user, elastic__text *out);
    void *user;
} probe__monitor_opts;

void probe__monitor_opts_init(probe__monitor_opts *opts);
/* The job-wide scores for /metrics (elastic_node_straggler_score); n = 0 clears them. */
void probe__monitor_set_node_scores(probe__monitor *m, unsigned n, const probe__node_stat *stats,
                                    const double *scores);
/* Lines another part of the agent renders for /metrics (the node health
 * checks' per-GPU gauges, Prometheus text with their HELP/TYPE): copied,
 * appended to every page until replaced; NULL or "" clears them. On the loop. */
void probe__monitor_set_extra_metrics(probe__monitor *m, const char *text);
int probe__monitor_start(const probe__monitor_opts *opts, probe__monitor **out);
/* Closes everything on the loop (the heartbeat file and socket are removed). */
void probe__monitor_stop(probe__monitor *m);

const char *probe__monitor_heartbeat_path(const probe__monitor *m);
const char *probe__monitor_socket_path(const probe__monitor *m);
int probe__monitor_metrics_port(const probe__monitor *m);

/* What the group looks like now (metrics, and the generation the control
 * messages carry). Re-baselines the hang probe of every watched worker, so a
 * survivor gets the startup timeout again for its first beat. */
typedef struct probe__generation_info {
    uint64_t generation;
    int restart_count, world_size, nodes, group_rank;
} probe__generation_info;
void probe__monitor_generation_started(probe__monitor *m, const probe__generation_info *info);
/* Stops probing until the next generation starts (the group is being torn down or re-formed). */
void probe__monitor_pause(probe__monitor *m);

/* A new process in local_rank's slot (its slot is zeroed first: call before it starts). */
void probe__monitor_worker_starting(probe__monitor *m, int local_rank);
/* It runs with this pid and global rank; log_fd receives its stacks (-1: stderr; dup'd). */
void probe__monitor_worker_started(probe__monitor *m, int local_rank, int rank, int pid,
                                   int log_fd);
/* A survivor of in-process recovery takes a new global rank. */
void probe__monitor_worker_renumbered(probe__monitor *m, int local_rank, int rank);
void probe__monitor_worker_exited(probe__monitor *m, int local_rank);

/* In-process recovery: messages to a worker over the control socket. */
int probe__monitor_abort_worker(probe__monitor *m, int local_rank, const char *reason);
int probe__monitor_reconfigure_worker(probe__monitor *m, int local_rank,
                                      const channel__worker_env *env);
int probe__monitor_stop_worker(probe__monitor *m, int local_rank);
/* A stop notice (CHANNEL__MSG_NOTICE): the job is stopping, the worker has
 * grace_ms to save. 0 also when the worker never attached (nothing to tell). */
int probe__monitor_notice_worker(probe__monitor *m, int local_rank, int grace_ms,
                                 const char *reason);
bool probe__monitor_worker_connected(const probe__monitor *m, int local_rank);
/* Warm spares: the spare parked in control slot local_world_size + index gets
 * PROMOTE with env (and GROUP_WORLD_SIZE=group_world_size), or STOP (env NULL). */
int probe__monitor_spare_send(probe__monitor *m, unsigned index, const channel__worker_env *env,
                              int group_world_size);
bool probe__monitor_spare_parked(const probe__monitor *m, unsigned index);
/* The worker's last heartbeat (CLOCK_MONOTONIC ns) as its slot holds it now; 0: none. */
uint64_t probe__monitor_last_beat_ns(const probe__monitor *m, int local_rank);

/* The step of the worker's last heartbeat as its slot holds it now; -1: it
 * never beat (a trainer that reports no steps, or no slot). */
int64_t probe__monitor_last_step(const probe__monitor *m, int local_rank);

/* A recovery finished: failure -> workers back in their loop, in seconds. */
void probe__monitor_record_recovery(probe__monitor *m, double seconds, bool in_process);
/* A failure the agent saw itself (worker exit), for the metrics' failure counts. */
void probe__monitor_count_failure(probe__monitor *m, const char *probe);
/* This generation's progress on this node, from fresh reads of the slots
 * (progress.h): call it when the generation's workers have stopped, before
 * the next ones start in the slots. */
void probe__monitor_progress(const probe__monitor *m, probe__progress *out);
/* Straggler scores of the last round (-1: no data), one per local rank. */
void probe__monitor_scores(const probe__monitor *m, double *scores);

#endif /* ELASTIC_PROBE_H */
