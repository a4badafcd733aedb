/*
 * The divergence check's pure parts (divergence.h): one rank's record of its
 * replicated blobs' digests, its codec, the judgement over every rank's
 * record, and the evidence's text. No store, no I/O: the same records give
 * the same answer anywhere (unit-tested in test_ckpt_divergence.c).
 */
#include "ckpt/divergence.h"
#include "ckpt/ckpt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the record ------------------------------------------------------------ */

void ckpt__replicas_encode(const ckpt_replica_record *r, bytes__buf *out)
{
    bytes__put(out, CKPT_REPLICAS_MAGIC, 8);
    bytes__put_u32(out, r->compared ? 1u : 0u);
    bytes__put_u32(out, r->rank);
    bytes__put_u32(out, r->group_rank);
    bytes__put_u32(out, r->local_rank);
    bytes__put_u32(out, r->chunk_size);
    bytes__put_bytes(out, r->host, strnlen(r->host, CKPT_REPLICAS_MAX_HOST));
    size_t count = r->compared ? r->count : 0;
    bytes__put_u32(out, (uint32_t)count);
    for (size_t i = 0; i < count; i++) {
        bytes__put_u64(out, r->blobs[i].name_hash);
        bytes__put_u64(out, r->blobs[i].raw_len);
        bytes__put_u64(out, r->blobs[i].digest);
    }
}

int ckpt__replicas_decode(const void *data, size_t len, ckpt_replica_record *r)
{
    memset(r, 0, sizeof *r);
    bytes__reader in = bytes__reader_of(data, len);
    const uint8_t *magic = bytes__take(&in, 8);
    if (magic == NULL || memcmp(magic, CKPT_REPLICAS_MAGIC, 8) != 0)
        return elastic__fail(ELASTIC_ECORRUPT, "replica digests: bad magic");
    uint32_t compared = bytes__read_u32(&in);
    r->rank = bytes__read_u32(&in);
    r->group_rank = bytes__read_u32(&in);
    r->local_rank = bytes__read_u32(&in);
    r->chunk_size = bytes__read_u32(&in);
    uint32_t host_len = 0;
    const uint8_t *host = bytes__read_bytes(&in, CKPT_REPLICAS_MAX_HOST, &host_len);
    if (host != NULL) memcpy(r->host, host, host_len);
    r->host[host_len] = '\0';
    uint32_t count = bytes__read_u32(&in);
    if (in.bad || compared > 1 || count > CKPT_REPLICAS_MAX_BLOBS || count * 24ull != in.left)
        return elastic__fail(ELASTIC_ECORRUPT, "replica digests: malformed (%zu bytes)", len);
    r->compared = compared == 1;
    r->count = count;
    r->blobs = count > 0 ? calloc(count, sizeof *r->blobs) : NULL;
    if (count > 0 && r->blobs == NULL) return elastic__fail(ELASTIC_ENOMEM, "replica digests");
    for (uint32_t i = 0; i < count; i++) {
        r->blobs[i].name_hash = bytes__read_u64(&in);
        r->blobs[i].raw_len = bytes__read_u64(&in);
        r->blobs[i].digest = bytes__read_u64(&in);
    }
    return 0;
}

void ckpt__replicas_free(ckpt_replica_record *r)
{
    free(r->blobs);
    r->blobs = NULL;
    r->count = 0;
}

/* ---- the judgement ------------------------------------------------------------ */

static uint64_t list_hash(const ckpt_replica_record *r)
{
    uint64_t count = r->count, h = ckpt__hash(&count, sizeof count);
    for (size_t i = 0; i < r->count; i++) {
        uint64_t pair[2] = { h, r->blobs[i].name_hash };
        h = ckpt__hash(pair, sizeof pair);
    }
    return h;
}

/* One value per blob: its length and digest (equal values: equal bytes, but
 * for XXH3 collisions). */
