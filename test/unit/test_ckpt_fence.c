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
    ASSERT_OK(ckpt_test_save(old0, 3, 0)); /* not every shard yet: nothing to commit */
    elastic_ckpt *live = open_rank(dir, 2, 0, 2);
    ASSERT_EQ(ckpt_test_save(old1, 3, 1), ELASTIC_ESTATE); /* refused before its rename */
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

/* ---- incarnations: a job an operator started again (issue 26) ---------------- */

static bool parses(const char *text, uint64_t incarnation, uint64_t generation)
{
    ckpt_fence_mark m;
    return ckpt__fence_mark_parse(text, strlen(text), &m) && m.incarnation == incarnation &&
           m.generation == generation;
}

static bool refused(const char *text)
{
    ckpt_fence_mark m;
    return !ckpt__fence_mark_parse(text, strlen(text), &m);
}

TEST(ckpt_fence_marks_order_the_incarnation_first_and_read_old_names_as_incarnation_0)
{
    ASSERT(parses("7", 0, 7)); /* a marker from before incarnations */
    ASSERT(parses("1764600000123-3", 1764600000123ull, 3));
    ASSERT(parses("18446744073709551615-18446744073709551615", UINT64_MAX, UINT64_MAX));
    static const char *const bad[] = { "",   "-3",   "0-3", "3-", "a-1",  "1-2-3",
                                       "+5", "1-+2", " 5",  "5 ", "1--2", "18446744073709551616" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!refused(bad[i])) FAIL("\"%s\" was read as a marker", bad[i]);
    ckpt_fence_mark old9 = { 0, 9 }, first1 = { 1000, 1 }, first5 = { 1000, 5 },
                    again1 = { 2000, 1 };
    ASSERT(ckpt__fence_mark_cmp(&old9, &first1) < 0); /* any incarnation beats none */
    ASSERT(ckpt__fence_mark_cmp(&first1, &first5) < 0);
    ASSERT(ckpt__fence_mark_cmp(&first5, &again1) < 0); /* a restart counts from 1 again */
    ASSERT(ckpt__fence_mark_cmp(&again1, &first5) > 0);
    ASSERT(ckpt__fence_mark_cmp(&first5, &first5) == 0);
    char text[64];
    ASSERT_EQ(ckpt__fence_mark_format(&old9, text, sizeof text), 1); /* the old name */
    ASSERT_STR_EQ(text, "9");
    ASSERT(ckpt__fence_mark_format(&again1, text, sizeof text) > 0);
    ASSERT_STR_EQ(text, "2000-1");
    ASSERT_EQ(ckpt__fence_mark_format(&again1, text, 4), 0); /* does not fit: nothing */
}

static elastic_ckpt *open_incarnation(const char *dir, elastic_store *store, uint64_t incarnation,
                                      uint64_t generation, uint32_t rank, uint32_t world)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    ASSERT(o.incarnation == ELASTIC_CKPT_INCARNATION_FROM_ENV);
    o.incarnation = incarnation;
    o.generation = generation;
    o.rank = rank;
    o.world = world;
    o.store = store;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    return c;
}

/* The job before an operator restart reached generation 5 (a marker from
 * before incarnations says 9); the job started again counts from 1 with a
 * larger incarnation: it commits, and every worker of the old job still
 * running is fenced, whatever its generation. */
