/*
 * The global commit through the job's store, for ranks that do not share
 * storage: every rank publishes its shard's digest and counts itself in; the
 * rank that completes the count writes the commit record to the store; every
 * rank waits for that record (commit_timeout_ms) and keeps a copy as its
 * local COMMIT file. A rank killed before writing its copy recovers it from
 * the store in elastic_ckpt_latest(). Under an agent the wait also ends with
 * the generation (ELASTIC_ERECONFIGURE: the step is abandoned). Keys, under
 * the store handle's prefix:
 *   ckpt/<step>/g<generation>/shard/<rank>   16 bytes: file size, manifest hash
 *   ckpt/<step>/g<generation>/done           how many ranks committed
 *   ckpt/<step>/g<generation>/commit         the commit record, or an abandon
 *   ckpt/<step>/g<generation>/replicas/<rank> its replicated blobs' digests (divergence_commit.c)
 * A rank whose save fails before it counts itself in (its memory tier is
 * full, a write failed, its caller aborted) writes an abandon to the commit
 * key instead: ABANDON_TAG, its error code (4 bytes) and why. The count can
 * no longer complete, so the others' wait for the record ends at once with
 * that error and reason, not at commit_timeout_ms.
 */
#include "common/dir.h"
#include "ckpt/ckpt.h"
#include "common/parse_int.h"
#include "store/store.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define ABANDON_TAG     "ABANDON:" /* never a record's magic */
#define ABANDON_TAG_LEN 8

static void step_key(char *out, size_t cap, uint64_t step, uint64_t generation, const char *what)
{
    snprintf(out, cap, "ckpt/%" PRIu64 "/g%" PRIu64 "/%s", step, generation, what);
}

/* Writes the step's abandon: its code and why (cut to 320 bytes). */
static void set_abandon(elastic_ckpt *c, uint64_t step, int code, const char *why)
{
    size_t why_len = strnlen(why, 320);
    uint8_t value[ABANDON_TAG_LEN + 4 + 320];
    memcpy(value, ABANDON_TAG, ABANDON_TAG_LEN);
    bytes__set_le32(value + ABANDON_TAG_LEN, (uint32_t)(int32_t)code);
    memcpy(value + ABANDON_TAG_LEN + 4, why, why_len);
    char key[64];
    step_key(key, sizeof key, step, c->opts.generation, "commit");
    if (elastic_store_set(c->opts.store, key, value, ABANDON_TAG_LEN + 4 + why_len) != 0)
        ELASTIC_LOG_W("ckpt", "step %" PRIu64 ": telling the other ranks it is abandoned: %s", step,
                      elastic_last_error());
}

/* The rank that completes the count: gathers every digest into the record.
 * With several ranks it reads their replica digests in the same request and
 * judges them first (divergence_commit.c): a divergence abandons the step
 * (the abandon's code ELASTIC_EDIVERGED), unless the job only warns. */
static int publish_record(elastic_ckpt *c, uint64_t step, const ckpt_replica_record *own)
{
    const elastic_ckpt_opts *o = &c->opts;
    uint32_t world = o->world;
    bool judge = world > 1 && ckpt__divergence_mode() != CKPT_DIVERGENCE_OFF;
    size_t n = judge ? 2u * world : world; /* the shards', then the replicas' keys */
    char(*keys)[64] = calloc(n, sizeof *keys);
    const char **key_ptrs = calloc(n, sizeof *key_ptrs);
    void **values = calloc(n, sizeof *values);
    size_t *lens = calloc(n, sizeof *lens);
    ckpt_commit_record r = { .step = step,
                             .generation = o->generation,
                             .world = world,
                             .shards = calloc(world, sizeof *r.shards) };
    int rc = keys && key_ptrs && values && lens && r.shards
                 ? 0
                 : elastic__fail(ELASTIC_ENOMEM, "commit record");
    for (uint32_t i = 0; rc == 0 && i < world; i++) {
        char what[32];
        snprintf(what, sizeof what, "shard/%" PRIu32, i);
        step_key(keys[i], sizeof keys[i], step, o->generation, what);
        key_ptrs[i] = keys[i];
        if (judge) {
            ckpt__replicas_key(step, o->generation, i, keys[world + i], sizeof keys[world + i]);
            key_ptrs[world + i] = keys[world + i];
        }
    }
    if (rc == 0)
        rc = elastic_store_multi_get(o->store, key_ptrs, n, o->commit_timeout_ms, values, lens);
    for (uint32_t i = 0; rc == 0 && i < world; i++) {
        if (lens[i] != 16)
            rc = elastic__fail(ELASTIC_ECORRUPT, "store key %s: %zu bytes, expected 16", keys[i],
                               lens[i]);
        else
            r.shards[i] = (ckpt_shard_digest){ bytes__le64(values[i]),
                                               bytes__le64((uint8_t *)values[i] + 8) };
    }
    char why[320];
    if (rc == 0 && judge &&
        ckpt__replicas_judge(c, step, values + world, lens + world, own, why, sizeof why) ==
            ELASTIC_EDIVERGED) {
        set_abandon(c, step, ELASTIC_EDIVERGED, why);
        goto out; /* every rank, this one too, finds the abandon where it waits */
    }
    bytes__buf buf = { 0 };
    if (rc == 0) rc = ckpt__commit_encode(&r, &buf);
    if (rc == 0) rc = ckpt__fence_check(c, step); /* the last rank may be the fenced one */
    char commit_key[64];
    step_key(commit_key, sizeof commit_key, step, o->generation, "commit");
    if (rc == 0) rc = elastic_store_set(o->store, commit_key, buf.data, buf.len);
    free(buf.data);
out:
    for (size_t i = 0; values && i < n; i++) elastic_free(values[i]);
    free(keys);
    free(key_ptrs);
    free(values);
    free(lens);
    ckpt__commit_free(&r);
    return rc;
}

