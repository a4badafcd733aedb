/*
 * The checkpoint's on-disk format: shard header, manifest, trailer and commit
 * record, encoded little-endian with common/bytes.h (docs/CHECKPOINT.md).
 * Decoders trust nothing: every length and offset is bounded before use. No I/O here, so the fuzz
 * target can drive these functions directly.
 */
#include "ckpt/ckpt.h"

#include "common/bytes.h"

#include <stdlib.h>
#include <xxhash.h>
#include <zstd.h>

static const char header_magic[8] = { 'E', 'L', 'C', 'K', 'S', 'H', 'R', 'D' };
static const char manifest_magic[8] = { 'E', 'L', 'C', 'K', 'M', 'A', 'N', 'I' };
static const char trailer_magic[8] = { 'E', 'L', 'C', 'K', 'T', 'A', 'I', 'L' };
static const char commit_magic[8] = { 'E', 'L', 'C', 'K', 'C', 'M', 'I', 'T' };

#define MANIFEST_FIXED   48u
#define BLOB_ENTRY_FIXED 16u
#define CHUNK_ENTRY      24u
#define COMMIT_FIXED     32u

uint64_t ckpt__hash(const void *data, size_t len)
{
    return XXH3_64bits(data, len);
}

size_t ckpt__compress_bound(size_t len)
{
    return ZSTD_compressBound(len);
}

static int corrupt(const char *what)
{
    return elastic__fail(ELASTIC_ECORRUPT, "%s", what);
}

/* ---- shard header ----------------------------------------------------------- */

void ckpt__header_encode(const ckpt_header *h, uint8_t out[CKPT_HEADER_BYTES])
{
    bytes__buf w = bytes__buf_over(out, CKPT_HEADER_BYTES);
    bytes__put(&w, header_magic, 8);
    bytes__put_u32(&w, CKPT_VERSION);
    bytes__put_u32(&w, CKPT_HEADER_BYTES);
    bytes__put_u64(&w, h->step);
    bytes__put_u64(&w, h->generation);
    bytes__put_u32(&w, h->rank);
    bytes__put_u32(&w, h->world);
    bytes__put_u32(&w, h->chunk_size);
    bytes__put_u64(&w, h->incarnation);
    bytes__put_zeros(&w, CKPT_HEADER_BYTES - 8 - w.len);
    /* The checksum covers the padding too: every byte of the file is checked. */
    bytes__put_u64(&w, ckpt__hash(out, CKPT_HEADER_BYTES - 8));
}

int ckpt__header_decode(const uint8_t *in, size_t len, ckpt_header *h)
{
    if (len != CKPT_HEADER_BYTES) return corrupt("shard header truncated");
    if (memcmp(in, header_magic, 8) != 0) return corrupt("shard header: bad magic");
    if (bytes__le64(in + CKPT_HEADER_BYTES - 8) != ckpt__hash(in, CKPT_HEADER_BYTES - 8))
        return corrupt("shard header: checksum mismatch");
    bytes__reader r = bytes__reader_of(in + 8, CKPT_HEADER_BYTES - 16);
    if (bytes__read_u32(&r) != CKPT_VERSION) return corrupt("shard header: unknown version");
    if (bytes__read_u32(&r) != CKPT_HEADER_BYTES) return corrupt("shard header: bad header size");
    h->step = bytes__read_u64(&r);
    h->generation = bytes__read_u64(&r);
    h->rank = bytes__read_u32(&r);
    h->world = bytes__read_u32(&r);
    h->chunk_size = bytes__read_u32(&r);
    h->incarnation = bytes__read_u64(&r);
    if (h->world == 0 || h->world > CKPT_MAX_WORLD || h->rank >= h->world)
        return corrupt("shard header: rank/world out of range");
    return 0;
}

/* ---- trailer ------------------------------------------------------------------ */

void ckpt__trailer_encode(const ckpt_trailer *t, uint8_t out[CKPT_TRAILER_BYTES])
{
    bytes__buf w = bytes__buf_over(out, CKPT_TRAILER_BYTES);
    bytes__put(&w, trailer_magic, 8);
    bytes__put_u64(&w, t->manifest_offset);
    bytes__put_u64(&w, t->manifest_len);
    bytes__put_u64(&w, t->manifest_hash);
    bytes__put_u64(&w, t->step);
    bytes__put_u64(&w, ckpt__hash(out, 40));
}

