/*
 * A lease's keep-alives on one gRPC stream of etcd's (lease_stream.c says
 * why and how). One thread uses a stream at a time.
 */
#ifndef ELASTIC_ETCD_LEASE_STREAM_H
#define ELASTIC_ETCD_LEASE_STREAM_H

#include "etcd/etcd.h"

typedef struct etcd__lease_stream etcd__lease_stream;

/* A stream object (nothing is opened until the first keep-alive); NULL when
 * out of memory. */
etcd__lease_stream *etcd__lease_stream_new(etcd__client *client);
/* One keep-alive of `lease` within timeout_ms (first_ms when the stream is
 * not open yet: it has not proven itself): 1 while the lease lives (*ttl_s:
 * the TTL etcd keeps it for), 0 when etcd no longer has it; < 0 when the
 * stream failed (it is closed) or is off for now after failures
 * (ELASTIC_EUNSUPPORTED): the caller asks the JSON gateway instead. */
int etcd__lease_stream_keep_alive(etcd__lease_stream *s, int64_t lease, int timeout_ms,
                                  int first_ms, int64_t *ttl_s);
void etcd__lease_stream_free(etcd__lease_stream *s);

/* One LeaseKeepAliveResponse in gRPC's framing from the first len bytes of
 * what the stream received: 1 (*used bytes taken, *id and *ttl read), 0 (not
 * all of it yet), -1 (malformed: compressed, over 512 bytes, or bad
 * protobuf). What fuzz_etcd_keepalive_reply feeds. */
int etcd__lease_reply_take(const unsigned char *in, size_t len, size_t *used, int64_t *id,
                           int64_t *ttl);

#endif /* ELASTIC_ETCD_LEASE_STREAM_H */
