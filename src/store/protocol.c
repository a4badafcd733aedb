/*
 * Wire encoding shared by the store's server and client: frame headers
 * (written with common/bytes.h) and the request parser every byte from the
 * network passes through (fuzzed by test/fuzz/fuzz_store_frame.c).
 */
#include "store/protocol.h"

#include "common/common.h"

#include <stdlib.h>

/* ---- frames -------------------------------------------------------------- */

void store__header_decode(const uint8_t *p, bool response, store__header *h)
{
    h->body_len = bytes__le32(p);
    h->id = bytes__le32(p + 4);
    uint16_t word = bytes__le16(p + 8);
    h->op_or_status = response ? (int32_t)(int16_t)word : (int32_t)word;
    h->flags = bytes__le16(p + 10);
}

size_t store__frame_begin(bytes__buf *b, uint32_t id, int op_or_status, uint16_t flags)
{
    size_t start = b->len;
    bytes__put_u32(b, 0);
    bytes__put_u32(b, id);
    bytes__put_u16(b, (uint16_t)(int16_t)op_or_status);
    bytes__put_u16(b, flags);
    return start;
}

void store__frame_end(bytes__buf *b, size_t frame_start)
{
    if (b->failed) return;
    size_t body = b->len - frame_start - STORE__HEADER_BYTES;
    if (body > UINT32_MAX) {
        b->failed = true;
        return;
    }
    bytes__set_le32(b->data + frame_start, (uint32_t)body);
}

/* ---- request parser ------------------------------------------------------ */

typedef struct parse_state {
    bytes__reader r;
    const store__limits *limits;
    int err;
    const char *why;
} parse_state;

static void parse_fail(parse_state *ps, int err, const char *why)
{
    if (ps->err == 0) {
        ps->err = err;
        ps->why = why;
    }
}

/* A key (allow_empty: a prefix) bounded by max_key_bytes, without NUL. */
static store__slice parse_key(parse_state *ps, bool allow_empty)
{
    store__slice s = { NULL, 0 };
    if (!ps->r.bad && ps->r.left >= 4 && bytes__le32(ps->r.p) > ps->limits->max_key_bytes) {
        parse_fail(ps, ELASTIC_ELIMIT, "key longer than max_key_bytes");
        ps->r.bad = true;
        return s;
    }
    s.ptr = bytes__read_bytes(&ps->r, ps->limits->max_key_bytes, &s.len);
    if (ps->r.bad) return s;
    if (s.len == 0 && !allow_empty) parse_fail(ps, ELASTIC_EINVAL, "empty key");
    if (s.len > 0 && memchr(s.ptr, 0, s.len) != NULL)
        parse_fail(ps, ELASTIC_EINVAL, "key contains a NUL byte");
    return s;
}

static store__slice parse_value(parse_state *ps)
{
    store__slice s = { NULL, 0 };
    if (!ps->r.bad && ps->r.left >= 4 && bytes__le32(ps->r.p) > ps->limits->max_value_bytes) {
        parse_fail(ps, ELASTIC_ELIMIT, "value larger than max_value_bytes");
        ps->r.bad = true;
        return s;
    }
    s.ptr = bytes__read_bytes(&ps->r, ps->limits->max_value_bytes, &s.len);
    return s;
}

static uint32_t parse_timeout(parse_state *ps)
{
    uint32_t ms = bytes__read_u32(&ps->r);
    return ms > STORE__MAX_WAIT_MS ? STORE__MAX_WAIT_MS : ms;
}

/* n keys (or key/value pairs), remembered as a span to walk later. */
static void parse_list(parse_state *ps, store__request *req, bool with_values)
{
    req->n = bytes__read_u32(&ps->r);
    if (ps->r.bad) return;
    if (req->n == 0 || req->n > STORE__MAX_LIST) {
        parse_fail(ps, ELASTIC_ELIMIT, "key count is 0 or above the limit");
        ps->r.bad = true;
        return;
    }
    req->list = ps->r.p;
    for (uint32_t i = 0; i < req->n && !ps->r.bad && ps->err == 0; i++) {
        parse_key(ps, false);
        if (with_values) parse_value(ps);
    }
    req->list_len = (size_t)(ps->r.p - req->list);
}

