/*
 * One restore step for the job through the store: three nodes replicate
 * their ranks' shards (R = 1); one is lost and a spare takes its rank; every
 * node's sync agrees on the step, the survivors restore from local memory
 * and the spare from the peer that holds the lost node's copy.
 */
#include "channel/channel.h"
#include "replica/replica.h"
#include "support/ckpt_content.h"
#include "support/store_fixture.h"
#include "test.h"

#include "common/clock.h"

#include <dirent.h>
#include <sys/stat.h>

#define TOKEN "sync-test-token"

typedef struct node {
    char name[32], root[4096];
    replica_service *service;
    elastic_store *store;
    /* this generation */
    int group_rank, world_nodes;
    uint64_t generation;
    replica_sync_out out;
    int rc;
    pthread_t thread;
} node;

static void node_start(node *n, const char *name, const store_fixture *f)
{
    snprintf(n->name, sizeof n->name, "%s", name);
    snprintf(n->root, sizeof n->root, "%s/%s", test_tmpdir(), name);
    replica_service_opts o = { .root = n->root,
                               .limit = 64ull << 20,
                               .token = TOKEN,
                               .listen_host = "127.0.0.1",
                               .replicas = 1 };
    ASSERT_OK(replica__service_start(&o, &n->service));
    n->store = fixture_connect(f);
}

static void *sync_main(void *arg)
{
    node *n = arg;
    replica_sync_in in = { .service = n->service,
                           .node_name = n->name,
                           .host = "127.0.0.1",
                           .generation = n->generation,
                           .group_rank = n->group_rank,
                           .group_world_size = n->world_nodes,
                           .first_rank = (uint32_t)n->group_rank,
                           .local_ranks = 1,
                           .job_world = (uint32_t)n->world_nodes,
                           .timeout_ms = test_scaled_ms(20000) };
    n->rc = replica__sync_generation(n->store, &in, &n->out);
    return NULL;
}

/* Every node of the generation syncs at once (each waits for the others' records). */
static void sync_all(node **nodes, int count, uint64_t generation)
{
    for (int i = 0; i < count; i++) {
        nodes[i]->group_rank = i;
        nodes[i]->world_nodes = count;
        nodes[i]->generation = generation;
        free(nodes[i]->out.ranks);
        ASSERT_EQ(pthread_create(&nodes[i]->thread, NULL, sync_main, nodes[i]), 0);
    }
    for (int i = 0; i < count; i++) {
        pthread_join(nodes[i]->thread, NULL);
        if (nodes[i]->rc != 0) FAIL("%s: %s", nodes[i]->name, elastic_err_name(nodes[i]->rc));
    }
}

/* A node leaves (lost, or the test ends): its result, service and store go. */
static void node_stop(node *n)
{
    free(n->out.ranks);
    n->out.ranks = NULL;
    replica__service_stop(n->service);
    elastic_store_close(n->store);
}

/* The test's end: every node still running, then the job store. */
static void stop_all(node **nodes, int count, store_fixture *f)
{
    for (int i = 0; i < count; i++) node_stop(nodes[i]);
    elastic_store_server_close(f->server);
}

typedef struct saver {
    node *n;
    uint64_t step, generation;
    uint32_t rank, world;
    const char *dir; /* NULL: the node's memory tier */
    int rc;
} saver;

static void *save_main(void *arg)
{
    saver *s = arg;
    char own[4200];
    if (s->dir != NULL)
        snprintf(own, sizeof own, "%s", s->dir);
    else
        snprintf(own, sizeof own, "%s/own", s->n->root);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    o.rank = s->rank;
    o.world = s->world;
    o.generation = s->generation;
    o.store = s->n->store;
    o.commit_timeout_ms = test_scaled_ms(20000);
    elastic_ckpt *c;
    s->rc = elastic_ckpt_open(own, &o, &c);
    if (s->rc == 0) {
        s->rc = ckpt_test_save(c, s->step, s->rank);
        elastic_ckpt_close(c);
    }
    return NULL;
}

