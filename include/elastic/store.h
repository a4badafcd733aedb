/*
 * The job's key-value store: a server (embedded in an agent or standalone) and
 * a thread-safe client. Rendezvous, the agent, probes, the distributed
 * checkpoint commit and the NCCL id exchange all talk through it.
 * Included by <elastic.h>; may also be included on its own.
 */
#ifndef ELASTIC_STORE_H
#define ELASTIC_STORE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Thread safety: one elastic_store handle may be used from many threads at
 * once (calls are multiplexed on one connection). elastic_store_server calls
 * may come from any thread; elastic_store_server_close must be the last. */
typedef struct elastic_store_server elastic_store_server;
typedef struct elastic_store elastic_store;

/* The longest store token, in bytes (any bytes but NUL). Longer tokens, from
 * options, ELASTIC_STORE_TOKEN or a token file, are refused, never cut. */
#define ELASTIC_STORE_TOKEN_MAX 4096

/* ---- server -------------------------------------------------------------- */

typedef struct elastic_store_server_opts {
    size_t struct_size; /* sizeof(elastic_store_server_opts) */
    /* Address to bind; default "127.0.0.1"; "::" or "0.0.0.0" for all. */
    const char *host;
    /* 0 (default) picks a free port; see elastic_store_server_get_port(). */
    int port;
    /* Shared secret; NULL: the file named by ELASTIC_STORE_TOKEN_FILE, else
     * ELASTIC_STORE_TOKEN from the environment, else no auth. */
    const char *token;
    size_t max_key_bytes;   /* default 4096 */
    size_t max_value_bytes; /* default 16 MiB */
    /* Default 4096; further connections are closed at once. */
    size_t max_connections;
    /* Bytes buffered per connection (in + out); default 64 MiB. */
    size_t max_connection_buffer;
    /* Keys + values held; default 1 GiB; sets beyond it fail with ELASTIC_ELIMIT. */
    size_t max_total_bytes;
    /* A connection must finish the handshake in this; default 5000. */
    int handshake_timeout_ms;
    /* A connection with no request and no pending wait is closed after this;
     * < 0 (default): never; 0 is not allowed. */
    int idle_timeout_ms;
    /* get/wait/watch calls parked per connection; default 1024; more fail
     * with ELASTIC_ELIMIT. */
    size_t max_pending_waits;
    /* Partial frames and unsent responses of all connections together;
     * default 64 MiB; beyond it, connections holding over 64 KiB are paused. */
    size_t max_buffered_bytes;
    /* A started frame must be complete within this, else the connection is
     * closed; default 30000. */
    int frame_timeout_ms;
} elastic_store_server_opts;

/* Fills the first struct_size bytes (pass sizeof *opts) with the defaults.
 * ELASTIC_EINVAL when struct_size is below its first field or absurd. */
ELASTIC_EXTERN int elastic_store_server_opts_init(elastic_store_server_opts *opts,
                                                  size_t struct_size);

/* Starts the server on its own thread; returns once it listens. */
ELASTIC_EXTERN int elastic_store_server_start(const elastic_store_server_opts *opts,
                                              elastic_store_server **server);
/* The TCP port it listens on (the chosen one when opts.port was 0). */
ELASTIC_EXTERN int elastic_store_server_get_port(const elastic_store_server *server, int *port);
/* Stops the server's thread, closes every connection (pending calls fail with
 * ELASTIC_ECONNECT on the clients) and frees the server. NULL is a no-op. */
ELASTIC_EXTERN void elastic_store_server_close(elastic_store_server *server);

/* ---- client -------------------------------------------------------------- */

typedef struct elastic_store_opts {
    size_t struct_size; /* sizeof(elastic_store_opts) */
    const char *prefix; /* prepended to every key ("job7/gen3/"); default "" */
    /* NULL: the file named by ELASTIC_STORE_TOKEN_FILE, else ELASTIC_STORE_TOKEN
     * from the environment, else none. */
    const char *token;
    /* Default 10000; connection attempts are retried until then; < 0: no limit. */
    int connect_timeout_ms;
    /* Per-call deadline for calls without their own, and what
     * ELASTIC_TIMEOUT_DEFAULT means for this handle; default 30000; < 0: no limit. */
    int timeout_ms;
} elastic_store_opts;

/* Fills the first struct_size bytes (pass sizeof *opts) with the defaults. */
ELASTIC_EXTERN int elastic_store_opts_init(elastic_store_opts *opts, size_t struct_size);

/* Connects to "host:port" ("[::1]:port" for IPv6). One handle may be used from
 * many threads at once; calls are multiplexed on one connection, so a blocked
 * get/wait/watch does not hold up other threads. Idempotent calls (get,
 * try_get, set, wait, watch, num_keys, keys, delete) are retried once over a
 * new connection if the old one broke; add/append/compare_set are not. */
ELASTIC_EXTERN int elastic_store_connect(const char *endpoint, const elastic_store_opts *opts,
                                         elastic_store **store);
/* A second handle on the same connection settings with `prefix` appended to
 * this handle's prefix (for job/generation scoping). Close it separately. */
ELASTIC_EXTERN int elastic_store_clone(elastic_store *store, const char *prefix,
                                       elastic_store **scoped);
/* Fails every pending call with ELASTIC_ECLOSED and frees the handle. */
ELASTIC_EXTERN void elastic_store_close(elastic_store *store);

