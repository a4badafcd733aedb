/*
 * What the server does with a validated request: each operation against
 * the table, its response, and the leases a connection owns (a lease ends
 * on its TTL timer, on revoke, or when its connection closes).
 */
#include "store/server.h"

#include <stdlib.h>
#include <sys/ioctl.h>

static void reply_error(store__conn *conn, uint32_t id, int err)
{
    const char *detail = elastic_last_error();
    store__reply_status(conn, id, err, detail[0] ? detail : elastic_strerror(err));
}

static void reply_result(store__conn *conn, uint32_t id, int err)
{
    if (err != 0)
        reply_error(conn, id, err);
    else
        store__reply_status(conn, id, 0, NULL);
}

static void reply_u64(store__conn *conn, uint32_t id, uint64_t value)
{
    size_t start = store__frame_begin(&conn->out, id, 0, 0);
    bytes__put_u64(&conn->out, value);
    store__frame_end(&conn->out, start);
    store__conn_mark_dirty(conn);
}

void store__reply_values(store__conn *conn, uint32_t id, uint16_t op, const store__slice *keys,
                         uint32_t n)
{
    const store__kv *kv = &conn->server->kv;
    size_t bytes = 0;
    for (uint32_t i = 0; i < n; i++)
        bytes += store__kv_find(kv, keys[i].ptr, keys[i].len)->value_len + 4;
    if (bytes > conn->server->max_frame_body) {
        store__reply_status(conn, id, ELASTIC_ELIMIT, "values larger than the connection's limit");
        return;
    }
    size_t start = store__frame_begin(&conn->out, id, 0, 0);
    if (op == STORE__OP_MULTI_GET) bytes__put_u32(&conn->out, n);
    for (uint32_t i = 0; i < n; i++) {
        const store__entry *e = store__kv_find(kv, keys[i].ptr, keys[i].len);
        if (op == STORE__OP_GET) bytes__put_u64(&conn->out, e->revision);
        bytes__put_bytes(&conn->out, e->value, e->value_len);
    }
    store__frame_end(&conn->out, start);
    store__conn_mark_dirty(conn);
}

static store__waiter *do_get(store__conn *conn, const store__request *req)
{
    if (store__kv_find(&conn->server->kv, req->key.ptr, req->key.len) != NULL)
        store__reply_values(conn, req->id, STORE__OP_GET, &req->key, 1);
    else if (req->flags & STORE__FLAG_NOWAIT)
        store__reply_status(conn, req->id, ELASTIC_ENOTFOUND, "no such key");
    else
        return store__wait_park(conn, req);
    return NULL;
}

static void do_add(store__conn *conn, const store__request *req)
{
    int64_t result = 0;
    int err = store__kv_add(&conn->server->kv, req->key.ptr, req->key.len, req->delta, &result);
    if (err != 0)
        reply_error(conn, req->id, err);
    else
        reply_u64(conn, req->id, (uint64_t)result);
}

static void do_compare_set(store__conn *conn, const store__request *req)
{
    const store__entry *current = NULL;
    int err = store__kv_compare_set(&conn->server->kv, req->key.ptr, req->key.len,
                                    req->has_expected, req->expected.ptr, req->expected.len,
                                    req->value.ptr, req->value.len, &current);
    if (err != 0) {
        reply_error(conn, req->id, err);
        return;
    }
    size_t start = store__frame_begin(&conn->out, req->id, 0, 0);
    bytes__put_u8(&conn->out, current != NULL);
    bytes__put_bytes(&conn->out, current ? current->value : NULL, current ? current->value_len : 0);
    store__frame_end(&conn->out, start);
    store__conn_mark_dirty(conn);
}

