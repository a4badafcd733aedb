/*
 * NCCL communicators that recover: created through the job's store, watched by
 * a library thread that catches hung or failed collectives in seconds, aborted
 * when the generation ends, and shrunk or re-created for the next one. NCCL and
 * the CUDA runtime are loaded with dlopen at first use, so no NCCL or CUDA type
 * appears here: the communicator is a `void *` (an ncclComm_t), streams are
 * `void *` (cudaStream_t). Included by <elastic.h>; may also be included on its
 * own. See docs/NCCL.md.
 */
#ifndef ELASTIC_NCCL_H
#define ELASTIC_NCCL_H

#include "common.h"
#include "worker.h" /* elastic_worker */

#ifdef __cplusplus
extern "C" {
#endif

/* Thread safety: init, watch, rebuild and close belong to the trainer's
 * thread; get, check, get_info and abort may be called from any thread. The
 * library runs one watchdog thread per communicator and uses the worker's
 * control thread for aborts (docs/NCCL.md). No signal handler is installed. */

typedef struct elastic_nccl_comm elastic_nccl_comm;

typedef struct elastic_nccl_opts {
    size_t struct_size; /* sizeof(elastic_nccl_opts), set by elastic_nccl_opts_init */
    /* Names the communicator among the worker's ([A-Za-z0-9_.-], at most 63
     * characters); every rank uses the same; default "default". */
    const char *tag;
    int device; /* CUDA device; -1 (default): the local rank */
    /* Unique-id exchange plus NCCL's own init (and each rebuild); default
     * 120000; < 0: no limit; 0 is ELASTIC_EINVAL. */
    int init_timeout_ms;
    /* A threshold: a watched collective not done after this is a hang;
     * default 60000 (NCCL and PyTorch wait 600000); <= 0: no deadline, async
     * errors only. */
    int collective_timeout_ms;
    int watchdog_interval_ms; /* how often the watchdog polls; default 100 */
    /* 1 (default): elastic_worker_poll() rebuilds the communicator before the
     * trainer's reconfigure callback runs; 0: the trainer calls
     * elastic_nccl_comm_rebuild() itself. */
    int rebuild_on_reconfigure;
} elastic_nccl_opts;

/* Fills the defaults, writing no further than struct_size bytes (pass sizeof *opts);
 * ELASTIC_EINVAL for a struct_size below 8 or absurd. */
ELASTIC_EXTERN int elastic_nccl_opts_init(elastic_nccl_opts *opts, size_t struct_size);

/* Creates the communicator of the worker's current generation: every rank of
 * the generation calls it with the same tag. Rank 0 creates the unique id and
 * publishes it in the generation's key space of the job's store; the others
 * wait for it; NCCL's non-blocking init is then polled against
 * opts.init_timeout_ms. Starts the communicator's watchdog thread.
 * ELASTIC_EUNSUPPORTED (one line saying why) when NCCL, the CUDA runtime or a
 * device is missing; ELASTIC_ETIMEDOUT when a rank did not come in time;
 * ELASTIC_EIO when NCCL failed (its message in elastic_last_error()). Call it
 * on the trainer's thread; the worker must outlive the communicator. */
ELASTIC_EXTERN int elastic_nccl_comm_init(elastic_worker *w, const elastic_nccl_opts *opts,
                                          elastic_nccl_comm **comm);

/* The ncclComm_t to pass to NCCL's collectives, or NULL while the
 * communicator is aborted and not yet rebuilt. It changes on rebuild: fetch it
 * again after elastic_worker_poll() returned ELASTIC_ERECONFIGURE. */
ELASTIC_EXTERN void *elastic_nccl_comm_get(elastic_nccl_comm *comm);

/* Marks the collectives just enqueued on `stream` (a cudaStream_t; NULL: the
 * legacy default stream) for the watchdog: it records a CUDA event there, and
 * if the event has not completed collective_timeout_ms later, the watchdog
 * tells the agent (cause nccl_timeout) and aborts the communicator, so a
 * trainer thread blocked on that stream returns. Cheap (one event record);
 * call it after each collective or group of collectives. Trainer's thread. */
ELASTIC_EXTERN int elastic_nccl_watch(elastic_nccl_comm *comm, void *stream);

/* 0 while the communicator is usable; ELASTIC_ERECONFIGURE once the
 * watchdog, the agent's abort or elastic_nccl_comm_abort() aborted it (the
 * results of collectives since then are garbage: call elastic_worker_poll()). */
ELASTIC_EXTERN int elastic_nccl_comm_check(elastic_nccl_comm *comm);

/* Aborts the communicator's in-flight work from any thread (revokes it when
 * NCCL can later shrink it, else ncclCommAbort). The worker's abort path
 * already does this for every live communicator. */
ELASTIC_EXTERN int elastic_nccl_comm_abort(elastic_nccl_comm *comm);

/* Makes the communicator fit the worker's current generation. When the
 * generation is the previous one minus failed ranks (every rank of it was a
 * rank of the old communicator, in the same order) and NCCL is 2.27 or newer,
 * it shrinks (ncclCommShrink with NCCL_SHRINK_ABORT, no new unique id);
 * otherwise it aborts the old one and creates a new one with a new unique id.
 * Every rank of the new generation calls it (a newly started worker calls
 * elastic_nccl_comm_init, which takes part in the same decision). 0 at once
 * when it is already current. The time taken is logged, sent to the agent as
 * an nccl_rebuilt event and counted in its metrics. Trainer's thread. */
ELASTIC_EXTERN int elastic_nccl_comm_rebuild(elastic_nccl_comm *comm);

typedef enum elastic_nccl_rebuild_method {
    ELASTIC_NCCL_CREATED = 0, /* a new unique id through the store */
    ELASTIC_NCCL_SHRUNK = 1   /* ncclCommShrink of the previous communicator */
} elastic_nccl_rebuild_method;

typedef struct elastic_nccl_info {
    /* The caller sets sizeof(elastic_nccl_info); the library sets the bytes filled. */
    size_t struct_size;
    int rank;             /* in the communicator */
    int nranks;           /* ranks in the communicator */
    int device;           /* the CUDA device it runs on */
    int nccl_version;     /* NCCL_VERSION_CODE of the loaded library (22809 for 2.28.9) */
    uint64_t generation;  /* the worker generation it was built for */
    uint64_t collectives; /* elastic_nccl_watch() calls since it was built */
    int aborted;          /* 1 once aborted and not yet rebuilt */
    int rebuilds;         /* rebuilds so far */
    int last_method;      /* elastic_nccl_rebuild_method of the last build */
    int last_build_ms;    /* how long the last init or rebuild took */
} elastic_nccl_info;

/* Fills *info (its struct_size set by the caller) with the communicator's
 * current state and counters. Any thread. */
ELASTIC_EXTERN int elastic_nccl_comm_get_info(elastic_nccl_comm *comm, elastic_nccl_info *info);

/* Releases the handle (docs/ABI.md: `_close` only releases): stops the
 * watchdog, destroys the NCCL communicator (aborting it when it is broken) and
 * frees. NULL is a no-op. Trainer's thread. */
ELASTIC_EXTERN void elastic_nccl_comm_close(elastic_nccl_comm *comm);
/* Deprecated (1.0.0's name, kept for older callers): the same as
 * elastic_nccl_comm_close. */
ELASTIC_EXTERN void elastic_nccl_comm_destroy(elastic_nccl_comm *comm)
    ELASTIC_DEPRECATED("elastic_nccl_comm_close");

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_NCCL_H */
