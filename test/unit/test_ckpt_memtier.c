/*
 * The memory tier: shards in a tmpfs tree the agent holds, in the disk
 * format (the ordinary reader, read_shard and verification work on them),
 * outliving the process that wrote them, K steps kept, and a limit that a
 * save over it meets as ELASTIC_ENOSPC with the limit named, across every
 * process that writes into the tier.
 */
#include "ckpt/ckpt.h"
#include "ckpt/memtier.h"
#include "support/ckpt_content.h"
#include "support/store_fixture.h"
#include "test.h"

#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

static const char *tier_root(void)
{
    static char root[4096];
    snprintf(root, sizeof root, "%s/tier", test_tmpdir());
    return root;
}

static const char *tier_dir(const char *sub)
{
    static char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", tier_root(), sub);
    return dir;
}

static elastic_ckpt *open_in_tier(const char *sub, uint32_t rank, uint32_t world)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    o.rank = rank;
    o.world = world;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(tier_dir(sub), &o, &c));
    return c;
}

static void expect_content(elastic_ckpt *c, uint64_t step, uint32_t rank)
{
    char why[512];
    if (ckpt_test_check(c, step, rank, why, sizeof why) != 0)
        FAIL("step %llu rank %u: %s", (unsigned long long)step, rank, why);
}

static void wait_child_ok(pid_t pid)
{
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
}

TEST(ckpt_memory_tier_shards_outlive_their_writer_and_read_like_disk)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 64ull << 20, 2));
    /* Two ranks of one node write their shards and exit (a crash is no different). */
    for (uint32_t rank = 0; rank < 2; rank++) {
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            elastic_ckpt *c = open_in_tier(CKPT_MEM_OWN_DIR, rank, 2);
            int rc = ckpt_test_save(c, 3, rank);
            elastic_ckpt_close(c);
            _exit(rc == 0 ? 0 : 1);
        }
        wait_child_ok(pid);
    }
    /* The replacement finds the step and every byte, any rank's shard. */
    elastic_ckpt *c = open_in_tier(CKPT_MEM_OWN_DIR, 0, 1);
    uint64_t latest = 0;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 3);
    uint32_t world = 0;
    uint64_t gen = 9;
    ASSERT_OK(elastic_ckpt_step_info(c, 3, &world, &gen));
    ASSERT_EQ(world, 2);
    expect_content(c, 3, 0);
    expect_content(c, 3, 1);
    elastic_ckpt_close(c);
    ASSERT(ckpt__mem_usage(tier_root()) > 0);
}

TEST(ckpt_memory_tier_refuses_a_save_over_its_limit_and_keeps_the_last_step)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 1u << 20, 2));
    elastic_ckpt *c = open_in_tier(CKPT_MEM_OWN_DIR, 0, 1);
    uint8_t *big = malloc(2u << 20);
    memset(big, 0x5a, 2u << 20);
    elastic_ckpt_blob small = { .name = "w", .data = big, .len = 300000 };
    ASSERT_OK(elastic_ckpt_save(c, 1, &small, 1));
    elastic_ckpt_blob over = { .name = "w", .data = big, .len = 2u << 20 };
    ASSERT_EQ(elastic_ckpt_save(c, 2, &over, 1), ELASTIC_ENOSPC);
    ASSERT(strstr(elastic_last_error(), "--memory-ckpt-limit") != NULL);
    ASSERT(strstr(elastic_last_error(), "step 2") != NULL);
    uint64_t latest = 0;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 1);
    void *data;
    size_t len;
    ASSERT_OK(elastic_ckpt_read(c, 1, "w", &data, &len));
    ASSERT_EQ(len, 300000);
    ASSERT_MEM_EQ(data, big, len);
    elastic_free(data);
    /* Nothing of the refused save holds memory; a save that fits still works. */
    ASSERT(ckpt__mem_usage(tier_root()) < 400000);
    ASSERT_OK(elastic_ckpt_save(c, 3, &small, 1));
    elastic_ckpt_close(c);
    free(big);
}

/* Two processes (a worker and the replica receiver, say) each write 600 KB
 * into a 1 MiB tier at the same moment: exactly one fits, whatever the timing. */
