/*
 * Peer replicas of memory-tier shards (docs/CHECKPOINT.md, "Memory tier"):
 * each node's agent copies its node's shards to R other nodes' agents, which
 * keep them in their own bounded memory tier, and a node that restores reads
 * a shard from whichever peer holds it.
 *
 * Layers, bottom up:
 *   transport (tcp.c)   a connection that sends, sends from a file, receives,
 *                       receives into a file, with a deadline on every call.
 *                       The seam: UCX (RDMA, Debian libucx-dev) is the next
 *                       transport, behind the same operations.
 *   auth (auth.c)       both sides prove they hold the job's token (HMAC-SHA256
 *                       over both nonces, labels of their own), before any
 *                       request is read.
 *   wire (wire.c)       requests and answers, every field bounded.
 *   client (client.c)   push a step's shards and commit record; fetch one.
 *   server (server.c)   the receiver: stores pushed files under
 *                       ROOT/peer/<origin>/ within the tier's limit, K steps
 *                       per origin; serves fetches of its own and peer shards.
 *   placement.c         which R nodes hold a node's copies (pure).
 *   holdings.c          what a tier holds, as the restore planner's input.
 */
#ifndef ELASTIC_REPLICA_H
#define ELASTIC_REPLICA_H

#include "ckpt/ckpt.h"
#include "ckpt/memtier.h"
#include "ckpt/restore_plan.h"
#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- transport (the seam) --------------------------------------------------- */

typedef struct replica_conn replica_conn;

typedef struct replica_transport_ops {
    const char *name;
    /* Each: the whole length before the deadline (ms, elastic__now_ms clock),
     * else ELASTIC_ETIMEDOUT / ELASTIC_ECONNECT with a detail. */
    int (*send)(replica_conn *c, const void *data, size_t len, uint64_t deadline_ms);
    int (*send_file)(replica_conn *c, int fd, uint64_t offset, uint64_t len, uint64_t deadline_ms);
    int (*recv)(replica_conn *c, void *data, size_t len, uint64_t deadline_ms);
    /* Receives len bytes into the file fd at offset (pwrite-like: the
     * file's offset is not moved). NULL: the caller receives through a
     * buffer and writes. A failure leaves the connection spent. */
    int (*recv_file)(replica_conn *c, int fd, uint64_t offset, uint64_t len, uint64_t deadline_ms);
    /* Wakes a call blocked on the connection from another thread (it fails). */
    void (*shutdown)(replica_conn *c);
    void (*close)(replica_conn *c);
} replica_transport_ops;

struct replica_conn {
    const replica_transport_ops *ops; /* transports embed this first */
};

typedef struct replica_listener replica_listener;

int replica__tcp_connect(const char *host, int port, uint64_t deadline_ms, replica_conn **out);
/* host NULL or "": every address. port 0: any (see replica__tcp_port). */
int replica__tcp_listen(const char *host, int port, replica_listener **out);
int replica__tcp_port(const replica_listener *l);
int replica__tcp_listener_fd(const replica_listener *l);
/* ELASTIC_ETIMEDOUT when nobody connects before the deadline. peer (may be
 * NULL): the client's address as text ("" if unknown). */
int replica__tcp_accept(replica_listener *l, uint64_t deadline_ms, replica_conn **out, char *peer,
                        size_t peer_cap);
void replica__tcp_listener_close(replica_listener *l);

static inline void replica__close(replica_conn *c)
{
    if (c != NULL) c->ops->close(c);
}

/* ---- authentication ------------------------------------------------------------ */

/* token NULL: no authentication (both sides must agree; a server with a
 * token refuses a client without one and the other way round). */
int replica__auth_client(replica_conn *c, const char *token, uint64_t deadline_ms);
int replica__auth_server(replica_conn *c, const char *token, uint64_t deadline_ms);

/* ---- requests ---------------------------------------------------------------- */

#define REPLICA_NODE_MAX    64 /* origin names: [A-Za-z0-9._-], 1..64 */
#define REPLICA_KIND_SHARD  0u
#define REPLICA_KIND_COMMIT 1u

/* One file of one step of one origin's memory tier. */
typedef struct replica_file_id {
    char origin[REPLICA_NODE_MAX + 1]; /* the node whose shards these are */
    uint64_t step, generation;
    uint32_t rank, world; /* commit records: rank 0 */
    uint32_t kind;        /* REPLICA_KIND_* */
} replica_file_id;

