/*
 * The rendezvous backend over the job's own store (include/elastic/store.h):
 * each call is one store request on a handle scoped to "rdzv/<run_id>/".
 * Counts messages and payload bytes for the benchmarks.
 */
#include "rdzv/backend.h"
#include "store/batch.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

typedef struct store_backend {
    rdzv__backend base;
    elastic_store *store; /* owned: a clone or our own connection */
} store_backend;

static elastic_store *handle(rdzv__backend *b)
{
    return ((store_backend *)b)->store;
}

static int store_get(rdzv__backend *b, const char *key, void **value, size_t *len)
{
    int rc = elastic_store_try_get(handle(b), key, value, len);
    rdzv__count(b, strlen(key), rc == 0 ? *len : 0);
    return rc;
}

static int store_multi_get(rdzv__backend *b, const char *const *keys, size_t n, int timeout_ms,
                           void **values, size_t *lens)
{
    int rc = elastic_store_multi_get(handle(b), keys, n, timeout_ms, values, lens);
    size_t sent = 0, received = 0;
    for (size_t i = 0; i < n; i++) {
        sent += strlen(keys[i]);
        if (rc == 0) received += lens[i];
    }
    rdzv__count(b, sent, received);
    return rc;
}

static int store_set(rdzv__backend *b, const char *key, const void *value, size_t len)
{
    rdzv__count(b, strlen(key) + len, 0);
    return elastic_store_set(handle(b), key, value, len);
}

static int store_multi_set(rdzv__backend *b, const char *const *keys, const void *const *values,
                           const size_t *lens, size_t n)
{
    size_t sent = 0;
    for (size_t i = 0; i < n; i++) sent += strlen(keys[i]) + lens[i];
    rdzv__count(b, sent, 0);
    return elastic_store_multi_set(handle(b), keys, values, lens, n);
}

static int store_del(rdzv__backend *b, const char *key)
{
    rdzv__count(b, strlen(key), 0);
    return elastic_store_delete(handle(b), key);
}

static int store_add(rdzv__backend *b, const char *key, int64_t delta, int64_t *result)
{
    rdzv__count(b, strlen(key) + 8, 8);
    return elastic_store_add(handle(b), key, delta, result);
}

static int store_compare_set(rdzv__backend *b, const char *key, const void *expected, size_t elen,
                             const void *desired, size_t dlen, void **current, size_t *clen)
{
    int rc =
        elastic_store_compare_set(handle(b), key, expected, elen, desired, dlen, current, clen);
    rdzv__count(b, strlen(key) + elen + dlen, rc == 0 ? *clen : 0);
    return rc;
}

static int store_watch(rdzv__backend *b, const char *prefix, uint64_t after_revision,
                       int timeout_ms, uint64_t *revision)
{
    rdzv__count(b, strlen(prefix) + 12, 8);
    return elastic_store_watch(handle(b), prefix, after_revision, timeout_ms, revision);
}

static int store_keys(rdzv__backend *b, const char *prefix, size_t max, char ***keys, size_t *n)
{
    int rc = elastic_store_keys(handle(b), prefix, max, keys, n);
    size_t received = 0;
    for (size_t i = 0; rc == 0 && i < *n; i++) received += strlen((*keys)[i]);
    rdzv__count(b, strlen(prefix) + 8, received);
    return rc;
}

static int store_lease_grant(rdzv__backend *b, int ttl_ms, int keepalive_interval_ms,
                             uint64_t *lease)
{
    rdzv__count(b, 8, 8);
    return elastic_store_lease_grant(handle(b), ttl_ms, keepalive_interval_ms, lease);
}

static int store_lease_revoke(rdzv__backend *b, uint64_t lease)
{
    rdzv__count(b, 8, 0);
    return elastic_store_lease_revoke(handle(b), lease);
}

static int store_set_leased(rdzv__backend *b, const char *key, const void *value, size_t len,
                            uint64_t lease)
{
    rdzv__count(b, strlen(key) + len + 8, 0);
    return elastic_store_set_leased(handle(b), key, value, len, lease);
}

