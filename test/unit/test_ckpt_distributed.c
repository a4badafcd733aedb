/* The distributed commit over a shared directory: a step becomes the latest
 * only when every rank of the generation committed its shard; a rank dying
 * before its commit leaves the previous step the latest; replicated blobs
 * are found by a trainer restarted with another world size; a new
 * generation rewrites a step without mixing in the old generation's shards. */
#include "support/ckpt_content.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

static pid_t start_rank_in(const char *dir, const char *endpoint, uint32_t rank, uint32_t world,
                           uint64_t generation, uint64_t first, uint64_t last, uint64_t die_at)
{
    char args[6][32];
    snprintf(args[0], 32, "%u", rank);
    snprintf(args[1], 32, "%u", world);
    snprintf(args[2], 32, "%llu", (unsigned long long)generation);
    snprintf(args[3], 32, "%llu", (unsigned long long)first);
    snprintf(args[4], 32, "%llu", (unsigned long long)last);
    snprintf(args[5], 32, "%llu", (unsigned long long)die_at);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        execl(test_helper_path("ckpt_rank_writer"), "ckpt_rank_writer", dir, args[0], args[1],
              args[2], args[3], args[4], args[5], endpoint, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static pid_t start_rank(uint32_t rank, uint32_t world, uint64_t generation, uint64_t first,
                        uint64_t last, uint64_t die_at)
{
    return start_rank_in(test_tmpdir(), NULL, rank, world, generation, first, last, die_at);
}

/* Blocks until the rank exits (the runner's timeout bounds the test). */
static int wait_rank(pid_t pid)
{
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    return status;
}

static elastic_ckpt *open_as(uint32_t rank, uint32_t world, uint64_t generation)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.rank = rank;
    o.world = world;
    o.generation = generation;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    return c;
}

static void expect_config(elastic_ckpt *c, uint64_t step)
{
    void *data;
    size_t len;
    ASSERT_OK(elastic_ckpt_read(c, step, "config", &data, &len));
    char want[64];
    snprintf(want, sizeof want, "step=%llu", (unsigned long long)step);
    ASSERT_EQ(len, strlen(want));
    ASSERT_MEM_EQ(data, want, len);
    elastic_free(data);
}

TEST_TIMEOUT(ckpt_step_commits_only_when_every_rank_committed, 60)
{
    /* Generation 0, three ranks; rank 2 dies before committing step 3. */
    pid_t pids[3];
    for (uint32_t r = 0; r < 3; r++) pids[r] = start_rank(r, 3, 0, 1, 4, r == 2 ? 3 : 0);
    ASSERT_EQ(wait_rank(pids[0]), 0);
    ASSERT_EQ(wait_rank(pids[1]), 0);
    int status = wait_rank(pids[2]);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    elastic_ckpt *c = open_as(0, 3, 0);
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 2);
    char why[256];
    for (uint32_t r = 0; r < 3; r++)
        if (ckpt_test_check(c, 2, r, why, sizeof why) != 0) FAIL("rank %u: %s", r, why);
    expect_config(c, 2);
    char **names;
    size_t n;
    ASSERT_OK(elastic_ckpt_list_blobs(c, 2, ELASTIC_CKPT_ANY_RANK, &names, &n));
    ASSERT_EQ(n, CKPT_TEST_BLOBS + 1); /* own blobs + the replicated config, once */
    elastic_free(names);
    elastic_ckpt_close(c);

    /* Restarted with two ranks: the replicated blob and rank 1's old shard are found. */
    c = open_as(1, 2, 1);
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 2);
    expect_config(c, 2);
    uint32_t world;
    ASSERT_OK(elastic_ckpt_step_info(c, 2, &world, NULL));
    ASSERT_EQ(world, 3);
    void *data;
    size_t len;
    ASSERT_OK(elastic_ckpt_read_shard(c, 2, 2, "blob-0", &data,
                                      &len)); /* resharding: a departed rank's blob */
    ASSERT_EQ(len, 8);
    elastic_free(data);
    elastic_ckpt_close(c);

    /* Generation 1 with two ranks redoes steps 3..4 beside generation 0's leftovers. */
    pid_t gen1[2] = { start_rank(0, 2, 1, 3, 4, 0), start_rank(1, 2, 1, 3, 4, 0) };
    ASSERT_EQ(wait_rank(gen1[0]), 0);
    ASSERT_EQ(wait_rank(gen1[1]), 0);
    c = open_as(0, 2, 1);
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 4);
    uint64_t generation;
    ASSERT_OK(elastic_ckpt_step_info(c, 3, &world, &generation));
    ASSERT_EQ(world, 2);
    ASSERT_EQ(generation, 1);
    for (uint32_t r = 0; r < 2; r++)
        if (ckpt_test_check(c, 3, r, why, sizeof why) != 0) FAIL("gen 1 rank %u: %s", r, why);
    expect_config(c, 4);
    elastic_ckpt_close(c);
}