TEST(ckpt_memory_tier_limit_holds_across_processes)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 1u << 20, 2));
    char peer[4200];
    snprintf(peer, sizeof peer, "%s/" CKPT_MEM_PEER_DIR "/n1", tier_root());
    ASSERT_EQ(mkdir(peer, 0700), 0);
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    pid_t pids[2];
    const char *subs[2] = { CKPT_MEM_OWN_DIR, CKPT_MEM_PEER_DIR "/n1" };
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        ASSERT(pids[i] >= 0);
        if (pids[i] == 0) {
            close(go[1]);
            elastic_ckpt *c = open_in_tier(subs[i], 0, 1);
            char byte;
            if (read(go[0], &byte, 1) != 0) _exit(3); /* EOF: both start */
            uint8_t *buf = calloc(1, 600000);
            for (size_t k = 0; k < 600000; k++) buf[k] = (uint8_t)(k * 131 + i);
            elastic_ckpt_blob b = { .name = "w", .data = buf, .len = 600000 };
            int rc = elastic_ckpt_save(c, 1, &b, 1);
            elastic_ckpt_close(c);
            _exit(rc == 0 ? 0 : rc == ELASTIC_ENOSPC ? 2 : 1);
        }
    }
    close(go[0]);
    close(go[1]);
    int outcomes[2];
    for (int i = 0; i < 2; i++) {
        int status;
        ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
        ASSERT(WIFEXITED(status));
        outcomes[i] = WEXITSTATUS(status);
    }
    ASSERT((outcomes[0] == 0 && outcomes[1] == 2) || (outcomes[0] == 2 && outcomes[1] == 0));
    ASSERT(ckpt__mem_usage(tier_root()) <= (1u << 20));
}

/* A file of the tier's own tree, reserved `len` bytes as a writer would. */
static int reserve_file(const ckpt_mem_tier *tier, const char *name, uint64_t len)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", tier_dir(CKPT_MEM_OWN_DIR), name);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT(fd >= 0);
    int rc = ckpt__mem_reserve(tier, fd, 0, len, name);
    close(fd);
    return rc;
}

static void unlink_own(const char *name)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", tier_dir(CKPT_MEM_OWN_DIR), name);
    ASSERT_EQ(unlink(path), 0);
}

/* Reservations read the running count: the first one, with no count yet,
 * walks the tree; the ones after it do not, and the bound still holds. */
TEST(ckpt_memory_tier_reservations_count_instead_of_walking)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 8u << 20, 2));
    ckpt_mem_tier tier;
    ASSERT_OK(ckpt__mem_tier_open(tier_root(), &tier));
    uint64_t before = ckpt__mem_walks();
    ASSERT_OK(reserve_file(&tier, "a0", 100000));
    ASSERT_EQ(ckpt__mem_walks(), before + 1);
    char name[16];
    for (int i = 1; i < 20; i++) {
        snprintf(name, sizeof name, "a%d", i);
        ASSERT_OK(reserve_file(&tier, name, 100000));
    }
    ASSERT_EQ(ckpt__mem_walks(), before + 1);
    /* Past the limit by the count: the refusal comes from a walk. */
    ASSERT_EQ(reserve_file(&tier, "big", 7u << 20), ELASTIC_ENOSPC);
    ASSERT(strstr(elastic_last_error(), "memory checkpoint tier full") != NULL);
    ASSERT_EQ(ckpt__mem_walks(), before + 2);
    ASSERT(ckpt__mem_usage(tier_root()) <= (8u << 20));
    ckpt__mem_tier_close(&tier);
}

/* Files removed behind the count's back (by another process, say) leave it
 * too high: a reservation it would refuse walks once and fits; a damaged
 * count is walked past; a tier really full is still refused. */
TEST(ckpt_memory_tier_a_stale_count_walks_once_and_never_refuses_falsely)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 1u << 20, 2));
    ckpt_mem_tier tier;
    ASSERT_OK(ckpt__mem_tier_open(tier_root(), &tier));
    char name[16];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "s%d", i);
        ASSERT_OK(reserve_file(&tier, name, 600000));
        unlink_own(name); /* the count still holds it */
    }
    uint64_t before = ckpt__mem_walks();
    ASSERT_OK(reserve_file(&tier, "keep", 600000));
    ASSERT(ckpt__mem_walks() <= before + 1);
    /* Really full now: refused, after a walk, and the tree within its limit. */
    before = ckpt__mem_walks();
    ASSERT_EQ(reserve_file(&tier, "over", 600000), ELASTIC_ENOSPC);
    ASSERT_EQ(ckpt__mem_walks(), before + 1);
    ASSERT(ckpt__mem_usage(tier_root()) <= (1u << 20));
    unlink_own("over");
    /* A damaged count is not trusted: walked past, never a refusal. */
    unlink_own("keep");
    char count[4300];
    snprintf(count, sizeof count, "%s/" CKPT_MEM_COUNT, tier_root());
    int fd = open(count, O_WRONLY | O_TRUNC);
    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, "junk", 4), 4);
    close(fd);
    before = ckpt__mem_walks();
    ASSERT_OK(reserve_file(&tier, "again", 600000));
    ASSERT_EQ(ckpt__mem_walks(), before + 1);
    ASSERT_OK(reserve_file(&tier, "small", 100000));
    ASSERT_EQ(ckpt__mem_walks(), before + 1);
    ckpt__mem_tier_close(&tier);
}

