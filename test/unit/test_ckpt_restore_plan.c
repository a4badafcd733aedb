/*
 * The restore planner: one step for the whole job, the newest whose every
 * shard has a usable copy among the live nodes; each shard read from the
 * cheapest copy (own memory, a peer's, disk); copies of a history the job
 * left never win.
 */
#include "ckpt/restore_plan.h"
#include "test.h"

static ckpt_copy mem(uint64_t step, uint64_t gen, uint32_t world, uint32_t rank, uint32_t node)
{
    return (ckpt_copy){ .step = step,
                        .generation = gen,
                        .world = world,
                        .rank = rank,
                        .node = node,
                        .tier = CKPT_TIER_MEMORY,
                        .bytes = 1000 };
}

static ckpt_copy disk(uint64_t step, uint64_t gen, uint32_t world, uint32_t rank)
{
    ckpt_copy c = mem(step, gen, world, rank, CKPT_NODE_SHARED);
    c.tier = CKPT_TIER_DISK;
    return c;
}

/* The memory-commit records the live nodes report (plan_of's input). */
static ckpt_step_ref committed_refs[8];
static size_t n_committed_refs;

static void committed(uint64_t step, uint64_t gen)
{
    committed_refs[n_committed_refs++] = (ckpt_step_ref){ step, gen };
}

static ckpt_plan plan_of(const ckpt_copy *copies, size_t n, const ckpt_generation_start *history,
                         size_t n_history, uint64_t generation)
{
    ckpt_plan_input in = { .copies = copies,
                           .n_copies = n,
                           .committed = committed_refs,
                           .n_committed = n_committed_refs,
                           .history = history,
                           .n_history = n_history,
                           .generation = generation };
    n_committed_refs = 0; /* each plan states its own */
    ckpt_plan plan;
    ASSERT_OK(ckpt__plan_restore(&in, &plan));
    return plan;
}

/* Three nodes, one rank each, R = 1: node n holds its own shard and node
 * (n+1)%3's replica... here: rank r's shard on node r and node (r+1)%3. */
static size_t ring_step(ckpt_copy *out, uint64_t step, uint64_t gen, const bool *live)
{
    size_t n = 0;
    for (uint32_t r = 0; r < 3; r++) {
        if (live[r]) out[n++] = mem(step, gen, 3, r, r);
        if (live[(r + 1) % 3]) out[n++] = mem(step, gen, 3, r, (r + 1) % 3);
    }
    return n;
}

TEST(ckpt_plan_picks_the_newest_complete_step_and_reads_own_memory_first)
{
    const bool live[3] = { true, true, true };
    ckpt_copy copies[32];
    size_t n = ring_step(copies, 8, 1, live);
    n += ring_step(copies + n, 9, 1, live);
    for (uint32_t r = 0; r < 3; r++) copies[n++] = disk(5, 1, 3, r);
    committed(8, 1);
    committed(9, 1);
    ckpt_plan plan = plan_of(copies, n, NULL, 0, 1);
    ASSERT(plan.committed);
    ASSERT(plan.found);
    ASSERT_EQ(plan.step, 9);
    ASSERT_EQ(plan.world, 3);
    ASSERT_EQ(plan.why[0], 0);
    ckpt_copy got[4];
    ckpt_source src[4];
    ASSERT_EQ(ckpt__plan_sources(&plan, 1, 1, got, src, 4), 2);
    ASSERT_EQ(src[0], CKPT_SOURCE_LOCAL);
    ASSERT_EQ(got[0].node, 1);
    ASSERT_EQ(src[1], CKPT_SOURCE_PEER);
    ASSERT_EQ(got[1].node, 2);
    /* A reader on a node holding no copy (a spare) gets the peers, node order. */
    ASSERT_EQ(ckpt__plan_sources(&plan, 1, 7, got, src, 4), 2);
    ASSERT_EQ(src[0], CKPT_SOURCE_PEER);
    ASSERT_EQ(got[0].node, 1);
    ASSERT_EQ(src[1], CKPT_SOURCE_PEER);
    ASSERT_EQ(ckpt__plan_sources(&plan, 3, 1, got, src, 4), 0); /* no such rank */
    ckpt__plan_free(&plan);
}

