/*
 * The etcd rendezvous backend's insides, shared by backend_etcd.c (the kv
 * operations), backend_etcd_watch.c and backend_etcd_lease.c; they run on the
 * etcd v3 client of src/etcd/.
 */
#ifndef ELASTIC_RDZV_BACKEND_ETCD_H
#define ELASTIC_RDZV_BACKEND_ETCD_H

#include "etcd/etcd.h"
#include "etcd/lease_stream.h"

#include "rdzv/backend.h"

#include <pthread.h>

/* Keeps one lease alive from its own thread; reports when it is lost. */
typedef struct rdzv__etcd_keeper {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool running; /* a keeper thread was started and not stopped yet */
    bool exited;  /* ... and it has left keeper_main (it is detached: see keeper_main) */
    bool stop;
    int64_t lease;
    int ttl_ms, interval_ms;
    uint64_t last_ok_ms;        /* when the last acknowledged keep-alive was sent */
    etcd__lease_stream *stream; /* the keeper thread's own; NULL: the gateway only */
    /* ttl_ms: the TTL etcd granted (its last reply), the fence deadline */
} rdzv__etcd_keeper;

/* Ops per Txn tried first: a member started with --max-txn-ops at least this
 * takes a whole round's assignments (or join records) in one Txn, one Raft
 * round on the sealer's path instead of one per 128 keys. A member that
 * refuses it (etcd's default is 128) gets ETCD__MAX_TXN_OPS from then on. */
#define RDZV__ETCD_BIG_TXN_OPS 4096

typedef struct rdzv__etcd_backend {
    rdzv__backend base;
    etcd__client *client;
    int txn_ops;      /* ops per Txn now (atomic): RDZV__ETCD_BIG_TXN_OPS until refused */
    char prefix[320]; /* "<root>/<run_id>/rdzv/": every key starts with it */
    size_t prefix_len;
    rdzv__etcd_keeper keeper;
} rdzv__etcd_backend;

/* "<prefix><key>" into out; ELASTIC_EINVAL when it does not fit. */
int rdzv__etcd_full_key(rdzv__etcd_backend *b, const char *key, char *out, size_t cap);
/* {"key": <prefix><key>} for a request (NULL when the key is too long). */
json_object *rdzv__etcd_key_object(rdzv__etcd_backend *b, const char *key);
/* A Put's body: key, value, lease (0: none), prev_kv (NULL when too long). */
json_object *rdzv__etcd_put_object(rdzv__etcd_backend *b, const char *key, const void *value,
                                   size_t len, int64_t lease, bool prev_kv);
/* A kv of a reply: its value (a counter's value for counters kept by add)
 * and its mod_revision. */
int rdzv__etcd_kv_value(json_object *kv, char **value, size_t *len);
/* Waits (watch from start_revision) for a change to key, or to every key
 * under it when prefix; *revision: the change's revision. */
int rdzv__etcd_watch_from(rdzv__etcd_backend *b, const char *full_key, bool prefix,
                          int64_t start_revision, int timeout_ms, uint64_t *revision);
int rdzv__etcd_multi_get(rdzv__backend *base, const char *const *keys, size_t n, int timeout_ms,
                         void **values, size_t *lens);
int rdzv__etcd_watch(rdzv__backend *base, const char *prefix, uint64_t after_revision,
                     int timeout_ms, uint64_t *revision);
/* set_leased_wait: the leased Put and a Range of wait_key in one Txn, then
 * (when wait_key is absent) a watch from that Txn's revision whose event
 * carries the value; *set_revision: the revision the record was created at
 * (that Txn's, or an earlier one's when the same record was there). */
int rdzv__etcd_set_leased_wait(rdzv__backend *base, const char *key, const void *value, size_t len,
                               uint64_t lease, const char *wait_key, int timeout_ms,
                               void **wait_value, size_t *wait_len, uint64_t *set_revision);
int rdzv__etcd_watch_area(rdzv__backend *base, const char *prefix, uint64_t after_revision,
                          int timeout_ms, uint64_t *revision, void **end_value, size_t *end_len);
int rdzv__etcd_lease_grant(rdzv__backend *base, int ttl_ms, int keepalive_interval_ms,
                           uint64_t *lease);
int rdzv__etcd_lease_revoke(rdzv__backend *base, uint64_t lease);
int rdzv__etcd_lease_check(rdzv__backend *base, uint64_t lease, int timeout_ms);
/* n keys in one Txn of Ranges (ETCD__MAX_TXN_OPS at most); absent: NULL. */
int rdzv__etcd_get_some(rdzv__backend *base, const char *const *keys, size_t n, void **values,
                        size_t *lens);
void rdzv__etcd_keeper_stop(rdzv__etcd_backend *b);
/* How many ops one Txn may hold now. */
size_t rdzv__etcd_txn_ops(rdzv__etcd_backend *b);
/* After a Txn of `ops` operations failed with rc: true (and the limit drops to
 * etcd's default) when the member refused its size, so the caller re-sends it
 * in smaller pieces; a refused Txn changed nothing. */
bool rdzv__etcd_txn_refused(rdzv__etcd_backend *b, size_t ops, int rc);

#endif /* ELASTIC_RDZV_BACKEND_ETCD_H */