TEST(ckpt_replica_sync_restores_a_lost_nodes_rank_on_the_spare_from_its_peer_copy)
{
    store_fixture f;
    fixture_start(&f);
    node a = { 0 }, b = { 0 }, c = { 0 }, spare = { 0 };
    node_start(&a, "node-a", &f);
    node_start(&b, "node-b", &f);
    node_start(&c, "node-c", &f);
    node *gen1[] = { &a, &b, &c };
    sync_all(gen1, 3, 1);
    ASSERT(!a.out.planned); /* nothing saved yet */
    /* Each node's rank saves step 5 (committed through the store), replicated. */
    saver savers[3];
    pthread_t threads[3];
    for (uint32_t r = 0; r < 3; r++) {
        savers[r] = (saver){ .n = gen1[r], .step = 5, .generation = 1, .rank = r, .world = 3 };
        ASSERT_EQ(pthread_create(&threads[r], NULL, save_main, &savers[r]), 0);
    }
    for (int r = 0; r < 3; r++) {
        pthread_join(threads[r], NULL);
        ASSERT_OK(savers[r].rc);
        replica__service_kick(gen1[r]->service);
        ASSERT_OK(replica__service_wait_replicated(gen1[r]->service, 5,
                                                   elastic__deadline_ms(test_scaled_ms(20000))));
    }
    /* node-b is lost; the spare takes its place (group rank 1, rank 1). */
    node_stop(&b);
    node_start(&spare, "node-spare", &f);
    node *gen2[] = { &a, &spare, &c };
    sync_all(gen2, 3, 2);
    for (int i = 0; i < 3; i++) {
        ASSERT(gen2[i]->out.planned);
        ASSERT_EQ(gen2[i]->out.step, 5);
    }
    ASSERT_EQ(a.out.ranks[0].source, CHANNEL__RESTORE_LOCAL);
    ASSERT_EQ(c.out.ranks[0].source, CHANNEL__RESTORE_LOCAL);
    ASSERT_EQ(spare.out.ranks[0].source, CHANNEL__RESTORE_PEER);
    /* node-b's copy went to the next node by name: node-c. */
    ASSERT_STR_EQ(spare.out.ranks[0].node, "node-c");
    /* The spare reads rank 1's shard from its own tier, every byte right. */
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.shared_storage = 0;
    char own[4200];
    snprintf(own, sizeof own, "%s/own", spare.root);
    elastic_ckpt *ck;
    ASSERT_OK(elastic_ckpt_open(own, &o, &ck));
    char why[512];
    if (ckpt_test_check(ck, 5, 1, why, sizeof why) != 0) FAIL("spare: %s", why);
    elastic_ckpt_close(ck);
    /* The history records generation 2's restore step: a later plan is fenced by it. */
    void *value;
    size_t len;
    ASSERT_OK(elastic_store_try_get(a.store, "memtier/history", &value, &len));
    ASSERT(memmem(value, len, "2 1 5\n", 6) != NULL);
    elastic_free(value);
    node *all[] = { &a, &c, &spare };
    stop_all(all, 3, &f);
}

/* Every node's rank saves `step` at once (a global commit through the store). */
static void save_on(node **nodes, uint32_t count, uint64_t step, uint64_t generation)
{
    saver savers[3];
    pthread_t threads[3];
    for (uint32_t r = 0; r < count; r++) {
        savers[r] = (saver){
            .n = nodes[r], .step = step, .generation = generation, .rank = r, .world = count
        };
        ASSERT_EQ(pthread_create(&threads[r], NULL, save_main, &savers[r]), 0);
    }
    for (uint32_t r = 0; r < count; r++) {
        pthread_join(threads[r], NULL);
        ASSERT_OK(savers[r].rc);
        replica__service_kick(nodes[r]->service);
    }
}

static void save_all(node **nodes, uint64_t step, uint64_t generation)
{
    save_on(nodes, 3, step, generation);
}

/* node-a, node-b and node-c join generation 1, and each one's rank saves
 * step 5, which becomes memory-committed job-wide (every node knows it). */
static void start_with_step_5_committed(const store_fixture *f, node **three)
{
    static const char *const names[] = { "node-a", "node-b", "node-c" };
    for (int i = 0; i < 3; i++) node_start(three[i], names[i], f);
    sync_all(three, 3, 1);
    save_all(three, 5, 1);
    for (int i = 0; i < 3; i++)
        ASSERT_OK(replica__service_wait_committed(three[i]->service, 5,
                                                  elastic__deadline_ms(test_scaled_ms(20000))));
}