static void expect_steps(elastic_ckpt *c, const uint64_t *want, size_t n_want)
{
    uint64_t *steps;
    size_t n;
    ASSERT_OK(elastic_ckpt_list_steps(c, &steps, &n));
    ASSERT_EQ(n, n_want);
    for (size_t i = 0; i < n; i++) ASSERT_EQ(steps[i], want[i]);
    elastic_free(steps);
}

TEST(ckpt_memory_tier_keeps_the_step_being_written_and_k_minus_one_committed)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 64ull << 20, 2));
    elastic_ckpt *c = open_in_tier(CKPT_MEM_OWN_DIR, 0, 1);
    for (uint64_t step = 1; step <= 5; step++) ASSERT_OK(ckpt_test_save(c, step, 0));
    const uint64_t last[] = { 5 };
    expect_steps(c, last, 1);
    elastic_ckpt_close(c);
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 64ull << 20, 3));
    c = open_in_tier(CKPT_MEM_OWN_DIR, 0, 1);
    for (uint64_t step = 1; step <= 5; step++) ASSERT_OK(ckpt_test_save(c, step, 0));
    const uint64_t two[] = { 4, 5 };
    expect_steps(c, two, 2);
    expect_content(c, 4, 0);
    elastic_ckpt_close(c);
}

TEST(ckpt_memory_tier_created_again_starts_empty)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 64ull << 20, 2));
    elastic_ckpt *c = open_in_tier(CKPT_MEM_OWN_DIR, 0, 1);
    ASSERT_OK(ckpt_test_save(c, 7, 0));
    elastic_ckpt_close(c);
    /* An agent that restarts does not trust what its predecessor left. */
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 64ull << 20, 2));
    c = open_in_tier(CKPT_MEM_OWN_DIR, 0, 1);
    uint64_t latest;
    ASSERT_EQ(elastic_ckpt_latest(c, &latest), ELASTIC_ENOTFOUND);
    elastic_ckpt_close(c);
    ASSERT_OK(ckpt__mem_tier_remove(tier_root()));
    struct stat st;
    ASSERT(stat(tier_root(), &st) != 0 && errno == ENOENT);
}

TEST(ckpt_memory_tier_rejects_bad_settings_and_a_damaged_marker)
{
    ASSERT_EQ(ckpt__mem_tier_create(tier_root(), 0, 2), ELASTIC_EINVAL);
    ASSERT_EQ(ckpt__mem_tier_create(tier_root(), 1u << 20, 1), ELASTIC_EINVAL);
    ASSERT_EQ(ckpt__mem_tier_create(tier_root(), 1u << 20, CKPT_MEM_STEPS_MAX + 1), ELASTIC_EINVAL);
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 1u << 20, 2));
    char marker[4300];
    snprintf(marker, sizeof marker, "%s/" CKPT_MEM_MARKER, tier_root());
    int fd = open(marker, O_WRONLY | O_TRUNC);
    ASSERT(fd >= 0);
    const char junk[] = "elastic-memory-tier 1\nlimit lots\nsteps 2\n";
    ASSERT_EQ(write(fd, junk, sizeof junk - 1), (ssize_t)(sizeof junk - 1));
    close(fd);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    elastic_ckpt *c = NULL;
    ASSERT_EQ(elastic_ckpt_open(tier_dir(CKPT_MEM_OWN_DIR), &o, &c), ELASTIC_ECORRUPT);
    ASSERT(c == NULL);
    /* A directory outside any tier is unaffected. */
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    ASSERT(c != NULL);
    elastic_ckpt_close(c);
    ckpt_mem_tier tier;
    ASSERT_EQ(ckpt__mem_tier_open(test_tmpdir(), &tier), ELASTIC_ENOTFOUND);
}

