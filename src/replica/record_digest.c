/*
 * The job's memory-committed record, by digest (replica.h, "the job's
 * record"): every node that knows the job's last memory-committed step says
 * in its sync record the SHA-256 of that step's commit record (the bytes
 * the step's global commit wrote, the same on every node), and a copy staged
 * for restore is taken only with a record of that digest. A record that came
 * with a peer's copy vouches for nothing by itself: a node with no record of
 * its own would otherwise take a forged shard beside a forged record.
 */
#include "replica/replica.h"

#include "common/dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int replica__record_digest_file(const char *path, uint8_t out[REPLICA_DIGEST_BYTES])
{
    uint8_t *raw = NULL;
    size_t len = 0;
    int rc = ckpt__read_small_file(path, CKPT_MAX_COMMIT_RECORD, &raw, &len);
    unsigned out_len = 0;
    if (rc == 0 && (EVP_Digest(raw, len, out, &out_len, EVP_sha256(), NULL) != 1 ||
                    out_len != REPLICA_DIGEST_BYTES))
        rc = elastic__fail(ELASTIC_ESYS, "SHA-256 of %s failed", path);
    free(raw);
    return rc;
}

int replica__own_record_digest(const char *root, uint64_t step, uint8_t out[REPLICA_DIGEST_BYTES])
{
    char own[PATH_MAX], step_dir[PATH_MAX], path[PATH_MAX + 64];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, root);
    ckpt__step_dir(own, step, step_dir, sizeof step_dir);
    snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
    return replica__record_digest_file(path, out);
}

int replica__record_is_the_jobs(const char *path, const uint8_t want[REPLICA_DIGEST_BYTES])
{
    uint8_t got[REPLICA_DIGEST_BYTES];
    int rc = replica__record_digest_file(path, got);
    if (rc != 0) return rc;
    if (memcmp(got, want, REPLICA_DIGEST_BYTES) != 0)
        return elastic__fail(ELASTIC_ECORRUPT,
                             "%s is not the job's memory-committed record (its SHA-256 differs "
                             "from the one the job's nodes published)",
                             path);
    return 0;
}

void replica__digest_hex(const uint8_t digest[REPLICA_DIGEST_BYTES], char *out, size_t cap)
{
    size_t at = 0;
    for (size_t i = 0; i < REPLICA_DIGEST_BYTES && at + 3 <= cap; i++, at += 2)
        snprintf(out + at, 3, "%02x", digest[i]);
    if (cap > 0) out[at < cap ? at : cap - 1] = '\0';
}

bool replica__digest_parse(const char *hex, uint8_t out[REPLICA_DIGEST_BYTES])
{
    if (strlen(hex) != 2 * REPLICA_DIGEST_BYTES) return false;
    for (size_t i = 0; i < REPLICA_DIGEST_BYTES; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char ch = hex[2 * i + (size_t)k];
            unsigned d = ch >= '0' && ch <= '9'   ? (unsigned)(ch - '0')
                         : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                                                  : 16u;
            if (d == 16u) return false;
            v = v * 16u + d;
        }
        out[i] = (uint8_t)v;
    }
    return true;
}