bool replica__node_name_ok(const char *name);

/* Pushes every shard of `step` found in the checkpoint directory `dir`
 * (the origin's ROOT/own), then its commit record (so a step is complete
 * on the peer only once its record arrived). *bytes: what was sent. */
int replica__push_step(replica_conn *c, const char *origin, const char *dir, uint64_t step,
                       uint64_t *bytes, uint64_t deadline_ms);
/* Pushes one file. */
int replica__push_file(replica_conn *c, const replica_file_id *id, const char *path,
                       uint64_t deadline_ms);
/* Fetches one file the peer holds into `dest` (a temporary name beside it,
 * then renamed), reserving room in `tier` when it is not NULL. id->origin
 * empty: wherever the peer has it (its own shards first, then its replicas).
 * ELASTIC_ENOTFOUND when the peer does not hold it. Checks nothing but the
 * length: the reader verifies every byte. */
int replica__fetch_file(replica_conn *c, const replica_file_id *id, const char *dest,
                        const ckpt_mem_tier *tier, uint64_t *bytes, uint64_t deadline_ms);
/* The same, with the received file handed to check(ctx, fd, len) before it
 * takes its name: a copy that fails the check (its error returned) is never
 * kept, not even for a moment under its name. */
typedef int (*replica_check_fn)(void *ctx, int fd, uint64_t len);
int replica__fetch_file_checked(replica_conn *c, const replica_file_id *id, const char *dest,
                                const ckpt_mem_tier *tier, replica_check_fn check, void *ctx,
                                uint64_t *bytes, uint64_t deadline_ms);

/* ---- the receiver -------------------------------------------------------------- */

typedef struct replica_server replica_server;

/* Connections still in their handshake hold slots of their own (at most
 * REPLICA_HANDSHAKES, each for handshake_ms), never the ones authenticated
 * peers use; one source address holds at most REPLICA_PER_SOURCE
 * connections of either kind. A host without the key holding sockets open
 * can then delay only other unauthenticated clients, never replication. */
#define REPLICA_HANDSHAKE_MS 5000
#define REPLICA_HANDSHAKES   32u
#define REPLICA_PER_SOURCE   8u

typedef struct replica_server_opts {
    const char *tier_root; /* a memory tier (ckpt__mem_tier_create) */
    const char *token;     /* NULL: unauthenticated */
    const char *host;      /* NULL: every address */
    int port;              /* 0: any */
    int io_timeout_ms;     /* per request; default 30000 */
    unsigned max_conns;    /* authenticated connections served at once; default 16 */
    int handshake_ms;      /* a handshake's deadline; default 5000 (REPLICA_HANDSHAKE_MS) */
} replica_server_opts;

int replica__server_start(const replica_server_opts *opts, replica_server **out);
int replica__server_port(const replica_server *s);
/* Counters for metrics: files and bytes stored, refused requests. */
void replica__server_counts(replica_server *s, uint64_t *files, uint64_t *bytes, uint64_t *refused);
void replica__server_stop(replica_server *s);

/* ---- placement ----------------------------------------------------------------- */

typedef struct replica_node {
    const char *name;   /* unique */
    const char *domain; /* failure domain (rack, switch); NULL or "": its own */
} replica_node;

/* The R nodes that hold copies of nodes[self]'s shards: never itself, never
 * in its failure domain while nodes outside it remain, then as few copies
 * per domain as can be, spread so that every node holds about as many
 * copies as it sends (a ring over the nodes sorted by name). Deterministic:
 * every agent computes the same placement. Writes up to r indices; returns
 * how many (fewer than r when there are not enough other nodes). */
size_t replica__place(const replica_node *nodes, size_t n, size_t self, size_t r, size_t *out);

/* ---- holdings ------------------------------------------------------------------- */

/* What the tier at `root` holds: its own committed steps and its peers'
 * (each shard whose size matches its step's commit record), as copies held
 * by node `self_node` in the memory tier. *copies is freed with free(). */
int replica__holdings(const char *root, uint32_t self_node, ckpt_copy **copies, size_t *n);

/* ---- the job's record (record_digest.c) ------------------------------------------ */

