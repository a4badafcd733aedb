/*
 * The little-endian writer and reader of common/bytes.h: every length is
 * checked before memory is touched, and the first failure sticks (fuzzed by
 * test/fuzz/fuzz_bytes.c).
 */
#include "common/bytes.h"

#include <stdlib.h>
#include <string.h>

#define BYTES_MAX_LIMIT (SIZE_MAX / 2)

static size_t limit_of(const bytes__buf *b)
{
    return b->limit == 0 || b->limit > BYTES_MAX_LIMIT ? BYTES_MAX_LIMIT : b->limit;
}

void bytes__buf_free(bytes__buf *b)
{
    if (!b->fixed) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
    b->len = 0;
    b->failed = false;
}

bool bytes__buf_reserve(bytes__buf *b, size_t extra)
{
    if (b->failed) return false;
    if (extra > limit_of(b) - b->len) {
        b->failed = true;
        return false;
    }
    size_t need = b->len + extra;
    if (need <= b->cap) return true;
    if (b->fixed) {
        b->failed = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2; /* need <= SIZE_MAX / 2: cannot wrap */
    uint8_t *grown = realloc(b->data, cap);
    if (grown == NULL) {
        b->failed = true;
        return false;
    }
    b->data = grown;
    b->cap = cap;
    return true;
}

void bytes__put(bytes__buf *b, const void *data, size_t len)
{
    if (!bytes__buf_reserve(b, len) || len == 0) return;
    memcpy(b->data + b->len, data, len);
    b->len += len;
}

void bytes__put_zeros(bytes__buf *b, size_t len)
{
    if (!bytes__buf_reserve(b, len) || len == 0) return;
    memset(b->data + b->len, 0, len);
    b->len += len;
}

void bytes__put_u8(bytes__buf *b, uint8_t v)
{
    bytes__put(b, &v, 1);
}

void bytes__put_u16(bytes__buf *b, uint16_t v)
{
    uint8_t p[2];
    bytes__set_le16(p, v);
    bytes__put(b, p, 2);
}

void bytes__put_u32(bytes__buf *b, uint32_t v)
{
    uint8_t p[4];
    bytes__set_le32(p, v);
    bytes__put(b, p, 4);
}

void bytes__put_u64(bytes__buf *b, uint64_t v)
{
    uint8_t p[8];
    bytes__set_le64(p, v);
    bytes__put(b, p, 8);
}

void bytes__put_bytes(bytes__buf *b, const void *data, size_t len)
{
    if (len > UINT32_MAX) {
        b->failed = true;
        return;
    }
    bytes__put_u32(b, (uint32_t)len);
    bytes__put(b, data, len);
}

void bytes__buf_consume(bytes__buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

const uint8_t *bytes__take(bytes__reader *r, size_t n)
{
    if (r->bad || n > r->left) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

uint8_t bytes__read_u8(bytes__reader *r)
{
    const uint8_t *p = bytes__take(r, 1);
    return p ? p[0] : 0;
}

uint16_t bytes__read_u16(bytes__reader *r)
{
    const uint8_t *p = bytes__take(r, 2);
    return p ? bytes__le16(p) : 0;
}

uint32_t bytes__read_u32(bytes__reader *r)
{
    const uint8_t *p = bytes__take(r, 4);
    return p ? bytes__le32(p) : 0;
}

uint64_t bytes__read_u64(bytes__reader *r)
{
    const uint8_t *p = bytes__take(r, 8);
    return p ? bytes__le64(p) : 0;
}

const uint8_t *bytes__read_bytes(bytes__reader *r, size_t max, uint32_t *len)
{
    *len = 0;
    uint32_t n = bytes__read_u32(r);
    if (r->bad) return NULL;
    if (n > max) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = bytes__take(r, n);
    if (p != NULL) *len = n;
    return p;
}