/* node `from`'s copies go nowhere from now on: its target's address is a closed port. */
static void cut_replication(node *const *order, int from)
{
    replica_peer peers[3];
    for (int i = 0; i < 3; i++) {
        peers[i] = (replica_peer){ .port = replica__service_port(order[i]->service) };
        snprintf(peers[i].name, sizeof peers[i].name, "%s", order[i]->name);
        snprintf(peers[i].host, sizeof peers[i].host, "127.0.0.1");
    }
    peers[(from + 1) % 3].port = 1; /* its ring successor by name */
    ASSERT_OK(replica__service_set_peers(order[from]->service, peers, 3, (size_t)from));
}

static bool own_step_held(const node *n, uint64_t step)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/own/step-%020llu/COMMIT", n->root, (unsigned long long)step);
    struct stat st;
    return stat(path, &st) == 0;
}

/* The generation of the commit record of `step` in the node's own tree. */
static uint64_t commit_generation(const node *n, uint64_t step)
{
    char own[4200];
    snprintf(own, sizeof own, "%s/own", n->root);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.store = n->store;
    elastic_ckpt *ck;
    uint64_t generation = 0;
    if (elastic_ckpt_open(own, &o, &ck) != 0) return 0;
    if (elastic_ckpt_step_info(ck, step, NULL, &generation) != 0) generation = 0;
    elastic_ckpt_close(ck);
    return generation;
}

/* The memory-commit record (K = 2): node-b is lost in the middle of
 * replicating step 6 (its copies cannot reach node-c), after every node
 * committed step 6 locally. Without the record each tier keeps only its
 * newest step and no step would have every shard somewhere; with it step 5,
 * the last memory-committed one, is kept everywhere and the whole job
 * restores it, the spare from node-c's copy of node-b's shard. */
TEST(ckpt_replica_sync_node_lost_mid_replication_restores_the_last_memory_committed_step)
{
    store_fixture f;
    fixture_start(&f);
    node a = { 0 }, b = { 0 }, c = { 0 }, spare = { 0 };
    node *gen1[] = { &a, &b, &c };
    start_with_step_5_committed(&f, gen1);
    replica_service_stats stats;
    replica__service_stats(a.service, &stats);
    ASSERT_EQ(stats.committed_step, 5);
    ASSERT_EQ(stats.committed_generation, 1);
    ASSERT_EQ(stats.targets, 1);
    /* node-b's copies now go nowhere. */
    cut_replication(gen1, 1);
    save_all(gen1, 6, 1);
    /* node-a and node-c hold step 6 at their targets; node-b never will. */
    ASSERT_OK(replica__service_wait_replicated(a.service, 6,
                                               elastic__deadline_ms(test_scaled_ms(20000))));
    ASSERT_OK(replica__service_wait_replicated(c.service, 6,
                                               elastic__deadline_ms(test_scaled_ms(20000))));
    replica__service_stats(a.service, &stats);
    ASSERT_EQ(stats.committed_step, 5); /* step 6 is not memory-committed */
    /* K = 2 keeps one committed step of its own: step 6; step 5 stays, pinned. */
    ASSERT(own_step_held(&a, 6));
    ASSERT(own_step_held(&a, 5));
    ASSERT(own_step_held(&c, 5));
    /* node-b is lost; the spare takes its place. */
    node_stop(&b);
    node_start(&spare, "node-spare", &f);
    node *gen2[] = { &a, &spare, &c };
    sync_all(gen2, 3, 2);
    for (int i = 0; i < 3; i++) {
        ASSERT(gen2[i]->out.planned);
        ASSERT(gen2[i]->out.committed);
        ASSERT_EQ(gen2[i]->out.step, 5);
    }
    /* Step 6 is complete nowhere (rank 1's copy died with node-b). */
    ASSERT(strstr(a.out.why, "step 6") != NULL);
    ASSERT(strstr(a.out.why, "rank 1") != NULL);
    ASSERT_EQ(a.out.ranks[0].source, CHANNEL__RESTORE_LOCAL);
    ASSERT_EQ(spare.out.ranks[0].source, CHANNEL__RESTORE_PEER);
    ASSERT_STR_EQ(spare.out.ranks[0].node, "node-c");
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.shared_storage = 0;
    char own[4200];
    snprintf(own, sizeof own, "%s/own", spare.root);
    elastic_ckpt *ck;
    ASSERT_OK(elastic_ckpt_open(own, &o, &ck));
    char why[512];
    if (ckpt_test_check(ck, 5, 1, why, sizeof why) != 0) FAIL("spare: %s", why);
    elastic_ckpt_close(ck);
    /* Generation 2 starts from step 5, committed: every node knows it. */
    replica__service_stats(spare.service, &stats);
    ASSERT_EQ(stats.committed_step, 5);
    node *all[] = { &a, &c, &spare };
    stop_all(all, 3, &f);
}