int ckpt__trailer_decode(const uint8_t *in, size_t len, ckpt_trailer *t)
{
    if (len != CKPT_TRAILER_BYTES) return corrupt("trailer truncated");
    if (memcmp(in, trailer_magic, 8) != 0) return corrupt("trailer: bad magic (truncated shard?)");
    if (bytes__le64(in + 40) != ckpt__hash(in, 40)) return corrupt("trailer: checksum mismatch");
    bytes__reader r = bytes__reader_of(in + 8, 32);
    t->manifest_offset = bytes__read_u64(&r);
    t->manifest_len = bytes__read_u64(&r);
    t->manifest_hash = bytes__read_u64(&r);
    t->step = bytes__read_u64(&r);
    if (t->manifest_len < MANIFEST_FIXED || t->manifest_len > CKPT_MAX_MANIFEST)
        return corrupt("trailer: manifest length out of range");
    return 0;
}

/* ---- manifest -------------------------------------------------------------------- */

int ckpt__manifest_encode(const ckpt_manifest *m, bytes__buf *out)
{
    bytes__put(out, manifest_magic, 8);
    bytes__put_u32(out, CKPT_VERSION);
    bytes__put_u32(out, m->chunk_size);
    bytes__put_u64(out, m->step);
    bytes__put_u64(out, m->generation);
    bytes__put_u32(out, m->rank);
    bytes__put_u32(out, m->world);
    bytes__put_u32(out, (uint32_t)m->blob_count);
    bytes__put_u32(out, 0); /* reserved */
    for (size_t i = 0; i < m->blob_count; i++) {
        const ckpt_blob *b = &m->blobs[i];
        size_t name_len = strlen(b->name);
        bytes__put_u16(out, (uint16_t)name_len);
        bytes__put_u16(out, (uint16_t)b->flags);
        bytes__put_u32(out, (uint32_t)b->chunk_count);
        bytes__put_u64(out, b->raw_len);
        bytes__put(out, b->name, name_len);
        for (size_t k = 0; k < b->chunk_count; k++) {
            const ckpt_chunk *ch = &m->chunks[b->first_chunk + k];
            bytes__put_u32(out, ch->raw_len);
            bytes__put_u32(out, ch->stored_len);
            bytes__put_u32(out, ch->codec);
            bytes__put_u32(out, 0);
            bytes__put_u64(out, ch->hash);
        }
    }
    return out->failed ? elastic__fail(ELASTIC_ENOMEM, "encoding the manifest") : 0;
}

void ckpt__manifest_free(ckpt_manifest *m)
{
    free(m->blobs);
    free(m->chunks);
    free(m->names);
    memset(m, 0, sizeof *m);
}

/* Reads a blob's chunk entries, checking they tile [*offset, ...) in order. */
static int decode_chunks(bytes__reader *r, ckpt_manifest *m, ckpt_blob *b, uint64_t *offset,
                         uint64_t data_end)
{
    uint64_t raw_left = b->raw_len;
    b->data_offset = *offset;
    b->first_chunk = m->chunk_count;
    for (size_t k = 0; k < b->chunk_count; k++) {
        ckpt_chunk ch = { .offset = *offset };
        ch.raw_len = bytes__read_u32(r);
        ch.stored_len = bytes__read_u32(r);
        ch.codec = bytes__read_u32(r);
        uint32_t reserved = bytes__read_u32(r);
        ch.hash = bytes__read_u64(r);
        if (r->bad) return corrupt("manifest: chunk entries truncated");
        uint64_t expect_raw = raw_left < m->chunk_size ? raw_left : m->chunk_size;
        if (ch.raw_len != expect_raw || ch.raw_len == 0)
            return corrupt("manifest: chunk size does not match blob size");
        if (reserved != 0) return corrupt("manifest: reserved chunk field set");
        if (ch.codec == CKPT_CODEC_RAW) {
            if (ch.stored_len != ch.raw_len)
                return corrupt("manifest: raw chunk with a different stored size");
        } else if (ch.codec != CKPT_CODEC_ZSTD || ch.stored_len == 0 ||
                   ch.stored_len > ckpt__compress_bound(ch.raw_len)) {
            return corrupt("manifest: bad chunk codec or stored size");
        }
        if (ch.stored_len > data_end - *offset)
            return corrupt("manifest: chunk extends past the data");
        *offset += ch.stored_len;
        raw_left -= ch.raw_len;
        m->chunks[m->chunk_count++] = ch;
    }
    b->stored_len = *offset - b->data_offset;
    return 0;
}

