/*
 * The agent side of the probes: pure decision logic (hang, straggler), the
 * pieces that act (stack dumps, user probes, the control server, the metrics
 * endpoint) and the monitor that runs them all on the agent's libuv loop.
 * Only src/probe/, the agent and the tests include this.
 */
#ifndef ELASTIC_PROBE_H
#define ELASTIC_PROBE_H

#include "common/common.h"
#include "probe/channel.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* ---- hang (hang.c): pure ------------------------------------------------ */

typedef struct probe__hang_state {
    uint64_t started_ns;             /* worker start, or generation start for a survivor */
    uint64_t baseline_beats;         /* beats already counted at started_ns */
} probe__hang_state;

/* Starts (or re-starts, for a new generation) watching a slot. */
void probe__hang_start(probe__hang_state *state, const probe__hb_snapshot *snapshot, uint64_t now_ns);
/* When the worker will count as hung if it stays silent (monotonic ns; 0:
 * never): the monitor arms a timer for the earliest one. */
uint64_t probe__hang_deadline(const probe__hang_state *state, const probe__hb_snapshot *snapshot,
                              uint64_t hang_timeout_ns, uint64_t startup_timeout_ns);
/* How long the worker has been silent and the limit that applies: the
 * startup timeout before its first beat since started_ns, the hang timeout
 * after. Returns true when silent_ns exceeds that limit. */
bool probe__hang_check(const probe__hang_state *state, const probe__hb_snapshot *snapshot, uint64_t now_ns,
                       uint64_t hang_timeout_ns, uint64_t startup_timeout_ns, uint64_t *silent_ns, bool *started);

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
int probe__straggler_evaluate(probe__straggler *s, double threshold, unsigned rounds, double *scores);

/* ---- stack dumps (stacks.c) ---------------------------------------------- */

typedef struct probe__stack_dump probe__stack_dump;
/* how: "gdb", "eu-stack", "signal" or "none"; ok: something was written. */
typedef void (*probe__stack_done_fn)(void *user, const char *how, bool ok);

/* Writes the stacks of pid's threads to log_fd: gdb (thread apply all bt) or
 * eu-stack when one is on PATH and works within timeout_ms; otherwise (or
 * when timeout_ms is under a second and fallback_signal is set) sends
 * fallback_signal (the worker library's backtrace handler; 0: none). Runs on
 * the loop; done runs once, on the loop. The dump keeps its own dup of log_fd. */
int probe__stack_dump_start(uv_loop_t *loop, int pid, int log_fd, int fallback_signal, int timeout_ms,
                            probe__stack_done_fn done, void *user, probe__stack_dump **out);
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
int probe__user_probe_start(uv_loop_t *loop, const char *command, probe__user_fn fn, void *fn_user, int interval_ms,
                            int timeout_ms, probe__user_result_fn result, void *user, probe__user_probe **out);
void probe__user_probe_stop(probe__user_probe *probe);

/* ---- HTTP requests (http.c): pure, bounded -------------------------------- */

#define PROBE__HTTP_MAX_HEAD 8192
#define PROBE__HTTP_MAX_TARGET 256

typedef struct probe__http_request {
    char method[8];
    char path[PROBE__HTTP_MAX_TARGET];   /* the target without its query */
    int status;                          /* on failure: the status to answer (400, 405, 414, 431, 505) */
} probe__http_request;

/* Parses a request head from the bytes received so far. 0: incomplete (read
 * more); > 0: complete, the head's length; < 0: ELASTIC_EPROTO (or ELIMIT) with
 * req->status set. Only GET and HEAD without a body are accepted. */
int probe__http_parse(const char *buf, size_t len, probe__http_request *req);

/* ---- text buffer (text.c) ------------------------------------------------- */

typedef struct probe__text {
    char *data;
    size_t len, cap, max;
    bool overflow;                   /* a write was cut at max */
} probe__text;

void probe__text_init(probe__text *t, size_t max);
void probe__text_printf(probe__text *t, const char *fmt, ...) ELASTIC__PRINTF(2, 3);
void probe__text_free(probe__text *t);

