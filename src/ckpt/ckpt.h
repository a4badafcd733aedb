/*
 * Internals of the checkpoint store shared by its files: the on-disk format
 * (format.c), file-system helpers (io.c), the worker pool (pool.c), the shard
 * writer (writer.c), the commit protocol (commit.c), readers (reader.c),
 * retention and cleanup (retention.c) and the asynchronous saver (async.c).
 */
#ifndef ELASTIC_CKPT_INTERNAL_H
#define ELASTIC_CKPT_INTERNAL_H

#include "ckpt/divergence.h"
#include "ckpt/memtier.h"
#include "common/bytes.h"
#include "common/common.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- format (docs/CHECKPOINT.md) ----------------------------------------- */

#define CKPT_VERSION       1u
#define CKPT_HEADER_BYTES  4096u /* the shard header, padded so data starts page-aligned */
#define CKPT_TRAILER_BYTES 48u
#define CKPT_MAX_NAME      1024u
#define CKPT_MAX_BLOBS     (1u << 20)
#define CKPT_MAX_MANIFEST  (256u << 20)
#define CKPT_MAX_WORLD     (1u << 20)
#define CKPT_MIN_CHUNK     (64u << 10)
#define CKPT_MAX_CHUNK     (64u << 20)
#define CKPT_CODEC_RAW     0u
#define CKPT_CODEC_ZSTD    1u

typedef struct ckpt_chunk {
    uint64_t offset; /* in the shard file (derived, not stored) */
    uint32_t raw_len;
    uint32_t stored_len;
    uint32_t codec;
    uint64_t hash; /* XXH3-64 of the stored bytes */
} ckpt_chunk;

typedef struct ckpt_blob {
    const char *name; /* points into the manifest's name storage */
    uint32_t flags;
    uint64_t raw_len;
    uint64_t data_offset;
    uint64_t stored_len;
    size_t first_chunk;
    size_t chunk_count;
} ckpt_blob;

typedef struct ckpt_manifest {
    uint64_t step;
    uint64_t generation;
    uint32_t rank;
    uint32_t world;
    uint32_t chunk_size;
    ckpt_blob *blobs;
    size_t blob_count, blob_cap;
    ckpt_chunk *chunks;
    size_t chunk_count, chunk_cap;
    char *names; /* decoded manifests: one allocation holding every name */
} ckpt_manifest;

/* Identity fields of a shard header. */
typedef struct ckpt_header {
    uint64_t step;
    uint64_t generation;
    uint32_t rank;
    uint32_t world;
    uint32_t chunk_size;
    /* In what was padding (zero in files written before it: incarnation 0),
     * so the version did not change and older readers ignore it. */
    uint64_t incarnation;
} ckpt_header;

typedef struct ckpt_trailer {
    uint64_t manifest_offset;
    uint64_t manifest_len;
    uint64_t manifest_hash;
    uint64_t step;
} ckpt_trailer;

/* What the commit record holds for each rank's shard. */
typedef struct ckpt_shard_digest {
    uint64_t file_size;
    uint64_t manifest_hash;
} ckpt_shard_digest;

typedef struct ckpt_commit_record {
    uint64_t step;
    uint64_t generation;
    uint32_t world;
    ckpt_shard_digest *shards; /* world entries */
} ckpt_commit_record;

uint64_t ckpt__hash(const void *data, size_t len); /* XXH3-64 */

void ckpt__header_encode(const ckpt_header *h, uint8_t out[CKPT_HEADER_BYTES]);
int ckpt__header_decode(const uint8_t *in, size_t len, ckpt_header *h);
void ckpt__trailer_encode(const ckpt_trailer *t, uint8_t out[CKPT_TRAILER_BYTES]);
int ckpt__trailer_decode(const uint8_t *in, size_t len, ckpt_trailer *t);
int ckpt__manifest_encode(const ckpt_manifest *m, bytes__buf *out);
/* Decodes and checks every bound and the chunk layout (chunks follow each
 * other from `data_start` to `data_end`). */
int ckpt__manifest_decode(const uint8_t *in, size_t len, uint64_t data_start, uint64_t data_end,
                          ckpt_manifest *m);
void ckpt__manifest_free(ckpt_manifest *m);
const ckpt_blob *ckpt__manifest_find(const ckpt_manifest *m, const char *name);
int ckpt__commit_encode(const ckpt_commit_record *r, bytes__buf *out);
int ckpt__commit_decode(const uint8_t *in, size_t len, ckpt_commit_record *r);
void ckpt__commit_free(ckpt_commit_record *r);

