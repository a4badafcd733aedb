/*
 * The agent <-> worker channel, included by both sides: the environment
 * variables the agent sets, the heartbeat shared-memory layout (one slot per
 * local worker, written with atomics, no system call per beat) and the control
 * messages on the unix socket (abort, reconfigure, acknowledgements).
 */
#ifndef ELASTIC_CHANNEL_H
#define ELASTIC_CHANNEL_H

#include "common/text.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- environment ---------------------------------------------------------- */

#define CHANNEL__ENV_STORE_ENDPOINT "ELASTIC_STORE_ENDPOINT"
#define CHANNEL__ENV_STORE_PREFIX   "ELASTIC_STORE_PREFIX"
#define CHANNEL__ENV_GENERATION     "ELASTIC_GENERATION"
/* The run's incarnation (elastic_rdzv_result.incarnation): with the
 * generation, the order checkpoint fencing compares. */
#define CHANNEL__ENV_INCARNATION    "ELASTIC_INCARNATION"
#define CHANNEL__ENV_RUN_ID         "ELASTIC_RUN_ID"
#define CHANNEL__ENV_HEARTBEAT_SHM  "ELASTIC_HEARTBEAT_SHM"
#define CHANNEL__ENV_HEARTBEAT_SLOT "ELASTIC_HEARTBEAT_SLOT"
#define CHANNEL__ENV_AGENT_SOCKET   "ELASTIC_AGENT_SOCKET"
/* A warm spare's control slot (local_world_size + its index): set only in
 * spares, which park (elastic_worker_park) before they attach. */
#define CHANNEL__ENV_SPARE "ELASTIC_SPARE"
/* The node's memory checkpoint tier (ROOT/own; docs/CHECKPOINT.md, "Memory tier"). */
#define CHANNEL__ENV_MEMORY_CKPT_DIR "ELASTIC_MEMORY_CKPT_DIR"
/* The job's agreed restore step for this generation, and where this rank's
 * shard is ("local", "peer" or "disk") and from which node; unset: no plan. */
#define CHANNEL__ENV_RESTORE_STEP   "ELASTIC_RESTORE_STEP"
#define CHANNEL__ENV_RESTORE_SOURCE "ELASTIC_RESTORE_SOURCE"
#define CHANNEL__ENV_RESTORE_NODE   "ELASTIC_RESTORE_NODE"
/* What a divergence of replicated checkpoint blobs does (elasticrun
 * --on-divergence): "stop" (unset: the step is abandoned), "warn" (it
 * commits, reported only) or "off" (not compared). */
#define CHANNEL__ENV_ON_DIVERGENCE "ELASTIC_ON_DIVERGENCE"

/* ---- the trainer's disk tier, announced to the agent's restore planner ---- */

/* A worker that opens a disk checkpoint under an agent with a memory tier
 * tells the agent where it is, so that the job's restore plan weighs the
 * disk steps too (a newer committed disk step wins over an older memory
 * step): it writes ROOT/trainer-disk.<LOCAL_RANK>, ROOT being the tier (the
 * parent of ELASTIC_MEMORY_CKPT_DIR), holding one line
 *   "shared <absolute dir>\n"  every rank reads the directory (one COMMIT)
 *   "local <absolute dir>\n"   store mode on node-local storage: only this
 *                              node's ranks' shards are in it
 * The file outlives the worker, as the tier does: a replacement's plan
 * knows it. The agent bounds and checks what it reads (sync.c). */
#define CHANNEL__DISK_ANNOUNCE_PREFIX "trainer-disk."
#define CHANNEL__DISK_ANNOUNCE_MAX    4200u /* bytes in the file */

/* ---- heartbeat shared memory --------------------------------------------- */

#define CHANNEL__HB_MAGIC     UINT64_C(0x31424853414c45) /* "ELASHB1" */
#define CHANNEL__HB_VERSION   2u /* 2: the third line (memory tier reports) */
#define CHANNEL__HB_MAX_SLOTS 4096u

typedef struct channel__hb_header {
    uint64_t magic;
    uint32_t version;
    uint32_t slot_count;
    uint32_t slot_size; /* sizeof(channel__hb_slot), checked by the worker */
    uint32_t reserved;
    uint8_t pad[40];
} channel__hb_header;

/* One worker's slot. The worker is the only writer of the first cache line
 * (relaxed/release atomic stores); the agent only reads it, except that it
 * zeroes a slot before starting a worker in it. Fields are read one by one,
 * so a reader may see a beat's fields from two neighbouring beats: harmless
 * for monitoring. */