static void restarted_job_scenario(const char *old_dir, const char *new_dir, elastic_store *store)
{
    elastic_ckpt *legacy = open_incarnation(old_dir, store, 0, 9, 0, 1);
    elastic_ckpt *old = open_incarnation(old_dir, store, 1000, 5, 0, 1);
    ASSERT_OK(ckpt_test_save(old, 10, 0));
    ASSERT_EQ(ckpt_test_save(legacy, 11, 0), ELASTIC_ESTATE);
    elastic_ckpt *again = open_incarnation(new_dir, store, 2000, 1, 0, 1);
    expect_latest(again, 10);
    /* The old job's worker was writing step 11 when it froze; it thaws
     * after the new job committed step 11: refused, and it takes nothing of
     * the new job's commit of that step along. */
    elastic_ckpt_txn *frozen;
    ASSERT_OK(elastic_ckpt_begin(old, 11, &frozen));
    ASSERT_OK(ckpt_test_put_all(frozen, 11, 0));
    ASSERT_OK(ckpt_test_save(again, 11, 0));
    expect_latest(again, 11);
    ASSERT_EQ(elastic_ckpt_commit(frozen), ELASTIC_ESTATE);
    expect_latest(again, 11);
    char why[256];
    if (ckpt_test_check(again, 11, 0, why, sizeof why) != 0) FAIL("step 11: %s", why);
    int rc = ckpt_test_save(old, 12, 0);
    if (rc != ELASTIC_ESTATE) FAIL("the old job's worker saved step 12: %s", elastic_err_name(rc));
    ASSERT(strstr(elastic_last_error(), "incarnation 2000") != NULL);
    ASSERT_EQ(ckpt_test_save(legacy, 12, 0), ELASTIC_ESTATE);
    /* The old job's first incarnation opening again is still fenced. */
    elastic_ckpt *old_reopened = open_incarnation(old_dir, store, 1000, 6, 0, 1);
    ASSERT_EQ(ckpt_test_save(old_reopened, 13, 0), ELASTIC_ESTATE);
    expect_latest(again, 11);
    /* The restarted job's own later generations go on. */
    elastic_ckpt *again2 = open_incarnation(new_dir, store, 2000, 2, 0, 1);
    ASSERT_OK(ckpt_test_save(again2, 12, 0));
    ASSERT_EQ(ckpt_test_save(again, 13, 0), ELASTIC_ESTATE);
    expect_latest(again2, 12);
    elastic_ckpt_close(old_reopened);
    elastic_ckpt_close(again2);
    elastic_ckpt_close(again);
    elastic_ckpt_close(old);
    elastic_ckpt_close(legacy);
}

TEST(ckpt_restarted_job_commits_over_the_old_jobs_markers_in_a_shared_directory)
{
    restarted_job_scenario(test_tmpdir(), test_tmpdir(), NULL);
    /* The markers: the old name for incarnation 0, "<I>-<G>" otherwise. */
    char path[4300];
    static const char *const names[] = { "9", "1000-5", "2000-1", "2000-2" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/generations/%s", test_tmpdir(), names[i]);
        if (access(path, F_OK) != 0) FAIL("no marker %s", path);
    }
}

TEST(ckpt_restarted_job_commits_over_the_old_jobs_record_in_the_store)
{
    elastic_store_server *server;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64], old_dir[4200], new_dir[4200];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(server));
    snprintf(old_dir, sizeof old_dir, "%s/old", test_tmpdir());
    snprintf(new_dir, sizeof new_dir, "%s/new", test_tmpdir());
    elastic_store *store;
    ASSERT_OK(elastic_store_connect(endpoint, NULL, &store));
    /* Both jobs' ranks see the one checkpoint: the new one restores the old one's step. */
    restarted_job_scenario(old_dir, old_dir, store);
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_get(store, "ckpt/newest_generation", 1000, &value, &len));
    ASSERT(len == 6 && memcmp(value, "2000-2", 6) == 0);
    elastic_free(value);
    /* A value no library wrote is refused with a reason, not read as 0. */
    ASSERT_OK(elastic_store_set(store, "ckpt/newest_generation", "2000-", 5));
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.incarnation = 3000, o.generation = 1, o.store = store;
    elastic_ckpt *c = NULL;
    ASSERT_ERR(elastic_ckpt_open(new_dir, &o, &c), ELASTIC_ECORRUPT);
    elastic_store_close(store);
    elastic_store_server_close(server);
}

/* Saves rank's shard of `step` holding the blobs derived for `content_step`:
 * another job's data at the same step. */
