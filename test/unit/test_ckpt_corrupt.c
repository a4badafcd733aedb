/* A flipped byte or a truncation anywhere in a checkpoint (commit record,
 * shard header, chunk data, manifest, trailer) is detected: latest skips the
 * step and returns the one before; reads report ELASTIC_ECORRUPT. */
#include "support/ckpt_content.h"
#include "test.h"

#include <fcntl.h>
#include <sys/stat.h>

static elastic_ckpt *open_dir(const char *dir, int verify)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.chunk_bytes = 64 << 10;
    o.threads = 2;
    o.verify = verify;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    return c;
}

static void path_of(char *out, size_t cap, uint64_t step, const char *file)
{
    snprintf(out, cap, "%s/step-%020llu/%s", test_tmpdir(), (unsigned long long)step, file);
}

static void flip(const char *path, off_t offset)
{
    int fd = open(path, O_RDWR);
    ASSERT(fd >= 0);
    unsigned char byte;
    ASSERT_EQ(pread(fd, &byte, 1, offset), 1);
    byte ^= 0x20;
    ASSERT_EQ(pwrite(fd, &byte, 1, offset), 1);
    close(fd);
}

static off_t size_of(const char *path)
{
    struct stat st;
    ASSERT_OK(stat(path, &st));
    return st.st_size;
}

/* A fresh handle (no cached view) must find step 1, not the damaged 2. */
static void expect_latest_is_previous(const char *what, off_t offset)
{
    elastic_ckpt *c = open_dir(test_tmpdir(), ELASTIC_CKPT_VERIFY_FULL);
    uint64_t step = 0;
    int rc = elastic_ckpt_latest(c, &step);
    if (rc != 0 || step != 1)
        FAIL("%s at %lld: latest gave %s, step %llu", what, (long long)offset, elastic_err_name(rc),
             (unsigned long long)step);
    elastic_ckpt_close(c);
}

/* Damage step 2's files byte by byte (every byte outside chunk data, a
 * sample inside) and check each is caught, then restore it. */
TEST_TIMEOUT(ckpt_flipped_byte_anywhere_is_detected, 120)
{
    elastic_ckpt *c = open_dir(test_tmpdir(), ELASTIC_CKPT_VERIFY_FULL);
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    ASSERT_OK(ckpt_test_save(c, 2, 0));
    elastic_ckpt_close(c);
    char shard[4096], commit[4096];
    path_of(shard, sizeof shard, 2, "shard-00000-g0.elck");
    path_of(commit, sizeof commit, 2, "COMMIT");
    off_t commit_size = size_of(commit), shard_size = size_of(shard);
    for (off_t i = 0; i < commit_size; i++) {
        flip(commit, i);
        expect_latest_is_previous("commit record", i);
        flip(commit, i);
    }
    /* Header (4096 bytes), data, manifest, trailer (48 bytes): every byte of
     * the header and of the last 2 KiB (manifest and trailer), every 101st
     * byte of the data in between. */
    int checked = 0;
    for (off_t i = 0; i < shard_size; i++) {
        bool metadata = i < 4096 || i >= shard_size - 2048;
        if (!metadata && i % 101 != 0) continue;
        flip(shard, i);
        expect_latest_is_previous("shard", i);
        flip(shard, i);
        checked++;
    }
    ASSERT_LT(4096 + 1000, checked);
    c = open_dir(test_tmpdir(), ELASTIC_CKPT_VERIFY_FULL);
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 2); /* restored: valid again */
    elastic_ckpt_close(c);
}

TEST_TIMEOUT(ckpt_truncation_anywhere_is_detected, 60)
{
    elastic_ckpt *c = open_dir(test_tmpdir(), ELASTIC_CKPT_VERIFY_FULL);
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    ASSERT_OK(ckpt_test_save(c, 2, 0));
    elastic_ckpt_close(c);
    char shard[4096], commit[4096], copy[4096];
    path_of(shard, sizeof shard, 2, "shard-00000-g0.elck");
    path_of(commit, sizeof commit, 2, "COMMIT");
    snprintf(copy, sizeof copy, "%s/pristine", test_tmpdir());
    const char *files[] = { commit, shard };
    for (int f = 0; f < 2; f++) {
        off_t size = size_of(files[f]);
        ASSERT_OK(link(files[f], copy) == 0 ? 0 : -1);
        ASSERT_OK(unlink(files[f]));
        /* Every length near the boundaries of the format, a sample in between. */
        for (off_t len = 0; len < size; len += (len < 4200 || len > size - 2200) ? 1 : 509) {
            int in = open(copy, O_RDONLY), out = open(files[f], O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ASSERT(in >= 0 && out >= 0);
            char *buf = malloc((size_t)len + 1);
            ASSERT_EQ(pread(in, buf, (size_t)len, 0), len);
            ASSERT_EQ(write(out, buf, (size_t)len), len);
            free(buf);
            close(in);
            close(out);
            expect_latest_is_previous(f == 0 ? "truncated commit record" : "truncated shard", len);
        }
        ASSERT_OK(rename(copy, files[f]));
    }
    c = open_dir(test_tmpdir(), ELASTIC_CKPT_VERIFY_FULL);
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 2);
    elastic_ckpt_close(c);
}

TEST(ckpt_read_reports_corrupt_data_when_latest_checked_only_manifests)
{
    elastic_ckpt *c = open_dir(test_tmpdir(), ELASTIC_CKPT_VERIFY_MANIFEST);
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    elastic_ckpt_close(c);
    char shard[4096];
    path_of(shard, sizeof shard, 1, "shard-00000-g0.elck");
    flip(shard, 4096); /* the first byte of chunk data */
    c = open_dir(test_tmpdir(), ELASTIC_CKPT_VERIFY_MANIFEST);
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 1);
    void *data;
    size_t len;
    ASSERT_ERR(elastic_ckpt_read(c, 1, "blob-0", &data, &len), ELASTIC_ECORRUPT);
    elastic_ckpt_close(c);
}
