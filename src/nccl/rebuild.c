/*
 * Recovery: abort a communicator's in-flight work from any thread (revoke it
 * when NCCL can shrink it later, else ncclCommAbort), and make it fit the next
 * generation (ncclCommShrink when the new group is the old one minus the
 * failed ranks, else a new unique id). Hooked on the worker so that neither
 * needs trainer code: the agent's abort reaches every live communicator, and
 * elastic_worker_poll() rebuilds them before the trainer's callback runs.
 */
#include "common/clock.h"
#include "nccl/nccl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define REVOKE_QUIESCE_MS \
    10000 /* how long a revoked communicator may take to settle before shrink */

/* only_faulted: the watchdog's abort, which comes after its report and so may
 * come late: by then the agent's abort may have stopped the faulted build and
 * the trainer may be building the next generation's, which must live. It acts
 * only while the build it found faulted is still the one in the handle (finish
 * clears faulted for a new build). */
static int abort_comm(elastic_nccl_comm *c, const char *why, bool only_faulted)
{
    pthread_mutex_lock(&c->lock);
    if (only_faulted && !(c->faulted && c->state == NCCL__STATE_READY)) {
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    void *nccl = c->nccl;
    bool revoke = false;
    if (c->state == NCCL__STATE_READY && c->api->comm_revoke != NULL &&
        c->api->comm_shrink != NULL) {
        revoke = true; /* the object stays: the next generation may shrink it */
        c->state = NCCL__STATE_REVOKED;
    } else if (c->state == NCCL__STATE_READY || c->state == NCCL__STATE_BUILDING) {
        c->state = c->state == NCCL__STATE_READY ? NCCL__STATE_ABORTED : NCCL__STATE_NONE;
        c->nccl = NULL;
    } else {
        nccl = NULL; /* nothing in flight */
    }
    nccl__watch_clear(c);
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
    if (nccl == NULL) return 0;
    uint64_t started = elastic__now_ms();
    int result = revoke ? c->api->comm_revoke(nccl, 0) : c->api->comm_abort(nccl);
    if (revoke && result != NCCL__SUCCESS && result != NCCL__IN_PROGRESS) {
        ELASTIC_LOG_W("nccl", "ncclCommRevoke failed (%d): aborting instead", result);
        pthread_mutex_lock(&c->lock);
        bool ours = c->nccl == nccl;
        if (ours) {
            c->nccl = NULL;
            c->state = NCCL__STATE_ABORTED;
        }
        pthread_mutex_unlock(&c->lock);
        if (ours) result = c->api->comm_abort(nccl);
    }
    ELASTIC_LOG_I("nccl", "communicator \"%s\" %s in %llu ms (%s)", c->tag,
                  revoke ? "revoked" : "aborted", (unsigned long long)(elastic__now_ms() - started),
                  why);
    return 0;
}

int nccl__abort(elastic_nccl_comm *c, const char *why)
{
    return abort_comm(c, why, false);
}

int nccl__abort_faulted(elastic_nccl_comm *c, const char *why)
{
    return abort_comm(c, why, true);
}

ELASTIC_EXTERN int elastic_nccl_comm_abort(elastic_nccl_comm *comm)
{
    if (comm == NULL) return elastic__fail(ELASTIC_EINVAL, "nccl: comm is NULL");
    return nccl__abort(comm, "elastic_nccl_comm_abort");
}

/* Lets a revoked communicator settle (bounded); shrink with NCCL_SHRINK_ABORT
 * copes with what is left, so the outcome only goes to the log. */
static void wait_quiescent(elastic_nccl_comm *c, void *old, uint64_t deadline_ms)
{
    uint64_t settle = elastic__deadline_ms(REVOKE_QUIESCE_MS);
    if (settle > deadline_ms) settle = deadline_ms;
    int rc = nccl__wait_ready(c, old, settle, "ncclCommRevoke");
    if (rc != 0)
        ELASTIC_LOG_I("nccl", "revoked communicator not quiescent before shrink: %s",
                      elastic_last_error());
}

static int shrink(elastic_nccl_comm *c, void *old, const nccl__plan *plan, uint64_t deadline_ms)
{
    wait_quiescent(c, old, deadline_ms);
    nccl__config config;
    nccl__config_init(&config, c->tag);
    void *fresh = NULL;
    int exclude[ELASTIC__ARRAY_LEN(plan->exclude)];
    memcpy(exclude, plan->exclude, (size_t)plan->exclude_count * sizeof exclude[0]);
    int result =
        c->api->comm_shrink(old, exclude, plan->exclude_count, &fresh, &config, NCCL__SHRINK_ABORT);
    if (result != NCCL__SUCCESS && result != NCCL__IN_PROGRESS) {
        if (fresh != NULL) c->api->comm_abort(fresh);
        return nccl__fail(c->api, old, result, "ncclCommShrink");
    }
    pthread_mutex_lock(&c->lock);
    bool aborted = c->nccl != old; /* the new generation ended meanwhile */
    if (!aborted) {
        c->nccl = fresh;
        c->state = NCCL__STATE_BUILDING;
    }
    pthread_mutex_unlock(&c->lock);
    if (aborted) {
        c->api->comm_abort(fresh);
        return elastic__fail(ELASTIC_ECANCELED, "nccl: shrink of \"%s\" aborted", c->tag);
    }
    int rc = nccl__wait_ready(c, fresh, deadline_ms, "ncclCommShrink");
    if (rc != 0) nccl__abort(c, "shrink failed");
    return rc;
}

/* Takes the old communicator out of the handle; the caller aborts it. */
static void *detach_old(elastic_nccl_comm *c)
{
    pthread_mutex_lock(&c->lock);
    void *old = c->nccl;
    c->nccl = NULL;
    c->state = NCCL__STATE_NONE;
    pthread_mutex_unlock(&c->lock);
    return old;
}

static void finish(elastic_nccl_comm *c, bool shrunk, uint64_t started_ms)
{
    pthread_mutex_lock(&c->lock);
    c->state = NCCL__STATE_READY;
    c->builds++;
    c->rebuilds++;
    c->collectives = 0; /* collectives are numbered per build, as the fault reports say */
    c->faulted = false;
    c->last_method = shrunk ? ELASTIC_NCCL_SHRUNK : ELASTIC_NCCL_CREATED;
    c->last_build_ms = (int)(elastic__now_ms() - started_ms);
    pthread_mutex_unlock(&c->lock);
    nccl__report_build(c, shrunk ? "shrunk" : "created", c->last_build_ms);
}

int nccl__rebuild(elastic_nccl_comm *c)
{
    uint64_t started = elastic__now_ms();
    elastic_worker_info info = { .struct_size = sizeof info };
    elastic_worker_get_info(c->worker, &info);
    pthread_mutex_lock(&c->lock);
    bool current = c->state == NCCL__STATE_READY && c->generation == info.generation;
    bool was_ready = c->state == NCCL__STATE_READY;
    pthread_mutex_unlock(&c->lock);
    if (current) return 0;
    if (was_ready)
        nccl__abort(c, "rebuild for a new generation"); /* nobody aborted it: do it now */
    pthread_mutex_lock(&c->lock);
    bool keeps_old = c->state == NCCL__STATE_REVOKED && c->nccl != NULL;
    int old_rank = keeps_old ? c->rank : -1, old_nranks = c->nranks;
    uint64_t old_generation = c->generation;
    if (c->generation != info.generation) c->builds = 0;
    c->rank = info.rank;
    c->nranks = info.world_size;
    c->generation = info.generation;
    pthread_mutex_unlock(&c->lock);

    uint64_t deadline = elastic__deadline_ms(c->opts.init_timeout_ms);
    nccl__plan *plan = malloc(sizeof *plan);
    if (plan == NULL) return elastic__fail(ELASTIC_ENOMEM, "nccl: plan");
    int rc = nccl__bootstrap_plan(c, &info, old_rank, old_nranks, old_generation,
                                  elastic__ms_left(deadline), plan);
    void *old = NULL;
    if (rc == 0 && plan->shrink) {
        pthread_mutex_lock(&c->lock);
        old = c->nccl;
        pthread_mutex_unlock(&c->lock);
        rc = old != NULL ? shrink(c, old, plan, deadline)
                         : elastic__fail(ELASTIC_ECANCELED,
                                         "nccl: \"%s\" aborted before its shrink", c->tag);
    } else if (rc == 0) {
        old = detach_old(c);
        if (old != NULL) c->api->comm_abort(old);
        old = NULL;
        rc = nccl__create(c, &info, deadline);
    }
    bool shrunk = plan->shrink;
    free(plan);
    if (old != NULL) c->api->comm_abort(old); /* the parent of a shrink, done with either way */
    if (rc != 0) {
        void *left = detach_old(c);
        if (left != NULL && left != old) c->api->comm_abort(left);
        return rc;
    }
    finish(c, shrunk, started);
    return 0;
}

ELASTIC_EXTERN int elastic_nccl_comm_rebuild(elastic_nccl_comm *comm)
{
    elastic__clear_error();
    if (comm == NULL) return elastic__fail(ELASTIC_EINVAL, "nccl: comm is NULL");
    return nccl__rebuild(comm);
}

/* ---- hooks on the worker ---------------------------------------------------------- */

static void on_abort(void *user, uint64_t generation, const char *reason)
{
    (void)generation;
    nccl__abort(user, reason);
}

static void on_reconfigure(void *user, const elastic_worker_info *info)
{
    elastic_nccl_comm *c = user;
    if (!c->opts.rebuild_on_reconfigure) return;
    int rc = nccl__rebuild(c);
    if (rc != 0)
        ELASTIC_LOG_E("nccl", "rebuilding \"%s\" for generation %llu: %s", c->tag,
                      (unsigned long long)info->generation, elastic_last_error());
}

void nccl__hooks_add(elastic_nccl_comm *c)
{
    c->hook = (worker__hook){ .on_abort = on_abort, .on_reconfigure = on_reconfigure, .user = c };
    worker__hook_add(c->worker, &c->hook);
    c->hook_added = true;
}

void nccl__hooks_remove(elastic_nccl_comm *c)
{
    if (c->hook_added) worker__hook_remove(c->worker, &c->hook);
    c->hook_added = false;
}