/* After a world-size change the departed ranks' shards are still readable:
 * node-c leaves for good (3 ranks to 2) and both survivors' own tiers get
 * rank 2's shard of the restore step, from the copy one of them holds, so a
 * resharding reader (read_shard of a rank no longer in the world) finds it. */
TEST(ckpt_replica_sync_departed_ranks_shards_stay_readable_after_the_world_shrinks)
{
    store_fixture f;
    fixture_start(&f);
    node a = { 0 }, b = { 0 }, c = { 0 };
    node *gen1[] = { &a, &b, &c };
    start_with_step_5_committed(&f, gen1);
    node_stop(&c);
    node *gen2[] = { &a, &b };
    sync_all(gen2, 2, 2);
    for (int i = 0; i < 2; i++) {
        ASSERT(gen2[i]->out.planned);
        ASSERT_EQ(gen2[i]->out.step, 5);
        /* A reader of the new world (2 ranks) reads the departed rank 2. */
        elastic_ckpt_opts o;
        elastic_ckpt_opts_init(&o, sizeof o);
        o.shared_storage = 0;
        o.rank = (uint32_t)i;
        o.world = 2;
        o.generation = 2;
        o.store = gen2[i]->store;
        char own[4200], why[512];
        snprintf(own, sizeof own, "%s/own", gen2[i]->root);
        elastic_ckpt *ck;
        ASSERT_OK(elastic_ckpt_open(own, &o, &ck));
        if (ckpt_test_check(ck, 5, 2, why, sizeof why) != 0) FAIL("%s: %s", gen2[i]->name, why);
        if (ckpt_test_check(ck, 5, (uint32_t)i, why, sizeof why) != 0)
            FAIL("%s: %s", gen2[i]->name, why);
        elastic_ckpt_close(ck);
    }
    stop_all(gen2, 2, &f);
}

/* A partition during replication: node-c is cut off while step 6 is being
 * replicated (its copy never arrives, so step 6 is not memory-committed);
 * the job goes on without it from step 5 and saves step 6 again. node-c is
 * back for generation 3 with its own generation-1 step 6: that copy belongs
 * to a history the job left, so the plan ignores it (and says so) and
 * node-c's tier drops it, where a worker restoring on its own would find it. */
TEST(ckpt_replica_sync_a_fenced_nodes_copies_are_never_used)
{
    store_fixture f;
    fixture_start(&f);
    node a = { 0 }, b = { 0 }, c = { 0 };
    node *gen1[] = { &a, &b, &c };
    start_with_step_5_committed(&f, gen1);
    cut_replication(gen1, 2);
    save_all(gen1, 6, 1);
    ASSERT(own_step_held(&c, 6));
    /* Generation 2 without node-c (cut off): step 6 lacks rank 2's copy. */
    node *gen2[] = { &a, &b };
    sync_all(gen2, 2, 2);
    ASSERT(a.out.planned);
    ASSERT_EQ(a.out.step, 5);
    save_on(gen2, 2, 6, 2);
    for (int i = 0; i < 2; i++)
        ASSERT_OK(replica__service_wait_committed(gen2[i]->service, 6,
                                                  elastic__deadline_ms(test_scaled_ms(20000))));
    /* node-c is back. */
    node *gen3[] = { &a, &b, &c };
    sync_all(gen3, 3, 3);
    for (int i = 0; i < 3; i++) {
        ASSERT(gen3[i]->out.planned);
        ASSERT_EQ(gen3[i]->out.step, 6);
    }
    if (strstr(c.out.why, "history the job left ignored") == NULL) FAIL("why: %s", c.out.why);
    /* Generation 2's step 6 has two ranks: node-c's rank 2 has no shard in
     * it, and is told the same step, with another rank's shard staged. */
    ASSERT(c.out.ranks[0].beyond_step);
    ASSERT_EQ(c.out.ranks[0].source, CHANNEL__RESTORE_PEER);
    /* node-c's generation-1 step 6 is gone from its tier: the step 6 it
     * holds now is generation 2's, staged for rank 2. */
    ASSERT(own_step_held(&c, 6));
    ASSERT_EQ(commit_generation(&c, 6), 2);
    stop_all(gen3, 3, &f);
}

