/*
 * A fenced generation cannot move the checkpoint forward: once a newer
 * generation has opened the checkpoint, a node of the old one that keeps
 * writing (cut off or frozen, not yet told) commits nothing and `latest`
 * stays what the live generation wrote — over a shared directory and through
 * the store.
 */
#include "support/ckpt_content.h"
#include "ckpt/ckpt.h"
#include "test.h"

#include <unistd.h>

static elastic_ckpt *open_gen(const char *dir, elastic_store *store, uint64_t generation)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.generation = generation;
    o.store = store;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    return c;
}

static void expect_latest(elastic_ckpt *c, uint64_t want)
{
    uint64_t latest = 0;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, want);
}

/* Generation 1 saves step 1; generation 2 starts; the fenced node of
 * generation 1 keeps saving (refused); generation 2 saves and is the latest. */
static void fenced_writer_scenario(const char *fenced_dir, const char *live_dir,
                                   elastic_store *store)
{
    elastic_ckpt *fenced = open_gen(fenced_dir, store, 1);
    ASSERT_OK(ckpt_test_save(fenced, 1, 0));
    expect_latest(fenced, 1);
    elastic_ckpt *live = open_gen(live_dir, store, 2);
    for (uint64_t step = 2; step <= 4; step++) {
        int rc = ckpt_test_save(fenced, step, 0);
        if (rc != ELASTIC_ESTATE)
            FAIL("fenced save of step %llu: %s", (unsigned long long)step, elastic_err_name(rc));
    }
    expect_latest(fenced, 1);
    ASSERT_OK(ckpt_test_save(live, 2, 0));
    expect_latest(live, 2);
    ASSERT_EQ(ckpt_test_save(fenced, 5, 0), ELASTIC_ESTATE);
    expect_latest(live, 2);
    /* An old generation reopening is still fenced: the record never goes back. */
    elastic_ckpt *reopened = open_gen(fenced_dir, store, 1);
    ASSERT_EQ(ckpt_test_save(reopened, 6, 0), ELASTIC_ESTATE);
    elastic_ckpt_close(reopened);
    elastic_ckpt_close(fenced);
    elastic_ckpt_close(live);
}

TEST(ckpt_fenced_generation_cannot_commit_in_a_shared_directory)
{
    fenced_writer_scenario(test_tmpdir(), test_tmpdir(), NULL);
}

TEST(ckpt_fenced_generation_cannot_commit_through_the_store)
{
    elastic_store_server *server;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64], fenced_dir[4200], live_dir[4200];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(server));
    snprintf(fenced_dir, sizeof fenced_dir, "%s/fenced", test_tmpdir());
    snprintf(live_dir, sizeof live_dir, "%s/live", test_tmpdir());
    elastic_store *store;
    ASSERT_OK(elastic_store_connect(endpoint, NULL, &store));
    fenced_writer_scenario(fenced_dir, live_dir, store);
    elastic_store_close(store);
    elastic_store_server_close(server);
}

static elastic_ckpt *open_rank(const char *dir, uint64_t generation, uint32_t rank, uint32_t world)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.generation = generation;
    o.rank = rank;
    o.world = world;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    return c;
}

/* A fenced generation of two ranks saves a step: refused, and its shards of
 * that step are gone, so a crash loop of fenced generations (the chaos run
 * saw 48 of them after an operator restart) cannot fill the disk. */
TEST(ckpt_fenced_generation_leaves_no_shards_of_the_refused_step)
{
    const char *dir = test_tmpdir();
    elastic_ckpt *old0 = open_rank(dir, 1, 0, 2), *old1 = open_rank(dir, 1, 1, 2);
    elastic_ckpt *live = open_rank(dir, 2, 0, 2);
    ASSERT_OK(ckpt_test_save(old0, 3, 0)); /* not every shard yet: nothing to commit */
    ASSERT_EQ(ckpt_test_save(old1, 3, 1), ELASTIC_ESTATE);
    char step_dir[4300], path[4400], shard[96];
    ckpt__step_dir(dir, 3, step_dir, sizeof step_dir);
    for (uint32_t rank = 0; rank < 2; rank++) {
        ckpt__shard_name(rank, 1, shard, sizeof shard);
        snprintf(path, sizeof path, "%s/%s", step_dir, shard);
        if (access(path, F_OK) == 0) FAIL("the fenced generation's %s is left behind", shard);
    }
    uint64_t latest = 0;
    ASSERT_ERR(elastic_ckpt_latest(live, &latest), ELASTIC_ENOTFOUND);
    elastic_ckpt_close(old0);
    elastic_ckpt_close(old1);
    elastic_ckpt_close(live);
}