/* ---- file system ---------------------------------------------------------- */

#define CKPT_COMMIT_NAME "COMMIT"
#define CKPT_TMP_PREFIX  ".tmp-"

/* Memory for a large blob (huge pages where the kernel has them); free() it. */
void *ckpt__alloc_large(size_t len);

/* "<dir>/step-<20 digits>" */
void ckpt__step_dir(const char *dir, uint64_t step, char *out, size_t cap);
/* "shard-<rank>-g<generation>.elck" */
void ckpt__shard_name(uint32_t rank, uint64_t generation, char *out, size_t cap);
bool ckpt__parse_step_dir(const char *name, uint64_t *step);
/* The rank and generation of a "shard-<rank>-g<generation>.elck" name. */
bool ckpt__parse_shard_name(const char *name, uint32_t *rank, uint64_t *generation);

/* Maps errno to an ELASTIC_E* code and records "what path: why". */
int ckpt__fail_errno(int err, const char *what, const char *path);
/* Prefixes the current error detail with the path (unless it names it already). */
int ckpt__fail_in(int rc, const char *path);
int ckpt__write_all(int fd, const void *data, size_t len, const char *path);
int ckpt__pread_all(int fd, void *buf, size_t len, uint64_t offset, const char *path);
/* Reads len bytes at offset into dst and their XXH3-64 (ckpt__hash of
 * them) in one pass, piece by piece while each piece is in cache. */
int ckpt__pread_hashed(int fd, void *dst, size_t len, uint64_t offset, const char *path,
                       uint64_t *hash);
/* The XXH3-64 of a file range, read through `window` (ckpt__hash_window()
 * bytes, reused for every piece). */
size_t ckpt__hash_window(void);
int ckpt__hash_range(int fd, void *window, size_t len, uint64_t offset, const char *path,
                     uint64_t *hash);
int ckpt__fsync_fd(int fd, const char *path);
int ckpt__fsync_dir(const char *path);
/* fsyncs the directory holding `path` (its entry there). */
int ckpt__fsync_parent(const char *path);
/* Writes a small file (mode `mode`) atomically: temp in the same directory,
 * fsync (when `durable`), rename, fsync the directory. */
int ckpt__write_file_atomic(const char *dir, const char *name, const char *tmp_tag,
                            const void *data, size_t len, bool durable, unsigned mode);
/* Directories get search permission wherever files are readable. */
static inline unsigned ckpt__dir_mode(const elastic_ckpt_opts *o)
{
    return o->file_mode | ((o->file_mode & 0444u) >> 2);
}
/* Reads a whole small file (at most max bytes). */
int ckpt__read_small_file(const char *path, size_t max, uint8_t **data, size_t *len);
/* The largest commit record (CKPT_MAX_WORLD ranks); a larger file is corrupt. */
#define CKPT_MAX_COMMIT_RECORD (32u + 16u * CKPT_MAX_WORLD + 8u)
/* A step directory's commit record (step_dir/COMMIT), read and decoded
 * (ckpt__commit_free it); ELASTIC_ECORRUPT names the file. */
int ckpt__read_commit_record(const char *step_dir, ckpt_commit_record *r);
/* Removes a directory tree of depth one (a step directory). */
int ckpt__remove_step_dir(const char *path);

/* Fault injection for tests: the next `countdown`-th write (1 = the next)
 * or fsync fails with errno `err`. 0 disarms. Process-wide. Only in test
 * builds (-DELASTIC_TEST_HOOKS, the tests' archive; see the Makefile). */
typedef enum { CKPT_FAULT_WRITE = 0, CKPT_FAULT_FSYNC = 1 } ckpt_fault_op;
#ifdef ELASTIC_TEST_HOOKS
void ckpt__inject_fault(ckpt_fault_op op, int countdown, int err);
#endif

/* ---- worker pool ------------------------------------------------------------ */

typedef struct ckpt_pool ckpt_pool;
typedef struct ckpt_worker_ctx ckpt_worker_ctx; /* per-thread zstd contexts */

typedef struct ckpt_task {
    void (*run)(struct ckpt_task *task, ckpt_worker_ctx *ctx);
    int done; /* guarded by the pool's lock */
    struct ckpt_task *next;
} ckpt_task;