/* The job grows from two nodes to three: the new node's rank 2 has no shard
 * in the restore step, yet it gets the very step the others restore (not
 * whatever its own tier or the disk holds), with a shard of the step staged
 * in its tier from a peer for the step's replicated part. */
TEST(ckpt_replica_sync_a_rank_the_job_grew_by_gets_the_same_step)
{
    store_fixture f;
    fixture_start(&f);
    node a = { 0 }, b = { 0 }, c = { 0 };
    node_start(&a, "node-a", &f);
    node_start(&b, "node-b", &f);
    node *gen1[] = { &a, &b };
    sync_all(gen1, 2, 1);
    save_on(gen1, 2, 4, 1);
    save_on(gen1, 2, 5, 1);
    for (int i = 0; i < 2; i++)
        ASSERT_OK(replica__service_wait_committed(gen1[i]->service, 5,
                                                  elastic__deadline_ms(test_scaled_ms(20000))));
    node_start(&c, "node-c", &f);
    node *gen2[] = { &a, &b, &c };
    sync_all(gen2, 3, 2);
    for (int i = 0; i < 3; i++) {
        ASSERT(gen2[i]->out.planned);
        ASSERT_EQ(gen2[i]->out.step, 5);
        ASSERT(gen2[i]->out.ranks[0].source != CHANNEL__RESTORE_NONE);
    }
    ASSERT(!a.out.ranks[0].beyond_step);
    ASSERT_EQ(a.out.ranks[0].source, CHANNEL__RESTORE_LOCAL);
    ASSERT(c.out.ranks[0].beyond_step);
    ASSERT_EQ(c.out.ranks[0].source, CHANNEL__RESTORE_PEER);
    /* Rank 2 mod 2 = shard 0, fetched from the node that holds it. */
    ASSERT(strcmp(c.out.ranks[0].node, "node-a") == 0 ||
           strcmp(c.out.ranks[0].node, "node-b") == 0);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.rank = 2;
    o.world = 3;
    o.generation = 2;
    o.store = c.store;
    char own[4200], why[512];
    snprintf(own, sizeof own, "%s/own", c.root);
    elastic_ckpt *ck;
    ASSERT_OK(elastic_ckpt_open(own, &o, &ck));
    uint32_t world = 0;
    ASSERT_OK(elastic_ckpt_step_info(ck, 5, &world, NULL));
    ASSERT_EQ(world, 2); /* the worker sees it has no shard of its own */
    if (ckpt_test_check(ck, 5, 0, why, sizeof why) != 0) FAIL("node-c: %s", why);
    elastic_ckpt_close(ck);
    stop_all(gen2, 3, &f);
}

/* Each node's rank saves `step` in store mode to its node-local disk
 * directory (ROOT-disk: no other node sees it) and announces it, as a worker
 * under the agent does when it opens its disk checkpoint (channel.h). */
static void save_on_local_disk(node **nodes, uint32_t count, uint64_t step, uint64_t generation,
                               char (*dirs)[4200])
{
    saver savers[3];
    pthread_t threads[3];
    for (uint32_t r = 0; r < count; r++) {
        snprintf(dirs[r], sizeof dirs[r], "%s-disk", nodes[r]->root);
        savers[r] = (saver){ .n = nodes[r],
                             .step = step,
                             .generation = generation,
                             .rank = r,
                             .world = count,
                             .dir = dirs[r] };
        ASSERT_EQ(pthread_create(&threads[r], NULL, save_main, &savers[r]), 0);
    }
    for (uint32_t r = 0; r < count; r++) {
        pthread_join(threads[r], NULL);
        ASSERT_OK(savers[r].rc);
        ASSERT_OK(ckpt__announce_disk_to(nodes[r]->root, 0, dirs[r], false));
    }
}

/* The planner weighs the trainer's store-mode disk checkpoint: step 5 is
 * memory-committed, then every rank commits step 8 on its node-local disk
 * (the commit record in the store). The job restores step 8 from disk on
 * every node, not the older memory step (restoring step 5 would redo the
 * work and then fail to save step 8 again). */