static int names_unique(const ckpt_manifest *m);

/* One blob's entry before its chunks: its name (copied into m->names at
 * *names_used), flags and sizes, each checked against the manifest's bounds. */
static int decode_blob_entry(bytes__reader *r, ckpt_manifest *m, ckpt_blob *b, size_t *names_used)
{
    if (r->left < BLOB_ENTRY_FIXED) return corrupt("manifest: blob entry truncated");
    size_t name_len = bytes__read_u16(r);
    b->flags = bytes__read_u16(r);
    b->chunk_count = bytes__read_u32(r);
    b->raw_len = bytes__read_u64(r);
    uint64_t chunks_needed = b->raw_len / m->chunk_size + (b->raw_len % m->chunk_size != 0);
    if (name_len == 0 || name_len > CKPT_MAX_NAME || name_len > r->left)
        return corrupt("manifest: bad blob name length");
    const uint8_t *name = bytes__take(r, name_len);
    if (memchr(name, '\0', name_len) != NULL) return corrupt("manifest: NUL in a blob name");
    if (b->flags & ~ELASTIC_CKPT_REPLICATED) return corrupt("manifest: unknown blob flags");
    if (b->chunk_count != chunks_needed)
        return corrupt("manifest: chunk count does not match blob size");
    memcpy(m->names + *names_used, name, name_len);
    m->names[*names_used + name_len] = '\0';
    b->name = m->names + *names_used;
    *names_used += name_len + 1;
    /* Bounds decode_chunks' loop before it runs: a forged count is not 2^32 iterations. */
    if (b->chunk_count > r->left / CHUNK_ENTRY) return corrupt("manifest: chunk entries truncated");
    return 0;
}

