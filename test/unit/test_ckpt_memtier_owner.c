/*
 * No other local user steers the memory tier's creation or removal: the
 * tier is used as mkdtemp made it (no remove-and-create gap), a directory
 * planted by another user (here `nobody`, through setpriv) is refused and
 * left untouched with whatever it points to, and removal walks by
 * descriptor, never through a symlink, even one swapped in while it runs.
 */
#include "ckpt/memtier.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A sticky, world-writable directory like /dev/shm, with a victim: a
 * directory `nobody` cannot write, holding a file. */
typedef struct arena {
    char shm[600], victim[700], victim_file[800];
} arena;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static char arena_shm[600];

static void arena_remove(void)
{
    if (arena_shm[0] != '\0') nftw(arena_shm, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void arena_make(arena *a)
{
    /* Beside the real tiers: the runner's directory is closed to `nobody`. */
    snprintf(a->shm, sizeof a->shm, "/dev/shm/elastic-test-arena-XXXXXX");
    ASSERT(mkdtemp(a->shm) != NULL);
    snprintf(arena_shm, sizeof arena_shm, "%s", a->shm);
    atexit(arena_remove); /* each test runs in a process of its own */
    ASSERT_OK(chmod(a->shm, 01777));
    snprintf(a->victim, sizeof a->victim, "%s/victim", test_tmpdir());
    ASSERT_OK(mkdir(a->victim, 0755));
    snprintf(a->victim_file, sizeof a->victim_file, "%s/precious", a->victim);
    int fd = open(a->victim_file, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT(fd >= 0);
    close(fd);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Runs `script` with sh as uid/gid nobody; its exit status. */
static int as_nobody(const char *script)
{
    if (access("/usr/bin/setpriv", X_OK) != 0) SKIP("setpriv is not installed");
    if (geteuid() != 0) SKIP("needs root to act as nobody");
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        execl("/usr/bin/setpriv", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
              "/bin/sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST(ckpt_memory_tier_is_used_as_mkdtemp_made_it)
{
    char root[700];
    snprintf(root, sizeof root, "%s/elastic-mem-XXXXXX", test_tmpdir());
    ASSERT(mkdtemp(root) != NULL);
    struct stat before, after;
    ASSERT_OK(stat(root, &before));
    ASSERT_OK(ckpt__mem_tier_create(root, 1u << 20, 2));
    ASSERT_OK(stat(root, &after));
    /* The same directory: never removed and made again (a gap another user could take). */
    ASSERT_EQ(after.st_ino, before.st_ino);
    ASSERT_OK(ckpt__mem_tier_remove(root));
    ASSERT(!exists(root));
}

TEST(ckpt_memory_tier_planted_by_another_user_is_refused_and_left_alone)
{
    arena a;
    arena_make(&a);
    char root[700], script[2400], link[800];
    snprintf(root, sizeof root, "%s/elastic-mem-1-abcdef", a.shm);
    snprintf(link, sizeof link, "%s/own", root);
    /* `nobody` wins the name first: its directory, 0700 like ours, with a
     * symlink into the victim directory. */
    snprintf(script, sizeof script, "mkdir -m 0700 '%s' && ln -s '%s' '%s'", root, a.victim, link);
    ASSERT_EQ(as_nobody(script), 0);
    int rc = ckpt__mem_tier_create(root, 1u << 20, 2);
    ASSERT_EQ(rc, ELASTIC_EPERM);
    ASSERT(strstr(elastic_last_error(), "not this user's") != NULL);
    ASSERT(exists(a.victim_file));
    ASSERT(exists(link)); /* nothing of theirs touched either */
    /* Nor does a removal (the reaper's, the service's) go into it. */
    ASSERT_EQ(ckpt__mem_tier_remove(root), ELASTIC_EPERM);
    ASSERT(exists(a.victim_file));
    ASSERT(exists(link));
    /* The victim directory itself as the tier's root: refused the same way
     * (root's own directory, but 0755 and not empty). */
    ASSERT(ckpt__mem_tier_create(a.victim, 1u << 20, 2) != 0);
    ASSERT(exists(a.victim_file));
}

TEST(ckpt_memory_tier_removal_removes_a_symlink_as_a_link)
{
    arena a;
    arena_make(&a);
    char root[700], link[800];
    snprintf(root, sizeof root, "%s/elastic-mem-XXXXXX", a.shm);
    ASSERT(mkdtemp(root) != NULL);
    ASSERT_OK(ckpt__mem_tier_create(root, 1u << 20, 2));
    snprintf(link, sizeof link, "%s/peer/node-a", root);
    ASSERT_OK(symlink(a.victim, link));
    ASSERT_OK(ckpt__mem_tier_remove(root));
    ASSERT(!exists(root));
    ASSERT(exists(a.victim_file));
}

typedef struct swapper {
    char dir[800], aside[800];
    const char *victim;
    volatile int stop;
} swapper;

/* Swaps peer/node-a between a directory of the tree (with a step
 * directory and a file in it) and a symlink to the victim, as fast as it can. */
static void *swap_main(void *arg)
{
    swapper *w = arg;
    char step[900], file[1000];
    snprintf(step, sizeof step, "%s/step-1", w->dir);
    snprintf(file, sizeof file, "%s/precious", step);
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        if (mkdir(w->dir, 0700) == 0 && mkdir(step, 0700) == 0) {
            int fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
            if (fd >= 0) close(fd);
        }
        rename(w->dir, w->aside);
        symlink(w->victim, w->dir);
        unlink(w->dir);
        rename(w->aside, w->dir);
    }
    return NULL;
}

TEST(ckpt_memory_tier_removal_never_follows_a_symlink_swapped_in_during_the_walk)
{
    arena a;
    arena_make(&a);
    for (int round = 0; round < 40; round++) {
        char root[700];
        snprintf(root, sizeof root, "%s/elastic-mem-XXXXXX", a.shm);
        ASSERT(mkdtemp(root) != NULL);
        ASSERT_OK(ckpt__mem_tier_create(root, 1u << 20, 2));
        swapper w = { .victim = a.victim };
        snprintf(w.dir, sizeof w.dir, "%s/peer/node-a", root);
        snprintf(w.aside, sizeof w.aside, "%s/peer/node-b", root);
        pthread_t t;
        ASSERT_OK(pthread_create(&t, NULL, swap_main, &w));
        /* Removal races the swaps (it may fail while they go on: a
         * directory refilled under it); the victim's file always stays. */
        for (int i = 0; i < 5; i++) (void)ckpt__mem_tier_remove(root);
        __atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
        ASSERT(exists(a.victim_file));
        ASSERT_OK(ckpt__mem_tier_remove(root));
        ASSERT(!exists(root));
    }
}

/* A process that makes a tier in `shm`, holds it and waits to be killed;
 * the tier's path comes back through the pipe. */
static pid_t holder(const char *shm, char *root, size_t cap)
{
    int p[2];
    ASSERT_OK(pipe(p));
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        char mine[700];
        snprintf(mine, sizeof mine, "%s/" CKPT_MEM_TIER_PREFIX "%d-XXXXXX", shm, (int)getpid());
        int fd = -1;
        if (mkdtemp(mine) == NULL || ckpt__mem_tier_create(mine, 1u << 20, 2) != 0 ||
            ckpt__mem_tier_hold(mine, &fd) != 0)
            _exit(1);
        ssize_t ignored = write(p[1], mine, strlen(mine) + 1);
        (void)ignored;
        for (;;) pause();
    }
    close(p[1]);
    ssize_t n = read(p[0], root, cap - 1);
    close(p[0]);
    ASSERT(n > 1);
    root[n] = '\0';
    return pid;
}

/* An agent and its reaper killed together leave their tier: the next
 * agent's sweep removes it (nobody holds its owner file any more), never a
 * tier still held, another user's, or a directory that is not a tier. */
TEST(ckpt_memory_tier_sweep_removes_only_tiers_nobody_holds)
{
    arena a;
    arena_make(&a);
    char dead[700], alive[700];
    pid_t killed = holder(a.shm, dead, sizeof dead);
    pid_t living = holder(a.shm, alive, sizeof alive);
    /* Another user's tier, with an owner file nobody holds. */
    char theirs[800], script[2000];
    snprintf(theirs, sizeof theirs, "%s/" CKPT_MEM_TIER_PREFIX "1-nobody", a.shm);
    snprintf(script, sizeof script, "mkdir -m 0700 '%s' && touch '%s/" CKPT_MEM_OWNER "'", theirs,
             theirs);
    ASSERT_EQ(as_nobody(script), 0);
    /* A tier in its creation: no owner file yet. */
    char creating[800];
    snprintf(creating, sizeof creating, "%s/" CKPT_MEM_TIER_PREFIX "2-XXXXXX", a.shm);
    ASSERT(mkdtemp(creating) != NULL);
    ASSERT_OK(kill(killed, SIGKILL));
    int status;
    ASSERT_EQ(waitpid(killed, &status, 0), killed);
    ASSERT_EQ(ckpt__mem_sweep_leaked(a.shm), 1);
    ASSERT(!exists(dead));
    ASSERT(exists(alive));
    ASSERT(exists(theirs));
    ASSERT(exists(creating));
    ASSERT_OK(kill(living, SIGKILL));
    ASSERT_EQ(waitpid(living, &status, 0), living);
    ASSERT_EQ(ckpt__mem_sweep_leaked(a.shm), 1);
    ASSERT(!exists(alive));
}
