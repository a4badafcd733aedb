/*
 * The agent: one per node. It rendezvouses with the other nodes, starts the
 * local workers with torchrun's environment, watches them, and brings the
 * group back after every failure. bin/elasticrun is a thin shell around it.
 * Included by <elastic.h>; may also be included on its own.
 */
#ifndef ELASTIC_AGENT_H
#define ELASTIC_AGENT_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Thread safety: elastic_agent_run runs the whole job on the calling thread;
 * elastic_agent_request_stop may be called from any thread or a signal
 * handler while it runs; elastic_agent_free after run returned, from any
 * thread. The agent has no callbacks.
 *
 * Signals the agent installs (between elastic_agent_create and _free):
 *   - SIGCHLD: an ignored disposition (SIG_IGN or SA_NOCLDWAIT, e.g.
 *     inherited across exec) is reset to the default at create, so exit codes
 *     are kept. Worker exits are read from pidfds; a libuv handler reaps the
 *     probe processes it starts (and the workers on kernels without
 *     pidfd_open). The host must not reap children with waitpid(-1) or set
 *     SIGCHLD to SIG_IGN while an agent exists.
 * It sends SIGTERM, then SIGKILL after grace_period_ms, to its workers'
 * process groups (and the stack-dump signal on a hang), and sets
 * PR_SET_PDEATHSIG=SIGKILL in each worker. It installs no SIGTERM/SIGINT
 * handler: the host does, and calls elastic_agent_request_stop from it
 * (elasticrun does; it also ignores SIGPIPE). */
typedef struct elastic_agent elastic_agent;

/* Everything elasticrun's command line can say. Strings are borrowed: they
 * must outlive the agent (elastic_agent_parse_args points them into argv and
 * the environment). */
