/*
 * This node's etcd lease: granted with TTL = the keep-alive timeout, kept
 * alive from a thread of its own every keep-alive interval (so a busy caller
 * never loses it), on a gRPC stream where etcd offers one, and reported lost
 * (fencing) the moment etcd says it is gone or no keep-alive was
 * acknowledged for a whole TTL.
 *
 * The deadline is what etcd guarantees: the TTL etcd granted (its replies
 * say it; etcd raises a TTL below its minimum), counted from when the last
 * acknowledged keep-alive was sent. etcd cannot expire the lease before
 * then, and during a leader election none expires (a new leader extends
 * every lease), so a keep-alive that finds no leader is tried on the other
 * endpoints, each given a fraction of the time left, until the deadline.
 */
#include "rdzv/backend_etcd.h"

#include "common/clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* The longest one endpoint may hold a keep-alive: a quarter of the TTL,
 * so a member cut off from its leader leaves time for the others. */
static int attempt_ms(int ttl_ms)
{
    int quarter = ttl_ms / 4;
    return quarter < 200 ? 200 : quarter > 1000 ? 1000 : quarter;
}

/* The TTL of a keep-alive's reply into *ttl_ms: 1 while the lease lives, 0
 * when etcd no longer has it. */
static int take_ttl(int64_t ttl, int *ttl_ms)
{
    if (ttl > ETCD__MAX_TTL_S)
        return elastic__fail(ELASTIC_EPROTO, "etcd keepalive: TTL %" PRId64 " s is not plausible",
                             ttl);
    if (ttl > 0) *ttl_ms = (int)ttl * 1000;
    return ttl > 0 ? 1 : 0;
}

/* One keep-alive through the JSON gateway, failing over across endpoints. */
static int keep_alive_by_gateway(rdzv__etcd_backend *b, int64_t lease, int timeout_ms, int *ttl_ms)
{
    json_object *body = json_object_new_object(), *reply = NULL;
    json_object_object_add(body, "ID", json_object_new_int64(lease));
    int rc = etcd__call_each(b->client, "/v3/lease/keepalive", body, timeout_ms,
                             attempt_ms(*ttl_ms), &reply);
    if (rc != 0) return rc;
    json_object *result = etcd__json_field(reply, "result", json_type_object);
    int64_t ttl = 0;
    if (result == NULL)
        rc = elastic__fail(ELASTIC_EPROTO, "etcd keepalive: no result in the reply");
    else
        rc = etcd__json_i64(result, "TTL", 0, &ttl);
    json_object_put(reply);
    return rc != 0 ? rc : take_ttl(ttl, ttl_ms);
}

/* One keep-alive: on the keeper's gRPC stream (lease_stream.c: a twentieth
 * of etcd's CPU), else, or when the stream fails, through the gateway with
 * the time left. With several endpoints the stream gets one endpoint's share
 * (attempt_ms), so the gateway can still fail over; with one, a stream that
 * has answered before gets the whole deadline, as a loaded member's late
 * answer is better than asking it again. 1 while the lease lives (*ttl_ms:
 * the TTL etcd granted), 0 when etcd no longer has it. */
static int keep_alive_once(rdzv__etcd_backend *b, int64_t lease, int timeout_ms, int *ttl_ms)
{
    etcd__lease_stream *stream = b->keeper.stream; /* only this thread touches it */
    if (stream != NULL) {
        uint64_t deadline = elastic__deadline_ms(timeout_ms);
        int share = etcd__client_endpoint_count(b->client) > 1 && attempt_ms(*ttl_ms) < timeout_ms
                        ? attempt_ms(*ttl_ms)
                        : timeout_ms;
        int64_t ttl = 0;
        int first = attempt_ms(*ttl_ms) < share ? attempt_ms(*ttl_ms) : share;
        int alive = etcd__lease_stream_keep_alive(stream, lease, share, first, &ttl);
        if (alive >= 0) return take_ttl(ttl, ttl_ms);
        ELASTIC_LOG_D("rdzv", "%s; asking the gateway", elastic_last_error());
        if ((timeout_ms = elastic__ms_left(deadline)) <= 0) return alive;
    }
    return keep_alive_by_gateway(b, lease, timeout_ms, ttl_ms);
}

