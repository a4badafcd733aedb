/*
 * Parked calls: a get/wait/multi_get waits for keys to exist, a watch for
 * any change under a prefix. Key waits hang in buckets hashed by the one key
 * they still miss, so a set wakes only the waits on that key; watches hang
 * in buckets hashed by their prefix, and a change looks in one bucket per
 * prefix length in use (a few), so waking costs O(woken), never O(parked).
 * A short log of deletions lets a watch that arrives late
 * still see a deletion it has not seen.
 */
#include "store/server.h"

#include <stdlib.h>
#include <xxhash.h>

static size_t bucket_of(const void *key, size_t len)
{
    return (size_t)(XXH3_64bits(key, len) & (STORE__WAIT_BUCKETS - 1));
}

static size_t watch_bucket_of(const void *prefix, size_t len)
{
    return (size_t)(XXH3_64bits(prefix, len) & (STORE__WATCH_BUCKETS - 1));
}

static void free_waiter_memory(uv_handle_t *handle)
{
    store__waiter *w = handle->data;
    free(w->batch_prefix);
    free(w);
}

/* Opens a parked call's answer. A change made by a batch of this same
 * connection may be what answers it: that answer goes aside, after the
 * batch's frame, never inside it. The last operation of a batch answers in
 * the batch's frame, which its prefix opens. */
static size_t answer_open(store__waiter *w)
{
    store__conn *conn = w->conn;
    if (conn->in_batch) {
        bytes__buf swap = conn->out;
        conn->out = conn->aside;
        conn->aside = swap;
    }
    if (w->batch_prefix == NULL) return SIZE_MAX;
    size_t start = store__frame_begin(&conn->out, w->id, 0, 0);
    bytes__put(&conn->out, w->batch_prefix, w->batch_prefix_len);
    return start;
}

static void answer_close(store__waiter *w, size_t start)
{
    store__conn *conn = w->conn;
    if (start != SIZE_MAX) store__frame_end(&conn->out, start);
    if (conn->in_batch) {
        bytes__buf swap = conn->out;
        conn->out = conn->aside;
        conn->aside = swap;
    }
    store__conn_mark_dirty(conn);
}

static void list_link(store__waiter **list, store__waiter *w)
{
    w->list = list;
    w->list_prev = NULL;
    w->list_next = *list;
    if (*list != NULL) (*list)->list_prev = w;
    *list = w;
}

static void list_unlink(store__waiter *w)
{
    if (w->list == NULL) return;
    if (w->list_prev != NULL)
        w->list_prev->list_next = w->list_next;
    else
        *w->list = w->list_next;
    if (w->list_next != NULL) w->list_next->list_prev = w->list_prev;
    w->list = NULL;
    w->list_prev = w->list_next = NULL;
}

/* ---- the watch index ------------------------------------------------------ */