TEST(ckpt_plan_restores_a_lost_nodes_shards_from_their_peer_copies)
{
    const bool live[3] = { true, false, true }; /* node 1 SIGKILLed */
    ckpt_copy copies[16];
    size_t n = ring_step(copies, 12, 2, live);
    committed(12, 2);
    ckpt_plan plan = plan_of(copies, n, NULL, 0, 3);
    ASSERT(plan.found);
    ASSERT_EQ(plan.step, 12);
    ckpt_copy got[4];
    ckpt_source src[4];
    /* The spare (node 3) takes rank 1: its only copy is node 2's replica. */
    ASSERT_EQ(ckpt__plan_sources(&plan, 1, 3, got, src, 4), 1);
    ASSERT_EQ(src[0], CKPT_SOURCE_PEER);
    ASSERT_EQ(got[0].node, 2);
    ckpt__plan_free(&plan);
}

TEST(ckpt_plan_falls_back_to_disk_when_a_shard_has_no_live_copy_and_says_why)
{
    const bool live[3] = { true, false, false }; /* two nodes lost with R = 1 */
    ckpt_copy copies[16];
    size_t n = ring_step(copies, 30, 1, live);
    for (uint32_t r = 0; r < 3; r++) copies[n++] = disk(20, 1, 3, r);
    committed(30, 1);
    ckpt_plan plan = plan_of(copies, n, NULL, 0, 2);
    ASSERT(plan.found);
    ASSERT_EQ(plan.step, 20);
    ASSERT(strstr(plan.why, "step 30") != NULL);
    ASSERT(strstr(plan.why, "rank 1") != NULL);
    ckpt_copy got[4];
    ckpt_source src[4];
    ASSERT_EQ(ckpt__plan_sources(&plan, 0, 0, got, src, 4), 1);
    ASSERT_EQ(src[0], CKPT_SOURCE_DISK);
    ckpt__plan_free(&plan);
}

TEST(ckpt_plan_never_uses_copies_of_a_history_the_job_left)
{
    /* Generation 1 wrote steps up to 6; node 2 was cut off during
     * replication and kept step 7 of generation 1. Generation 2 (without
     * node 2) restored from step 5 and wrote up to step 6 again. Node 2 is
     * back for generation 3: its step 7 (and its generation-1 step 6) must
     * lose to generation 2's step 6. */
    ckpt_copy copies[32];
    size_t n = 0;
    for (uint32_t r = 0; r < 2; r++) copies[n++] = mem(7, 1, 2, r, 2);
    for (uint32_t r = 0; r < 2; r++) copies[n++] = mem(6, 1, 2, r, 2);
    for (uint32_t r = 0; r < 2; r++) copies[n++] = mem(6, 2, 2, r, r);
    for (uint32_t r = 0; r < 2; r++) copies[n++] = mem(5, 1, 2, r, r);
    const ckpt_generation_start history[] = {
        { .generation = 1, .restored = false },
        { .generation = 2, .restored = true, .restore_step = 5 },
    };
    committed(7, 1); /* what node 2 knew: a record of the history the job left */
    committed(6, 2);
    ckpt_plan plan = plan_of(copies, n, history, 2, 3);
    ASSERT(plan.found);
    ASSERT_EQ(plan.step, 6);
    ASSERT_EQ(plan.generation, 2);
    ASSERT(strstr(plan.why, "history the job left") != NULL);
    for (size_t i = 0; i < plan.n_copies; i++) ASSERT_NE(plan.copies[i].node, 2);
    ckpt__plan_free(&plan);
    /* Step 5 of generation 1 is still the job's: generation 2 restored from it. */
    ckpt_plan_input in = { .history = history, .n_history = 2, .generation = 3 };
    ASSERT(ckpt__plan_copy_usable(&in, 5, 1));
    ASSERT(!ckpt__plan_copy_usable(&in, 6, 1));
    ASSERT(!ckpt__plan_copy_usable(&in, 1, 4)); /* a generation the job has not reached */
}

