/* Tests of src/ckpt/hash_read.c and the check of a received shard: reading
 * and hashing in one pass gives the bytes and the checksum a read, then a
 * hash, would; a received copy is refused for the same faults as a file. */
#include "ckpt/ckpt.h"
#include "test.h"

#include <elastic.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static uint8_t *pattern(size_t len)
{
    uint8_t *p = malloc(len);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    return p;
}

TEST(ckpt_pread_hashed_matches_a_read_then_a_hash_across_piece_boundaries)
{
    /* Several hashing pieces plus a ragged tail, read from an odd offset. */
    size_t len = 3 * ckpt__hash_window() + 4097, off = 13;
    uint8_t *want = pattern(len + off);
    char path[4200];
    snprintf(path, sizeof path, "%s/data", test_tmpdir());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0);
    ASSERT_OK(ckpt__write_all(fd, want, len + off, path));
    uint8_t *got = calloc(1, len), *window = malloc(ckpt__hash_window());
    uint64_t hash = 0, ranged = 0;
    ASSERT_OK(ckpt__pread_hashed(fd, got, len, off, path, &hash));
    ASSERT(memcmp(got, want + off, len) == 0);
    ASSERT_EQ(hash, ckpt__hash(want + off, len));
    ASSERT_OK(ckpt__hash_range(fd, window, len, off, path, &ranged));
    ASSERT_EQ(ranged, hash);
    /* Past the end of the file: an error, not a checksum of fewer bytes. */
    ASSERT_ERR(ckpt__pread_hashed(fd, got, len, off + 64, path, &hash), ELASTIC_ECORRUPT);
    close(fd);
    free(want);
    free(got);
    free(window);
}

/* A one-rank step of `blob_len` bytes saved into dir; its record and shard. */
static void saved_step(const char *dir, size_t blob_len, ckpt_commit_record *r, uint8_t **shard,
                       size_t *shard_len, char *shard_path, size_t cap)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    o.chunk_bytes = 64u << 10; /* several chunks */
    o.fsync = ELASTIC_CKPT_FSYNC_NONE;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    uint8_t *data = pattern(blob_len);
    elastic_ckpt_blob blob = { .name = "state", .data = data, .len = blob_len };
    ASSERT_OK(elastic_ckpt_save(c, 4, &blob, 1));
    elastic_ckpt_close(c);
    free(data);
    char step_dir[4200], path[4400];
    ckpt__step_dir(dir, 4, step_dir, sizeof step_dir);
    snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    ASSERT_OK(ckpt__read_small_file(path, 1u << 20, &raw, &raw_len));
    ASSERT_OK(ckpt__commit_decode(raw, raw_len, r));
    free(raw);
    char name[96];
    ckpt__shard_name(0, r->generation, name, sizeof name);
    snprintf(shard_path, cap, "%s/%s", step_dir, name);
    ASSERT_OK(ckpt__read_small_file(shard_path, 1u << 30, shard, shard_len));
}

/* The check a received copy gets before it takes its name, on its open file. */
static int verify_fd(const char *path, size_t len, const ckpt_commit_record *r, uint32_t rank)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ELASTIC_ENOTFOUND;
    int rc = ckpt__verify_shard_fd(fd, len, path, r, rank);
    close(fd);
    return rc;
}

TEST(ckpt_received_shard_is_refused_for_what_the_file_check_refuses)
{
    ckpt_commit_record r;
    uint8_t *shard;
    size_t len;
    char path[4400];
    saved_step(test_tmpdir(), (1u << 20) + 333, &r, &shard, &len, path, sizeof path);
    ASSERT_OK(verify_fd(path, len, &r, 0));
    ASSERT_OK(ckpt__verify_shard_file(path, &r, 0));
    /* One flipped byte of chunk data. */
    size_t at = CKPT_HEADER_BYTES + 200000;
    shard[at] ^= 0x04;
    int fd = open(path, O_RDWR);
    ASSERT(fd >= 0);
    ASSERT_EQ(pwrite(fd, shard + at, 1, (off_t)at), 1);
    close(fd);
    ASSERT_ERR(verify_fd(path, len, &r, 0), ELASTIC_ECORRUPT);
    ASSERT(strstr(elastic_last_error(), "checksum mismatch") != NULL);
    ASSERT_ERR(ckpt__verify_shard_file(path, &r, 0), ELASTIC_ECORRUPT);
    ASSERT(strstr(elastic_last_error(), "checksum mismatch") != NULL);
    /* Shorter than the record says, or of another rank: refused before any chunk is read. */
    ASSERT_ERR(verify_fd(path, len - 1, &r, 0), ELASTIC_ECORRUPT);
    ASSERT_ERR(verify_fd(path, 0, &r, 0), ELASTIC_ECORRUPT);
    ASSERT_ERR(verify_fd(path, len, &r, 1), ELASTIC_EINVAL);
    free(shard);
    ckpt__commit_free(&r);
}