TEST(ckpt_rank_missing_leaves_step_uncommitted_in_process)
{
    /* Ranks 0 and 2 of three commit step 1 from this process; rank 1 never does. */
    elastic_ckpt *r0 = open_as(0, 3, 0), *r2 = open_as(2, 3, 0);
    ASSERT_OK(ckpt_test_save(r0, 1, 0));
    ASSERT_OK(ckpt_test_save(r2, 1, 2));
    uint64_t latest;
    ASSERT_ERR(elastic_ckpt_latest(r0, &latest), ELASTIC_ENOTFOUND);
    elastic_ckpt *r1 = open_as(1, 3, 0);
    ASSERT_OK(ckpt_test_save(r1, 1, 1)); /* the last rank writes the commit record */
    ASSERT_OK(elastic_ckpt_latest(r0, &latest));
    ASSERT_EQ(latest, 1);
    elastic_ckpt_close(r0);
    elastic_ckpt_close(r1);
    elastic_ckpt_close(r2);
}

/* Store mode: each rank has its own directory; the commit record goes
 * through the store and every rank keeps a copy. */
static elastic_ckpt *open_private(const char *dir, elastic_store *store, uint32_t rank)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.rank = rank;
    o.world = 3;
    o.store = store;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    return c;
}

TEST_TIMEOUT(ckpt_store_commit_needs_every_rank_and_recovers_lost_records, 90)
{
    elastic_store_server *server;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    char endpoint[64], dirs[3][4096];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(server));
    pid_t pids[3];
    for (uint32_t r = 0; r < 3; r++) {
        snprintf(dirs[r], sizeof dirs[r], "%s/rank-%u", test_tmpdir(), r);
        pids[r] = start_rank_in(dirs[r], endpoint, r, 3, 0, 1, 4, r == 2 ? 3 : 0);
    }
    /* Ranks 0 and 1 wait for rank 2 at step 3 and time out (status 3). */
    ASSERT_EQ(WEXITSTATUS(wait_rank(pids[0])), 3);
    ASSERT_EQ(WEXITSTATUS(wait_rank(pids[1])), 3);
    int status = wait_rank(pids[2]);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    elastic_store *store;
    ASSERT_OK(elastic_store_connect(endpoint, NULL, &store));
    char why[256];
    for (uint32_t r = 0; r < 3; r++) {
        elastic_ckpt *c = open_private(dirs[r], store, r);
        uint64_t latest;
        ASSERT_OK(elastic_ckpt_latest(c, &latest));
        ASSERT_EQ(latest, 2);
        if (ckpt_test_check(c, 2, r, why, sizeof why) != 0) FAIL("rank %u: %s", r, why);
        expect_config(c, 2);
        elastic_ckpt_close(c);
    }
    /* A rank that lost its copy of the record (killed right after the
     * global commit) gets it back from the store. */
    char commit[4200];
    snprintf(commit, sizeof commit, "%s/step-%020d/COMMIT", dirs[1], 2);
    ASSERT_OK(unlink(commit));
    elastic_ckpt *c = open_private(dirs[1], store, 1);
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 2);
    ASSERT_EQ(access(commit, F_OK), 0);
    elastic_ckpt_close(c);
    elastic_store_close(store);
    elastic_store_server_close(server);
}
