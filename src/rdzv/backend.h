/*
 * The narrow key-value interface rendezvous runs over: compare-and-set, get,
 * add, set/delete, prefix watch and leases, plus the composite operations a
 * join makes (adds with reads, a record with a wait, a listing with its
 * revision). Both backends (backend_store.c, backend_etcd*.c) fill every
 * entry: the interface is fixed, and rdzv has one path per step. Where a
 * backend carries a composite in one message (etcd's Txn, the store's BATCH)
 * it does; elsewhere (a store server from before batches) it makes the plain
 * calls in sequence (backend_seq.c). Every call is counted so benchmarks can
 * report messages and bytes per node.
 */
#ifndef ELASTIC_RDZV_BACKEND_H
#define ELASTIC_RDZV_BACKEND_H

#include "common/common.h"

typedef struct rdzv__backend rdzv__backend;

typedef struct rdzv__backend_ops {
    /* ---- what the service is (facts, not operations) ---- */
    /* true (etcd): a cluster that outlives its clients. A request that finds
     * no endpoint in time is transient (a member restarts, an election, a
     * healed partition), and the backend's lease keeper reports a lost lease
     * itself (on_lease_lost), so no guard polls lease_check. false (the
     * store): it lives in one agent; not answering for long means its host
     * is gone, and the lease guard (guard.c) polls lease_check to fence. */
    bool outlives_clients;
    /* true (etcd): watch_area hands over the value of the end mark's Put, so
     * the wake marks carry the end's cause (end.c); false: the marks hold
     * "1" (the store's one message stays small) and monitors read the end. */
    bool watch_gives_end;

    /* ---- plain operations ---- */
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
    /* Deletes every key under prefix (0 also when none): one message on etcd,
     * a listing and one delete per key on the store. */
    int (*del_prefix)(rdzv__backend *b, const char *prefix);
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
     * it ended (lease 0: none to renew, a probe), ELASTIC_ETIMEDOUT no answer,
     * ELASTIC_ECONNECT the service refuses or is gone. */
    int (*lease_check)(rdzv__backend *b, uint64_t lease, int timeout_ms);

    /* ---- a join's composite operations (one message where the service can) ---- */
    /* Adds 1 to n_add counters (*sums: the results), then reads n_get keys (an
     * absent one as values[i] NULL), with no other client's write in between
     * where it is one message (in sequence: a read sees at least the adds). */
    int (*add_get)(rdzv__backend *b, const char *const *add_keys, size_t n_add, int64_t *sums,
                   const char *const *get_keys, size_t n_get, void **values, size_t *lens);
    /* add_get made only while unless_key is absent: *added true and
     * add_get's results; or, when unless_key exists, nothing added (*added
     * false, *sums 0) and the reads alone. A node that has not read the round
     * pointer joins round 1 this way (the pointer is absent until round 1 is
     * sealed) or learns the open round: one message where the service tests
     * and writes at once (etcd); the store reads first, then adds. */
    int (*add_get_unless)(rdzv__backend *b, const char *unless_key, const char *const *add_keys,
                          size_t n_add, int64_t *sums, const char *const *get_keys, size_t n_get,
                          void **values, size_t *lens, bool *added);
    /* Sets a leased key, then (only if that worked) waits up to timeout_ms
     * (>= 1) for wait_key and reads it: the set's error, or the wait's
     * (ELASTIC_ETIMEDOUT: the key is set); *set_revision: the revision the
     * set was made at where the backend says it (etcd), else 0. */
    int (*set_leased_wait)(rdzv__backend *b, const char *key, const void *value, size_t len,
                           uint64_t lease, const char *wait_key, int timeout_ms, void **wait_value,
                           size_t *wait_len, uint64_t *set_revision);
    /* keys, plus the revision the listing was made at (a watch after it
     * misses no change made since); ELASTIC_EUNSUPPORTED with nothing sent
     * where the service cannot say it (a store server from before batches):
     * the caller watches from the start and looks then. */
    int (*keys_at)(rdzv__backend *b, const char *prefix, size_t max, char ***keys, size_t *n,
                   uint64_t *revision);
    /* watch on one node's area (prefix "r/<g>/n/<slot>/"). On etcd a Put of
     * its assignment ("a") or of its join record ("rec") is no change: a
     * monitor that starts from a revision before the sealer read the records
     * (its own record's: set_leased_wait's *set_revision) then wakes only for
     * what it follows (the record's end, the end mark, done, a kick), with no
     * first look at the area; and when the change was a Put of the area's end
     * mark ("e"), *end_value is what it holds (watch_gives_end). On the store
     * it is watch, *end_value NULL. Freed with elastic_free(). */
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

/* The composite operations as plain calls in sequence through b->ops
 * (backend_seq.c): a backend whose service cannot carry one in one message
 * (a store server from before batches) makes them so. */
int rdzv__seq_add_get(rdzv__backend *b, const char *const *add_keys, size_t n_add, int64_t *sums,
                      const char *const *get_keys, size_t n_get, void **values, size_t *lens);
int rdzv__seq_add_get_unless(rdzv__backend *b, const char *unless_key, const char *const *add_keys,
                             size_t n_add, int64_t *sums, const char *const *get_keys, size_t n_get,
                             void **values, size_t *lens, bool *added);
int rdzv__seq_set_leased_wait(rdzv__backend *b, const char *key, const void *value, size_t len,
                              uint64_t lease, const char *wait_key, int timeout_ms,
                              void **wait_value, size_t *wait_len, uint64_t *set_revision);
int rdzv__seq_watch_area(rdzv__backend *b, const char *prefix, uint64_t after_revision,
                         int timeout_ms, uint64_t *revision, void **end_value, size_t *end_len);
int rdzv__seq_del_prefix(rdzv__backend *b, const char *prefix);

static inline void rdzv__count(rdzv__backend *b, size_t sent, size_t received)
{
    __atomic_fetch_add(&b->traffic.messages, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&b->traffic.bytes_sent, (uint64_t)sent, __ATOMIC_RELAXED);
    __atomic_fetch_add(&b->traffic.bytes_received, (uint64_t)received, __ATOMIC_RELAXED);
}

#endif /* ELASTIC_RDZV_BACKEND_H */
