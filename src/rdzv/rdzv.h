/*
 * Rendezvous internals shared by the files of src/rdzv: the handle, the
 * records kept in the store (see docs/RDZV.md for the key layout) and the
 * functions that read, write and decide on them.
 */
#ifndef ELASTIC_RDZV_INTERNAL_H
#define ELASTIC_RDZV_INTERNAL_H

#include "common/clock.h"
#include "common/common.h"
#include "rdzv/backend.h"

#include <pthread.h>
#include <stdbool.h>

#define RDZV__MAX_NODES        65536 /* max_nodes bound; slots are 1..count */
#define RDZV__MAX_LOCAL_WORLD  4096  /* workers per node */
#define RDZV__MAX_ID           128   /* node_id buffer, NUL included */
#define RDZV__MAX_ADDR         256   /* node_addr buffer, NUL included */
#define RDZV__MAX_RECORD       512   /* one encoded record, assignment or cause */
#define RDZV__WATCH_SLICE_MS   5000  /* a watch is re-armed this often (bounds shutdown) */
#define RDZV__KEEPALIVES_PER_S 4000  /* the job's keep-alives the store is asked to answer */

/* A node's join record in one round (key r/<round>/n/<slot>/rec, leased). */
typedef struct rdzv__record {
    int slot; /* arrival order in the round (not encoded) */
    int local_world_size;
    int master_port;          /* a free port, used if the node becomes group rank 0 */
    uint64_t prev_generation; /* last generation it was a member of; 0: none */
    int prev_rank;            /* its group_rank there; -1: none */
    int preferred_rank; /* where it asks to be among newcomers (Slurm's SLURM_PROCID); -1: none */
    char node_id[RDZV__MAX_ID];
    char addr[RDZV__MAX_ADDR];
} rdzv__record;

typedef enum rdzv__outcome {
    RDZV__ASSIGNED = 1, /* in the generation */
    RDZV__EXCLUDED = 2, /* the round filled without this node: try the next */
    RDZV__VOID = 3,     /* the round formed nothing (too few alive) */
    RDZV__CLOSED = 4    /* the job closed (or its budget ran out) */
} rdzv__outcome;

/* What the sealer publishes for one slot (key r/<round>/n/<slot>/a). */
typedef struct rdzv__assignment {
    int outcome; /* rdzv__outcome */
    uint64_t generation;
    int group_rank;
    int group_world_size;
    int rank_base;
    int local_world_size;
    int world_size;
    int restart_count;
    int master_port;
    int next_slot;        /* ring neighbour this node watches */
    uint64_t incarnation; /* the run's incarnation (incarnation.c); 0: an older sealer's */
    char master_addr[RDZV__MAX_ADDR];
    char next_node_id[RDZV__MAX_ID];
} rdzv__assignment;

/* The header of r/<round>/info, the generation's commit record. */
typedef struct rdzv__info {
    bool formed; /* false: the round was voided */
    uint64_t generation;
    int group_world_size;
    int sealed_count; /* slots 1..sealed_count were considered */
    int restart_count;
} rdzv__info;

/* ---- codec.c: every value read from the store is bounded and validated ---- */

/* A token: 1..cap-1 printable, non-space ASCII characters. */
bool rdzv__valid_token(const char *text, size_t cap);
int rdzv__parse_int(const char *value, size_t len, int64_t min, int64_t max, int64_t *out);
size_t rdzv__record_encode(const rdzv__record *rec, char *buf, size_t cap);
int rdzv__record_decode(const char *value, size_t len, rdzv__record *rec);
size_t rdzv__assignment_encode(const rdzv__assignment *a, char *buf, size_t cap);
int rdzv__assignment_decode(const char *value, size_t len, rdzv__assignment *a);
size_t rdzv__cause_encode(const elastic_rdzv_cause *cause, char *buf, size_t cap);
int rdzv__cause_decode(const char *value, size_t len, elastic_rdzv_cause *cause);
/* info = header line + one record line per member in rank order. The caller
 * frees *blob; *members (may be NULL when not wanted) likewise. */
