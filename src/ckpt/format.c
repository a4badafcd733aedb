/*
 * The checkpoint's on-disk format: shard header, manifest, trailer and commit
 * record, encoded little-endian (docs/CHECKPOINT.md). Decoders trust nothing:
 * every length and offset is bounded before use. No I/O here, so the fuzz
 * target can drive these functions directly.
 */
#include "ckpt/ckpt.h"

#include <stdlib.h>
#include <xxhash.h>
#include <zstd.h>

static const char header_magic[8] = {'E', 'L', 'C', 'K', 'S', 'H', 'R', 'D'};
static const char manifest_magic[8] = {'E', 'L', 'C', 'K', 'M', 'A', 'N', 'I'};
static const char trailer_magic[8] = {'E', 'L', 'C', 'K', 'T', 'A', 'I', 'L'};
static const char commit_magic[8] = {'E', 'L', 'C', 'K', 'C', 'M', 'I', 'T'};

#define MANIFEST_FIXED 48u
#define BLOB_ENTRY_FIXED 16u
#define CHUNK_ENTRY 24u
#define COMMIT_FIXED 32u

uint64_t ckpt__hash(const void *data, size_t len) { return XXH3_64bits(data, len); }

size_t ckpt__compress_bound(size_t len) { return ZSTD_compressBound(len); }

/* ---- little-endian helpers ------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

void ckpt__buf_put(ckpt_buf *b, const void *data, size_t len)
{
    if (b->oom) return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len) cap *= 2;
        uint8_t *grown = realloc(b->data, cap);
        if (grown == NULL) {
            b->oom = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
}

void ckpt__buf_u16(ckpt_buf *b, uint16_t v)
{
    uint8_t p[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    ckpt__buf_put(b, p, 2);
}

void ckpt__buf_u32(ckpt_buf *b, uint32_t v)
{
    uint8_t p[4];
    put_u32(p, v);
    ckpt__buf_put(b, p, 4);
}

void ckpt__buf_u64(ckpt_buf *b, uint64_t v)
{
    uint8_t p[8];
    put_u64(p, v);
    ckpt__buf_put(b, p, 8);
}

static int corrupt(const char *what) { return elastic__fail(ELASTIC_ECORRUPT, "%s", what); }

/* ---- shard header ----------------------------------------------------------- */

void ckpt__header_encode(const ckpt_header *h, uint8_t out[CKPT_HEADER_BYTES])
{
    memset(out, 0, CKPT_HEADER_BYTES);
    memcpy(out, header_magic, 8);
    put_u32(out + 8, CKPT_VERSION);
    put_u32(out + 12, CKPT_HEADER_BYTES);
    put_u64(out + 16, h->step);
    put_u64(out + 24, h->generation);
    put_u32(out + 32, h->rank);
    put_u32(out + 36, h->world);
    put_u32(out + 40, h->chunk_size);
    /* The checksum covers the padding too: every byte of the file is checked. */
    put_u64(out + CKPT_HEADER_BYTES - 8, ckpt__hash(out, CKPT_HEADER_BYTES - 8));
}

int ckpt__header_decode(const uint8_t *in, size_t len, ckpt_header *h)
{
    if (len != CKPT_HEADER_BYTES) return corrupt("shard header truncated");
    if (memcmp(in, header_magic, 8) != 0) return corrupt("shard header: bad magic");
    if (get_u64(in + CKPT_HEADER_BYTES - 8) != ckpt__hash(in, CKPT_HEADER_BYTES - 8))
        return corrupt("shard header: checksum mismatch");
    if (get_u32(in + 8) != CKPT_VERSION) return corrupt("shard header: unknown version");
    if (get_u32(in + 12) != CKPT_HEADER_BYTES) return corrupt("shard header: bad header size");
    h->step = get_u64(in + 16);
    h->generation = get_u64(in + 24);
    h->rank = get_u32(in + 32);
    h->world = get_u32(in + 36);
    h->chunk_size = get_u32(in + 40);
    if (h->world == 0 || h->world > CKPT_MAX_WORLD || h->rank >= h->world)
        return corrupt("shard header: rank/world out of range");
    return 0;
}

/* ---- trailer ------------------------------------------------------------------ */

void ckpt__trailer_encode(const ckpt_trailer *t, uint8_t out[CKPT_TRAILER_BYTES])
{
    memcpy(out, trailer_magic, 8);
    put_u64(out + 8, t->manifest_offset);
    put_u64(out + 16, t->manifest_len);
    put_u64(out + 24, t->manifest_hash);
    put_u64(out + 32, t->step);
    put_u64(out + 40, ckpt__hash(out, 40));
}

