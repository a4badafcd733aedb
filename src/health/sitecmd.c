/*
 * The site's own health command (--health-check-cmd): a DCGM diagnostic, a
 * prolog script. Run with /bin/sh -c in its own process group; exit 0 is
 * healthy, anything else fatal with the first line of its output (stdout and
 * stderr together) as the reason. Its output is read as it comes (the first
 * 4 KiB kept, the rest read and dropped, so a chatty command never blocks on
 * a full pipe); past the timeout its whole process group is killed.
 */
#include "common/clock.h"
#include "health/health.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEPT_BYTES 4096
#define TICK_MS    20 /* how often a command whose output is still open is checked for its exit */

static pid_t start(const char *cmd, int out)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    /* The child: only async-signal-safe calls until exec. */
    setpgid(0, 0);
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(out, 1);
    dup2(out, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
}

/* The first non-empty line of the output, trimmed, into `line`. */
static void first_line(const char *output, char *line, size_t size)
{
    while (*output == '\n' || *output == '\r' || *output == ' ') output++;
    size_t n = strcspn(output, "\r\n");
    if (n >= size) n = size - 1;
    memcpy(line, output, n);
    line[n] = '\0';
}

void health__site_check(const char *cmd, int timeout_ms, const _Atomic bool *cancel,
                        health__report *report)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        health__add(report, "site_cmd", -1, HEALTH__FATAL, -1, "cannot run the health command: %s",
                    strerror(errno));
        return;
    }
    uint64_t started = elastic__now_ms();
    pid_t pid = start(cmd, pipefd[1]);
    close(pipefd[1]);
    if (pid < 0) {
        close(pipefd[0]);
        health__add(report, "site_cmd", -1, HEALTH__FATAL, -1, "cannot run the health command: %s",
                    strerror(errno));
        return;
    }
    setpgid(pid, pid); /* also from here: no window where a kill of the group misses it */
    char output[KEPT_BYTES + 1];
    size_t kept = 0;
    bool open_out = true, exited = false, timed_out = false, cancelled = false;
    int status = 0;
    uint64_t deadline = started + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    while (!exited) {
        int left = elastic__ms_left(deadline);
        if (left == 0) {
            timed_out = true;
            break;
        }
        if (cancel != NULL && *cancel) {
            cancelled = true;
            break;
        }
        if (open_out) {
            struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
            int ready = poll(&p, 1, left < TICK_MS ? left : TICK_MS);
            if (ready > 0) {
                char chunk[4096];
                ssize_t got = read(pipefd[0], chunk, sizeof chunk);
                if (got > 0) {
                    size_t take = (size_t)got < KEPT_BYTES - kept ? (size_t)got : KEPT_BYTES - kept;
                    memcpy(output + kept, chunk, take);
                    kept += take;
                } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
                    open_out = false;
                }
            }
        } else {
            /* Output closed, the command not yet reaped: wait a tick. */
            struct timespec tick = { 0, (left < TICK_MS ? left : TICK_MS) * 1000000L };
            nanosleep(&tick, NULL);
        }
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) exited = true;
    }
    /* Whatever it left behind (or all of it, past the timeout) goes with it. */
    kill(-pid, SIGKILL);
    if (!exited)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    close(pipefd[0]);
    output[kept] = '\0';
    char line[HEALTH__TEXT_MAX - 32];
    first_line(output, line, sizeof line);
    long long ms = (long long)(elastic__now_ms() - started);
    if (cancelled)
        health__add(report, "site_cmd", -1, HEALTH__WARNING, -1,
                    "the health command was stopped after %lld ms (the agent is stopping)", ms);
    else if (timed_out)
        health__add(report, "site_cmd", -1, HEALTH__FATAL, -1,
                    "the health command did not finish in %d ms%s%s", timeout_ms,
                    line[0] ? ": " : "", line);
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        health__add(report, "site_cmd", -1, HEALTH__OK, 0, "healthy (%lld ms)%s%s", ms,
                    line[0] ? ": " : "", line);
    else if (WIFEXITED(status))
        health__add(report, "site_cmd", -1, HEALTH__FATAL, WEXITSTATUS(status), "exit %d: %s",
                    WEXITSTATUS(status), line[0] ? line : "(no output)");
    else
        health__add(report, "site_cmd", -1, HEALTH__FATAL, 128 + WTERMSIG(status),
                    "the health command was killed by signal %d%s%s", WTERMSIG(status),
                    line[0] ? ": " : "", line);
}