static size_t length_index(const elastic_store_server *server, size_t len)
{
    size_t lo = 0, hi = server->watch_length_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (server->watch_lengths[mid].len < len)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Parks a watch in its prefix's bucket; false when out of memory. */
static bool watch_link(elastic_store_server *server, store__waiter *w)
{
    size_t len = w->keys[0].len, at = length_index(server, len);
    if (at == server->watch_length_count || server->watch_lengths[at].len != len) {
        if (server->watch_length_count == server->watch_length_cap) {
            size_t cap = server->watch_length_cap ? server->watch_length_cap * 2 : 16;
            store__watch_length *grown =
                realloc(server->watch_lengths, cap * sizeof *server->watch_lengths);
            if (grown == NULL) return false;
            server->watch_lengths = grown;
            server->watch_length_cap = cap;
        }
        memmove(&server->watch_lengths[at + 1], &server->watch_lengths[at],
                (server->watch_length_count - at) * sizeof *server->watch_lengths);
        server->watch_lengths[at] = (store__watch_length){ len, 0 };
        server->watch_length_count++;
    }
    server->watch_lengths[at].watches++;
    list_link(&server->watch_buckets[watch_bucket_of(w->keys[0].ptr, len)], w);
    return true;
}

static void watch_unlink(elastic_store_server *server, store__waiter *w)
{
    list_unlink(w);
    size_t at = length_index(server, w->keys[0].len);
    if (at == server->watch_length_count || server->watch_lengths[at].len != w->keys[0].len) return;
    if (--server->watch_lengths[at].watches > 0) return;
    memmove(&server->watch_lengths[at], &server->watch_lengths[at + 1],
            (server->watch_length_count - at - 1) * sizeof *server->watch_lengths);
    server->watch_length_count--;
}

/* Unparks and frees a waiter (its memory goes once its timer has closed). */
static void waiter_finish(store__waiter *w)
{
    store__conn *conn = w->conn;
    if (w->op == STORE__OP_WATCH && w->list != NULL)
        watch_unlink(conn->server, w);
    else
        list_unlink(w);
    if (w->conn_prev != NULL)
        w->conn_prev->conn_next = w->conn_next;
    else
        conn->waiters = w->conn_next;
    if (w->conn_next != NULL) w->conn_next->conn_prev = w->conn_prev;
    conn->waiter_count--;
    __atomic_sub_fetch(&conn->server->parked_calls, 1, __ATOMIC_RELEASE);
    w->timer.data = w;
    uv_close((uv_handle_t *)&w->timer, free_waiter_memory);
}

void store__wait_cancel_all(store__conn *conn)
{
    while (conn->waiters != NULL) waiter_finish(conn->waiters);
}

static void on_wait_timeout(uv_timer_t *timer)
{
    store__waiter *w = timer->data;
    store__conn *conn = w->conn;
    size_t start = answer_open(w);
    store__reply_status(conn, w->id, ELASTIC_ETIMEDOUT, "timed out waiting");
    answer_close(w, start);
    waiter_finish(w);
    store__server_flush(conn->server);
}

/* The index of the first key that does not exist, from `from`, or n. */
static uint32_t first_missing(const store__kv *kv, const store__slice *keys, uint32_t n,
                              uint32_t from)
{
    for (uint32_t i = from; i < n; i++)
        if (store__kv_find(kv, keys[i].ptr, keys[i].len) == NULL) return i;
    return n;
}

static void reply_satisfied(store__conn *conn, uint32_t id, uint16_t op, const store__slice *keys,
                            uint32_t n)
{
    if (op == STORE__OP_WAIT)
        store__reply_status(conn, id, 0, NULL);
    else
        store__reply_values(conn, id, op, keys, n);
}

/* Re-checks a key wait after its missing key appeared: answers it, or
 * parks it on the next key it misses. */
static void recheck_keys(store__waiter *w)
{
    const store__kv *kv = &w->conn->server->kv;
    list_unlink(w);
    w->missing = first_missing(kv, w->keys, w->key_count, w->missing);
    if (w->missing == w->key_count) w->missing = first_missing(kv, w->keys, w->key_count, 0);
    if (w->missing == w->key_count) {
        size_t start = answer_open(w);
        reply_satisfied(w->conn, w->id, w->op, w->keys, w->key_count);
        answer_close(w, start);
        waiter_finish(w);
        return;
    }
    const store__slice *key = &w->keys[w->missing];
    list_link(&w->conn->server->wait_buckets[bucket_of(key->ptr, key->len)], w);
}

/* ---- watches ------------------------------------------------------------- */

static bool starts_with(const char *key, size_t key_len, const store__slice *prefix)
{
    return key_len >= prefix->len && memcmp(key, prefix->ptr, prefix->len) == 0;
}

typedef struct newer_walk {
    uint64_t after;
    bool found;
} newer_walk;

static bool find_newer(void *user, const store__entry *e)
{
    newer_walk *walk = user;
    if (e->revision > walk->after) walk->found = true;
    return !walk->found;
}

/* Did a key under prefix change after `after`? When the deletion log no
 * longer reaches back that far, say yes: a spurious wake-up is safe, a
 * missed one is not. */
static bool changed_since(const elastic_store_server *server, const store__slice *prefix,
                          uint64_t after)
{
    if (after >= server->kv.revision) return after > server->kv.revision; /* a stale revision */
    if (after < server->deletion_horizon) return true;
    for (size_t i = 0; i < STORE__DELETE_LOG; i++) {
        const store__deletion *d = &server->deletions[i];
        if (d->key != NULL && d->revision > after && starts_with(d->key, d->key_len, prefix))
            return true;
    }
    newer_walk walk = { after, false };
    store__kv_visit_prefix(&server->kv, prefix->ptr, prefix->len, find_newer, &walk);
    return walk.found;
}

static void reply_revision(store__conn *conn, uint32_t id, uint64_t revision)
{
    size_t start = store__frame_begin(&conn->out, id, 0, 0);
    bytes__put_u64(&conn->out, revision);
    store__frame_end(&conn->out, start);
    store__conn_mark_dirty(conn);
}

static void remember_deletion(elastic_store_server *server, const char *key, size_t key_len,
                              uint64_t revision)
{
    store__deletion *d = &server->deletions[server->deletion_next];
    server->deletion_next = (server->deletion_next + 1) % STORE__DELETE_LOG;
    if (d->key != NULL && d->revision > server->deletion_horizon)
        server->deletion_horizon = d->revision;
    free(d->key);
    d->key = malloc(key_len ? key_len : 1);
    d->key_len = d->key ? key_len : 0;
    d->revision = revision;
    if (d->key != NULL)
        memcpy(d->key, key, key_len);
    else
        server->deletion_horizon = revision; /* forgotten at once */
}

void store__wait_free_index(elastic_store_server *server)
{
    for (size_t i = 0; i < STORE__DELETE_LOG; i++) free(server->deletions[i].key);
    memset(server->deletions, 0, sizeof server->deletions);
    /* the watch index by prefix length goes with the server too */
    free(server->watch_lengths);
    server->watch_lengths = NULL;
    server->watch_length_count = server->watch_length_cap = 0;
}

/* ---- the change hook ----------------------------------------------------- */

void store__wait_on_change(void *user, const char *key, size_t key_len, uint64_t revision,
                           bool deleted)
{
    elastic_store_server *server = user;
    if (deleted) remember_deletion(server, key, key_len, revision);
    /* Every watch whose prefix starts the key: one bucket per length in use.
     * Finishing the last watch of a length removes lengths[i] (only that
     * one), so the index moves on only while the entry is still there. */
    for (size_t i = 0; i < server->watch_length_count && server->watch_lengths[i].len <= key_len;) {
        size_t len = server->watch_lengths[i].len;
        size_t bucket = watch_bucket_of(key, len);
        for (store__waiter *w = server->watch_buckets[bucket], *next; w != NULL; w = next) {
            next = w->list_next;
            if (revision > w->after_revision && w->keys[0].len == len &&
                starts_with(key, key_len, &w->keys[0])) {
                size_t start = answer_open(w);
                reply_revision(w->conn, w->id, revision);
                answer_close(w, start);
                waiter_finish(w);
            }
        }
        if (i < server->watch_length_count && server->watch_lengths[i].len == len) i++;
    }
    if (deleted) return;
    for (store__waiter *w = server->wait_buckets[bucket_of(key, key_len)], *next; w != NULL;
         w = next) {
        next = w->list_next;
        const store__slice *missing = &w->keys[w->missing];
        if (missing->len == key_len && memcmp(missing->ptr, key, key_len) == 0) recheck_keys(w);
    }
}

/* ---- parking ------------------------------------------------------------- */

/* A waiter owning copies of the request's keys (or the watch prefix). */
static store__waiter *waiter_new(store__conn *conn, const store__request *req,
                                 const store__slice *keys, uint32_t n)
{
    size_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) bytes += keys[i].len;
    store__waiter *w = calloc(1, sizeof *w + n * sizeof(store__slice) + bytes);
    if (w == NULL) return NULL;
    w->keys = (store__slice *)w->storage;
    uint8_t *text = w->storage + n * sizeof(store__slice);
    for (uint32_t i = 0; i < n; i++) {
        if (keys[i].len) memcpy(text, keys[i].ptr, keys[i].len);
        w->keys[i].ptr = text;
        w->keys[i].len = keys[i].len;
        text += keys[i].len;
    }
    w->conn = conn;
    w->id = req->id;
    w->op = req->op;
    w->key_count = n;
    w->after_revision = req->number;
    w->conn_next = conn->waiters;
    if (conn->waiters != NULL) conn->waiters->conn_prev = w;
    conn->waiters = w;
    conn->waiter_count++;
    __atomic_add_fetch(&conn->server->parked_calls, 1, __ATOMIC_RELEASE);
    uv_timer_init(&conn->server->loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, on_wait_timeout, req->timeout_ms, 0);
    return w;
}

