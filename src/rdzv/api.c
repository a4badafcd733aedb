/*
 * The rendezvous handle: options, open/free, and the calls a member makes
 * during a generation (end it, watch for its end, finish, leave, end the job).
 * Joining lives in join.c, the watcher thread in ring_monitor.c.
 */
#include "rdzv/rdzv.h"

#include "common/names.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

static void opts_defaults(elastic_rdzv_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->min_nodes = 1;
    opts->max_nodes = 1;
    opts->join_timeout_ms = 600000;
    opts->last_call_timeout_ms = 30000;
    opts->keepalive_interval_ms = 500;
    opts->keepalive_timeout_ms = 2000;
    opts->max_restarts = 0;
    opts->local_world_size = 1;
    opts->backend = ELASTIC_RDZV_BACKEND_STORE;
    opts->etcd_timeout_ms = 5000;
    opts->preferred_rank = -1;
    opts->max_infra_restarts = 20;
}

ELASTIC_EXTERN int elastic_rdzv_opts_init(elastic_rdzv_opts *opts, size_t struct_size)
{
    elastic_rdzv_opts defaults;
    opts_defaults(&defaults);
    return ELASTIC__STRUCT_INIT(opts, struct_size, &defaults, "elastic_rdzv_opts");
}

static int check_opts(const elastic_rdzv_opts *o)
{
    if (elastic__check_run_id(o->run_id, "rdzv") != 0) return ELASTIC_EINVAL;
    if (o->min_nodes < 1 || o->max_nodes < o->min_nodes || o->max_nodes > RDZV__MAX_NODES)
        return elastic__fail(ELASTIC_EINVAL,
                             "rdzv: need 1 <= min_nodes (%d) <= max_nodes (%d) <= %d", o->min_nodes,
                             o->max_nodes, RDZV__MAX_NODES);
    if (o->join_timeout_ms < 1 || o->last_call_timeout_ms < 0)
        return elastic__fail(ELASTIC_EINVAL,
                             "rdzv: join_timeout_ms must be > 0 and last_call_timeout_ms >= 0");
    if (o->keepalive_interval_ms < 100 || o->keepalive_timeout_ms < 100 ||
        o->keepalive_timeout_ms < o->keepalive_interval_ms)
        return elastic__fail(
            ELASTIC_EINVAL,
            "rdzv: keepalive_interval_ms (%d) and keepalive_timeout_ms (%d) must be >= 100, "
            "the timeout no shorter than the interval",
            o->keepalive_interval_ms, o->keepalive_timeout_ms);
    if (o->backend != ELASTIC_RDZV_BACKEND_STORE && o->backend != ELASTIC_RDZV_BACKEND_ETCD)
        return elastic__fail(ELASTIC_EINVAL, "rdzv: unknown backend %d", o->backend);
    if (o->backend == ELASTIC_RDZV_BACKEND_ETCD && !ELASTIC_WITH_ETCD)
        return elastic__fail(ELASTIC_EUNSUPPORTED,
                             "rdzv: built without etcd (ELASTIC_ETCD=0): this library has no "
                             "etcd-v3 backend; use the store backend (c10d) or rebuild with etcd");
    if (o->backend == ELASTIC_RDZV_BACKEND_ETCD &&
        (o->etcd_endpoints == NULL || o->etcd_endpoints[0] == '\0'))
        return elastic__fail(
            ELASTIC_EINVAL,
            "rdzv: the etcd backend needs etcd_endpoints (host:port[,host:port...])");
    if (o->backend == ELASTIC_RDZV_BACKEND_ETCD &&
        o->etcd_timeout_ms <= 0) /* every etcd request has a deadline */
        return elastic__fail(ELASTIC_EINVAL, "rdzv: etcd_timeout_ms must be > 0, not %d",
                             o->etcd_timeout_ms);
    if (o->max_infra_restarts < 0)
        return elastic__fail(ELASTIC_EINVAL, "rdzv: max_infra_restarts must be >= 0, not %d",
                             o->max_infra_restarts);
    if (o->max_restarts < 0 || o->local_world_size < 1 ||
        o->local_world_size > RDZV__MAX_LOCAL_WORLD)
        return elastic__fail(ELASTIC_EINVAL,
                             "rdzv: max_restarts must be >= 0, local_world_size 1..%d",
                             RDZV__MAX_LOCAL_WORLD);
    if (o->node_addr != NULL && !rdzv__valid_token(o->node_addr, RDZV__MAX_ADDR))
        return elastic__fail(ELASTIC_EINVAL,
                             "rdzv: node_addr must be 1..255 printable characters without spaces");
    if (o->node_id != NULL && !elastic__host_name_ok(o->node_id, RDZV__MAX_ID - 1))
        return elastic__fail(ELASTIC_EINVAL,
                             "rdzv: node_id \"%.130s\" could not be a host name: it must be "
                             "1..127 characters of [A-Za-z0-9._-] starting with a letter or digit",
                             o->node_id);
    return 0;
}