TEST(ckpt_replica_sync_a_newer_store_mode_disk_step_wins_over_memory)
{
    store_fixture f;
    fixture_start(&f);
    node a = { 0 }, b = { 0 }, c = { 0 };
    node *gen1[] = { &a, &b, &c };
    start_with_step_5_committed(&f, gen1);
    char dirs[3][4200];
    save_on_local_disk(gen1, 3, 8, 1, dirs);
    sync_all(gen1, 3, 2);
    for (int i = 0; i < 3; i++) {
        ASSERT(gen1[i]->out.planned);
        ASSERT(gen1[i]->out.committed);
        ASSERT_EQ(gen1[i]->out.step, 8);
        ASSERT_EQ(gen1[i]->out.ranks[0].source, CHANNEL__RESTORE_DISK);
    }
    stop_all(gen1, 3, &f);
}

/* A node-local disk copy counts only for the node that holds it and runs
 * its rank: node-b is lost with its disk, and the spare that takes rank 1
 * cannot read node-b's step 8; node-a's and node-c's shards of step 8 do
 * not make it complete. The job restores step 5 from memory, the spare from
 * its peer copy, and the plan names the rank step 8 lacks. */
TEST(ckpt_replica_sync_a_lost_nodes_local_disk_step_is_not_counted)
{
    store_fixture f;
    fixture_start(&f);
    node a = { 0 }, b = { 0 }, c = { 0 }, spare = { 0 };
    node *gen1[] = { &a, &b, &c };
    start_with_step_5_committed(&f, gen1);
    char dirs[3][4200];
    save_on_local_disk(gen1, 3, 8, 1, dirs);
    node_stop(&b);
    node_start(&spare, "node-spare", &f);
    node *gen2[] = { &a, &spare, &c };
    sync_all(gen2, 3, 2);
    for (int i = 0; i < 3; i++) {
        ASSERT(gen2[i]->out.planned);
        ASSERT_EQ(gen2[i]->out.step, 5);
    }
    if (strstr(a.out.why, "step 8") == NULL || strstr(a.out.why, "rank 1") == NULL)
        FAIL("why: %s", a.out.why);
    ASSERT_EQ(a.out.ranks[0].source, CHANNEL__RESTORE_LOCAL);
    ASSERT_EQ(spare.out.ranks[0].source, CHANNEL__RESTORE_PEER);
    node *all[] = { &a, &c, &spare };
    stop_all(all, 3, &f);
}

/* Ranks move between nodes (the rendezvous ordered them anew): each node's
 * local disk now holds another rank's shard than the one it runs, so no
 * node can read its rank's step 8, and the plan does not count those
 * copies; the job restores step 5 from memory, none of it from disk. */
TEST(ckpt_replica_sync_a_local_disk_copy_counts_only_for_the_node_running_its_rank)
{
    store_fixture f;
    fixture_start(&f);
    node a = { 0 }, b = { 0 }, c = { 0 };
    node *gen1[] = { &a, &b, &c };
    start_with_step_5_committed(&f, gen1);
    char dirs[3][4200];
    save_on_local_disk(gen1, 3, 8, 1, dirs);
    node *gen2[] = { &c, &a, &b }; /* node-c runs rank 0, node-a rank 1, node-b rank 2 */
    sync_all(gen2, 3, 2);
    for (int i = 0; i < 3; i++) {
        ASSERT(gen2[i]->out.planned);
        ASSERT_EQ(gen2[i]->out.step, 5);
        ASSERT(gen2[i]->out.ranks[0].source != CHANNEL__RESTORE_DISK);
        ASSERT(gen2[i]->out.ranks[0].source != CHANNEL__RESTORE_NONE);
    }
    stop_all(gen2, 3, &f);
}

typedef struct forger {
    elastic_store *store;
    char dir[4200];
    uint32_t rank;
    int rc;
} forger;

/* A rank of another job saves step 5 of generation 1 (world 3) with the
 * blobs of step 99: a valid shard and commit record, just not the job's. */
static void *forge_main(void *arg)
{
    forger *g = arg;
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    o.rank = g->rank;
    o.world = 3;
    o.generation = 1;
    o.store = g->store;
    o.commit_timeout_ms = test_scaled_ms(20000);
    elastic_ckpt *c;
    elastic_ckpt_txn *txn = NULL;
    g->rc = elastic_ckpt_open(g->dir, &o, &c);
    if (g->rc != 0) return NULL;
    g->rc = elastic_ckpt_begin(c, 5, &txn);
    if (g->rc == 0) g->rc = ckpt_test_put_all(txn, 99, g->rank);
    if (g->rc == 0)
        g->rc = elastic_ckpt_commit(txn);
    else if (txn != NULL)
        elastic_ckpt_abort(txn);
    elastic_ckpt_close(c);
    return NULL;
}