static void report_lost(rdzv__etcd_backend *b, int64_t lease, const char *why)
{
    ELASTIC_LOG_W("rdzv", "etcd lease %" PRIx64 " lost: %s", (uint64_t)lease, why);
    if (b->base.on_lease_lost != NULL)
        b->base.on_lease_lost(b->base.lease_lost_user, (uint64_t)lease, why);
}

static void *keeper_main(void *arg)
{
    rdzv__etcd_backend *b = arg;
    rdzv__etcd_keeper *k = &b->keeper;
    etcd__lease_stream *stream = etcd__lease_stream_new(b->client); /* NULL: the gateway only */
    pthread_mutex_lock(&k->lock);
    k->stream = stream;
    int64_t lease = k->lease;
    uint64_t next = elastic__now_ms() + (uint64_t)k->interval_ms;
    while (!k->stop) {
        if (elastic__now_ms() < next) {
            struct timespec at = elastic__timespec_at(next);
            pthread_cond_timedwait(&k->wake, &k->lock, &at);
            continue;
        }
        uint64_t sent = elastic__now_ms();
        uint64_t expires = k->last_ok_ms + (uint64_t)k->ttl_ms;
        int ttl_ms = k->ttl_ms;
        pthread_mutex_unlock(&k->lock);
        /* Never wait past the moment the lease would lapse: we fence then. */
        int left = sent < expires ? (int)(expires - sent) : 1;
        int alive = keep_alive_once(b, lease, left, &ttl_ms);
        char why[300] = "";
        if (alive == 0)
            snprintf(why, sizeof why, "etcd says the lease has expired");
        else if (alive < 0 && elastic__now_ms() >= expires)
            snprintf(why, sizeof why,
                     "no keep-alive acknowledged within the lease's TTL of %d ms (%s)", ttl_ms,
                     elastic_last_error());
        pthread_mutex_lock(&k->lock);
        if (alive == 1) {
            k->last_ok_ms = sent;
            k->ttl_ms = ttl_ms;
        }
        if (why[0] != '\0' && !k->stop) {
            k->stop = true;
            pthread_mutex_unlock(&k->lock);
            report_lost(b, lease, why);
            pthread_mutex_lock(&k->lock);
            break;
        }
        next = sent + (uint64_t)k->interval_ms;
        if (alive < 0 && next > expires) next = expires; /* one last try right at the deadline */
    }
    /* Detached, so a keeper that ended on its own (its lease was lost) is no
     * thread left to join when the process exits without closing the backend
     * (an agent whose store call cannot be interrupted); rdzv__etcd_keeper_stop
     * waits for this instead of a join. */
    k->stream = NULL;
    etcd__lease_stream_free(stream);
    k->exited = true;
    pthread_cond_broadcast(&k->wake);
    pthread_mutex_unlock(&k->lock);
    return NULL;
}

void rdzv__etcd_keeper_stop(rdzv__etcd_backend *b)
{
    rdzv__etcd_keeper *k = &b->keeper;
    pthread_mutex_lock(&k->lock);
    bool running = k->running;
    k->stop = true;
    k->running = false;
    pthread_cond_broadcast(&k->wake);
    /* the keeper itself (a lease-lost callback that stops it) must not wait for itself */
    if (running && !pthread_equal(pthread_self(), k->thread))
        while (!k->exited) pthread_cond_wait(&k->wake, &k->lock);
    pthread_mutex_unlock(&k->lock);
}