int ckpt__pool_start(int threads, ckpt_pool **pool);
void ckpt__pool_stop(ckpt_pool *pool);
/* Runs the task on a pool thread (or inline when the pool is NULL). */
void ckpt__pool_submit(ckpt_pool *pool, ckpt_worker_ctx *inline_ctx, ckpt_task *task);
void ckpt__pool_wait(ckpt_pool *pool, ckpt_task *task);
/* Threads that compress in parallel: the pool's, or 1 without one. */
int ckpt__pool_threads(const ckpt_pool *pool);

ckpt_worker_ctx *ckpt__ctx_new(void);
void ckpt__ctx_free(ckpt_worker_ctx *ctx);
/* Compresses src into dst (capacity dst_cap) at level; 0 with *out_len set
 * when that pays, else ELASTIC_ELIMIT (store it raw). It pays when a sample
 * shrinks to a tenth, or shrinks by a fifth at no less than min_bps (this
 * thread's share of the disk's rate: slower compression would make the save
 * slower than storing raw); 0: no speed condition. quick: only data that
 * a cheap probe (match finding alone, ~3 GB/s) shrinks to a tenth is
 * considered at all (zeros, repeats); the rest is stored raw at once. */
int ckpt__ctx_compress(ckpt_worker_ctx *ctx, int level, const void *src, size_t len, void *dst,
                       size_t dst_cap, uint64_t min_bps, bool quick, size_t *out_len);
int ckpt__ctx_decompress(ckpt_worker_ctx *ctx, const void *src, size_t len, void *dst,
                         size_t raw_len);
/* A scratch buffer of at least len bytes owned by the context. */
void *ckpt__ctx_scratch(ckpt_worker_ctx *ctx, size_t len);
size_t ckpt__compress_bound(size_t len);

/* ---- the handle --------------------------------------------------------------- */

typedef struct ckpt_async ckpt_async;
typedef struct ckpt_step_view ckpt_step_view;

struct elastic_ckpt {
    char *dir;
    elastic_ckpt_opts opts;
    ckpt_pool *pool;      /* NULL when opts.threads <= 1 */
    ckpt_worker_ctx *ctx; /* the caller thread's contexts */
    bool txn_open;        /* a transaction (sync or async) is open */
    pthread_mutex_t lock; /* guards txn_open against the async thread */
    ckpt_async *async;
    ckpt_step_view *view;      /* the last step opened for reading (guarded by read_lock) */
    pthread_mutex_t read_lock; /* one read call at a time: they share view and ctx */
    unsigned tmp_counter;
    /* Buffers of the last transaction, reused by the next: fresh memory is
     * costly (page faults; in some VMs a host fault per page). */
    struct ckpt_buffers {
        uint8_t *in[16], *out[16], *small;
    } spare;
    uint64_t disk_bps; /* atomic: the write rate the last saves saw (bytes/s); 0: none yet */
    ckpt_mem_tier mem; /* the memory tier the directory is in (mem.root NULL: none; memtier.h) */
    uint64_t read_bytes; /* atomic: blob bytes read so far (a restore's report) */
    struct ckpt_restore_state {
        bool open;
        uint64_t step, start_ns, start_bytes;
        unsigned source;
    } restore; /* elastic_ckpt_restore_begin .. _end, on the handle read from */
};

/* ---- writer (writer.c) --------------------------------------------------------- */

/* begin without the one-transaction check (the async thread holds it);
 * `ctx` serves chunks run on the calling thread. Releases the claim when it fails. */
int ckpt__txn_begin(elastic_ckpt *c, uint64_t step, ckpt_worker_ctx *ctx, elastic_ckpt_txn **txn);
bool ckpt__txn_try_claim(elastic_ckpt *c);
void ckpt__txn_release(elastic_ckpt *c);

/* ---- commit (commit.c) ----------------------------------------------------------- */

/* The rank-local commit is done (the shard renamed into place); now the
 * global one. `digest` is this shard's. */
int ckpt__global_commit(elastic_ckpt *c, uint64_t step, const ckpt_shard_digest *digest,
                        const ckpt_replica_record *replicas);
/* report.c: this worker saved `step` (its shard is in, the global commit
 * done or left to a later rank): tell the agent through the heartbeat slot. */
void ckpt__report_saved(uint64_t step, unsigned tier);
/* This worker restored `step` (CHANNEL__RESTORE_* source, bytes read, time). */
void ckpt__report_restored(unsigned source, uint64_t step, uint64_t bytes, uint64_t us);
/* Time (ns) a save held the caller's thread, and a read took: summed in the
 * heartbeat slot, for the goodput accounting's checkpoint stall and restore. */