/* Copies every file of `from` into `to` under the same names (replacing). */
static void copy_dir_files(const char *from, const char *to)
{
    DIR *d = opendir(from);
    ASSERT(d != NULL);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char src[4800], dst[4800];
        snprintf(src, sizeof src, "%s/%s", from, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, e->d_name);
        FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
        ASSERT(in != NULL && out != NULL);
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0) ASSERT_EQ(fwrite(buf, 1, n, out), n);
        fclose(in);
        fclose(out);
    }
    closedir(d);
}

/* node-c holds node-b's copy of step 5, memory-committed. Someone replaces
 * it with a forged shard and a forged record that vouch for each other
 * (another job's valid step 5), and node-c's own record of the step is gone,
 * so node-c serves the forged record. node-b is lost; the spare, which has
 * no record of its own, restores rank 1: the copy's record is not the one
 * node-a published with the memory commit (its SHA-256), so it is refused,
 * and the forged bytes never reach the spare's tier (before, the spare took
 * them: the forged shard verified against the forged record). */
TEST(ckpt_replica_sync_a_copy_beside_a_forged_record_is_refused_on_a_node_without_its_own)
{
    store_fixture f;
    fixture_start(&f);
    node a = { 0 }, b = { 0 }, c = { 0 }, spare = { 0 };
    node *gen1[] = { &a, &b, &c };
    start_with_step_5_committed(&f, gen1);
    for (int i = 0; i < 3; i++)
        ASSERT_OK(replica__service_wait_replicated(gen1[i]->service, 5,
                                                   elastic__deadline_ms(test_scaled_ms(20000))));
    /* The forgery: another job's three ranks save "step 5". */
    store_fixture other;
    fixture_start(&other);
    forger forgers[3];
    pthread_t threads[3];
    for (uint32_t r = 0; r < 3; r++) {
        forgers[r] = (forger){ .store = fixture_connect(&other), .rank = r };
        snprintf(forgers[r].dir, sizeof forgers[r].dir, "%s/forged-%u", test_tmpdir(), r);
        ASSERT_EQ(pthread_create(&threads[r], NULL, forge_main, &forgers[r]), 0);
    }
    for (int r = 0; r < 3; r++) {
        pthread_join(threads[r], NULL);
        ASSERT_OK(forgers[r].rc);
        elastic_store_close(forgers[r].store);
    }
    char forged[4300], held[4400];
    snprintf(forged, sizeof forged, "%s/step-%020d", forgers[1].dir, 5);
    snprintf(held, sizeof held, "%s/peer/node-b/step-%020d", c.root, 5);
    copy_dir_files(forged, held);
    /* node-c's own record of step 5 is gone, so the record it serves for
     * step 5 is the forged one beside the forged shard. */
    char own_record[4400];
    snprintf(own_record, sizeof own_record, "%s/own/step-%020d/COMMIT", c.root, 5);
    ASSERT_OK(unlink(own_record));
    node_stop(&b);
    node_start(&spare, "node-spare", &f);
    node *gen2[] = { &a, &spare, &c };
    sync_all(gen2, 3, 2);
    ASSERT(spare.out.planned);
    ASSERT_EQ(spare.out.step, 5);
    ASSERT_EQ(a.out.ranks[0].source, CHANNEL__RESTORE_LOCAL);
    /* Rank 1's only copy was the forgery: refused, none staged. */
    ASSERT_EQ(spare.out.ranks[0].source, CHANNEL__RESTORE_NONE);
    char own[4300];
    snprintf(own, sizeof own, "%s/own", spare.root);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.shared_storage = 0;
    elastic_ckpt *ck;
    ASSERT_OK(elastic_ckpt_open(own, &o, &ck));
    uint64_t latest = 0;
    ASSERT_EQ(elastic_ckpt_latest(ck, &latest), ELASTIC_ENOTFOUND);
    elastic_ckpt_close(ck);
    node *all[] = { &a, &c, &spare };
    stop_all(all, 3, &f);
    /* Closed last: libuv closes its descriptors unseen by ThreadSanitizer,
     * whose numbers the services' threads would reuse. */
    elastic_store_server_close(other.server);
}