/* Checks a record from the store against this rank's shard and keeps it as
 * the step's local COMMIT file. */
static int adopt_record(elastic_ckpt *c, uint64_t step, uint64_t generation, const void *data,
                        size_t len, const ckpt_shard_digest *own)
{
    ckpt_commit_record r;
    int rc = ckpt__commit_decode(data, len, &r);
    if (rc) return ckpt__fail_in(rc, "the store's commit record");
    if (r.step != step || r.generation != generation || c->opts.rank >= r.world ||
        r.shards[c->opts.rank].file_size != own->file_size ||
        r.shards[c->opts.rank].manifest_hash != own->manifest_hash)
        rc = elastic__fail(ELASTIC_ECORRUPT,
                           "the store's commit record of step %" PRIu64 " does not list this shard",
                           step);
    if (rc == 0) rc = ckpt__write_commit_record(c, &r);
    ckpt__commit_free(&r);
    return rc;
}

/* Waits for the step's record. Under an agent the wait ends with the
 * generation: in-process recovery keeps this process while a peer that died
 * never sends its shard, and the worker announces the generation's end on
 * the store connection (store__generation_ended), so the step is abandoned
 * here at once instead of after commit_timeout_ms. */
static int wait_record(elastic_ckpt *c, uint64_t step, const char *key, void **record, size_t *len)
{
    const elastic_ckpt_opts *o = &c->opts;
    elastic_store *waiter = NULL;
    int rc = o->generation != 0 ? store__clone_for_generation(o->store, o->generation, &waiter) : 0;
    if (rc == 0)
        rc = elastic_store_get(waiter != NULL ? waiter : o->store, key, o->commit_timeout_ms,
                               record, len);
    elastic_store_close(waiter);
    /* Every rank may have committed just before the end: the step stands then. */
    if (rc == ELASTIC_ECANCELED && elastic_store_try_get(o->store, key, record, len) == 0) return 0;
    if (rc == ELASTIC_ECANCELED)
        return elastic__fail(ELASTIC_ERECONFIGURE,
                             "step %" PRIu64 " abandoned: generation %" PRIu64
                             " ended while its commit waited for the other ranks",
                             step, o->generation);
    if (rc == ELASTIC_ETIMEDOUT)
        return elastic__fail(rc, "step %" PRIu64 ": not every rank committed within %d ms", step,
                             o->commit_timeout_ms);
    return rc;
}

/* This rank's shard digest and (several ranks) its replica digests, in one
 * request: the record is always there for the committing rank to read, a
 * "not compared" one when this rank does not take part. */
static int publish_digests(elastic_ckpt *c, uint64_t step, const ckpt_shard_digest *digest,
                           const ckpt_replica_record *replicas)
{
    const elastic_ckpt_opts *o = &c->opts;
    char shard_key[64], what[32], replicas_key[64];
    uint8_t value[16];
    bytes__set_le64(value, digest->file_size);
    bytes__set_le64(value + 8, digest->manifest_hash);
    snprintf(what, sizeof what, "shard/%" PRIu32, o->rank);
    step_key(shard_key, sizeof shard_key, step, o->generation, what);
    if (o->world <= 1) return elastic_store_set(o->store, shard_key, value, sizeof value);
    ckpt_replica_record none = { .rank = o->rank };
    bytes__buf record = { .limit = 64u << 20 };
    ckpt__replicas_encode(replicas != NULL && replicas->compared ? replicas : &none, &record);
    if (record.failed) {
        bytes__buf_free(&record);
        return elastic__fail(ELASTIC_ENOMEM, "replica digests");
    }
    ckpt__replicas_key(step, o->generation, o->rank, replicas_key, sizeof replicas_key);
    const char *keys[2] = { shard_key, replicas_key };
    const void *values[2] = { value, record.data };
    size_t lens[2] = { sizeof value, record.len };
    int rc = elastic_store_multi_set(o->store, keys, values, lens, 2);
    bytes__buf_free(&record);
    return rc;
}

