/*
 * elastic_loop_run (include/elastic/loop.h): the trainer's loop, owning
 * recovery. This file: the options, the run, one step and what follows a
 * failed one. The generation's tiers, the restore and the saves are in
 * loop_state.c. Everything runs on the caller's thread; only the worker's
 * control thread (an abort) and the asynchronous disk save run elsewhere,
 * and neither calls the trainer.
 */
#include "common/clock.h"
#include "worker/loop.h"

#include <stdio.h>
#include <stdlib.h>

static void opts_defaults(elastic_loop_opts *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->memory_every = 1;
    o->disk_every = 100;
    o->disk_async = 1;
    o->keep_last = 3;
    o->compression = ELASTIC_CKPT_NONE;
    o->fsync = ELASTIC_CKPT_FSYNC_FULL;
    o->park = 1;
    o->failure_grace_ms = 30000;
}

ELASTIC_EXTERN int elastic_loop_opts_init(elastic_loop_opts *opts, size_t struct_size)
{
    elastic_loop_opts defaults;
    opts_defaults(&defaults);
    return ELASTIC__STRUCT_INIT(opts, struct_size, &defaults, "elastic_loop_opts");
}

static int check_opts(const elastic_loop_opts *o)
{
    const char *missing = o->build == NULL  ? "build"
                          : o->step == NULL ? "step"
                          : o->save == NULL ? "save"
                          : o->load == NULL ? "load"
                                            : NULL;
    if (missing != NULL)
        return elastic__fail(ELASTIC_EINVAL,
                             "elastic_loop_opts.%s is NULL: the loop needs all four callbacks "
                             "(build, step, save, load)",
                             missing);
    if (o->steps == 0)
        return elastic__fail(ELASTIC_EINVAL, "elastic_loop_opts.steps is 0: say how many to train");
    if (o->disk_async != 0 && o->disk_async != 1)
        return elastic__fail(ELASTIC_EINVAL, "elastic_loop_opts.disk_async is %d: 0 or 1",
                             o->disk_async);
    if (o->park != 0 && o->park != 1)
        return elastic__fail(ELASTIC_EINVAL, "elastic_loop_opts.park is %d: 0 or 1", o->park);
    if (o->compression != ELASTIC_CKPT_NONE && o->compression != ELASTIC_CKPT_ZSTD)
        return elastic__fail(ELASTIC_EINVAL, "elastic_loop_opts.compression is %d", o->compression);
    if (o->fsync != ELASTIC_CKPT_FSYNC_FULL && o->fsync != ELASTIC_CKPT_FSYNC_NONE)
        return elastic__fail(ELASTIC_EINVAL, "elastic_loop_opts.fsync is %d", o->fsync);
    if (o->failure_grace_ms <= 0)
        return elastic__fail(ELASTIC_EINVAL, "elastic_loop_opts.failure_grace_ms is %d: > 0",
                             o->failure_grace_ms);
    if (o->dir != NULL && o->dir[0] == '\0')
        return elastic__fail(ELASTIC_EINVAL, "elastic_loop_opts.dir is \"\": NULL for no disk tier");
    return 0;
}

/* Parks a warm spare (returns with l->result.released when it was let go),
 * then attaches the worker unless the trainer handed one. */
static int start(worker__loop *l)
{
    if (l->o.worker != NULL) {
        l->w = l->o.worker;
        return 0;
    }
    if (l->o.park) {
        int promoted = 0;
        int rc = elastic_worker_park(NULL, &promoted, NULL);
        if (rc == ELASTIC_ECLOSED) {
            l->result.released = 1; /* the job no longer needs this spare */
            return 0;
        }
        if (rc != 0) return rc;
        l->promoted = promoted != 0;
    }
    int rc = elastic_worker_init(l->o.worker_opts, &l->w);
    l->own_worker = rc == 0;
    return rc;
}

/* The step callback said ELASTIC_ERECONFIGURE. If it already moved the worker
 * to the next generation (its collective polled), reload; else wait a grace
 * for the generation to end (a peer's death reaches the agent first), take
 * the next one with poll, reload. Alone (no agent), the failure is final. */