typedef struct elastic_agent_opts {
    size_t struct_size; /* sizeof(elastic_agent_opts) */
    /* membership (torchrun's --nnodes, --rdzv-*, --standalone, ...) */
    int min_nodes;             /* default 1 */
    int max_nodes;             /* default 1 */
    int nproc_per_node;        /* workers on this node; default 1 */
    const char *rdzv_backend;  /* "c10d" or "static"; default "static" (as torchrun) */
    const char *rdzv_endpoint; /* "host[:port]"; default "" */
    const char *run_id;        /* default "none" */
    const char *rdzv_conf;     /* "key=value,..."; default "" (see docs/OPERATIONS.md) */
    int standalone;            /* 1: single node, own store on a free port, random run_id */
    int max_restarts;          /* job-wide failure budget; default 0 */
    int monitor_interval_ms;   /* bounds polling probes only; exits are events; default 5000 */
    const char *role;          /* default "default" */
    const char *local_addr;    /* this node's address for the others; default: hostname */
    int node_rank;             /* static backend: this node's rank; default 0 */
    const char *master_addr;   /* static backend: the store host; default "127.0.0.1" */
    int master_port;           /* static backend: the store port; default 29500 */
    /* workers' output */
    const char *log_dir;   /* NULL: a temporary directory (removed at the end) */
    const char *redirects; /* torchrun's Std: "0".."3" or "local_rank:std,..."; default "0" */
    const char *tee;       /* same form; tee'd lines are prefixed "[<role><rank>]:"; default "0" */
    /* the program */
    int no_python;      /* run argv[0] as the executable */
    int module;         /* python -m argv[0] */
    int run_path;       /* accepted for torchrun compatibility: same as the default */
    const char *python; /* interpreter; default $PYTHON_EXEC, else "python3" on PATH */
    int argc;           /* the program and its arguments */
    const char *const *argv;
    /* ours */
    int grace_period_ms;    /* SIGTERM -> SIGKILL delay when stopping workers; default 5000 */
    int hang_timeout_ms;    /* a worker silent this long is hung (probes); 0 = off (default) */
    const char *event_log;  /* JSONL event log path; NULL: none */
    const char *error_file; /* root-cause JSON path; NULL: $TORCHELASTIC_ERROR_FILE if set */
    int help;               /* set by elastic_agent_parse_args for -h/--help */
    int version;            /* set by elastic_agent_parse_args for --version */
    /* probes and in-process recovery (docs/PROBES.md); hang_timeout_ms is above */
    /* No first heartbeat this long: hung; 0 (default): max(600 s, hang timeout). */
    int startup_timeout_ms;
    /* /metrics and /healthz on metrics_host; -1 (default): off; 0: a free port. */
    int metrics_port;
    const char *metrics_host; /* default "127.0.0.1" */
    int straggler_window;     /* probe ticks per straggler window; 0 (default): no scoring */
    /* Slow ticks in a row that make a persistent straggler; 0: only scores. */
    int straggler_rounds;
    int straggler_evict; /* 1: a straggler rank restarts; a straggler node gives way */
    /* Shell command run on an interval; exit 0 = healthy; NULL: none. */
    const char *user_probe;
    int user_probe_interval_ms; /* default 10000 */
    /* 1: workers healthy at a failure stay; only the failed one restarts. */
    int in_process_recovery;
    /* In-process: a survivor acknowledges the abort within this; default 5000. */
    int abort_ack_timeout_ms;
    /* 1: no console lines on stderr (failures, restarts, waiting, the summary). */
    int quiet;
    /* An evicted node rejoins after this; 0: it leaves; default 300 s. */
    int straggler_quarantine_ms;
    /* Slurm (docs/SLURM.md): elastic_agent_parse_args fills these from a job
     * step's environment (SLURM_JOB_ID set); what else it derives there
     * (run_id, rdzv_*, nodes, nproc_per_node) are defaults the flags override. */
    /* Names this node in events and console lines (SLURMD_NODENAME); NULL: the host name. */
    const char *node_name;
    /* The group rank to ask for as a newcomer (SLURM_PROCID); -1 (default): none. */
    int preferred_rank;
    int slurm_drain;           /* 1: drain this node (scontrol) when the job gives up on it */
    const char *slurm_job;     /* the Slurm job id, for events; NULL: not under Slurm */
    const char *slurm_summary; /* what came from Slurm, one line; NULL: not under Slurm */
    int slurm_stand_aside;     /* 1: another local task runs this node's agent: exit 0 */
    /* Node health checks (docs/HEALTH.md), appended: "auto" (default), "off",
     * or a comma list of "gpu" (NVML must load) and "network". */
    const char *health_checks;
    /* A round every this while training; 0: only before joining; default 30 s. */
    int health_check_interval_ms;
    /* The site's own check, sh -c in every round (exit 0 healthy); NULL: none. */
    const char *health_check_cmd;
    /* The site command is killed past this (fatal); default 60 s. */
    int health_check_timeout_ms;
    /* Fewer GPUs is fatal; 0 (default): as many as the first check found. */
    int expected_gpus;
    /* A GPU at or over this many degrees C warns; 0: its slowdown threshold - 5. */
    int health_temperature_max;
    /* The memory checkpoint tier (docs/CHECKPOINT.md, "Memory tier"): 1: this
     * node's agent holds one for its workers (--memory-ckpt). */
    int memory_ckpt;
    /* Its limit in bytes (--memory-ckpt-limit); 0 (default): a quarter of RAM. */
    uint64_t memory_ckpt_limit;
    /* Steps kept (K, --memory-ckpt-steps): the one being written and K-1, besides
     * the job's last memory-committed step (kept until a newer one is); default 2. */
    int memory_ckpt_steps;
    /* Copies of this node's shards on other nodes (R, --memory-replicas); default 1. */
    int memory_replicas;
    /* This node's failure domain (rack, switch) for placing copies (--failure-domain); NULL: its own. */
    const char *failure_domain;
    /* A shared disk tier the plan counts in, and where every Nth memory step is
     * written in the background (--memory-disk-dir, --memory-disk-every; 0: never). */
    const char *memory_disk_dir;
    int memory_disk_every;
    /* Warm spare workers per node, parked until a rank on the node fails
     * (docs/WARM_SPARES.md); needs in_process_recovery; 0 (default): none. */
    int warm_spares;
    /* Replicated checkpoint blobs that differ between ranks (silent data
     * corruption; docs/CHECKPOINT.md, "Divergence check"), appended: "stop"
     * (default: the step is not committed, the minority node steps aside,
     * the job restores the newest step the replicas agreed on; no majority:
     * the job stops), "warn" (reported, the step commits), "off" (not compared). */
    const char *on_divergence;
    /* 1 (--torchrun-restarts): torchrun's exact counting, every failure spends
     * one of max_restarts and nothing stops the job sooner; 0 (default): the
     * failure policy stops the job at once for a deterministic bug in the
     * training code (exit 70; docs/OPERATIONS.md, "Why each failure happened"). */
    int torchrun_restarts;
    /* 1 (--no-prestart): restarted Python workers are started afresh; 0
     * (default): when the entrypoint is Python and the group can restart
     * (max_restarts > 0 or min_nodes < max_nodes), one interpreter per local
     * rank is started ahead with torch imported and becomes that rank's
     * worker in the next generation (docs/OPERATIONS.md, "Interpreters
     * started ahead"). */
    int no_prestart;
    /* Generations a lost node or a node stepping aside for a spare (unhealthy,
     * a straggler, a diverged replica) may end within an hour, job-wide
     * (--max-infra-restarts): they spend none of max_restarts; past this the
     * job fails with exit 69 (docs/OPERATIONS.md, "Why each failure
     * happened"); default 20, >= 0. */
    int max_infra_restarts;
} elastic_agent_opts;