int ckpt__manifest_decode(const uint8_t *in, size_t len, uint64_t data_start, uint64_t data_end,
                          ckpt_manifest *m)
{
    memset(m, 0, sizeof *m);
    if (len < MANIFEST_FIXED) return corrupt("manifest truncated");
    if (memcmp(in, manifest_magic, 8) != 0) return corrupt("manifest: bad magic");
    bytes__reader r = bytes__reader_of(in + 8, len - 8);
    if (bytes__read_u32(&r) != CKPT_VERSION) return corrupt("manifest: unknown version");
    if (data_start > data_end) return corrupt("manifest: data region inverted");
    m->chunk_size = bytes__read_u32(&r);
    m->step = bytes__read_u64(&r);
    m->generation = bytes__read_u64(&r);
    m->rank = bytes__read_u32(&r);
    m->world = bytes__read_u32(&r);
    uint32_t blob_count = bytes__read_u32(&r);
    if (bytes__read_u32(&r) != 0) return corrupt("manifest: reserved field set");
    if (m->chunk_size < CKPT_MIN_CHUNK || m->chunk_size > CKPT_MAX_CHUNK)
        return corrupt("manifest: bad chunk size");
    if (m->world == 0 || m->world > CKPT_MAX_WORLD || m->rank >= m->world)
        return corrupt("manifest: rank/world out of range");
    if (blob_count > CKPT_MAX_BLOBS || blob_count > (len - MANIFEST_FIXED) / BLOB_ENTRY_FIXED)
        return corrupt("manifest: blob count out of range");
    /* Names and chunk entries can take no more room than the manifest itself. */
    m->blobs = calloc(blob_count ? blob_count : 1, sizeof *m->blobs);
    m->names = malloc(len);
    size_t chunk_cap = (len - MANIFEST_FIXED) / CHUNK_ENTRY + 1;
    m->chunks = malloc(chunk_cap * sizeof *m->chunks);
    if (m->blobs == NULL || m->names == NULL || m->chunks == NULL) {
        ckpt__manifest_free(m);
        return elastic__fail(ELASTIC_ENOMEM, "decoding a manifest of %zu bytes", len);
    }
    size_t names_used = 0;
    uint64_t offset = data_start;
    int rc = 0;
    for (uint32_t i = 0; i < blob_count && rc == 0; i++) {
        ckpt_blob *b = &m->blobs[i];
        rc = decode_blob_entry(&r, m, b, &names_used);
        if (rc != 0) break;
        rc = decode_chunks(&r, m, b, &offset, data_end);
        m->blob_count = i + 1;
    }
    if (rc == 0 && r.left != 0) rc = corrupt("manifest: trailing bytes");
    if (rc == 0 && offset != data_end)
        rc = corrupt("manifest: chunks do not cover the data region");
    if (rc == 0) rc = names_unique(m);
    if (rc != 0) ckpt__manifest_free(m);
    return rc;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int names_unique(const ckpt_manifest *m)
{
    if (m->blob_count < 2) return 0;
    const char **sorted = malloc(m->blob_count * sizeof *sorted);
    if (sorted == NULL) return elastic__fail(ELASTIC_ENOMEM, "checking blob names");
    for (size_t i = 0; i < m->blob_count; i++) sorted[i] = m->blobs[i].name;
    qsort(sorted, m->blob_count, sizeof *sorted, compare_names);
    int rc = 0;
    for (size_t i = 1; i < m->blob_count && rc == 0; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) rc = corrupt("manifest: duplicate blob name");
    free(sorted);
    return rc;
}

const ckpt_blob *ckpt__manifest_find(const ckpt_manifest *m, const char *name)
{
    for (size_t i = 0; i < m->blob_count; i++)
        if (strcmp(m->blobs[i].name, name) == 0) return &m->blobs[i];
    return NULL;
}

/* ---- commit record ------------------------------------------------------------------ */

int ckpt__commit_encode(const ckpt_commit_record *r, bytes__buf *out)
{
    size_t start = out->len;
    bytes__put(out, commit_magic, 8);
    bytes__put_u32(out, CKPT_VERSION);
    bytes__put_u32(out, r->world);
    bytes__put_u64(out, r->step);
    bytes__put_u64(out, r->generation);
    for (uint32_t i = 0; i < r->world; i++) {
        bytes__put_u64(out, r->shards[i].file_size);
        bytes__put_u64(out, r->shards[i].manifest_hash);
    }
    if (out->failed) return elastic__fail(ELASTIC_ENOMEM, "encoding a commit record");
    bytes__put_u64(out, ckpt__hash(out->data + start, out->len - start));
    return out->failed ? elastic__fail(ELASTIC_ENOMEM, "encoding a commit record") : 0;
}

int ckpt__commit_decode(const uint8_t *in, size_t len, ckpt_commit_record *r)
{
    memset(r, 0, sizeof *r);
    if (len < COMMIT_FIXED + 8) return corrupt("commit record truncated");
    if (memcmp(in, commit_magic, 8) != 0) return corrupt("commit record: bad magic");
    bytes__reader rd = bytes__reader_of(in + 8, len - 8);
    uint32_t version = bytes__read_u32(&rd);
    uint32_t world = bytes__read_u32(&rd);
    if (world == 0 || world > CKPT_MAX_WORLD) return corrupt("commit record: world out of range");
    if (len != COMMIT_FIXED + (size_t)world * 16 + 8)
        return corrupt("commit record: length does not match world");
    if (bytes__le64(in + len - 8) != ckpt__hash(in, len - 8))
        return corrupt("commit record: checksum mismatch");
    if (version != CKPT_VERSION) return corrupt("commit record: unknown version");
    r->world = world;
    r->step = bytes__read_u64(&rd);
    r->generation = bytes__read_u64(&rd);
    r->shards = malloc(world * sizeof *r->shards);
    if (r->shards == NULL) return elastic__fail(ELASTIC_ENOMEM, "decoding a commit record");
    for (uint32_t i = 0; i < world; i++) {
        r->shards[i].file_size = bytes__read_u64(&rd);
        r->shards[i].manifest_hash = bytes__read_u64(&rd);
    }
    return 0;
}

void ckpt__commit_free(ckpt_commit_record *r)
{
    free(r->shards);
    r->shards = NULL;
}
