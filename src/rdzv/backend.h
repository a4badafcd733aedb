/*
 * The narrow key-value interface rendezvous runs over: compare-and-set, get,
 * add, set/delete, prefix watch and leases (plus batched get/set and a key
 * listing, which etcd gives as txn and range). The store backend comes first;
 * an etcd backend fills the same table. Every call is counted so benchmarks
 * can report messages and bytes per node.
 */
#ifndef ELASTIC_RDZV_BACKEND_H
#define ELASTIC_RDZV_BACKEND_H

#include "common/common.h"

typedef struct rdzv__backend rdzv__backend;

typedef struct rdzv__backend_ops {
    /* ELASTIC_ENOTFOUND when absent; *value NUL-terminated, freed with elastic_free(). */
    int (*get)(rdzv__backend *b, const char *key, void **value, size_t *len);
    /* Waits up to timeout_ms for every key to exist, then reads them in one message. */
    int (*multi_get)(rdzv__backend *b, const char *const *keys, size_t n, int timeout_ms,
                     void **values, size_t *lens);
    int (*set)(rdzv__backend *b, const char *key, const void *value, size_t len);
    /* One message, atomic with respect to other clients. */
    int (*multi_set)(rdzv__backend *b, const char *const *keys, const void *const *values,
                     const size_t *lens, size_t n);
    int (*del)(rdzv__backend *b, const char *key);
    int (*add)(rdzv__backend *b, const char *key, int64_t delta, int64_t *result);
    /* expected == NULL: only if absent. *current: what is stored afterwards. */
    int (*compare_set)(rdzv__backend *b, const char *key, const void *expected, size_t elen,
                       const void *desired, size_t dlen, void **current, size_t *clen);
    /* Returns when a key under prefix changed after after_revision (or at once
     * if that already happened); ELASTIC_ETIMEDOUT otherwise. */
    int (*watch)(rdzv__backend *b, const char *prefix, uint64_t after_revision, int timeout_ms,
                 uint64_t *revision);
    /* Names (relative) of at most max keys under prefix; one allocation. */
    int (*keys)(rdzv__backend *b, const char *prefix, size_t max, char ***keys, size_t *n);
    int (*lease_grant)(rdzv__backend *b, int ttl_ms, int keepalive_interval_ms, uint64_t *lease);
    int (*lease_revoke)(rdzv__backend *b, uint64_t lease);
    /* ELASTIC_ENOTFOUND when the lease already ended. */
    int (*set_leased)(rdzv__backend *b, const char *key, const void *value, size_t len,
                      uint64_t lease);
    /* One renewal round trip within timeout_ms: 0 the lease lives, ELASTIC_ENOTFOUND
     * it ended, ELASTIC_ETIMEDOUT no answer, ELASTIC_ECONNECT the store refuses or
     * is gone. Optional (NULL: no self-fencing, see guard.c). */
    int (*lease_check)(rdzv__backend *b, uint64_t lease, int timeout_ms);
    /* Optional (NULL: the caller makes one call per key), for backends where a
     * request costs more than its work (etcd: each is an HTTP request and a
     * gateway call; writes are a Raft round each):
     * get_some reads n keys in one message, an absent one as values[i] NULL;
     * add_pair adds 1 to two counters in one message (*r1, *r2: the results);
     * del_prefix deletes every key under prefix in one message (0 also when none). */
    int (*get_some)(rdzv__backend *b, const char *const *keys, size_t n, void **values,
                    size_t *lens);
    int (*add_pair)(rdzv__backend *b, const char *key1, const char *key2, int64_t *r1, int64_t *r2);
    int (*del_prefix)(rdzv__backend *b, const char *prefix);
    /* Optional, where one request carries several operations (the store's
     * BATCH); NULL, or ELASTIC_EUNSUPPORTED with nothing sent (a store server
     * from before batches): the caller makes one call per operation.
     * add_get adds 1 to n_add counters (*sums: the results), then reads n_get
     * keys (an absent one as values[i] NULL), with no other client's write in
     * between, in one message.
     * set_leased_wait sets a leased key, then (only if that worked) waits up
     * to timeout_ms (>= 1) for wait_key and reads it, in one message: the
     * set's error, or the wait's (ELASTIC_ETIMEDOUT: the key is set);
     * *set_revision: the revision the set was made at where the backend
     * says it (etcd), else 0.
     * keys_at is keys, plus the revision the listing was made at (a watch
     * after it misses no change made since). */
    int (*add_get)(rdzv__backend *b, const char *const *add_keys, size_t n_add, int64_t *sums,
                   const char *const *get_keys, size_t n_get, void **values, size_t *lens);
    int (*set_leased_wait)(rdzv__backend *b, const char *key, const void *value, size_t len,
                           uint64_t lease, const char *wait_key, int timeout_ms, void **wait_value,
                           size_t *wait_len, uint64_t *set_revision);
    int (*keys_at)(rdzv__backend *b, const char *prefix, size_t max, char ***keys, size_t *n,
                   uint64_t *revision);
    /* Optional: add_get made only while unless_key is absent, in one
     * message: *added true and add_get's results; or, when unless_key
     * exists, nothing added (*added false, *sums 0) and the reads alone. A
     * node that has not read the round pointer joins round 1 this way (the
     * pointer is absent until round 1 is sealed) instead of reading it first. */
    int (*add_get_unless)(rdzv__backend *b, const char *unless_key, const char *const *add_keys,
                          size_t n_add, int64_t *sums, const char *const *get_keys, size_t n_get,
                          void **values, size_t *lens, bool *added);
    /* Optional: watch on one node's area (prefix "r/<g>/n/<slot>/") where a
     * Put of its assignment ("a") or of its join record ("rec") is no change.
     * A monitor that starts from a revision before the sealer read the
     * records (its own record's: set_leased_wait's *set_revision) then wakes
     * only for what it follows (the record's end, the end mark, done, a
     * kick), with no first look at the area. Otherwise as watch; and when
     * the change was a Put of the area's end mark ("e"), *end_value is what
     * it holds (the end's cause: rdzv__end writes it there for such a
     * backend), else NULL; freed with elastic_free(). */
    int (*watch_area)(rdzv__backend *b, const char *prefix, uint64_t after_revision, int timeout_ms,
                      uint64_t *revision, void **end_value, size_t *end_len);
    void (*close)(rdzv__backend *b);
} rdzv__backend_ops;

