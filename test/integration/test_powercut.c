/*
 * Checkpoints through power cuts: the checkpoint writer (two ranks, both
 * commit modes) runs on crashfs (test/powercut/crashfs.c), a FUSE file
 * system that keeps only what was fsynced. Each round arms a cut at a random
 * operation (seeded), writes steps until the power goes, "remounts" (crashfs
 * rebuilds the tree from what a power cut keeps: nothing unsynced, a random
 * prefix of it, or every rename without its data) and reopens: the newest
 * valid step is at least the last one whose commit returned on every rank,
 * and it holds exactly the data written for it. The next round resumes from
 * there, as a restarted job would.
 *
 * ELASTIC_POWERCUT_CUTS (default 2000: 1000 in each commit mode; make soak
 * runs SOAK_POWERCUTS),
 * ELASTIC_POWERCUT_SEED (default 26; a failure prints the seed and round),
 * ELASTIC_POWERCUT_REPORT (a file the figures are appended to).
 * Needs root and /dev/fuse, and crashfs built (libfuse3-dev).
 */
#include "test.h"

#include <elastic/ckpt.h>
#include <elastic/store.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RANKS           2
#define STEPS_PER_ROUND 3
#define KEEP_LAST       2

static char mnt[600];
static pid_t crashfs_pid;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* ---- crashfs ----------------------------------------------------------------------- */

static void unmount_at_exit(void)
{
    if (mnt[0] != '\0') umount2(mnt, MNT_DETACH);
    if (crashfs_pid > 0) {
        kill(crashfs_pid, SIGTERM);
        waitpid(crashfs_pid, NULL, 0);
    }
}

