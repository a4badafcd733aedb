/*
 * Checking one shard completely against its step's commit record, without a
 * handle: header, trailer, manifest and every chunk's checksum. The memory
 * tier's restore uses it on each copy it takes (a peer's copy with a flipped
 * byte is refused and the next source tried) before any worker reads it:
 * on a file (a copy already in this node's memory), or on a copy just
 * received, before it takes its name; read through one small window.
 */
#include "ckpt/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The shard's file, read through a small window. */
typedef struct shard_src {
    int fd;
    uint64_t size;
    const char *path;
    uint8_t *window;
} shard_src;

static int out_of_range(const shard_src *s)
{
    return elastic__fail(ELASTIC_ECORRUPT, "%s: a range past the end of the shard", s->path);
}

static int src_read(const shard_src *s, void *buf, size_t len, uint64_t off)
{
    if (off > s->size || len > s->size - off) return out_of_range(s);
    return ckpt__pread_all(s->fd, buf, len, off, s->path);
}

/* One pass over each byte, through the window. */
static int src_hash(const shard_src *s, size_t len, uint64_t off, uint64_t *hash)
{
    if (off > s->size || len > s->size - off) return out_of_range(s);
    return ckpt__hash_range(s->fd, s->window, len, off, s->path, hash);
}

static int check_chunks(const shard_src *s, const ckpt_manifest *m)
{
    int rc = 0;
    for (size_t i = 0; i < m->chunk_count && rc == 0; i++) {
        const ckpt_chunk *ch = &m->chunks[i];
        uint64_t hash = 0;
        rc = src_hash(s, ch->stored_len, ch->offset, &hash);
        if (rc == 0 && hash != ch->hash)
            rc = elastic__fail(ELASTIC_ECORRUPT,
                               "%s: chunk at offset %" PRIu64 ": checksum mismatch", s->path,
                               ch->offset);
    }
    return rc;
}

static int verify(const shard_src *s, const ckpt_commit_record *r, uint32_t rank)
{
    if (rank >= r->world) return elastic__fail(ELASTIC_EINVAL, "rank %u out of range", rank);
    const ckpt_shard_digest *want = &r->shards[rank];
    const char *path = s->path;
    int rc = 0;
    if (s->size != want->file_size)
        rc = elastic__fail(ELASTIC_ECORRUPT,
                           "%s: %" PRIu64 " bytes, the commit record says %" PRIu64, path, s->size,
                           want->file_size);
    if (rc == 0 && want->file_size < CKPT_HEADER_BYTES + CKPT_TRAILER_BYTES)
        rc = elastic__fail(ELASTIC_ECORRUPT, "%s: too short", path);
    uint8_t header[CKPT_HEADER_BYTES], trailer[CKPT_TRAILER_BYTES];
    ckpt_header h;
    ckpt_trailer t;
    if (rc == 0) rc = src_read(s, header, sizeof header, 0);
    if (rc == 0) rc = ckpt__header_decode(header, sizeof header, &h);
    if (rc == 0) rc = src_read(s, trailer, sizeof trailer, want->file_size - sizeof trailer);
    if (rc == 0) rc = ckpt__trailer_decode(trailer, sizeof trailer, &t);
    if (rc == 0 && (h.step != r->step || h.generation != r->generation || h.rank != rank ||
                    h.world != r->world || t.step != r->step))
        rc = elastic__fail(ELASTIC_ECORRUPT, "%s: header does not match the commit record", path);
    if (rc == 0 && t.manifest_hash != want->manifest_hash)
        rc = elastic__fail(ELASTIC_ECORRUPT, "%s: manifest checksum differs from the commit record",
                           path);
    if (rc == 0 && (t.manifest_offset < CKPT_HEADER_BYTES || t.manifest_offset > want->file_size ||
                    want->file_size - t.manifest_offset != t.manifest_len + CKPT_TRAILER_BYTES))
        rc = elastic__fail(ELASTIC_ECORRUPT, "%s: manifest position out of range", path);
    uint8_t *raw = rc == 0 ? malloc(t.manifest_len) : NULL;
    if (rc == 0 && raw == NULL) rc = elastic__fail(ELASTIC_ENOMEM, "manifest");
    ckpt_manifest m = { 0 };
    bool decoded = false;
    if (rc == 0) rc = src_read(s, raw, t.manifest_len, t.manifest_offset);
    if (rc == 0 && ckpt__hash(raw, t.manifest_len) != t.manifest_hash)
        rc = elastic__fail(ELASTIC_ECORRUPT, "%s: manifest checksum mismatch", path);
    if (rc == 0 && (rc = ckpt__manifest_decode(raw, t.manifest_len, CKPT_HEADER_BYTES,
                                               t.manifest_offset, &m)) == 0)
        decoded = true;
    free(raw);
    if (rc == 0 && (m.step != h.step || m.generation != h.generation || m.rank != h.rank ||
                    m.world != h.world || m.chunk_size != h.chunk_size))
        rc = elastic__fail(ELASTIC_ECORRUPT, "%s: manifest does not match the header", path);
    if (rc == 0) rc = check_chunks(s, &m);
    if (decoded) ckpt__manifest_free(&m);
    return rc == ELASTIC_ECORRUPT ? ckpt__fail_in(rc, path) : rc;
}

int ckpt__verify_shard_fd(int fd, uint64_t size, const char *path, const ckpt_commit_record *r,
                          uint32_t rank)
{
    shard_src s = { .fd = fd, .size = size, .path = path };
    if ((s.window = malloc(ckpt__hash_window())) == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "chunk buffer");
    int rc = verify(&s, r, rank);
    free(s.window);
    return rc;
}

int ckpt__verify_shard_file(const char *path, const ckpt_commit_record *r, uint32_t rank)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return ckpt__fail_errno(errno, "open", path);
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? 0 : ckpt__fail_errno(errno, "stat", path);
    if (rc == 0) rc = ckpt__verify_shard_fd(fd, (uint64_t)st.st_size, path, r, rank);
    close(fd);
    return rc;
}
