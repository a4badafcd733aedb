/*
 * A worker's restore: the memory tier the agent named, the newer of memory
 * and disk (memory on a tie) or the job's agreed step, and the report in
 * the heartbeat slot that the agent turns into checkpoint_restored.
 */
#include "channel/channel.h"
#include "ckpt/ckpt.h"
#include "ckpt/memtier.h"
#include "support/ckpt_content.h"
#include "support/store_fixture.h"
#include "test.h"

static char tier[4096], own[4200], disk[4200];

static void setup(void)
{
    snprintf(tier, sizeof tier, "%s/tier", test_tmpdir());
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, tier);
    snprintf(disk, sizeof disk, "%s/disk", test_tmpdir());
    ASSERT_OK(ckpt__mem_tier_create(tier, 64ull << 20, 2));
    setenv(CHANNEL__ENV_MEMORY_CKPT_DIR, own, 1);
    unsetenv(CHANNEL__ENV_RESTORE_STEP);
    unsetenv(CHANNEL__ENV_RESTORE_SOURCE);
}

static elastic_ckpt *open_memory(void)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    elastic_ckpt *c;
    ASSERT_OK(ckpt__open_memory(&o, &c));
    return c;
}

static elastic_ckpt *open_disk(void)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(disk, &o, &c));
    return c;
}

TEST(ckpt_restore_takes_the_newer_tier_memory_on_a_tie)
{
    setup();
    elastic_ckpt *mem = open_memory(), *dsk = open_disk();
    ckpt_restore r;
    ASSERT_EQ(ckpt__restore_begin(mem, dsk, &r), ELASTIC_ENOTFOUND);
    ASSERT_OK(ckpt_test_save(dsk, 4, 0));
    ASSERT_OK(ckpt__restore_begin(mem, dsk, &r));
    ASSERT_EQ(r.step, 4);
    ASSERT_EQ(r.source, CHANNEL__RESTORE_DISK);
    ASSERT(r.from == dsk);
    ASSERT_OK(ckpt_test_save(mem, 4, 0));
    ASSERT_OK(ckpt__restore_begin(mem, dsk, &r));
    ASSERT_EQ(r.source, CHANNEL__RESTORE_LOCAL);
    ASSERT_OK(ckpt_test_save(mem, 9, 0));
    ASSERT_OK(ckpt__restore_begin(mem, NULL, &r));
    ASSERT_EQ(r.step, 9);
    ASSERT(r.from == mem);
    elastic_ckpt_close(mem);
    elastic_ckpt_close(dsk);
    /* Outside a memory tier there is no memory handle, said plainly. */
    unsetenv(CHANNEL__ENV_MEMORY_CKPT_DIR);
    elastic_ckpt *none = NULL;
    ASSERT_EQ(ckpt__open_memory(NULL, &none), ELASTIC_ENOTFOUND);
    ASSERT(strstr(elastic_last_error(), "--memory-ckpt") != NULL);
}

TEST(ckpt_restore_follows_the_jobs_agreed_step)
{
    setup();
    elastic_ckpt *mem = open_memory(), *dsk = open_disk();
    ASSERT_OK(ckpt_test_save(mem, 12, 0));
    ASSERT_OK(ckpt_test_save(dsk, 10, 0));
    /* The job agreed on disk step 10 (another rank's shard of 12 is lost). */
    setenv(CHANNEL__ENV_RESTORE_STEP, "10", 1);
    setenv(CHANNEL__ENV_RESTORE_SOURCE, "disk", 1);
    ckpt_restore r;
    ASSERT_OK(ckpt__restore_begin(mem, dsk, &r));
    ASSERT_EQ(r.step, 10);
    ASSERT(r.from == dsk);
    setenv(CHANNEL__ENV_RESTORE_SOURCE, "tape", 1);
    ASSERT_EQ(ckpt__restore_begin(mem, dsk, &r), ELASTIC_EINVAL);
    setenv(CHANNEL__ENV_RESTORE_SOURCE, "peer", 1);
    ASSERT_EQ(ckpt__restore_begin(NULL, dsk, &r), ELASTIC_EINVAL); /* no memory handle */
    elastic_ckpt_close(mem);
    elastic_ckpt_close(dsk);
}