/* node_addr defaults to the host name; node_id to "<host>-<pid>-<random>". */
static int fill_identity(elastic_rdzv *r, const elastic_rdzv_opts *o)
{
    char host[RDZV__MAX_ADDR] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0 || !elastic__host_name_ok(host, 64))
        snprintf(host, sizeof host, "localhost");
    snprintf(r->node_addr, sizeof r->node_addr, "%s", o->node_addr != NULL ? o->node_addr : host);
    if (o->node_id != NULL) {
        snprintf(r->node_id, sizeof r->node_id, "%s", o->node_id);
        return 0;
    }
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
        nonce = (uint32_t)elastic__now_ns();
    snprintf(r->node_id, sizeof r->node_id, "%.64s-%d-%08x", host, (int)getpid(), nonce);
    return 0;
}

static int init_sync(elastic_rdzv *r)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return elastic__fail(ELASTIC_ESYS, "rdzv: condattr");
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&r->changed, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "rdzv: cond init");
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        pthread_cond_destroy(&r->changed);
        return elastic__fail(ELASTIC_ESYS, "rdzv: mutex init");
    }
    return 0;
}

/* The store answers every node's keep-alives in one loop: at one per
 * interval, N nodes cost it N / interval messages a second, and past what
 * it can take (this machine's store: ~10k messages a second on a third of a
 * core) their answers come later than the timeout and every node fences
 * itself. So the interval grows with max_nodes to keep the job's keep-alives
 * near RDZV__KEEPALIVES_PER_S, and the timeout (the lease TTL and fence
 * bound) in proportion. At the defaults nothing changes up to 2,000 nodes;
 * 16,384 nodes renew every 4.1 s and lapse after 16.4 s. A killed node's
 * connection closes and is noticed at once at any size; only a frozen or cut
 * off node takes the longer timeout. */
void rdzv__scale_liveness(int max_nodes, int *interval_ms, int *timeout_ms)
{
    int64_t floor_ms = (int64_t)max_nodes * 1000 / RDZV__KEEPALIVES_PER_S;
    if (floor_ms <= *interval_ms) return;
    int64_t timeout = (int64_t)*timeout_ms * floor_ms / *interval_ms;
    *interval_ms = (int)floor_ms;
    *timeout_ms = timeout < INT32_MAX ? (int)timeout : INT32_MAX;
}