/* ---- metrics endpoint (metrics.c) ---------------------------------------- */

typedef struct probe__metrics_server probe__metrics_server;
/* Fills the body of /metrics; returns the /healthz verdict (true = healthy)
 * and a reason when unhealthy. */
typedef void (*probe__metrics_render_fn)(void *user, probe__text *metrics);
typedef bool (*probe__health_fn)(void *user, char *reason, size_t size);

/* Listens on host:port (port 0: a free one) on the loop. */
int probe__metrics_start(uv_loop_t *loop, const char *host, int port, probe__metrics_render_fn render,
                         probe__health_fn health, void *user, probe__metrics_server **out);
int probe__metrics_port(const probe__metrics_server *server);
/* Closes the listener and every connection; frees once the loop has let go. */
void probe__metrics_stop(probe__metrics_server *server);

/* Prometheus label value escaping (\\, \", \n) into out (always terminated). */
void probe__prom_escape(const char *in, char *out, size_t size);

/* ---- control server (control.c): the agent's end of the worker socket ------ */

typedef struct probe__control probe__control;
/* A message from the worker in `slot` (HELLO, ABORT_ACK, READY) or its
 * disconnection (type 0); generation from the payload, sent_ns the worker's
 * CLOCK_MONOTONIC when it sent it (0: not given), so the agent can time the
 * worker's own progress rather than its own scheduling. */
typedef void (*probe__control_fn)(void *user, int slot, int type, uint64_t generation, uint64_t sent_ns);

int probe__control_start(uv_loop_t *loop, const char *path, unsigned slots, probe__control_fn fn, void *user,
                         probe__control **out);
/* Sends a frame to the worker in slot; ELASTIC_ENOTFOUND when it has not said hello. */
int probe__control_send(probe__control *c, unsigned slot, int type, const char *payload);
bool probe__control_connected(const probe__control *c, unsigned slot);
void probe__control_stop(probe__control *c);


/* ---- the worker environment (workerenv.c) ---------------------------------- */

/* What a worker is told: at spawn as environment variables, on in-process
 * recovery as the RECONFIGURE payload (the worker parses both the same way). */
typedef struct probe__worker_env {
    int rank, local_rank, world_size, local_world_size, group_rank, restart_count;
    uint64_t generation;
    const char *run_id;              /* TORCHELASTIC_RUN_ID and ELASTIC_RUN_ID */
    const char *master_addr;         /* NULL: not set */
    int master_port;                 /* 0: not set */
    const char *store_endpoint;      /* NULL: no ELASTIC_* variables at all */
    const char *store_prefix;
    const char *heartbeat_shm;       /* NULL: none */
    int heartbeat_slot;
    const char *agent_socket;        /* NULL: none */
} probe__worker_env;

/* Appends "KEY=value\n" for every variable to out. ELASTIC_EINVAL when a
 * string holds a newline or '=' where it cannot. */
int probe__worker_env_format(const probe__worker_env *env, probe__text *out);

/* ---- the monitor (monitor.c): all probes for one agent --------------------- */

typedef struct probe__monitor probe__monitor;

typedef struct probe__failure {
    const char *probe;               /* "hang", "startup", "straggler", "user" */
    int local_rank;                  /* -1: the node (user probe) */
    int rank;                        /* -1 when unknown */
    uint64_t last_step;
    uint64_t silent_ms;              /* hang/startup: heartbeat silence when detected */
    char reason[256];                /* one line for the event log and the rdzv cause */
} probe__failure;

typedef void (*probe__failure_fn)(void *user, const probe__failure *failure);
/* Seen on the probe tick or at the worker's exit, on the loop thread. */
typedef void (*probe__checkpoint_fn)(void *user, int local_rank, int rank, uint64_t step, uint64_t wall_ms);

