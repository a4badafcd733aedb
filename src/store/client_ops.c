/*
 * The store's public operations on the client side: each builds one
 * request frame (keys get the handle's prefix), runs it with a deadline,
 * and decodes the response into the caller's outputs.
 */
#include "store/client.h"

#include <stdlib.h>

#define WAIT_GRACE_MS 1000 /* the server answers a timed-out wait; this covers the trip */

/* The deadline of a waiting call (docs/ABI.md, "Timeouts"): ELASTIC_TIMEOUT_DEFAULT
 * takes the handle's timeout_ms; a negative one has none (UINT64_MAX). */
static uint64_t wait_deadline(const elastic_store *s, int timeout_ms)
{
    return elastic__deadline_ms(timeout_ms == ELASTIC_TIMEOUT_DEFAULT ? s->timeout_ms : timeout_ms);
}

/* The server parks a call for at most STORE__MAX_WAIT_MS, so longer waits (and
 * waits without limit) are a series of parked calls; this is the next one's. */
static int wait_slice(uint64_t deadline)
{
    int left = elastic__ms_left(deadline);
    return (uint32_t)left > STORE__MAX_WAIT_MS ? (int)STORE__MAX_WAIT_MS : left;
}

static bool wait_again(int err, uint64_t deadline)
{
    return err == ELASTIC_ETIMEDOUT && (deadline == UINT64_MAX || elastic__now_ms() < deadline);
}

static store__call_opts plain_call(const elastic_store *s, bool idempotent)
{
    store__call_opts co = { idempotent, elastic__deadline_ms(s->timeout_ms) };
    return co;
}

static store__call_opts waiting_call(int timeout_ms)
{
    store__call_opts co = { true, elastic__now_ms() + (uint64_t)timeout_ms + WAIT_GRACE_MS };
    return co;
}

static void put_key(const elastic_store *s, bytes__buf *b, const char *key)
{
    size_t len = strlen(key);
    bytes__put_u32(b, (uint32_t)(s->prefix_len + len));
    bytes__put(b, s->prefix, s->prefix_len);
    bytes__put(b, key, len);
}

/* Runs the frame in b (then freed) and keeps the response body. */
static int run(elastic_store *s, uint16_t op, bytes__buf *b, size_t frame_start,
               const store__call_opts *co, uint8_t **body, size_t *len)
{
    store__frame_end(b, frame_start);
    int err = store__call_run(s, op, b, co, body, len);
    bytes__buf_free(b);
    return err;
}

static int run_simple(elastic_store *s, uint16_t op, bytes__buf *b, size_t frame_start,
                      const store__call_opts *co)
{
    uint8_t *body = NULL;
    size_t len = 0;
    int err = run(s, op, b, frame_start, co, &body, &len);
    free(body);
    return err;
}

static int malformed(uint16_t op)
{
    return elastic__fail(ELASTIC_EPROTO, "store %s: malformed response", store__op_name(op));
}

/* Runs a call whose answer is one u64 (add, num_keys, watch, lease_grant). */
static int run_u64(elastic_store *s, uint16_t op, bytes__buf *b, size_t frame_start,
                   const store__call_opts *co, uint64_t *out)
{
    uint8_t *body;
    size_t len;
    int err = run(s, op, b, frame_start, co, &body, &len);
    if (err != 0) return err;
    bytes__reader r = bytes__reader_of(body, len);
    *out = bytes__read_u64(&r);
    free(body);
    return r.bad ? malformed(op) : 0;
}

/* A NUL-terminated copy of bytes (the convenience the header promises). */
int store__copy_value(const uint8_t *data, uint32_t len, void **value, size_t *value_len)
{
    char *copy = malloc((size_t)len + 1);
    if (copy == NULL) return ELASTIC_ENOMEM;
    if (len) memcpy(copy, data, len);
    copy[len] = '\0';
    *value = copy;
    if (value_len != NULL) *value_len = len;
    return 0;
}

int store__read_values(const uint8_t *body, size_t len, size_t n, void **values, size_t *lens)
{
    bytes__reader r = bytes__reader_of(body, len);
    int err = 0;
    if (bytes__read_u32(&r) != n) r.bad = true;
    size_t filled = 0;
    for (; filled < n && !r.bad && err == 0; filled++) {
        uint32_t value_len;
        const uint8_t *data = bytes__read_bytes(&r, UINT32_MAX, &value_len);
        if (r.bad) break;
        err = store__copy_value(data, value_len, &values[filled], lens ? &lens[filled] : NULL);
    }
    if (err == 0 && (r.bad || filled != n)) err = ELASTIC_EPROTO;
    if (err != 0)
        for (size_t i = 0; i < filled; i++) {
            free(values[i]);
            values[i] = NULL;
        }
    return err;
}