bool store__request_waits(const store__request *req)
{
    return (req->op == STORE__OP_GET && !(req->flags & STORE__FLAG_NOWAIT)) ||
           req->op == STORE__OP_WAIT || req->op == STORE__OP_MULTI_GET ||
           req->op == STORE__OP_WATCH;
}

/* n operations, each a u16 op, u16 flags, u32 body length and a body that
 * must parse as that request would alone; no batch inside a batch, and
 * only the last may wait. Remembered as a span to walk later. */
static void parse_batch(parse_state *ps, store__request *req)
{
    req->n = bytes__read_u32(&ps->r);
    if (ps->r.bad) return;
    if (req->n == 0 || req->n > STORE__MAX_BATCH) {
        parse_fail(ps, ELASTIC_ELIMIT, "a batch holds 1 to 16 operations");
        ps->r.bad = true;
        return;
    }
    if (req->id == STORE__KEEPALIVE_ID) {
        parse_fail(ps, ELASTIC_EINVAL, "a batch must be answered (its id is the no-answer id)");
        return;
    }
    req->list = ps->r.p;
    for (uint32_t i = 0; i < req->n && !ps->r.bad && ps->err == 0; i++) {
        store__header h = { .id = req->id };
        h.op_or_status = bytes__read_u16(&ps->r);
        h.flags = bytes__read_u16(&ps->r);
        h.body_len = bytes__read_u32(&ps->r);
        if (ps->r.bad) return;
        if (h.body_len > ps->r.left) {
            ps->r.bad = true;
            return;
        }
        if (h.op_or_status == STORE__OP_BATCH) {
            parse_fail(ps, ELASTIC_EPROTO, "a batch inside a batch");
            return;
        }
        store__request sub;
        const char *why = NULL;
        int err = store__parse_request(&h, ps->r.p, ps->limits, &sub, &why);
        if (err != 0) {
            parse_fail(ps, err, why);
            return;
        }
        if (i + 1 < req->n && store__request_waits(&sub)) {
            parse_fail(ps, ELASTIC_EINVAL, "only the last operation of a batch may wait");
            return;
        }
        ps->r.p += h.body_len;
        ps->r.left -= h.body_len;
    }
    req->list_len = (size_t)(ps->r.p - req->list);
}

int store__batch_next(bytes__reader *r, const store__limits *limits, uint32_t id,
                      store__request *sub)
{
    store__header h = { .id = id };
    h.op_or_status = bytes__read_u16(r);
    h.flags = bytes__read_u16(r);
    h.body_len = bytes__read_u32(r);
    if (r->bad || h.body_len > r->left) {
        r->bad = true;
        return ELASTIC_EPROTO;
    }
    const char *why = NULL;
    int err = store__parse_request(&h, r->p, limits, sub, &why);
    r->p += h.body_len;
    r->left -= h.body_len;
    return err;
}