#define REPLICA_DIGEST_BYTES 32 /* SHA-256 */
/* SHA-256 of a commit record file (at most CKPT_MAX_COMMIT_RECORD bytes). */
int replica__record_digest_file(const char *path, uint8_t out[REPLICA_DIGEST_BYTES]);
/* The same for ROOT/own's record of `step`. */
int replica__own_record_digest(const char *root, uint64_t step, uint8_t out[REPLICA_DIGEST_BYTES]);
/* 0 when the record at `path` has the digest `want`; ELASTIC_ECORRUPT
 * saying it is not the job's record otherwise. */
int replica__record_is_the_jobs(const char *path, const uint8_t want[REPLICA_DIGEST_BYTES]);
/* Lowercase hex (cap >= 65), and back (false: not 64 hex digits). */
void replica__digest_hex(const uint8_t digest[REPLICA_DIGEST_BYTES], char *out, size_t cap);
bool replica__digest_parse(const char *hex, uint8_t out[REPLICA_DIGEST_BYTES]);

/* ---- restoring ------------------------------------------------------------------- */

/* How the stager reaches a peer node: connect and authenticate; the caller closes. */
typedef struct replica_dialer {
    int (*connect)(void *ctx, uint32_t node, replica_conn **out);
    void *ctx;
} replica_dialer;

typedef struct replica_restored {
    ckpt_source source; /* where the verified copy came from */
    uint32_t node;      /* the node that held it (CKPT_NODE_SHARED: shared disk) */
    uint64_t bytes;     /* the shard's size */
    uint64_t ns;        /* time to stage and verify it */
    unsigned refused;   /* copies tried before it that failed (unreachable, corrupt) */
    char why[256];      /* the last refusal's reason */
} replica_restored;

/* Makes `rank`'s shard of the plan's step readable from ROOT/own for node
 * `self` (ROOT/own/step-N/ gets the shard and the step's commit record):
 * tries the plan's copies cheapest first — this node's memory (its own
 * shards, or a replica it holds, linked in), a peer's memory (fetched
 * through the dialer) — and verifies each completely before taking it; a
 * copy that fails (a flipped byte, an unreachable peer) is removed and the
 * next one tried. A disk copy is not staged: out->source is
 * CKPT_SOURCE_DISK and the worker reads the disk tier. ELASTIC_ENOTFOUND,
 * with every refusal's reason, when no copy was usable. */
int replica__stage_shard(const char *root, const ckpt_plan *plan, uint32_t rank, uint32_t self,
                         const replica_dialer *dialer, uint64_t deadline_ms, replica_restored *out);
/* The same, with the digest of the job's record of the plan's step (NULL:
 * none known, as replica__stage_shard): a copy whose record is another is
 * refused like a corrupt one, whatever record came with it. */
int replica__stage_shard_expecting(const char *root, const ckpt_plan *plan, uint32_t rank,
                                   uint32_t self, const replica_dialer *dialer,
                                   uint64_t deadline_ms, const uint8_t *record_digest,
                                   replica_restored *out);

/* ---- the node's service (service.c; its threads: service_state.h) ------------ */

typedef struct replica_service replica_service;

typedef struct replica_peer {
    char name[REPLICA_NODE_MAX + 1];   /* unique node name (the origin of its copies) */
    char domain[REPLICA_NODE_MAX + 1]; /* failure domain; "": its own */
    char host[256];                    /* where its receiver listens */
    int port;
} replica_peer;

typedef struct replica_service_opts {
    const char *root;        /* the tier (created afresh; removed at stop) */
    uint64_t limit;          /* bytes; 0: ckpt__mem_default_limit() */
    unsigned steps;          /* K; 0: 2 */
    const char *token;       /* the job's token or replica key; NULL: unauthenticated
                                (tests only: the agent always gives one) */
    const char *listen_host; /* the node's address (the one its peers are told); NULL: every
                                address (tests only) */
    int port;                /* 0: any */
    bool no_receiver;        /* a one-node job: no peer can push or fetch, nothing listens */
    unsigned replicas;       /* R; 0 is allowed (no copies) */
    const char *disk_dir;    /* the disk tier, or NULL */
    unsigned disk_every;     /* every Nth memory step goes to disk; 0: none */
    int io_timeout_ms;       /* per push/fetch; default 30000 */
} replica_service_opts;

