/*
 * Worker processes: fork + exec with the parent-death signal set in between
 * (uv_spawn cannot run code there), each worker leading its own process
 * group, and stopping a whole group with one signal.
 */
#include "agent/agent.h"
#include "agent/group.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

int agent__resolve_program(const char *name, char *path, size_t path_size)
{
    if (strchr(name, '/') != NULL) {
        if (access(name, X_OK) != 0) return elastic__fail(ELASTIC_ENOTFOUND, "%s: not executable", name);
        snprintf(path, path_size, "%s", name);
        return 0;
    }
    const char *search = getenv("PATH");
    if (search == NULL || *search == '\0') search = "/usr/local/bin:/usr/bin:/bin";
    while (*search != '\0') {
        size_t dir_len = strcspn(search, ":");
        int written = snprintf(path, path_size, "%.*s/%s", (int)dir_len, dir_len ? search : ".", name);
        struct stat st;
        if (written > 0 && (size_t)written < path_size && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
            access(path, X_OK) == 0)
            return 0;
        search += dir_len;
        if (*search == ':') search++;
    }
    return elastic__fail(ELASTIC_ENOTFOUND, "%s: not found on PATH", name);
}

/* Runs in the child between fork and exec: async-signal-safe calls only. */
static _Noreturn void exec_child(const agent_spawn *spec, pid_t agent_pid, int out_fd, int err_fd)
{
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    setpgid(0, 0);
    /* The worker dies with the agent even when the agent is SIGKILLed. The
     * signal follows the forking thread: agents fork from their loop thread,
     * which lives as long as the agent. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != agent_pid) _exit(127); /* the agent already died */
    signal(SIGPIPE, SIG_DFL);
    if (out_fd >= 0 && dup2(out_fd, STDOUT_FILENO) < 0) _exit(127);
    if (err_fd >= 0 && dup2(err_fd, STDERR_FILENO) < 0) _exit(127);
    /* Nothing else of the agent's (store sockets, log files) leaks into workers. */
    syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
    if (spec->cwd != NULL && chdir(spec->cwd) != 0) _exit(127);
    execve(spec->path, (char *const *)spec->argv, (char *const *)spec->envp);
    static const char message[] = "elasticrun: exec of the worker failed\n";
    ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
    (void)ignored;
    _exit(127);
}

int agent__proc_spawn(const agent_spawn *spec, pid_t *pid, int *out_read, int *err_read)
{
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    if ((out_read != NULL && pipe2(out_pipe, O_CLOEXEC) != 0) || (err_read != NULL && pipe2(err_pipe, O_CLOEXEC) != 0)) {
        int saved = errno;
        if (out_pipe[0] >= 0) close(out_pipe[0]), close(out_pipe[1]);
        return elastic__fail(ELASTIC_ESYS, "pipe: %s", strerror(saved));
    }
    pid_t agent_pid = getpid();
    pid_t child = fork();
    if (child == 0) exec_child(spec, agent_pid, out_pipe[1], err_pipe[1]);
    int saved = errno;
    if (out_pipe[1] >= 0) close(out_pipe[1]);
    if (err_pipe[1] >= 0) close(err_pipe[1]);
    if (child < 0) {
        if (out_pipe[0] >= 0) close(out_pipe[0]);
        if (err_pipe[0] >= 0) close(err_pipe[0]);
        return elastic__fail(ELASTIC_ESYS, "fork: %s", strerror(saved));
    }
    setpgid(child, child); /* also here, so a signal sent right away reaches the group */
    *pid = child;
    if (out_read != NULL) *out_read = out_pipe[0];
    if (err_read != NULL) *err_read = err_pipe[0];
    return 0;
}

void agent__proc_signal_group(pid_t pgid, int signum)
{
    if (pgid <= 1) return;
    if (kill(-pgid, signum) != 0 && errno != ESRCH)
        ELASTIC_LOG_W("agent", "kill(-%d, %d): %s", (int)pgid, signum, strerror(errno));
}