static void parse_body(parse_state *ps, store__request *req)
{
    switch (req->op) {
    case STORE__OP_SET:
    case STORE__OP_APPEND:
        req->key = parse_key(ps, false);
        req->value = parse_value(ps);
        break;
    case STORE__OP_SET_LEASED:
        req->key = parse_key(ps, false);
        req->value = parse_value(ps);
        req->number = bytes__read_u64(&ps->r);
        break;
    case STORE__OP_GET:
        req->key = parse_key(ps, false);
        req->timeout_ms = parse_timeout(ps);
        break;
    case STORE__OP_ADD:
        req->key = parse_key(ps, false);
        req->delta = (int64_t)bytes__read_u64(&ps->r);
        break;
    case STORE__OP_CAS:
        req->key = parse_key(ps, false);
        req->has_expected = bytes__read_u8(&ps->r) != 0;
        req->expected = parse_value(ps);
        req->value = parse_value(ps);
        break;
    case STORE__OP_WAIT:
    case STORE__OP_MULTI_GET:
        parse_list(ps, req, false);
        req->timeout_ms = parse_timeout(ps);
        break;
    case STORE__OP_MULTI_SET: parse_list(ps, req, true); break;
    case STORE__OP_DELETE: req->key = parse_key(ps, false); break;
    case STORE__OP_COUNT: req->key = parse_key(ps, true); break;
    case STORE__OP_KEYS:
        req->key = parse_key(ps, true);
        req->max = bytes__read_u32(&ps->r);
        break;
    case STORE__OP_WATCH:
        req->key = parse_key(ps, true);
        req->number = bytes__read_u64(&ps->r);
        req->timeout_ms = parse_timeout(ps);
        break;
    case STORE__OP_LEASE_GRANT:
        req->ttl_ms = bytes__read_u32(&ps->r);
        if (!ps->r.bad && (req->ttl_ms == 0 || req->ttl_ms > STORE__MAX_WAIT_MS))
            parse_fail(ps, ELASTIC_EINVAL, "lease ttl must be 1 ms .. 1 day");
        break;
    case STORE__OP_LEASE_KEEPALIVE:
    case STORE__OP_LEASE_REVOKE: req->number = bytes__read_u64(&ps->r); break;
    case STORE__OP_PING: break;
    case STORE__OP_BATCH: parse_batch(ps, req); break;
    default: parse_fail(ps, ELASTIC_EPROTO, "unknown operation"); break;
    }
}

int store__parse_request(const store__header *h, const uint8_t *body, const store__limits *limits,
                         store__request *req, const char **why)
{
    memset(req, 0, sizeof *req);
    req->id = h->id;
    req->op = (uint16_t)h->op_or_status;
    req->flags = h->flags;
    parse_state ps = { bytes__reader_of(body, h->body_len), limits, 0, NULL };
    parse_body(&ps, req);
    if (ps.err == 0 && ps.r.bad) parse_fail(&ps, ELASTIC_EPROTO, "request body is truncated");
    if (ps.err == 0 && ps.r.left != 0)
        parse_fail(&ps, ELASTIC_EPROTO, "request body has trailing bytes");
    *why = ps.why;
    return ps.err;
}

void store__list_next(bytes__reader *r, bool with_values, store__slice *key, store__slice *value)
{
    key->ptr = bytes__read_bytes(r, UINT32_MAX, &key->len);
    if (with_values) value->ptr = bytes__read_bytes(r, UINT32_MAX, &value->len);
}

const char *store__op_name(int op)
{
    static const char *const names[STORE__OP_END_] = {
        [STORE__OP_SET] = "set",
        [STORE__OP_GET] = "get",
        [STORE__OP_ADD] = "add",
        [STORE__OP_CAS] = "compare_set",
        [STORE__OP_WAIT] = "wait",
        [STORE__OP_DELETE] = "delete",
        [STORE__OP_COUNT] = "num_keys",
        [STORE__OP_APPEND] = "append",
        [STORE__OP_MULTI_GET] = "multi_get",
        [STORE__OP_MULTI_SET] = "multi_set",
        [STORE__OP_KEYS] = "keys",
        [STORE__OP_WATCH] = "watch",
        [STORE__OP_LEASE_GRANT] = "lease_grant",
        [STORE__OP_LEASE_KEEPALIVE] = "lease_keepalive",
        [STORE__OP_LEASE_REVOKE] = "lease_revoke",
        [STORE__OP_SET_LEASED] = "set_leased",
        [STORE__OP_PING] = "ping",
        [STORE__OP_BATCH] = "batch",
    };
    if (op <= 0 || op >= STORE__OP_END_ || names[op] == NULL) return "unknown";
    return names[op];
}
