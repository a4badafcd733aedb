/*
 * Attaching a worker: read and validate the environment, connect to the job's
 * store (or start a private one when alone), map the heartbeat slot, open the
 * agent's control socket; and the small accessors around the handle.
 */
#include "worker/worker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WORKER__MAX_TIMEOUT_MS (7 * 24 * 3600 * 1000)

static void opts_defaults(elastic_worker_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->store_connect_timeout_ms = 10000;
    opts->store_timeout_ms = 30000;
    opts->reconfigure_timeout_ms = 600000;
    opts->stack_dump_signal = SIGUSR2;
}

ELASTIC_EXTERN int elastic_worker_opts_init(elastic_worker_opts *opts, size_t struct_size)
{
    elastic_worker_opts defaults;
    opts_defaults(&defaults);
    return ELASTIC__STRUCT_INIT(opts, struct_size, &defaults, "elastic_worker_opts");
}

static int check_opts(const elastic_worker_opts *o)
{
    if (o->store_connect_timeout_ms < 0 || o->store_connect_timeout_ms > WORKER__MAX_TIMEOUT_MS ||
        o->store_timeout_ms <= 0 || o->store_timeout_ms > WORKER__MAX_TIMEOUT_MS ||
        o->reconfigure_timeout_ms < 0 || o->reconfigure_timeout_ms > WORKER__MAX_TIMEOUT_MS)
        return elastic__fail(ELASTIC_EINVAL, "worker options: a timeout is out of range");
    int s = o->stack_dump_signal;
    if (s < 0 || s > SIGRTMAX || s == SIGKILL || s == SIGSTOP || s == SIGSEGV || s == SIGBUS ||
        s == SIGFPE || s == SIGILL || s == SIGABRT)
        return elastic__fail(ELASTIC_EINVAL, "worker options: stack_dump_signal %d cannot be used",
                             s);
    return 0;
}

int worker__scope_store(elastic_worker *w, const char *prefix)
{
    if (w->root_store == NULL) return 0;
    elastic_store *scoped = NULL;
    int rc = elastic_store_clone(w->root_store, prefix, &scoped);
    if (rc != 0) return rc;
    elastic_store_close(w->store);
    w->store = scoped;
    return 0;
}

static int connect_store(elastic_worker *w, const char *endpoint)
{
    elastic_store_opts opts;
    elastic_store_opts_init(&opts, sizeof opts);
    opts.connect_timeout_ms = w->opts.store_connect_timeout_ms;
    opts.timeout_ms = w->opts.store_timeout_ms;
    int rc = elastic_store_connect(endpoint, &opts, &w->root_store);
    return rc != 0 ? rc : worker__scope_store(w, w->env.store_prefix);
}

/* Alone, the trainer still gets a store (for code that exchanges ids through
 * it): a private server on loopback, gone with the worker. A library built
 * without the store server (ELASTIC_AGENT=0) has none to start: the worker
 * then has no store, as under plain torchrun. */
static int start_private_store(elastic_worker *w)
{
    if (!elastic_has_feature("store_server")) return 0;
    elastic_store_server_opts opts;
    elastic_store_server_opts_init(&opts, sizeof opts);
    opts.host = "127.0.0.1";
    int port = 0;
    int rc = elastic_store_server_start(&opts, &w->private_server);
    if (rc == 0) rc = elastic_store_server_get_port(w->private_server, &port);
    if (rc != 0) return rc;
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    return connect_store(w, endpoint);
}

static int attach_heartbeat(elastic_worker *w)
{
    if (w->env.heartbeat_slot < 0) return 0;
    channel__hb_slot *slot = NULL;
    int rc = channel__hb_attach(w->env.heartbeat_shm, (unsigned)w->env.heartbeat_slot,
                                &w->hb_region, &slot);
    if (rc != 0) return rc;
    worker__heartbeat_bind(w, slot);
    w->stack_signal = worker__stackdump_install(w->opts.stack_dump_signal, &slot->stack_dumps);
    __atomic_store_n(&slot->pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
    __atomic_store_n(&slot->stack_signal, w->stack_signal, __ATOMIC_RELEASE);
    return 0;
}

static int sink_send(void *user, int type, const char *payload)
{
    return worker__control_send(user, type, payload);
}

static int attach(elastic_worker *w)
{
    /* A warm spare holds no rank until promoted: attaching now would take
     * another worker's identity (or none). The agent sees the spare exit
     * before it parked and stops starting spares for this trainer. */
    if (getenv(CHANNEL__ENV_SPARE) != NULL)
        return elastic__fail(ELASTIC_EINVAL,
                             "this process was started as a warm spare (%s is set): call "
                             "elastic_worker_park() before elastic_worker_init()",
                             CHANNEL__ENV_SPARE);
    int rc = worker__env_parse(worker__getenv, NULL, &w->env);
    if (rc != 0) return rc;
    if (w->env.mode == WORKER__ALONE) return start_private_store(w);
    if (w->env.mode == WORKER__TORCHRUN) return 0;
    rc = connect_store(w, w->env.store_endpoint);
    if (rc == 0) rc = attach_heartbeat(w);
    if (rc == 0 && w->env.agent_socket[0] != '\0') rc = worker__control_connect(w);
    /* Library modules below the worker (the checkpoint store's divergence
     * check) report to the agent through this handle's socket. */
    if (rc == 0 && w->control_fd >= 0) channel__sink_set(sink_send, w);
    return rc;
}

static int init_sync(elastic_worker *w)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int err = pthread_cond_init(&w->changed_cond, &attr);
    pthread_condattr_destroy(&attr);
    if (err == 0) err = pthread_mutex_init(&w->lock, NULL);
    if (err == 0) err = pthread_mutex_init(&w->write_lock, NULL);
    if (err == 0) err = pthread_mutex_init(&w->hooks_lock, NULL);
    return err == 0 ? 0 : elastic__fail(ELASTIC_ESYS, "worker locks: %s", strerror(err));
}