int ckpt__trailer_decode(const uint8_t *in, size_t len, ckpt_trailer *t)
{
    if (len != CKPT_TRAILER_BYTES) return corrupt("trailer truncated");
    if (memcmp(in, trailer_magic, 8) != 0) return corrupt("trailer: bad magic (truncated shard?)");
    if (get_u64(in + 40) != ckpt__hash(in, 40)) return corrupt("trailer: checksum mismatch");
    t->manifest_offset = get_u64(in + 8);
    t->manifest_len = get_u64(in + 16);
    t->manifest_hash = get_u64(in + 24);
    t->step = get_u64(in + 32);
    if (t->manifest_len < MANIFEST_FIXED || t->manifest_len > CKPT_MAX_MANIFEST)
        return corrupt("trailer: manifest length out of range");
    return 0;
}

/* ---- manifest -------------------------------------------------------------------- */

int ckpt__manifest_encode(const ckpt_manifest *m, ckpt_buf *out)
{
    uint8_t fixed[MANIFEST_FIXED] = {0};
    memcpy(fixed, manifest_magic, 8);
    put_u32(fixed + 8, CKPT_VERSION);
    put_u32(fixed + 12, m->chunk_size);
    put_u64(fixed + 16, m->step);
    put_u64(fixed + 24, m->generation);
    put_u32(fixed + 32, m->rank);
    put_u32(fixed + 36, m->world);
    put_u32(fixed + 40, (uint32_t)m->blob_count);
    ckpt__buf_put(out, fixed, sizeof fixed);
    for (size_t i = 0; i < m->blob_count; i++) {
        const ckpt_blob *b = &m->blobs[i];
        size_t name_len = strlen(b->name);
        ckpt__buf_u16(out, (uint16_t)name_len);
        ckpt__buf_u16(out, (uint16_t)b->flags);
        ckpt__buf_u32(out, (uint32_t)b->chunk_count);
        ckpt__buf_u64(out, b->raw_len);
        ckpt__buf_put(out, b->name, name_len);
        for (size_t k = 0; k < b->chunk_count; k++) {
            const ckpt_chunk *ch = &m->chunks[b->first_chunk + k];
            ckpt__buf_u32(out, ch->raw_len);
            ckpt__buf_u32(out, ch->stored_len);
            ckpt__buf_u32(out, ch->codec);
            ckpt__buf_u32(out, 0);
            ckpt__buf_u64(out, ch->hash);
        }
    }
    return out->oom ? elastic__fail(ELASTIC_ENOMEM, "encoding the manifest") : 0;
}

void ckpt__manifest_free(ckpt_manifest *m)
{
    free(m->blobs);
    free(m->chunks);
    free(m->names);
    memset(m, 0, sizeof *m);
}

/* Reads a blob's chunk entries, checking they tile [*offset, ...) in order. */
static int decode_chunks(const uint8_t *p, ckpt_manifest *m, ckpt_blob *b, uint64_t *offset, uint64_t data_end)
{
    uint64_t raw_left = b->raw_len;
    b->data_offset = *offset;
    b->first_chunk = m->chunk_count;
    for (size_t k = 0; k < b->chunk_count; k++, p += CHUNK_ENTRY) {
        ckpt_chunk ch = {.offset = *offset, .raw_len = get_u32(p), .stored_len = get_u32(p + 4),
                         .codec = get_u32(p + 8), .hash = get_u64(p + 16)};
        uint64_t expect_raw = raw_left < m->chunk_size ? raw_left : m->chunk_size;
        if (ch.raw_len != expect_raw || ch.raw_len == 0) return corrupt("manifest: chunk size does not match blob size");
        if (get_u32(p + 12) != 0) return corrupt("manifest: reserved chunk field set");
        if (ch.codec == CKPT_CODEC_RAW) {
            if (ch.stored_len != ch.raw_len) return corrupt("manifest: raw chunk with a different stored size");
        } else if (ch.codec != CKPT_CODEC_ZSTD || ch.stored_len == 0 ||
                   ch.stored_len > ckpt__compress_bound(ch.raw_len)) {
            return corrupt("manifest: bad chunk codec or stored size");
        }
        if (ch.stored_len > data_end - *offset) return corrupt("manifest: chunk extends past the data");
        *offset += ch.stored_len;
        raw_left -= ch.raw_len;
        m->chunks[m->chunk_count++] = ch;
    }
    b->stored_len = *offset - b->data_offset;
    return 0;
}

static int names_unique(const ckpt_manifest *m);