int rdzv__info_encode(const rdzv__info *info, const rdzv__record *members, char **blob,
                      size_t *len);
int rdzv__info_decode(const char *value, size_t len, rdzv__info *info, rdzv__record **members);

/* ---- assign.c: who is in, in which order, with which ranks ---- */

/* Orders the records in place: members of prev_generation by their old rank
 * (stable ranks), then newcomers by arrival; returns how many are admitted
 * (at most max_nodes). */
size_t rdzv__order_members(rdzv__record *records, size_t n, uint64_t prev_generation,
                           int max_nodes);
/* Fills out[i] for every member i of an ordered list. */
void rdzv__assign_all(const rdzv__record *members, size_t n, uint64_t generation, int restart_count,
                      rdzv__assignment *out);

/* ---- the handle ---- */

typedef enum rdzv__phase {
    RDZV__IDLE = 0,     /* not in a generation */
    RDZV__RUNNING = 1,  /* a member of `generation`, not yet ended */
    RDZV__ENDED = 2,    /* `generation` ended; call next() */
    RDZV__DEPARTED = 3, /* finished or left: no more rounds */
    RDZV__SHUT = 4      /* the job closed or its budget ran out */
} rdzv__phase;

struct elastic_rdzv {
    /* Configuration (immutable after open). */
    char run_id[RDZV__MAX_ID];
    char node_id[RDZV__MAX_ID];
    char node_addr[RDZV__MAX_ADDR];
    int min_nodes, max_nodes;
    int join_timeout_ms, last_call_timeout_ms;
    int keepalive_interval_ms, keepalive_timeout_ms; /* after rdzv__scale_liveness */
    bool liveness_scaled; /* rdzv__scale_liveness stretched them for max_nodes */
    /* How long one monitor watch waits before it is re-armed:
     * RDZV__WATCH_SLICE_MS, or two lease timeouts where the job's size
     * stretched them (each re-arm is an answer from the store: 16k nodes
     * re-arming every 5 s would cost it as much as their keep-alives).
     * Stopping kicks the watch, so this only bounds a lost kick. */
    int watch_slice_ms;
    int max_restarts;
    int max_infra_restarts; /* generations a lost or stepped-aside node may end */
    int local_world_size;
    int preferred_rank; /* -1: none */
    uint64_t stayed_out; /* rdzv__stay_out's generation (counted gone once); 0: none */
    rdzv__backend *backend;

    /* The lease this node's records hang on (caller thread only). */
    uint64_t lease;
    bool have_lease;
    int lease_lost; /* atomic: the backend reported `lease` lost (fenced) */

    pthread_mutex_t lock;   /* guards everything below */
    pthread_cond_t changed; /* phase/cause changes, monitor hand-offs */
    int phase;              /* rdzv__phase */
    int shut_code;          /* ELASTIC_ECLOSED or ELASTIC_EBUDGET once SHUT */
    uint64_t generation;    /* the last generation this node was in */
    int slot;               /* its slot in that round */
    int group_rank;
    int group_world_size;
    elastic_rdzv_cause cause; /* why `generation` ended (valid when ENDED) */

    /* Monitor thread: watches the ring neighbour and the end broadcast. */
    pthread_t monitor;
    bool monitor_running;
    bool stopping;             /* free(): the thread must exit */
    uint64_t watch_generation; /* generation the monitor should watch; 0: none */
    int watch_next_slot;
    char watch_next_id[RDZV__MAX_ID];
    uint64_t watch_from;          /* see rdzv__monitor_watch; 0: look at the area first */
    int watching_slot;            /* area the monitor is blocked on, 0: none */
    bool watch_stop;              /* stop watching watch_generation */
    uint64_t notified_generation; /* last generation the callback ran for */
    elastic_rdzv_change_fn on_change;
    void *on_change_user;
    uint64_t stale_generation; /* our keys of this generation await cleanup; 0: none */
    int stale_slot;