int rdzv__etcd_lease_grant(rdzv__backend *base, int ttl_ms, int keepalive_interval_ms,
                           uint64_t *lease)
{
    rdzv__etcd_backend *b = (rdzv__etcd_backend *)base;
    if (ttl_ms < 100 || keepalive_interval_ms < 0)
        return elastic__fail(ELASTIC_EINVAL, "etcd lease: ttl_ms must be >= 100");
    rdzv__etcd_keeper_stop(b); /* one lease per node: a new grant replaces a lost one */
    rdzv__count(base, 8, 8);
    json_object *body = json_object_new_object(), *reply = NULL;
    /* etcd counts in seconds (and raises tiny TTLs to its minimum, 1.5
     * election timeouts): our deadline is the TTL it grants. */
    json_object_object_add(body, "TTL", json_object_new_int64((ttl_ms + 999) / 1000));
    int rc = etcd__call(b->client, "/v3/lease/grant", body, 0, false, &reply);
    int64_t id = 0, granted = 0;
    if (rc == 0) rc = etcd__json_i64(reply, "ID", 0, &id);
    if (rc == 0) rc = etcd__json_i64(reply, "TTL", 0, &granted);
    json_object_put(reply);
    if (rc == 0 && id <= 0)
        rc = elastic__fail(ELASTIC_EPROTO, "etcd lease grant: no lease ID in the reply");
    if (rc == 0 && (granted <= 0 || granted > ETCD__MAX_TTL_S))
        rc = elastic__fail(ELASTIC_EPROTO, "etcd lease grant: TTL %" PRId64 " s in the reply",
                           granted);
    if (rc != 0) return rc;
    if (granted * 1000 != ttl_ms)
        ELASTIC_LOG_D("rdzv", "etcd granted a TTL of %" PRId64 " s for %d ms asked", granted,
                      ttl_ms);
    *lease = (uint64_t)id;
    if (keepalive_interval_ms == 0) return 0;
    rdzv__etcd_keeper *k = &b->keeper;
    pthread_mutex_lock(&k->lock);
    k->lease = id;
    k->ttl_ms = (int)granted * 1000; /* what etcd keeps it for, not what we asked */
    k->interval_ms = keepalive_interval_ms;
    k->last_ok_ms = elastic__now_ms();
    k->stop = false;
    k->exited = false;
    rc = pthread_create(&k->thread, NULL, keeper_main, b);
    if (rc == 0) pthread_detach(k->thread);
    k->running = rc == 0;
    pthread_mutex_unlock(&k->lock);
    if (rc != 0)
        return elastic__fail(ELASTIC_ESYS, "etcd lease: cannot start the keep-alive thread");
    return 0;
}

int rdzv__etcd_lease_revoke(rdzv__backend *base, uint64_t lease)
{
    rdzv__etcd_backend *b = (rdzv__etcd_backend *)base;
    pthread_mutex_lock(&b->keeper.lock);
    bool ours = b->keeper.lease == (int64_t)lease;
    pthread_mutex_unlock(&b->keeper.lock);
    if (ours) rdzv__etcd_keeper_stop(b); /* a revoke is not a loss: nobody is fenced */
    rdzv__count(base, 8, 0);
    json_object *body = json_object_new_object(), *reply = NULL;
    json_object_object_add(body, "ID", json_object_new_int64((int64_t)lease));
    int rc = etcd__call(b->client, "/v3/lease/revoke", body, 0, false, &reply);
    json_object_put(reply);
    return rc;
}

/* One keep-alive through the gateway, on the caller's thread (the keeper's
 * stream stays the keeper's): etcd's answer to "does this lease live". */
int rdzv__etcd_lease_check(rdzv__backend *base, uint64_t lease, int timeout_ms)
{
    rdzv__etcd_backend *b = (rdzv__etcd_backend *)base;
    rdzv__count(base, 8, 0);
    int ttl_ms = timeout_ms; /* attempt_ms: a quarter of it per endpoint */
    int alive = keep_alive_by_gateway(b, (int64_t)lease, timeout_ms > 0 ? timeout_ms : 1, &ttl_ms);
    if (alive < 0) return alive;
    return alive == 1
               ? 0
               : elastic__fail(ELASTIC_ENOTFOUND, "etcd: lease %" PRIx64 " has ended", lease);
}