/* All or nothing with respect to size: checked before the first write. */
static void do_multi_set(store__conn *conn, const store__request *req)
{
    store__kv *kv = &conn->server->kv;
    bytes__reader r = bytes__reader_of(req->list, req->list_len);
    size_t bytes = 0;
    store__slice key, value;
    for (uint32_t i = 0; i < req->n; i++) {
        store__list_next(&r, true, &key, &value);
        bytes += store__kv_entry_cost(key.len, value.len);
    }
    if (!store__kv_fits(kv, bytes)) {
        store__reply_status(conn, req->id, ELASTIC_ELIMIT,
                            "the store holds max_total_bytes already");
        return;
    }
    r = bytes__reader_of(req->list, req->list_len);
    int err = 0;
    for (uint32_t i = 0; i < req->n && err == 0; i++) {
        store__list_next(&r, true, &key, &value);
        err = store__kv_set(kv, key.ptr, key.len, value.ptr, value.len, NULL);
    }
    reply_result(conn, req->id, err);
}

typedef struct keys_walk {
    bytes__buf *out;
    uint32_t count, max;
    size_t budget;
} keys_walk;

static bool add_key(void *user, const store__entry *e)
{
    keys_walk *walk = user;
    if (walk->count >= walk->max || e->key_len + 4 > walk->budget) return false;
    bytes__put_bytes(walk->out, e->key, e->key_len);
    walk->budget -= e->key_len + 4;
    walk->count++;
    return true;
}

static void do_keys(store__conn *conn, const store__request *req)
{
    size_t start = store__frame_begin(&conn->out, req->id, 0, 0);
    size_t count_at = conn->out.len;
    bytes__put_u32(&conn->out, 0);
    keys_walk walk = { &conn->out, 0, req->max, conn->server->max_frame_body - 4 };
    store__kv_visit_prefix(&conn->server->kv, req->key.ptr, req->key.len, add_key, &walk);
    if (!conn->out.failed) bytes__set_le32(conn->out.data + count_at, walk.count);
    store__frame_end(&conn->out, start);
    store__conn_mark_dirty(conn);
}

/* ---- leases -------------------------------------------------------------- */

static void free_timer(uv_handle_t *handle)
{
    free(handle);
}

static void end_lease(elastic_store_server *server, store__lease *lease)
{
    store__conn *owner = lease->owner;
    store__lease **slot = &owner->leases;
    while (*slot != lease) slot = &(*slot)->owner_next;
    *slot = lease->owner_next;
    owner->lease_count--;
    uv_close(lease->timer, free_timer);
    store__kv_lease_end(&server->kv, lease);
}

/* Whether the kernel holds bytes from this connection that the loop has not
 * read yet (or reading is paused with input waiting). */
static bool input_waiting(store__conn *conn)
{
    uv_os_fd_t fd;
    int unread = 0;
    if (conn->paused) return true;
    if (uv_fileno((const uv_handle_t *)&conn->tcp, &fd) != 0) return false;
    return ioctl(fd, FIONREAD, &unread) == 0 && unread > 0;
}

static void on_lease_expired(uv_timer_t *timer)
{
    store__lease *lease = timer->data;
    store__conn *owner = lease->owner;
    elastic_store_server *server = owner->server;
    /* A loop that fell behind (a burst from thousands of nodes, a starved
     * CPU) may not have read a keep-alive that came in time: while the
     * owner's input waits unread, put the expiry off a tenth of the TTL at a
     * time, one TTL at most in all. A frozen or cut-off node sends nothing,
     * so its lease still ends on time. */
    uint32_t step = lease->ttl_ms / 10 > 0 ? lease->ttl_ms / 10 : 1;
    if (lease->grace_ms + step <= lease->ttl_ms && input_waiting(owner)) {
        lease->grace_ms += step;
        uv_timer_start(lease->timer, on_lease_expired, step, 0);
        return;
    }
    ELASTIC_LOG_I("store", "lease %llu of %s expired after %u ms without keep-alive",
                  (unsigned long long)lease->id, owner->peer, lease->ttl_ms);
    end_lease(server, lease);
    store__server_flush(server);
}

void store__conn_end_leases(store__conn *conn)
{
    while (conn->leases != NULL) end_lease(conn->server, conn->leases);
}

