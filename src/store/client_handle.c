/*
 * Store handles: connecting, scoped clones that share one connection,
 * clones bound to a generation (their waits end when it does), and closing a
 * handle (its pending calls fail with ELASTIC_ECLOSED, its leases are
 * revoked, the connection goes with the last handle).
 */
#include "store/client.h"

#include <errno.h>
#include <stdlib.h>

static void opts_defaults(elastic_store_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->prefix = "";
    opts->token = NULL;
    opts->connect_timeout_ms = 10000;
    opts->timeout_ms = 30000;
}

ELASTIC_EXTERN int elastic_store_opts_init(elastic_store_opts *opts, size_t struct_size)
{
    elastic_store_opts defaults;
    opts_defaults(&defaults);
    return ELASTIC__STRUCT_INIT(opts, struct_size, &defaults, "elastic_store_opts");
}

static int handle_new(store__session *session, const char *prefix_a, const char *prefix_b,
                      int timeout_ms, elastic_store **out)
{
    elastic_store *s = calloc(1, sizeof *s);
    size_t a = strlen(prefix_a), b = strlen(prefix_b);
    char *prefix = malloc(a + b + 1);
    if (s == NULL || prefix == NULL) {
        free(s);
        free(prefix);
        return ELASTIC_ENOMEM;
    }
    memcpy(prefix, prefix_a, a);
    memcpy(prefix + a, prefix_b, b + 1);
    store__cond_init(&s->idle);
    s->session = session;
    s->prefix = prefix;
    s->prefix_len = a + b;
    s->timeout_ms = timeout_ms;
    *out = s;
    return 0;
}

ELASTIC_EXTERN int elastic_store_connect(const char *endpoint, const elastic_store_opts *opts,
                                         elastic_store **store)
{
    elastic__clear_error();
    if (store == NULL || endpoint == NULL)
        return elastic__fail(ELASTIC_EINVAL, "endpoint or store pointer is NULL");
    *store = NULL;
    elastic_store_opts o;
    opts_defaults(&o);
    int err = ELASTIC__STRUCT_READ(&o, opts, "elastic_store_opts");
    if (err != 0) return err;
    if (o.prefix == NULL) o.prefix = "";
    /* Every call would time out at once: a slip, not a choice. */
    if (o.timeout_ms == 0)
        return elastic__fail(ELASTIC_EINVAL, "timeout_ms must be > 0 (or < 0: no limit)");
    if (strlen(o.prefix) > 65536) return elastic__fail(ELASTIC_EINVAL, "prefix longer than 64 KiB");
    store__session *session = NULL;
    err = store__session_open(endpoint, &o, &session);
    if (err != 0) return err;
    err = handle_new(session, o.prefix, "", o.timeout_ms, store);
    if (err != 0) store__session_release(session);
    return err;
}

ELASTIC_EXTERN int elastic_store_clone(elastic_store *store, const char *prefix,
                                       elastic_store **scoped)
{
    elastic__clear_error();
    if (store == NULL || scoped == NULL)
        return elastic__fail(ELASTIC_EINVAL, "store or scoped pointer is NULL");
    *scoped = NULL;
    if (prefix == NULL) prefix = "";
    if (store->prefix_len + strlen(prefix) > 65536)
        return elastic__fail(ELASTIC_EINVAL, "prefix longer than 64 KiB");
    store__session *session = store->session;
    pthread_mutex_lock(&session->lock);
    bool closing = store->closing;
    if (!closing) session->refs++;
    pthread_mutex_unlock(&session->lock);
    if (closing) return elastic__fail(ELASTIC_ECLOSED, "the handle is closing");
    int err = handle_new(session, store->prefix, prefix, store->timeout_ms, scoped);
    if (err != 0) store__session_release(session);
    return err;
}

/* With the lock held: ends a waiting call with `status` (its caller wakes). */
static void cancel_call(store__session *session, store__call *call, int status)
{
    if (session->calls == call) session->calls = call->next;
    if (call->prev != NULL) call->prev->next = call->next;
    if (call->next != NULL) call->next->prev = call->prev;
    call->prev = call->next = NULL;
    call->status = status;
    call->done = true;
    pthread_cond_signal(&call->cond);
}

/* With the lock held: fails this handle's calls and takes its keep-alives;
 * returns how many leases to revoke (their ids in `leases`). */
static size_t detach_handle(elastic_store *s, uint64_t *leases, size_t max)
{
    store__session *session = s->session;
    for (store__call *call = session->calls, *next; call != NULL; call = next) {
        next = call->next;
        if (call->owner == s) cancel_call(session, call, ELASTIC_ECLOSED);
    }
    store__session_wake_reader(session); /* it may be one of ours, blocked in poll */
    size_t count = 0;
    for (store__keepalive **slot = &session->keepalives; *slot != NULL;) {
        store__keepalive *k = *slot;
        if (k->owner != s) {
            slot = &k->next;
            continue;
        }
        *slot = k->next;
        if (count < max) leases[count++] = k->lease;
        free(k);
    }
    return count;
}

int store__clone_for_generation(elastic_store *store, uint64_t generation, elastic_store **out)
{
    if (generation == 0) return elastic__fail(ELASTIC_EINVAL, "generation 0 never ends");
    int rc = elastic_store_clone(store, "", out);
    if (rc == 0) (*out)->generation = generation; /* not shared yet: no lock needed */
    return rc;
}

void store__generation_ended(elastic_store *store, uint64_t generation)
{
    store__session *session = store->session;
    pthread_mutex_lock(&session->lock);
    if (generation > session->ended_generation) session->ended_generation = generation;
    for (store__call *call = session->calls, *next; call != NULL; call = next) {
        next = call->next;
        if (store__generation_over(call->owner)) cancel_call(session, call, ELASTIC_ECANCELED);
    }
    store__session_wake_reader(session); /* the reader may be a cancelled call, in poll */
    pthread_mutex_unlock(&session->lock);
}

/* Revokes leases without waiting for answers: the handle is going away. */
static void revoke_quietly(store__session *session, const uint64_t *leases, size_t count)
{
    if (count == 0) return;
    bytes__buf b = { 0 };
    for (size_t i = 0; i < count; i++) {
        size_t start = store__frame_begin(&b, STORE__KEEPALIVE_ID, STORE__OP_LEASE_REVOKE, 0);
        bytes__put_u64(&b, leases[i]);
        store__frame_end(&b, start);
    }
    pthread_mutex_lock(&session->write_lock);
    if (session->fd >= 0 && !b.failed) store__send_all(session->fd, b.data, b.len);
    pthread_mutex_unlock(&session->write_lock);
    bytes__buf_free(&b);
}

ELASTIC_EXTERN void elastic_store_close(elastic_store *s)
{
    if (s == NULL) return;
    store__session *session = s->session;
    uint64_t leases[64];
    pthread_mutex_lock(&session->lock);
    s->closing = true;
    size_t count = detach_handle(s, leases, ELASTIC__ARRAY_LEN(leases));
    /* Other threads inside calls on s leave promptly with ELASTIC_ECLOSED. */
    while (s->active_calls > 0) {
        struct timespec at = elastic__timespec_at(elastic__now_ms() + 100);
        pthread_cond_timedwait(&s->idle, &session->lock, &at);
    }
    bool live = !session->broken && session->fd >= 0;
    pthread_mutex_unlock(&session->lock);
    if (live) revoke_quietly(session, leases, count);
    store__session_release(session);
    pthread_cond_destroy(&s->idle);
    free(s->prefix);
    free(s);
}
