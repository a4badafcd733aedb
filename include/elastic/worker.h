/*
 * The in-trainer API: a worker attaches to the agent that started it (from the
 * environment the agent set), reports progress with cheap heartbeats, and
 * learns when its group changes so it can abort collectives and reconfigure
 * in the same process. Outside an agent it works as a group of one.
 * Included by <elastic.h>; may also be included on its own.
 */
#ifndef ELASTIC_WORKER_H
#define ELASTIC_WORKER_H

#include "common.h"
#include "store.h" /* elastic_store */

#ifdef __cplusplus
extern "C" {
#endif

/* Thread safety: the worker is meant for the trainer's thread. heartbeat,
 * report_step_time, poll and barrier must be called from one thread at a time;
 * get_info, get_store, on_abort and on_reconfigure may be called from any
 * thread; elastic_worker_close must be the last call. The library runs its own
 * thread (the agent's control channel), which is where the abort hook runs.
 * Signals: under an agent only, a stack-dump handler on opts.stack_dump_signal
 * (default SIGUSR2) if that signal still has its default action; it is restored
 * by elastic_worker_close. Nothing else. */
typedef struct elastic_worker elastic_worker;

typedef struct elastic_worker_opts {
    size_t struct_size;           /* sizeof(elastic_worker_opts) */
    int store_connect_timeout_ms; /* connecting to the job's store; default 10000 */
    /* Per-call store deadline, and what ELASTIC_TIMEOUT_DEFAULT means for
     * barrier and the store handle; default 30000. */
    int store_timeout_ms;
    /* poll() waits this long for the next generation after an abort; default 600000. */
    int reconfigure_timeout_ms;
    /* Signal on which the library writes the trainer thread's backtrace to
     * stderr when the agent's hang probe asks (only installed under an agent
     * and only if the signal still has its default action); default SIGUSR2
     * (12); 0: never. */
    int stack_dump_signal;
} elastic_worker_opts;

/* Fills the first struct_size bytes (pass sizeof *opts) with the defaults. */
ELASTIC_EXTERN int elastic_worker_opts_init(elastic_worker_opts *opts, size_t struct_size);

/* Who this worker is in the current generation. An output struct: set
 * struct_size = sizeof(elastic_worker_info) before elastic_worker_get_info();
 * the library fills only that many bytes and sets struct_size to what it
 * filled. In the reconfigure callback it is the library's own: read
 * struct_size before fields newer than your header. */
typedef struct elastic_worker_info {
    size_t struct_size;    /* set by the caller: sizeof(elastic_worker_info) */
    int rank;              /* global rank, 0..world_size-1 */
    int local_rank;        /* rank on this node, 0..local_world_size-1 */
    int world_size;        /* workers in the generation */
    int local_world_size;  /* workers on this node */
    int group_rank;        /* this node's rank among the nodes */
    int restart_count;     /* failures the job has consumed so far */
    uint64_t generation;   /* grows with every failure or membership change */
    int master_port;       /* 0 when not set */
    int attached;          /* 1 under an agent (heartbeats and control channel), 0 alone */
    char run_id[128];      /* the job's name ("" alone without TORCHELASTIC_RUN_ID) */
    char master_addr[256]; /* "" when not set */
    /* The run's incarnation (ELASTIC_INCARNATION, elastic_rdzv_result):
     * larger for a job started again on a fresh store; 0 when not set or
     * from an older library. */
    uint64_t incarnation;
} elastic_worker_info;

/* Attaches from the environment the agent set (RANK, LOCAL_RANK, WORLD_SIZE,
 * LOCAL_WORLD_SIZE, GROUP_RANK, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_RUN_ID,
 * MASTER_ADDR/PORT, ELASTIC_*). Every value is validated: a malformed or
 * inconsistent one fails with ELASTIC_EINVAL naming the variable. With none of
 * them set the worker is a group of one (rank 0, world size 1) with a private
 * in-process store, so the same trainer runs alone. Under plain torchrun (no
 * ELASTIC_* variables) ranks come from the environment and there is no store. */
ELASTIC_EXTERN int elastic_worker_init(const elastic_worker_opts *opts, elastic_worker **worker);

/* Fills *info (its struct_size set by the caller) with the current
 * generation: the one init attached to, or the newer one the last
 * reconfiguring elastic_worker_poll() moved to. Any thread. */
ELASTIC_EXTERN int elastic_worker_get_info(elastic_worker *w, elastic_worker_info *info);

/* The job's store scoped to the current generation's key space (owned by the
 * worker: do not close it; valid until the next reconfigure or close), or
 * ELASTIC_ENOTFOUND with *store NULL when the worker has none (plain torchrun;
 * alone in a library built with ELASTIC_AGENT=0, which has no store server). */
ELASTIC_EXTERN int elastic_worker_get_store(elastic_worker *w, elastic_store **store);

/* Progress report, cheap enough for every step: a few stores to shared memory
 * and a vDSO clock read, no system call. `step` should grow. Alone it only
 * updates local counters. Thread-safe with respect to the library, but call it
 * from one trainer thread. */
ELASTIC_EXTERN int elastic_worker_heartbeat(elastic_worker *w, uint64_t step);

/* Optional: the compute part of the last step in nanoseconds (without time
 * blocked in collectives). In synchronous training every rank's step takes as
 * long as the slowest, so the straggler probe scores ranks by this when it is
 * reported and by the interval between heartbeats when it is not. */
ELASTIC_EXTERN int elastic_worker_report_step_time(elastic_worker *w, uint64_t compute_ns);

/* Runs on the library's thread as soon as the agent ends the generation, so
 * the trainer can abort a blocked collective (ncclCommAbort). `reason` says
 * why. Must not call back into this worker except elastic_worker_get_info.
 * Register it right after init: an abort that arrives before it is registered
 * runs no hook (poll still reports the change). NULL unregisters. */
typedef void (*elastic_worker_abort_fn)(void *user, uint64_t generation, const char *reason);
ELASTIC_EXTERN int elastic_worker_on_abort(elastic_worker *w, elastic_worker_abort_fn fn,
                                           void *user);

/* Runs on the trainer's thread inside elastic_worker_poll() with the new
 * generation's info, after the store has been re-scoped to it. NULL unregisters. */
typedef void (*elastic_worker_reconfigure_fn)(void *user, const elastic_worker_info *info);
ELASTIC_EXTERN int elastic_worker_on_reconfigure(elastic_worker *w,
                                                 elastic_worker_reconfigure_fn fn, void *user);

/* Call once per step. 0 while the group is unchanged (one atomic load). When
 * the generation ended (in-process recovery), waits up to
 * opts.reconfigure_timeout_ms for the next one, runs the reconfigure callback
 * and returns ELASTIC_ERECONFIGURE: re-create communicators, reload state,
 * go on. ELASTIC_ECLOSED when the agent went away or told the worker to stop;
 * ELASTIC_ETIMEDOUT when no new generation came in time. */
ELASTIC_EXTERN int elastic_worker_poll(elastic_worker *w);

/* Waits until every worker of the generation has entered the same barrier
 * (counted through the store). ELASTIC_ERECONFIGURE if the generation ends
 * meanwhile; ELASTIC_ETIMEDOUT after timeout_ms (< 0: no limit; 0: only if
 * everyone is already there; ELASTIC_TIMEOUT_DEFAULT: opts.store_timeout_ms). */
ELASTIC_EXTERN int elastic_worker_barrier(elastic_worker *w, int timeout_ms);

/* Stop notices: the job is being stopped (its agent got SIGTERM: scancel,
 * preemption, the end of a time limit). 1 once a notice came, with
 * *grace_left_ms (may be NULL) the time left before this worker is killed
 * (-1: not known); 0 otherwise (one atomic load: fine at every step). Save a
 * checkpoint and exit 0. docs/SLURM.md, "Preemption and scancel". */
ELASTIC_EXTERN int elastic_worker_stop_notice(elastic_worker *w, int *grace_left_ms);
/* Makes a SIGTERM to this process a stop notice instead of its end (Slurm
 * signals every process of a job step, the workers too). Only while SIGTERM
 * has its default action: ELASTIC_EBUSY when the trainer has its own handler. */
ELASTIC_EXTERN int elastic_worker_notice_on_sigterm(elastic_worker *w);
/* ---- warm spares (elasticrun --warm-spares=N, docs/WARM_SPARES.md) ---------------
 *
 * A warm spare is a trainer process the agent starts ahead of need: it runs
 * the trainer's start-up (imports, CUDA context, model construction) and
 * then parks here, holding no rank, until a rank on its node fails and the
 * agent hands it that rank. Call elastic_worker_park() once, after the
 * expensive start-up and before elastic_worker_init(); in a process that was
 * not started as a spare it returns 0 at once, so the same trainer runs
 * unchanged with or without spares. */
typedef struct elastic_worker_park_opts {
    size_t struct_size; /* sizeof(elastic_worker_park_opts) */
    /* Longest wait for a rank, in ms; -1 (default): until promoted or told to
     * stop (the agent's end of the socket closing, as when it dies, also ends
     * the wait). */
    int timeout_ms;
} elastic_worker_park_opts;

/* Fills the first struct_size bytes (pass sizeof *opts) with the defaults. */
ELASTIC_EXTERN int elastic_worker_park_opts_init(elastic_worker_park_opts *opts,
                                                 size_t struct_size);

/* Not a spare (no ELASTIC_SPARE in the environment): 0 at once, *promoted 0.
 * A spare: tells the agent it is parked and waits. Promoted: the rank's
 * environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*, ELASTIC_*) has been
 * written into the process environment (setenv: call it from the main thread
 * while no other thread reads the environment), ELASTIC_SPARE is removed,
 * *promoted is 1, and 0 is returned: call elastic_worker_init() next, then
 * load state and join the communicator like any restarted rank.
 * environment (may be NULL) receives the same variables as "KEY=value\n"
 * lines (free with elastic_free), for runtimes that keep their own copy of the
 * environment (Python's os.environ). ELASTIC_ECLOSED when the agent stopped
 * the spare or went away (exit 0: the job no longer needs it);
 * ELASTIC_ETIMEDOUT after opts->timeout_ms. opts NULL: the defaults. */
ELASTIC_EXTERN int elastic_worker_park(const elastic_worker_park_opts *opts, int *promoted,
                                       char **environment);

/* Optional: how long one phase of a recovery took in this worker (after
 * ELASTIC_ERECONFIGURE, or in a promoted spare), for the agent's
 * recovery_phases event. phase: 1..31 characters of [a-z0-9_], e.g. "regroup"
 * (re-creating the communicator) or "restore" (loading state; the agent
 * writes the event once every local rank reported "restore"). 0 when not
 * attached to an agent (nothing to tell). */
ELASTIC_EXTERN int elastic_worker_report_phase(elastic_worker *w, const char *phase,
                                               uint64_t duration_ns);

/* Detaches (the agent sees a clean goodbye) and frees. NULL is a no-op. */
ELASTIC_EXTERN void elastic_worker_close(elastic_worker *w);

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_WORKER_H */