static int save_content_of(elastic_ckpt *c, uint64_t step, uint64_t content_step, uint32_t rank)
{
    elastic_ckpt_txn *txn;
    int rc = elastic_ckpt_begin(c, step, &txn);
    if (rc) return rc;
    if ((rc = ckpt_test_put_all(txn, content_step, rank)) != 0) {
        elastic_ckpt_abort(txn);
        return rc;
    }
    return elastic_ckpt_commit(txn);
}

/* The old job left step 20 uncommitted: rank 1's shard of generation 1 is
 * there. The restarted job's generation 1 (the same shard names) writes
 * step 20: its rank 0 does not commit over the old shard, a worker of the
 * old job still running that is refused does not delete the new job's
 * shards, and once the new rank 1 saves, step 20 holds the new job's data. */
TEST(ckpt_restarted_job_never_commits_or_drops_the_old_jobs_shards_of_the_same_name)
{
    const char *dir = test_tmpdir();
    elastic_ckpt *old0 = open_incarnation(dir, NULL, 1000, 1, 0, 2);
    elastic_ckpt *old1 = open_incarnation(dir, NULL, 1000, 1, 1, 2);
    ASSERT_OK(save_content_of(old1, 20, 77, 1)); /* rank 0 never saves it: the job is lost */
    elastic_ckpt *new0 = open_incarnation(dir, NULL, 2000, 1, 0, 2);
    elastic_ckpt *new1 = open_incarnation(dir, NULL, 2000, 1, 1, 2);
    ASSERT_OK(ckpt_test_save(new0, 20, 0)); /* the old rank 1's shard is no partner */
    uint64_t latest = 0;
    int rc = elastic_ckpt_latest(new0, &latest);
    if (rc != ELASTIC_ENOTFOUND)
        FAIL("step %llu committed with the old job's shard (%s)", (unsigned long long)latest,
             elastic_err_name(rc));
    ASSERT_EQ(ckpt_test_save(old0, 20, 0), ELASTIC_ESTATE); /* the frozen old rank 0 thaws */
    char path[4400], step_dir[4300], shard[96], why[256];
    ckpt__step_dir(dir, 20, step_dir, sizeof step_dir);
    ckpt__shard_name(0, 1, shard, sizeof shard);
    snprintf(path, sizeof path, "%s/%s", step_dir, shard);
    if (access(path, F_OK) != 0)
        FAIL("the old job's refused worker removed the new job's %s", shard);
    ASSERT_OK(ckpt_test_save(new1, 20, 1));
    expect_latest(new0, 20);
    for (uint32_t rank = 0; rank < 2; rank++)
        if (ckpt_test_check(new0, 20, rank, why, sizeof why) != 0) FAIL("rank %u: %s", rank, why);
    elastic_ckpt_close(old0);
    elastic_ckpt_close(old1);
    elastic_ckpt_close(new0);
    elastic_ckpt_close(new1);
}

/* The default incarnation is the agent's ELASTIC_INCARNATION (what a
 * trainer that sets only rank, world and generation gets); a malformed one
 * is refused naming the variable, not read as 0. */
TEST(ckpt_default_incarnation_is_the_agents_and_a_malformed_one_is_refused)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.generation = 1;
    elastic_ckpt *c = NULL;
    setenv("ELASTIC_INCARNATION", "4000", 1);
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    elastic_ckpt_close(c);
    char path[4300];
    snprintf(path, sizeof path, "%s/generations/4000-1", test_tmpdir());
    if (access(path, F_OK) != 0) FAIL("no marker %s", path);
    setenv("ELASTIC_INCARNATION", "40x", 1);
    ASSERT_ERR(elastic_ckpt_open(test_tmpdir(), &o, &c), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "ELASTIC_INCARNATION") != NULL);
    unsetenv("ELASTIC_INCARNATION");
    /* Without an agent: incarnation 0, the old marker name. */
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    elastic_ckpt_close(c);
    snprintf(path, sizeof path, "%s/generations/1", test_tmpdir());
    if (access(path, F_OK) != 0) FAIL("no marker %s", path);
}