static void crashfs_start(void)
{
    if (geteuid() != 0) SKIP("power-cut tests mount a FUSE file system: run as root");
    if (access("/dev/fuse", R_OK | W_OK) != 0) SKIP("no /dev/fuse");
    const char *bin = test_helper_path("crashfs");
    if (access(bin, X_OK) != 0)
        SKIP("crashfs is not built: libfuse3-dev is missing (apt-get install libfuse3-dev fuse3)");
    snprintf(mnt, sizeof mnt, "%.500s/mnt", test_tmpdir());
    if (mkdir(mnt, 0700) != 0) FAIL("mkdir %s: %s", mnt, strerror(errno));
    pid_t parent = getpid();
    crashfs_pid = fork();
    if (crashfs_pid < 0) FAIL("fork: %s", strerror(errno));
    if (crashfs_pid == 0) {
        /* Out of the test's process group, which the runner SIGKILLs when
         * the test ends: the test's death (SIGTERM) lets crashfs unmount. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        setsid();
        execl(bin, "crashfs", mnt, (char *)NULL);
        _exit(127);
    }
    atexit(unmount_at_exit);
    char ctl[700];
    snprintf(ctl, sizeof ctl, "%s/.crashfs", mnt);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (access(ctl, F_OK) != 0) {
        int status;
        if (waitpid(crashfs_pid, &status, WNOHANG) == crashfs_pid) {
            crashfs_pid = 0;
            FAIL("crashfs exited before mounting %s", mnt);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > test_scaled_ms(10000) / 1000)
            FAIL("crashfs did not mount %s within 10 s", mnt);
        struct timespec pause = { 0, 10 * 1000000L };
        nanosleep(&pause, NULL);
    }
}

/* One control command; its answer into out. */
static void crashfs_ctl(const char *cmd, char *out, size_t size)
{
    char ctl[700];
    snprintf(ctl, sizeof ctl, "%s/.crashfs", mnt);
    int fd = open(ctl, O_RDWR);
    if (fd < 0) FAIL("open %s: %s", ctl, strerror(errno));
    ssize_t n = pwrite(fd, cmd, strlen(cmd), 0);
    if (n != (ssize_t)strlen(cmd)) FAIL("crashfs %s: %s", cmd, strerror(errno));
    n = pread(fd, out, size - 1, 0);
    close(fd);
    if (n < 0) FAIL("crashfs %s: no answer: %s", cmd, strerror(errno));
    out[n] = '\0';
    if (strncmp(out, "error", 5) == 0) FAIL("crashfs %s: %s", cmd, out);
}

static uint64_t crashfs_field(const char *answer, const char *field)
{
    const char *at = strstr(answer, field);
    return at != NULL ? strtoull(at + strlen(field), NULL, 10) : 0;
}

/* ---- what each step holds ------------------------------------------------------------ */

typedef struct blob_data {
    uint8_t *bytes;
    size_t len;
} blob_data;

/* Blob `which` (0: "model", 1: "meta") of a rank's shard of a step, as the
 * generation that wrote it wrote it. */
static blob_data expected(uint64_t step, uint32_t rank, uint64_t generation, int which)
{
    uint64_t seed =
        mix(step * 1315423911u ^ ((uint64_t)rank << 40) ^ (generation << 20) ^ (uint64_t)which);
    size_t len = which == 0 ? 1000 + (size_t)(seed % 150000) : 64;
    blob_data b = { malloc(len), len };
    if (b.bytes == NULL) FAIL("out of memory");
    for (size_t i = 0; i < len; i += 8) {
        uint64_t word = mix(seed + i);
        memcpy(b.bytes + i, &word, len - i < 8 ? len - i : 8);
    }
    return b;
}

static const char *const blob_names[2] = { "model", "meta" };

/* ---- one round ------------------------------------------------------------------------- */

typedef struct round {
    bool store_mode;
    elastic_ckpt *ckpt[RANKS];
    elastic_store *store; /* the driver's handle (store mode) */
    uint64_t generation;
    uint64_t first_step;
    pthread_barrier_t barrier;
    int rc[RANKS];
    bool stop;
    uint64_t committed; /* the last step whose commit returned on every rank; 0: none */
    int failures[RANKS];
    char first_error[RANKS][256];
} round_t;

typedef struct rank_arg {
    round_t *r;
    uint32_t rank;
} rank_arg;

/* A rank that failed cannot count itself in: the other one, waiting for
 * the step's store record, is given one that cannot be adopted (only where
 * no record exists yet) instead of waiting out its commit timeout, as the
 * job ending the generation would stop it. */
static void give_up_step(round_t *r, uint64_t step)
{
    char key[96];
    snprintf(key, sizeof key, "ckpt/%" PRIu64 "/g%" PRIu64 "/commit", step, r->generation);
    void *current = NULL;
    size_t clen = 0;
    (void)elastic_store_compare_set(r->store, key, NULL, 0, "lost", 4, &current, &clen);
    elastic_free(current);
}

static void *rank_main(void *arg)
{
    rank_arg *a = arg;
    round_t *r = a->r;
    for (uint64_t step = r->first_step; step < r->first_step + STEPS_PER_ROUND; step++) {
        blob_data b[2] = { expected(step, a->rank, r->generation, 0),
                           expected(step, a->rank, r->generation, 1) };
        elastic_ckpt_blob blobs[2] = {
            { .name = blob_names[0], .data = b[0].bytes, .len = b[0].len },
            { .name = blob_names[1], .data = b[1].bytes, .len = b[1].len }
        };
        int rc = elastic_ckpt_save(r->ckpt[a->rank], step, blobs, 2);
        if (rc != 0 && r->failures[a->rank]++ == 0)
            snprintf(r->first_error[a->rank], sizeof r->first_error[a->rank],
                     "step %" PRIu64 ": %s", step, elastic_last_error());
        if (rc != 0 && r->store_mode) give_up_step(r, step);
        free(b[0].bytes);
        free(b[1].bytes);
        r->rc[a->rank] = rc;
        pthread_barrier_wait(&r->barrier);
        if (a->rank == 0) {
            bool all = true;
            for (int i = 0; i < RANKS; i++) all = all && r->rc[i] == 0;
            if (all)
                r->committed = step;
            else
                r->stop = true;
        }
        pthread_barrier_wait(&r->barrier);
        if (r->stop) break;
    }
    return NULL;
}

static void open_ranks(round_t *r, const char *base_dir, elastic_store *const *stores)
{
    for (uint32_t rank = 0; rank < RANKS; rank++) {
        char dir[800];
        if (r->store_mode)
            snprintf(dir, sizeof dir, "%s/r%" PRIu32, base_dir, rank);
        else
            snprintf(dir, sizeof dir, "%s", base_dir);
        elastic_ckpt_opts o;
        elastic_ckpt_opts_init(&o, sizeof o);
        o.rank = rank;
        o.world = RANKS;
        o.generation = r->generation;
        o.keep_last = KEEP_LAST;
        o.store = r->store_mode ? stores[rank] : NULL;
        o.commit_timeout_ms = test_scaled_ms(30000);
        if (elastic_ckpt_open(dir, &o, &r->ckpt[rank]) != 0)
            FAIL("open %s (rank %" PRIu32 ", generation %" PRIu64 "): %s", dir, rank, r->generation,
                 elastic_last_error());
    }
}

static void close_ranks(round_t *r)
{
    for (int i = 0; i < RANKS; i++) {
        elastic_ckpt_close(r->ckpt[i]);
        r->ckpt[i] = NULL;
    }
}

/* After the remount: the newest valid step, checked against what was
 * committed; returns it (0: none yet). */
static uint64_t check_after_cut(round_t *r, uint64_t committed, const char *what)
{
    uint64_t newest[RANKS];
    for (uint32_t rank = 0; rank < RANKS; rank++) {
        elastic_ckpt *c = r->ckpt[rank];
        uint64_t latest = 0;
        int rc = elastic_ckpt_latest(c, &latest);
        if (rc == ELASTIC_ENOTFOUND && committed == 0) {
            newest[rank] = 0;
            continue;
        }
        if (rc != 0)
            FAIL("%s: rank %" PRIu32 " finds no valid step (step %" PRIu64 " was committed): %s",
                 what, rank, committed, elastic_last_error());
        if (latest < committed)
            FAIL("%s: rank %" PRIu32 "'s newest valid step is %" PRIu64 ", but step %" PRIu64
                 " was committed before the cut",
                 what, rank, latest, committed);
        uint32_t world = 0;
        uint64_t generation = 0;
        if (elastic_ckpt_step_info(c, latest, &world, &generation) != 0)
            FAIL("%s: step %" PRIu64 " info: %s", what, latest, elastic_last_error());
        ASSERT_EQ(world, RANKS);
        char **names = NULL;
        size_t n = 0;
        if (elastic_ckpt_list_blobs(c, latest, (int)rank, &names, &n) != 0)
            FAIL("%s: step %" PRIu64 " blobs: %s", what, latest, elastic_last_error());
        if (n != 2)
            FAIL("%s: step %" PRIu64 " rank %" PRIu32 " holds %zu blobs, not 2", what, latest, rank,
                 n);
        elastic_free(names); /* one allocation */
        for (int which = 0; which < 2; which++) {
            blob_data want = expected(latest, rank, generation, which);
            void *data = NULL;
            size_t len = 0;
            if (elastic_ckpt_read_shard(c, latest, (int)rank, blob_names[which], &data, &len) != 0)
                FAIL("%s: step %" PRIu64 " rank %" PRIu32 " %s: %s", what, latest, rank,
                     blob_names[which], elastic_last_error());
            if (len != want.len || memcmp(data, want.bytes, len) != 0)
                FAIL("%s: step %" PRIu64 " rank %" PRIu32
                     " %s differs from what generation %" PRIu64 " wrote (%zu bytes, %zu expected)",
                     what, latest, rank, blob_names[which], generation, len, want.len);
            elastic_free(data);
            free(want.bytes);
        }
        newest[rank] = latest;
    }
    if (newest[0] != newest[1])
        FAIL("%s: the ranks' newest valid steps differ: %" PRIu64 " and %" PRIu64, what, newest[0],
             newest[1]);
    return newest[0];
}

static const char *const variants[3] = { "drop", "prefix", "nodata" };

typedef struct mode_state {
    bool store_mode;
    char dir[700];
    uint64_t generation;
    uint64_t committed; /* across rounds */
    uint64_t next_step;
    uint64_t ops_per_round; /* measured in the first round */
    int rounds, cuts_fired;
} mode_state;

static void run_round(mode_state *m, elastic_store *const *stores, elastic_store *driver,
                      uint64_t seed, int index)
{
    round_t r = { .store_mode = m->store_mode,
                  .store = driver,
                  .generation = ++m->generation,
                  .first_step = m->next_step };
    char answer[256], cmd[128], what[200];
    const char *variant = variants[(index / 2) % 3];
    snprintf(what, sizeof what, "seed %" PRIu64 " round %d (%s mode, %s)", seed, index,
             m->store_mode ? "store" : "shared-directory", variant);
    open_ranks(&r, m->dir, stores);
    crashfs_ctl("status", answer, sizeof answer);
    uint64_t ops_before = crashfs_field(answer, "ops=");
    /* The first round runs to its end (the cut comes after it) and tells how
     * many operations a round takes; later ones are cut anywhere in one. */
    uint64_t arm = m->ops_per_round == 0 ? 0
                                         : 1 + mix(seed ^ (uint64_t)index) %
                                                   (m->ops_per_round + m->ops_per_round / 8);
    snprintf(cmd, sizeof cmd, "arm %" PRIu64, arm);
    crashfs_ctl(cmd, answer, sizeof answer);
    ASSERT_EQ(pthread_barrier_init(&r.barrier, NULL, RANKS), 0);
    pthread_t threads[RANKS];
    rank_arg args[RANKS];
    for (uint32_t i = 0; i < RANKS; i++) {
        args[i] = (rank_arg){ &r, i };
        ASSERT_EQ(pthread_create(&threads[i], NULL, rank_main, &args[i]), 0);
    }
    for (int i = 0; i < RANKS; i++) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&r.barrier);
    close_ranks(&r);
    crashfs_ctl("status", answer, sizeof answer);
    bool fired = crashfs_field(answer, "cut=") == 1;
    if (m->ops_per_round == 0) m->ops_per_round = crashfs_field(answer, "ops=") - ops_before;
    if (!fired && (r.failures[0] || r.failures[1]))
        FAIL("%s: a commit failed with the power on: %s%s", what, r.first_error[0],
             r.first_error[1]);
    m->cuts_fired += fired;
    if (r.committed > m->committed) m->committed = r.committed;
    snprintf(cmd, sizeof cmd, "remount %s %" PRIu64, variant, mix(seed + (uint64_t)index));
    crashfs_ctl(cmd, answer, sizeof answer);
    /* Reopen as the next generation would, and check. */
    round_t next = { .store_mode = m->store_mode, .generation = m->generation + 1 };
    open_ranks(&next, m->dir, stores);
    uint64_t newest = check_after_cut(&next, m->committed, what);
    close_ranks(&next);
    m->committed = newest; /* a step committed as the power went counts too */
    m->next_step = newest + 1;
    m->rounds++;
}

static int env_int(const char *name, int dflt, int lo, int hi)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return dflt;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end != '\0' || n < lo || n > hi) FAIL("%s=%s: want %d..%d", name, v, lo, hi);
    return (int)n;
}