typedef struct probe__monitor_opts {
    uv_loop_t *loop;                 /* the agent's loop; every callback runs on it */
    const char *run_dir;             /* where the heartbeat file and the control socket go */
    unsigned local_world_size;
    const char *run_id, *node_id;    /* labels on the metrics page */
    int interval_ms;                 /* probe timer; default 1000, at most hang_timeout / 2 */
    int hang_timeout_ms;             /* silence after the first beat; 0: no hang probe */
    int startup_timeout_ms;          /* silence before the first beat; default max(600000, hang) */
    int stack_dump_timeout_ms;       /* debugger / backtrace deadline; default 15000 */
    int stack_dump_budget_ms;        /* what a hang's stacks may add to it; 0 (default): a twentieth of the
                                      * timeout that fired, at least 100 ms (under 1 s: no debugger) */
    unsigned straggler_window;       /* samples per rank; 0: no straggler scoring */
    double straggler_threshold;      /* a score below it is slow; default 0.7 */
    unsigned straggler_rounds;       /* consecutive slow rounds that make a persistent straggler; 0: only log */
    const char *user_probe_command;  /* or user_probe_fn; at most one */
    probe__user_fn user_probe_fn;
    void *user_probe_user;
    int user_probe_interval_ms;      /* default 10000 */
    int user_probe_timeout_ms;       /* default 5000 */
    const char *metrics_host;        /* default "127.0.0.1" */
    int metrics_port;                /* -1: no endpoint (default); 0: a free port */
    probe__failure_fn on_failure;    /* a worker or the node is unhealthy: end the generation */
    probe__failure_fn on_straggler;  /* a persistent straggler (the agent's eviction policy) */
    probe__control_fn on_control;    /* worker hello / abort ack / ready / disconnect; may be NULL */
    probe__checkpoint_fn on_checkpoint; /* a worker saved a checkpoint step; may be NULL */
    void *user;
} probe__monitor_opts;

void probe__monitor_opts_init(probe__monitor_opts *opts);
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
void probe__monitor_worker_started(probe__monitor *m, int local_rank, int rank, int pid, int log_fd);
/* A survivor of in-process recovery takes a new global rank. */
void probe__monitor_worker_renumbered(probe__monitor *m, int local_rank, int rank);
void probe__monitor_worker_exited(probe__monitor *m, int local_rank);

/* In-process recovery: messages to a worker over the control socket. */
int probe__monitor_abort_worker(probe__monitor *m, int local_rank, const char *reason);
int probe__monitor_reconfigure_worker(probe__monitor *m, int local_rank, const probe__worker_env *env);
int probe__monitor_stop_worker(probe__monitor *m, int local_rank);
bool probe__monitor_worker_connected(const probe__monitor *m, int local_rank);

/* A recovery finished: failure -> workers back in their loop, in seconds. */
void probe__monitor_record_recovery(probe__monitor *m, double seconds, bool in_process);
/* A failure the agent saw itself (worker exit), for the metrics' failure counts. */
void probe__monitor_count_failure(probe__monitor *m, const char *probe);
/* Straggler scores of the last round (-1: no data), one per local rank. */
void probe__monitor_scores(const probe__monitor *m, double *scores);

/* ---- Prometheus text (promparse.c): for elasticctl and the tests ------------ */

typedef struct probe__prom_sample {
    char name[128];
    char labels[512];                /* the raw text between the braces ("" when none) */
    double value;
} probe__prom_sample;

/* Parses one line of the text format. 1: a sample; 0: a comment or blank; < 0: malformed. */
int probe__prom_parse_line(const char *line, probe__prom_sample *sample);
/* The value of a label in a sample's label text, copied to out; false if absent. */
bool probe__prom_label(const char *labels, const char *name, char *out, size_t size);

/* ---- job status (status.c): `elasticctl status` ----------------------------- */

/* GET http://endpoint/path (endpoint "host:port", IPv4 or a name) with a
 * deadline for the whole exchange; the body (at most 16 MiB) goes to body,
 * the HTTP status to *status. */
int probe__http_get(const char *endpoint, const char *path, int timeout_ms, probe__text *body, int *status);
/* The job at a glance from a /metrics page and the /healthz answer. */
int probe__status_format(const char *metrics, int health_status, const char *health_body, probe__text *out);

#endif /* ELASTIC_PROBE_H */