typedef struct channel__hb_slot {
    uint64_t step;            /* last step reported */
    uint64_t beats;           /* heartbeats so far (0: none yet) */
    uint64_t last_beat_ns;    /* CLOCK_MONOTONIC of the last beat */
    uint64_t interval_sum_ns; /* time between beats, summed over beats that advanced the step */
    uint64_t interval_steps;  /* steps those intervals covered */
    uint64_t compute_sum_ns;  /* elastic_worker_report_step_time() sums */
    uint64_t compute_count;
    uint32_t pid;         /* the attached worker's pid */
    int32_t stack_signal; /* signal whose handler writes a backtrace; 0: none installed */
    /* second line: rarely written, kept off the hot line */
    uint64_t stack_dumps; /* backtraces the worker's signal handler wrote */
    uint64_t ckpt_saves;  /* checkpoint steps this worker saved (src/ckpt/report.c); written last */
    uint64_t ckpt_step;   /* the last of them */
    uint64_t ckpt_wall_ms;    /* when (ms since the epoch) */
    uint64_t ckpt_stall_ns;   /* time the training thread spent in checkpoint saves, summed */
    uint64_t ckpt_restore_ns; /* time spent reading checkpoints (the restore), summed */
    uint8_t reserved[16];
    /* third line: the memory tier's reports (src/ckpt/report.c) */
    uint32_t ckpt_tier;      /* ckpt_step's tier: CHANNEL__TIER_*; written before ckpt_saves */
    uint32_t restore_source; /* CHANNEL__RESTORE_*: this worker's restore; written last */
    uint64_t restore_step;   /* the step it restored */
    uint64_t restore_bytes;  /* bytes it read */
    uint64_t restore_us;     /* how long the reading took */
    uint8_t reserved_memory[32];
} channel__hb_slot;

#define CHANNEL__TIER_DISK     0u
#define CHANNEL__TIER_MEMORY   1u
#define CHANNEL__RESTORE_NONE  0u
#define CHANNEL__RESTORE_LOCAL 1u /* memory on its own node */
#define CHANNEL__RESTORE_PEER  2u /* memory staged from a peer's copy */
#define CHANNEL__RESTORE_DISK  3u

typedef struct channel__hb_snapshot {
    uint64_t step, beats, last_beat_ns;
    uint64_t interval_sum_ns, interval_steps, compute_sum_ns, compute_count;
    uint32_t pid;
    int32_t stack_signal;
    uint64_t stack_dumps;
    uint64_t ckpt_saves, ckpt_step, ckpt_wall_ms;
    uint64_t ckpt_stall_ns, ckpt_restore_ns;
    uint32_t ckpt_tier, restore_source;
    uint64_t restore_step, restore_bytes, restore_us;
} channel__hb_snapshot;

typedef struct channel__hb_region channel__hb_region;

/* Agent: creates (truncates) the file at path with slot_count zeroed slots. */
int channel__hb_create(const char *path, unsigned slot_count, channel__hb_region **region);
/* Worker: maps an existing file and returns its slot after checking the header. */
int channel__hb_attach(const char *path, unsigned slot, channel__hb_region **region,
                       channel__hb_slot **slot_out);
unsigned channel__hb_slot_count(const channel__hb_region *region);
/* The slot's memory (slot must be below the slot count). */
channel__hb_slot *channel__hb_slot_at(channel__hb_region *region, unsigned slot);
/* Agent: zeroes a slot before a (new) worker uses it. */
void channel__hb_reset(channel__hb_region *region, unsigned slot);
/* Reads a slot's fields (each atomically). */
void channel__hb_read(const channel__hb_region *region, unsigned slot, channel__hb_snapshot *out);
/* Unmaps; the agent's unlink_file also removes the file. NULL is a no-op. */
void channel__hb_close(channel__hb_region *region, bool unlink_file);

/* ---- control messages ----------------------------------------------------- */

/* A frame is a channel__msg_header followed by `length` bytes of payload: lines
 * "KEY=value\n" (the same names and rules as the environment). Both sides reject
 * frames with an unknown type or a payload over CHANNEL__MSG_MAX_PAYLOAD. */
#define CHANNEL__MSG_MAGIC       0x454cu
#define CHANNEL__MSG_MAX_PAYLOAD 8192u
#define CHANNEL__MSG_MAX_PAIRS   64u

