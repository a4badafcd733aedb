/*
 * The store's wire protocol, shared by the server, the client and the fuzz
 * target: constants, frames (written with common/bytes.h's little-endian
 * buffers) and the bounded parser that turns a request frame into a
 * validated request.
 * docs/PROTOCOL.md is the prose version of this file.
 */
#ifndef ELASTIC_STORE_PROTOCOL_H
#define ELASTIC_STORE_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"

#define STORE__MAGIC         "ELST"
#define STORE__VERSION       1
#define STORE__NONCE_BYTES   32
#define STORE__PROOF_BYTES   32
#define STORE__HELLO_BYTES   (4 + 2 + 2 + STORE__NONCE_BYTES)
#define STORE__WELCOME_BYTES (4 + 2 + 2 + STORE__NONCE_BYTES + STORE__PROOF_BYTES)
#define STORE__READY_BYTES   4
/* The request id of frames nobody awaits (the ticker's keep-alives, the
 * revokes sent on close). A keep-alive with it that succeeds gets no
 * response: at thousands of nodes the answers would only wake readers. */
#define STORE__KEEPALIVE_ID UINT32_MAX
#define STORE__WELCOME_AUTH 0x1u /* welcome flags: the server requires a proof */
/* The server refuses this connection (a limit): the nonce and proof bytes
 * hold the reason, NUL-padded text, and the server closes. Sent unasked,
 * before the hello is read; older clients see a failed handshake. */
#define STORE__WELCOME_REFUSED 0x2u
/* Welcome flag: this server executes BATCH. Older clients ignore it; a
 * client does not send BATCH to a server without it (docs/PROTOCOL.md). */
#define STORE__WELCOME_BATCH 0x4u

#define STORE__HEADER_BYTES   12
#define STORE__FLAG_NOWAIT    0x1u      /* get: answer ENOTFOUND at once instead of waiting */
#define STORE__FLAG_STOP      0x2u      /* batch: an operation that fails cancels the rest */
#define STORE__MAX_LIST       65536u    /* keys in one wait/multi_get/multi_set */
#define STORE__MAX_BATCH      16u       /* operations in one batch */
#define STORE__BATCH_OP_BYTES 8u        /* a batched operation's head: u16 op, u16 flags, u32 len */
#define STORE__MAX_WAIT_MS    86400000u /* a server-side wait lasts at most a day */
#define STORE__MAX_ERROR_TEXT 256u

enum store__op {
    STORE__OP_SET = 1,
    STORE__OP_GET = 2,
    STORE__OP_ADD = 3,
    STORE__OP_CAS = 4,
    STORE__OP_WAIT = 5,
    STORE__OP_DELETE = 6,
    STORE__OP_COUNT = 7,
    STORE__OP_APPEND = 8,
    STORE__OP_MULTI_GET = 9,
    STORE__OP_MULTI_SET = 10,
    STORE__OP_KEYS = 11,
    STORE__OP_WATCH = 12,
    STORE__OP_LEASE_GRANT = 13,
    STORE__OP_LEASE_KEEPALIVE = 14,
    STORE__OP_LEASE_REVOKE = 15,
    STORE__OP_SET_LEASED = 16,
    STORE__OP_PING = 17,
    STORE__OP_BATCH = 18,
    STORE__OP_END_
};

/* ---- frames -------------------------------------------------------------- */

/* Every frame after the handshake: body_len, id, op (request) or status
 * (response, a negative ELASTIC_E* or 0), flags; then body_len bytes. */
typedef struct store__header {
    uint32_t body_len;
    uint32_t id;
    int32_t op_or_status; /* u16 op on requests, i16 status on responses */
    uint16_t flags;
} store__header;

void store__header_decode(const uint8_t *p, bool response, store__header *h);
/* Starts a frame in b; store__frame_end() patches its body length. */
size_t store__frame_begin(bytes__buf *b, uint32_t id, int op_or_status, uint16_t flags);
void store__frame_end(bytes__buf *b, size_t frame_start);

/* ---- parsing ------------------------------------------------------------- */

typedef struct store__limits {
    size_t max_key_bytes;
    size_t max_value_bytes;
} store__limits;

typedef struct store__slice {
    const uint8_t *ptr;
    uint32_t len;
} store__slice;

/* A request after validation: every key is 1..max_key_bytes without NUL
 * bytes (a prefix may be empty), every value within max_value_bytes. */
typedef struct store__request {
    uint32_t id;
    uint16_t op;
    uint16_t flags;
    store__slice key; /* the key, or the prefix of count/keys/watch */
    store__slice value;
    store__slice expected;
    bool has_expected;
    int64_t delta;
    uint64_t number; /* lease id, watch revision */
    uint32_t timeout_ms;
    uint32_t ttl_ms;
    uint32_t max;
    uint32_t n;          /* entries in list */
    const uint8_t *list; /* n keys, n (key, value) pairs for multi_set, n operations for batch */
    size_t list_len;
} store__request;

/* Parses a request body. On failure returns ELASTIC_EPROTO (malformed),
 * ELASTIC_EINVAL (a bad key) or ELASTIC_ELIMIT (a size limit) and points
 * *why at a static sentence. */
int store__parse_request(const store__header *h, const uint8_t *body, const store__limits *limits,
                         store__request *req, const char **why);
/* Walks the validated list of a request: the next key (and value for
 * multi_set). */
void store__list_next(bytes__reader *r, bool with_values, store__slice *key, store__slice *value);

/* Walks the validated operations of a batch: the next one, parsed as a
 * request of its own with the batch's id; its parse result, which is 0 on
 * a list that store__parse_request accepted. */
int store__batch_next(bytes__reader *r, const store__limits *limits, uint32_t id,
                      store__request *sub);
/* Whether a request may park on the server (get without NOWAIT, wait,
 * multi_get, watch): in a batch only the last operation may. */
bool store__request_waits(const store__request *req);

const char *store__op_name(int op);

#endif /* ELASTIC_STORE_PROTOCOL_H */