    /* Lease guard thread (guard.c): fences this node when its lease is lost. */
    pthread_t guard;
    bool guard_running;
    uint64_t guard_lease; /* the lease of the generation being guarded */
    bool fenced;          /* lost membership: next() joins as a new member */

    uint64_t incarnation; /* atomic: the run's incarnation once read; 0: not yet */
};

/* api.c: the keep-alive interval and timeout a job of max_nodes uses
 * (both grow with max_nodes past RDZV__KEEPALIVES_PER_S x interval). */
void rdzv__scale_liveness(int max_nodes, int *interval_ms, int *timeout_ms);

/* ---- incarnation.c ---- */

/* The run's incarnation: read from the store (created there by the first
 * node to ask), then cached in the handle. */
int rdzv__incarnation(elastic_rdzv *r, uint64_t *out);

/* ---- replica_key.c ---- */

#define RDZV_REPLICA_KEY_CHARS 64 /* 256 random bits, lowercase hex */
/* The run's replica key (the memory tier's channel, replica.h): read from
 * the run's key space, created there by the first node to ask. out: at
 * least RDZV_REPLICA_KEY_CHARS + 1 bytes. */
int rdzv__replica_key(elastic_rdzv *r, char *out, size_t cap);

/* ---- keys.c ---- */

void rdzv__key_round(char *buf, size_t cap, uint64_t round, const char *name);
void rdzv__key_slot(char *buf, size_t cap, uint64_t round, int slot, const char *name);

/* ---- typed reads of rendezvous keys (read_keys.c) ---- */

/* Reads an integer counter/field; absent -> *out = dflt. */
int rdzv__read_int(elastic_rdzv *r, const char *key, int64_t dflt, int64_t *out);
/* The round pointer "round": "<open round> <slots the previous round sealed>
 * <its sealer>", kept raw for the sealing compare-and-set. */
typedef struct rdzv__round_ptr {
    uint64_t open_round; /* 1 while absent */
    int prev_sealed;
    size_t len; /* 0 while absent */
    char raw[RDZV__MAX_ID + 48];
} rdzv__round_ptr;
int rdzv__read_round(elastic_rdzv *r, rdzv__round_ptr *ptr);
/* The same from a value already read (NULL: absent, round 1 open). */
int rdzv__round_parse(elastic_rdzv *r, const void *value, size_t len, rdzv__round_ptr *ptr);
/* Waits up to timeout_ms for key to exist; ELASTIC_ETIMEDOUT otherwise. */
int rdzv__wait_value(elastic_rdzv *r, const char *key, int timeout_ms, void **value, size_t *len);
/* Reads the "formed" summary of a round: *group_world_size 0 for a void
 * round; ELASTIC_ENOTFOUND when not yet published. */
int rdzv__read_formed(elastic_rdzv *r, uint64_t round, int timeout_ms, int *group_world_size);
/* Reads and decodes r/<round>/info (waiting up to timeout_ms when > 0);
 * *members (rank order) is freed by the caller. */
int rdzv__read_info(elastic_rdzv *r, uint64_t round, int timeout_ms, rdzv__info *info,
                    rdzv__record **members);
/* 0 and fills *cause when the round has an end record; ELASTIC_ENOTFOUND when not. */
int rdzv__read_end(elastic_rdzv *r, uint64_t round, elastic_rdzv_cause *cause);
/* ELASTIC_ECLOSED / ELASTIC_EBUDGET when the job is shut, else 0. */
int rdzv__check_closed(elastic_rdzv *r);
/* The same from the "closed" value already read (NULL: absent, 0). */
int rdzv__closed_code(elastic_rdzv *r, const void *value, size_t len);
/* Why the job was closed: 0 and *cause (and *budget: the restart budget ran
 * out) when it was; ELASTIC_ENOTFOUND while it runs. A job whose every member
 * finished is closed with kind JOB_ENDED and reason RDZV__FINISHED_REASON. */