void ckpt__report_stall(uint64_t ns);
void ckpt__report_restore(uint64_t ns);
/* Size and manifest hash of a shard file from its trailer (trailer may be
 * NULL); with incarnation (may be NULL) also its header's incarnation. */
int ckpt__shard_digest(const char *path, ckpt_shard_digest *digest, ckpt_trailer *trailer,
                       uint64_t *incarnation);
/* Writes the step's COMMIT file atomically. */
int ckpt__write_commit_record(elastic_ckpt *c, const ckpt_commit_record *r);
/* Store mode (commit_store.c): the global commit, and recovering a commit
 * record this rank did not get to write locally. */
/* Store mode: this rank will not commit `step` (its save failed with `code`
 * for `why`, or was aborted): the other ranks' commit waits end with it. */
void ckpt__store_abandon(elastic_ckpt *c, uint64_t step, int code, const char *why);
/* `replicas`: this rank's replicated blobs' digests (divergence.h); NULL: not compared. */
int ckpt__store_commit(elastic_ckpt *c, uint64_t step, const ckpt_shard_digest *digest,
                       const ckpt_replica_record *replicas);
int ckpt__store_recover_commit(elastic_ckpt *c, uint64_t step);

/* ---- the divergence check (divergence_commit.c; divergence.h) ------------------------- */

/* ELASTIC_ON_DIVERGENCE: stop (default), warn, off. */
ckpt_divergence_mode ckpt__divergence_mode(void);
/* Whether this handle's commits compare replicated blobs (store mode, several
 * ranks each with its own copy, the check not off). */
bool ckpt__replicas_wanted(const elastic_ckpt *c);
/* This shard's record from its manifest and its chunks' raw-byte checksums. */
int ckpt__replicas_of_shard(const elastic_ckpt *c, const ckpt_manifest *m,
                            const uint64_t *raw_hashes, ckpt_replica_record *out);
void ckpt__replicas_key(uint64_t step, uint64_t generation, uint32_t rank, char *out, size_t cap);
/* The committing rank: judges every rank's record (values/lens: world
 * entries). ELASTIC_EDIVERGED (why: the evidence's line) when the step must be
 * abandoned; 0 when it may commit (agreement, or a divergence in warn mode,
 * reported). */
int ckpt__replicas_judge(elastic_ckpt *c, uint64_t step, void *const *values, const size_t *lens,
                         const ckpt_replica_record *own, char *why, size_t why_cap);
/* Every rank, on the abandon: reports the evidence to its agent, refuses the
 * generation's later steps; returns ELASTIC_EDIVERGED with the evidence's line. */
int ckpt__replicas_diverged(elastic_ckpt *c, uint64_t step, const char *reason);
/* ELASTIC_EDIVERGED when this process learned that the handle's generation
 * diverged at or before `step`. */
int ckpt__replicas_refuse(const elastic_ckpt *c, uint64_t step);

/* ---- reader (reader.c) ----------------------------------------------------------- */

/* Committed steps, newest first, that verify at `verify` level. */
int ckpt__valid_steps(elastic_ckpt *c, int verify, size_t max, uint64_t **steps, size_t *n);
/* Every step directory present, ascending. */
int ckpt__scan_steps(const char *dir, uint64_t **steps, size_t *n);
void ckpt__view_free(ckpt_step_view *v);

/* ---- memory tier (memtier.c) ----------------------------------------------------- */

/* At open: a directory inside a memory tier (its parent or grandparent holds
 * the marker) binds the handle to the tier's limit; its steps kept become
 * the default retention. No marker: nothing changes. */
int ckpt__mem_attach(elastic_ckpt *c);
/* Before a memory-tier step directory is removed: its commit record goes,
 * then its shard files become the directory's spares ("<dir>/.spare-<rank>"),
 * whose pages the next shard of that rank is written over (fresh tmpfs pages
 * cost a zeroing and a fault each, more than the copy). */
void ckpt__mem_keep_spares(const char *dir, const char *step_dir);
/* Renames rank's spare to `path`; false when there is none. */
bool ckpt__mem_take_spare(const char *dir, uint32_t rank, const char *path);

/* adopt.c: a complete shard file (a memory-tier copy) of this handle's rank,
 * world and generation becomes its shard of `step` here by the atomic path,
 * then takes part in the global commit. ELASTIC_EBUSY during a transaction. */
int ckpt__adopt_shard(elastic_ckpt *c, uint64_t step, const char *shard_path);

/* verify_shard.c: one shard file checked completely (header, trailer,
 * manifest, every chunk) against its step's commit record, without a handle. */
