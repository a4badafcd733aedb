/*
 * elastic_loop_run's insides, shared by loop.c (options, the run, one step,
 * recovery) and loop_state.c (the generation's tiers, the restore, the saves).
 */
#ifndef ELASTIC_WORKER_LOOP_H
#define ELASTIC_WORKER_LOOP_H

#include "worker/worker.h"

typedef struct worker__loop {
    elastic_loop_opts o;
    elastic_worker *w;
    bool own_worker; /* attached by the loop: closed by it */
    bool promoted;   /* a warm spare given a rank */
    elastic_worker_info info;
    elastic_ckpt *memory, *disk; /* this generation's tiers; NULL: none */
    uint64_t step;               /* steps done: the state is this step's */
    uint64_t high;               /* the most steps done so far (for result.redone) */
    elastic_loop_result result;
    bool said_no_memory, said_full, said_diverged;
} worker__loop;

/* loop_state.c: this generation's info, tiers and state (the job's agreed
 * step, or the start), then build. `recovering`: after a failure (the time it
 * took is the "restore" phase). ERECONFIGURE when the generation ended meanwhile. */
int worker__loop_resume(worker__loop *l, bool recovering);
/* The saves due after the step just done. ERECONFIGURE: a save was abandoned
 * because the generation ended (a rank died before committing it). */
int worker__loop_save_due(worker__loop *l);
/* Waits for the disk save in flight and closes both tiers. */
int worker__loop_close_tiers(worker__loop *l);

#endif /* ELASTIC_WORKER_LOOP_H */