#define RDZV__FINISHED_REASON "every node finished"
int rdzv__read_closed(elastic_rdzv *r, elastic_rdzv_cause *cause, bool *budget);
bool rdzv__cause_is_finished(const elastic_rdzv_cause *cause);
/* A job closed because its infrastructure failures passed max_infra_restarts
 * (rdzv__consume_infra) is closed with kind JOB_ENDED and a reason that
 * starts with this. */
#define RDZV__INFRA_REASON "infrastructure failures past their bound: "
bool rdzv__cause_is_infra(const elastic_rdzv_cause *cause);

/* ---- seal.c ---- */

/* What the node asking already knows about a round. */
typedef struct rdzv__seal_hint {
    uint64_t round;
    int slot;         /* its slot (the count is at least this) */
    int prev_size;    /* size of the previous generation when the caller was in
                                          * it (it has ended); -1: read it from the store */
    int64_t back;     /* its "back" count as a survivor; -1: read it */
    bool timer_fired; /* a re-check, not the join itself */
    uint64_t joined_at_ms;
    /* Read with the join (join_view.c) where the backend reads several keys
     * in one message; unset (false): read when needed. */
    bool have_count, have_gone;
    int64_t count, gone; /* the round's count after this join; the last generation's gone */
} rdzv__seal_hint;
/* What a joining node reads after its record (join_view.c): the round
 * pointer always; with a backend that reads several keys in one message also
 * the closed marker (closed_rc: what rdzv__check_closed would return), the
 * round's count and, for a survivor, the previous generation's gone count. */
typedef struct rdzv__join_view {
    bool have_closed, have_count, have_gone;
    int closed_rc;
    int64_t count, gone;
} rdzv__join_view;
/* The join's counting and reading (add_get: one message where the backend
 * can): adds 1 to the round's count (*slot) and, for a survivor, to its
 * "back" (*back; else -1), then reads the whole join view (count, closed,
 * gone, the round pointer) as it stands right after those adds. unread
 * (round 1): the node has not read the round pointer; the adds are made only
 * while it is absent (add_get_unless), else nothing is added, *slot is 0 and
 * *ptr says the open round. */
int rdzv__join_count(elastic_rdzv *r, uint64_t round, bool survivor, bool unread, int64_t *slot,
                     int64_t *back, rdzv__round_ptr *ptr, rdzv__join_view *view);
/* join_record.c: this node's leased record in r/<round>/n/<slot>/rec (a
 * new lease if the old one ended). */
int rdzv__write_record(elastic_rdzv *r, uint64_t round, int slot);
/* The record and the first wait (wait_ms) for the slot's assignment in one
 * call (set_leased_wait): 0 with *a; ELASTIC_ETIMEDOUT, the record written
 * but no assignment yet; ELASTIC_EUNSUPPORTED, nothing written (no live
 * lease: it ended or was never granted): write it with rdzv__write_record.
 * *record_revision: the revision the record was written at (0: unknown),
 * from which the monitor may follow its neighbour (rdzv__monitor_watch). */
int rdzv__record_and_wait(elastic_rdzv *r, uint64_t round, int slot, int wait_ms,
                          rdzv__assignment *a, uint64_t *record_revision);
/* Decides whether the round is complete and, if so, seals and publishes it.
 * `known`: the round pointer just read, or NULL to read it. */
int rdzv__maybe_seal(elastic_rdzv *r, const rdzv__round_ptr *known, const rdzv__seal_hint *hint);
/* Whether rdzv__maybe_seal(r, ptr, hint) at the join (not a timer's
 * re-check) could seal: true when it might (it then needs this node's
 * record written first), false only when it certainly returns without. */
bool rdzv__may_seal(const elastic_rdzv *r, const rdzv__round_ptr *ptr, const rdzv__seal_hint *hint);
/* Seals round `round` with one compare-and-set on the round pointer; the
 * winner reads the join records and publishes the generation. */
