/*
 * A join's composite backend operations (backend.h) as the plain calls in
 * sequence, through the backend's own table: what a backend whose service
 * cannot carry them in one message does (a store server from before
 * batches; the store's watch_area and del_prefix always).
 * They keep each operation's contract except its one-message atomicity,
 * which the join does not depend on: it reads the round pointer after its
 * adds and notices a seal that came in between.
 */
#include "rdzv/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rdzv__seq_add_get(rdzv__backend *b, const char *const *add_keys, size_t n_add, int64_t *sums,
                      const char *const *get_keys, size_t n_get, void **values, size_t *lens)
{
    for (size_t i = 0; i < n_get; i++) values[i] = NULL, lens[i] = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n_add; i++) rc = b->ops->add(b, add_keys[i], 1, &sums[i]);
    for (size_t i = 0; rc == 0 && i < n_get; i++) {
        rc = b->ops->get(b, get_keys[i], &values[i], &lens[i]);
        if (rc == ELASTIC_ENOTFOUND) { /* absent: NULL, as in one message */
            elastic__clear_error();
            values[i] = NULL;
            lens[i] = 0;
            rc = 0;
        }
    }
    for (size_t i = 0; rc != 0 && i < n_get; i++) {
        elastic_free(values[i]);
        values[i] = NULL;
        lens[i] = 0;
    }
    return rc;
}

int rdzv__seq_add_get_unless(rdzv__backend *b, const char *unless_key, const char *const *add_keys,
                             size_t n_add, int64_t *sums, const char *const *get_keys, size_t n_get,
                             void **values, size_t *lens, bool *added)
{
    *added = false;
    for (size_t i = 0; i < n_add; i++) sums[i] = 0;
    for (size_t i = 0; i < n_get; i++) values[i] = NULL, lens[i] = 0;
    if (unless_key == NULL)
        return elastic__fail(ELASTIC_EINVAL, "rdzv: add_get_unless without a key to test");
    void *guard = NULL;
    size_t guard_len = 0;
    int rc = b->ops->get(b, unless_key, &guard, &guard_len);
    elastic_free(guard);
    if (rc == 0) /* it exists: nothing added, the reads alone */
        return b->ops->add_get(b, NULL, 0, sums, get_keys, n_get, values, lens);
    if (rc != ELASTIC_ENOTFOUND) return rc;
    elastic__clear_error();
    rc = b->ops->add_get(b, add_keys, n_add, sums, get_keys, n_get, values, lens);
    *added = rc == 0;
    return rc;
}

int rdzv__seq_set_leased_wait(rdzv__backend *b, const char *key, const void *value, size_t len,
                              uint64_t lease, const char *wait_key, int timeout_ms,
                              void **wait_value, size_t *wait_len, uint64_t *set_revision)
{
    *wait_value = NULL;
    *wait_len = 0;
    *set_revision = 0; /* not said: the monitor looks first (keys_at) */
    int rc = b->ops->set_leased(b, key, value, len, lease);
    if (rc != 0) return rc;
    const char *keys[1] = { wait_key };
    return b->ops->multi_get(b, keys, 1, timeout_ms > 0 ? timeout_ms : 1, wait_value, wait_len);
}

int rdzv__seq_watch_area(rdzv__backend *b, const char *prefix, uint64_t after_revision,
                         int timeout_ms, uint64_t *revision, void **end_value, size_t *end_len)
{
    *end_value = NULL;
    *end_len = 0;
    return b->ops->watch(b, prefix, after_revision, timeout_ms, revision);
}

/* The most keys one area holds is a handful (rec, a, e, done, a kick); the
 * bound only keeps a corrupt area from costing more. */
#define SEQ_DEL_PREFIX_MAX 4096

int rdzv__seq_del_prefix(rdzv__backend *b, const char *prefix)
{
    char **names = NULL;
    size_t n = 0;
    int rc = b->ops->keys(b, prefix, SEQ_DEL_PREFIX_MAX, &names, &n);
    if (rc != 0) return rc;
    size_t plen = strlen(prefix);
    char key[512];
    for (size_t i = 0; rc == 0 && i < n; i++) {
        /* Listed names may or may not repeat the prefix (backend.h: relative). */
        bool whole = strncmp(names[i], prefix, plen) == 0;
        int w = snprintf(key, sizeof key, "%s%s", whole ? "" : prefix, names[i]);
        if (w < 0 || (size_t)w >= sizeof key) {
            rc = elastic__fail(ELASTIC_ELIMIT, "rdzv: key under %.60s is too long", prefix);
            break;
        }
        rc = b->ops->del(b, key);
        if (rc == ELASTIC_ENOTFOUND) { /* gone meanwhile: as wanted */
            elastic__clear_error();
            rc = 0;
        }
    }
    elastic_free(names);
    return rc;
}
