/*
 * The divergence check (issue 36): replicated blobs compared across ranks at
 * every store-mode commit (the memory tier and store-mode disk). The judgement
 * alone over hand-made records, then whole saves of several ranks (threads,
 * one store): a rank whose replicated bytes differ is named with its node
 * and the majority, the step is committed nowhere, the generation commits
 * nothing after it, and the agent is told (the channel's sink); warn mode
 * commits and tells; digests agree whatever each rank's compression did.
 */
#include "ckpt/ckpt.h"
#include "ckpt/divergence.h"
#include "ckpt/memtier.h"
#include "channel/channel.h"
#include "support/store_fixture.h"
#include "test.h"

#include <pthread.h>

/* ---- the judgement ------------------------------------------------------------- */

static ckpt_replica_blob blobs_a[2] = { { 11, 100, 0xaaa, "weights" }, { 22, 8, 0xbbb, "step" } };
static ckpt_replica_blob blobs_b[2] = { { 11, 100, 0xccc, "weights" }, { 22, 8, 0xbbb, "step" } };

static ckpt_replica_record record(uint32_t rank, ckpt_replica_blob *blobs, size_t n)
{
    ckpt_replica_record r = { .compared = true,
                              .rank = rank,
                              .group_rank = rank / 2,
                              .local_rank = rank % 2,
                              .chunk_size = 1u << 20,
                              .count = n,
                              .blobs = blobs };
    snprintf(r.host, sizeof r.host, "host%u", rank / 2);
    return r;
}

static char *evidence_of(const ckpt_replica_record *records, size_t n, const ckpt_divergence *d)
{
    elastic__text t;
    elastic__text_init(&t, CHANNEL__MSG_MAX_PAYLOAD);
    ckpt__divergence_evidence(records, n, d, 120, 3, "memory", CKPT_DIVERGENCE_STOP, false,
                              "weights", &t);
    ASSERT(!t.overflow);
    return t.data;
}

static void expect_line(const char *evidence, const char *line)
{
    char want[256];
    snprintf(want, sizeof want, "%s\n", line);
    size_t len = strlen(want);
    for (const char *at = evidence; at != NULL; at = strchr(at, '\n'), at = at ? at + 1 : NULL)
        if (strncmp(at, want, len) == 0) return;
    FAIL("no \"%s\" in:\n%s", line, evidence);
}

TEST(ckpt_divergence_names_the_minority_rank_its_node_and_the_majority)
{
    ckpt_replica_record r[4] = { record(0, blobs_a, 2), record(1, blobs_a, 2),
                                 record(2, blobs_b, 2), record(3, blobs_a, 2) };
    ckpt_divergence d;
    ASSERT_OK(ckpt__divergence_judge(r, 4, &d));
    ASSERT(d.diverged && d.majority && !d.list_differs);
    ASSERT_EQ(d.blobs_diverged, 1);
    ASSERT_EQ(d.first_blob, 0);
    ASSERT_EQ(d.minority_count, 1);
    ASSERT_EQ(d.minority[0], 2);
    ASSERT_EQ(d.majority_count, 3);
    char *e = evidence_of(r, 4, &d);
    expect_line(e, "STEP=120");
    expect_line(e, "BLOB=weights");
    expect_line(e, "MAJORITY=3");
    expect_line(e, "MAJORITY_RANKS=0,1,3");
    expect_line(e, "MAJORITY_DIGEST=0000000000000aaa");
    expect_line(e, "MINORITY_RANKS=2");
    expect_line(e, "MINORITY_NODES=1");
    expect_line(e, "MINORITY_LOCAL_RANKS=0");
    expect_line(e, "MINORITY_HOSTS=host1");
    expect_line(e, "MINORITY_DIGESTS=0000000000000ccc");
    if (strstr(e, "DETAIL=step 120: replicated blob \"weights\" differs between ranks: rank 2 "
                  "(node 1 host1 local rank 0) has 0000000000000ccc; the other 3 of 4 ranks "
                  "agree on 0000000000000aaa") == NULL)
        FAIL("%s", e);
    free(e);
    ckpt__divergence_free(&d);
}

TEST(ckpt_divergence_two_ranks_that_differ_have_no_majority)
{
    ckpt_replica_record r[2] = { record(0, blobs_a, 2), record(1, blobs_b, 2) };
    ckpt_divergence d;
    ASSERT_OK(ckpt__divergence_judge(r, 2, &d));
    ASSERT(d.diverged && !d.majority);
    ASSERT_EQ(d.minority_count, 2); /* no majority: every rank is named */
    char *e = evidence_of(r, 2, &d);
    expect_line(e, "MAJORITY=0");
    expect_line(e, "MINORITY_RANKS=0,1");
    if (strstr(e, "no majority among the 2 ranks") == NULL) FAIL("%s", e);
    free(e);
    ckpt__divergence_free(&d);
}

