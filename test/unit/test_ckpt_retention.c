/* Retention: keep the newest N committed steps and every K-th; never the
 * newest valid one; uncommitted leftovers below it go too. */
#include "support/ckpt_content.h"
#include "test.h"

#include <sys/stat.h>

static elastic_ckpt *open_keep(unsigned keep_last, uint64_t keep_every)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.chunk_bytes = 64 << 10;
    o.keep_last = keep_last;
    o.keep_every = keep_every;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    return c;
}

static void expect_steps(elastic_ckpt *c, const uint64_t *want, size_t n_want)
{
    uint64_t *steps;
    size_t n;
    ASSERT_OK(elastic_ckpt_list_steps(c, &steps, &n));
    if (n != n_want) FAIL("%zu steps kept, expected %zu", n, n_want);
    for (size_t i = 0; i < n; i++)
        if (steps[i] != want[i])
            FAIL("step %zu is %llu, expected %llu", i, (unsigned long long)steps[i],
                 (unsigned long long)want[i]);
    elastic_free(steps);
}

TEST(ckpt_retention_keeps_the_last_n_and_every_kth)
{
    elastic_ckpt *c = open_keep(2, 5);
    for (uint64_t s = 1; s <= 12; s++) ASSERT_OK(ckpt_test_save(c, s, 0));
    uint64_t want[] = { 5, 10, 11, 12 };
    expect_steps(c, want, 4);
    char why[256];
    for (size_t i = 0; i < 4; i++)
        if (ckpt_test_check(c, want[i], 0, why, sizeof why) != 0) FAIL("%s", why);
    char gone[4096];
    snprintf(gone, sizeof gone, "%s/step-%020d", test_tmpdir(), 9);
    ASSERT_NE(access(gone, F_OK), 0);
    elastic_ckpt_close(c);
}

TEST(ckpt_retention_off_keeps_everything)
{
    elastic_ckpt *c = open_keep(0, 0);
    for (uint64_t s = 1; s <= 6; s++) ASSERT_OK(ckpt_test_save(c, s, 0));
    uint64_t want[] = { 1, 2, 3, 4, 5, 6 };
    expect_steps(c, want, 6);
    elastic_ckpt_close(c);
}

TEST(ckpt_retention_removes_corrupt_and_uncommitted_steps_below_the_latest)
{
    elastic_ckpt *c = open_keep(2, 0);
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    ASSERT_OK(ckpt_test_save(c, 2, 0));
    elastic_ckpt_close(c);
    /* An uncommitted step 3 from another writer, and a damaged step 2 commit. */
    char dir3[4096], commit2[4096];
    snprintf(dir3, sizeof dir3, "%s/step-%020d", test_tmpdir(), 3);
    ASSERT_OK(mkdir(dir3, 0755));
    snprintf(commit2, sizeof commit2, "%s/step-%020d/COMMIT", test_tmpdir(), 2);
    FILE *f = fopen(commit2, "r+b");
    ASSERT(f != NULL);
    fputc('X', f);
    fclose(f);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.keep_last = 1;
    o.world =
        2; /* as rank 0 of two: the open leaves step 3 alone (another rank may be writing it) */
    o.rank = 0;
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    ASSERT_EQ(access(dir3, F_OK), 0);
    elastic_ckpt_close(c);
    c = open_keep(1, 0); /* world 1: uncommitted step 3 is a leftover */
    ASSERT_NE(access(dir3, F_OK), 0);
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 1); /* step 2 is damaged */
    ASSERT_OK(ckpt_test_save(c, 4, 0));
    uint64_t want[] = { 4 };
    expect_steps(c, want, 1);
    ASSERT_NE(access(commit2, F_OK), 0); /* the damaged step below the latest went too */
    elastic_ckpt_close(c);
}
