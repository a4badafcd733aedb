/*
 * Little-endian byte buffers shared by the store's wire protocol and the
 * checkpoint's on-disk format: a bounded writer (growable, or over the
 * caller's fixed array) and a bounded reader. Both have a sticky error: after
 * one refused write or short read every later call is a no-op, so an encoder
 * or decoder checks once at the end.
 */
#ifndef ELASTIC_COMMON_BYTES_H
#define ELASTIC_COMMON_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- fixed-width access at a known position ------------------------------ */

static inline uint16_t bytes__le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t bytes__le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t bytes__le64(const uint8_t *p)
{
    return (uint64_t)bytes__le32(p) | (uint64_t)bytes__le32(p + 4) << 32;
}
static inline void bytes__set_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void bytes__set_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void bytes__set_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- writer -------------------------------------------------------------- */

/* `= {0}` is an empty growable buffer bounded only by SIZE_MAX / 2; set
 * `limit` for a smaller bound, or use bytes__buf_over() for a fixed array. */
typedef struct bytes__buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    size_t limit; /* most bytes it may hold; 0: SIZE_MAX / 2 */
    bool fixed;   /* data is the caller's array of cap bytes: never grown nor freed */
    bool failed;  /* sticky: a write did not fit (memory, limit): the content is incomplete */
} bytes__buf;

/* A writer over the caller's array of `cap` bytes (writes beyond fail). */
static inline bytes__buf bytes__buf_over(void *array, size_t cap)
{
    bytes__buf b = { (uint8_t *)array, 0, cap, cap, true, false };
    return b;
}
/* Frees a growable buffer's memory and empties it (keeps limit and fixed). */
void bytes__buf_free(bytes__buf *b);
/* Room for `extra` more bytes; false (and failed set) when it cannot be had. */
bool bytes__buf_reserve(bytes__buf *b, size_t extra);
void bytes__put(bytes__buf *b, const void *data, size_t len);
void bytes__put_zeros(bytes__buf *b, size_t len);
void bytes__put_u8(bytes__buf *b, uint8_t v);
void bytes__put_u16(bytes__buf *b, uint16_t v);
void bytes__put_u32(bytes__buf *b, uint32_t v);
void bytes__put_u64(bytes__buf *b, uint64_t v);
/* A length-prefixed byte string: u32 length, then the bytes. */
void bytes__put_bytes(bytes__buf *b, const void *data, size_t len);
/* Drops the first n bytes (consumed input). */
void bytes__buf_consume(bytes__buf *b, size_t n);

/* ---- reader -------------------------------------------------------------- */

typedef struct bytes__reader {
    const uint8_t *p;
    size_t left;
    bool bad; /* sticky: a read ran past the end or over a bound; later reads yield zeros */
} bytes__reader;

static inline bytes__reader bytes__reader_of(const void *data, size_t len)
{
    bytes__reader r = { (const uint8_t *)data, len, false };
    return r;
}
/* The next n bytes, or NULL (and bad set) when fewer are left. */
const uint8_t *bytes__take(bytes__reader *r, size_t n);
uint8_t bytes__read_u8(bytes__reader *r);
uint16_t bytes__read_u16(bytes__reader *r);
uint32_t bytes__read_u32(bytes__reader *r);
uint64_t bytes__read_u64(bytes__reader *r);
/* A length-prefixed byte string; a length above `max` or past the end sets
 * bad. *len is 0 on failure. */
const uint8_t *bytes__read_bytes(bytes__reader *r, size_t max, uint32_t *len);

#endif /* ELASTIC_COMMON_BYTES_H */