TEST(ckpt_divergence_agreement_and_ranks_that_take_no_part)
{
    ckpt_replica_record r[3] = { record(0, blobs_a, 2), record(1, blobs_a, 2),
                                 record(2, blobs_b, 2) };
    r[2].compared = false; /* an adopted shard: not compared */
    ckpt_divergence d;
    ASSERT_OK(ckpt__divergence_judge(r, 3, &d));
    ASSERT(!d.diverged);
    ASSERT_EQ(d.compared, 2);
    ckpt__divergence_free(&d);
    /* Chunk sizes that differ would make equal bytes differ: not compared. */
    r[2].compared = true;
    r[2].chunk_size = 4u << 20;
    ASSERT_OK(ckpt__divergence_judge(r, 3, &d));
    ASSERT(!d.diverged);
    ckpt__divergence_free(&d);
}

TEST(ckpt_divergence_a_rank_holding_other_replicated_blobs_diverges)
{
    ckpt_replica_record r[3] = { record(0, blobs_a, 2), record(1, blobs_a, 1),
                                 record(2, blobs_a, 2) };
    ckpt_divergence d;
    ASSERT_OK(ckpt__divergence_judge(r, 3, &d));
    ASSERT(d.diverged && d.list_differs && d.majority);
    ASSERT_EQ(d.minority_count, 1);
    ASSERT_EQ(d.minority[0], 1);
    char *e = evidence_of(r, 3, &d);
    expect_line(e, "BLOB=(the set of replicated blobs)");
    free(e);
    ckpt__divergence_free(&d);
}

TEST(ckpt_divergence_record_round_trips_and_bounds_what_it_reads)
{
    ckpt_replica_record r = record(5, blobs_a, 2), back;
    bytes__buf buf = { 0 };
    ckpt__replicas_encode(&r, &buf);
    ASSERT_OK(ckpt__replicas_decode(buf.data, buf.len, &back));
    ASSERT(back.compared);
    ASSERT_EQ(back.rank, 5);
    ASSERT_EQ(back.group_rank, 2);
    ASSERT_STR_EQ(back.host, "host2");
    ASSERT_EQ(back.count, 2);
    ASSERT_EQ(back.blobs[0].digest, 0xaaa);
    ASSERT_EQ(back.blobs[1].raw_len, 8);
    ckpt__replicas_free(&back);
    /* Every cut, and a count that claims more than is there, is refused. */
    for (size_t len = 0; len < buf.len; len++)
        ASSERT_ERR(ckpt__replicas_decode(buf.data, len, &back), ELASTIC_ECORRUPT);
    buf.data[buf.len - 2 * 24 - 4] = 3; /* count 3, two entries present */
    ASSERT_ERR(ckpt__replicas_decode(buf.data, buf.len, &back), ELASTIC_ECORRUPT);
    bytes__buf_free(&buf);
}

/* ---- whole saves, several ranks through one store -------------------------------- */

/* What the agent would have been told (the channel's sink), in this process. */
static pthread_mutex_t told_lock = PTHREAD_MUTEX_INITIALIZER;
static char told[4][CHANNEL__MSG_MAX_PAYLOAD + 1];
static int told_count;

static int capture(void *user, int type, const char *payload)
{
    pthread_mutex_lock(&told_lock);
    if (type == CHANNEL__MSG_EVENT && told_count < 4)
        snprintf(told[told_count++], sizeof told[0], "%s", payload);
    pthread_mutex_unlock(&told_lock);
    return 0;
}

typedef struct rank_run {
    const store_fixture *f;
    char dir[4200];
    uint32_t rank, world;
    uint64_t generation, step;
    int compression;
    const void *data;
    size_t len;
    int rc;
    char error[1024];
} rank_run;

static void *save_one(void *arg)
{
    rank_run *r = arg;
    elastic_store *store = fixture_connect(r->f);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = r->compression;
    o.rank = r->rank;
    o.world = r->world;
    o.generation = r->generation;
    o.store = store;
    o.commit_timeout_ms = test_scaled_ms(20000);
    elastic_ckpt *c;
    r->rc = elastic_ckpt_open(r->dir, &o, &c);
    if (r->rc == 0) {
        uint64_t own = r->rank;
        elastic_ckpt_blob blobs[2] = {
            { .name = "weights", .data = r->data, .len = r->len, .flags = ELASTIC_CKPT_REPLICATED },
            { .name = "rank", .data = &own, .len = sizeof own, .flags = 0 },
        };
        r->rc = elastic_ckpt_save(c, r->step, blobs, 2);
        snprintf(r->error, sizeof r->error, "%s", elastic_last_error());
        elastic_ckpt_close(c);
    }
    elastic_store_close(store);
    return NULL;
}

