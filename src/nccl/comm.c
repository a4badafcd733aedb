/*
 * The communicator handle: options, creation through the store (unique id,
 * then NCCL's non-blocking init polled against a deadline), accessors and
 * teardown. Recovery lives in rebuild.c, the watchdog in watchdog.c.
 */
#include "common/clock.h"
#include "nccl/nccl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define NCCL__MAX_TIMEOUT_MS (24 * 3600 * 1000)
#define NCCL__POLL_MS        2 /* NCCL's non-blocking calls have no completion callback */

ELASTIC_EXTERN int elastic_nccl_opts_init(elastic_nccl_opts *opts, size_t struct_size)
{
    if (opts == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_nccl_opts is NULL");
    elastic_nccl_opts defaults = { .struct_size = sizeof defaults,
                                   .tag = "default",
                                   .device = -1,
                                   .init_timeout_ms = 120000,
                                   .collective_timeout_ms = 60000,
                                   .watchdog_interval_ms = 100,
                                   .rebuild_on_reconfigure = 1 };
    return ELASTIC__STRUCT_INIT(opts, struct_size, &defaults, "elastic_nccl_opts");
}

static int check_opts(const elastic_nccl_opts *o)
{
    const char *tag = o->tag;
    if (tag == NULL || *tag == '\0' || strlen(tag) > NCCL__TAG_MAX ||
        strspn(tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
            strlen(tag))
        return elastic__fail(ELASTIC_EINVAL, "nccl: tag must be 1-%d characters of [A-Za-z0-9_.-]",
                             NCCL__TAG_MAX);
    if (o->init_timeout_ms == 0 || o->init_timeout_ms > NCCL__MAX_TIMEOUT_MS ||
        o->collective_timeout_ms > NCCL__MAX_TIMEOUT_MS || o->watchdog_interval_ms <= 0 ||
        o->watchdog_interval_ms > 60000 || o->device < -1)
        return elastic__fail(
            ELASTIC_EINVAL, "nccl: a timeout, the watchdog interval or the device is out of range");
    return 0;
}

/* The device this rank drives, made current on the calling thread. */
static int select_device(const nccl__api *api, int wanted, int local_rank, int *device)
{
    int count = 0;
    int err = api->cuda_get_device_count(&count);
    if (err != CUDA__SUCCESS || count <= 0)
        return elastic__fail(ELASTIC_EUNSUPPORTED,
                             "nccl: no CUDA device here (cudaGetDeviceCount: %s)",
                             err != CUDA__SUCCESS ? api->cuda_get_error_string(err) : "0 devices");
    *device = wanted >= 0 ? wanted : local_rank;
    if (*device >= count)
        return elastic__fail(ELASTIC_EINVAL,
                             "nccl: device %d, but this machine has %d (local rank %d)", *device,
                             count, local_rank);
    err = api->cuda_set_device(*device);
    if (err != CUDA__SUCCESS)
        return elastic__fail(ELASTIC_EIO, "nccl: cudaSetDevice(%d): %s", *device,
                             api->cuda_get_error_string(err));
    return 0;
}

int nccl__wait_ready(elastic_nccl_comm *c, void *nccl, uint64_t deadline_ms, const char *what)
{
    pthread_mutex_lock(&c->lock);
    for (;;) {
        if (c->nccl != nccl) {
            pthread_mutex_unlock(&c->lock);
            return elastic__fail(ELASTIC_ECANCELED, "nccl: %s of \"%s\" aborted", what, c->tag);
        }
        int async = NCCL__SUCCESS;
        int result = c->api->comm_get_async_error(nccl, &async);
        if (result == NCCL__SUCCESS && async == NCCL__SUCCESS) break;
        if (result != NCCL__SUCCESS || async != NCCL__IN_PROGRESS) {
            pthread_mutex_unlock(&c->lock);
            return nccl__fail(c->api, nccl, result != NCCL__SUCCESS ? result : async, what);
        }
        if (elastic__ms_left(deadline_ms) <= 0) {
            pthread_mutex_unlock(&c->lock);
            return elastic__fail(ELASTIC_ETIMEDOUT,
                                 "nccl: %s of \"%s\" (rank %d of %d) not done in time", what,
                                 c->tag, c->rank, c->nranks);
        }
        struct timespec at = elastic__timespec_at(elastic__now_ms() + NCCL__POLL_MS);
        pthread_cond_timedwait(&c->wake, &c->lock, &at); /* an abort wakes us at once */
    }
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* Takes the communicator out of the handle and aborts it (a failed build). */
static void drop_nccl(elastic_nccl_comm *c, void *nccl)
{
    pthread_mutex_lock(&c->lock);
    bool ours = c->nccl == nccl;
    if (ours) {
        c->nccl = NULL;
        c->state = NCCL__STATE_NONE;
    }
    pthread_mutex_unlock(&c->lock);
    if (ours && nccl != NULL) c->api->comm_abort(nccl);
}

int nccl__create(elastic_nccl_comm *c, const elastic_worker_info *info, uint64_t deadline_ms)
{
    nccl__unique_id id;
    elastic_store *store = NULL;
    elastic_worker_get_store(c->worker, &store);
    int rc = nccl__bootstrap_unique_id(c->api, store, c->tag, c->builds, info->rank,
                                       elastic__ms_left(deadline_ms), &id);
    if (rc != 0) return rc;
    nccl__config config;
    nccl__config_init(&config, c->tag);
    void *nccl = NULL;
    int result = c->api->comm_init_rank_config(&nccl, info->world_size, id, info->rank, &config);
    if (result != NCCL__SUCCESS && result != NCCL__IN_PROGRESS) {
        if (nccl != NULL) c->api->comm_abort(nccl);
        return nccl__fail(c->api, NULL, result, "ncclCommInitRankConfig");
    }
    pthread_mutex_lock(&c->lock);
    c->nccl = nccl;
    c->state = NCCL__STATE_BUILDING;
    pthread_mutex_unlock(&c->lock);
    rc = nccl__wait_ready(c, nccl, deadline_ms, "ncclCommInitRankConfig");
    if (rc != 0) drop_nccl(c, nccl);
    return rc;
}

void nccl__report_build(elastic_nccl_comm *c, const char *method, int ms)
{
    ELASTIC_LOG_I("nccl", "communicator \"%s\" %s in %d ms: rank %d of %d, generation %" PRIu64,
                  c->tag, method, ms, c->rank, c->nranks, c->generation);
    char payload[256];
    snprintf(payload, sizeof payload,
             "NAME=nccl_comm_built\nTAG=%s\nMETHOD=%s\nMS=%d\nRANK=%d\nNRANKS=%d\nREBUILDS=%"
             "d\nGENERATION=%" PRIu64 "\n",
             c->tag, method, ms, c->rank, c->nranks, c->rebuilds, c->generation);
    if (c->worker->control_fd >= 0 &&
        worker__control_send(c->worker, CHANNEL__MSG_EVENT, payload) != 0)
        ELASTIC_LOG_W("nccl", "build event not sent to the agent: %s", elastic_last_error());
}

static int comm_alloc(elastic_worker *w, const elastic_nccl_opts *opts, elastic_nccl_comm **out)
{
    elastic_nccl_comm *c = calloc(1, sizeof *c);
    if (c == NULL) return elastic__fail(ELASTIC_ENOMEM, "nccl: communicator");
    c->worker = w;
    int rc = elastic_nccl_opts_init(&c->opts, sizeof c->opts);
    if (rc == 0) rc = ELASTIC__STRUCT_READ(&c->opts, opts, "elastic_nccl_opts");
    if (rc == 0) rc = check_opts(&c->opts);
    if (rc == 0) {
        snprintf(c->tag, sizeof c->tag, "%s", c->opts.tag);
        c->opts.tag = c->tag;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0 &&
        (pthread_mutex_init(&c->lock, NULL) != 0 || pthread_cond_init(&c->wake, &attr) != 0))
        rc = elastic__fail(ELASTIC_ESYS, "nccl: locks");
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void comm_free(elastic_nccl_comm *c)
{
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

ELASTIC_EXTERN int elastic_nccl_comm_init(elastic_worker *w, const elastic_nccl_opts *opts,
                                          elastic_nccl_comm **comm)
{
    elastic__clear_error();
    if (w == NULL || comm == NULL)
        return elastic__fail(ELASTIC_EINVAL, "nccl: worker or comm is NULL");
    *comm = NULL;
    uint64_t started = elastic__now_ms();
    elastic_nccl_comm *c = NULL;
    int rc = comm_alloc(w, opts, &c);
    if (rc != 0) return rc;
    elastic_worker_info info = { .struct_size = sizeof info };
    elastic_worker_get_info(w, &info);
    rc = nccl__load(&c->api);
    if (rc == 0) rc = select_device(c->api, c->opts.device, info.local_rank, &c->device);
    uint64_t deadline = elastic__deadline_ms(c->opts.init_timeout_ms);
    nccl__plan plan;
    c->rank = info.rank;
    c->nranks = info.world_size;
    c->generation = info.generation;
    /* A new member's record says "nothing to shrink", so everyone creates. */
    if (rc == 0) rc = nccl__bootstrap_plan(c, &info, -1, 0, 0, elastic__ms_left(deadline), &plan);
    if (rc == 0) rc = nccl__create(c, &info, deadline);
    if (rc == 0) rc = nccl__watchdog_start(c);
    if (rc != 0) {
        drop_nccl(c, c->nccl);
        comm_free(c);
        return rc;
    }
    pthread_mutex_lock(&c->lock);
    c->state = NCCL__STATE_READY;
    c->builds++;
    c->last_method = ELASTIC_NCCL_CREATED;
    c->last_build_ms = (int)(elastic__now_ms() - started);
    pthread_mutex_unlock(&c->lock);
    nccl__hooks_add(c);
    nccl__report_build(c, "created", c->last_build_ms);
    *comm = c;
    return 0;
}

ELASTIC_EXTERN void *elastic_nccl_comm_get(elastic_nccl_comm *comm)
{
    if (comm == NULL) return NULL;
    pthread_mutex_lock(&comm->lock);
    void *nccl = comm->state == NCCL__STATE_READY ? comm->nccl : NULL;
    pthread_mutex_unlock(&comm->lock);
    return nccl;
}

ELASTIC_EXTERN int elastic_nccl_comm_check(elastic_nccl_comm *comm)
{
    if (comm == NULL) return elastic__fail(ELASTIC_EINVAL, "nccl: comm is NULL");
    pthread_mutex_lock(&comm->lock);
    bool ready = comm->state == NCCL__STATE_READY;
    pthread_mutex_unlock(&comm->lock);
    return ready ? 0
                 : elastic__fail(ELASTIC_ERECONFIGURE, "nccl: communicator \"%s\" was aborted",
                                 comm->tag);
}

ELASTIC_EXTERN int elastic_nccl_comm_get_info(elastic_nccl_comm *comm, elastic_nccl_info *info)
{
    if (comm == NULL || info == NULL)
        return elastic__fail(ELASTIC_EINVAL, "nccl: comm or info is NULL");
    elastic_nccl_info out = { .struct_size = sizeof out };
    pthread_mutex_lock(&comm->lock);
    out.rank = comm->rank;
    out.nranks = comm->nranks;
    out.device = comm->device;
    out.nccl_version = comm->api->version;
    out.generation = comm->generation;
    out.collectives = comm->collectives;
    out.aborted = comm->state != NCCL__STATE_READY;
    out.rebuilds = comm->rebuilds;
    out.last_method = comm->last_method;
    out.last_build_ms = comm->last_build_ms;
    pthread_mutex_unlock(&comm->lock);
    return ELASTIC__STRUCT_WRITE(info, &out, "elastic_nccl_info");
}

ELASTIC_EXTERN void elastic_nccl_comm_close(elastic_nccl_comm *comm)
{
    if (comm == NULL) return;
    nccl__hooks_remove(comm);
    nccl__watchdog_stop(comm);
    pthread_mutex_lock(&comm->lock);
    void *nccl = comm->nccl;
    nccl__state state = comm->state;
    comm->nccl = NULL;
    comm->state = NCCL__STATE_NONE;
    pthread_mutex_unlock(&comm->lock);
    /* A healthy communicator is destroyed; a broken one can only be aborted. */
    if (nccl != NULL && state == NCCL__STATE_READY)
        comm->api->comm_destroy(nccl);
    else if (nccl != NULL)
        comm->api->comm_abort(nccl);
    comm_free(comm);
}

/* 1.0.0's name, against docs/ABI.md's rule that releasing is `_close`; kept
 * for callers built against it. */
ELASTIC_EXTERN void elastic_nccl_comm_destroy(elastic_nccl_comm *comm)
{
    elastic_nccl_comm_close(comm);
}