TEST(ckpt_plan_never_mixes_shards_of_different_generations_or_world_sizes)
{
    ckpt_copy copies[] = {
        mem(4, 1, 2, 0, 0), mem(4, 2, 2, 1, 1), /* step 4: rank 0 of g1, rank 1 of g2 */
        mem(3, 1, 2, 0, 0), mem(3, 1, 3, 1, 1), /* step 3: world 2 vs world 3 */
        mem(2, 1, 2, 0, 0), mem(2, 1, 2, 1, 1),
    };
    const ckpt_generation_start history[] = {
        { .generation = 2, .restored = true, .restore_step = 4 }
    };
    committed(4, 2);
    committed(3, 1);
    committed(2, 1);
    ckpt_plan plan = plan_of(copies, sizeof copies / sizeof copies[0], history, 1, 2);
    ASSERT(plan.found);
    ASSERT_EQ(plan.step, 2);
    ASSERT(strstr(plan.why, "4 newer (step, generation, world) candidates incomplete") != NULL);
    ckpt__plan_free(&plan);
}

TEST(ckpt_plan_without_any_complete_step_finds_nothing_and_says_so)
{
    ckpt_copy copies[] = { mem(9, 1, 2, 0, 0),
                           { .world = 0 }, /* malformed: ignored */
                           { .step = 1, .world = 2, .rank = 5, .tier = CKPT_TIER_MEMORY } };
    ckpt_plan plan = plan_of(copies, sizeof copies / sizeof copies[0], NULL, 0, 1);
    ASSERT(!plan.found);
    ASSERT(strstr(plan.why, "no step has a copy of every shard") != NULL);
    ckpt_copy got[2];
    ASSERT_EQ(ckpt__plan_sources(&plan, 0, 0, got, NULL, 2), 0);
    ckpt__plan_free(&plan);
    ckpt_plan empty = plan_of(NULL, 0, NULL, 0, 1);
    ASSERT(!empty.found);
    ckpt__plan_free(&empty);
}

/* The memory-commit record: a step complete among the live nodes but never
 * memory-committed (its node's copies were not all placed when the fault
 * came) loses to the last committed step; it is restored only when no
 * committed step is complete. */
TEST(ckpt_plan_prefers_the_last_memory_committed_step_over_a_newer_unreplicated_one)
{
    const bool live[3] = { true, true, true };
    ckpt_copy copies[32];
    size_t n = ring_step(copies, 8, 1, live);
    for (uint32_t r = 0; r < 3; r++) copies[n++] = mem(9, 1, 3, r, r); /* own copies only */
    committed(8, 1);
    ckpt_plan plan = plan_of(copies, n, NULL, 0, 2);
    ASSERT(plan.found);
    ASSERT(plan.committed);
    ASSERT_EQ(plan.step, 8);
    ASSERT(strstr(plan.why, "step 9") != NULL);
    ASSERT(strstr(plan.why, "not memory-committed") != NULL);
    ckpt__plan_free(&plan);
    /* A disk step is committed too: it wins over a newer step without a record. */
    n = 0;
    for (uint32_t r = 0; r < 3; r++) copies[n++] = mem(9, 1, 3, r, r);
    for (uint32_t r = 0; r < 3; r++) copies[n++] = disk(5, 1, 3, r);
    plan = plan_of(copies, n, NULL, 0, 2);
    ASSERT(plan.found);
    ASSERT(plan.committed);
    ASSERT_EQ(plan.step, 5);
    ckpt__plan_free(&plan);
    /* Nothing committed is complete: the newest complete step, said so. */
    n = 0;
    for (uint32_t r = 0; r < 3; r++) copies[n++] = mem(9, 1, 3, r, r);
    copies[n++] = mem(8, 1, 3, 0, 0); /* step 8 committed, but rank 1's and 2's copies are gone */
    committed(8, 1);
    plan = plan_of(copies, n, NULL, 0, 2);
    ASSERT(plan.found);
    ASSERT(!plan.committed);
    ASSERT_EQ(plan.step, 9);
    ASSERT(strstr(plan.why, "no committed step is complete") != NULL);
    ckpt__plan_free(&plan);
}