/* Keys are NUL-terminated strings; values are byte strings (may be empty). */
ELASTIC_EXTERN int elastic_store_set(elastic_store *s, const char *key, const void *value,
                                     size_t len);
/* Waits up to timeout_ms (see "timeouts" in <elastic.h>) for the key to exist;
 * ELASTIC_ETIMEDOUT if it does not. *value is NUL-terminated for convenience
 * (not counted in *len) and released with elastic_free(). */
ELASTIC_EXTERN int elastic_store_get(elastic_store *s, const char *key, int timeout_ms,
                                     void **value, size_t *len);
/* Like get without waiting: ELASTIC_ENOTFOUND when absent. */
ELASTIC_EXTERN int elastic_store_try_get(elastic_store *s, const char *key, void **value,
                                         size_t *len);
/* Atomically adds delta to the decimal int64 stored at key (absent = 0) and
 * returns the new value. ELASTIC_EINVAL if the value is not such an integer;
 * ELASTIC_ERANGE on overflow. */
ELASTIC_EXTERN int elastic_store_add(elastic_store *s, const char *key, int64_t delta,
                                     int64_t *result);
/* If the key's value equals `expected` (expected == NULL: the key is absent),
 * sets it to `desired`. Either way returns the value now stored in *current
 * (NULL with *clen 0 when absent), so success is "*current equals desired". */
ELASTIC_EXTERN int elastic_store_compare_set(elastic_store *s, const char *key,
                                             const void *expected, size_t elen, const void *desired,
                                             size_t dlen, void **current, size_t *clen);
/* Waits until every key exists. */
ELASTIC_EXTERN int elastic_store_wait(elastic_store *s, const char *const *keys, size_t n,
                                      int timeout_ms);
/* ELASTIC_ENOTFOUND when the key was absent. */
ELASTIC_EXTERN int elastic_store_delete(elastic_store *s, const char *key);
/* Number of keys under this handle's prefix. */
ELASTIC_EXTERN int elastic_store_num_keys(elastic_store *s, int64_t *count);
/* Appends bytes to the value (creating it). */
ELASTIC_EXTERN int elastic_store_append(elastic_store *s, const char *key, const void *value,
                                        size_t len);
/* Gets n keys in one round trip, waiting up to timeout_ms for all to exist.
 * values[i]/lens[i] are filled; each value is freed with elastic_free(). */
ELASTIC_EXTERN int elastic_store_multi_get(elastic_store *s, const char *const *keys, size_t n,
                                           int timeout_ms, void **values, size_t *lens);
/* Sets n keys in one round trip, atomically with respect to other clients. */
ELASTIC_EXTERN int elastic_store_multi_set(elastic_store *s, const char *const *keys,
                                           const void *const *values, const size_t *lens, size_t n);
/* Lists the keys under this handle's prefix + `prefix` (relative names, i.e.
 * without the handle's prefix), at most `max` of them. *keys is one
 * allocation (free it with elastic_free()). */
ELASTIC_EXTERN int elastic_store_keys(elastic_store *s, const char *prefix, size_t max,
                                      char ***keys, size_t *n);

/* ---- watch: learn of a change without polling ---------------------------- */

/* Every change to the store gets the next revision number (starting at 1). */

/* Reads a key and the revision of its last change (0 with ELASTIC_ENOTFOUND
 * when absent; value may be NULL if not wanted). */
ELASTIC_EXTERN int elastic_store_get_revision(elastic_store *s, const char *key, void **value,
                                              size_t *len, uint64_t *revision);
/* Long-poll: returns as soon as a key starting with `prefix` (a full key is a
 * prefix of itself) is set, changed or deleted at a revision greater than
 * `after_revision`, or immediately if that already happened. *revision gets
 * the store's revision at that moment; pass it back as after_revision to
 * watch on. ELASTIC_ETIMEDOUT when nothing changed in timeout_ms. */
ELASTIC_EXTERN int elastic_store_watch(elastic_store *s, const char *prefix,
                                       uint64_t after_revision, int timeout_ms, uint64_t *revision);

/* ---- leases: presence that ends when its owner dies ----------------------- */

/* A lease lives while this handle's connection is open and keep-alives arrive
 * within ttl_ms; when it ends, every key attached to it is deleted (waking
 * watchers). With keepalive_interval_ms > 0 the client's own I/O thread sends
 * the keep-alives, so a busy or blocked caller does not lose it. Its id is
 * random; only this handle and its clones (one connection) may keep it alive,
 * revoke it or attach keys to it: any other connection gets ELASTIC_EPERM. */
ELASTIC_EXTERN int elastic_store_lease_grant(elastic_store *s, int ttl_ms,
                                             int keepalive_interval_ms, uint64_t *lease);
/* Sends one keep-alive now. ELASTIC_ENOTFOUND when the lease already ended. */
ELASTIC_EXTERN int elastic_store_lease_keepalive(elastic_store *s, uint64_t lease);
/* Ends the lease now, deleting its keys. */
ELASTIC_EXTERN int elastic_store_lease_revoke(elastic_store *s, uint64_t lease);
/* Sets a key attached to a lease (ELASTIC_ENOTFOUND if the lease ended). */
ELASTIC_EXTERN int elastic_store_set_leased(elastic_store *s, const char *key, const void *value,
                                            size_t len, uint64_t lease);

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_STORE_H */
