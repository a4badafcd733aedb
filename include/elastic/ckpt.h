/*
 * The atomic checkpoint store: named blobs committed together for one step,
 * checksummed, optionally zstd-compressed, never seen half written. Each rank
 * writes its own shard; a step is the latest only once every rank of the
 * generation committed. Format and guarantees: docs/CHECKPOINT.md.
 * Included by <elastic.h>; may also be included on its own.
 */
#ifndef ELASTIC_CKPT_H
#define ELASTIC_CKPT_H

#include "common.h"
#include "store.h" /* elastic_store */

#ifdef __cplusplus
extern "C" {
#endif

/* Thread safety: calls on one elastic_ckpt handle are serialised inside
 * (reads may come from any thread); a transaction and a writer belong to the
 * thread that uses them (one at a time). elastic_ckpt_close must be the last
 * call. The library's own threads (opts.threads, the asynchronous save) run no
 * caller code. No signal handlers. */
typedef struct elastic_ckpt elastic_ckpt;
typedef struct elastic_ckpt_txn elastic_ckpt_txn;
typedef struct elastic_ckpt_writer elastic_ckpt_writer;

/* opts.compression */
#define ELASTIC_CKPT_NONE 0 /* blobs stored as they are */
#define ELASTIC_CKPT_ZSTD 1 /* zstd per chunk; chunks that do not shrink are stored raw */

/* opts.fsync */
#define ELASTIC_CKPT_FSYNC_FULL 0 /* files and directories fsynced: survives power loss */
#define ELASTIC_CKPT_FSYNC_NONE 1 /* no fsync: survives a process crash, not a power loss */

/* opts.verify: what elastic_ckpt_latest() and _list_steps() check before
 * trusting a step. elastic_ckpt_read() always verifies every byte it returns. */
#define ELASTIC_CKPT_VERIFY_FULL     0 /* records, manifests and every blob's checksum */
#define ELASTIC_CKPT_VERIFY_MANIFEST 1 /* records and manifests only: cheap for huge checkpoints */

/* Blob flags (elastic_ckpt_put_flags, elastic_ckpt_writer_open). */
/* Identical on every rank: any rank (any world size) may read it. A contract
 * the store-mode commit checks: ranks whose bytes differ abandon the step
 * with ELASTIC_EDIVERGED (silent data corruption; docs/CHECKPOINT.md,
 * "Divergence check"), so rank-specific data never goes under this flag. */
#define ELASTIC_CKPT_REPLICATED 1u

/* `rank` argument meaning "this rank's shard, else a replicated blob of any shard". */
#define ELASTIC_CKPT_ANY_RANK (-1)

typedef struct elastic_ckpt_opts {
    size_t struct_size; /* sizeof(elastic_ckpt_opts) */
    int compression;    /* ELASTIC_CKPT_ZSTD (default) or ELASTIC_CKPT_NONE */
    int zstd_level;     /* default 1; negative levels are faster, up to 19 smaller */
    /* Compression/verification threads; default: online CPUs (max 8); 0 or 1:
     * the caller's thread. */
    int threads;
    /* Blobs are cut into independent chunks of this size; default 4 MiB
     * (64 KiB..64 MiB). */
    size_t chunk_bytes;
    int fsync;           /* ELASTIC_CKPT_FSYNC_FULL (default) or ELASTIC_CKPT_FSYNC_NONE */
    int verify;          /* ELASTIC_CKPT_VERIFY_FULL (default) or ELASTIC_CKPT_VERIFY_MANIFEST */
    unsigned keep_last;  /* retention: keep the newest N committed steps; 0 (default): keep all */
    uint64_t keep_every; /* also keep every step divisible by this; 0 (default): none */
    uint32_t rank;       /* this process's rank in the generation; default 0 */
    uint32_t world;      /* ranks in the generation; default 1 */
    /* The generation writing (keeps shards of different generations apart);
     * default 0. */
    uint64_t generation;
    /* NULL (default): the global commit record is a file in the shared
     * directory; else it goes through this store (its prefix scopes the job). */
    elastic_store *store;
    /* 1: every rank sees the same directory (all shards are checked); 0: each
     * rank has its own; default: 1 without a store, 0 with one. */
    int shared_storage;
    /* Store mode: how long commit waits for the other ranks; default 600000;
     * < 0: no limit; 0: only if they already committed; ELASTIC_TIMEOUT_DEFAULT:
     * the store handle's timeout_ms. */
    int commit_timeout_ms;
    uint64_t max_blob_bytes; /* reads refuse blobs larger than this; default 1 TiB */
    /* Mode of the files written; default 0600 (private). 0640: the group may
     * read (directories get x wherever r is: 0700 / 0750). Bits outside 0666
     * are refused. */
    unsigned file_mode;
    /* The run's incarnation writing (elastic_worker_info.incarnation): a
     * commit is fenced by any later (incarnation, generation) that opened
     * the directory, compared incarnation first, so a job started again on a
     * fresh store (generations from 1 again) is not fenced by the old job's
     * markers and fences every worker of the old job still running. Default
     * ELASTIC_CKPT_INCARNATION_FROM_ENV: the agent's ELASTIC_INCARNATION, 0
     * without one. */
    uint64_t incarnation;
} elastic_ckpt_opts;

/* opts.incarnation: take it from ELASTIC_INCARNATION (0 when unset). */
#define ELASTIC_CKPT_INCARNATION_FROM_ENV UINT64_MAX

/* Fills the first struct_size bytes (pass sizeof *opts) with the defaults. */
ELASTIC_EXTERN int elastic_ckpt_opts_init(elastic_ckpt_opts *opts, size_t struct_size);

/* Opens (creating the directory if missing, but not its parents) a checkpoint
 * directory and removes what crashed writers left behind (temporary files;
 * uncommitted steps when world is 1). A read-only directory can be opened and
 * read; writing then fails with ELASTIC_EROFS / ELASTIC_EPERM. */
ELASTIC_EXTERN int elastic_ckpt_open(const char *dir, const elastic_ckpt_opts *opts,
                                     elastic_ckpt **ckpt);
/* Frees the handle. An asynchronous save still running is canceled (its step
 * is not committed): call elastic_ckpt_async_wait() first to keep it. */
ELASTIC_EXTERN void elastic_ckpt_close(elastic_ckpt *ckpt);

/* ---- writing ------------------------------------------------------------- */

/* Starts this rank's shard of `step`. One transaction at a time per handle:
 * ELASTIC_EBUSY while another (or an asynchronous save) is open. Step
 * UINT64_MAX is refused (ELASTIC_EINVAL): no later step could supersede it. */
ELASTIC_EXTERN int elastic_ckpt_begin(elastic_ckpt *ckpt, uint64_t step, elastic_ckpt_txn **txn);
/* Adds a blob (names: 1..1024 bytes, unique in the shard). The data is
 * consumed before the call returns. */
ELASTIC_EXTERN int elastic_ckpt_put(elastic_ckpt_txn *txn, const char *name, const void *data,
                                    size_t len);
/* Like put, with ELASTIC_CKPT_* blob flags. With shared storage only rank 0
 * writes a replicated blob; other ranks' calls record nothing. */
ELASTIC_EXTERN int elastic_ckpt_put_flags(elastic_ckpt_txn *txn, const char *name, const void *data,
                                          size_t len, unsigned flags);

/* Streaming: a blob written piece by piece (larger than memory allows). One
 * writer open per transaction; close it before the next put or commit. */
ELASTIC_EXTERN int elastic_ckpt_writer_open(elastic_ckpt_txn *txn, const char *name, unsigned flags,
                                            elastic_ckpt_writer **writer);
/* Appends len bytes to the blob; the data is consumed before the call returns.
 * A failure is sticky: every later call on the transaction, commit included,
 * returns it. */
ELASTIC_EXTERN int elastic_ckpt_writer_write(elastic_ckpt_writer *writer, const void *data,
                                             size_t len);
/* Finishes the blob and frees the writer (also after an error). */
ELASTIC_EXTERN int elastic_ckpt_writer_close(elastic_ckpt_writer *writer);

/* Makes the shard durable and commits it (rank-local commit), then takes part
 * in the global commit: with a shared directory the last rank to commit
 * writes the step's commit record; with a store every rank waits (up to
 * commit_timeout_ms) for all ranks and records the commit locally. Under an
 * agent that wait also ends with the generation (in-process recovery):
 * ELASTIC_ERECONFIGURE, the step abandoned (not committed) unless every rank
 * had committed it already. Frees the transaction whatever the outcome; on
 * failure nothing of it remains. */
ELASTIC_EXTERN int elastic_ckpt_commit(elastic_ckpt_txn *txn);
/* Drops the transaction and its temporary files. NULL is a no-op. */
ELASTIC_EXTERN void elastic_ckpt_abort(elastic_ckpt_txn *txn);

/* One blob for elastic_ckpt_save / elastic_ckpt_save_async. Passed in arrays,
 * so it has no struct_size and never grows (docs/ABI.md): a new field would
 * come with a new struct and new functions. */
typedef struct elastic_ckpt_blob {
    const char *name;
    const void *data;
    size_t len;
    unsigned flags; /* ELASTIC_CKPT_REPLICATED or 0 */
} elastic_ckpt_blob;

/* begin + put of every blob + commit. */
ELASTIC_EXTERN int elastic_ckpt_save(elastic_ckpt *ckpt, uint64_t step,
                                     const elastic_ckpt_blob *blobs, size_t n);

/* ---- asynchronous save --------------------------------------------------- */

/* Copies the blobs and returns; a background thread writes and commits them.
 * One save is in flight at a time: if one still is, waits up to timeout_ms
 * (< 0 and ELASTIC_TIMEOUT_DEFAULT: without limit; 0: not at all) for it to
 * finish (back-pressure), else ELASTIC_EBUSY.
 * The copy's memory is kept for the next save, so only the first copy pays
 * for page faults. */
ELASTIC_EXTERN int elastic_ckpt_save_async(elastic_ckpt *ckpt, uint64_t step,
                                           const elastic_ckpt_blob *blobs, size_t n,
                                           int timeout_ms);
/* Optional, once at start-up: allocates the staging buffer for asynchronous
 * saves of up to `bytes` of blob data and faults every page in now, so even
 * the first elastic_ckpt_save_async stalls only for its copy (fresh memory
 * costs several times a copy, in some VMs far more). Blocks while a save is
 * in flight; ELASTIC_EBUSY while a transaction is open. */
ELASTIC_EXTERN int elastic_ckpt_async_reserve(elastic_ckpt *ckpt, size_t bytes);
/* Waits up to timeout_ms (0: just look; < 0 and ELASTIC_TIMEOUT_DEFAULT: no
 * limit) for the save in flight. Returns the
 * outcome of the last finished asynchronous save (0 when there was none),
 * or ELASTIC_ETIMEDOUT while one is still running. *step (may be NULL) gets
 * the step of the save the outcome belongs to. */
ELASTIC_EXTERN int elastic_ckpt_async_wait(elastic_ckpt *ckpt, int timeout_ms, uint64_t *step);

/* ---- reading ------------------------------------------------------------- */

/* The newest step that is committed and verifies (opts.verify); corrupt or
 * incomplete steps are skipped with a logged reason. ELASTIC_ENOTFOUND when
 * there is none. Not a pure read: with a store (opts.store), for a step whose
 * shard is here but whose COMMIT file is missing (a crash between the global
 * and the local commit), it asks the store for the step's commit record (one
 * non-waiting read, bounded by the store handle's timeout_ms) and, if every
 * rank committed, writes the COMMIT file here. */
ELASTIC_EXTERN int elastic_ckpt_latest(elastic_ckpt *ckpt, uint64_t *step);
/* Reads a blob of a committed step: this rank's shard first, then a
 * replicated blob of any shard. *data is freed with elastic_free(). Every
 * byte is verified: ELASTIC_ECORRUPT when a checksum does not match. */
ELASTIC_EXTERN int elastic_ckpt_read(elastic_ckpt *ckpt, uint64_t step, const char *name,
                                     void **data, size_t *len);
/* Into the caller's buffer: ELASTIC_ELIMIT (with *len set) when cap is too small. */
ELASTIC_EXTERN int elastic_ckpt_read_into(elastic_ckpt *ckpt, uint64_t step, const char *name,
                                          void *buf, size_t cap, size_t *len);
/* A blob of the shard written by `rank` (ELASTIC_CKPT_ANY_RANK: as read),
 * for resharding after the world size changed. */
ELASTIC_EXTERN int elastic_ckpt_read_shard(elastic_ckpt *ckpt, uint64_t step, int rank,
                                           const char *name, void **data, size_t *len);
/* The size of a blob as read would return it. */
ELASTIC_EXTERN int elastic_ckpt_blob_len(elastic_ckpt *ckpt, uint64_t step, const char *name,
                                         size_t *len);

/* Committed, verifying steps, oldest first. *steps is freed with elastic_free(). */
ELASTIC_EXTERN int elastic_ckpt_list_steps(elastic_ckpt *ckpt, uint64_t **steps, size_t *n);
/* Blob names of a step in `rank`'s shard (ELASTIC_CKPT_ANY_RANK: every name
 * read can find). *names is one allocation, freed with elastic_free(). */
ELASTIC_EXTERN int elastic_ckpt_list_blobs(elastic_ckpt *ckpt, uint64_t step, int rank,
                                           char ***names, size_t *n);
/* The world size and generation that wrote a committed step. */
ELASTIC_EXTERN int elastic_ckpt_step_info(elastic_ckpt *ckpt, uint64_t step, uint32_t *world,
                                          uint64_t *generation);

/* ---- memory tier (docs/CHECKPOINT.md, "Memory tier") --------------------- */

/* Where a restore reads from (elastic_ckpt_restore_begin). */
#define ELASTIC_CKPT_SOURCE_LOCAL 1 /* memory on this node */
#define ELASTIC_CKPT_SOURCE_PEER  2 /* memory staged from a peer node's copy */
#define ELASTIC_CKPT_SOURCE_DISK  3 /* the disk tier */

/* Opens this node's memory tier (elasticrun --memory-ckpt: shared memory the
 * node's agent holds, in the disk tier's format) as a checkpoint handle:
 * saves go to memory at memcpy speed and outlive the worker; every read,
 * read_shard and verification works as on a directory. opts as for
 * elastic_ckpt_open (rank, world, generation; a store for the commit, since
 * each node holds only its own ranks' shards); compression NONE is best here.
 * Over the tier's limit a save fails with ELASTIC_ENOSPC naming the limit.
 * ELASTIC_ENOTFOUND when the worker runs without a memory tier. */
ELASTIC_EXTERN int elastic_ckpt_open_memory(const elastic_ckpt_opts *opts, elastic_ckpt **ckpt);
/* The step this worker restores and the handle to read it from (*from is
 * `memory` or `disk`; either may be NULL): the job's agreed step when the
 * agents planned one (each rank's shard from its cheapest copy: this node's
 * memory, a peer's copy staged into it, or disk; a step committed on a
 * shared-directory `disk` newer than the agreed one, and of its generation
 * or later, wins: the agents may not know that directory), else the newer
 * of the memory tier's latest step and the disk's (memory on a tie). *source (may
 * be NULL): ELASTIC_CKPT_SOURCE_*. ELASTIC_ENOTFOUND when neither has a
 * step (or both are NULL). Read the step from *from, then call elastic_ckpt_restore_end. Thread
 * rules: those of the two handles. */
ELASTIC_EXTERN int elastic_ckpt_restore_begin(elastic_ckpt *memory, elastic_ckpt *disk,
                                              uint64_t *step, elastic_ckpt **from, int *source);
/* After the restore's reads on `from`: tells the agent the step, source,
 * bytes read and time taken (the checkpoint_restored event; nothing outside
 * elasticrun). NULL, or a handle without a restore begun, is a no-op. */
ELASTIC_EXTERN void elastic_ckpt_restore_end(elastic_ckpt *from);

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_CKPT_H */
