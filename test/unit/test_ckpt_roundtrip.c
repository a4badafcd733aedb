/* Checkpoint round trips: empty, tiny, many and large blobs, streaming,
 * listings, and the misuse the API refuses. */
#include "support/ckpt_content.h"
#include "test.h"

#include <dirent.h>
#include <stdbool.h>

static elastic_ckpt *open_with(const char *dir, int threads, int compression, size_t chunk)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.threads = threads;
    o.compression = compression;
    o.chunk_bytes = chunk;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    return c;
}

static uint8_t *pattern(size_t len, uint64_t seed, bool compressible)
{
    uint8_t *buf = malloc(len ? len : 1);
    ASSERT(buf != NULL);
    uint64_t state = seed | 1;
    for (size_t i = 0; i < len; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        buf[i] = compressible ? (uint8_t)((i / 512) + (state % 4 == 0)) : (uint8_t)state;
    }
    return buf;
}

/* No file under dir whose name starts with ".tmp-" (one level of step dirs). */
static int count_temp_files(const char *dir)
{
    int found = 0;
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".tmp-", 5) == 0) found++;
        if (strncmp(e->d_name, "step-", 5) != 0) continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        DIR *s = opendir(sub);
        struct dirent *f;
        while (s && (f = readdir(s)) != NULL)
            if (strncmp(f->d_name, ".tmp-", 5) == 0) found++;
        if (s) closedir(s);
    }
    closedir(d);
    return found;
}

TEST(ckpt_empty_checkpoint_round_trips)
{
    elastic_ckpt *c = open_with(test_tmpdir(), 2, ELASTIC_CKPT_ZSTD, 1 << 20);
    uint64_t step = 99;
    ASSERT_ERR(elastic_ckpt_latest(c, &step), ELASTIC_ENOTFOUND);
    ASSERT_OK(elastic_ckpt_save(c, 7, NULL, 0));
    ASSERT_OK(elastic_ckpt_latest(c, &step));
    ASSERT_EQ(step, 7);
    char **names;
    size_t n = 5;
    ASSERT_OK(elastic_ckpt_list_blobs(c, 7, ELASTIC_CKPT_ANY_RANK, &names, &n));
    ASSERT_EQ(n, 0);
    elastic_free(names);
    void *data;
    size_t len;
    ASSERT_ERR(elastic_ckpt_read(c, 7, "nothing", &data, &len), ELASTIC_ENOTFOUND);
    elastic_ckpt_close(c);
}

TEST(ckpt_tiny_and_zero_length_blobs_round_trip)
{
    elastic_ckpt *c = open_with(test_tmpdir(), 0, ELASTIC_CKPT_ZSTD, 1 << 20);
    elastic_ckpt_blob blobs[] = { { "one", "x", 1, 0 }, { "zero", "", 0, 0 } };
    ASSERT_OK(elastic_ckpt_save(c, 1, blobs, 2));
    void *data;
    size_t len;
    ASSERT_OK(elastic_ckpt_read(c, 1, "one", &data, &len));
    ASSERT_EQ(len, 1);
    ASSERT_EQ(((char *)data)[0], 'x');
    elastic_free(data);
    ASSERT_OK(elastic_ckpt_read(c, 1, "zero", &data, &len));
    ASSERT_EQ(len, 0);
    elastic_free(data);
    ASSERT_OK(elastic_ckpt_blob_len(c, 1, "one", &len));
    ASSERT_EQ(len, 1);
    elastic_ckpt_close(c);
}

TEST(ckpt_many_blobs_round_trip_and_are_listed)
{
    elastic_ckpt *c = open_with(test_tmpdir(), 2, ELASTIC_CKPT_ZSTD, 64 << 10);
    enum { N = 600 };
    elastic_ckpt_txn *txn;
    ASSERT_OK(elastic_ckpt_begin(c, 3, &txn));
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "layer.%d.weight", i);
        uint8_t *buf = pattern((size_t)i * 331 % 200000, (uint64_t)i + 1, i % 2 == 0);
        ASSERT_OK(elastic_ckpt_put(txn, name, buf, (size_t)i * 331 % 200000));
        free(buf);
    }
    ASSERT_OK(elastic_ckpt_commit(txn));
    char **names;
    size_t n;
    ASSERT_OK(elastic_ckpt_list_blobs(c, 3, ELASTIC_CKPT_ANY_RANK, &names, &n));
    ASSERT_EQ(n, N);
    ASSERT_STR_EQ(names[0], "layer.0.weight");
    ASSERT_STR_EQ(names[N - 1], "layer.599.weight");
    elastic_free(names);
    for (int i = 0; i < N; i += 7) {
        char name[32];
        snprintf(name, sizeof name, "layer.%d.weight", i);
        size_t want = (size_t)i * 331 % 200000;
        uint8_t *expect = pattern(want, (uint64_t)i + 1, i % 2 == 0);
        void *data;
        size_t len;
        ASSERT_OK(elastic_ckpt_read(c, 3, name, &data, &len));
        ASSERT_EQ(len, want);
        ASSERT_MEM_EQ(data, expect, want);
        elastic_free(data);
        free(expect);
    }
    elastic_ckpt_close(c);
}

/* Large blobs in every configuration: pool or not, zstd or raw, random or
 * compressible data, put or streamed in odd pieces. */