static bool valid_keys(const char *const *keys, size_t n)
{
    if (keys == NULL || n == 0 || n > STORE__MAX_LIST) return false;
    for (size_t i = 0; i < n; i++)
        if (keys[i] == NULL) return false;
    return true;
}

#define CHECK(cond, what)                                              \
    do {                                                               \
        elastic__clear_error();                                        \
        if (!(cond)) return elastic__fail(ELASTIC_EINVAL, "%s", what); \
    } while (0)

/* ---- writes -------------------------------------------------------------- */

static int write_value(elastic_store *s, uint16_t op, const char *key, const void *value,
                       size_t len, const uint64_t *lease)
{
    CHECK(s != NULL && key != NULL && (value != NULL || len == 0),
          "store: NULL handle, key or value");
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, op, 0);
    put_key(s, &b, key);
    bytes__put_bytes(&b, value, len);
    if (lease != NULL) bytes__put_u64(&b, *lease);
    store__call_opts co = plain_call(s, op != STORE__OP_APPEND);
    return run_simple(s, op, &b, start, &co);
}

ELASTIC_EXTERN int elastic_store_set(elastic_store *s, const char *key, const void *value,
                                     size_t len)
{
    return write_value(s, STORE__OP_SET, key, value, len, NULL);
}

ELASTIC_EXTERN int elastic_store_append(elastic_store *s, const char *key, const void *value,
                                        size_t len)
{
    return write_value(s, STORE__OP_APPEND, key, value, len, NULL);
}

ELASTIC_EXTERN int elastic_store_set_leased(elastic_store *s, const char *key, const void *value,
                                            size_t len, uint64_t lease)
{
    return write_value(s, STORE__OP_SET_LEASED, key, value, len, &lease);
}

ELASTIC_EXTERN int elastic_store_add(elastic_store *s, const char *key, int64_t delta,
                                     int64_t *result)
{
    CHECK(s != NULL && key != NULL, "store add: NULL handle or key");
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_ADD, 0);
    put_key(s, &b, key);
    bytes__put_u64(&b, (uint64_t)delta);
    store__call_opts co = plain_call(s, false);
    uint64_t value = 0;
    int err = run_u64(s, STORE__OP_ADD, &b, start, &co, &value);
    if (err == 0 && result != NULL) *result = (int64_t)value;
    return err;
}

ELASTIC_EXTERN int elastic_store_compare_set(elastic_store *s, const char *key,
                                             const void *expected, size_t elen, const void *desired,
                                             size_t dlen, void **current, size_t *clen)
{
    CHECK(s != NULL && key != NULL && (desired != NULL || dlen == 0),
          "store compare_set: NULL handle, key or value");
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_CAS, 0);
    put_key(s, &b, key);
    bytes__put_u8(&b, expected != NULL);
    bytes__put_bytes(&b, expected, expected ? elen : 0);
    bytes__put_bytes(&b, desired, dlen);
    store__call_opts co = plain_call(s, false);
    uint8_t *body;
    size_t len;
    int err = run(s, STORE__OP_CAS, &b, start, &co, &body, &len);
    if (err != 0) return err;
    bytes__reader r = bytes__reader_of(body, len);
    bool present = bytes__read_u8(&r) != 0;
    uint32_t value_len;
    const uint8_t *value = bytes__read_bytes(&r, UINT32_MAX, &value_len);
    if (r.bad)
        err = malformed(STORE__OP_CAS);
    else if (current != NULL && present)
        err = store__copy_value(value, value_len, current, clen);
    else if (current != NULL) {
        *current = NULL;
        if (clen != NULL) *clen = 0;
    }
    free(body);
    return err;
}

ELASTIC_EXTERN int elastic_store_delete(elastic_store *s, const char *key)
{
    CHECK(s != NULL && key != NULL, "store delete: NULL handle or key");
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_DELETE, 0);
    put_key(s, &b, key);
    store__call_opts co = plain_call(s, true);
    return run_simple(s, STORE__OP_DELETE, &b, start, &co);
}