static uint64_t blob_value(const ckpt_replica_blob *b)
{
    uint64_t pair[2] = { b->raw_len, b->digest };
    return ckpt__hash(pair, sizeof pair);
}

/* Boyer-Moore's vote: the value held by more than half, if any. */
static bool majority_of(const uint64_t *values, size_t n, uint64_t *winner, uint32_t *count)
{
    uint64_t candidate = 0;
    size_t lead = 0;
    for (size_t i = 0; i < n; i++) {
        if (lead == 0) candidate = values[i];
        lead += values[i] == candidate ? 1 : (size_t)-1;
    }
    uint32_t held = 0;
    for (size_t i = 0; i < n; i++) held += values[i] == candidate;
    *winner = candidate;
    *count = held;
    return 2u * (uint64_t)held > n;
}

void ckpt__divergence_free(ckpt_divergence *d)
{
    free(d->minority);
    free(d->minority_digest);
    d->minority = NULL;
    d->minority_digest = NULL;
}

/* The judgement's working set over the participants (the records that
 * compared): one value each, reused by every comparison, and whether each
 * differs from a majority anywhere. */
typedef struct judging {
    const ckpt_replica_record *records;
    size_t *who; /* the participants' record indices */
    size_t m;
    uint64_t *values;
    bool *off;
} judging;

/* The participants' record indices into who; out->compared counts them.
 * Digests over different chunk sizes do not line up, so such ranks are not
 * compared at all (0 participants) rather than judged diverged. */
static size_t participants(const ckpt_replica_record *records, size_t n, size_t *who,
                           ckpt_divergence *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (records[i].compared) who[m++] = i;
    out->compared = (uint32_t)m;
    bool same_chunks = true;
    for (size_t k = 1; k < m; k++)
        same_chunks &= records[who[k]].chunk_size == records[who[0]].chunk_size;
    if (m >= 2 && !same_chunks) {
        ELASTIC_LOG_W("ckpt", "replicated blobs not compared: the ranks' chunk sizes differ");
        return 0;
    }
    return m;
}

/* Whether the participants' blob lists differ: that is the divergence then,
 * and there are no blobs to line up one by one. */
static bool lists_differ(judging *j, ckpt_divergence *out)
{
    for (size_t k = 0; k < j->m; k++) j->values[k] = list_hash(&j->records[j->who[k]]);
    uint64_t winner;
    uint32_t held;
    bool majority = majority_of(j->values, j->m, &winner, &held);
    if (held == j->m) return false;
    out->diverged = out->list_differs = true;
    out->blobs_diverged = 1;
    out->first_blob = SIZE_MAX;
    out->majority = majority;
    out->majority_digest = winner;
    for (size_t k = 0; k < j->m; k++) j->off[k] = j->values[k] != winner;
    return true;
}

/* The same lists: blob by blob, who differs from that blob's majority, and
 * the first diverged blob's digest as its majority holds it. A majority
 * overall needs one on every diverged blob. */
static void compare_blobs(judging *j, ckpt_divergence *out)
{
    size_t blobs = j->records[j->who[0]].count;
    bool majority = true;
    for (size_t b = 0; b < blobs; b++) {
        for (size_t k = 0; k < j->m; k++)
            j->values[k] = blob_value(&j->records[j->who[k]].blobs[b]);
        uint64_t winner;
        uint32_t held;
        bool has = majority_of(j->values, j->m, &winner, &held);
        if (held == j->m) continue;
        if (out->blobs_diverged++ == 0) {
            out->first_blob = b;
            out->majority_digest = j->records[j->who[0]].blobs[b].digest;
            for (size_t k = 0; k < j->m; k++)
                if (j->values[k] == winner)
                    out->majority_digest = j->records[j->who[k]].blobs[b].digest;
        }
        majority &= has;
        for (size_t k = 0; k < j->m; k++) j->off[k] |= j->values[k] != winner;
    }
    out->diverged = out->blobs_diverged > 0;
    out->majority = majority;
}

