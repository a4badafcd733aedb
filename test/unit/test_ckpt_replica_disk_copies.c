/*
 * The disk copies a node counts in its restore-plan record (disk_copies.c):
 * the shared --memory-disk-dir and the disk tiers its workers announced
 * (ROOT/trainer-disk.<local rank>, channel.h), each counted once, newest
 * steps first under a bound; announcements that are not one well-formed line
 * are ignored.
 */
#include "channel/channel.h"
#include "replica/replica.h"
#include "support/ckpt_content.h"
#include "support/store_fixture.h"
#include "test.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static void dir_at(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", test_tmpdir(), name);
    mkdir(out, 0700);
}

/* Steps `first`..`last` of a one-rank job in `dir` (store mode when `store`). */
static void save_steps(const char *dir, elastic_store *store, uint64_t first, uint64_t last)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    o.generation = 1;
    o.store = store;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    for (uint64_t step = first; step <= last; step++) ASSERT_OK(ckpt_test_save(c, step, 0));
    elastic_ckpt_close(c);
}

static void write_file(const char *root, const char *name, const char *text)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", root, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

TEST(ckpt_replica_disk_copies_counts_each_tier_once_newest_steps_first)
{
    char root[4200], shared[4200], local[4200];
    dir_at(root, sizeof root, "tier");
    dir_at(shared, sizeof shared, "shared");
    dir_at(local, sizeof local, "local");
    store_fixture f;
    fixture_start(&f);
    elastic_store *store = fixture_connect(&f);
    save_steps(shared, NULL, 1, 3);
    save_steps(local, store, 7, 8);
    /* The trainer's shared tier announced by two ranks and also the agent's
     * --memory-disk-dir (not a resolved path): counted once. */
    ASSERT_OK(ckpt__announce_disk_to(root, 0, shared, true));
    ASSERT_OK(ckpt__announce_disk_to(root, 1, shared, true));
    ASSERT_OK(ckpt__announce_disk_to(root, 2, local, false));
    ckpt_copy *copies = NULL;
    size_t n = 0;
    char shared_unresolved[4300]; /* the agent's flag as an operator may write it */
    snprintf(shared_unresolved, sizeof shared_unresolved, "%s/./shared", test_tmpdir());
    ASSERT_OK(replica__disk_copies(root, shared_unresolved, 100, &copies, &n));
    ASSERT_EQ(n, 5);
    size_t shared_steps = 0, local_steps = 0;
    for (size_t i = 0; i < n; i++) {
        ASSERT_EQ(copies[i].tier, CKPT_TIER_DISK);
        ASSERT_EQ(copies[i].world, 1);
        if (copies[i].node == CKPT_NODE_SHARED) {
            shared_steps++;
            ASSERT(copies[i].step >= 1 && copies[i].step <= 3);
        } else {
            local_steps++;
            ASSERT_EQ(copies[i].node, REPLICA_NODE_SELF);
            ASSERT(copies[i].step == 7 || copies[i].step == 8);
        }
    }
    ASSERT_EQ(shared_steps, 3);
    ASSERT_EQ(local_steps, 2);
    free(copies);
    /* Under a bound of two copies: the newest steps of the first tier, whole. */
    ASSERT_OK(replica__disk_copies(root, shared, 2, &copies, &n));
    ASSERT_EQ(n, 2);
    ASSERT(copies[0].step == 3 && copies[1].step == 2);
    free(copies);
    /* A node-local tier counts only the shards in it: step 8's is gone. */
    char shard[4400], step_dir[4300];
    snprintf(step_dir, sizeof step_dir, "%s/step-%020d", local, 8);
    char name[64];
    ckpt__shard_name(0, 1, name, sizeof name);
    snprintf(shard, sizeof shard, "%s/%s", step_dir, name);
    ASSERT_EQ(unlink(shard), 0);
    ASSERT_OK(replica__disk_copies(root, NULL, 100, &copies, &n));
    local_steps = 0;
    for (size_t i = 0; i < n; i++)
        if (copies[i].node == REPLICA_NODE_SELF) {
            local_steps++;
            ASSERT_EQ(copies[i].step, 7);
        }
    ASSERT_EQ(local_steps, 1);
    free(copies);
    elastic_store_close(store);
    elastic_store_server_close(f.server);
}

TEST(ckpt_replica_disk_copies_ignores_announcements_that_are_not_one_line)
{
    char root[4200], shared[4200];
    dir_at(root, sizeof root, "tier");
    dir_at(shared, sizeof shared, "shared");
    save_steps(shared, NULL, 4, 4);
    char line[8500];
    snprintf(line, sizeof line, "shared %s", shared); /* no newline */
    write_file(root, CHANNEL__DISK_ANNOUNCE_PREFIX "0", line);
    write_file(root, CHANNEL__DISK_ANNOUNCE_PREFIX "1", "shared relative/dir\n");
    snprintf(line, sizeof line, "tape %s\n", shared);
    write_file(root, CHANNEL__DISK_ANNOUNCE_PREFIX "2", line);
    snprintf(line, sizeof line, "shared %s\nshared %s\n", shared, shared);
    write_file(root, CHANNEL__DISK_ANNOUNCE_PREFIX "3", line);
    snprintf(line, sizeof line, "shared %s\n", shared);
    write_file(root, CHANNEL__DISK_ANNOUNCE_PREFIX "4.tmp", line); /* half written */
    write_file(root, CHANNEL__DISK_ANNOUNCE_PREFIX "x", line);     /* not a local rank */
    ckpt_copy *copies = NULL;
    size_t n = 0;
    ASSERT_OK(replica__disk_copies(root, NULL, 100, &copies, &n));
    ASSERT_EQ(n, 0);
    free(copies);
    /* The same line, well formed, under a local rank's name: counted. */
    write_file(root, CHANNEL__DISK_ANNOUNCE_PREFIX "5", line);
    ASSERT_OK(replica__disk_copies(root, NULL, 100, &copies, &n));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(copies[0].step, 4);
    free(copies);
}