ELASTIC_EXTERN int elastic_store_multi_set(elastic_store *s, const char *const *keys,
                                           const void *const *values, const size_t *lens, size_t n)
{
    CHECK(s != NULL && valid_keys(keys, n) && values != NULL && lens != NULL,
          "store multi_set: bad arguments");
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_MULTI_SET, 0);
    bytes__put_u32(&b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        if (values[i] == NULL && lens[i] != 0) {
            bytes__buf_free(&b);
            return elastic__fail(ELASTIC_EINVAL, "store multi_set: value %zu is NULL", i);
        }
        put_key(s, &b, keys[i]);
        bytes__put_bytes(&b, values[i], lens[i]);
    }
    store__call_opts co = plain_call(s, true);
    return run_simple(s, STORE__OP_MULTI_SET, &b, start, &co);
}

/* ---- reads and waits ----------------------------------------------------- */

/* GET: parks up to timeout_ms when `wait`, else answers ENOTFOUND at once. */
static int get_one(elastic_store *s, const char *key, bool wait, int timeout_ms, void **value,
                   size_t *len, uint64_t *revision)
{
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_GET, wait ? 0 : STORE__FLAG_NOWAIT);
    put_key(s, &b, key);
    bytes__put_u32(&b, wait ? (uint32_t)timeout_ms : 0);
    store__call_opts co = wait ? waiting_call(timeout_ms) : plain_call(s, true);
    uint8_t *body;
    size_t body_len;
    int err = run(s, STORE__OP_GET, &b, start, &co, &body, &body_len);
    if (err != 0) return err;
    bytes__reader r = bytes__reader_of(body, body_len);
    uint64_t rev = bytes__read_u64(&r);
    uint32_t value_len;
    const uint8_t *data = bytes__read_bytes(&r, UINT32_MAX, &value_len);
    if (r.bad)
        err = malformed(STORE__OP_GET);
    else if (value != NULL)
        err = store__copy_value(data, value_len, value, len);
    else if (len != NULL)
        *len = value_len;
    if (err == 0 && revision != NULL) *revision = rev;
    free(body);
    return err;
}

ELASTIC_EXTERN int elastic_store_get(elastic_store *s, const char *key, int timeout_ms,
                                     void **value, size_t *len)
{
    CHECK(s != NULL && key != NULL && value != NULL,
          "store get: NULL handle, key or value pointer");
    uint64_t deadline = wait_deadline(s, timeout_ms);
    int err;
    do err = get_one(s, key, true, wait_slice(deadline), value, len, NULL);
    while (wait_again(err, deadline));
    return err;
}

ELASTIC_EXTERN int elastic_store_try_get(elastic_store *s, const char *key, void **value,
                                         size_t *len)
{
    CHECK(s != NULL && key != NULL && value != NULL,
          "store try_get: NULL handle, key or value pointer");
    return get_one(s, key, false, 0, value, len, NULL);
}

ELASTIC_EXTERN int elastic_store_get_revision(elastic_store *s, const char *key, void **value,
                                              size_t *len, uint64_t *revision)
{
    CHECK(s != NULL && key != NULL && revision != NULL,
          "store get_revision: NULL handle, key or revision");
    *revision = 0;
    if (value != NULL) *value = NULL;
    return get_one(s, key, false, 0, value, len, revision);
}

/* WAIT and MULTI_GET share their request: n keys and a timeout. */
static int keys_request(elastic_store *s, uint16_t op, const char *const *keys, size_t n,
                        int timeout_ms, uint8_t **body, size_t *len)
{
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, op, 0);
    bytes__put_u32(&b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) put_key(s, &b, keys[i]);
    bytes__put_u32(&b, (uint32_t)timeout_ms);
    store__call_opts co = waiting_call(timeout_ms);
    return run(s, op, &b, start, &co, body, len);
}

ELASTIC_EXTERN int elastic_store_wait(elastic_store *s, const char *const *keys, size_t n,
                                      int timeout_ms)
{
    CHECK(s != NULL && valid_keys(keys, n), "store wait: NULL handle or bad keys");
    uint8_t *body;
    size_t len;
    uint64_t deadline = wait_deadline(s, timeout_ms);
    int err;
    do err = keys_request(s, STORE__OP_WAIT, keys, n, wait_slice(deadline), &body, &len);
    while (wait_again(err, deadline));
    if (err == 0) free(body);
    return err;
}

