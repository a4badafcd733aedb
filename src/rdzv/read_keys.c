/*
 * Typed, validated reads of rendezvous keys: counters, the round pointer,
 * a round's "formed" summary and end record, the job's closed marker.
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int rdzv__read_int(elastic_rdzv *r, const char *key, int64_t dflt, int64_t *out)
{
    void *value = NULL;
    size_t len = 0;
    int rc = r->backend->ops->get(r->backend, key, &value, &len);
    if (rc == ELASTIC_ENOTFOUND) {
        *out = dflt;
        return 0;
    }
    if (rc != 0) return rc;
    rc = rdzv__parse_int(value, len, INT32_MIN, INT64_MAX, out);
    elastic_free(value);
    return rc == 0 ? 0 : elastic__fail(rc, "rdzv: key %s holds no integer", key);
}

int rdzv__round_parse(elastic_rdzv *r, const void *value, size_t len, rdzv__round_ptr *ptr)
{
    memset(ptr, 0, sizeof *ptr);
    ptr->open_round = 1;
    if (value == NULL) return 0; /* absent: round 1 is open */
    const char *text = value;
    const char *first = memchr(text, ' ', len);
    const char *second =
        first != NULL ? memchr(first + 1, ' ', len - (size_t)(first + 1 - text)) : NULL;
    int64_t open_round = 0, sealed = 0;
    if (len >= sizeof ptr->raw || second == NULL ||
        rdzv__parse_int(text, (size_t)(first - text), 2, INT64_MAX, &open_round) != 0 ||
        rdzv__parse_int(first + 1, (size_t)(second - first - 1), 0, INT32_MAX, &sealed) != 0)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: run %s: corrupt round pointer (%zu bytes)",
                             r->run_id, len);
    ptr->open_round = (uint64_t)open_round;
    ptr->prev_sealed = (int)sealed;
    ptr->len = len;
    memcpy(ptr->raw, text, len);
    return 0;
}

int rdzv__read_round(elastic_rdzv *r, rdzv__round_ptr *ptr)
{
    void *value = NULL;
    size_t len = 0;
    int rc = r->backend->ops->get(r->backend, "round", &value, &len);
    if (rc == ELASTIC_ENOTFOUND) return rdzv__round_parse(r, NULL, 0, ptr);
    if (rc == 0) rc = rdzv__round_parse(r, value, len, ptr);
    elastic_free(value);
    return rc;
}

int rdzv__wait_value(elastic_rdzv *r, const char *key, int timeout_ms, void **value, size_t *len)
{
    const char *keys[1] = { key };
    return r->backend->ops->multi_get(r->backend, keys, 1, timeout_ms, value, len);
}

int rdzv__read_formed(elastic_rdzv *r, uint64_t round, int timeout_ms, int *group_world_size)
{
    char key[64];
    void *value = NULL;
    size_t len = 0;
    rdzv__key_round(key, sizeof key, round, "formed");
    int rc = timeout_ms > 0 ? rdzv__wait_value(r, key, timeout_ms, &value, &len)
                            : r->backend->ops->get(r->backend, key, &value, &len);
    if (rc == ELASTIC_ETIMEDOUT) rc = ELASTIC_ENOTFOUND;
    if (rc != 0) return rc;
    int64_t gws = 0;
    rc = rdzv__parse_int(value, len, 0, RDZV__MAX_NODES, &gws);
    elastic_free(value);
    if (rc != 0) return elastic__fail(rc, "rdzv: corrupt %s", key);
    *group_world_size = (int)gws;
    return 0;
}

int rdzv__read_end(elastic_rdzv *r, uint64_t round, elastic_rdzv_cause *cause)
{
    char key[64];
    void *value = NULL;
    size_t len = 0;
    rdzv__key_round(key, sizeof key, round, "end");
    int rc = r->backend->ops->get(r->backend, key, &value, &len);
    if (rc != 0) return rc;
    rc = rdzv__cause_decode(value, len, cause);
    elastic_free(value);
    return rc;
}

int rdzv__closed_code(elastic_rdzv *r, const void *value, size_t len)
{
    if (value == NULL) return 0;
    /* "B <cause>": the restart budget ran out; "C <cause>": closed. */
    if (len > 0 && ((const char *)value)[0] == 'B')
        return elastic__fail(ELASTIC_EBUDGET,
                             "rdzv: run %s used up its restart budget (max_restarts %d)", r->run_id,
                             r->max_restarts);
    return elastic__fail(ELASTIC_ECLOSED, "rdzv: run %s was closed", r->run_id);
}

int rdzv__check_closed(elastic_rdzv *r)
{
    void *value = NULL;
    size_t len = 0;
    int rc = r->backend->ops->get(r->backend, "closed", &value, &len);
    if (rc == ELASTIC_ENOTFOUND) return 0;
    if (rc != 0) return rc;
    rc = rdzv__closed_code(r, value, len);
    elastic_free(value);
    return rc;
}

int rdzv__read_closed(elastic_rdzv *r, elastic_rdzv_cause *cause, bool *budget)
{
    void *value = NULL;
    size_t len = 0;
    int rc = r->backend->ops->get(r->backend, "closed", &value, &len);
    if (rc != 0) return rc;
    /* "B <cause>" or "C <cause>" (rdzv__shut_job) */
    const char *text = value;
    if (len < 2 || (text[0] != 'B' && text[0] != 'C') || text[1] != ' ') {
        elastic_free(value);
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: run %s: corrupt \"closed\" key", r->run_id);
    }
    *budget = text[0] == 'B';
    rc = rdzv__cause_decode(text + 2, len - 2, cause);
    elastic_free(value);
    return rc;
}

bool rdzv__cause_is_infra(const elastic_rdzv_cause *cause)
{
    return cause->kind == ELASTIC_RDZV_JOB_ENDED &&
           strncmp(cause->reason, RDZV__INFRA_REASON, strlen(RDZV__INFRA_REASON)) == 0;
}

bool rdzv__cause_is_finished(const elastic_rdzv_cause *cause)
{
    return cause->kind == ELASTIC_RDZV_JOB_ENDED &&
           strcmp(cause->reason, RDZV__FINISHED_REASON) == 0;
}

int rdzv__read_info(elastic_rdzv *r, uint64_t round, int timeout_ms, rdzv__info *info,
                    rdzv__record **members)
{
    char key[64];
    void *blob = NULL;
    size_t len = 0;
    rdzv__key_round(key, sizeof key, round, "info");
    int rc = timeout_ms > 0 ? rdzv__wait_value(r, key, timeout_ms, &blob, &len)
                            : r->backend->ops->get(r->backend, key, &blob, &len);
    if (rc == 0) rc = rdzv__info_decode(blob, len, info, members);
    elastic_free(blob);
    return rc;
}
