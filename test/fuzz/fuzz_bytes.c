/* libFuzzer target for src/common/bytes.c: the input is both a script of
 * reads and the bytes read. Every value read is written back; the writer's
 * output must equal the bytes the reader consumed, a fixed writer must hold a
 * prefix of it within its array, and a failed read must consume nothing. */
#include "common/bytes.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One read of the kind `op` names, mirrored into both writers. */
static void read_one(uint8_t op, bytes__reader *r, bytes__buf *grown, bytes__buf *fixed)
{
    size_t left = r->left;
    bool was_bad = r->bad;
    switch (op % 5) {
    case 0: {
        uint8_t v = bytes__read_u8(r);
        if (!r->bad) bytes__put_u8(grown, v), bytes__put_u8(fixed, v);
        break;
    }
    case 1: {
        uint16_t v = bytes__read_u16(r);
        if (!r->bad) bytes__put_u16(grown, v), bytes__put_u16(fixed, v);
        break;
    }
    case 2: {
        uint32_t v = bytes__read_u32(r);
        if (!r->bad) bytes__put_u32(grown, v), bytes__put_u32(fixed, v);
        break;
    }
    case 3: {
        uint64_t v = bytes__read_u64(r);
        if (!r->bad) bytes__put_u64(grown, v), bytes__put_u64(fixed, v);
        break;
    }
    default: {
        uint32_t len = 0;
        const uint8_t *p = bytes__read_bytes(r, op / 5u * 4u, &len);
        if (!r->bad)
            bytes__put_bytes(grown, p, len), bytes__put_bytes(fixed, p, len);
        else if (p != NULL || len != 0)
            abort();
        break;
    }
    }
    if (r->bad && !was_bad && left - r->left > 4) abort(); /* at most a length prefix consumed */
    if (was_bad && (r->left != left || !r->bad)) abort();  /* sticky: nothing moves */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    size_t fixed_cap = data[0];
    size_t nops = data[1];
    if (nops > size - 2) nops = size - 2;
    const uint8_t *ops = data + 2, *body = data + 2 + nops;
    size_t body_len = size - 2 - nops;

    uint8_t array[256 + 1];
    array[fixed_cap] = 0x5a; /* a canary right after the fixed writer's array */
    bytes__buf grown = { 0 }, fixed = bytes__buf_over(array, fixed_cap);
    bytes__reader r = bytes__reader_of(body, body_len);
    size_t consumed_ok = 0;
    for (size_t i = 0; i < nops; i++) {
        read_one(ops[i], &r, &grown, &fixed);
        if (!r.bad) consumed_ok = body_len - r.left;
    }
    if (grown.failed || grown.len != consumed_ok) abort();
    if (grown.len > 0 && memcmp(grown.data, body, grown.len) != 0) abort();
    if (fixed.len > fixed_cap || array[fixed_cap] != 0x5a || fixed.data != array) abort();
    if (fixed.len > 0 && memcmp(array, body, fixed.len) != 0) abort();
    if (!fixed.failed && fixed.len != grown.len) abort();
    bytes__buf_consume(&grown, grown.len / 2);
    if (grown.len != consumed_ok - consumed_ok / 2) abort();
    bytes__buf_free(&grown);
    return 0;
}
