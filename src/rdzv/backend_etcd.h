/*
 * The etcd rendezvous backend's insides, shared by backend_etcd.c (the kv
 * operations), backend_etcd_watch.c and backend_etcd_lease.c; they run on the
 * etcd v3 client of src/etcd/.
 */
#ifndef ELASTIC_RDZV_BACKEND_ETCD_H
#define ELASTIC_RDZV_BACKEND_ETCD_H

#include "etcd/etcd.h"

#include "rdzv/backend.h"

#include <pthread.h>

/* Keeps one lease alive from its own thread; reports when it is lost. */
typedef struct etcd__keeper {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool running; /* a keeper thread was started and not stopped yet */
    bool exited;  /* ... and it has left keeper_main (it is detached: see keeper_main) */
    bool stop;
    int64_t lease;
    int ttl_ms, interval_ms;
    uint64_t last_ok_ms; /* when the last acknowledged keep-alive was sent */
    /* ttl_ms: the TTL etcd granted (its last reply), the fence deadline */
} etcd__keeper;

typedef struct etcd__backend {
    rdzv__backend base;
    etcd__client *client;
    char prefix[320]; /* "<root>/<run_id>/rdzv/": every key starts with it */
    size_t prefix_len;
    etcd__keeper keeper;
} etcd__backend;

/* "<prefix><key>" into out; ELASTIC_EINVAL when it does not fit. */
int etcd__full_key(etcd__backend *b, const char *key, char *out, size_t cap);
/* A kv of a reply: its value (a counter's value for counters kept by add)
 * and its mod_revision. */
int etcd__kv_value(json_object *kv, char **value, size_t *len);
/* Waits (watch from start_revision) for a change to key, or to every key
 * under it when prefix; *revision: the change's revision. */
int etcd__watch_from(etcd__backend *b, const char *full_key, bool prefix, int64_t start_revision,
                     int timeout_ms, uint64_t *revision);
int etcd__multi_get(rdzv__backend *base, const char *const *keys, size_t n, int timeout_ms,
                    void **values, size_t *lens);
int etcd__watch(rdzv__backend *base, const char *prefix, uint64_t after_revision, int timeout_ms,
                uint64_t *revision);
int etcd__lease_grant(rdzv__backend *base, int ttl_ms, int keepalive_interval_ms, uint64_t *lease);
int etcd__lease_revoke(rdzv__backend *base, uint64_t lease);
void etcd__keeper_stop(etcd__backend *b);

#endif /* ELASTIC_RDZV_BACKEND_ETCD_H */
