/*
 * Rendezvous: nodes of a job agree, again after every failure or membership
 * change, on the members and ranks of the next generation. Runs over the job's
 * store or etcd v3 (compare-and-set, add, get, watch, leases).
 * Included by <elastic.h>; may also be included on its own.
 */
#ifndef ELASTIC_RDZV_H
#define ELASTIC_RDZV_H

#include "common.h"
#include "store.h" /* elastic_store */

#ifdef __cplusplus
extern "C" {
#endif

/* The longest run id, in characters (1..64 of [A-Za-z0-9._-], not "." or
 * ".."): one rule for elasticrun --rdzv-id, elastic_agent_opts.run_id and
 * elastic_rdzv_opts.run_id. */
#define ELASTIC_RUN_ID_MAX 64

/* Thread safety: every call on one handle may come from any thread, several
 * at once (elastic_rdzv_watch may block on one thread while another ends the
 * generation), except elastic_rdzv_free, which must be the last. */
typedef struct elastic_rdzv elastic_rdzv;

typedef struct elastic_rdzv_opts {
    size_t struct_size; /* sizeof(elastic_rdzv_opts) */
    /* Required: names the job; keys live under "rdzv/<run_id>/" (store);
     * 1..ELASTIC_RUN_ID_MAX characters of [A-Za-z0-9._-]. */
    const char *run_id;
    const char *endpoint; /* store "host:port", used when `store` is NULL */
    elastic_store *store; /* an open handle to use instead (not owned, outlives the rdzv) */
    const char *token;    /* store token when connecting by endpoint (NULL: environment) */
    int min_nodes;        /* default 1 */
    int max_nodes;        /* default 1; >= min_nodes */
    int join_timeout_ms;  /* below min_nodes this long -> ELASTIC_ENOTENOUGH; default 600000; > 0 */
    int last_call_timeout_ms;  /* once min_nodes are in, wait this long for more; default 30000 */
    int keepalive_interval_ms; /* heartbeat period; default 500, at least 100; a job whose
                                  max_nodes / 4 ms is longer uses that, and the timeout in
                                  proportion (the store's keep-alive load; docs/RDZV.md) */
    int keepalive_timeout_ms;  /* silent this long -> evicted; default 2000, at least 100. On
                                  etcd it is the lease TTL and the fence deadline: keep it above
                                  etcd's leader election time (elasticrun uses 5000) */
    int max_restarts;          /* job-wide failure budget; default 0 */
    /* Address other nodes and workers reach this node at; default: hostname. */
    const char *node_addr;
    int local_world_size; /* workers on this node; default 1 */
    const char *node_id;  /* unique per node; default "<hostname>-<pid>-<random>" */
    /* Where the rendezvous keeps its keys (docs/RDZV.md): the job's store
     * (above) or etcd v3 through its JSON gateway. The fields below are read
     * only with ELASTIC_RDZV_BACKEND_ETCD. */
    int backend; /* elastic_rdzv_backend; default ELASTIC_RDZV_BACKEND_STORE */
    /* "host:port[,host:port...]": tried in turn, the last one that answered first. */
    const char *etcd_endpoints;
    const char *etcd_prefix; /* keys live under "<prefix>/<run_id>/"; NULL: "/elastic" */
    /* TLS (https): the CA that signed etcd's certificate; NULL: plain http. */
    const char *etcd_ca_file;
    const char *etcd_cert_file; /* TLS client certificate; NULL: none */
    const char *etcd_key_file;  /* its private key; NULL: none */
    const char *etcd_user;      /* etcd authentication; NULL: none */
    const char *etcd_password;  /* etcd_user's password */
    /* Deadline of each etcd request; default 5000; > 0 (every request has one). */
    int etcd_timeout_ms;
    /* The group rank this node asks for as a newcomer (Slurm's SLURM_PROCID):
     * newcomers are ordered by it, survivors keep theirs; -1 (default): none. */
    int preferred_rank;
    /* Generations a lost node or a member stepping aside for a spare (unhealthy,
     * a straggler, a diverged replica) may end job-wide within an hour; they
     * spend none of max_restarts, and past this bound the job is closed (an
     * outage that keeps re-forming it); default 20, >= 0. */
    int max_infra_restarts;
} elastic_rdzv_opts;

typedef enum elastic_rdzv_backend {
    ELASTIC_RDZV_BACKEND_STORE = 0, /* the job's own store (endpoint or store) */
    /* etcd v3 (the etcd_* fields): no single node's loss ends the job. */
    ELASTIC_RDZV_BACKEND_ETCD = 1
} elastic_rdzv_backend;

/* Fills the first struct_size bytes (pass sizeof *opts) with the defaults. */
ELASTIC_EXTERN int elastic_rdzv_opts_init(elastic_rdzv_opts *opts, size_t struct_size);

/* The membership of one generation as this node sees it. An output struct:
 * set struct_size = sizeof(elastic_rdzv_result) before the call; the library
 * fills only that many bytes and sets struct_size to what it filled. */
typedef struct elastic_rdzv_result {
    size_t struct_size;    /* set by the caller: sizeof(elastic_rdzv_result) */
    uint64_t generation;   /* grows by at least 1 per generation, never reused */
    int group_rank;        /* this node's rank among nodes, 0..group_world_size-1 */
    int group_world_size;  /* nodes in the generation */
    int rank_base;         /* global rank of this node's local rank 0 */
    int local_world_size;  /* workers on this node */
    int world_size;        /* workers in the generation (sum over nodes) */
    int restart_count;     /* failures the job has consumed so far */
    int max_restarts;      /* the job's budget */
    char master_addr[256]; /* group rank 0's node_addr */
    int master_port;       /* a free port on group rank 0's node, new each generation */
    /* The run's incarnation, the same on every node: the wall clock (ms) of
     * the node that formed the run's first generation on this store. A job
     * started again on a fresh store (generations from 1 again) has a larger
     * one; checkpoints order (incarnation, generation). 0 from an
     * older library. */
    uint64_t incarnation;
} elastic_rdzv_result;

/* Why a generation ended. */
typedef enum elastic_rdzv_cause_kind {
    ELASTIC_RDZV_FAILURE = 1,       /* a worker or probe failed: consumes the restart budget */
    ELASTIC_RDZV_NODE_LOST = 2,     /* a member's heartbeat lapsed or its connection closed */
    ELASTIC_RDZV_NODES_WAITING = 3, /* a node is waiting to join and there is room */
    ELASTIC_RDZV_NODE_LEFT = 4,     /* a member left on purpose (scale-down) */
    ELASTIC_RDZV_JOB_ENDED = 5,     /* the job is done or was stopped (elastic_rdzv_end_job) */
    /* This node lost its lease (cut off, frozen, store gone): it is no member
     * any more and rejoins as a new one; only ever reported locally, never
     * written to the store. */
    ELASTIC_RDZV_FENCED = 6
} elastic_rdzv_cause_kind;

/* Both an input (elastic_rdzv_end_generation reads struct_size bytes; fields
 * beyond keep their defaults: rank -1, exit_code -1, the rest 0) and an output
 * (set struct_size = sizeof(elastic_rdzv_cause) before the call; the library
 * fills only that many bytes and sets struct_size to what it filled). In the
 * elastic_rdzv_change_fn callback it is the library's own: read struct_size
 * before fields newer than your header. */
typedef struct elastic_rdzv_cause {
    size_t struct_size;  /* sizeof(elastic_rdzv_cause) */
    int kind;            /* elastic_rdzv_cause_kind */
    uint64_t generation; /* the generation that ended */
    char node_id[128];   /* node that reported or was lost */
    int rank;            /* failed worker's global rank, -1 if none */
    int exit_code;       /* worker's exit code, -1 if none */
    int signal;          /* signal that killed it, 0 if none */
    char reason[256];    /* probe name or a short sentence */
    uint64_t time_ms;    /* wall clock (ms since the epoch) when it happened */
} elastic_rdzv_cause;

/* Connects (or adopts the store), starts this node's heartbeat on the
 * library's own thread. Does not join yet. Installs no signal handler. */
ELASTIC_EXTERN int elastic_rdzv_open(const elastic_rdzv_opts *opts, elastic_rdzv **rdzv);

/* Blocks until the next generation forms with this node in it, and fills
 * *result. A node arriving while a full generation runs waits as a spare.
 * ELASTIC_ENOTENOUGH: fewer than min_nodes before join_timeout;
 * ELASTIC_EBUDGET: the job's restart budget is exhausted;
 * ELASTIC_ECLOSED: the job has ended (elastic_rdzv_end_job). */
ELASTIC_EXTERN int elastic_rdzv_next(elastic_rdzv *rdzv, elastic_rdzv_result *result);

/* Ends the current generation for every member, recording the cause (a
 * FAILURE cause consumes one restart from the job-wide budget). Idempotent:
 * when the generation already ended, the first cause wins. */
ELASTIC_EXTERN int elastic_rdzv_end_generation(elastic_rdzv *rdzv, const elastic_rdzv_cause *cause);

/* Blocks until the current generation must end (a member ended it, a member
 * was lost, nodes are waiting, the job ended) and fills *cause; or
 * ELASTIC_ETIMEDOUT after timeout_ms (< 0 and ELASTIC_TIMEOUT_DEFAULT: no limit;
 * 0: just look). */
ELASTIC_EXTERN int elastic_rdzv_watch(elastic_rdzv *rdzv, int timeout_ms,
                                      elastic_rdzv_cause *cause);

/* The same news as a callback, run on the library's watcher thread once per
 * generation as soon as it must end. It must not call elastic_rdzv_free; other
 * calls on the handle are allowed. `cause` is valid during the call. NULL unregisters. */
typedef void (*elastic_rdzv_change_fn)(void *user, const elastic_rdzv_cause *cause);
ELASTIC_EXTERN int elastic_rdzv_on_change(elastic_rdzv *rdzv, elastic_rdzv_change_fn fn,
                                          void *user);

/* The first failure the job recorded (for a root-cause summary), or
 * ELASTIC_ENOTFOUND when there was none. */
ELASTIC_EXTERN int elastic_rdzv_first_failure(elastic_rdzv *rdzv, elastic_rdzv_cause *cause);

/* This node's workers all succeeded in the current generation: it may go
 * away now without ending the generation for the others (no exit barrier). */
ELASTIC_EXTERN int elastic_rdzv_finish(elastic_rdzv *rdzv);
/* This node leaves on purpose; the others re-form without consuming budget. */
ELASTIC_EXTERN int elastic_rdzv_leave(elastic_rdzv *rdzv);
/* Ends the job for EVERY node: each node's next call returns ELASTIC_ECLOSED
 * and its watchers see ELASTIC_RDZV_JOB_ENDED. Not a handle release (that is
 * elastic_rdzv_free). */
ELASTIC_EXTERN int elastic_rdzv_end_job(elastic_rdzv *rdzv);
/* Releases this node's handle only: stops the heartbeat (without leaving: the
 * lease ends, so the others see the node lost) and frees. NULL is a no-op. */
ELASTIC_EXTERN void elastic_rdzv_free(elastic_rdzv *rdzv);

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_RDZV_H */
