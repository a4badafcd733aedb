/*
 * The training loop that owns recovery: the trainer says how to build a
 * generation's resources, how its state becomes checkpoint blobs and back,
 * and how to train one step; elastic_loop_run() does the rest. It parks the
 * process when it was started as a warm spare, attaches the worker, restores
 * the job's agreed step from the cheapest tier (this node's memory, a peer's
 * copy, disk), heartbeats with the step, saves to memory every memory_every
 * steps and to disk every disk_every (asynchronously), and when a peer dies
 * (a failed step, a save abandoned because a rank died, a new generation)
 * waits for the next generation, reloads the agreed step, rebuilds and goes
 * on, reporting the recovery's phases. The same trainer runs alone and under
 * plain torchrun (no memory tier: disk only; a failure ends the process and
 * the launcher restarts it). docs/ADOPTING.md, "C and C++".
 * Included by <elastic.h>; may also be included on its own.
 */
#ifndef ELASTIC_LOOP_H
#define ELASTIC_LOOP_H

#include "common.h"
#include "ckpt.h"   /* elastic_ckpt, elastic_ckpt_blob */
#include "worker.h" /* elastic_worker, elastic_worker_info, elastic_worker_opts */

#ifdef __cplusplus
extern "C" {
#endif

/* Thread rules: elastic_loop_run runs on the calling thread (the trainer's)
 * and calls every callback there, one at a time, never concurrently; a
 * callback may use the worker it is given (get_info, get_store, report_phase,
 * poll inside a long collective) and NCCL communicators made from it
 * (elastic_nccl_*), but not close it. The library's own threads (the
 * worker's control thread, the asynchronous disk save, NCCL watchdogs) run
 * none of these callbacks. No signal handler beyond the worker's. */

/* Builds what the generation needs after its state was loaded (every
 * generation, `info` is the new one: rank and world may have changed), e.g.
 * the first call creates the NCCL communicator with elastic_nccl_comm_init and
 * later ones fetch elastic_nccl_comm_get (elastic_worker_poll already rebuilt
 * it through its rebuild callback). 0, or an ELASTIC_E* code that ends the run. */
typedef int (*elastic_loop_build_fn)(void *user, elastic_worker *worker,
                                     const elastic_worker_info *info);

/* Trains step `step` (steps done so far; the state is that of `step`). 0 when
 * it trained; ELASTIC_ERECONFIGURE when a collective failed or was aborted
 * because the group changed (the loop waits for the next generation, reloads
 * and trains `step` again from the restored state); any other code ends the
 * run (a failed collective that no generation end follows is also the
 * trainer's error, after opts.failure_grace_ms). */
typedef int (*elastic_loop_step_fn)(void *user, elastic_worker *worker, uint64_t step);

/* The state after `step` steps, as blobs (names, data, ELASTIC_CKPT_REPLICATED
 * for what every rank holds identically): *blobs points to *n of them, owned
 * by the trainer and valid until its next callback (the loop copies or writes
 * them before then). `tier` is ELASTIC_CKPT_SOURCE_LOCAL for the memory tier,
 * ELASTIC_CKPT_SOURCE_DISK for the disk. 0, or a code that ends the run. */
typedef int (*elastic_loop_save_fn)(void *user, uint64_t step, int tier,
                                    const elastic_ckpt_blob **blobs, size_t *n);

/* Loads the state of `step` from `from` (elastic_ckpt_read_into,
 * elastic_ckpt_read_shard, elastic_ckpt_step_info when the world size
 * changed). from NULL (step 0): no checkpoint exists; reset to the initial
 * state (a failure before the first save also comes here). 0, or a code that
 * ends the run. */
typedef int (*elastic_loop_load_fn)(void *user, elastic_ckpt *from, uint64_t step);

typedef struct elastic_loop_opts {
    size_t struct_size; /* sizeof(elastic_loop_opts), set by elastic_loop_opts_init */
    void *user;         /* passed to every callback */
    /* Required: NULL is ELASTIC_EINVAL naming the field. */
    elastic_loop_build_fn build;
    elastic_loop_step_fn step;
    elastic_loop_save_fn save;
    elastic_loop_load_fn load;
    uint64_t steps; /* train until this many steps are done; required (> 0) */
    /* The disk tier's directory (shared by every rank; created if missing,
     * not its parents); NULL (default): no disk tier. */
    const char *dir;
    /* Save to this node's memory tier (elasticrun --memory-ckpt) every N
     * steps; 0: never; default 1. Without a memory tier it is skipped. */
    uint64_t memory_every;
    /* Save to `dir` every M steps; 0: never; default 100. */
    uint64_t disk_every;
    int disk_async;      /* 1 (default): disk saves are asynchronous; 0: in line */
    unsigned keep_last;  /* disk retention: the newest N steps; 0: all; default 3 */
    int compression;     /* of the disk tier: ELASTIC_CKPT_NONE (default) or _ZSTD */
    int fsync;           /* of the disk tier: ELASTIC_CKPT_FSYNC_FULL (default) or _NONE */
    /* 1 (default): park when started as a warm spare (elastic_worker_park,
     * before anything else: call elastic_loop_run after the costly start-up);
     * 0: never (the trainer parks itself, or does not know about spares). */
    int park;
    /* The worker's options; NULL (default): its defaults. Ignored when
     * opts.worker hands the loop an attached worker. */
    const elastic_worker_opts *worker_opts;
    /* A worker the trainer attached itself (elastic_worker_init); it stays
     * the trainer's to close. NULL (default): the loop attaches and closes one. */
    elastic_worker *worker;
    /* After the step callback's ELASTIC_ERECONFIGURE, how long to wait for the
     * generation to end when it has not yet (a peer's death reaches the agent
     * first); then the failure is the trainer's. Default 30000; > 0. */
    int failure_grace_ms;
} elastic_loop_opts;

/* Fills the first struct_size bytes (pass sizeof *opts) with the defaults. */
ELASTIC_EXTERN int elastic_loop_opts_init(elastic_loop_opts *opts, size_t struct_size);

/* What a run did. An output struct: set struct_size = sizeof(elastic_loop_result). */
typedef struct elastic_loop_result {
    size_t struct_size;   /* set by the caller: sizeof(elastic_loop_result) */
    uint64_t steps;       /* steps done when the run returned */
    uint64_t generation;  /* the last generation it trained in */
    int rank;             /* its rank there */
    int world_size;       /* its world size there */
    int recoveries;       /* restores after a failure (not the start; a promoted spare: 1) */
    uint64_t redone;      /* steps trained again after recoveries, in all */
    int released;         /* 1: a warm spare the job never needed (nothing trained) */
    int restored_source;  /* ELASTIC_CKPT_SOURCE_* of the last restore; 0: none */
} elastic_loop_result;

/* Checks opts (ELASTIC_EINVAL naming the field, before anything starts),
 * then runs the loop until opts.steps are done: 0 (and the last disk save
 * finished), or 0 with result->released 1 when a warm spare was told to go
 * (exit 0). Otherwise the error that ended it: a callback's code, ELASTIC_ECLOSED
 * when the agent stopped this worker, ELASTIC_ETIMEDOUT when no new
 * generation came within the worker's reconfigure_timeout_ms; the detail is
 * in elastic_last_error(). result may be NULL. */
ELASTIC_EXTERN int elastic_loop_run(const elastic_loop_opts *opts, elastic_loop_result *result);

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_LOOP_H */