/* The evidence: the record index and digest (its list's hash, or its first
 * diverged blob's) of each participant off the majority, or of every one
 * when there is no majority to trust. */
static int name_minority(const judging *j, ckpt_divergence *out)
{
    out->minority = calloc(j->m, sizeof *out->minority);
    out->minority_digest = calloc(j->m, sizeof *out->minority_digest);
    if (out->minority == NULL || out->minority_digest == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "divergence check");
    for (size_t k = 0; k < j->m; k++) {
        if (out->majority && !j->off[k]) {
            out->majority_count++;
            continue;
        }
        const ckpt_replica_record *r = &j->records[j->who[k]];
        out->minority[out->minority_count] = (uint32_t)j->who[k];
        out->minority_digest[out->minority_count++] =
            out->list_differs ? list_hash(r) : r->blobs[out->first_blob].digest;
    }
    if (!out->majority) out->majority_digest = 0;
    return 0;
}

int ckpt__divergence_judge(const ckpt_replica_record *records, size_t n, ckpt_divergence *out)
{
    memset(out, 0, sizeof *out);
    size_t slots = n ? n : 1;
    judging j = { .records = records,
                  .who = calloc(slots, sizeof(size_t)),
                  .values = calloc(slots, sizeof(uint64_t)),
                  .off = calloc(slots, sizeof(bool)) };
    int rc = j.who && j.values && j.off ? 0 : elastic__fail(ELASTIC_ENOMEM, "divergence check");
    if (rc == 0) j.m = participants(records, n, j.who, out);
    if (rc == 0 && j.m >= 2) {
        if (!lists_differ(&j, out)) compare_blobs(&j, out);
        if (out->diverged) rc = name_minority(&j, out);
    }
    free(j.who);
    free(j.values);
    free(j.off);
    if (rc != 0) ckpt__divergence_free(out);
    return rc;
}

/* ---- the evidence ----------------------------------------------------------------- */

/* A name or host in a "KEY=value" line: printable, no newline, bounded. */
static void put_clean(elastic__text *t, const char *s, size_t max)
{
    char buf[256];
    size_t n = 0;
    for (; s != NULL && s[n] != '\0' && n < max && n < sizeof buf - 1; n++)
        buf[n] = s[n] >= 0x20 && s[n] < 0x7f && s[n] != ',' ? s[n] : '?';
    buf[n] = '\0';
    elastic__text_printf(t, "%s", buf);
}

static void put_rank(elastic__text *t, uint32_t v)
{
    if (v == CKPT_UNKNOWN_RANK)
        elastic__text_printf(t, "?");
    else
        elastic__text_printf(t, "%" PRIu32, v);
}

typedef enum { LIST_RANK, LIST_NODE, LIST_LOCAL, LIST_HOST, LIST_DIGEST } list_field;

static void put_minority(elastic__text *t, const ckpt_replica_record *records,
                         const ckpt_divergence *d, list_field field)
{
    size_t shown = d->minority_count < CKPT_EVIDENCE_LIST ? d->minority_count : CKPT_EVIDENCE_LIST;
    for (size_t i = 0; i < shown; i++) {
        const ckpt_replica_record *r = &records[d->minority[i]];
        if (i > 0) elastic__text_printf(t, ",");
        if (field == LIST_RANK) put_rank(t, r->rank);
        if (field == LIST_NODE) put_rank(t, r->group_rank);
        if (field == LIST_LOCAL) put_rank(t, r->local_rank);
        if (field == LIST_HOST) put_clean(t, r->host[0] ? r->host : "?", CKPT_REPLICAS_MAX_HOST);
        if (field == LIST_DIGEST) elastic__text_printf(t, "%016" PRIx64, d->minority_digest[i]);
    }
    if (d->minority_count > shown) elastic__text_printf(t, ",+%zu", d->minority_count - shown);
    elastic__text_printf(t, "\n");
}

static bool in_minority(const ckpt_divergence *d, size_t index)
{
    for (size_t i = 0; i < d->minority_count; i++)
        if (d->minority[i] == index) return true;
    return false;
}