typedef struct replica_service_stats {
    uint64_t held_bytes;      /* the whole tier: own shards and replicas (as of the
                                 replicator's last look: within 1 s, or its last push) */
    uint64_t own_bytes;       /* of which this node's own shards (ROOT/own) */
    uint64_t own_step;        /* newest committed own step (0: none) */
    uint64_t replicated_step; /* newest own step every target holds */
    uint64_t lag_ms;          /* from that step's commit to its last replica (last one) */
    uint64_t committed_step;  /* the job's last memory-committed step this node knows (0: none) */
    uint64_t committed_generation; /* the generation that wrote it */
    uint64_t commit_lag_ms;   /* from its commit on this node to the job's record (last one) */
    uint64_t rounds_missed;   /* rounds given up: no record in time */
    unsigned targets;         /* peers that hold this node's copies (R, or fewer) */
    uint64_t replicas_in;     /* files received from peers */
    uint64_t push_failures;   /* pushes that failed (retried on the next step) */
    uint64_t disk_step;       /* newest step written to disk from memory */
    uint64_t disk_failures;
} replica_service_stats;

int replica__service_start(const replica_service_opts *opts, replica_service **out);
/* 0 without a receiver (no_receiver). */
int replica__service_port(const replica_service *s);
/* The generation's nodes (self included, by index) and so the placement of
 * this node's copies. Copies already pushed stay where they are. */
int replica__service_set_peers(replica_service *s, const replica_peer *nodes, size_t n,
                               size_t self);
/* A worker committed a memory step (or the agent's tick): look for new steps now. */
void replica__service_kick(replica_service *s);
void replica__service_stats(replica_service *s, replica_service_stats *out);
/* The generation the job entered, once its restore step is agreed: with a
 * store (a handle the service clones and keeps), the node takes part in the
 * job-wide memory commit (commit.c) for `world` nodes; NULL: none (each
 * node pushes its newest step, nothing is memory-committed). The restored
 * step (0: none) is the generation's first committed step: every node
 * restored it, and retention keeps it until a newer one is committed. */
int replica__service_set_generation(replica_service *s, elastic_store *store, uint64_t generation,
                                    int world, uint64_t restored_step,
                                    uint64_t restored_generation);
/* The job's history as this node knows it (the fence of restore plans:
 * sync.c carries it in every node's record, so a job store that lost it —
 * etcd's per-generation store — gets it back from the survivors). */
#define REPLICA_HISTORY_MAX 256u
void replica__service_history_record(replica_service *s, const ckpt_generation_start *g);
size_t replica__service_history(replica_service *s, ckpt_generation_start *out, size_t max);
/* Waits (until the deadline) for `step` to have all its replicas; 0 or ELASTIC_ETIMEDOUT. */
int replica__service_wait_replicated(replica_service *s, uint64_t step, uint64_t deadline_ms);
/* Waits (until the deadline) for the job's memory-commit record of `step`
 * or a later one to reach this node; 0 or ELASTIC_ETIMEDOUT. */
int replica__service_wait_committed(replica_service *s, uint64_t step, uint64_t deadline_ms);
/* Stops the threads and removes the tier (its memory is freed). */
void replica__service_stop(replica_service *s);
const char *replica__service_root(const replica_service *s);
const char *replica__service_token(const replica_service *s);

/* ---- the job-wide memory commit (commit.c) ------------------------------------- */

/* Round `round` of `generation`: its step now (0: none proposed yet). */
int replica__round_current(elastic_store *store, uint64_t generation, uint64_t round,
                           uint64_t *step);
/* Sets the round's step to `proposal` if it is still `expected` (0: none
 * yet); *step: the round's step after the call, whoever set it. */
int replica__round_propose(elastic_store *store, uint64_t generation, uint64_t round,
                           uint64_t expected, uint64_t proposal, uint64_t *step);
/* Counts this node in for the round (its shards of the round's step have
 * their copies); the node that completes the count of `world` writes the
 * round's record: *completed. */
int replica__round_count_in(elastic_store *store, uint64_t generation, uint64_t round,
                            uint64_t step, int world, bool *completed);
/* The round's record, waiting up to wait_ms (0: not at all): its step, or
 * ELASTIC_ETIMEDOUT / ELASTIC_ENOTFOUND while the round is not committed. */