int ckpt__manifest_decode(const uint8_t *in, size_t len, uint64_t data_start, uint64_t data_end,
                          ckpt_manifest *m)
{
    memset(m, 0, sizeof *m);
    if (len < MANIFEST_FIXED) return corrupt("manifest truncated");
    if (memcmp(in, manifest_magic, 8) != 0) return corrupt("manifest: bad magic");
    if (get_u32(in + 8) != CKPT_VERSION) return corrupt("manifest: unknown version");
    if (data_start > data_end) return corrupt("manifest: data region inverted");
    m->chunk_size = get_u32(in + 12);
    m->step = get_u64(in + 16);
    m->generation = get_u64(in + 24);
    m->rank = get_u32(in + 32);
    m->world = get_u32(in + 36);
    uint32_t blob_count = get_u32(in + 40);
    if (get_u32(in + 44) != 0) return corrupt("manifest: reserved field set");
    if (m->chunk_size < CKPT_MIN_CHUNK || m->chunk_size > CKPT_MAX_CHUNK) return corrupt("manifest: bad chunk size");
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
    size_t pos = MANIFEST_FIXED, names_used = 0;
    uint64_t offset = data_start;
    int rc = 0;
    for (uint32_t i = 0; i < blob_count && rc == 0; i++) {
        if (len - pos < BLOB_ENTRY_FIXED) { rc = corrupt("manifest: blob entry truncated"); break; }
        ckpt_blob *b = &m->blobs[i];
        size_t name_len = get_u16(in + pos);
        b->flags = get_u16(in + pos + 2);
        b->chunk_count = get_u32(in + pos + 4);
        b->raw_len = get_u64(in + pos + 8);
        pos += BLOB_ENTRY_FIXED;
        uint64_t chunks_needed = b->raw_len / m->chunk_size + (b->raw_len % m->chunk_size != 0);
        if (name_len == 0 || name_len > CKPT_MAX_NAME || name_len > len - pos) { rc = corrupt("manifest: bad blob name length"); break; }
        if (memchr(in + pos, '\0', name_len) != NULL) { rc = corrupt("manifest: NUL in a blob name"); break; }
        if (b->flags & ~ELASTIC_CKPT_REPLICATED) { rc = corrupt("manifest: unknown blob flags"); break; }
        if (b->chunk_count != chunks_needed) { rc = corrupt("manifest: chunk count does not match blob size"); break; }
        memcpy(m->names + names_used, in + pos, name_len);
        m->names[names_used + name_len] = '\0';
        b->name = m->names + names_used;
        names_used += name_len + 1;
        pos += name_len;
        if (b->chunk_count > (len - pos) / CHUNK_ENTRY) { rc = corrupt("manifest: chunk entries truncated"); break; }
        rc = decode_chunks(in + pos, m, b, &offset, data_end);
        pos += b->chunk_count * CHUNK_ENTRY;
        m->blob_count = i + 1;
    }
    if (rc == 0 && pos != len) rc = corrupt("manifest: trailing bytes");
    if (rc == 0 && offset != data_end) rc = corrupt("manifest: chunks do not cover the data region");
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

int ckpt__commit_encode(const ckpt_commit_record *r, ckpt_buf *out)
{
    uint8_t fixed[COMMIT_FIXED];
    memcpy(fixed, commit_magic, 8);
    put_u32(fixed + 8, CKPT_VERSION);
    put_u32(fixed + 12, r->world);
    put_u64(fixed + 16, r->step);
    put_u64(fixed + 24, r->generation);
    ckpt__buf_put(out, fixed, sizeof fixed);
    for (uint32_t i = 0; i < r->world; i++) {
        ckpt__buf_u64(out, r->shards[i].file_size);
        ckpt__buf_u64(out, r->shards[i].manifest_hash);
    }
    if (out->oom) return elastic__fail(ELASTIC_ENOMEM, "encoding a commit record");
    ckpt__buf_u64(out, ckpt__hash(out->data, out->len));
    return out->oom ? elastic__fail(ELASTIC_ENOMEM, "encoding a commit record") : 0;
}

int ckpt__commit_decode(const uint8_t *in, size_t len, ckpt_commit_record *r)
{
    memset(r, 0, sizeof *r);
    if (len < COMMIT_FIXED + 8) return corrupt("commit record truncated");
    if (memcmp(in, commit_magic, 8) != 0) return corrupt("commit record: bad magic");
    uint32_t world = get_u32(in + 12);
    if (world == 0 || world > CKPT_MAX_WORLD) return corrupt("commit record: world out of range");
    if (len != COMMIT_FIXED + (size_t)world * 16 + 8) return corrupt("commit record: length does not match world");
    if (get_u64(in + len - 8) != ckpt__hash(in, len - 8)) return corrupt("commit record: checksum mismatch");
    if (get_u32(in + 8) != CKPT_VERSION) return corrupt("commit record: unknown version");
    r->world = world;
    r->step = get_u64(in + 16);
    r->generation = get_u64(in + 24);
    r->shards = malloc(world * sizeof *r->shards);
    if (r->shards == NULL) return elastic__fail(ELASTIC_ENOMEM, "decoding a commit record");
    for (uint32_t i = 0; i < world; i++) {
        r->shards[i].file_size = get_u64(in + COMMIT_FIXED + 16 * (size_t)i);
        r->shards[i].manifest_hash = get_u64(in + COMMIT_FIXED + 16 * (size_t)i + 8);
    }
    return 0;
}

void ckpt__commit_free(ckpt_commit_record *r)
{
    free(r->shards);
    r->shards = NULL;
}
