/*
 * The replica channel's requests and answers (after the handshake), all
 * little-endian, every field bounded by the receiver:
 *
 *   request: "ELRQ" u32 op u64 step u64 generation u32 rank u32 world
 *            u32 kind u32 origin_len u64 length, then origin (0..64 bytes)
 *   answer:  "ELRA" i32 status u64 length u32 message_len, then the message
 *            (0..256 bytes)
 *
 * PUT: request (length: the file's size); answer "go" (status 0) or a
 * refusal (ELASTIC_ENOSPC over the limit, ELASTIC_EINVAL...); then the
 * bytes; then the final answer. GET: request (length 0); answer with the
 * file's length, then the bytes; or a refusal (ELASTIC_ENOTFOUND).
 */
#ifndef ELASTIC_REPLICA_WIRE_H
#define ELASTIC_REPLICA_WIRE_H

#include "replica/replica.h"

#include <limits.h>

#define REPLICA_OP_PUT  1u
#define REPLICA_OP_GET  2u
#define REPLICA_MSG_MAX 256u
/* A shard is at most this large (the reader bounds blobs by max_blob_bytes). */
#define REPLICA_FILE_MAX (1ull << 40)

typedef struct replica_request {
    uint32_t op;
    replica_file_id id;
    uint64_t length;
} replica_request;

int replica__send_request(replica_conn *c, const replica_request *r, uint64_t deadline_ms);
/* Reads and checks one request. ELASTIC_EPROTO (with the reason) when it
 * breaks a bound: the connection is then closed. */
int replica__recv_request(replica_conn *c, replica_request *r, uint64_t deadline_ms);
int replica__send_answer(replica_conn *c, int status, uint64_t length, const char *message,
                         uint64_t deadline_ms);
/* *status: the peer's verdict (0 or an ELASTIC_E* code; its message is then
 * the error detail). Returns the transport's failure, else 0. */
int replica__recv_answer(replica_conn *c, int *status, uint64_t *length, uint64_t deadline_ms);
/* The largest file a request for `id` may carry. */
uint64_t replica__file_max(const replica_file_id *id);
/* "<dir>/step-N/<shard-R-gG.elck | COMMIT>" */
void replica__file_path(const char *dir, const replica_file_id *id, char *out, size_t cap);
/* A file being received: created under a temporary name beside `path`,
 * room reserved in the tier (NULL: none); then filled from the connection
 * (the transport's recv_file: tcp splices; else through a small buffer),
 * then renamed into place (keep) or removed (drop). */
typedef struct replica_incoming {
    char path[PATH_MAX + 128], tmp[PATH_MAX + 200];
    int fd;        /* open for reading and writing until keep or drop */
    bool recycled; /* a spare file's pages, already allocated and written */
    uint64_t len;
} replica_incoming;

/* recycle: a file to reuse (renamed to the temporary name) when it exists. */
int replica__incoming_open(const char *path, uint64_t len, const ckpt_mem_tier *tier,
                           const char *recycle, replica_incoming *in);
int replica__incoming_receive(replica_conn *c, replica_incoming *in, uint64_t deadline_ms);
/* Renames it into place (and frees it); on failure it is removed. */
int replica__incoming_keep(replica_incoming *in);
void replica__incoming_drop(replica_incoming *in);

#endif /* ELASTIC_REPLICA_WIRE_H */