/* The request's keys as slices (the single key of get/watch, or its list). */
static store__slice *request_keys(const store__request *req, uint32_t *n)
{
    if (req->op == STORE__OP_GET || req->op == STORE__OP_WATCH) {
        *n = 1;
        store__slice *one = malloc(sizeof *one);
        if (one != NULL) *one = req->key;
        return one;
    }
    *n = req->n;
    store__slice *keys = malloc(req->n * sizeof *keys);
    if (keys == NULL) return NULL;
    bytes__reader r = bytes__reader_of(req->list, req->list_len);
    for (uint32_t i = 0; i < req->n; i++) store__list_next(&r, false, &keys[i], NULL);
    return keys;
}

/* The answer right now, when there is one (true), else false. */
static bool answer_now(store__conn *conn, const store__request *req, const store__slice *keys,
                       uint32_t n)
{
    elastic_store_server *server = conn->server;
    if (req->op == STORE__OP_WATCH) {
        if (!changed_since(server, &keys[0], req->number)) return false;
        reply_revision(conn, req->id, server->kv.revision);
        return true;
    }
    if (first_missing(&server->kv, keys, n, 0) < n) return false;
    reply_satisfied(conn, req->id, req->op, keys, n);
    return true;
}

store__waiter *store__wait_park(store__conn *conn, const store__request *req)
{
    uint32_t n = 0;
    store__waiter *parked = NULL;
    store__slice *keys = request_keys(req, &n);
    if (keys == NULL) {
        store__reply_status(conn, req->id, ELASTIC_ENOMEM, "out of memory");
        return NULL;
    }
    if (answer_now(conn, req, keys, n)) {
        free(keys);
        return NULL;
    }
    if (req->timeout_ms == 0) {
        store__reply_status(conn, req->id, ELASTIC_ETIMEDOUT, "timed out waiting");
    } else if (conn->waiter_count >= conn->server->opts.max_pending_waits) {
        store__reply_status(conn, req->id, ELASTIC_ELIMIT,
                            "too many parked calls on this connection (max_pending_waits)");
    } else {
        store__waiter *w = waiter_new(conn, req, keys, n);
        if (w == NULL)
            store__reply_status(conn, req->id, ELASTIC_ENOMEM, "out of memory");
        else if (req->op == STORE__OP_WATCH && !watch_link(conn->server, w)) {
            store__reply_status(conn, req->id, ELASTIC_ENOMEM, "out of memory");
            waiter_finish(w);
        } else {
            parked = w;
            if (req->op != STORE__OP_WATCH) {
                /* answer_now found a key missing: park on the first one */
                w->missing = first_missing(&conn->server->kv, w->keys, w->key_count, 0);
                const store__slice *key = &w->keys[w->missing];
                list_link(&conn->server->wait_buckets[bucket_of(key->ptr, key->len)], w);
            }
        }
    }
    free(keys);
    return parked;
}

bool store__wait_adopt_batch(store__waiter *w, const uint8_t *prefix, size_t len)
{
    w->batch_prefix = malloc(len > 0 ? len : 1);
    if (w->batch_prefix == NULL) return false;
    memcpy(w->batch_prefix, prefix, len);
    w->batch_prefix_len = len;
    return true;
}

void store__wait_drop(store__waiter *w)
{
    waiter_finish(w);
}

size_t store__server_parked_calls(const elastic_store_server *server)
{
    return __atomic_load_n(&server->parked_calls, __ATOMIC_ACQUIRE);
}