ELASTIC_EXTERN int elastic_worker_init(const elastic_worker_opts *opts, elastic_worker **worker)
{
    elastic__clear_error();
    if (worker == NULL) return elastic__fail(ELASTIC_EINVAL, "worker is NULL");
    *worker = NULL;
    elastic_worker *w = calloc(1, sizeof *w);
    if (w == NULL) return elastic__fail(ELASTIC_ENOMEM, "worker");
    w->control_fd = -1;
    opts_defaults(&w->opts);
    int rc = ELASTIC__STRUCT_READ(&w->opts, opts, "elastic_worker_opts");
    if (rc == 0) rc = check_opts(&w->opts);
    if (rc == 0) rc = init_sync(w);
    if (rc != 0) {
        free(w);
        return rc;
    }
    worker__heartbeat_bind(w, &w->local_slot);
    rc = attach(w);
    if (rc != 0) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", elastic_last_error());
        elastic_worker_close(w);
        return elastic__fail(rc, "%s", detail);
    }
    ELASTIC_LOG_I("worker", "rank %d of %d (local %d of %d), generation %llu%s", w->env.info.rank,
                  w->env.info.world_size, w->env.info.local_rank, w->env.info.local_world_size,
                  (unsigned long long)w->env.info.generation,
                  w->env.info.attached ? ", attached to the agent" : "");
    *worker = w;
    return 0;
}

ELASTIC_EXTERN int elastic_worker_get_info(elastic_worker *w, elastic_worker_info *info)
{
    if (w == NULL || info == NULL) return elastic__fail(ELASTIC_EINVAL, "worker or info is NULL");
    int rc = elastic__struct_size_check(info->struct_size, "elastic_worker_info");
    if (rc != 0) return rc;
    pthread_mutex_lock(&w->lock);
    elastic_worker_info current = w->env.info;
    pthread_mutex_unlock(&w->lock);
    return ELASTIC__STRUCT_WRITE(info, &current, "elastic_worker_info");
}

ELASTIC_EXTERN int elastic_worker_get_store(elastic_worker *w, elastic_store **store)
{
    if (store != NULL) *store = NULL;
    if (w == NULL || store == NULL)
        return elastic__fail(ELASTIC_EINVAL, "worker or store pointer is NULL");
    if (w->store == NULL)
        return elastic__fail(ELASTIC_ENOTFOUND,
                             "this worker has no store (plain torchrun, or alone in a library "
                             "built without the store server)");
    *store = w->store;
    return 0;
}

ELASTIC_EXTERN int elastic_worker_on_abort(elastic_worker *w, elastic_worker_abort_fn fn,
                                           void *user)
{
    if (w == NULL) return elastic__fail(ELASTIC_EINVAL, "worker is NULL");
    pthread_mutex_lock(&w->lock);
    w->abort_fn = fn;
    w->abort_user = user;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

ELASTIC_EXTERN int elastic_worker_on_reconfigure(elastic_worker *w,
                                                 elastic_worker_reconfigure_fn fn, void *user)
{
    if (w == NULL) return elastic__fail(ELASTIC_EINVAL, "worker is NULL");
    pthread_mutex_lock(&w->lock);
    w->reconfigure_fn = fn;
    w->reconfigure_user = user;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

ELASTIC_EXTERN void elastic_worker_close(elastic_worker *w)
{
    if (w == NULL) return;
    channel__sink_clear(w);
    worker__control_shutdown(w);
    if (w->hb_region != NULL) {
        __atomic_store_n(&w->slot->stack_signal, 0, __ATOMIC_RELEASE);
        if (w->stack_signal != 0) worker__stackdump_uninstall(&w->slot->stack_dumps);
        channel__hb_close(w->hb_region, false);
    }
    elastic_store_close(w->store);
    elastic_store_close(w->root_store);
    elastic_store_server_close(w->private_server);
    pthread_cond_destroy(&w->changed_cond);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->write_lock);
    pthread_mutex_destroy(&w->hooks_lock);
    free(w);
}