static void do_lease_grant(store__conn *conn, const store__request *req)
{
    if (conn->lease_count >= STORE__MAX_LEASES_PER_CONN) {
        store__reply_status(conn, req->id, ELASTIC_ELIMIT, "too many leases on this connection");
        return;
    }
    uv_timer_t *timer = malloc(sizeof *timer);
    store__lease *lease =
        timer ? store__kv_lease_grant(&conn->server->kv, req->ttl_ms, conn) : NULL;
    if (lease == NULL) {
        free(timer);
        store__reply_status(conn, req->id, ELASTIC_ENOMEM,
                            "no lease: out of memory or random bytes");
        return;
    }
    uv_timer_init(&conn->server->loop, timer);
    timer->data = lease;
    lease->timer = timer;
    lease->owner_next = conn->leases;
    conn->leases = lease;
    conn->lease_count++;
    uv_timer_start(timer, on_lease_expired, req->ttl_ms, 0);
    reply_u64(conn, req->id, lease->id);
}

/* The lease named by a keep-alive, revoke or leased set, if this connection
 * owns it; else answers ENOTFOUND or EPERM and returns NULL. Only the
 * granting connection (shared by a client handle and its clones) may touch
 * a lease: anyone else could evict a node or keep a dead one present. */
static store__lease *owned_lease(store__conn *conn, const store__request *req)
{
    store__lease *lease = store__kv_lease_find(&conn->server->kv, req->number);
    if (lease == NULL) {
        store__reply_status(conn, req->id, ELASTIC_ENOTFOUND, "no such lease (it ended)");
        return NULL;
    }
    if (lease->owner != conn) {
        ELASTIC_LOG_W("store", "%s tried %s on a lease of another connection", conn->peer,
                      store__op_name(req->op));
        store__reply_status(conn, req->id, ELASTIC_EPERM,
                            "the lease belongs to another connection");
        return NULL;
    }
    return lease;
}

static void do_lease(store__conn *conn, const store__request *req)
{
    store__lease *lease = owned_lease(conn, req);
    if (lease == NULL) return;
    if (req->op == STORE__OP_LEASE_KEEPALIVE) {
        lease->grace_ms = 0;
        uv_timer_start(lease->timer, on_lease_expired, lease->ttl_ms, 0);
        if (req->id == STORE__KEEPALIVE_ID) return; /* the ticker's: nobody awaits it */
    } else {
        end_lease(conn->server, lease);
    }
    store__reply_status(conn, req->id, 0, NULL);
}

static void do_set_leased(store__conn *conn, const store__request *req)
{
    store__lease *lease = owned_lease(conn, req);
    if (lease == NULL) return;
    reply_result(conn, req->id,
                 store__kv_set(&conn->server->kv, req->key.ptr, req->key.len, req->value.ptr,
                               req->value.len, lease));
}

/* ---- batches ------------------------------------------------------------- */

/* Runs a batch's operations in order, nobody else's in between (one loop),
 * and answers them in one frame: u32 n, u64 the revision after them, then
 * each one's answer as the frame it would get alone. With STORE__FLAG_STOP
 * the first that fails cancels the rest. A waiting last operation that
 * parks takes the frame so far with it and answers the batch when it is
 * answered. */
static store__waiter *do_batch(store__conn *conn, const store__request *req)
{
    bytes__reader r = bytes__reader_of(req->list, req->list_len);
    size_t start = store__frame_begin(&conn->out, req->id, 0, 0);
    bytes__put_u32(&conn->out, req->n);
    size_t revision_at = conn->out.len;
    bytes__put_u64(&conn->out, 0);
    bool stopped = false;
    store__waiter *parked = NULL;
    conn->in_batch = true;
    for (uint32_t i = 0; i < req->n; i++) {
        store__request sub;
        (void)store__batch_next(&r, &conn->server->limits, req->id, &sub); /* validated */
        if (stopped) {
            store__reply_status(conn, req->id, ELASTIC_ECANCELED,
                                "an earlier operation of the batch failed");
            continue;
        }
        size_t at = conn->out.len;
        parked = store__execute(conn, &sub);
        if (parked != NULL) break; /* only the last one may wait */
        if ((req->flags & STORE__FLAG_STOP) && !conn->out.failed &&
            conn->out.len >= at + STORE__HEADER_BYTES && bytes__le16(conn->out.data + at + 8) != 0)
            stopped = true;
    }
    conn->in_batch = false;
    if (!conn->out.failed) bytes__set_le64(conn->out.data + revision_at, conn->server->kv.revision);
    if (parked != NULL) {
        /* The frame so far goes with the parked call, if it is small. */
        size_t body = start + STORE__HEADER_BYTES, held = conn->out.len - body;
        bool small = held <= STORE__MAX_BATCH_HELD;
        if (!conn->out.failed && small &&
            store__wait_adopt_batch(parked, conn->out.data + body, held)) {
            conn->out.len = start;
        } else {
            store__wait_drop(parked);
            store__reply_status(conn, req->id, small ? ELASTIC_ENOMEM : ELASTIC_ELIMIT,
                                small ? "out of memory"
                                      : "a batch that waits holds at most 64 KiB of answers");
            store__frame_end(&conn->out, start);
        }
    } else {
        store__frame_end(&conn->out, start);
    }
    if (conn->aside.len > 0) {
        bytes__put(&conn->out, conn->aside.data, conn->aside.len);
        conn->aside.len = 0;
    }
    bytes__buf_free(&conn->aside);
    store__conn_mark_dirty(conn);
    return NULL;
}

