/*
 * The etcd v3 client (the etcd rendezvous backend runs on it): JSON over HTTP to
 * etcd's gRPC gateway (/v3/...), libcurl for transport, json-c for JSON; a
 * lease's keep-alives ride a gRPC stream instead (lease_stream.h).
 * Failover across endpoints, TLS and user/password auth, a deadline on every
 * call, bounded and validated responses. See docs/RDZV.md "etcd".
 */
#ifndef ELASTIC_ETCD_ETCD_H
#define ELASTIC_ETCD_ETCD_H

#include "common/common.h"

#include <json-c/json.h>
#include <pthread.h>

#define ETCD__MAX_ENDPOINTS      16
#define ETCD__MAX_RESPONSE       (8u << 20) /* one reply; a larger one is an error */
#define ETCD__MAX_VALUE          (1u << 20) /* one decoded key or value */
#define ETCD__DEFAULT_TIMEOUT_MS 5000       /* a call's deadline unless told otherwise */
#define ETCD__CONNECT_TIMEOUT_MS 1000       /* per endpoint, so a dead one costs little */
#define ETCD__POOL               8          /* idle curl handles kept (reused connections) */
#define ETCD__MAX_TTL_S          86400      /* a lease TTL etcd may plausibly grant */
#define ETCD__MAX_TXN_OPS        128 /* etcd's default --max-txn-ops: larger batches are split */
/* One reply or stream message as JSON: nesting (etcd's are 6 deep) and
 * values (arrays' elements and objects' members: ~75 bytes of json-c
 * objects each; an object, a hash table, ~700: it counts 8). At the bound
 * a message costs json-c ~100 MB at most; a listing of 65,536 keys with
 * their revisions (12 each) stays within. */
#define ETCD__MAX_DEPTH     16u
#define ETCD__MAX_ELEMENTS  (1u << 20)
#define ETCD__OBJECT_WEIGHT 8u

/* The bounds above, counted on the raw bytes before any parse
 * (json_bound.c): add each piece of one message in order; reset between
 * messages. */
typedef struct etcd__json_budget {
    size_t bytes, elements;
    unsigned depth;
    bool in_string, escape;
} etcd__json_budget;
void etcd__json_budget_reset(etcd__json_budget *b);
/* 0, or ELASTIC_ELIMIT with `why` naming the bound passed. */
int etcd__json_budget_add(etcd__json_budget *b, const char *text, size_t len, char *why,
                          size_t cap);
/* The one way etcd's JSON is parsed: strict JSON (what the budget counts is
 * what json-c reads), ETCD__MAX_DEPTH. A tokener for a stream (NULL: out of
 * memory), or one message parsed whole (NULL: not JSON). */
json_tokener *etcd__json_tokener(void);
json_object *etcd__json_parse(const char *text, size_t len);

/* What the backend is told (every string copied). */
typedef struct etcd__opts {
    const char *endpoints; /* "host:port[,host:port...]", http unless ca_file is set */
    const char *ca_file;   /* TLS: verify etcd against this CA (https) */
    const char *cert_file; /* TLS client certificate (with key_file) */
    const char *key_file;
    const char *user; /* etcd auth (with password) */
    const char *password;
    int timeout_ms; /* per call; 0: ETCD__DEFAULT_TIMEOUT_MS */
} etcd__opts;

typedef struct etcd__client etcd__client;

int etcd__client_open(const etcd__opts *opts, etcd__client **client);
void etcd__client_close(etcd__client *client);
/* Counts every HTTP byte sent and received into *counter (atomically). */
void etcd__client_count_wire(etcd__client *client, uint64_t *counter);
int etcd__client_timeout_ms(const etcd__client *client);
size_t etcd__client_endpoint_count(const etcd__client *client);

/* POSTs `body` (consumed) to `path` ("/v3/kv/range") on the endpoints in
 * turn until one answers, within timeout_ms. `retry_unsent_only`: after a
 * request may have reached etcd (a timeout mid-call), do not send it again.
 * *reply: the parsed JSON object (json_object_put). etcd's own errors map
 * to ELASTIC_E* codes with etcd's message. */
int etcd__call(etcd__client *c, const char *path, json_object *body, int timeout_ms,
               bool retry_unsent_only, json_object **reply);
/* The same for a request that is safe to repeat, no endpoint given longer
 * than attempt_ms of the timeout: one that holds it (a member that still
 * believes in a leader it cannot reach) costs that much, then the next
 * endpoint is tried. */
int etcd__call_each(etcd__client *c, const char *path, json_object *body, int timeout_ms,
                    int attempt_ms, json_object **reply);

/* Streaming call (/v3/watch): on_message runs for each JSON message in the
 * reply stream until it returns non-zero (that value is returned) or
 * timeout_ms passes (ELASTIC_ETIMEDOUT). A stream an endpoint drops is
 * re-opened on the next one with `reopen` asked for a new body. */
typedef int (*etcd__message_fn)(void *user, json_object *message);
typedef json_object *(*etcd__body_fn)(void *user);
int etcd__stream(etcd__client *c, const char *path, etcd__body_fn body, int timeout_ms,
                 etcd__message_fn on_message, void *user);

/* ---- JSON helpers (etcd_json.c) ---- */

/* base64 of bytes as a new json string. */
json_object *etcd__b64(const void *data, size_t len);
/* Decodes a base64 json string into a NUL-terminated buffer (free()). */
int etcd__unb64(json_object *value, char **out, size_t *len);
/* An int64 field that the gateway writes as a string ("12") or a number;
 * absent: dflt. ELASTIC_EPROTO when present and malformed. */
int etcd__json_i64(json_object *obj, const char *field, int64_t dflt, int64_t *out);
/* A member that must be an object/array when present; NULL when absent. */
json_object *etcd__json_field(json_object *obj, const char *field, json_type type);
/* The first byte string after every key with this prefix (prefix "a/" -> "a0"). */
void etcd__range_end(const char *prefix, char *out, size_t cap);

#endif /* ELASTIC_ETCD_ETCD_H */
