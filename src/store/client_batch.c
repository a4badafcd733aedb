/*
 * Batches on the client side (store/batch.h): the request is built one
 * operation at a time (u16 op, u16 flags, u32 length, the body that
 * operation has alone), run as one call, and its answer (u32 n, u64
 * revision, then n response frames) is split into answers[] that point into
 * the response.
 */
#include "store/batch.h"

#include <stdlib.h>

#define WAIT_GRACE_MS 1000 /* as client_ops.c: the server answers a timed-out wait */

bool store__batch_supported(elastic_store *s)
{
    if (s == NULL) return false;
    store__session *session = s->session;
    pthread_mutex_lock(&session->lock);
    bool yes = (session->server_flags & STORE__WELCOME_BATCH) != 0;
    pthread_mutex_unlock(&session->lock);
    return yes;
}

void store__batch_begin(store__batch *b, elastic_store *s)
{
    memset(b, 0, sizeof *b);
    b->store = s;
    b->wait_ms = -1;
    b->frame_start = store__frame_begin(&b->frame, 0, STORE__OP_BATCH, 0);
    bytes__put_u32(&b->frame, 0); /* n, patched by run */
}

/* Starts operation b->n; false (the batch marked failed) past the limit or
 * after a waiting one. */
static bool op_begin(store__batch *b, uint16_t op, uint16_t flags, size_t *len_at)
{
    if (b->failed || b->n >= STORE__MAX_BATCH || b->wait_ms >= 0) {
        b->failed = true;
        return false;
    }
    bytes__put_u16(&b->frame, op);
    bytes__put_u16(&b->frame, flags);
    *len_at = b->frame.len;
    bytes__put_u32(&b->frame, 0);
    return true;
}

static void op_end(store__batch *b, size_t len_at)
{
    if (!b->frame.failed)
        bytes__set_le32(b->frame.data + len_at, (uint32_t)(b->frame.len - len_at - 4));
    b->n++;
}

static void put_key(store__batch *b, const char *key)
{
    const elastic_store *s = b->store;
    size_t len = strlen(key);
    bytes__put_u32(&b->frame, (uint32_t)(s->prefix_len + len));
    bytes__put(&b->frame, s->prefix, s->prefix_len);
    bytes__put(&b->frame, key, len);
}

void store__batch_add(store__batch *b, const char *key, int64_t delta)
{
    size_t at;
    if (key == NULL) b->failed = true;
    if (!op_begin(b, STORE__OP_ADD, 0, &at)) return;
    put_key(b, key);
    bytes__put_u64(&b->frame, (uint64_t)delta);
    op_end(b, at);
}

void store__batch_get(store__batch *b, const char *key)
{
    size_t at;
    if (key == NULL) b->failed = true;
    if (!op_begin(b, STORE__OP_GET, STORE__FLAG_NOWAIT, &at)) return;
    put_key(b, key);
    bytes__put_u32(&b->frame, 0);
    op_end(b, at);
}

void store__batch_set_leased(store__batch *b, const char *key, const void *value, size_t len,
                             uint64_t lease)
{
    size_t at;
    if (key == NULL || (value == NULL && len > 0)) b->failed = true;
    if (!op_begin(b, STORE__OP_SET_LEASED, 0, &at)) return;
    put_key(b, key);
    bytes__put_bytes(&b->frame, value, len);
    bytes__put_u64(&b->frame, lease);
    op_end(b, at);
}

void store__batch_keys(store__batch *b, const char *prefix, uint32_t max)
{
    size_t at;
    if (prefix == NULL) b->failed = true;
    if (!op_begin(b, STORE__OP_KEYS, 0, &at)) return;
    put_key(b, prefix);
    bytes__put_u32(&b->frame, max);
    op_end(b, at);
}

void store__batch_multi_get(store__batch *b, const char *const *keys, size_t n, int timeout_ms)
{
    size_t at;
    if (keys == NULL || n == 0 || n > STORE__MAX_LIST || timeout_ms < 1 ||
        (uint32_t)timeout_ms > STORE__MAX_WAIT_MS)
        b->failed = true;
    for (size_t i = 0; !b->failed && i < n; i++)
        if (keys[i] == NULL) b->failed = true;
    if (!op_begin(b, STORE__OP_MULTI_GET, 0, &at)) return;
    bytes__put_u32(&b->frame, (uint32_t)n);
    for (size_t i = 0; i < n; i++) put_key(b, keys[i]);
    bytes__put_u32(&b->frame, (uint32_t)timeout_ms);
    op_end(b, at);
    b->wait_ms = timeout_ms;
}

/* Splits the response into answers[]; false when it is malformed. */
static bool split(store__batch *b, const uint8_t *body, size_t len)
{
    bytes__reader r = bytes__reader_of(body, len);
    uint32_t n = bytes__read_u32(&r);
    b->revision = bytes__read_u64(&r);
    if (r.bad || n != b->n) return false;
    for (uint32_t i = 0; i < n; i++) {
        if (r.left < STORE__HEADER_BYTES) return false;
        store__header h;
        store__header_decode(r.p, true, &h);
        r.p += STORE__HEADER_BYTES;
        r.left -= STORE__HEADER_BYTES;
        if (h.body_len > r.left) return false;
        b->answers[i] = (store__batch_answer){ h.op_or_status, r.p, h.body_len };
        r.p += h.body_len;
        r.left -= h.body_len;
    }
    return r.left == 0;
}