/* ---- dispatch ------------------------------------------------------------ */

store__waiter *store__execute(store__conn *conn, const store__request *req)
{
    store__kv *kv = &conn->server->kv;
    store__waiter *parked = NULL;
    elastic__clear_error();
    uint64_t *counts = conn->in_batch ? conn->server->batched_op_counts : conn->server->op_counts;
    __atomic_fetch_add(&counts[req->op < STORE__OP_END_ ? req->op : 0], 1, __ATOMIC_RELAXED);
    switch (req->op) {
    case STORE__OP_SET:
        reply_result(
            conn, req->id,
            store__kv_set(kv, req->key.ptr, req->key.len, req->value.ptr, req->value.len, NULL));
        break;
    case STORE__OP_APPEND:
        reply_result(
            conn, req->id,
            store__kv_append(kv, req->key.ptr, req->key.len, req->value.ptr, req->value.len));
        break;
    case STORE__OP_SET_LEASED: do_set_leased(conn, req); break;
    case STORE__OP_GET: parked = do_get(conn, req); break;
    case STORE__OP_ADD: do_add(conn, req); break;
    case STORE__OP_CAS: do_compare_set(conn, req); break;
    case STORE__OP_WAIT:
    case STORE__OP_MULTI_GET:
    case STORE__OP_WATCH: parked = store__wait_park(conn, req); break;
    case STORE__OP_DELETE:
        if (store__kv_delete(kv, req->key.ptr, req->key.len) != 0)
            store__reply_status(conn, req->id, ELASTIC_ENOTFOUND, "no such key");
        else
            store__reply_status(conn, req->id, 0, NULL);
        break;
    case STORE__OP_COUNT:
        reply_u64(conn, req->id, store__kv_count_prefix(kv, req->key.ptr, req->key.len));
        break;
    case STORE__OP_MULTI_SET: do_multi_set(conn, req); break;
    case STORE__OP_KEYS: do_keys(conn, req); break;
    case STORE__OP_LEASE_GRANT: do_lease_grant(conn, req); break;
    case STORE__OP_LEASE_KEEPALIVE:
    case STORE__OP_LEASE_REVOKE: do_lease(conn, req); break;
    case STORE__OP_PING: store__reply_status(conn, req->id, 0, NULL); break;
    case STORE__OP_BATCH: do_batch(conn, req); break;
    default: store__reply_status(conn, req->id, ELASTIC_EPROTO, "unknown operation"); break;
    }
    return parked;
}

void store__server_op_counts(const elastic_store_server *server, uint64_t *out, uint64_t *batched)
{
    for (int op = 0; op < STORE__OP_END_; op++) {
        out[op] = __atomic_load_n(&server->op_counts[op], __ATOMIC_RELAXED);
        if (batched != NULL)
            batched[op] = __atomic_load_n(&server->batched_op_counts[op], __ATOMIC_RELAXED);
    }
}

void store__server_without_batch(elastic_store_server *server)
{
    __atomic_store_n(&server->without_batch, true, __ATOMIC_RELAXED);
}