ELASTIC_EXTERN int elastic_store_multi_get(elastic_store *s, const char *const *keys, size_t n,
                                           int timeout_ms, void **values, size_t *lens)
{
    CHECK(s != NULL && valid_keys(keys, n) && values != NULL, "store multi_get: bad arguments");
    uint8_t *body;
    size_t len;
    uint64_t deadline = wait_deadline(s, timeout_ms);
    int err;
    do err = keys_request(s, STORE__OP_MULTI_GET, keys, n, wait_slice(deadline), &body, &len);
    while (wait_again(err, deadline));
    if (err != 0) return err;
    err = store__read_values(body, len, n, values, lens);
    free(body);
    if (err == ELASTIC_EPROTO) return malformed(STORE__OP_MULTI_GET);
    return err != 0 ? elastic__fail(err, "store multi_get: out of memory") : 0;
}

ELASTIC_EXTERN int elastic_store_num_keys(elastic_store *s, int64_t *count)
{
    CHECK(s != NULL && count != NULL, "store num_keys: NULL handle or count");
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_COUNT, 0);
    put_key(s, &b, "");
    store__call_opts co = plain_call(s, true);
    uint64_t n = 0;
    int err = run_u64(s, STORE__OP_COUNT, &b, start, &co, &n);
    if (err == 0 && n > INT64_MAX) err = malformed(STORE__OP_COUNT);
    if (err == 0) *count = (int64_t)n;
    return err;
}

/* One allocation: n+1 pointers (NULL-terminated), then the strings. */
int store__build_key_list(const elastic_store *s, bytes__reader *r, uint32_t n, char ***keys)
{
    bytes__reader scan = *r;
    size_t bytes = ((size_t)n + 1) * sizeof(char *);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        bytes__read_bytes(&scan, UINT32_MAX, &len);
        if (scan.bad || len < s->prefix_len) return ELASTIC_EPROTO;
        bytes += len - s->prefix_len + 1;
    }
    char **list = malloc(bytes);
    if (list == NULL) return ELASTIC_ENOMEM;
    char *text = (char *)(list + n + 1);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        const uint8_t *key = bytes__read_bytes(r, UINT32_MAX, &len);
        list[i] = text;
        memcpy(text, key + s->prefix_len, len - s->prefix_len);
        text[len - s->prefix_len] = '\0';
        text += len - s->prefix_len + 1;
    }
    list[n] = NULL;
    *keys = list;
    return 0;
}

ELASTIC_EXTERN int elastic_store_keys(elastic_store *s, const char *prefix, size_t max,
                                      char ***keys, size_t *n)
{
    CHECK(s != NULL && keys != NULL && n != NULL, "store keys: NULL handle or outputs");
    *keys = NULL;
    *n = 0;
    uint8_t *body;
    size_t len;
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_KEYS, 0);
    put_key(s, &b, prefix ? prefix : "");
    bytes__put_u32(&b, max > UINT32_MAX ? UINT32_MAX : (uint32_t)max);
    store__call_opts co = plain_call(s, true);
    int err = run(s, STORE__OP_KEYS, &b, start, &co, &body, &len);
    if (err != 0) return err;
    bytes__reader r = bytes__reader_of(body, len);
    uint32_t count = bytes__read_u32(&r);
    err = r.bad || count > max ? ELASTIC_EPROTO : store__build_key_list(s, &r, count, keys);
    free(body);
    if (err == ELASTIC_EPROTO) return malformed(STORE__OP_KEYS);
    if (err == 0) *n = count;
    return err;
}

static int watch_once(elastic_store *s, const char *prefix, uint64_t after_revision, int timeout_ms,
                      uint64_t *revision)
{
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_WATCH, 0);
    put_key(s, &b, prefix);
    bytes__put_u64(&b, after_revision);
    bytes__put_u32(&b, (uint32_t)timeout_ms);
    store__call_opts co = waiting_call(timeout_ms);
    return run_u64(s, STORE__OP_WATCH, &b, start, &co, revision);
}

ELASTIC_EXTERN int elastic_store_watch(elastic_store *s, const char *prefix,
                                       uint64_t after_revision, int timeout_ms, uint64_t *revision)
{
    CHECK(s != NULL && prefix != NULL && revision != NULL,
          "store watch: NULL handle, prefix or revision");
    uint64_t deadline = wait_deadline(s, timeout_ms);
    int err;
    do err = watch_once(s, prefix, after_revision, wait_slice(deadline), revision);
    while (wait_again(err, deadline));
    return err;
}

/* ---- leases -------------------------------------------------------------- */

static int lease_call(elastic_store *s, uint16_t op, uint64_t lease)
{
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, op, 0);
    bytes__put_u64(&b, lease);
    store__call_opts co = plain_call(s, false);
    return run_simple(s, op, &b, start, &co);
}