/* What this node sent and received through the backend (requests, payload
 * bytes: keys and values, not framing). */
typedef struct rdzv__traffic {
    uint64_t messages;
    uint64_t bytes_sent;
    uint64_t bytes_received;
    uint64_t wire_bytes; /* etcd: HTTP bytes both ways (JSON, base64, headers, keep-alives) */
} rdzv__traffic;

/* Fencing: runs once, on the backend's own thread, when this node's lease
 * ended without a revoke (it was cut off from the coordination service past
 * the lease's TTL, so the others already count it as gone). The etcd
 * backend reports it; a store backend may (the hook is the shared interface). */
typedef void (*rdzv__lease_lost_fn)(void *user, uint64_t lease, const char *why);

struct rdzv__backend {
    const rdzv__backend_ops *ops;
    rdzv__traffic traffic;             /* updated atomically by the calls */
    rdzv__lease_lost_fn on_lease_lost; /* set before lease_grant; NULL: nobody listens */
    void *lease_lost_user;
};

/* Where and how to reach etcd (strings are copied). */
typedef struct rdzv__etcd_conf {
    const char *endpoints; /* "host:port[,host:port...]" */
    const char *prefix;    /* keys under "<prefix>/<run_id>/"; NULL: "/elastic" */
    const char *ca_file, *cert_file, *key_file; /* TLS (https when ca_file is set) */
    const char *user, *password;                /* etcd auth */
    int timeout_ms;                             /* per call; 0: 5000 */
} rdzv__etcd_conf;

/* Opens the etcd backend (backend_etcd.c): keys under "<prefix>/<run_id>/rdzv/". */
int rdzv__backend_etcd_open(const rdzv__etcd_conf *conf, const char *run_id,
                            rdzv__backend **backend);

/* Opens the store backend: a clone of `store` (when not NULL) or a new
 * connection to endpoint, with every key under `prefix`. */
int rdzv__backend_store_open(elastic_store *store, const char *endpoint, const char *token,
                             const char *prefix, rdzv__backend **backend);

static inline void rdzv__count(rdzv__backend *b, size_t sent, size_t received)
{
    __atomic_fetch_add(&b->traffic.messages, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&b->traffic.bytes_sent, (uint64_t)sent, __ATOMIC_RELAXED);
    __atomic_fetch_add(&b->traffic.bytes_received, (uint64_t)received, __ATOMIC_RELAXED);
}

#endif /* ELASTIC_RDZV_BACKEND_H */