void ckpt__divergence_evidence(const ckpt_replica_record *records, size_t n,
                               const ckpt_divergence *d, uint64_t step, uint64_t generation,
                               const char *tier, ckpt_divergence_mode mode, bool committed,
                               const char *blob_name, elastic__text *out)
{
    const char *blob = d->list_differs     ? "(the set of replicated blobs)"
                       : blob_name != NULL ? blob_name
                                           : "?";
    elastic__text_printf(out,
                         "NAME=replica_divergence\nGENERATION=%" PRIu64 "\nSTEP=%" PRIu64
                         "\nTIER=%s\nMODE=%s\nCOMMITTED=%d\nBLOB=",
                         generation, step, tier, mode == CKPT_DIVERGENCE_WARN ? "warn" : "stop",
                         committed ? 1 : 0);
    put_clean(out, blob, 200);
    elastic__text_printf(out, "\nBLOBS=%zu\nCOMPARED=%" PRIu32 "\nMAJORITY=%" PRIu32 "\n",
                         d->blobs_diverged, d->compared, d->majority ? d->majority_count : 0);
    elastic__text_printf(out, "MAJORITY_RANKS=");
    size_t shown = 0, left = 0;
    for (size_t i = 0; d->majority && i < n; i++) {
        if (!records[i].compared || in_minority(d, i)) continue;
        if (shown == CKPT_EVIDENCE_LIST) {
            left++;
            continue;
        }
        elastic__text_printf(out, shown++ ? "," : "");
        put_rank(out, records[i].rank);
    }
    if (left > 0) elastic__text_printf(out, ",+%zu", left);
    elastic__text_printf(out,
                         "\nMAJORITY_DIGEST=%016" PRIx64 "\nMINORITY_RANKS=", d->majority_digest);
    put_minority(out, records, d, LIST_RANK);
    elastic__text_printf(out, "MINORITY_NODES=");
    put_minority(out, records, d, LIST_NODE);
    elastic__text_printf(out, "MINORITY_LOCAL_RANKS=");
    put_minority(out, records, d, LIST_LOCAL);
    elastic__text_printf(out, "MINORITY_HOSTS=");
    put_minority(out, records, d, LIST_HOST);
    elastic__text_printf(out, "MINORITY_DIGESTS=");
    put_minority(out, records, d, LIST_DIGEST);
    /* The line a person reads (the error text, the console). */
    elastic__text_printf(out, "DETAIL=step %" PRIu64 ": replicated blob \"", step);
    put_clean(out, blob, 200);
    elastic__text_printf(
        out, "\"%s differs between ranks: ", d->blobs_diverged > 1 ? " (and others)" : "");
    size_t said = d->minority_count < 4 ? d->minority_count : 4;
    for (size_t i = 0; i < said; i++) {
        const ckpt_replica_record *r = &records[d->minority[i]];
        elastic__text_printf(out, "%srank ", i ? ", " : "");
        put_rank(out, r->rank);
        elastic__text_printf(out, " (node ");
        put_rank(out, r->group_rank);
        elastic__text_printf(out, " ");
        put_clean(out, r->host[0] ? r->host : "?", CKPT_REPLICAS_MAX_HOST);
        elastic__text_printf(out, " local rank ");
        put_rank(out, r->local_rank);
        elastic__text_printf(out, ") has %016" PRIx64, d->minority_digest[i]);
    }
    if (d->minority_count > said)
        elastic__text_printf(out, " and %zu more", d->minority_count - said);
    if (d->majority)
        elastic__text_printf(out,
                             "; the other %" PRIu32 " of %" PRIu32 " ranks agree on %016" PRIx64,
                             d->majority_count, d->compared, d->majority_digest);
    else
        elastic__text_printf(out, "; no majority among the %" PRIu32 " ranks", d->compared);
    elastic__text_printf(out, "\n");
}
