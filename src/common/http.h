/*
 * Just enough HTTP/1.x for the agent's metrics endpoint and for reading it
 * back: a bounded, allocation-free request-head parser (http.c, fuzzed) and a
 * one-shot GET client with one deadline (http_client.c).
 */
#ifndef ELASTIC_COMMON_HTTP_H
#define ELASTIC_COMMON_HTTP_H

#include "common/text.h"

#include <stddef.h>

#define ELASTIC__HTTP_MAX_HEAD   8192
#define ELASTIC__HTTP_MAX_TARGET 256

typedef struct elastic__http_request {
    char method[8];
    char path[ELASTIC__HTTP_MAX_TARGET]; /* the target without its query */
    int status; /* on failure: the status to answer (400, 405, 414, 431, 505) */
} elastic__http_request;

/* Parses a request head from the bytes received so far. 0: incomplete (read
 * more); > 0: complete, the head's length; < 0: ELASTIC_EPROTO (or ELIMIT) with
 * req->status set. Only GET and HEAD without a body are accepted. */
int elastic__http_parse(const char *buf, size_t len, elastic__http_request *req);

/* GET http://endpoint/path (endpoint "host:port", IPv4 or a name) with a
 * deadline for the whole exchange; the body (at most 16 MiB) goes to body,
 * the HTTP status to *status. */
int elastic__http_get(const char *endpoint, const char *path, int timeout_ms, elastic__text *body,
                      int *status);

#endif /* ELASTIC_COMMON_HTTP_H */