TEST(ckpt_memory_tier_default_limit_is_a_fraction_of_ram)
{
    uint64_t limit = ckpt__mem_default_limit();
    uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    ASSERT(limit > 0);
    ASSERT(limit <= ram / 2);
}

/* The background disk write: memory-tier shards copied into the disk tier
 * by the atomic path commit the step there, readable like any other. */
TEST(ckpt_memory_tier_shards_written_to_disk_commit_the_step_there)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 64ull << 20, 2));
    char disk[4200];
    snprintf(disk, sizeof disk, "%s/disk", test_tmpdir());
    for (uint32_t rank = 0; rank < 2; rank++) {
        elastic_ckpt *m = open_in_tier(CKPT_MEM_OWN_DIR, rank, 2);
        ASSERT_OK(ckpt_test_save(m, 6, rank));
        elastic_ckpt_close(m);
    }
    elastic_ckpt *ranks[2];
    for (uint32_t rank = 0; rank < 2; rank++) {
        elastic_ckpt_opts o;
        elastic_ckpt_opts_init(&o, sizeof o);
        o.rank = rank;
        o.world = 2;
        ASSERT_OK(elastic_ckpt_open(disk, &o, &ranks[rank]));
    }
    char shard[4400];
    snprintf(shard, sizeof shard, "%s/step-00000000000000000006/shard-00001-g0.elck",
             tier_dir(CKPT_MEM_OWN_DIR));
    /* Not rank 0's shard: refused, nothing written. */
    ASSERT_EQ(ckpt__adopt_shard(ranks[0], 6, shard), ELASTIC_EINVAL);
    ASSERT_OK(ckpt__adopt_shard(ranks[1], 6, shard));
    uint64_t latest;
    ASSERT_EQ(elastic_ckpt_latest(ranks[1], &latest), ELASTIC_ENOTFOUND); /* rank 0 missing */
    snprintf(shard, sizeof shard, "%s/step-00000000000000000006/shard-00000-g0.elck",
             tier_dir(CKPT_MEM_OWN_DIR));
    ASSERT_OK(ckpt__adopt_shard(ranks[0], 6, shard));
    ASSERT_OK(elastic_ckpt_latest(ranks[0], &latest));
    ASSERT_EQ(latest, 6);
    expect_content(ranks[0], 6, 0);
    expect_content(ranks[0], 6, 1);
    for (uint32_t rank = 0; rank < 2; rank++) elastic_ckpt_close(ranks[rank]);
}

/* A removed step's shard becomes the rank's spare, and the next shard is
 * written over it: larger or smaller, it reads back exactly. */
TEST(ckpt_memory_tier_writes_over_a_removed_steps_pages)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 64ull << 20, 2));
    elastic_ckpt *c = open_in_tier(CKPT_MEM_OWN_DIR, 0, 1);
    size_t sizes[] = { 3u << 20, 1u << 20, 200000, 5u << 20, 10 };
    uint8_t *buf = malloc(5u << 20);
    char spare[4300];
    snprintf(spare, sizeof spare, "%s/.spare-0", tier_dir(CKPT_MEM_OWN_DIR));
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (size_t k = 0; k < sizes[i]; k++) buf[k] = (uint8_t)(k * 31 + i);
        elastic_ckpt_blob b = { .name = "w", .data = buf, .len = sizes[i] };
        ASSERT_OK(elastic_ckpt_save(c, i + 1, &b, 1));
        void *data;
        size_t len;
        ASSERT_OK(elastic_ckpt_read(c, i + 1, "w", &data, &len));
        ASSERT_EQ(len, sizes[i]);
        ASSERT_MEM_EQ(data, buf, len);
        elastic_free(data);
        struct stat st;
        /* From the second save on, the step before the last waits as the
         * spare (retention left it; the next save takes it). */
        if (i >= 1) ASSERT_EQ(stat(spare, &st), 0);
    }
    elastic_ckpt_close(c);
    free(buf);
    ASSERT(ckpt__mem_usage(tier_root()) < (12u << 20));
}

/* Two ranks of one node commit a step through the job's store; one save is
 * refused for the limit. */
typedef struct limited_rank {
    const store_fixture *f;
    const char *dir; /* the tier's own tree (tier_dir's buffer is not the threads' to share) */
    uint32_t rank;
    size_t len;
    int rc;
    char error[512];
    uint64_t ms;
} limited_rank;