int store__batch_run(store__batch *b, bool stop_on_error)
{
    elastic__clear_error();
    if (b->store == NULL || b->failed || b->n == 0)
        return elastic__fail(ELASTIC_EINVAL,
                             "store batch: no handle, no operation, a bad argument or more "
                             "than %u operations (a waiting one last)",
                             STORE__MAX_BATCH);
    if (!store__batch_supported(b->store))
        return elastic__fail(ELASTIC_EUNSUPPORTED,
                             "store batch: this store server runs no batches");
    bytes__set_le32(b->frame.data + b->frame_start + STORE__HEADER_BYTES, b->n);
    if (stop_on_error) bytes__set_le16(b->frame.data + b->frame_start + 10, STORE__FLAG_STOP);
    store__frame_end(&b->frame, b->frame_start);
    if (b->frame.failed) return elastic__fail(ELASTIC_ENOMEM, "store batch: out of memory");
    /* A batch is not sent again over a new connection: its adds would count twice. */
    store__call_opts co = { false, b->wait_ms >= 0
                                       ? elastic__now_ms() + (uint64_t)b->wait_ms + WAIT_GRACE_MS
                                       : elastic__deadline_ms(b->store->timeout_ms) };
    uint8_t *body = NULL;
    size_t len = 0;
    int err = store__call_run(b->store, STORE__OP_BATCH, &b->frame, &co, &body, &len);
    if (err != 0) return err;
    b->response = body;
    if (!split(b, body, len))
        return elastic__fail(ELASTIC_EPROTO, "store batch: malformed response");
    return 0;
}

/* answers[i]'s status, its text in elastic_last_error() when it failed. */
static int answer_status(store__batch *b, uint32_t i, const store__batch_answer **a)
{
    if (i >= b->n || b->response == NULL)
        return elastic__fail(ELASTIC_EINVAL, "store batch: no answer %u", i);
    *a = &b->answers[i];
    if ((*a)->status == 0) return 0;
    int status = (*a)->status;
    return elastic__fail(status, "%.*s", (int)(*a)->len, (const char *)(*a)->body);
}

int store__batch_int(store__batch *b, uint32_t i, int64_t *out)
{
    const store__batch_answer *a = NULL;
    int err = answer_status(b, i, &a);
    if (err != 0) return err;
    bytes__reader r = bytes__reader_of(a->body, a->len);
    *out = (int64_t)bytes__read_u64(&r);
    return r.bad ? elastic__fail(ELASTIC_EPROTO, "store batch: malformed add answer") : 0;
}

int store__batch_value(store__batch *b, uint32_t i, void **value, size_t *len)
{
    const store__batch_answer *a = NULL;
    *value = NULL;
    int err = answer_status(b, i, &a);
    if (err != 0) return err;
    bytes__reader r = bytes__reader_of(a->body, a->len);
    (void)bytes__read_u64(&r); /* the key's revision */
    uint32_t value_len;
    const uint8_t *data = bytes__read_bytes(&r, UINT32_MAX, &value_len);
    if (r.bad) return elastic__fail(ELASTIC_EPROTO, "store batch: malformed get answer");
    err = store__copy_value(data, value_len, value, len);
    return err != 0 ? elastic__fail(err, "store batch: out of memory") : 0;
}

int store__batch_values(store__batch *b, uint32_t i, size_t n, void **values, size_t *lens)
{
    const store__batch_answer *a = NULL;
    int err = answer_status(b, i, &a);
    if (err != 0) return err;
    err = store__read_values(a->body, a->len, n, values, lens);
    if (err == ELASTIC_EPROTO)
        return elastic__fail(ELASTIC_EPROTO, "store batch: malformed multi_get answer");
    return err != 0 ? elastic__fail(err, "store batch: out of memory") : 0;
}

int store__batch_keys_answer(store__batch *b, uint32_t i, char ***keys, size_t *n)
{
    const store__batch_answer *a = NULL;
    *keys = NULL;
    *n = 0;
    int err = answer_status(b, i, &a);
    if (err != 0) return err;
    bytes__reader r = bytes__reader_of(a->body, a->len);
    uint32_t count = bytes__read_u32(&r);
    err = r.bad ? ELASTIC_EPROTO : store__build_key_list(b->store, &r, count, keys);
    if (err == ELASTIC_EPROTO) return elastic__fail(err, "store batch: malformed keys answer");
    if (err != 0) return elastic__fail(err, "store batch: out of memory");
    *n = count;
    return 0;
}

void store__batch_free(store__batch *b)
{
    bytes__buf_free(&b->frame);
    free(b->response);
    b->response = NULL;
}
