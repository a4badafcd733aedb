/*
 * The memory tier's replica key for a run that has no store token (on etcd,
 * where each generation's store gets a random token of its own; on a store
 * run without a token file): one random 256-bit key per run, written once
 * into the run's key "replica_key" by compare-and-set (whoever asks first)
 * and read back by every other node. It lives in the run's key space with
 * the same protection as the rest of it: on etcd the job's prefix, behind
 * etcd's authentication and TLS, as the generation store's token is (r/<g>/
 * store); on a store run, the store itself. The replica channel then always
 * authenticates (replica.h), whatever the backend.
 */
#include "rdzv/rdzv.h"

#include "common/conn_proof.h"

#include <stdio.h>

#define REPLICA_KEY_NAME "replica_key"

static bool well_formed(const void *value, size_t len)
{
    if (value == NULL || len != RDZV_REPLICA_KEY_CHARS) return false;
    const char *text = value;
    for (size_t i = 0; i < len; i++)
        if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f')))
            return false;
    return true;
}

int rdzv__replica_key(elastic_rdzv *r, char *out, size_t cap)
{
    if (r == NULL || out == NULL || cap <= RDZV_REPLICA_KEY_CHARS)
        return elastic__fail(ELASTIC_EINVAL, "rdzv: replica key: bad argument");
    void *value = NULL;
    size_t len = 0;
    int rc = r->backend->ops->get(r->backend, REPLICA_KEY_NAME, &value, &len);
    if (rc == ELASTIC_ENOTFOUND) {
        elastic__clear_error();
        uint8_t raw[RDZV_REPLICA_KEY_CHARS / 2];
        char mine[RDZV_REPLICA_KEY_CHARS + 1];
        rc = elastic__random_bytes(raw, sizeof raw);
        for (size_t i = 0; rc == 0 && i < sizeof raw; i++)
            snprintf(mine + 2 * i, 3, "%02x", raw[i]);
        /* Only if absent: whoever wins, every node reads the winner's key. */
        if (rc == 0)
            rc = r->backend->ops->compare_set(r->backend, REPLICA_KEY_NAME, NULL, 0, mine,
                                              RDZV_REPLICA_KEY_CHARS, &value, &len);
        memset(raw, 0, sizeof raw);
        memset(mine, 0, sizeof mine);
    }
    if (rc == 0 && !well_formed(value, len))
        rc =
            elastic__fail(ELASTIC_ECORRUPT,
                          "rdzv: run %s: key " REPLICA_KEY_NAME " holds no replica key (%zu bytes)",
                          r->run_id, len);
    if (rc == 0) {
        memcpy(out, value, RDZV_REPLICA_KEY_CHARS);
        out[RDZV_REPLICA_KEY_CHARS] = '\0';
    }
    if (value != NULL) memset(value, 0, len);
    elastic_free(value);
    return rc;
}