/* Every rank saves `step`; rank `odd` (world: none) saves its replicated
 * weights with one bit flipped. Each rank has its own directory (store mode
 * on private disks), or they share the memory tier's own tree. */
static void save_all(const store_fixture *f, rank_run *runs, uint32_t world, uint64_t generation,
                     uint64_t step, uint32_t odd, bool tier)
{
    static uint8_t good[3u << 20], bad[3u << 20];
    for (size_t i = 0; i < sizeof good; i++) good[i] = (uint8_t)(i * 2654435761u >> 13);
    memcpy(bad, good, sizeof bad);
    bad[(2u << 20) + 12345] ^= 0x10; /* one bit, in the third 1 MiB chunk */
    pthread_t threads[8];
    for (uint32_t r = 0; r < world; r++) {
        runs[r] = (rank_run){ .f = f,
                              .rank = r,
                              .world = world,
                              .generation = generation,
                              .step = step,
                              .compression = ELASTIC_CKPT_NONE,
                              .data = r == odd ? bad : good,
                              .len = sizeof good };
        if (tier)
            snprintf(runs[r].dir, sizeof runs[r].dir, "%s/tier/" CKPT_MEM_OWN_DIR, test_tmpdir());
        else
            snprintf(runs[r].dir, sizeof runs[r].dir, "%s/rank%u", test_tmpdir(), r);
        ASSERT_EQ(pthread_create(&threads[r], NULL, save_one, &runs[r]), 0);
    }
    for (uint32_t r = 0; r < world; r++) pthread_join(threads[r], NULL);
}

/* The newest committed step a rank sees in its directory (store mode: its
 * own shard is what it verifies). */
static uint64_t latest_in(const store_fixture *f, const char *dir, uint32_t rank, uint32_t world)
{
    elastic_store *store = fixture_connect(f);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.rank = rank;
    o.world = world;
    o.store = store;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    uint64_t step = 0;
    int rc = elastic_ckpt_latest(c, &step);
    elastic_ckpt_close(c);
    elastic_store_close(store);
    return rc == 0 ? step : 0;
}

/* Three ranks in the memory tier, rank 2's replicated weights one bit off
 * (a test that saves rank-specific bytes under the replicated flag is the
 * same thing): every rank's save of step 120 fails with ELASTIC_EDIVERGED
 * naming rank 2 and the majority; step 110 stays the newest committed; the
 * agent of every rank is told; the generation commits nothing later, a new
 * one does. */
TEST_TIMEOUT(ckpt_divergence_a_flipped_bit_on_one_rank_commits_the_step_nowhere, 60)
{
    unsetenv(CHANNEL__ENV_ON_DIVERGENCE);
    char root[4200];
    snprintf(root, sizeof root, "%s/tier", test_tmpdir());
    ASSERT_OK(ckpt__mem_tier_create(root, 256u << 20, 3));
    channel__sink_set(capture, NULL);
    store_fixture f;
    fixture_start(&f);
    rank_run runs[3];
    save_all(&f, runs, 3, 1, 110, UINT32_MAX, true);
    for (int r = 0; r < 3; r++)
        if (runs[r].rc != 0) FAIL("rank %d: step 110: %s", r, runs[r].error);
    ASSERT_EQ(told_count, 0); /* agreement says nothing */
    save_all(&f, runs, 3, 1, 120, 2, true);
    for (int r = 0; r < 3; r++) {
        if (runs[r].rc != ELASTIC_EDIVERGED)
            FAIL("rank %d: %s: %s", r, elastic_err_name(runs[r].rc), runs[r].error);
        if (strstr(runs[r].error, "step 120: replicated blob \"weights\" differs between ranks: "
                                  "rank 2 ") == NULL ||
            strstr(runs[r].error, "the other 2 of 3 ranks agree") == NULL)
            FAIL("rank %d: %s", r, runs[r].error);
    }
    ASSERT_EQ(latest_in(&f, runs[0].dir, 0, 3), 110);
    ASSERT_EQ(told_count, 3); /* each rank tells its agent */
    expect_line(told[0], "NAME=replica_divergence");
    expect_line(told[0], "TIER=memory");
    expect_line(told[0], "MODE=stop");
    expect_line(told[0], "COMMITTED=0");
    expect_line(told[0], "MINORITY_RANKS=2");
    expect_line(told[0], "MAJORITY_RANKS=0,1");
    /* Step 130 of generation 1 trained on a poisoned all-reduce: refused,
     * even with every replica equal. */
    save_all(&f, runs, 3, 1, 130, UINT32_MAX, true);
    for (int r = 0; r < 3; r++)
        if (runs[r].rc != ELASTIC_EDIVERGED ||
            strstr(runs[r].error, "diverged at step 120") == NULL)
            FAIL("rank %d: %s: %s", r, elastic_err_name(runs[r].rc), runs[r].error);
    ASSERT_EQ(latest_in(&f, runs[0].dir, 0, 3), 110);
    /* Generation 2 (restored from 110, the faulty node replaced) commits. */
    save_all(&f, runs, 3, 2, 120, UINT32_MAX, true);
    for (int r = 0; r < 3; r++)
        if (runs[r].rc != 0) FAIL("rank %d: generation 2: %s", r, runs[r].error);
    ASSERT_EQ(latest_in(&f, runs[0].dir, 0, 3), 120);
    channel__sink_clear(NULL);
    elastic_store_server_close(f.server);
}

