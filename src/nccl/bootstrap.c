/*
 * Agreeing through the job's store, in the generation's key space: every rank
 * publishes what it brings (its rank in the previous communicator, if it kept
 * one), all derive the same plan (shrink or create), and for a new
 * communicator rank 0 publishes the unique id the others wait for.
 */
#include "common/clock.h"
#include "common/parse_int.h"
#include "nccl/nccl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define BOOTSTRAP_CHUNK 512 /* keys per multi_get round trip */

typedef struct member_record {
    uint64_t old_generation;
    int old_rank, old_nranks, version;
} member_record;

static void key_for(char *out, size_t size, const char *tag, uint64_t build, const char *what)
{
    snprintf(out, size, "nccl/%s/%" PRIu64 "/%s", tag, build, what);
}

/* "G R N V" from the store, bounded and validated: four numbers, single spaces. */
static int parse_record(const char *text, size_t len, member_record *record)
{
    char copy[96];
    if (len == 0 || len >= sizeof copy)
        return elastic__fail(ELASTIC_EPROTO, "nccl: member record of %zu bytes", len);
    memcpy(copy, text, len);
    copy[len] = '\0';
    static const int64_t lo[4] = { 0, -1, 0, INT32_MIN },
                         hi[4] = { INT64_MAX, INT32_MAX, INT32_MAX, INT32_MAX };
    int64_t v[4];
    const char *field = copy;
    for (int i = 0; i < 4; i++) {
        size_t n = strcspn(field, " ");
        bool last = i == 3;
        if ((field[n] == '\0') != last ||
            elastic__parse_i64_n(NULL, field, n, lo[i], hi[i], &v[i]) != 0)
            return elastic__fail(ELASTIC_EPROTO, "nccl: malformed member record \"%s\"", copy);
        field += n + 1;
    }
    record->old_generation = (uint64_t)v[0];
    record->old_rank = (int)v[1];
    record->old_nranks = (int)v[2];
    record->version = (int)v[3];
    return 0;
}

static int read_records(elastic_store *store, const char *tag, uint64_t build, int nranks,
                        int deadline_ms, member_record *records)
{
    static _Thread_local char keys_text[BOOTSTRAP_CHUNK][NCCL__TAG_MAX + 64];
    const char *keys[BOOTSTRAP_CHUNK];
    void *values[BOOTSTRAP_CHUNK];
    size_t lens[BOOTSTRAP_CHUNK];
    uint64_t deadline = elastic__deadline_ms(deadline_ms);
    for (int first = 0; first < nranks; first += BOOTSTRAP_CHUNK) {
        int n = nranks - first < BOOTSTRAP_CHUNK ? nranks - first : BOOTSTRAP_CHUNK;
        for (int i = 0; i < n; i++) {
            char what[32];
            snprintf(what, sizeof what, "member/%d", first + i);
            key_for(keys_text[i], sizeof keys_text[i], tag, build, what);
            keys[i] = keys_text[i];
        }
        int left = elastic__ms_left(deadline);
        int rc = left > 0 ? elastic_store_multi_get(store, keys, (size_t)n, left, values, lens)
                          : elastic__fail(ELASTIC_ETIMEDOUT, "deadline passed");
        if (rc != 0)
            return elastic__fail(rc, "nccl: waiting for the %d ranks of communicator \"%s\": %s",
                                 nranks, tag, elastic_last_error());
        for (int i = 0; i < n; i++) {
            if (rc == 0) rc = parse_record(values[i], lens[i], &records[first + i]);
            elastic_free(values[i]);
        }
        if (rc != 0) return rc;
    }
    return 0;
}

/* Shrink only when every rank comes from the same previous communicator, in
 * the same order, with a library that can, and someone is actually gone. */
static void derive_plan(const member_record *records, int nranks, nccl__plan *plan)
{
    plan->shrink = false;
    plan->exclude_count = 0;
    const member_record *first = &records[0];
    if (first->old_rank < 0 || first->old_nranks <= nranks) return;
    for (int i = 0; i < nranks; i++) {
        const member_record *r = &records[i];
        if (r->old_rank < 0 || r->old_generation != first->old_generation ||
            r->old_nranks != first->old_nranks || r->version < NCCL__SHRINK_VERSION ||
            r->old_rank >= r->old_nranks || (i > 0 && r->old_rank <= records[i - 1].old_rank))
            return;
    }
    int next = 0;
    for (int old = 0; old < first->old_nranks; old++) {
        if (next < nranks && records[next].old_rank == old) {
            next++;
            continue;
        }
        if (plan->exclude_count == (int)ELASTIC__ARRAY_LEN(plan->exclude)) return;
        plan->exclude[plan->exclude_count++] = old;
    }
    plan->shrink = true;
}

int nccl__bootstrap_plan(elastic_nccl_comm *c, const elastic_worker_info *info, int old_rank,
                         int old_nranks, uint64_t old_generation, int deadline_ms, nccl__plan *plan)
{
    elastic_store *store = NULL;
    if (elastic_worker_get_store(c->worker, &store) != 0 || store == NULL)
        return elastic__fail(ELASTIC_EUNSUPPORTED,
                             "nccl: the worker has no store (plain torchrun?) to exchange ids");
    char key[NCCL__TAG_MAX + 64], what[32], record[96];
    snprintf(what, sizeof what, "member/%d", info->rank);
    key_for(key, sizeof key, c->tag, c->builds, what);
    int shrinkable = old_rank >= 0 && c->api->comm_shrink != NULL;
    int length = snprintf(record, sizeof record, "%" PRIu64 " %d %d %d", old_generation,
                          shrinkable ? old_rank : -1, shrinkable ? old_nranks : 0, c->api->version);
    int rc = elastic_store_set(store, key, record, (size_t)length);
    if (rc != 0) return rc;
    member_record *records = calloc((size_t)info->world_size, sizeof *records);
    if (records == NULL) return elastic__fail(ELASTIC_ENOMEM, "nccl: member records");
    rc = read_records(store, c->tag, c->builds, info->world_size, deadline_ms, records);
    if (rc == 0) derive_plan(records, info->world_size, plan);
    free(records);
    return rc;
}

int nccl__bootstrap_unique_id(const nccl__api *api, elastic_store *store, const char *tag,
                              uint64_t build, int rank, int timeout_ms, nccl__unique_id *id)
{
    char key[NCCL__TAG_MAX + 64];
    key_for(key, sizeof key, tag, build, "id");
    if (rank == 0) {
        int result = api->get_unique_id(id);
        if (result != NCCL__SUCCESS) return nccl__fail(api, NULL, result, "ncclGetUniqueId");
        return elastic_store_set(store, key, id, sizeof *id);
    }
    void *value = NULL;
    size_t len = 0;
    int rc = elastic_store_get(store, key, timeout_ms, &value, &len);
    if (rc != 0)
        return elastic__fail(rc, "nccl: no unique id from rank 0 for communicator \"%s\": %s", tag,
                             elastic_last_error());
    if (len != sizeof *id)
        rc = elastic__fail(ELASTIC_EPROTO, "nccl: unique id of %zu bytes", len);
    else
        memcpy(id, value, sizeof *id);
    elastic_free(value);
    return rc;
}