static int store_lease_check(rdzv__backend *b, uint64_t lease, int timeout_ms)
{
    rdzv__count(b, 8, 0);
    return store__lease_check(handle(b), lease, timeout_ms);
}

/* ---- composite calls: one BATCH request each where the server offers
 * batches, else the plain calls in sequence (backend_seq.c) ------------- */

static int store_add_get(rdzv__backend *b, const char *const *add_keys, size_t n_add, int64_t *sums,
                         const char *const *get_keys, size_t n_get, void **values, size_t *lens)
{
    elastic_store *s = handle(b);
    if (!store__batch_supported(s) || n_add + n_get > STORE__MAX_BATCH)
        return rdzv__seq_add_get(b, add_keys, n_add, sums, get_keys, n_get, values, lens);
    store__batch batch;
    store__batch_begin(&batch, s);
    size_t sent = 0, received = 0;
    for (size_t i = 0; i < n_add; i++) {
        store__batch_add(&batch, add_keys[i], 1);
        sent += strlen(add_keys[i]) + 8;
    }
    for (size_t i = 0; i < n_get; i++) {
        store__batch_get(&batch, get_keys[i]);
        sent += strlen(get_keys[i]);
        values[i] = NULL;
        lens[i] = 0;
    }
    int rc = store__batch_run(&batch, false);
    for (size_t i = 0; rc == 0 && i < n_add; i++)
        rc = store__batch_int(&batch, (uint32_t)i, &sums[i]);
    for (size_t i = 0; rc == 0 && i < n_get; i++) {
        rc = store__batch_value(&batch, (uint32_t)(n_add + i), &values[i], &lens[i]);
        if (rc == ELASTIC_ENOTFOUND) {
            elastic__clear_error();
            rc = 0;
        }
        received += lens[i];
    }
    if (rc != 0)
        for (size_t i = 0; i < n_get; i++) {
            elastic_free(values[i]);
            values[i] = NULL;
        }
    store__batch_free(&batch);
    rdzv__count(b, sent, received + 8 * n_add);
    return rc;
}

/* Batches have no conditional write: one batch reads the view, unless_key
 * among it, and only when that is absent a second adds and reads again
 * (the same two messages as reading the key first, then the adds; when it
 * exists the first is the answer). */
static int store_add_get_unless(rdzv__backend *b, const char *unless_key,
                                const char *const *add_keys, size_t n_add, int64_t *sums,
                                const char *const *get_keys, size_t n_get, void **values,
                                size_t *lens, bool *added)
{
    size_t at = n_get; /* unless_key's place among the reads */
    for (size_t i = 0; unless_key != NULL && i < n_get && at == n_get; i++)
        if (strcmp(get_keys[i], unless_key) == 0) at = i;
    if (!store__batch_supported(handle(b)) || at == n_get || n_add + n_get > STORE__MAX_BATCH)
        return rdzv__seq_add_get_unless(b, unless_key, add_keys, n_add, sums, get_keys, n_get,
                                        values, lens, added);
    *added = false;
    for (size_t i = 0; i < n_add; i++) sums[i] = 0;
    int rc = store_add_get(b, NULL, 0, NULL, get_keys, n_get, values, lens);
    if (rc != 0 || values[at] != NULL) return rc; /* it exists: the reads alone */
    for (size_t i = 0; i < n_get; i++) {
        elastic_free(values[i]);
        values[i] = NULL;
        lens[i] = 0;
    }
    rc = store_add_get(b, add_keys, n_add, sums, get_keys, n_get, values, lens);
    *added = rc == 0;
    return rc;
}

