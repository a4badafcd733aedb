/*
 * libFuzzer target for the store's request parser: arbitrary bytes are cut
 * into frames exactly as the server does (header, length bound, body) and
 * each body is parsed and, when valid, walked like the server walks it
 * (a batch's operations too).
 */
#include "store/protocol.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A batch's operations: each valid alone, no batch among them, only the
 * last may wait, and nothing left over. */
static void walk_batch(const store__request *req, const store__limits *limits)
{
    bytes__reader r = bytes__reader_of(req->list, req->list_len);
    for (uint32_t i = 0; i < req->n; i++) {
        store__request sub;
        if (store__batch_next(&r, limits, req->id, &sub) != 0 || r.bad) __builtin_trap();
        if (sub.op == STORE__OP_BATCH || (i + 1 < req->n && store__request_waits(&sub)))
            __builtin_trap();
        if (sub.key.len > limits->max_key_bytes || sub.value.len > limits->max_value_bytes)
            __builtin_trap();
    }
    if (r.left != 0) __builtin_trap();
}

static void walk_list(const store__request *req)
{
    bool pairs = req->op == STORE__OP_MULTI_SET;
    bytes__reader r = bytes__reader_of(req->list, req->list_len);
    for (uint32_t i = 0; i < req->n; i++) {
        store__slice key, value;
        store__list_next(&r, pairs, &key, &value);
        if (r.bad || key.len == 0) __builtin_trap(); /* the parser promised a valid list */
    }
    if (r.left != 0) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const store__limits limits = { .max_key_bytes = 64, .max_value_bytes = 1024 };
    const size_t max_body = 4096;
    while (size >= STORE__HEADER_BYTES) {
        store__header h;
        store__header_decode(data, false, &h);
        if (h.body_len > max_body || h.body_len > size - STORE__HEADER_BYTES) break;
        store__request req;
        const char *why = NULL;
        int err = store__parse_request(&h, data + STORE__HEADER_BYTES, &limits, &req, &why);
        if (err != 0 && why == NULL) __builtin_trap(); /* every refusal says why */
        if (err == 0 && req.op == STORE__OP_BATCH)
            walk_batch(&req, &limits);
        else if (err == 0 && req.list != NULL)
            walk_list(&req);
        if (err == 0 && req.key.len > limits.max_key_bytes) __builtin_trap();
        if (err == 0 &&
            (req.value.len > limits.max_value_bytes || req.expected.len > limits.max_value_bytes))
            __builtin_trap();
        data += STORE__HEADER_BYTES + h.body_len;
        size -= STORE__HEADER_BYTES + h.body_len;
    }
    /* The buffer helpers the server frames responses with. */
    bytes__buf b = { 0 };
    size_t start = store__frame_begin(&b, 1, 0, 0);
    bytes__put_bytes(&b, data, size);
    store__frame_end(&b, start);
    if (!b.failed && b.len != STORE__HEADER_BYTES + 4 + size) __builtin_trap();
    bytes__buf_free(&b);
    return 0;
}