TEST_TIMEOUT(ckpt_newest_step_survives_power_cuts_in_both_commit_modes, 1800)
{
    int cuts = env_int("ELASTIC_POWERCUT_CUTS", 2000, 2, 10000000);
    uint64_t seed = (uint64_t)env_int("ELASTIC_POWERCUT_SEED", 26, 0, 2147483647);
    crashfs_start();
    elastic_store_server_opts so;
    elastic_store_server_opts_init(&so, sizeof so);
    so.host = "127.0.0.1";
    elastic_store_server *server = NULL;
    ASSERT_OK(elastic_store_server_start(&so, &server));
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(server));
    elastic_store_opts co;
    elastic_store_opts_init(&co, sizeof co);
    co.prefix = "pc/";
    elastic_store *stores[RANKS], *driver;
    for (int i = 0; i < RANKS; i++) ASSERT_OK(elastic_store_connect(endpoint, &co, &stores[i]));
    ASSERT_OK(elastic_store_connect(endpoint, &co, &driver));
    mode_state modes[2] = { { .store_mode = false, .next_step = 1 },
                            { .store_mode = true, .next_step = 1 } };
    snprintf(modes[0].dir, sizeof modes[0].dir, "%s/shared", mnt);
    snprintf(modes[1].dir, sizeof modes[1].dir, "%s/bystore", mnt);
    ASSERT_EQ(mkdir(modes[1].dir, 0700), 0);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < cuts; i++) run_round(&modes[i % 2], stores, driver, seed, i);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double secs = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    for (int i = 0; i < 2; i++) {
        printf("# %s mode: %d power cuts (%d mid-round), newest step %" PRIu64 ", %" PRIu64
               " operations a round\n",
               modes[i].store_mode ? "store" : "shared-directory", modes[i].rounds,
               modes[i].cuts_fired, modes[i].committed, modes[i].ops_per_round);
        /* Most cuts must land inside the writer, not after it. */
        ASSERT(modes[i].cuts_fired * 2 > modes[i].rounds);
        /* And the job moves forward through them. */
        ASSERT(modes[i].committed > (uint64_t)modes[i].rounds / 4);
    }
    printf("# %d power cuts in %.1f s (seed %" PRIu64 ")\n", cuts, secs, seed);
    /* The runner shows a passing test's output to nobody: where the soak's
     * figures should go, say so. */
    const char *report = getenv("ELASTIC_POWERCUT_REPORT");
    FILE *out = report != NULL && *report != '\0' ? fopen(report, "a") : NULL;
    if (out != NULL) {
        for (int i = 0; i < 2; i++)
            fprintf(out,
                    "%s mode: %d power cuts (%d inside the writer), newest step %" PRIu64
                    ", %" PRIu64 " operations a round\n",
                    modes[i].store_mode ? "store" : "shared-directory", modes[i].rounds,
                    modes[i].cuts_fired, modes[i].committed, modes[i].ops_per_round);
        fprintf(out, "%d power cuts in %.1f s (seed %" PRIu64 ")\n", cuts, secs, seed);
        fclose(out);
    }
    for (int i = 0; i < RANKS; i++) elastic_store_close(stores[i]);
    elastic_store_close(driver);
    elastic_store_server_close(server);
}