static void *limited_save(void *arg)
{
    limited_rank *r = arg;
    elastic_store *store = fixture_connect(r->f);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    o.rank = r->rank;
    o.world = 2;
    o.generation = 1;
    o.store = store;
    o.commit_timeout_ms = test_scaled_ms(120000); /* what the others would wait for */
    elastic_ckpt *c;
    r->rc = elastic_ckpt_open(r->dir, &o, &c);
    uint8_t *data = calloc(1, r->len);
    uint64_t start = elastic__now_ns();
    if (r->rc == 0) {
        elastic_ckpt_blob blob = { .name = "w", .data = data, .len = r->len };
        r->rc = elastic_ckpt_save(c, 7, &blob, 1);
        snprintf(r->error, sizeof r->error, "%s", elastic_last_error());
        elastic_ckpt_close(c);
    }
    r->ms = (elastic__now_ns() - start) / 1000000u;
    free(data);
    elastic_store_close(store);
    return NULL;
}

/* A rank's save refused for the limit abandons the step for every rank: the
 * other rank's commit wait ends at once with the same error, naming the
 * limit and the rank, instead of at commit_timeout_ms. */
TEST(ckpt_memory_tier_a_save_refused_for_the_limit_abandons_the_step_for_every_rank)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 1u << 20, 2));
    store_fixture f;
    fixture_start(&f);
    char own[4200];
    snprintf(own, sizeof own, "%s", tier_dir(CKPT_MEM_OWN_DIR));
    limited_rank ranks[2] = { { .f = &f, .dir = own, .rank = 0, .len = 100000 },
                              { .f = &f, .dir = own, .rank = 1, .len = 2u << 20 } };
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(pthread_create(&threads[i], NULL, limited_save, &ranks[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < 2; i++) {
        if (ranks[i].rc != ELASTIC_ENOSPC)
            FAIL("rank %d: %s: %s", i, elastic_err_name(ranks[i].rc), ranks[i].error);
        if (strstr(ranks[i].error, "--memory-ckpt-limit") == NULL)
            FAIL("rank %d: %s", i, ranks[i].error);
    }
    if (strstr(ranks[0].error, "step 7 abandoned: rank 1: ") == NULL) FAIL("%s", ranks[0].error);
    /* Promptly: far from the 120 s the commit would have waited. */
    if (ranks[0].ms > (uint64_t)test_scaled_ms(10000))
        FAIL("rank 0 waited %llu ms", (unsigned long long)ranks[0].ms);
    /* Nothing of the step is committed, nor held. */
    elastic_ckpt *c = open_in_tier(CKPT_MEM_OWN_DIR, 0, 1);
    uint64_t latest = 0;
    ASSERT_EQ(elastic_ckpt_latest(c, &latest), ELASTIC_ENOTFOUND);
    elastic_ckpt_close(c);
    ASSERT(ckpt__mem_usage(tier_root()) < 100000);
    elastic_store_server_close(f.server);
}

/* An explicit abort in store mode abandons the step too (ELASTIC_ECANCELED). */
TEST(ckpt_store_commit_an_aborted_rank_ends_the_others_wait)
{
    ASSERT_OK(ckpt__mem_tier_create(tier_root(), 64u << 20, 2));
    store_fixture f;
    fixture_start(&f);
    char own[4200];
    snprintf(own, sizeof own, "%s", tier_dir(CKPT_MEM_OWN_DIR));
    limited_rank waiter = { .f = &f, .dir = own, .rank = 0, .len = 1000 };
    pthread_t thread;
    ASSERT_EQ(pthread_create(&thread, NULL, limited_save, &waiter), 0);
    elastic_store *store = fixture_connect(&f);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.rank = 1;
    o.world = 2;
    o.generation = 1;
    o.store = store;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(own, &o, &c));
    elastic_ckpt_txn *t;
    ASSERT_OK(elastic_ckpt_begin(c, 7, &t));
    elastic_ckpt_abort(t);
    pthread_join(thread, NULL);
    if (waiter.rc != ELASTIC_ECANCELED)
        FAIL("rank 0: %s: %s", elastic_err_name(waiter.rc), waiter.error);
    if (strstr(waiter.error, "step 7 abandoned: rank 1: its save was aborted") == NULL)
        FAIL("%s", waiter.error);
    elastic_ckpt_close(c);
    elastic_store_close(store);
    elastic_store_server_close(f.server);
}