int ckpt__store_commit(elastic_ckpt *c, uint64_t step, const ckpt_shard_digest *digest,
                       const ckpt_replica_record *replicas)
{
    const elastic_ckpt_opts *o = &c->opts;
    char key[64];
    int rc = ckpt__fence_check(c, step);
    if (rc == 0) rc = publish_digests(c, step, digest, replicas);
    int64_t committed = 0;
    step_key(key, sizeof key, step, o->generation, "done");
    if (rc == 0) rc = elastic_store_add(o->store, key, 1, &committed);
    if (rc == 0 && committed == (int64_t)o->world) rc = publish_record(c, step, replicas);
    void *record = NULL;
    size_t len = 0;
    step_key(key, sizeof key, step, o->generation, "commit");
    if (rc == 0) rc = wait_record(c, step, key, &record, &len);
    if (rc == 0 && len >= ABANDON_TAG_LEN + 4 &&
        memcmp(record, ABANDON_TAG, ABANDON_TAG_LEN) == 0) {
        const uint8_t *p = (const uint8_t *)record + ABANDON_TAG_LEN;
        int32_t code = (int32_t)bytes__le32(p);
        if (code >= 0 || code <= ELASTIC_ERRNO_END_) code = ELASTIC_ECANCELED;
        int why_len = (int)(len - ABANDON_TAG_LEN - 4 > 400 ? 400 : len - ABANDON_TAG_LEN - 4);
        char why[404];
        snprintf(why, sizeof why, "%.*s", why_len, (const char *)(p + 4));
        if (code == ELASTIC_EDIVERGED)
            rc = ckpt__replicas_diverged(c, step, why);
        else
            rc = elastic__fail(code, "step %" PRIu64 " abandoned: %s", step, why);
    } else if (rc == 0)
        rc = adopt_record(c, step, o->generation, record, len, digest);
    elastic_free(record);
    if (rc == 0 && (!o->shared_storage || o->rank == 0)) ckpt__apply_retention(c);
    return rc;
}

void ckpt__store_abandon(elastic_ckpt *c, uint64_t step, int code, const char *why)
{
    const elastic_ckpt_opts *o = &c->opts;
    if (o->store == NULL || o->world <= 1) return;
    char text[320];
    snprintf(text, sizeof text, "rank %" PRIu32 ": %s", o->rank,
             why != NULL && *why != '\0' ? why : "its save was aborted");
    /* Best effort: without the store the others end at commit_timeout_ms.
     * The caller's error stays this thread's last (the store call clears it). */
    char kept[512];
    snprintf(kept, sizeof kept, "%s", elastic_last_error());
    set_abandon(c, step, code, text);
    if (kept[0] != '\0')
        elastic__fail(code, "%s", kept);
    else
        elastic__clear_error();
}

/* elastic_ckpt_latest() found a step with this rank's shard but no COMMIT:
 * if the store holds the step's record, write it locally now. */
int ckpt__store_recover_commit(elastic_ckpt *c, uint64_t step)
{
    char step_dir[PATH_MAX], prefix[32];
    ckpt__step_dir(c->dir, step, step_dir, sizeof step_dir);
    snprintf(prefix, sizeof prefix, "shard-%05" PRIu32 "-g", c->opts.rank);
    DIR *d = elastic__opendir(step_dir);
    if (d == NULL)
        return elastic__fail(ELASTIC_ENOTFOUND, "step %" PRIu64 " is not committed", step);
    int rc = ELASTIC_ENOTFOUND;
    struct dirent *e;
    while (rc != 0 && (e = readdir(d)) != NULL) {
        /* "shard-<rank>-g<generation>.elck": anything else is not ours to adopt. */
        size_t prefix_len = strlen(prefix), name_len = strlen(e->d_name);
        uint64_t generation;
        if (strncmp(e->d_name, prefix, prefix_len) != 0 || name_len < prefix_len + 5 ||
            strcmp(e->d_name + name_len - 5, ".elck") != 0 ||
            elastic__parse_u64_n(NULL, e->d_name + prefix_len, name_len - prefix_len - 5, 0,
                                 UINT64_MAX, &generation) != 0)
            continue;
        char path[PATH_MAX + 300], key[64];
        snprintf(path, sizeof path, "%s/%s", step_dir, e->d_name);
        ckpt_shard_digest own;
        void *record = NULL;
        size_t len = 0;
        step_key(key, sizeof key, step, generation, "commit");
        if (ckpt__shard_digest(path, &own, NULL, NULL) == 0 &&
            elastic_store_try_get(c->opts.store, key, &record, &len) == 0)
            rc = adopt_record(c, step, generation, record, len, &own);
        elastic_free(record);
    }
    closedir(d);
    if (rc == 0)
        ELASTIC_LOG_I("ckpt", "step %" PRIu64 ": commit record recovered from the store", step);
    return rc ? elastic__fail(ELASTIC_ENOTFOUND, "step %" PRIu64 " is not committed", step) : 0;
}