/* Fills the first struct_size bytes (pass sizeof *opts) with the defaults. */
ELASTIC_EXTERN int elastic_agent_opts_init(elastic_agent_opts *opts, size_t struct_size);

/* Parses a torchrun command line (argv[0] is the program name and skipped):
 * flags with dashes or underscores, "--flag value" or "--flag=value",
 * PET_<FLAG> environment fallbacks (from envp; NULL = this process's
 * environment), then the program and its arguments. On ELASTIC_EINVAL,
 * elastic_last_error() holds one line naming the flag and the problem.
 * `opts` must have been filled by elastic_agent_opts_init(); only its
 * struct_size bytes are written, and a flag that sets a field beyond them (an
 * older caller's struct) is ELASTIC_EINVAL: it would be lost otherwise. */
ELASTIC_EXTERN int elastic_agent_parse_args(int argc, const char *const *argv,
                                            const char *const *envp, elastic_agent_opts *opts);

/* The usage text of elasticrun (static storage). */
ELASTIC_EXTERN const char *elastic_agent_usage(void);

/* How a run ended. An output struct: set struct_size =
 * sizeof(elastic_agent_result) before elastic_agent_run(); the library fills
 * only that many bytes and sets struct_size to what it filled. */
typedef struct elastic_agent_result {
    size_t struct_size;   /* set by the caller: sizeof(elastic_agent_result) */
    int exit_code;        /* what elasticrun should exit with: 0 when every worker succeeded */
    uint64_t generations; /* generations this node took part in */
    int restarts;         /* failures the job consumed */
    char summary[4096];   /* "" on success; else the root cause in a few lines */
} elastic_agent_result;

/* Checks the options (ELASTIC_EINVAL, one line in elastic_last_error()) and
 * sets up what the run needs: the job's store (hosted here or connected to)
 * and the event log (its agent_started line). No worker starts before
 * elastic_agent_run. NULL opts: all defaults. ELASTIC_EUNSUPPORTED in a
 * library built with ELASTIC_AGENT=0 (elastic_has_feature("agent") is 0). */
ELASTIC_EXTERN int elastic_agent_create(const elastic_agent_opts *opts, elastic_agent **agent);
/* Runs the job on the calling thread until it ends. The returned code is an
 * error of the agent itself (bad configuration, the store unreachable);
 * failures of the job are reported through *result. */
ELASTIC_EXTERN int elastic_agent_run(elastic_agent *agent, elastic_agent_result *result);
/* Asks a running agent to stop its workers gracefully, leave the rendezvous
 * and return from elastic_agent_run. Async-signal-safe: call it from the
 * host's SIGTERM/SIGINT handler, passing the signal (or 0). */
ELASTIC_EXTERN void elastic_agent_request_stop(elastic_agent *agent, int signum);
/* Releases the agent after elastic_agent_run returned (or without running
 * it), from any thread. NULL is a no-op. */
ELASTIC_EXTERN void elastic_agent_free(elastic_agent *agent);

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_AGENT_H */
