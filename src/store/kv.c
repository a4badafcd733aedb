/*
 * The store's table (see kv.h): a chained hash table of entries, the global
 * revision counter, byte accounting against max_total_bytes, and leases
 * that own keys and delete them when they end.
 */
#include "store/kv.h"

#include "common/common.h"
#include "common/parse_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <xxhash.h>

#define ENTRY_OVERHEAD 64 /* bytes charged per key beyond its key and value */

/* Random bytes from the kernel's CSPRNG; false when it has none. */
static bool random_u64(uint64_t *out)
{
    uint8_t *p = (uint8_t *)out;
    size_t left = sizeof *out;
    while (left > 0) {
        ssize_t n = getrandom(p, left, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        left -= (size_t)n;
    }
    return true;
}

static uint64_t hash_key(const void *key, size_t len)
{
    return XXH3_64bits(key, len);
}

int store__kv_init(store__kv *kv, size_t max_total_bytes, store__change_fn on_change, void *user)
{
    memset(kv, 0, sizeof *kv);
    kv->bucket_count = 256;
    kv->buckets = calloc(kv->bucket_count, sizeof *kv->buckets);
    kv->lease_bucket_count = 256;
    kv->lease_buckets = calloc(kv->lease_bucket_count, sizeof *kv->lease_buckets);
    if (kv->buckets == NULL || kv->lease_buckets == NULL) {
        store__kv_free(kv);
        return ELASTIC_ENOMEM;
    }
    if (!random_u64(&kv->order_seed))
        kv->order_seed = (uint64_t)(uintptr_t)kv; /* ASLR: still varies per run */
    kv->max_total_bytes = max_total_bytes;
    kv->on_change = on_change;
    kv->user = user;
    return 0;
}

void store__kv_free(store__kv *kv)
{
    for (size_t i = 0; kv->buckets != NULL && i < kv->bucket_count; i++) {
        store__entry *e = kv->buckets[i];
        while (e != NULL) {
            store__entry *next = e->hash_next;
            free(e->value);
            free(e);
            e = next;
        }
    }
    for (size_t i = 0; kv->lease_buckets != NULL && i < kv->lease_bucket_count; i++) {
        store__lease *l = kv->lease_buckets[i];
        while (l != NULL) {
            store__lease *next = l->hash_next;
            free(l);
            l = next;
        }
    }
    free(kv->buckets);
    free(kv->lease_buckets);
    memset(kv, 0, sizeof *kv);
}

size_t store__kv_entry_cost(size_t key_len, size_t value_len)
{
    return key_len + value_len + ENTRY_OVERHEAD;
}

bool store__kv_fits(const store__kv *kv, size_t more_bytes)
{
    return more_bytes <= kv->max_total_bytes && kv->total_bytes <= kv->max_total_bytes - more_bytes;
}

static store__entry **slot_of(const store__kv *kv, uint64_t hash, const void *key, size_t key_len)
{
    store__entry **slot = &kv->buckets[hash & (kv->bucket_count - 1)];
    for (; *slot != NULL; slot = &(*slot)->hash_next) {
        const store__entry *e = *slot;
        if (e->hash == hash && e->key_len == key_len && memcmp(e->key, key, key_len) == 0)
            return slot;
    }
    return slot;
}

store__entry *store__kv_find(const store__kv *kv, const void *key, size_t key_len)
{
    return *slot_of(kv, hash_key(key, key_len), key, key_len);
}

/* Doubles the table when it is fuller than one entry per bucket. */
static void maybe_grow(store__kv *kv)
{
    if (kv->count < kv->bucket_count || kv->bucket_count > SIZE_MAX / 4 / sizeof(void *)) return;
    size_t count = kv->bucket_count * 2;
    store__entry **buckets = calloc(count, sizeof *buckets);
    if (buckets == NULL) return; /* stays correct, only slower */
    for (size_t i = 0; i < kv->bucket_count; i++) {
        store__entry *e = kv->buckets[i];
        while (e != NULL) {
            store__entry *next = e->hash_next;
            e->hash_next = buckets[e->hash & (count - 1)];
            buckets[e->hash & (count - 1)] = e;
            e = next;
        }
    }
    free(kv->buckets);
    kv->buckets = buckets;
    kv->bucket_count = count;
}

static void notify(store__kv *kv, const store__entry *e, bool deleted)
{
    if (kv->on_change != NULL) kv->on_change(kv->user, e->key, e->key_len, e->revision, deleted);
}

static void lease_detach(store__entry *e)
{
    if (e->lease == NULL) return;
    if (e->lease_prev != NULL)
        e->lease_prev->lease_next = e->lease_next;
    else
        e->lease->entries = e->lease_next;
    if (e->lease_next != NULL) e->lease_next->lease_prev = e->lease_prev;
    e->lease = NULL;
    e->lease_prev = e->lease_next = NULL;
}

static void lease_attach(store__entry *e, store__lease *lease)
{
    if (e->lease == lease) return;
    lease_detach(e);
    if (lease == NULL) return;
    e->lease = lease;
    e->lease_next = lease->entries;
    if (lease->entries != NULL) lease->entries->lease_prev = e;
    lease->entries = e;
}

/* The entry for key, created empty when absent (NULL: no memory/space). */
static store__entry *find_or_create(store__kv *kv, const void *key, size_t key_len,
                                    size_t value_len, int *err)
{
    uint64_t hash = hash_key(key, key_len);
    store__entry **slot = slot_of(kv, hash, key, key_len);
    if (*slot != NULL) return *slot;
    if (!store__kv_fits(kv, store__kv_entry_cost(key_len, value_len))) {
        *err = elastic__fail(ELASTIC_ELIMIT, "the store holds max_total_bytes already");
        return NULL;
    }
    store__entry *e = calloc(1, sizeof *e + key_len + 1);
    if (e == NULL) {
        *err = ELASTIC_ENOMEM;
        return NULL;
    }
    memcpy(e->key, key, key_len);
    e->key_len = key_len;
    e->hash = hash;
    e->hash_next = *slot;
    *slot = e;
    store__kv_order_insert(kv, e);
    kv->count++;
    kv->total_bytes += store__kv_entry_cost(key_len, 0);
    maybe_grow(kv);
    return e;
}

static void remove_entry(store__kv *kv, store__entry *e)
{
    store__entry **slot = slot_of(kv, e->hash, e->key, e->key_len);
    *slot = e->hash_next;
    store__kv_order_remove(kv, e);
    lease_detach(e);
    kv->count--;
    kv->total_bytes -= store__kv_entry_cost(e->key_len, e->value_len);
    free(e->value);
    free(e);
}

/* Replaces e's value with head+tail (tail may be empty) and bumps the revision. */
static int replace_value(store__kv *kv, store__entry *e, const void *head, size_t head_len,
                         const void *tail, size_t tail_len)
{
    size_t len = head_len + tail_len;
    if (len > e->value_len && !store__kv_fits(kv, len - e->value_len))
        return elastic__fail(ELASTIC_ELIMIT, "the store holds max_total_bytes already");
    uint8_t *value = NULL;
    if (len > 0) {
        value = malloc(len);
        if (value == NULL) return ELASTIC_ENOMEM;
        if (head_len) memcpy(value, head, head_len);
        if (tail_len) memcpy(value + head_len, tail, tail_len);
    }
    kv->total_bytes = kv->total_bytes - e->value_len + len;
    free(e->value);
    e->value = value;
    e->value_len = len;
    e->revision = ++kv->revision;
    return 0;
}

/* Drops an entry created for a write that then failed. */
static void drop_if_new(store__kv *kv, store__entry *e)
{
    if (e->revision == 0) remove_entry(kv, e);
}

int store__kv_set(store__kv *kv, const void *key, size_t key_len, const void *value,
                  size_t value_len, store__lease *lease)
{
    int err = 0;
    store__entry *e = find_or_create(kv, key, key_len, value_len, &err);
    if (e == NULL) return err;
    err = replace_value(kv, e, value, value_len, NULL, 0);
    if (err != 0) {
        drop_if_new(kv, e);
        return err;
    }
    lease_attach(e, lease);
    notify(kv, e, false);
    return 0;
}

int store__kv_append(store__kv *kv, const void *key, size_t key_len, const void *value,
                     size_t value_len)
{
    int err = 0;
    store__entry *e = find_or_create(kv, key, key_len, value_len, &err);
    if (e == NULL) return err;
    err = replace_value(kv, e, e->value, e->value_len, value, value_len);
    if (err != 0) {
        drop_if_new(kv, e);
        return err;
    }
    notify(kv, e, false);
    return 0;
}

int store__kv_add(store__kv *kv, const void *key, size_t key_len, int64_t delta, int64_t *result)
{
    int64_t current = 0;
    store__entry *existing = store__kv_find(kv, key, key_len);
    if (existing != NULL &&
        elastic__parse_i64_n(NULL, (const char *)existing->value, existing->value_len, INT64_MIN,
                             INT64_MAX, &current) != 0)
        return elastic__fail(ELASTIC_EINVAL, "the value is not a decimal int64");
    if (__builtin_add_overflow(current, delta, result))
        return elastic__fail(ELASTIC_ERANGE, "%" PRId64 " + %" PRId64 " overflows int64", current,
                             delta);
    char text[24];
    int len = snprintf(text, sizeof text, "%" PRId64, *result);
    return store__kv_set(kv, key, key_len, text, (size_t)len, existing ? existing->lease : NULL);
}

int store__kv_compare_set(store__kv *kv, const void *key, size_t key_len, bool has_expected,
                          const void *expected, size_t expected_len, const void *desired,
                          size_t desired_len, const store__entry **current)
{
    store__entry *e = store__kv_find(kv, key, key_len);
    bool match = has_expected
                     ? (e != NULL && e->value_len == expected_len &&
                        (expected_len == 0 || memcmp(e->value, expected, expected_len) == 0))
                     : e == NULL;
    int err = 0;
    if (match) {
        err = store__kv_set(kv, key, key_len, desired, desired_len, e ? e->lease : NULL);
        e = store__kv_find(kv, key, key_len);
    }
    *current = e;
    return err;
}

int store__kv_delete(store__kv *kv, const void *key, size_t key_len)
{
    store__entry *e = store__kv_find(kv, key, key_len);
    if (e == NULL) return ELASTIC_ENOTFOUND;
    e->revision = ++kv->revision;
    notify(kv, e, true);
    remove_entry(kv, e);
    return 0;
}

/* ---- leases -------------------------------------------------------------- */

static store__lease **lease_slot(const store__kv *kv, uint64_t id)
{
    store__lease **slot =
        &kv->lease_buckets[XXH3_64bits(&id, sizeof id) & (kv->lease_bucket_count - 1)];
    while (*slot != NULL && (*slot)->id != id) slot = &(*slot)->hash_next;
    return slot;
}

/* Doubles the lease table when it is fuller than one lease per bucket: a
 * job of 16k nodes holds 16k leases, and every keep-alive looks one up. */
static void maybe_grow_leases(store__kv *kv)
{
    if (kv->lease_count < kv->lease_bucket_count ||
        kv->lease_bucket_count > SIZE_MAX / 4 / sizeof(void *))
        return;
    size_t count = kv->lease_bucket_count * 2;
    store__lease **buckets = calloc(count, sizeof *buckets);
    if (buckets == NULL) return; /* stays correct, only slower */
    for (size_t i = 0; i < kv->lease_bucket_count; i++) {
        store__lease *l = kv->lease_buckets[i];
        while (l != NULL) {
            store__lease *next = l->hash_next;
            size_t at = XXH3_64bits(&l->id, sizeof l->id) & (count - 1);
            l->hash_next = buckets[at];
            buckets[at] = l;
            l = next;
        }
    }
    free(kv->lease_buckets);
    kv->lease_buckets = buckets;
    kv->lease_bucket_count = count;
}

store__lease *store__kv_lease_grant(store__kv *kv, uint32_t ttl_ms, void *owner)
{
    store__lease *lease = calloc(1, sizeof *lease);
    if (lease == NULL) return NULL;
    /* A random, never-zero, unused id: nobody can guess another node's lease
     * (ownership is still checked by the server; this only hides the ids). */
    do {
        if (!random_u64(&lease->id)) {
            free(lease);
            return NULL;
        }
    } while (lease->id == 0 || *lease_slot(kv, lease->id) != NULL);
    lease->ttl_ms = ttl_ms;
    lease->owner = owner;
    store__lease **slot = lease_slot(kv, lease->id);
    *slot = lease;
    kv->lease_count++;
    maybe_grow_leases(kv);
    return lease;
}

store__lease *store__kv_lease_find(const store__kv *kv, uint64_t id)
{
    return *lease_slot(kv, id);
}

void store__kv_lease_end(store__kv *kv, store__lease *lease)
{
    while (lease->entries != NULL) {
        store__entry *e = lease->entries;
        store__kv_delete(kv, e->key, e->key_len);
    }
    store__lease **slot = lease_slot(kv, lease->id);
    if (*slot == lease) *slot = lease->hash_next;
    kv->lease_count--;
    free(lease);
}