static int recover_after_step(worker__loop *l, uint64_t generation_before)
{
    elastic_worker_info now = { .struct_size = sizeof now };
    int rc = elastic_worker_get_info(l->w, &now);
    if (rc != 0) return rc;
    if (now.generation != generation_before) return worker__loop_resume(l, true);
    if (!now.attached)
        return elastic__fail(ELASTIC_EUNSUPPORTED,
                             "step %llu failed (ELASTIC_ERECONFIGURE) and no agent recovers "
                             "this worker in place (run under elasticrun --in-process-recovery)",
                             (unsigned long long)l->step);
    ELASTIC_LOG_D("loop", "step %llu failed: waiting up to %d ms for the generation to end",
                  (unsigned long long)l->step, l->o.failure_grace_ms);
    if (!worker__await_change(l->w, l->o.failure_grace_ms))
        return elastic__fail(ELASTIC_ETIMEDOUT,
                             "step %llu failed, and the generation did not end within %d ms: "
                             "the failure is the trainer's, not a peer's",
                             (unsigned long long)l->step, l->o.failure_grace_ms);
    rc = elastic_worker_poll(l->w);
    return rc == ELASTIC_ERECONFIGURE ? worker__loop_resume(l, true) : rc;
}

/* A code a callback returned: its own detail when it left one. */
static int callback_failed(int rc, const char *which, uint64_t step)
{
    if (elastic_last_error()[0] == '\0')
        return elastic__fail(rc, "the %s callback returned %s at step %llu", which,
                             elastic_err_name(rc), (unsigned long long)step);
    return rc;
}

/* One step, its heartbeat and saves, and a look for a new generation. */
static int one_step(worker__loop *l)
{
    uint64_t generation = l->info.generation;
    elastic__clear_error();
    int rc = l->o.step(l->o.user, l->w, l->step);
    if (rc == ELASTIC_ERECONFIGURE) return recover_after_step(l, generation);
    if (rc != 0) return callback_failed(rc, "step", l->step);
    l->step++;
    if (l->step > l->high) l->high = l->step;
    rc = elastic_worker_heartbeat(l->w, l->step);
    if (rc == 0) rc = worker__loop_save_due(l);
    if (rc == ELASTIC_ERECONFIGURE) { /* a save abandoned: a rank died before committing it */
        rc = elastic_worker_poll(l->w);
        return rc == ELASTIC_ERECONFIGURE ? worker__loop_resume(l, true) : rc;
    }
    if (rc != 0) return rc;
    rc = elastic_worker_poll(l->w);
    return rc == ELASTIC_ERECONFIGURE ? worker__loop_resume(l, true) : rc;
}

/* A resume that the next generation interrupted runs again in it. */
static int resume_until_settled(worker__loop *l, bool recovering)
{
    int rc = worker__loop_resume(l, recovering);
    while (rc == ELASTIC_ERECONFIGURE) {
        rc = elastic_worker_poll(l->w);
        if (rc == ELASTIC_ERECONFIGURE) rc = worker__loop_resume(l, true);
    }
    return rc;
}

static int train(worker__loop *l)
{
    int rc = resume_until_settled(l, l->promoted);
    while (rc == 0 && l->step < l->o.steps) {
        rc = one_step(l);
        if (rc == ELASTIC_ERECONFIGURE) { /* a resume the next generation interrupted */
            rc = elastic_worker_poll(l->w);
            if (rc == ELASTIC_ERECONFIGURE) rc = resume_until_settled(l, true);
        }
    }
    return rc;
}

ELASTIC_EXTERN int elastic_loop_run(const elastic_loop_opts *opts, elastic_loop_result *result)
{
    elastic__clear_error();
    worker__loop *l = calloc(1, sizeof *l);
    if (l == NULL) return elastic__fail(ELASTIC_ENOMEM, "elastic_loop_run: out of memory");
    opts_defaults(&l->o);
    int rc = result != NULL ? elastic__struct_size_check(result->struct_size, "elastic_loop_result")
                            : 0;
    bool write_result = result != NULL && rc == 0;
    if (rc == 0 && opts == NULL) rc = elastic__fail(ELASTIC_EINVAL, "elastic_loop_run: opts is NULL");
    if (rc == 0) rc = ELASTIC__STRUCT_READ(&l->o, opts, "elastic_loop_opts");
    if (rc == 0) rc = check_opts(&l->o);
    if (rc == 0) rc = start(l);
    if (rc == 0 && !l->result.released) rc = train(l);
    char detail[512]; /* the cause, not what closing says after it */
    snprintf(detail, sizeof detail, "%s", elastic_last_error());
    int closed = worker__loop_close_tiers(l);
    if (rc == 0 && closed != 0) { /* the last disk save's outcome */
        rc = closed;
        snprintf(detail, sizeof detail, "%s", elastic_last_error());
    }
    l->result.struct_size = sizeof l->result;
    l->result.steps = l->step;
    l->result.generation = l->info.generation;
    l->result.rank = l->info.rank;
    l->result.world_size = l->info.world_size;
    if (write_result) ELASTIC__STRUCT_WRITE(result, &l->result, "elastic_loop_result");
    if (l->own_worker) elastic_worker_close(l->w);
    free(l);
    return rc == 0 ? 0 : elastic__fail(rc, "%s", detail);
}
