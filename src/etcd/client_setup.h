/*
 * What a request to etcd's JSON gateway (etcd_http.c) and a stream on etcd's
 * native gRPC API (lease_stream.c) share: the client's endpoints, TLS, auth
 * token and wire counter, which only etcd_http.c holds.
 */
#ifndef ELASTIC_ETCD_CLIENT_SETUP_H
#define ELASTIC_ETCD_CLIENT_SETUP_H

#include "etcd/curl_loader.h"
#include "etcd/etcd.h"

/* Sets on h the URL of `path` at `endpoint`, TLS, the connect timeout
 * (bounded by timeout_ms) and appends to headers the require-leader metadata
 * and the auth token, as the gateway wants them (grpc false) or as gRPC
 * does; sets CURLOPT_HTTPHEADER to the list and returns it (the caller frees
 * it after the transfer). */
struct curl_slist *etcd__client_setup(etcd__client *c, CURL *h, size_t endpoint, const char *path,
                                      bool grpc, int timeout_ms, struct curl_slist *headers);
/* The endpoint that answered last (where a stream is opened first). */
size_t etcd__client_preferred(etcd__client *c);
/* "http(s)://host:port" of one endpoint. */
const char *etcd__client_endpoint(const etcd__client *c, size_t endpoint);
/* Adds to the wire counter (etcd__client_count_wire), if any. */
void etcd__client_add_wire(etcd__client *c, uint64_t bytes);

#endif /* ELASTIC_ETCD_CLIENT_SETUP_H */