int replica__round_committed(elastic_store *store, uint64_t generation, uint64_t round,
                             int wait_ms, uint64_t *step);

/* Deletes a finished round's keys (its step, record and the count of
 * `step`): the node that completes round k forgets round k-2, which every
 * node has left (all counted in round k). Counts of steps raised away stay. */
void replica__round_forget(elastic_store *store, uint64_t generation, uint64_t round,
                           uint64_t step);
/* Waits up to wait_ms for any change to the round's keys after *revision
 * (a proposal, a raise, a count, the record), which it updates; 0, or
 * ELASTIC_ETIMEDOUT when nothing changed. */
int replica__round_watch(elastic_store *store, uint64_t generation, uint64_t round,
                         uint64_t *revision, int wait_ms);

/* ---- one restore step for the job (sync.c) --------------------------------------- */

/* At the start of each generation every node's agent publishes its
 * receiver's address and what its tier holds through the job's store, reads
 * every other node's, places its copies (R peers), runs the restore planner
 * on the same inputs as every other node (so all agree on one step), stages
 * the shards of the ranks it will run, and records the generation's restore
 * step in the job's history (the fence for later plans). */
typedef struct replica_sync_in {
    replica_service *service; /* this node's */
    const char *node_name;    /* unique, replica__node_name_ok */
    const char *host;         /* where peers reach its receiver */
    const char *domain;       /* failure domain; NULL or "": its own */
    uint64_t generation;
    int group_rank, group_world_size;
    uint32_t first_rank, local_ranks; /* the ranks this node runs in the generation */
    /* Ranks in the generation (0: not known). When the restore step had
     * more, the departed ranks' shards are staged on every node too, so a
     * resharding reader finds them in its own tier (memory held: the
     * departed ranks' state once per node, until a newer step is committed). */
    uint32_t job_world;
    const char *disk_dir;             /* a shared disk tier to count in, or NULL */
    int timeout_ms;                   /* for the other nodes' records; default 30000 */
    /* Whether the generation has ended meanwhile (a member was lost): the
     * wait for the other nodes' records then gives up at once, not after
     * timeout_ms, as a lost member never publishes one. NULL: not asked. */
    bool (*ended)(void *user);
    void *ended_user;
} replica_sync_in;

/* Decodes one node's record as another node's store gave it (bounded,
 * every field checked) and throws it away: 0 or the refusal (fuzz target). */
int replica__sync_record_parse(const char *text, size_t len);

typedef struct replica_sync_rank {
    unsigned source; /* CHANNEL__RESTORE_* (NONE: no copy of the step could be staged) */
    char node[REPLICA_NODE_MAX + 1]; /* the node the copy came from ("" for disk) */
    /* The rank is beyond the step's world (the job grew): what was staged is
     * another rank's shard, for the step's replicated part; the rank starts
     * its own part fresh (elastic_ckpt_step_info tells the worker). */
    bool beyond_step;
} replica_sync_rank;

typedef struct replica_sync_out {
    bool planned;             /* false: no step has every shard (a fresh start, or too much lost) */
    bool committed;           /* the step is memory-committed job-wide or on disk */
    uint64_t step;            /* the step every rank restores */
    char why[512];            /* what the plan passed over, or why there is none */
    replica_sync_rank *ranks; /* local_ranks entries; free() */
} replica_sync_out;

int replica__sync_generation(elastic_store *store, const replica_sync_in *in,
                             replica_sync_out *out);

/* ---- the disk copies a node's record counts (disk_copies.c) ----------------------- */

/* The node of a copy on this node's own disk (a node-local, store-mode
 * tier): only this node reads it; its record says so ("ldisk"). */
#define REPLICA_NODE_SELF (UINT32_MAX - 1)

/* Every committed step's shards in `disk_dir` (shared; NULL: none) and in
 * the disk tiers the node's workers announced in TIER_ROOT (channel.h):
 * shared ones' every rank, node-local ones' shards present; newest steps
 * first, whole steps only, at most `max` copies (older steps beyond are
 * left out, and logged). 0 or ELASTIC_ENOMEM. *out: free(). */
int replica__disk_copies(const char *tier_root, const char *disk_dir, size_t max,
                         ckpt_copy **out, size_t *n);

#endif /* ELASTIC_REPLICA_H */