ELASTIC_EXTERN int elastic_rdzv_open(const elastic_rdzv_opts *opts, elastic_rdzv **out)
{
    elastic__clear_error();
    if (out == NULL) return elastic__fail(ELASTIC_EINVAL, "rdzv_open: NULL handle pointer");
    *out = NULL;
    elastic_rdzv_opts o;
    opts_defaults(&o);
    int rc = ELASTIC__STRUCT_READ(&o, opts, "elastic_rdzv_opts");
    if (rc == 0) rc = check_opts(&o);
    if (rc != 0) return rc;
    elastic_rdzv *r = calloc(1, sizeof *r);
    if (r == NULL) return elastic__fail(ELASTIC_ENOMEM, "rdzv: out of memory");
    snprintf(r->run_id, sizeof r->run_id, "%s", o.run_id);
    r->min_nodes = o.min_nodes;
    r->max_nodes = o.max_nodes;
    r->join_timeout_ms = o.join_timeout_ms;
    r->last_call_timeout_ms = o.last_call_timeout_ms;
    r->keepalive_interval_ms = o.keepalive_interval_ms;
    r->keepalive_timeout_ms = o.keepalive_timeout_ms;
    rdzv__scale_liveness(r->max_nodes, &r->keepalive_interval_ms, &r->keepalive_timeout_ms);
    r->watch_slice_ms = RDZV__WATCH_SLICE_MS;
    r->liveness_scaled = r->keepalive_interval_ms != o.keepalive_interval_ms;
    if (r->liveness_scaled && r->keepalive_timeout_ms > RDZV__WATCH_SLICE_MS / 2)
        r->watch_slice_ms =
            r->keepalive_timeout_ms < INT32_MAX / 2 ? 2 * r->keepalive_timeout_ms : INT32_MAX;
    if (r->keepalive_interval_ms != o.keepalive_interval_ms)
        ELASTIC_LOG_I("rdzv",
                      "run %s: %d nodes: keep-alive every %d ms, lease timeout %d ms (asked: %d / "
                      "%d ms; the store's keep-alive load stays bounded)",
                      o.run_id, r->max_nodes, r->keepalive_interval_ms, r->keepalive_timeout_ms,
                      o.keepalive_interval_ms, o.keepalive_timeout_ms);
    r->max_restarts = o.max_restarts;
    r->max_infra_restarts = o.max_infra_restarts;
    r->local_world_size = o.local_world_size;
    r->preferred_rank = o.preferred_rank;
    fill_identity(r, &o);
    rc = init_sync(r);
    if (rc != 0) {
        free(r);
        return rc;
    }
    char prefix[RDZV__MAX_ID + 8];
    snprintf(prefix, sizeof prefix, "rdzv/%s/", r->run_id);
    if (o.backend == ELASTIC_RDZV_BACKEND_ETCD) {
        rdzv__etcd_conf conf = { .endpoints = o.etcd_endpoints,
                                 .prefix = o.etcd_prefix,
                                 .ca_file = o.etcd_ca_file,
                                 .cert_file = o.etcd_cert_file,
                                 .key_file = o.etcd_key_file,
                                 .user = o.etcd_user,
                                 .password = o.etcd_password,
                                 .timeout_ms = o.etcd_timeout_ms };
#if ELASTIC_WITH_ETCD
        rc = rdzv__backend_etcd_open(&conf, r->run_id, &r->backend);
#else
        (void)conf; /* check_opts refused it, saying why */
        rc = ELASTIC_EUNSUPPORTED;
#endif
    } else {
        rc = rdzv__backend_store_open(o.store, o.endpoint, o.token, prefix, &r->backend);
    }
    if (rc == 0) {
        r->backend->on_lease_lost = rdzv__on_lease_lost;
        r->backend->lease_lost_user = r;
        rc = r->backend->ops->lease_grant(r->backend, r->keepalive_timeout_ms,
                                          r->keepalive_interval_ms, &r->lease);
        r->have_lease = rc == 0;
    }
    if (rc == 0) rc = rdzv__monitor_start(r);
    if (rc == 0) rc = rdzv__guard_start(r);
    if (rc != 0) {
        elastic_rdzv_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

ELASTIC_EXTERN void elastic_rdzv_free(elastic_rdzv *r)
{
    if (r == NULL) return;
    rdzv__monitor_stop(r);
    rdzv__guard_stop(r);
    if (r->backend != NULL) {
        if (r->have_lease) (void)r->backend->ops->lease_revoke(r->backend, r->lease);
        r->backend->ops->close(r->backend);
    }
    pthread_cond_destroy(&r->changed);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* The generation this node is a member of, or ELASTIC_ESTATE. */
static int current_generation(elastic_rdzv *r, uint64_t *generation, int *slot, int *size,
                              bool *running)
{
    pthread_mutex_lock(&r->lock);
    int phase = r->phase;
    *generation = r->generation;
    *slot = r->slot;
    *size = r->group_world_size;
    pthread_mutex_unlock(&r->lock);
    *running = phase == RDZV__RUNNING;
    if (phase == RDZV__RUNNING || phase == RDZV__ENDED) return 0;
    return elastic__fail(ELASTIC_ESTATE, "rdzv: run %s: this node is in no generation", r->run_id);
}

ELASTIC_EXTERN int elastic_rdzv_end_generation(elastic_rdzv *r, const elastic_rdzv_cause *cause)
{
    elastic__clear_error();
    if (r == NULL || cause == NULL)
        return elastic__fail(ELASTIC_EINVAL, "rdzv_end_generation: NULL argument");
    elastic_rdzv_cause recorded;
    rdzv__fill_cause(r, &recorded, 0, 0, "", "");
    recorded.time_ms = 0;
    int rc = ELASTIC__STRUCT_READ(&recorded, cause, "elastic_rdzv_cause");
    if (rc != 0) return rc;
    recorded.struct_size = sizeof recorded;
    if (recorded.kind < ELASTIC_RDZV_FAILURE || recorded.kind > ELASTIC_RDZV_JOB_ENDED)
        return elastic__fail(ELASTIC_EINVAL, "rdzv_end_generation: unknown cause kind %d",
                             recorded.kind);
    uint64_t generation;
    int slot, size;
    bool running, won;
    rc = current_generation(r, &generation, &slot, &size, &running);
    if (rc != 0) return rc;
    if (recorded.node_id[0] == '\0')
        snprintf(recorded.node_id, sizeof recorded.node_id, "%s", r->node_id);
    if (recorded.time_ms == 0) recorded.time_ms = elastic__wall_ms();
    return rdzv__end(r, generation, &recorded, &won);
}

ELASTIC_EXTERN int elastic_rdzv_watch(elastic_rdzv *r, int timeout_ms, elastic_rdzv_cause *cause)
{
    elastic__clear_error();
    if (r == NULL || cause == NULL)
        return elastic__fail(ELASTIC_EINVAL, "rdzv_watch: NULL argument");
    int rc = elastic__struct_size_check(cause->struct_size, "elastic_rdzv_cause");
    if (rc != 0) return rc;
    /* The handle has no default timeout: ELASTIC_TIMEOUT_DEFAULT, like any negative, has no limit. */
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    elastic_rdzv_cause ended;
    pthread_mutex_lock(&r->lock);
    while (r->phase == RDZV__RUNNING && elastic__now_ms() < deadline) {
        struct timespec at = elastic__timespec_at(deadline);
        pthread_cond_timedwait(&r->changed, &r->lock, &at);
    }
    int phase = r->phase;
    if (phase == RDZV__ENDED) ended = r->cause;
    pthread_mutex_unlock(&r->lock);
    if (phase == RDZV__ENDED) return ELASTIC__STRUCT_WRITE(cause, &ended, "elastic_rdzv_cause");
    if (phase == RDZV__RUNNING)
        return elastic__fail(ELASTIC_ETIMEDOUT, "rdzv_watch: generation still running");
    return elastic__fail(ELASTIC_ESTATE, "rdzv_watch: this node is in no generation");
}

ELASTIC_EXTERN int elastic_rdzv_on_change(elastic_rdzv *r, elastic_rdzv_change_fn fn, void *user)
{
    elastic__clear_error();
    if (r == NULL) return elastic__fail(ELASTIC_EINVAL, "rdzv_on_change: NULL handle");
    pthread_mutex_lock(&r->lock);
    r->on_change = fn;
    r->on_change_user = user;
    pthread_mutex_unlock(&r->lock);
    return 0;
}

ELASTIC_EXTERN int elastic_rdzv_first_failure(elastic_rdzv *r, elastic_rdzv_cause *cause)
{
    elastic__clear_error();
    if (r == NULL || cause == NULL)
        return elastic__fail(ELASTIC_EINVAL, "rdzv_first_failure: NULL argument");
    int rc = elastic__struct_size_check(cause->struct_size, "elastic_rdzv_cause");
    if (rc != 0) return rc;
    void *value = NULL;
    size_t len = 0;
    rc = r->backend->ops->get(r->backend, "first_failure", &value, &len);
    if (rc == ELASTIC_ENOTFOUND)
        return elastic__fail(rc, "rdzv: run %s recorded no failure", r->run_id);
    elastic_rdzv_cause decoded;
    if (rc == 0) rc = rdzv__cause_decode(value, len, &decoded);
    elastic_free(value);
    if (rc == 0) rc = ELASTIC__STRUCT_WRITE(cause, &decoded, "elastic_rdzv_cause");
    return rc;
}

static void depart(elastic_rdzv *r, uint64_t generation, int slot)
{
    char key[64];
    rdzv__monitor_unwatch(r);
    rdzv__key_slot(key, sizeof key, generation, slot, "rec");
    (void)r->backend->ops->del(r->backend, key);
    pthread_mutex_lock(&r->lock);
    r->phase = RDZV__DEPARTED;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
}

ELASTIC_EXTERN int elastic_rdzv_finish(elastic_rdzv *r)
{
    elastic__clear_error();
    if (r == NULL) return elastic__fail(ELASTIC_EINVAL, "rdzv_finish: NULL handle");
    uint64_t generation;
    int slot, size;
    bool running;
    int rc = current_generation(r, &generation, &slot, &size, &running);
    if (rc != 0) return rc;
    /* Order matters: counted as gone and marked done before the record goes,
     * so the neighbour's monitor skips us instead of reporting a loss. */
    char key[64];
    int64_t gone = 0, finished = 0;
    rdzv__key_round(key, sizeof key, generation, "gone");
    rc = r->backend->ops->add(r->backend, key, 1, &gone);
    rdzv__key_round(key, sizeof key, generation, "finished");
    if (rc == 0) rc = r->backend->ops->add(r->backend, key, 1, &finished);
    rdzv__key_slot(key, sizeof key, generation, slot, "done");
    if (rc == 0) rc = r->backend->ops->set(r->backend, key, "1", 1);
    if (rc != 0) return rc;
    depart(r, generation, slot);
    if (finished < size) return 0;
    /* Every member succeeded: the job is done; spares need not wait. */
    elastic_rdzv_cause cause;
    rdzv__fill_cause(r, &cause, ELASTIC_RDZV_JOB_ENDED, generation, NULL, RDZV__FINISHED_REASON);
    return rdzv__shut_job(r, &cause, false);
}

ELASTIC_EXTERN int elastic_rdzv_leave(elastic_rdzv *r)
{
    elastic__clear_error();
    if (r == NULL) return elastic__fail(ELASTIC_EINVAL, "rdzv_leave: NULL handle");
    uint64_t generation;
    int slot, size;
    bool running, won;
    int rc = current_generation(r, &generation, &slot, &size, &running);
    if (rc == ELASTIC_ESTATE) {
        depart(r, 0, 0);
        return 0;
    }
    char key[64];
    int64_t gone = 0;
    rdzv__key_round(key, sizeof key, generation, "gone");
    pthread_mutex_lock(&r->lock);
    bool counted = r->stayed_out == generation; /* rdzv__stay_out counted us already */
    pthread_mutex_unlock(&r->lock);
    if (!counted) rc = r->backend->ops->add(r->backend, key, 1, &gone);
    if (rc == 0 && running) {
        elastic_rdzv_cause cause;
        rdzv__fill_cause(r, &cause, ELASTIC_RDZV_NODE_LEFT, generation, NULL, "node left");
        rc = rdzv__end(r, generation, &cause, &won);
    }
    depart(r, generation, slot);
    return rc;
}

ELASTIC_EXTERN int elastic_rdzv_end_job(elastic_rdzv *r)
{
    elastic__clear_error();
    if (r == NULL) return elastic__fail(ELASTIC_EINVAL, "rdzv_end_job: NULL handle");
    elastic_rdzv_cause cause;
    rdzv__fill_cause(r, &cause, ELASTIC_RDZV_JOB_ENDED, 0, NULL, "job ended");
    int rc = rdzv__shut_job(r, &cause, false);
    if (rc != 0) return rc;
    pthread_mutex_lock(&r->lock);
    if (r->phase != RDZV__RUNNING && r->phase != RDZV__ENDED) {
        r->phase = RDZV__SHUT;
        r->shut_code = ELASTIC_ECLOSED;
    }
    pthread_mutex_unlock(&r->lock);
    return 0;
}
