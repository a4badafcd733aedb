/*
 * Worker processes: clone + exec with the parent-death signal set in between
 * (uv_spawn cannot run code there), each worker leading its own process
 * group, and stopping a whole group with one signal.
 */
#include "agent/agent.h"
#include "agent/proc.h"

#include <stdio.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
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
        if (access(name, X_OK) != 0)
            return elastic__fail(ELASTIC_ENOTFOUND, "%s: not executable", name);
        snprintf(path, path_size, "%s", name);
        return 0;
    }
    const char *search = getenv("PATH");
    if (search == NULL || *search == '\0') search = "/usr/local/bin:/usr/bin:/bin";
    while (*search != '\0') {
        size_t dir_len = strcspn(search, ":");
        int written =
            snprintf(path, path_size, "%.*s/%s", (int)dir_len, dir_len ? search : ".", name);
        struct stat st;
        if (written > 0 && (size_t)written < path_size && stat(path, &st) == 0 &&
            S_ISREG(st.st_mode) && access(path, X_OK) == 0)
            return 0;
        search += dir_len;
        if (*search == ':') search++;
    }
    return elastic__fail(ELASTIC_ENOTFOUND, "%s: not found on PATH", name);
}

typedef struct child_context {
    const agent_spawn *spec;
    pid_t agent_pid;
    int out_fd, err_fd;
} child_context;

/* Runs in the child between clone and exec, on its own stack but in the
 * agent's memory (CLONE_VM; a forked copy in TSan builds): raw system calls
 * only, nothing that allocates, locks or touches shared state. */
static int exec_child(void *arg)
{
    const child_context *child = arg;
    /* Handlers of the agent (libuv's SIGCHLD) must not run in here: reset
     * them before unblocking; ignored signals stay ignored, as exec keeps them. */
    for (int signum = 1; signum < NSIG; signum++) {
        struct sigaction current;
        if (signum == SIGKILL || signum == SIGSTOP || sigaction(signum, NULL, &current) != 0)
            continue;
        if (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN) signal(signum, SIG_DFL);
    }
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0);
    /* The worker dies with the agent even when the agent is SIGKILLed. The
     * signal follows the creating thread: agents spawn from their loop
     * thread, which lives as long as the agent. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != child->agent_pid) _exit(127); /* the agent already died */
    if (child->out_fd >= 0 && dup2(child->out_fd, STDOUT_FILENO) < 0) _exit(127);
    if (child->err_fd >= 0 && dup2(child->err_fd, STDERR_FILENO) < 0) _exit(127);
    /* A pre-started interpreter's assignment socket is its fd 3 (prestart.c). */
    int pass_fd = child->spec->pass_fd;
    if (pass_fd == 3 && fcntl(3, F_SETFD, 0) != 0) _exit(127);
    if (pass_fd > 0 && pass_fd != 3 && dup2(pass_fd, 3) < 0) _exit(127);
    /* Nothing else of the agent's (store sockets, log files) leaks into workers. */
    syscall(SYS_close_range, pass_fd > 0 ? 4u : 3u, ~0u, CLOSE_RANGE_CLOEXEC);
    if (child->spec->cwd != NULL && chdir(child->spec->cwd) != 0) _exit(127);
    execve(child->spec->path, (char *const *)child->spec->argv, (char *const *)child->spec->envp);
    static const char message[] = "elasticrun: exec of the worker failed\n";
    ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
    (void)ignored;
    _exit(127);
}

/* ThreadSanitizer cannot follow a child that runs in the agent's memory:
 * its interceptors (sigaction, dup2, ...) would update the parent's shadow
 * state and handler table from the child, so the agent's own SIGCHLD handler
 * was reset and TSan's fd model corrupted. TSan builds fork instead; the
 * child runs the same code in its own copy of memory, so the two paths
 * differ only in cost (fork copies page tables), never in behaviour. */
#if defined(__SANITIZE_THREAD__)
#define SPAWN_BY_FORK 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPAWN_BY_FORK 1
#endif
#endif

#ifdef SPAWN_BY_FORK
static pid_t start_child(child_context *child)
{
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid_t pid = fork();
    if (pid == 0) _exit(exec_child(child)); /* exec_child only returns by _exit */
    int saved_errno = errno;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    errno = saved_errno;
    return pid;
}
#else
#define CHILD_STACK_BYTES (64 * 1024)

/* clone(CLONE_VM | CLONE_VFORK) as posix_spawn does: no page tables to copy,
 * no atfork handlers, and the agent resumes once the worker has exec'd. */
static pid_t start_child(child_context *child)
{
    char *stack = malloc(CHILD_STACK_BYTES);
    if (stack == NULL) return -1;
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid_t pid =
        clone(exec_child, stack + CHILD_STACK_BYTES, CLONE_VM | CLONE_VFORK | SIGCHLD, child);
    int saved_errno = errno;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    free(stack);
    errno = saved_errno;
    return pid;
}
#endif

int agent__proc_spawn(const agent_spawn *spec, pid_t *pid, int *out_read, int *err_read)
{
    int out_pipe[2] = { -1, -1 }, err_pipe[2] = { -1, -1 };
    if ((out_read != NULL && pipe2(out_pipe, O_CLOEXEC) != 0) ||
        (err_read != NULL && pipe2(err_pipe, O_CLOEXEC) != 0)) {
        int saved = errno;
        if (out_pipe[0] >= 0) close(out_pipe[0]), close(out_pipe[1]);
        return elastic__fail(ELASTIC_ESYS, "pipe: %s", strerror(saved));
    }
    child_context child = {
        .spec = spec, .agent_pid = getpid(), .out_fd = out_pipe[1], .err_fd = err_pipe[1]
    };
    pid_t created = start_child(&child);
    int saved = errno;
    if (out_pipe[1] >= 0) close(out_pipe[1]);
    if (err_pipe[1] >= 0) close(err_pipe[1]);
    if (created < 0) {
        if (out_pipe[0] >= 0) close(out_pipe[0]);
        if (err_pipe[0] >= 0) close(err_pipe[0]);
        return elastic__fail(ELASTIC_ESYS, "starting a worker: %s", strerror(saved));
    }
    setpgid(created, created); /* harmless if the child did it already; EACCES after exec is fine */
    *pid = created;
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