int rdzv__seal(elastic_rdzv *r, const rdzv__round_ptr *ptr, bool prev_formed);
/* Deletes the shared keys of a round nobody reads any more. */
void rdzv__forget_round(elastic_rdzv *r, uint64_t round);
/* Deletes one node's keys of a round it has left behind: its record (which
 * kept it counted as alive there), assignment and end mark. */
void rdzv__forget_slot(elastic_rdzv *r, uint64_t round, int slot);
/* Publishes "void" for a round whose sealer vanished before committing it. */
int rdzv__void_orphan(elastic_rdzv *r, uint64_t round);

/* ---- end.c ---- */

/* Ends generation `generation` (first cause wins), consumes budget for a
 * FAILURE, wakes every member. *won: this call's cause was recorded. */
int rdzv__end(elastic_rdzv *r, uint64_t generation, const elastic_rdzv_cause *cause, bool *won);
/* One more generation ended by a lost node or a member that stepped aside
 * for a spare (no restart of max_restarts spent), counted job-wide in the
 * rendezvous' keys (infra_bound.c); more than max_infra_restarts of them
 * within RDZV__INFRA_WINDOW_MS shut the job (RDZV__INFRA_REASON). Called by
 * the one node whose end of the generation won. */
#define RDZV__INFRA_WINDOW_MS (3600 * 1000)
int rdzv__consume_infra(elastic_rdzv *r, const elastic_rdzv_cause *cause);
/* Shuts the job: kind JOB_ENDED (end_job) or FAILURE (budget exhausted). */
int rdzv__shut_job(elastic_rdzv *r, const elastic_rdzv_cause *cause, bool budget);
/* Records the end locally (phase ENDED, cause) and wakes watch(). */
void rdzv__note_end(elastic_rdzv *r, uint64_t generation, const elastic_rdzv_cause *cause);
void rdzv__fill_cause(elastic_rdzv *r, elastic_rdzv_cause *cause, int kind, uint64_t generation,
                      const char *node_id, const char *reason);

/* ---- ring_monitor.c / orphan.c ---- */
/* Ends `generation` for a member whose lease ended (counted in "gone"). */
void rdzv__report_lost(elastic_rdzv *r, uint64_t generation, const char *node_id);
/* A waiting node's look at the running generation nobody may watch any
 * more (orphan.c): one member, picked at random, whose record is gone ends
 * it. 0 unless a backend call failed. */
int rdzv__end_if_orphaned(elastic_rdzv *r, uint64_t running);

/* ---- jobkv.c ---- */

/* Job-wide records of the agent's in the rendezvous' own keys (both
 * backends; they last as long as the job's rendezvous state). Keys are
 * relative to the run and must start with RDZV__JOB_KEY_PREFIX. */
#define RDZV__JOB_KEY_PREFIX "agent/"
int rdzv__job_set(elastic_rdzv *r, const char *key, const void *value, size_t len);
int rdzv__job_add(elastic_rdzv *r, const char *key, int64_t delta, int64_t *result);
int rdzv__job_keys(elastic_rdzv *r, const char *prefix, size_t max, char ***keys, size_t *n);
/* Waits up to timeout_ms for every key to exist, then reads them (one message). */
int rdzv__job_multi_get(elastic_rdzv *r, const char *const *keys, size_t n, int timeout_ms,
                        void **values, size_t *lens);

/* ---- evict.c ---- */
/* A member of `generation`, ended, that will not be back for the next round
 * (the failure policy quarantined its node): counted gone, once, so the
 * survivors' round does not wait for it. It may join a later round as a
 * newcomer. 0 also when there is nothing to do (another generation, not ended). */
int rdzv__stay_out(elastic_rdzv *r, uint64_t generation);