static elastic_ckpt *open_at(bool memory, uint64_t generation)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    o.generation = generation;
    elastic_ckpt *c;
    if (memory)
        ASSERT_OK(ckpt__open_memory(&o, &c));
    else
        ASSERT_OK(elastic_ckpt_open(disk, &o, &c));
    return c;
}

/* A disk tier the agents did not know when they planned (its workers had
 * not announced it yet): under replication lag their plan can name a memory
 * step older than a committed disk step. The worker restores the disk step
 * then (else it redoes the work and its save of that step fails: already
 * committed), unless that disk step was written by an older generation than
 * the planned step (abandoned). */
TEST(ckpt_restore_takes_a_committed_disk_step_newer_than_the_plans)
{
    setup();
    elastic_ckpt *old_disk = open_at(false, 1);
    ASSERT_OK(ckpt_test_save(old_disk, 10, 0));
    elastic_ckpt_close(old_disk);
    elastic_ckpt *mem = open_at(true, 2), *dsk = open_at(false, 2);
    ASSERT_OK(ckpt_test_save(mem, 5, 0));
    setenv(CHANNEL__ENV_RESTORE_STEP, "5", 1);
    setenv(CHANNEL__ENV_RESTORE_SOURCE, "local", 1);
    ckpt_restore r;
    /* Disk step 10 is generation 1's, step 5 generation 2's: generation 2
     * went back to before 10, so 10 is abandoned and the plan stands. */
    ASSERT_OK(ckpt__restore_begin(mem, dsk, &r));
    ASSERT_EQ(r.step, 5);
    ASSERT_EQ(r.source, CHANNEL__RESTORE_LOCAL);
    ASSERT(r.from == mem);
    /* Generation 2 committed step 12 on disk; the plan still says 5. */
    ASSERT_OK(ckpt_test_save(dsk, 12, 0));
    ASSERT_OK(ckpt__restore_begin(mem, dsk, &r));
    ASSERT_EQ(r.step, 12);
    ASSERT_EQ(r.source, CHANNEL__RESTORE_DISK);
    ASSERT(r.from == dsk);
    char why[256];
    ASSERT_OK(ckpt_test_check(r.from, r.step, 0, why, sizeof why));
    /* The same through the public call, which the trainers use. */
    uint64_t step = 0;
    elastic_ckpt *from = NULL;
    int source = 0;
    ASSERT_OK(elastic_ckpt_restore_begin(mem, dsk, &step, &from, &source));
    ASSERT_EQ(step, 12);
    ASSERT(from == dsk);
    ASSERT_EQ(source, ELASTIC_CKPT_SOURCE_DISK);
    elastic_ckpt_restore_end(from);
    /* A planned step as new as the disk's: memory, the cheaper copy. */
    ASSERT_OK(ckpt_test_save(mem, 12, 0));
    setenv(CHANNEL__ENV_RESTORE_STEP, "12", 1);
    ASSERT_OK(ckpt__restore_begin(mem, dsk, &r));
    ASSERT_EQ(r.step, 12);
    ASSERT(r.from == mem);
    /* Without the disk handle the plan is all there is. */
    setenv(CHANNEL__ENV_RESTORE_STEP, "5", 1);
    ASSERT_OK(ckpt__restore_begin(mem, NULL, &r));
    ASSERT_EQ(r.step, 5);
    elastic_ckpt_close(mem);
    elastic_ckpt_close(dsk);
}