/* Store mode on disk, two ranks: no majority; both stop with the evidence
 * and neither copy of the step is committed. */
TEST_TIMEOUT(ckpt_divergence_two_ranks_on_disk_stop_with_no_majority, 60)
{
    unsetenv(CHANNEL__ENV_ON_DIVERGENCE);
    store_fixture f;
    fixture_start(&f);
    rank_run runs[2];
    save_all(&f, runs, 2, 1, 5, UINT32_MAX, false);
    ASSERT_OK(runs[0].rc);
    save_all(&f, runs, 2, 1, 6, 1, false);
    for (int r = 0; r < 2; r++) {
        if (runs[r].rc != ELASTIC_EDIVERGED || strstr(runs[r].error, "no majority") == NULL)
            FAIL("rank %d: %s: %s", r, elastic_err_name(runs[r].rc), runs[r].error);
        ASSERT_EQ(latest_in(&f, runs[r].dir, (uint32_t)r, 2), 5);
    }
    elastic_store *s = fixture_connect(&f);
    void *evidence = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_try_get(s, "ckpt/6/g1/diverged", &evidence, &len));
    char *text = strndup(evidence, len);
    expect_line(text, "TIER=disk");
    expect_line(text, "MAJORITY=0");
    expect_line(text, "MINORITY_RANKS=0,1");
    free(text);
    elastic_free(evidence);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

/* --on-divergence=warn: the step commits, the divergence is reported once. */
TEST_TIMEOUT(ckpt_divergence_warn_mode_commits_and_reports, 60)
{
    setenv(CHANNEL__ENV_ON_DIVERGENCE, "warn", 1);
    channel__sink_set(capture, NULL);
    store_fixture f;
    fixture_start(&f);
    rank_run runs[3];
    save_all(&f, runs, 3, 1, 7, 0, false);
    for (int r = 0; r < 3; r++)
        if (runs[r].rc != 0) FAIL("rank %d: %s", r, runs[r].error);
    for (uint32_t r = 0; r < 3; r++) ASSERT_EQ(latest_in(&f, runs[r].dir, r, 3), 7);
    ASSERT_EQ(told_count, 1); /* the rank that judged */
    expect_line(told[0], "MODE=warn");
    expect_line(told[0], "COMMITTED=1");
    expect_line(told[0], "MINORITY_RANKS=0");
    /* Training goes on: the next step commits too. */
    save_all(&f, runs, 3, 1, 8, UINT32_MAX, false);
    for (int r = 0; r < 3; r++)
        if (runs[r].rc != 0) FAIL("rank %d: step 8: %s", r, runs[r].error);
    channel__sink_clear(NULL);
    unsetenv(CHANNEL__ENV_ON_DIVERGENCE);
    elastic_store_server_close(f.server);
}

/* Equal bytes, one rank compressing (zstd) and the others not: the digests
 * are of the raw bytes, so they agree. */
TEST_TIMEOUT(ckpt_divergence_digests_agree_whatever_each_rank_compressed, 60)
{
    unsetenv(CHANNEL__ENV_ON_DIVERGENCE);
    store_fixture f;
    fixture_start(&f);
    static uint8_t zeros[3u << 20];
    pthread_t threads[3];
    rank_run runs[3];
    for (uint32_t r = 0; r < 3; r++) {
        runs[r] = (rank_run){ .f = &f,
                              .rank = r,
                              .world = 3,
                              .generation = 1,
                              .step = 3,
                              .compression = r == 1 ? ELASTIC_CKPT_ZSTD : ELASTIC_CKPT_NONE,
                              .data = zeros,
                              .len = sizeof zeros };
        snprintf(runs[r].dir, sizeof runs[r].dir, "%s/rank%u", test_tmpdir(), r);
        ASSERT_EQ(pthread_create(&threads[r], NULL, save_one, &runs[r]), 0);
    }
    for (uint32_t r = 0; r < 3; r++) pthread_join(threads[r], NULL);
    for (uint32_t r = 0; r < 3; r++)
        if (runs[r].rc != 0) FAIL("rank %u: %s", r, runs[r].error);
    ASSERT_EQ(latest_in(&f, runs[1].dir, 1, 3), 3);
    elastic_store_server_close(f.server);
}
