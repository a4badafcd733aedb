/*
 * TLS 1.3 with a pre-shared key derived from the store token, over memory
 * buffers: the caller feeds bytes from the network and sends the bytes TLS
 * produces (the server from its libuv loop, the client from its socket).
 * One store__tls is used by one thread at a time (the client locks).
 */
#ifndef ELASTIC_STORE_TLS_H
#define ELASTIC_STORE_TLS_H

#include "store/store.h"

typedef struct store__tls store__tls;

int store__tls_new(bool server, const char *token, store__tls **out);
void store__tls_free(store__tls *tls);
/* 1: done; 0: needs more input (send the output first); else ELASTIC_EAUTH
 * with *why set. */
int store__tls_handshake(store__tls *tls, const char **why);
/* Bytes that arrived from the network (false: out of memory). */
bool store__tls_feed(store__tls *tls, const void *data, size_t len);
/* Decrypts into buf: *got bytes (0 when more input is needed); else
 * ELASTIC_ECONNECT (closed) or ELASTIC_EAUTH (a record failed its check). */
int store__tls_read(store__tls *tls, void *buf, size_t cap, size_t *got, const char **why);
/* Whether input is waiting to be decrypted (fed or decrypted but unread). */
bool store__tls_has_input(const store__tls *tls);
size_t store__tls_input_bytes(const store__tls *tls);
/* Encrypts a whole buffer into the output. */
int store__tls_write(store__tls *tls, const void *data, size_t len);
size_t store__tls_output_bytes(const store__tls *tls);
size_t store__tls_take_output(store__tls *tls, void *buf, size_t cap);

#endif /* ELASTIC_STORE_TLS_H */
