/*
 * Checkpoint content derived from (step, rank, blob), shared by the ckpt tests
 * and their helper programs: a reader can tell exactly what a step must hold
 * without any record of what the writer did. Sizes vary from empty to several
 * chunks; the bytes mix compressible runs with random stretches.
 */
#ifndef ELASTIC_TEST_CKPT_CONTENT_H
#define ELASTIC_TEST_CKPT_CONTENT_H

#include "elastic.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_TEST_BLOBS 4

static inline uint64_t ckpt_test_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static inline size_t ckpt_test_blob_len(uint64_t step, uint32_t rank, int blob)
{
    uint64_t h = ckpt_test_mix(step * 131 + rank * 7 + (uint64_t)blob);
    switch (blob) {
    case 0: return 8;                                    /* the step itself */
    case 1: return (size_t)(h % 3000);                   /* small, sometimes empty */
    case 2: return (size_t)(h % 5 == 0 ? 0 : h % 90000); /* around one chunk */
    default:
        return (size_t)(h % 4 == 0 ? 300000 + h % 70000 : h % 2000); /* sometimes several chunks */
    }
}

static inline void ckpt_test_fill(uint64_t step, uint32_t rank, int blob, uint8_t *buf, size_t len)
{
    if (blob == 0 && len == 8) {
        memcpy(buf, &step, 8);
        return;
    }
    uint64_t state = ckpt_test_mix(step ^ ((uint64_t)rank << 40) ^ ((uint64_t)blob << 56)) | 1;
    for (size_t i = 0; i < len; i++) {
        if ((i / 4096) % 2 == 0) {
            buf[i] = (uint8_t)(i / 64 + step); /* compressible stretch */
        } else {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            buf[i] = (uint8_t)state;
        }
    }
}

static inline void ckpt_test_name(int blob, char *out, size_t cap)
{
    snprintf(out, cap, "blob-%d", blob);
}

/* Puts the derived blobs of (step, rank) into a transaction. */
static inline int ckpt_test_put_all(elastic_ckpt_txn *txn, uint64_t step, uint32_t rank)
{
    int rc = 0;
    for (int b = 0; rc == 0 && b < CKPT_TEST_BLOBS; b++) {
        size_t len = ckpt_test_blob_len(step, rank, b);
        uint8_t *buf = malloc(len ? len : 1);
        if (buf == NULL) return ELASTIC_ENOMEM;
        char name[32];
        ckpt_test_name(b, name, sizeof name);
        ckpt_test_fill(step, rank, b, buf, len);
        rc = elastic_ckpt_put(txn, name, buf, len);
        free(buf);
    }
    return rc;
}

/* Begin, put the derived blobs, commit. */
static inline int ckpt_test_save(elastic_ckpt *c, uint64_t step, uint32_t rank)
{
    elastic_ckpt_txn *txn;
    int rc = elastic_ckpt_begin(c, step, &txn);
    if (rc) return rc;
    rc = ckpt_test_put_all(txn, step, rank);
    if (rc) {
        elastic_ckpt_abort(txn);
        return rc;
    }
    return elastic_ckpt_commit(txn);
}

/* 0 when `rank`'s shard of the step holds exactly the derived blobs; else
 * an error code with the reason in why. */
static inline int ckpt_test_check(elastic_ckpt *c, uint64_t step, uint32_t rank, char *why,
                                  size_t cap)
{
    char **names;
    size_t n;
    int rc = elastic_ckpt_list_blobs(c, step, (int)rank, &names, &n);
    if (rc) {
        snprintf(why, cap, "list_blobs: %s (%s)", elastic_err_name(rc), elastic_last_error());
        return rc;
    }
    size_t derived = 0; /* other blobs (a replicated "config") may be there too */
    for (size_t i = 0; i < n; i++) derived += strncmp(names[i], "blob-", 5) == 0;
    elastic_free(names);
    if (derived != CKPT_TEST_BLOBS) {
        snprintf(why, cap, "step %llu has %zu derived blobs", (unsigned long long)step, derived);
        return ELASTIC_ECORRUPT;
    }
    for (int b = 0; b < CKPT_TEST_BLOBS; b++) {
        char name[32];
        ckpt_test_name(b, name, sizeof name);
        void *data;
        size_t len, want = ckpt_test_blob_len(step, rank, b);
        rc = elastic_ckpt_read_shard(c, step, (int)rank, name, &data, &len);
        if (rc) {
            snprintf(why, cap, "read %s: %s (%s)", name, elastic_err_name(rc),
                     elastic_last_error());
            return rc;
        }
        uint8_t *expect = malloc(want ? want : 1);
        ckpt_test_fill(step, rank, b, expect, want);
        bool same = len == want && memcmp(data, expect, want) == 0;
        free(expect);
        elastic_free(data);
        if (!same) {
            snprintf(why, cap, "step %llu %s differs (%zu bytes, expected %zu)",
                     (unsigned long long)step, name, len, want);
            return ELASTIC_ECORRUPT;
        }
    }
    return 0;
}

#endif /* ELASTIC_TEST_CKPT_CONTENT_H */