TEST(ckpt_restore_reports_step_source_bytes_and_time_to_the_agent)
{
    setup();
    char hb[4200];
    snprintf(hb, sizeof hb, "%s/hb", test_tmpdir());
    channel__hb_region *region;
    ASSERT_OK(channel__hb_create(hb, 2, &region));
    setenv(CHANNEL__ENV_HEARTBEAT_SHM, hb, 1);
    setenv(CHANNEL__ENV_HEARTBEAT_SLOT, "1", 1);
    elastic_ckpt *mem = open_memory();
    ASSERT_OK(ckpt_test_save(mem, 3, 0));
    channel__hb_snapshot snap;
    channel__hb_read(region, 1, &snap);
    ASSERT_EQ(snap.ckpt_step, 3);
    ASSERT_EQ(snap.ckpt_tier, CHANNEL__TIER_MEMORY);
    ASSERT_EQ(snap.restore_source, CHANNEL__RESTORE_NONE);
    ckpt_restore r;
    ASSERT_OK(ckpt__restore_begin(mem, NULL, &r));
    char why[256];
    ASSERT_OK(ckpt_test_check(mem, r.step, 0, why, sizeof why));
    ckpt__restore_end(&r);
    channel__hb_read(region, 1, &snap);
    ASSERT_EQ(snap.restore_source, CHANNEL__RESTORE_LOCAL);
    ASSERT_EQ(snap.restore_step, 3);
    size_t want = 0;
    for (int b = 0; b < CKPT_TEST_BLOBS; b++) want += ckpt_test_blob_len(3, 0, b);
    ASSERT_EQ(snap.restore_bytes, want);
    elastic_ckpt_close(mem);
    channel__hb_close(region, true);
}

/* The same rule for a store-mode disk checkpoint (its commit record in the
 * job's store) on shared storage: every rank reads the directory, so the
 * newer committed disk step wins over the plan's memory step. On node-local
 * storage one rank's newer shard says nothing of the others': the plan
 * (which counted the announced tier) stands. */
TEST(ckpt_restore_takes_a_newer_store_mode_disk_step_on_shared_storage_only)
{
    setup();
    store_fixture f;
    fixture_start(&f);
    elastic_store *store = fixture_connect(&f);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    o.generation = 2;
    o.store = store;
    o.shared_storage = 1;
    elastic_ckpt *shared_disk, *mem = open_at(true, 2);
    ASSERT_OK(elastic_ckpt_open(disk, &o, &shared_disk));
    ASSERT_OK(ckpt_test_save(shared_disk, 12, 0));
    ASSERT_OK(ckpt_test_save(mem, 5, 0));
    setenv(CHANNEL__ENV_RESTORE_STEP, "5", 1);
    setenv(CHANNEL__ENV_RESTORE_SOURCE, "local", 1);
    ckpt_restore r;
    ASSERT_OK(ckpt__restore_begin(mem, shared_disk, &r));
    ASSERT_EQ(r.step, 12);
    ASSERT_EQ(r.source, CHANNEL__RESTORE_DISK);
    ASSERT(r.from == shared_disk);
    char why[256];
    ASSERT_OK(ckpt_test_check(r.from, r.step, 0, why, sizeof why));
    elastic_ckpt_close(shared_disk);
    o.shared_storage = 0;
    elastic_ckpt *local_disk;
    ASSERT_OK(elastic_ckpt_open(disk, &o, &local_disk));
    ASSERT_OK(ckpt__restore_begin(mem, local_disk, &r));
    ASSERT_EQ(r.step, 5);
    ASSERT(r.from == mem);
    elastic_ckpt_close(local_disk);
    elastic_ckpt_close(mem);
    elastic_store_close(store);
    elastic_store_server_close(f.server);
}

/* A trainer run without --memory-ckpt (or under torchrun) and without a disk
 * directory has neither tier: nothing to restore, not a misuse. */
TEST(ckpt_restore_with_neither_tier_finds_nothing)
{
    setup();
    uint64_t step = 7;
    elastic_ckpt *from = NULL;
    ASSERT_EQ(elastic_ckpt_restore_begin(NULL, NULL, &step, &from, NULL), ELASTIC_ENOTFOUND);
    ASSERT(strstr(elastic_last_error(), "neither a memory tier nor a disk checkpoint") != NULL);
    ASSERT(from == NULL);
    ASSERT_EQ(step, 7);
    ASSERT_EQ(elastic_ckpt_restore_begin(NULL, NULL, NULL, &from, NULL), ELASTIC_EINVAL);
}
