/* Crash consistency: a writer committing in a loop is SIGKILLed at random
 * moments; after every kill the latest valid step is at least the last one
 * whose commit returned and holds exactly that step's content, and opening
 * the directory leaves no temporary files. ELASTIC_CKPT_KILLS sets the
 * number of kills (make soak: thousands). */
#include "support/ckpt_content.h"
#include "test.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static int kills_wanted(void)
{
    const char *env = getenv("ELASTIC_CKPT_KILLS");
    int n = env ? atoi(env) : 300;
    return n > 0 && n <= 1000000 ? n : 300;
}

static uint64_t now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

static pid_t start_writer(const char *dir, int threads, int *out_fd)
{
    int fds[2];
    ASSERT_OK(pipe(fds));
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        char threads_arg[16];
        snprintf(threads_arg, sizeof threads_arg, "%d", threads);
        execl(test_helper_path("ckpt_crash_writer"), "ckpt_crash_writer", dir, threads_arg,
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *out_fd = fds[0];
    return pid;
}

/* Reads the steps the writer reported until the deadline (or, with a line
 * read, sooner); keeps the last. */
static void read_reports(int fd, uint64_t deadline_ms, bool until_line, uint64_t *last,
                         char *pending, size_t *pending_len)
{
    for (;;) {
        uint64_t now = now_ms();
        int wait_ms = deadline_ms == UINT64_MAX ? -1
                      : deadline_ms > now       ? (int)(deadline_ms - now)
                                                : 0;
        struct pollfd p = { fd, POLLIN, 0 };
        int ready = poll(&p, 1, wait_ms);
        if (ready <= 0) return;
        ssize_t n = read(fd, pending + *pending_len, 255 - *pending_len);
        if (n <= 0) return;
        *pending_len += (size_t)n;
        char *line_end;
        while ((line_end = memchr(pending, '\n', *pending_len)) != NULL) {
            *line_end = '\0';
            *last = strtoull(pending, NULL, 10);
            size_t used = (size_t)(line_end - pending) + 1;
            memmove(pending, pending + used, *pending_len - used);
            *pending_len -= used;
            if (until_line) return;
        }
    }
}

static int temp_files(const char *dir)
{
    int found = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "step-", 5) != 0) continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        DIR *s = opendir(sub);
        struct dirent *f;
        while (s && (f = readdir(s)) != NULL) found += strncmp(f->d_name, ".tmp-", 5) == 0;
        if (s) closedir(s);
    }
    if (d) closedir(d);
    return found;
}

TEST_TIMEOUT(ckpt_survives_sigkill_at_random_moments, 120)
{
    const char *dir = test_tmpdir();
    int kills = kills_wanted();
    uint64_t last_committed = 0, latest_seen = 0, seed = (uint64_t)getpid() * 2654435761u;
    for (int i = 0; i < kills; i++) {
        int fd;
        pid_t pid = start_writer(dir, i % 3, &fd);
        seed = ckpt_test_mix(seed + (uint64_t)i);
        char pending[256];
        size_t pending_len = 0;
        /* Every other kill waits for one more commit first, so the writer
         * makes progress however slow its start (sanitizers); the others
         * may land anywhere, start and cleanup included. */
        if (i % 2) {
            uint64_t before = last_committed;
            uint64_t give_up = now_ms() + (uint64_t)test_scaled_ms(10000);
            while (last_committed == before && now_ms() < give_up)
                read_reports(fd, give_up, true, &last_committed, pending, &pending_len);
        }
        read_reports(fd, now_ms() + seed % 40, false, &last_committed, pending, &pending_len);
        kill(pid, SIGKILL);
        int status;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        read_reports(fd, UINT64_MAX, false, &last_committed, pending, &pending_len); /* until EOF */
        close(fd);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            FAIL("writer ended by itself (status %d)", status);

        elastic_ckpt *c;
        ASSERT_OK(elastic_ckpt_open(dir, NULL, &c));
        uint64_t latest = 0;
        int rc = elastic_ckpt_latest(c, &latest);
        if (last_committed > 0 && rc != 0)
            FAIL("kill %d: no valid checkpoint after step %llu committed", i,
                 (unsigned long long)last_committed);
        if (rc == 0) {
            if (latest < last_committed)
                FAIL("kill %d: latest %llu is older than committed %llu", i,
                     (unsigned long long)latest, (unsigned long long)last_committed);
            if (latest < latest_seen)
                FAIL("kill %d: latest went back from %llu to %llu", i,
                     (unsigned long long)latest_seen, (unsigned long long)latest);
            char why[256];
            if (ckpt_test_check(c, latest, 0, why, sizeof why) != 0) FAIL("kill %d: %s", i, why);
            latest_seen = latest;
        }
        elastic_ckpt_close(c);
        if (temp_files(dir) != 0) FAIL("kill %d: temporary files left after open", i);
    }
    printf("%d kills, last step %llu\n", kills, (unsigned long long)latest_seen);
    ASSERT_LT(kills / 4, (int)latest_seen); /* the writer did make progress between kills */
}
