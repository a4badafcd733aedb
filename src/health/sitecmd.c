/*
 * The site's own health command (--health-check-cmd): a DCGM diagnostic, a
 * prolog script. Run with /bin/sh -c in its own process group; exit 0 is
 * healthy, anything else fatal with the first line of its output (stdout and
 * stderr together) as the reason. Its output is read as it comes (the first
 * 4 KiB kept, the rest read and dropped, so a chatty command never blocks on
 * a full pipe); past the timeout its whole process group is killed.
 */
#include "common/clock.h"
#include "common/env_secrets.h"
#include "health/health.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEPT_BYTES 4096
#define TICK_MS    20 /* how often a command whose output is still open is checked for its exit */

/* env: the agent's environment without its secrets (made before the fork). */
static pid_t start(const char *cmd, int out, char **env)
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
    char *argv[] = { "sh", "-c", (char *)cmd, NULL };
    execve("/bin/sh", argv, env);
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

/* One run of the site command: its process, its output so far, how it ended. */
typedef struct site_run {
    pid_t pid;
    int out_fd; /* the read end of its stdout and stderr */
    bool open_out, exited, timed_out, cancelled;
    int status;
    char output[KEPT_BYTES + 1];
    size_t kept;
} site_run;

/* Reads what the command wrote within `left` ms (at most a tick), keeping the
 * first KEPT_BYTES; notes when its output closed. */
static void read_output(site_run *run, int left)
{
    struct pollfd p = { .fd = run->out_fd, .events = POLLIN };
    if (poll(&p, 1, left < TICK_MS ? left : TICK_MS) <= 0) return;
    char chunk[4096];
    ssize_t got = read(run->out_fd, chunk, sizeof chunk);
    if (got > 0) {
        size_t room = KEPT_BYTES - run->kept;
        size_t take = (size_t)got < room ? (size_t)got : room;
        memcpy(run->output + run->kept, chunk, take);
        run->kept += take;
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        run->open_out = false;
    }
}

/* Reads the output and reaps the command until it exits, the deadline
 * passes or the caller cancels; then kills its group (whatever it left
 * behind, or all of it past the deadline) and reaps it. */
static void await_command(site_run *run, uint64_t deadline, const _Atomic bool *cancel)
{
    while (!run->exited) {
        int left = elastic__ms_left(deadline);
        if (left == 0) {
            run->timed_out = true;
            break;
        }
        if (cancel != NULL && *cancel) {
            run->cancelled = true;
            break;
        }
        if (run->open_out) {
            read_output(run, left);
        } else {
            /* Output closed, the command not yet reaped: wait a tick. */
            struct timespec tick = { 0, (left < TICK_MS ? left : TICK_MS) * 1000000L };
            nanosleep(&tick, NULL);
        }
        if (waitpid(run->pid, &run->status, WNOHANG) == run->pid) run->exited = true;
    }
    kill(-run->pid, SIGKILL);
    if (!run->exited)
        while (waitpid(run->pid, &run->status, 0) < 0 && errno == EINTR) {
        }
    run->output[run->kept] = '\0';
}

/* The report's entry for how the command ended, with its first line. */
static void report_outcome(const site_run *run, int timeout_ms, long long ms,
                           health__report *report)
{
    char line[HEALTH__TEXT_MAX - 32];
    first_line(run->output, line, sizeof line);
    int status = run->status;
    if (run->cancelled)
        health__add(report, "site_cmd", -1, HEALTH__WARNING, -1,
                    "the health command was stopped after %lld ms (the agent is stopping)", ms);
    else if (run->timed_out)
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
    char **env = elastic__environ_without_secrets();
    pid_t pid = env != NULL ? start(cmd, pipefd[1], env) : -1;
    if (env == NULL) errno = ENOMEM;
    free(env);
    close(pipefd[1]);
    if (pid < 0) {
        close(pipefd[0]);
        health__add(report, "site_cmd", -1, HEALTH__FATAL, -1, "cannot run the health command: %s",
                    strerror(errno));
        return;
    }
    setpgid(pid, pid); /* also from here: no window where a kill of the group misses it */
    site_run run = { .pid = pid, .out_fd = pipefd[0], .open_out = true };
    await_command(&run, started + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0), cancel);
    close(pipefd[0]);
    report_outcome(&run, timeout_ms, (long long)(elastic__now_ms() - started), report);
}