TEST_TIMEOUT(ckpt_large_blobs_round_trip_in_every_configuration, 120)
{
    const size_t len = (24u << 20) + 12345;
    uint8_t *random_data = pattern(len, 42, false), *smooth = pattern(len, 43, true);
    uint8_t *back = malloc(len);
    int configs[][2] = { { 2, ELASTIC_CKPT_ZSTD },
                         { 0, ELASTIC_CKPT_ZSTD },
                         { 2, ELASTIC_CKPT_NONE },
                         { 1, ELASTIC_CKPT_NONE } };
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/c%zu", test_tmpdir(), k);
        elastic_ckpt *c = open_with(dir, configs[k][0], configs[k][1], 1 << 20);
        elastic_ckpt_txn *txn;
        ASSERT_OK(elastic_ckpt_begin(c, 10, &txn));
        ASSERT_OK(elastic_ckpt_put(txn, "random", random_data, len));
        elastic_ckpt_writer *w;
        ASSERT_OK(elastic_ckpt_writer_open(txn, "smooth", 0, &w));
        for (size_t off = 0, piece = 1; off < len; off += piece, piece = piece * 3 + 1) {
            if (piece > len - off) piece = len - off;
            ASSERT_OK(elastic_ckpt_writer_write(w, smooth + off, piece));
        }
        ASSERT_OK(elastic_ckpt_writer_close(w));
        ASSERT_OK(elastic_ckpt_commit(txn));
        size_t got;
        ASSERT_OK(elastic_ckpt_read_into(c, 10, "random", back, len, &got));
        ASSERT_EQ(got, len);
        ASSERT_MEM_EQ(back, random_data, len);
        ASSERT_OK(elastic_ckpt_read_into(c, 10, "smooth", back, len, &got));
        ASSERT_MEM_EQ(back, smooth, len);
        ASSERT_ERR(elastic_ckpt_read_into(c, 10, "smooth", back, len - 1, &got), ELASTIC_ELIMIT);
        ASSERT_EQ(got, len);
        elastic_ckpt_close(c);
    }
    free(random_data);
    free(smooth);
    free(back);
}

TEST(ckpt_latest_is_the_newest_and_steps_are_listed_oldest_first)
{
    elastic_ckpt *c = open_with(test_tmpdir(), 2, ELASTIC_CKPT_ZSTD, 64 << 10);
    uint64_t steps[] = { 5, 1, 30, 12 };
    for (size_t i = 0; i < 4; i++) ASSERT_OK(ckpt_test_save(c, steps[i], 0));
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 30);
    uint64_t *list;
    size_t n;
    ASSERT_OK(elastic_ckpt_list_steps(c, &list, &n));
    ASSERT_EQ(n, 4);
    ASSERT_EQ(list[0], 1);
    ASSERT_EQ(list[1], 5);
    ASSERT_EQ(list[2], 12);
    ASSERT_EQ(list[3], 30);
    elastic_free(list);
    char why[256] = "";
    for (size_t i = 0; i < 4; i++)
        if (ckpt_test_check(c, steps[i], 0, why, sizeof why) != 0) FAIL("%s", why);
    uint32_t world;
    uint64_t generation;
    ASSERT_OK(elastic_ckpt_step_info(c, 12, &world, &generation));
    ASSERT_EQ(world, 1);
    ASSERT_EQ(generation, 0);
    elastic_ckpt_close(c);
}

TEST(ckpt_refuses_misuse)
{
    elastic_ckpt *c = open_with(test_tmpdir(), 2, ELASTIC_CKPT_ZSTD, 64 << 10);
    elastic_ckpt_txn *txn, *second;
    ASSERT_OK(elastic_ckpt_begin(c, 1, &txn));
    ASSERT_ERR(elastic_ckpt_begin(c, 2, &second), ELASTIC_EBUSY);
    ASSERT_OK(elastic_ckpt_put(txn, "a", "1", 1));
    ASSERT_ERR(elastic_ckpt_put(txn, "a", "2", 1), ELASTIC_EEXIST);
    ASSERT_ERR(elastic_ckpt_put(txn, "", "2", 1), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_ckpt_put_flags(txn, "b", "2", 1, 0x80), ELASTIC_EINVAL);
    elastic_ckpt_writer *w;
    ASSERT_OK(elastic_ckpt_writer_open(txn, "w", 0, &w));
    elastic_ckpt_writer *w2;
    ASSERT_ERR(elastic_ckpt_writer_open(txn, "w2", 0, &w2), ELASTIC_ESTATE);
    ASSERT_OK(elastic_ckpt_writer_close(w));
    ASSERT_OK(elastic_ckpt_commit(txn));
    ASSERT_ERR(elastic_ckpt_begin(c, 1, &txn), ELASTIC_EEXIST);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.rank = 3;
    o.world = 2;
    elastic_ckpt *bad;
    ASSERT_ERR(elastic_ckpt_open(test_tmpdir(), &o, &bad), ELASTIC_EINVAL);
    elastic_ckpt_opts_init(&o, sizeof o);
    o.chunk_bytes = 10;
    ASSERT_ERR(elastic_ckpt_open(test_tmpdir(), &o, &bad), ELASTIC_EINVAL);
    elastic_ckpt_close(c);
}

TEST(ckpt_abort_leaves_nothing_behind)
{
    elastic_ckpt *c = open_with(test_tmpdir(), 2, ELASTIC_CKPT_ZSTD, 64 << 10);
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    elastic_ckpt_txn *txn;
    ASSERT_OK(elastic_ckpt_begin(c, 2, &txn));
    uint8_t *buf = pattern(1 << 20, 5, true);
    ASSERT_OK(elastic_ckpt_put(txn, "x", buf, 1 << 20));
    free(buf);
    elastic_ckpt_abort(txn);
    ASSERT_EQ(count_temp_files(test_tmpdir()), 0);
    char step2[4096];
    snprintf(step2, sizeof step2, "%s/step-%020d", test_tmpdir(), 2);
    ASSERT_NE(access(step2, F_OK), 0);
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 1);
    ASSERT_OK(ckpt_test_save(c, 2, 0)); /* the handle is usable again */
    elastic_ckpt_close(c);
}
