/*
 * The rendezvous' keys as a small job-wide key-value store for the agent's
 * records that must outlive a generation and the agent that wrote them (the
 * failure history, src/agent/failure_history.c). Both backends keep these
 * keys for the whole job: the c10d store under "rdzv/<run_id>/", etcd under
 * "<prefix>/<run_id>/". Each call is one backend request, on any thread.
 */
#include "rdzv/rdzv.h"

#include <string.h>

/* The caller's keys live under "agent/": never a rendezvous key of our own. */
static int check_key(const char *key)
{
    if (key == NULL || strncmp(key, RDZV__JOB_KEY_PREFIX, strlen(RDZV__JOB_KEY_PREFIX)) != 0 ||
        strlen(key) > 200)
        return elastic__fail(ELASTIC_EINVAL, "rdzv: a job record's key must start with \"%s\"",
                             RDZV__JOB_KEY_PREFIX);
    return 0;
}

int rdzv__job_set(elastic_rdzv *r, const char *key, const void *value, size_t len)
{
    int rc = check_key(key);
    return rc != 0 ? rc : r->backend->ops->set(r->backend, key, value, len);
}

int rdzv__job_add(elastic_rdzv *r, const char *key, int64_t delta, int64_t *result)
{
    int rc = check_key(key);
    return rc != 0 ? rc : r->backend->ops->add(r->backend, key, delta, result);
}

int rdzv__job_keys(elastic_rdzv *r, const char *prefix, size_t max, char ***keys, size_t *n)
{
    *keys = NULL;
    *n = 0;
    int rc = check_key(prefix);
    return rc != 0 ? rc : r->backend->ops->keys(r->backend, prefix, max, keys, n);
}

int rdzv__job_multi_get(elastic_rdzv *r, const char *const *keys, size_t n, int timeout_ms,
                        void **values, size_t *lens)
{
    for (size_t i = 0; i < n; i++) {
        int rc = check_key(keys[i]);
        if (rc != 0) return rc;
    }
    return r->backend->ops->multi_get(r->backend, keys, n, timeout_ms, values, lens);
}