/* Keep-alives ride on the session's ticker thread, so a blocked caller keeps its lease. */
static int add_keepalive(elastic_store *s, uint64_t lease, int interval_ms)
{
    store__keepalive *k = calloc(1, sizeof *k);
    if (k == NULL) return ELASTIC_ENOMEM;
    k->lease = lease;
    k->interval_ms = interval_ms;
    k->due_ms = elastic__now_ms() + (uint64_t)interval_ms;
    k->owner = s;
    store__session *session = s->session;
    pthread_mutex_lock(&session->lock);
    k->next = session->keepalives;
    session->keepalives = k;
    pthread_mutex_unlock(&session->lock);
    store__session_wake_ticker(session);
    return 0;
}

static void drop_keepalive(elastic_store *s, uint64_t lease)
{
    store__session *session = s->session;
    pthread_mutex_lock(&session->lock);
    for (store__keepalive **slot = &session->keepalives; *slot != NULL; slot = &(*slot)->next) {
        if ((*slot)->lease != lease) continue;
        store__keepalive *k = *slot;
        *slot = k->next;
        free(k);
        break;
    }
    pthread_mutex_unlock(&session->lock);
}

/* An answered keep-alive the caller sent at sent_ms renewed the lease: the
 * ticker's next one for it can wait a full interval from then (a node's
 * guard renews every interval already; the ticker's would double the
 * keep-alive traffic a large job puts on the store). */
static void postpone_keepalive(elastic_store *s, uint64_t lease, uint64_t sent_ms)
{
    store__session *session = s->session;
    pthread_mutex_lock(&session->lock);
    for (store__keepalive *k = session->keepalives; k != NULL; k = k->next)
        if (k->lease == lease && k->due_ms < sent_ms + (uint64_t)k->interval_ms)
            k->due_ms = sent_ms + (uint64_t)k->interval_ms;
    pthread_mutex_unlock(&session->lock);
}

ELASTIC_EXTERN int elastic_store_lease_grant(elastic_store *s, int ttl_ms,
                                             int keepalive_interval_ms, uint64_t *lease)
{
    CHECK(s != NULL && lease != NULL && ttl_ms > 0 && (uint32_t)ttl_ms <= STORE__MAX_WAIT_MS &&
              keepalive_interval_ms >= 0,
          "store lease_grant: bad handle, lease pointer, ttl (1 ms .. 1 day) or interval");
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_LEASE_GRANT, 0);
    bytes__put_u32(&b, (uint32_t)ttl_ms);
    store__call_opts co = plain_call(s, false);
    uint64_t id = 0;
    int err = run_u64(s, STORE__OP_LEASE_GRANT, &b, start, &co, &id);
    if (err != 0) return err;
    if (keepalive_interval_ms > 0 && (err = add_keepalive(s, id, keepalive_interval_ms)) != 0) {
        lease_call(s, STORE__OP_LEASE_REVOKE, id);
        return err;
    }
    *lease = id;
    return 0;
}

ELASTIC_EXTERN int elastic_store_lease_keepalive(elastic_store *s, uint64_t lease)
{
    CHECK(s != NULL, "store lease_keepalive: NULL handle");
    uint64_t sent_ms = elastic__now_ms();
    int err = lease_call(s, STORE__OP_LEASE_KEEPALIVE, lease);
    if (err == 0) postpone_keepalive(s, lease, sent_ms);
    return err;
}

int store__lease_check(elastic_store *s, uint64_t lease, int timeout_ms)
{
    CHECK(s != NULL && timeout_ms > 0, "store lease check: NULL handle or no time");
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 0, STORE__OP_LEASE_KEEPALIVE, 0);
    bytes__put_u64(&b, lease);
    /* Idempotent: over a new connection the answer says whether the lease
     * survived the old one (it never does: leases end with their connection). */
    store__call_opts co = { true, elastic__deadline_ms(timeout_ms) };
    uint64_t sent_ms = elastic__now_ms();
    int err = run_simple(s, STORE__OP_LEASE_KEEPALIVE, &b, start, &co);
    if (err == 0) postpone_keepalive(s, lease, sent_ms);
    return err;
}

ELASTIC_EXTERN int elastic_store_lease_revoke(elastic_store *s, uint64_t lease)
{
    CHECK(s != NULL, "store lease_revoke: NULL handle");
    drop_keepalive(s, lease);
    return lease_call(s, STORE__OP_LEASE_REVOKE, lease);
}