typedef struct rdzv__step_aside_result {
    int waiting;                    /* live join records in the open round (spares) */
    char replacement[RDZV__MAX_ID]; /* the lowest-slot spare's node id; "": unknown or none */
    uint64_t generation;            /* the generation it ended */
    bool stepped_aside;             /* our cause ended it (kind NODE_LEFT: no budget) */
} rdzv__step_aside_result;
/* Ends this node's running generation with `reason` when a spare waits or
 * the others keep min_nodes; counts it gone so the others re-form at once.
 * The handle stays usable: next() later joins as a new (waiting) node. */
int rdzv__step_aside(elastic_rdzv *r, const char *reason, rdzv__step_aside_result *out);

/* look.c: the open round seen from outside the handle (the agent's "waiting
 * for nodes" line), over the job store, without waiting. */
typedef struct rdzv__look {
    int joined;                  /* nodes in the open round */
    int missing_count;           /* members of the last generation not back */
    char missing[512];           /* their node ids, ", "-separated (as many as fit) */
    uint64_t running_generation; /* the newest generation when it still runs (0: none): */
    int running_nodes;           /* its nodes; we wait as a spare and nobody is missing */
} rdzv__look;
int rdzv__look_open_round(elastic_store *store, const char *run_id, const char *self,
                          uint64_t last_generation, rdzv__look *out);

/* ---- guard.c ---- */

/* Starts the lease guard (a no-op when the backend cannot check leases). */
int rdzv__guard_start(elastic_rdzv *r);
void rdzv__guard_stop(elastic_rdzv *r);
/* Ends `generation` locally as FENCED (this node is no member any more) and
 * runs the on_change callback; no-op when the generation already ended. */
void rdzv__fence(elastic_rdzv *r, uint64_t generation, const char *reason);

/* ---- ring_monitor.c ---- */

/* Runs the on_change callback once per generation. */
void rdzv__notify(elastic_rdzv *r, uint64_t generation, const elastic_rdzv_cause *cause);

int rdzv__monitor_start(elastic_rdzv *r);
/* Points the monitor at a freshly formed generation. from_revision: this
 * node's join record's revision (0: unknown): the sealer read every record
 * after it, so the neighbour's area held its live record and nothing else
 * the monitor follows then; with the backend's watch_area the monitor
 * watches from there without a first look. */
void rdzv__monitor_watch(elastic_rdzv *r, uint64_t generation, int next_slot, const char *next_id,
                         uint64_t from_revision);
/* Stops watching the current generation (waits, bounded, for the monitor). */
void rdzv__monitor_unwatch(elastic_rdzv *r);
void rdzv__monitor_stop(elastic_rdzv *r);
/* Runs the on_change callback for `generation` (once per generation). */
void rdzv__notify(elastic_rdzv *r, uint64_t generation, const elastic_rdzv_cause *cause);

/* ---- jobstore.c: the job's store of a generation (etcd backend) ---- */

/* Publishes (on this node's lease) where generation's store is. */
int rdzv__jobstore_publish(elastic_rdzv *r, uint64_t generation, const char *endpoint,
                           const char *token);
/* Waits up to timeout_ms for generation's store record; token "" when none. */
int rdzv__jobstore_lookup(elastic_rdzv *r, uint64_t generation, int timeout_ms, char *endpoint,
                          size_t endpoint_size, char *token, size_t token_size);
void rdzv__jobstore_forget(elastic_rdzv *r, uint64_t generation);
/* Ends generation as NODE_LOST naming its group rank 0, the store's host. */
int rdzv__jobstore_host_lost(elastic_rdzv *r, uint64_t generation, const char *why);
/* 0 once the job is marked closed; ELASTIC_ETIMEDOUT before. */
int rdzv__wait_closed(elastic_rdzv *r, int timeout_ms);

/* ---- lease_lost.c ---- */

/* The backend lost this node's lease: end the generation here at once (the
 * others already count this node as gone) and make the next join take a new
 * lease. Runs on the backend's thread. */
void rdzv__on_lease_lost(void *user, uint64_t lease, const char *why);

#endif /* ELASTIC_RDZV_INTERNAL_H */