static int store_set_leased_wait(rdzv__backend *b, const char *key, const void *value, size_t len,
                                 uint64_t lease, const char *wait_key, int timeout_ms,
                                 void **wait_value, size_t *wait_len, uint64_t *set_revision)
{
    elastic_store *s = handle(b);
    if (!store__batch_supported(s))
        return rdzv__seq_set_leased_wait(b, key, value, len, lease, wait_key, timeout_ms,
                                         wait_value, wait_len, set_revision);
    *wait_value = NULL;
    *set_revision = 0; /* the store's monitor looks first (keys_at) */
    store__batch batch;
    store__batch_begin(&batch, s);
    store__batch_set_leased(&batch, key, value, len, lease);
    const char *keys[1] = { wait_key };
    store__batch_multi_get(&batch, keys, 1, timeout_ms);
    int rc = store__batch_run(&batch, true);
    if (rc == 0) {
        const store__batch_answer *set = &batch.answers[0];
        rc = set->status != 0
                 ? elastic__fail(set->status, "%.*s", (int)set->len, (const char *)set->body)
                 : store__batch_values(&batch, 1, 1, wait_value, wait_len);
    }
    store__batch_free(&batch);
    rdzv__count(b, strlen(key) + len + 8 + strlen(wait_key), rc == 0 ? *wait_len : 0);
    return rc;
}

static int store_keys_at(rdzv__backend *b, const char *prefix, size_t max, char ***keys, size_t *n,
                         uint64_t *revision)
{
    elastic_store *s = handle(b);
    *keys = NULL;
    *n = 0;
    if (!store__batch_supported(s)) return ELASTIC_EUNSUPPORTED;
    store__batch batch;
    store__batch_begin(&batch, s);
    store__batch_keys(&batch, prefix, max > UINT32_MAX ? UINT32_MAX : (uint32_t)max);
    int rc = store__batch_run(&batch, false);
    if (rc == 0) rc = store__batch_keys_answer(&batch, 0, keys, n);
    if (rc == 0) *revision = batch.revision;
    store__batch_free(&batch);
    size_t received = 0;
    for (size_t i = 0; rc == 0 && i < *n; i++) received += strlen((*keys)[i]);
    rdzv__count(b, strlen(prefix) + 8, received + 8);
    return rc;
}

static void store_close(rdzv__backend *b)
{
    if (b == NULL) return;
    elastic_store_close(handle(b));
    free(b);
}

/* The store lives in one agent (a lease guard polls it) and its watch says
 * only that something changed; it has no prefix delete (backend_seq.c). */
static const rdzv__backend_ops store_ops = {
    .outlives_clients = false,
    .watch_gives_end = false,
    .get = store_get,
    .multi_get = store_multi_get,
    .set = store_set,
    .multi_set = store_multi_set,
    .del = store_del,
    .del_prefix = rdzv__seq_del_prefix,
    .add = store_add,
    .compare_set = store_compare_set,
    .watch = store_watch,
    .keys = store_keys,
    .lease_grant = store_lease_grant,
    .lease_revoke = store_lease_revoke,
    .set_leased = store_set_leased,
    .lease_check = store_lease_check,
    .add_get = store_add_get,
    .add_get_unless = store_add_get_unless,
    .set_leased_wait = store_set_leased_wait,
    .keys_at = store_keys_at,
    .watch_area = rdzv__seq_watch_area,
    .close = store_close,
};

int rdzv__backend_store_open(elastic_store *store, const char *endpoint, const char *token,
                             const char *prefix, rdzv__backend **backend)
{
    store_backend *b = calloc(1, sizeof *b);
    if (b == NULL) return elastic__fail(ELASTIC_ENOMEM, "rdzv: out of memory");
    b->base.ops = &store_ops;
    int rc;
    if (store != NULL) {
        rc = elastic_store_clone(store, prefix, &b->store);
    } else if (endpoint != NULL && endpoint[0] != '\0') {
        elastic_store_opts opts;
        elastic_store_opts_init(&opts, sizeof opts);
        opts.prefix = prefix;
        opts.token = token;
        rc = elastic_store_connect(endpoint, &opts, &b->store);
    } else {
        rc =
            elastic__fail(ELASTIC_EINVAL, "rdzv: neither a store handle nor an endpoint was given");
    }
    if (rc != 0) {
        free(b);
        return rc;
    }
    *backend = &b->base;
    return 0;
}