typedef enum channel__msg_type {
    CHANNEL__MSG_HELLO = 1,       /* worker -> agent: SLOT, PID, GENERATION */
    CHANNEL__MSG_ABORT = 2,       /* agent -> worker: GENERATION, REASON (the generation ended) */
    CHANNEL__MSG_ABORT_ACK = 3,   /* worker -> agent: GENERATION (abort hook returned) */
    CHANNEL__MSG_RECONFIGURE = 4, /* agent -> worker: the next generation's worker environment */
    /* worker -> agent: GENERATION (reconfigure callback ran, back in the loop) */
    CHANNEL__MSG_READY = 5,
    CHANNEL__MSG_STOP = 6, /* agent -> worker: no next generation for you; poll returns ECLOSED */
    /* worker -> agent: PROBE (nccl_timeout, nccl_error), REASON, GENERATION, and detail (COMM,
     * COLLECTIVE, WAITED_MS): a library thread found this worker unable to go on in this
     * generation */
    CHANNEL__MSG_FAULT = 7,
    /* worker -> agent: NAME (nccl_rebuilt) and its fields, for the event log and the metrics */
    CHANNEL__MSG_EVENT = 8,
    /* agent -> worker: GRACE_MS, REASON: the job is stopping (the agent got SIGTERM); save
     * now, the worker is killed after GRACE_MS */
    CHANNEL__MSG_NOTICE = 9,
    /* agent -> parked spare: the rank's worker environment (as RECONFIGURE's
     * payload). A spare parks by saying HELLO with SLOT=its spare slot. */
    CHANNEL__MSG_PROMOTE = 10,
    CHANNEL__MSG_TYPE_END_
} channel__msg_type;

typedef struct channel__msg_header {
    uint16_t magic;
    uint16_t type;
    uint32_t length;
} channel__msg_header;

/* A parsed payload: pointers into the caller's buffer (NUL-terminated in place). */
typedef struct channel__kv {
    size_t count;
    const char *keys[CHANNEL__MSG_MAX_PAIRS];
    const char *values[CHANNEL__MSG_MAX_PAIRS];
} channel__kv;

/* Checks a received header: magic, known type, bounded length. */
int channel__msg_check_header(const channel__msg_header *header);
/* Parses "KEY=value\n" lines in place: buf must have room for len + 1 bytes
 * (a NUL is written at buf[len]). Rejects lines without
 * '=', empty keys, NUL bytes, and more than CHANNEL__MSG_MAX_PAIRS pairs. */
int channel__kv_parse(char *buf, size_t len, channel__kv *kv);
/* The value of key, or NULL. Matches getenv's signature style for lookups. */
const char *channel__kv_get(const channel__kv *kv, const char *key);

/* Writes a whole frame to a stream socket (blocking or not) within 30 s;
 * a peer gone is an error (EPIPE), never SIGPIPE. */
int channel__msg_write(int fd, int type, const char *payload, size_t length);
/* Reads one whole frame from a stream socket (blocking or not), waiting at most timeout_ms for it
 * to start (< 0: no limit). payload gets length bytes + a NUL; it must hold
 * CHANNEL__MSG_MAX_PAYLOAD + 1. ELASTIC_ECLOSED at end of stream. */
int channel__msg_read(int fd, int timeout_ms, channel__msg_header *header, char *payload);

/* ---- reports from library modules below the worker (sink.c) -------------- */

/* The worker handle registers how a frame reaches its agent while it is
 * attached; a module with something to report (the checkpoint store's
 * divergence check: CHANNEL__MSG_EVENT, NAME=replica_divergence) sends
 * through it. ELASTIC_ENOTFOUND when no worker is attached (not under an agent). */
typedef int (*channel__sink_fn)(void *user, int type, const char *payload);
void channel__sink_set(channel__sink_fn fn, void *user);
/* Removes the sink if `user` registered it (waits for a send in flight). */
void channel__sink_clear(void *user);
int channel__sink_send(int type, const char *payload);

/* ---- the worker environment (workerenv.c) -------------------------------- */

/* What a worker is told: at spawn as environment variables, on in-process
 * recovery as the RECONFIGURE payload (the worker parses both the same way). */
typedef struct channel__worker_env {
    int rank, local_rank, world_size, local_world_size, group_rank, restart_count;
    uint64_t generation;
    uint64_t incarnation;       /* 0: not set */
    const char *run_id;         /* TORCHELASTIC_RUN_ID and ELASTIC_RUN_ID */
    const char *master_addr;    /* NULL: not set */
    int master_port;            /* 0: not set */
    const char *store_endpoint; /* NULL: no ELASTIC_* variables at all */
    const char *store_prefix;
    const char *heartbeat_shm; /* NULL: none */
    int heartbeat_slot;
    const char *agent_socket; /* NULL: none */
    /* The job's restore plan for this rank (ELASTIC_RESTORE_*): a reconfigured
     * survivor and a promoted spare get it like a cold-started rank. */
    uint64_t restore_step;
    const char *restore_source; /* "local", "peer", "disk"; NULL: no plan */
    const char *restore_node;   /* the peer holding the copy; NULL: "" */
} channel__worker_env;

/* Appends "KEY=value\n" for every variable to out. ELASTIC_EINVAL when a
 * string holds a newline or '=' where it cannot. */
int channel__worker_env_format(const channel__worker_env *env, elastic__text *out);

#endif /* ELASTIC_CHANNEL_H */
