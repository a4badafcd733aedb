/*
 * Which Python the workers run: the interpreter (--python, else $PYTHON_EXEC,
 * else python3 on PATH) named with its version on elasticrun's start line,
 * and a PYTHON_EXEC hint in the summary when a worker could not import a module.
 */
#include "agent/python.h"

#include "agent/proc.h"

#include "common/clock.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define PYTHON_VERSION_TIMEOUT_MS 10000

extern char **environ;

const char *agent__python_interpreter(const elastic_agent_opts *o)
{
    if (o->python != NULL) return o->python;
    const char *exec = getenv("PYTHON_EXEC");
    return exec != NULL && *exec != '\0' ? exec : "python3";
}

/* Reads the child's output until EOF or the deadline; false on timeout. */
static bool read_until_eof(int fd, char *out, size_t size, uint64_t deadline)
{
    size_t len = 0;
    for (;;) {
        int left = elastic__ms_left(deadline);
        if (left == 0) return false;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int ready = poll(&p, 1, left);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return false;
        char scratch[256];
        ssize_t got = read(fd, len + 1 < size ? out + len : scratch,
                           len + 1 < size ? size - 1 - len : sizeof scratch);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (len + 1 < size) len += (size_t)got;
    }
    out[len] = '\0';
    return true;
}

/* "Python 3.11.2" from `interpreter --version` (which writes to stdout, or
 * to stderr in Python 2), within a deadline. */
static int python_version(const char *path, char *out, size_t size)
{
    const char *argv[] = { path, "--version", NULL };
    agent_spawn spawn = { .path = path, .argv = argv, .envp = (const char *const *)environ };
    pid_t pid;
    int out_fd = -1, err_fd = -1;
    int rc = agent__proc_spawn(&spawn, &pid, &out_fd, &err_fd);
    if (rc != 0) return rc;
    char text[128] = "", err_text[128] = "";
    uint64_t deadline = elastic__deadline_ms(PYTHON_VERSION_TIMEOUT_MS);
    bool done = read_until_eof(out_fd, text, sizeof text, deadline) &&
                read_until_eof(err_fd, err_text, sizeof err_text, deadline);
    close(out_fd);
    close(err_fd);
    if (!done) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!done)
        return elastic__fail(ELASTIC_ETIMEDOUT, "no answer in %d s",
                             PYTHON_VERSION_TIMEOUT_MS / 1000);
    const char *answer = text[0] != '\0' ? text : err_text;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || strncmp(answer, "Python ", 7) != 0)
        return elastic__fail(ELASTIC_EINVAL, "it does not answer --version like Python");
    snprintf(out, size, "%.*s", (int)strcspn(answer, "\r\n"), answer);
    return 0;
}

void agent__python_describe(const elastic_agent_opts *o, char *out, size_t size)
{
    const char *name = agent__python_interpreter(o);
    char path[4096], version[96];
    if (agent__resolve_program(name, path, sizeof path) != 0) {
        snprintf(out, size, "%s (not found)", name);
        return;
    }
    if (python_version(path, version, sizeof version) != 0) {
        snprintf(out, size, "%s (version unknown: %s)", path, elastic_last_error());
        return;
    }
    snprintf(out, size, "%s (%s)", path, version);
}

void agent__python_start_line(const elastic_agent_opts *o, const char *run_id)
{
    char line[5200], interpreter[4400] = "";
    if (!o->no_python) agent__python_describe(o, interpreter, sizeof interpreter);
    int len =
        snprintf(line, sizeof line, "elasticrun: run %s: %d worker%s on this node: %s%s%s%s\n",
                 run_id, o->nproc_per_node, o->nproc_per_node == 1 ? "" : "s", interpreter,
                 o->no_python ? "" : " -u ", o->module ? "-m " : "", o->argc > 0 ? o->argv[0] : "");
    if (len < 0) return;
    if ((size_t)len >= sizeof line) len = (int)sizeof line - 1, line[len - 1] = '\n';
    /* Under Slurm, what the job step gave (the flags may have overridden some of it). */
    if (o->slurm_summary != NULL && (size_t)len + 1 < sizeof line) {
        int more =
            snprintf(line + len, sizeof line - (size_t)len, "elasticrun: %s\n", o->slurm_summary);
        if (more > 0) len = (size_t)(len + more) >= sizeof line ? (int)sizeof line - 1 : len + more;
        line[len - 1] = '\n';
    }
    ssize_t written;
    do written = write(STDERR_FILENO, line, (size_t)len);
    while (written < 0 && errno == EINTR);
}

bool agent__python_hint(const elastic_agent_opts *o, const char *detail, char *out, size_t size)
{
    if (o->no_python || detail == NULL) return false;
    /* a failed import in the script, or python -m of a module it cannot find */
    if (strstr(detail, "ModuleNotFoundError") == NULL && strstr(detail, "No module named") == NULL)
        return false;
    char interpreter[4400];
    agent__python_describe(o, interpreter, sizeof interpreter);
    snprintf(out, size,
             "hint: the workers ran %s; if the missing module is installed for another Python, "
             "set PYTHON_EXEC to that interpreter (torchrun runs the one it was started with)\n",
             interpreter);
    return true;
}
