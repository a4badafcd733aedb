/* libFuzzer target for the keep-alive stream's reply decoder
 * (src/etcd/lease_stream.c, etcd__lease_reply_take): arbitrary bytes as
 * what the stream received must give -1, 0 or 1 and never take more than
 * was given; and a reply built here from the first 16 bytes (ID and TTL, a
 * header of the following bytes) must decode to exactly that ID and TTL. */
#include "etcd/lease_stream.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t varint(unsigned char *out, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80; v >>= 7) out[n++] = (unsigned char)(v | 0x80);
    out[n++] = (unsigned char)v;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t used = 0;
    int64_t id = 0, ttl = 0;
    int rc = etcd__lease_reply_take(data, size, &used, &id, &ttl);
    if (rc < -1 || rc > 1 || used > size || (rc == 0 && used != 0)) abort();
    if (size < 16) return 0;
    uint64_t want_id, want_ttl;
    memcpy(&want_id, data, 8);
    memcpy(&want_ttl, data + 8, 8);
    size_t header_len = size - 16 > 200 ? 200 : size - 16;
    unsigned char frame[512];
    size_t at = 5;
    frame[at++] = 0x0a; /* field 1 (header), length-delimited */
    at += varint(frame + at, header_len);
    memcpy(frame + at, data + 16, header_len);
    at += header_len;
    frame[at++] = 0x10; /* field 2 (ID) */
    at += varint(frame + at, want_id);
    frame[at++] = 0x18; /* field 3 (TTL) */
    at += varint(frame + at, want_ttl);
    size_t message = at - 5;
    frame[0] = 0;
    frame[1] = frame[2] = 0;
    frame[3] = (unsigned char)(message >> 8);
    frame[4] = (unsigned char)message;
    if (etcd__lease_reply_take(frame, at, &used, &id, &ttl) != 1 || used != at ||
        (uint64_t)id != want_id || (uint64_t)ttl != want_ttl)
        abort();
    /* Any shorter prefix is "not yet". */
    if (etcd__lease_reply_take(frame, at - 1, &used, &id, &ttl) != 0) abort();
    return 0;
}
