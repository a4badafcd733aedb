/*
 * The store's table: keys, values, one revision counter for every change,
 * and leases that own keys. Single-threaded (the server's loop thread owns
 * it) and free of I/O, so it is tested and fuzzed on its own.
 */
#ifndef ELASTIC_STORE_KV_H
#define ELASTIC_STORE_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct store__lease store__lease;

typedef struct store__entry {
    struct store__entry *hash_next;
    struct store__entry *order_left, *order_right; /* the byte-ordered index (kv_order.c) */
    uint64_t order_priority;                       /* its heap order: random per entry */
    store__lease *lease;                           /* NULL: the key lives until deleted */
    struct store__entry *lease_prev, *lease_next;
    uint64_t hash;
    uint64_t revision; /* the revision of its last change */
    uint8_t *value;
    size_t value_len;
    size_t key_len;
    char key[]; /* NUL-terminated */
} store__entry;

struct store__lease {
    store__lease *hash_next;
    uint64_t id;
    uint32_t ttl_ms;
    void *owner;              /* the server connection that granted it */
    void *timer;              /* the server's expiry timer */
    store__lease *owner_next; /* the owner's list of leases */
    store__entry *entries;
    uint32_t grace_ms; /* expiry put off so far while the owner's input waited unread */
};

/* Called after every change (deleted: the key is gone), in revision order. */
typedef void (*store__change_fn)(void *user, const char *key, size_t key_len, uint64_t revision,
                                 bool deleted);

typedef struct store__kv {
    store__entry **buckets;
    store__entry *order_root; /* every entry again, in key byte order (prefix scans) */
    uint64_t order_seed;      /* draws the entries' priorities; random per table */
    size_t bucket_count;      /* a power of two */
    size_t count;
    store__lease **lease_buckets;
    size_t lease_bucket_count;
    size_t lease_count;
    uint64_t revision;
    size_t total_bytes;
    size_t max_total_bytes;
    store__change_fn on_change;
    void *user;
} store__kv;

int store__kv_init(store__kv *kv, size_t max_total_bytes, store__change_fn on_change, void *user);
void store__kv_free(store__kv *kv);

store__entry *store__kv_find(const store__kv *kv, const void *key, size_t key_len);
/* lease NULL: a plain key (detached from any lease it had). */
int store__kv_set(store__kv *kv, const void *key, size_t key_len, const void *value,
                  size_t value_len, store__lease *lease);
int store__kv_append(store__kv *kv, const void *key, size_t key_len, const void *value,
                     size_t value_len);
int store__kv_add(store__kv *kv, const void *key, size_t key_len, int64_t delta, int64_t *result);
/* Sets desired when the value equals expected (has_expected false: when
 * absent); *current is the entry afterwards (NULL when absent). */
int store__kv_compare_set(store__kv *kv, const void *key, size_t key_len, bool has_expected,
                          const void *expected, size_t expected_len, const void *desired,
                          size_t desired_len, const store__entry **current);
int store__kv_delete(store__kv *kv, const void *key, size_t key_len);
/* Would storing these bytes more fit under max_total_bytes? */
bool store__kv_fits(const store__kv *kv, size_t more_bytes);
size_t store__kv_entry_cost(size_t key_len, size_t value_len);

typedef bool (*store__visit_fn)(void *user, const store__entry *entry); /* false stops */
/* Visits the keys under prefix in byte order: O(log n + matches), not a
 * scan of the table (watches, key listings and counts use it). */
void store__kv_visit_prefix(const store__kv *kv, const void *prefix, size_t prefix_len,
                            store__visit_fn fn, void *user);
size_t store__kv_count_prefix(const store__kv *kv, const void *prefix, size_t prefix_len);

/* A lease with a random 64-bit id (getrandom); NULL when out of memory
 * or out of random bytes. */
store__lease *store__kv_lease_grant(store__kv *kv, uint32_t ttl_ms, void *owner);
store__lease *store__kv_lease_find(const store__kv *kv, uint64_t id);
/* Deletes the lease's keys (notifying each change) and frees it; the
 * caller has already disposed of lease->timer. */
void store__kv_lease_end(store__kv *kv, store__lease *lease);

/* kv_order.c: the byte-ordered index (a treap) beside the hash table. */
void store__kv_order_insert(store__kv *kv, store__entry *e);
void store__kv_order_remove(store__kv *kv, store__entry *e);

#endif /* ELASTIC_STORE_KV_H */