int ckpt__verify_shard_file(const char *path, const ckpt_commit_record *r, uint32_t rank);
/* The same checks on an open file of `size` bytes (a copy just received,
 * before it takes its name); `path` names it in errors. */
int ckpt__verify_shard_fd(int fd, uint64_t size, const char *path, const ckpt_commit_record *r,
                          uint32_t rank);

/* ---- restoring (restore.c) ---------------------------------------------------------- */

/* Where a worker restores from: the memory tier or the disk tier. */
typedef struct ckpt_restore {
    uint64_t step;
    unsigned source;    /* CHANNEL__RESTORE_LOCAL / _PEER / _DISK */
    elastic_ckpt *from; /* the handle to read the step from */
    char node[72];      /* the node the copy came from ("" when this one) */
    uint64_t start_ns, start_bytes;
} ckpt_restore;

/* Opens the node's memory tier that the agent named (ELASTIC_MEMORY_CKPT_DIR)
 * with these options. ELASTIC_ENOTFOUND when there is none. */
int ckpt__open_memory(const elastic_ckpt_opts *opts, elastic_ckpt **out);
/* The step to restore and its handle: the job's agreed step when the agent
 * planned one (ELASTIC_RESTORE_STEP / _SOURCE / _NODE), else the newer of
 * the memory tier's latest and the disk's (memory on a tie). Either handle
 * may be NULL. ELASTIC_ENOTFOUND when neither has a step. */
int ckpt__restore_begin(elastic_ckpt *memory, elastic_ckpt *disk, ckpt_restore *r);
/* After the reads: reports (step, source, bytes read since begin, time) to the agent. */
void ckpt__restore_end(const ckpt_restore *r);

/* ---- the trainer's disk tier, announced to the agent (announce.c) ----------------- */

/* Writes TIER_ROOT/trainer-disk.<local_rank> (channel.h) naming `dir`,
 * resolved to an absolute path, as shared or node-local storage. */
int ckpt__announce_disk_to(const char *tier_root, uint32_t local_rank, const char *dir,
                           bool shared);
/* In a worker under an agent with a memory tier (ELASTIC_MEMORY_CKPT_DIR,
 * LOCAL_RANK set), announces the disk handle `c` just opened; else nothing. */
void ckpt__announce_disk(const elastic_ckpt *c);

/* ---- retention (retention.c) ------------------------------------------------------ */

void ckpt__cleanup_on_open(elastic_ckpt *c);

/* ---- generation fencing (fence.c) ------------------------------------------------------ */

/* What the fence orders: (incarnation, generation), lexicographically. */
typedef struct ckpt_fence_mark {
    uint64_t incarnation; /* 0: a marker from before incarnations, or a handle without one */
    uint64_t generation;
} ckpt_fence_mark;
/* "<generation>" (incarnation 0) or "<incarnation>-<generation>". */
bool ckpt__fence_mark_parse(const char *text, size_t len, ckpt_fence_mark *out);
size_t ckpt__fence_mark_format(const ckpt_fence_mark *m, char *out, size_t cap);
int ckpt__fence_mark_cmp(const ckpt_fence_mark *a, const ckpt_fence_mark *b);
/* Records that (opts.incarnation, opts.generation) writes here (no-op for
 * generation 0). */
int ckpt__fence_register(elastic_ckpt *c);
/* ELASTIC_ESTATE when a newer pair has registered: this one may not commit. */
int ckpt__fence_check(elastic_ckpt *c, uint64_t step);
/* Whether the shard file at path was written by this handle's incarnation
 * (its header says so): shard names carry the generation alone, and a job
 * started again counts generations from 1, so a shard of this name in a step
 * the old job left uncommitted may be the old job's. */
bool ckpt__shard_is_own_incarnation(const elastic_ckpt *c, const char *path);
/* Removes this generation's (and incarnation's) shards of the step in
 * step_dir: a fenced generation can never commit it (commit.c). */
void ckpt__drop_generation_shards(const elastic_ckpt *c, const char *step_dir);
void ckpt__apply_retention(elastic_ckpt *c);

/* ---- async (async.c) ---------------------------------------------------------------- */

void ckpt__async_stop(elastic_ckpt *c);
/* Tests: while held, a staged asynchronous save does not start. */
int ckpt__async_hold(elastic_ckpt *c, bool hold);
/* Tests: how many times the staging buffer was mapped (1 while it is reused). */
unsigned ckpt__async_stage_maps(const elastic_ckpt *c);

#endif /* ELASTIC_CKPT_INTERNAL_H */
