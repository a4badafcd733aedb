/*
 * Interpreters started ahead. Most of an unchanged torchrun script's restart
 * is starting Python and importing torch again (seconds; the group's
 * stop, rendezvous and the script's own set-up are a fraction of that). So
 * while a generation trains, the agent keeps one interpreter per local rank
 * for the NEXT generation: `python -u -c <agent__prestart_program> SCRIPT`,
 * started with the environment that rank's worker gets now, which imports
 * the torch modules the script imports (prestart_program.c) and then blocks
 * reading its assignment on a socket (its fd 3). When a generation starts a worker, spawn_worker
 * (workers.c) offers it here first: the worker's own environment, argv and
 * cwd, exactly as agent__proc_spawn would have been given them, go down the
 * socket, and the interpreter becomes the worker: its pid is the worker's,
 * its stdout/stderr pipes (held unread until now, so what it printed while
 * importing comes first) are relayed to the generation's log files, and the
 * exit watch, reaper, probes, signals and error file follow as for a spawned
 * worker, since everything after the process exists is the same code.
 *
 * Why started by the agent and not forked from a warm parent: a fork of an
 * interpreter that imported torch shares its threads' state (OpenMP, CUDA)
 * badly; a fresh interpreter per rank is what `python script` would be, less
 * the wait. The script's own imports are not run ahead: they are the
 * user's code, and running it before its environment exists would change it.
 *
 * What it costs: one idle interpreter per local rank (with torch imported,
 * about 115 MB private and as much shared with the workers, CPU torch 1.13)
 * from the first generation on. It is on only
 * when a restart can come (Python entrypoint, max_restarts > 0 or an elastic
 * node range) and --no-prestart is not given. Replacements start
 * PRESTART_HOLD_MS after a generation started, so their imports do not
 * compete with its start for CPU.
 *
 * What can go wrong: one that exited before use, did not finish its imports
 * within PRESTART_READY_MS, or could not take the assignment (an environment
 * larger than the socket holds) is killed; that rank and every later one
 * start afresh, said once on the console (`prestart_off` in the log).
 */
#include "agent/prestart.h"

#include "agent/console.h"
#include "agent/memory.h"
#include "agent/probes.h"
#include "agent/python.h"
#include "agent/worker_env.h"
#include "agent/workers.h"

#include "common/clock.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PRESTART_HOLD_MS 3000    /* after a generation's start, before replacements start */
#define PRESTART_READY_MS 300000 /* imports not done by then: hung (a fresh spawn instead) */
#define PRESTART_SNDBUF (1 << 20) /* asked for; the kernel caps it (net.core.wmem_max) */
#define PRESTART_MAGIC "ELASTIC-PRESTART-1"

typedef struct prestart_slot {
    pid_t pid; /* 0: none */
    int sock;  /* the agent's end of the assignment socket */
    int out_fd, err_fd;
    uint64_t started_ms;
} prestart_slot;

struct agent_prestarts {
    prestart_slot *slots; /* one per local rank */
    int nslots;
    bool decided, on; /* at the first generation */
    bool off;      /* a failure (said once) or the job ended: none started again */
    uv_timer_t timer; /* the hold before replacements start */
    bool timer_open;
};

/* On for a Python entrypoint whose group can restart, unless turned off. */
static bool wanted(const elastic_agent_opts *o)
{
    if (o->no_prestart || o->no_python || o->argc < 1 || o->nproc_per_node < 1) return false;
    return o->max_restarts > 0 || o->min_nodes != o->max_nodes;
}

int agent__prestart_init(agent_group *group)
{
    agent_prestarts *p = calloc(1, sizeof *p);
    if (p == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory (prestart)");
    group->prestarts = p;
    int rc = uv_timer_init(group->loop, &p->timer);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "prestart timer: %s", uv_strerror(rc));
    p->timer.data = group;
    p->timer_open = true;
    return 0;
}

/* Decided at the first generation (the options are not attached at init). */
static void decide(agent_group *group)
{
    agent_prestarts *p = group->prestarts;
    if (p->decided) return;
    p->decided = true;
    if (!wanted(group->job.opts)) return;
    p->slots = calloc((size_t)group->job.opts->nproc_per_node, sizeof *p->slots);
    if (p->slots == NULL) {
        ELASTIC_LOG_W("agent", "prestart_off: out of memory");
        return;
    }
    p->nslots = group->job.opts->nproc_per_node;
    for (int i = 0; i < p->nslots; i++) {
        p->slots[i].sock = p->slots[i].out_fd = -1;
        p->slots[i].err_fd = -1;
    }
    p->on = true;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Kills an unused one and reaps it (SIGKILL: it is gone at once). */
static void discard(prestart_slot *slot)
{
    if (slot->pid > 0) {
        kill(-slot->pid, SIGKILL);
        kill(slot->pid, SIGKILL); /* before its setpgid, the group may not exist yet */
        while (waitpid(slot->pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    close_fd(&slot->sock);
    close_fd(&slot->out_fd);
    close_fd(&slot->err_fd);
    slot->pid = 0;
}

static void discard_all(agent_prestarts *p)
{
    for (int i = 0; i < p->nslots; i++) discard(&p->slots[i]);
}

/* A failure: this and every later rank start afresh, said once. */
static void turn_off(agent_group *group, int local_rank, const char *why)
{
    agent_prestarts *p = group->prestarts;
    if (p->off) return;
    p->off = true;
    uv_timer_stop(&p->timer);
    discard_all(p);
    ELASTIC_LOG_W("agent", "prestart_off: local rank %d: %s", local_rank, why);
    agent__console(group,
                   "interpreters started ahead off: local rank %d's %s; workers start afresh",
                   local_rank, why);
}

/* The environment that local rank's worker gets in the running generation
 * (the assignment replaces it; what the interpreter reads as it starts,
 * PYTHONPATH and the like, is the agent's and the same in both). */
static int start_env(agent_group *group, int local_rank, char ***envp)
{
    char prefix[400], error_file[1200];
    agent__worker_store_prefix(group, prefix, sizeof prefix);
    snprintf(error_file, sizeof error_file, "%s/prestart_error.json", group->job.log_root);
    agent_worker_env spec = agent__worker_env_of(group, local_rank, error_file, prefix);
    return agent__env_build(&spec, envp);
}

/* python -u -c PROGRAM SCRIPT (or -m MODULE): the worker's interpreter and flags. */
static int start_one(agent_group *group, prestart_slot *slot, int local_rank)
{
    const elastic_agent_opts *o = group->job.opts;
    char path[4096];
    int rc = agent__resolve_program(agent__python_interpreter(o), path, sizeof path);
    if (rc != 0) return rc;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
        return elastic__fail(ELASTIC_ESYS, "socketpair: %s", strerror(errno));
    int size = PRESTART_SNDBUF;
    setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size); /* best effort */
    const char *argv[] = { path, "-u", "-c", agent__prestart_program,
                           o->module ? "-m" : o->argv[0], o->module ? o->argv[0] : NULL, NULL };
    char **envp = NULL;
    rc = start_env(group, local_rank, &envp);
    if (rc == 0) {
        agent_spawn spawn = { .path = path,
                              .argv = argv,
                              .envp = (const char *const *)envp,
                              .pass_fd = pair[1] };
        rc = agent__proc_spawn(&spawn, &slot->pid, &slot->out_fd, &slot->err_fd);
    }
    agent__strv_free(envp);
    close(pair[1]);
    if (rc != 0) {
        close(pair[0]);
        slot->pid = 0;
        return rc;
    }
    /* Not told to the reaper: PDEATHSIG ends it with the agent, and it has no
     * children; once it is a worker, spawn_worker tells the reaper of it. */
    slot->sock = pair[0];
    slot->started_ms = elastic__now_ms();
    ELASTIC_LOG_D("agent", "local rank %d: interpreter started ahead (pid %d)", local_rank,
                  (int)slot->pid);
    return 0;
}

static void fill(agent_group *group)
{
    agent_prestarts *p = group->prestarts;
    for (int i = 0; i < p->nslots && !p->off; i++) {
        if (p->slots[i].pid > 0) continue;
        if (start_one(group, &p->slots[i], i) != 0) {
            char why[400];
            snprintf(why, sizeof why, "interpreter could not start: %s", elastic_last_error());
            turn_off(group, i, why);
        }
    }
}

static void on_hold_over(uv_timer_t *timer)
{
    agent_group *group = timer->data;
    if (!group->prestarts->off && agent__group_is_running(group)) fill(group);
}

void agent__prestart_generation_started(agent_group *group)
{
    agent_prestarts *p = group->prestarts;
    if (p == NULL) return;
    decide(group);
    if (!p->on || p->off) return;
    uv_timer_start(&p->timer, on_hold_over, PRESTART_HOLD_MS, 0);
}

/* The worker's command is the one the interpreter was started for: the same
 * interpreter and flags, the same script or module (its arguments may differ). */
static bool fits(const agent_group *group, const agent_spawn *spawn, const char *expected_path)
{
    const elastic_agent_opts *o = group->job.opts;
    const char *const *argv = spawn->argv;
    if (strcmp(spawn->path, expected_path) != 0 || argv[0] == NULL || argv[1] == NULL ||
        strcmp(argv[1], "-u") != 0 || argv[2] == NULL)
        return false;
    if (o->module) return strcmp(argv[2], "-m") == 0 && argv[3] != NULL;
    return argv[2][0] != '-';
}

static void field(elastic__text *out, const char *text)
{
    elastic__text_append(out, text, strlen(text) + 1); /* its NUL ends it */
}

/* The assignment: magic, cwd, argc, argv from the script on, the environment, END. */
static int assignment(const agent_spawn *spawn, elastic__text *out)
{
    const char *const *argv = spawn->argv + 2;
    int argc = 0;
    while (argv[argc] != NULL) argc++;
    char count[16];
    snprintf(count, sizeof count, "%d", argc);
    field(out, PRESTART_MAGIC);
    field(out, spawn->cwd != NULL ? spawn->cwd : "");
    field(out, count);
    for (int i = 0; i < argc; i++) field(out, argv[i]);
    for (const char *const *e = spawn->envp; *e != NULL; e++) field(out, *e);
    field(out, "END"); /* it is whole (a reset can end the stream early) */
    return out->overflow ? elastic__fail(ELASTIC_EINVAL, "assignment over %zu bytes", out->max)
                         : 0;
}

/* Sends it whole without blocking the loop; the interpreter reads it as soon
 * as its imports are done. */
static int send_assignment(prestart_slot *slot, const agent_spawn *spawn)
{
    elastic__text text;
    elastic__text_init(&text, 1 << 22);
    int rc = assignment(spawn, &text);
    if (rc == 0) {
        ssize_t sent;
        do sent = send(slot->sock, text.data, text.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (sent < 0 && errno == EINTR);
        if (sent < 0)
            rc = elastic__fail(ELASTIC_ESYS, "assignment not sent: %s", strerror(errno));
        else if ((size_t)sent != text.len)
            rc = elastic__fail(ELASTIC_EINVAL,
                               "assignment of %zu bytes (the environment) larger than its "
                               "socket holds (%zd sent)",
                               text.len, sent);
    }
    elastic__text_free(&text);
    return rc;
}

/* Whether it is still there to take the assignment (an exit is reaped here:
 * no one else waits for it), or why not. */
static bool alive(prestart_slot *slot, char *why, size_t size)
{
    int status;
    pid_t got;
    do got = waitpid(slot->pid, &status, WNOHANG);
    while (got < 0 && errno == EINTR);
    if (got == 0) return true;
    char how[96] = "was reaped elsewhere";
    if (got > 0)
        agent__describe_exit(WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                             WIFSIGNALED(status) ? WTERMSIG(status) : 0, how, sizeof how);
    snprintf(why, size, "interpreter started ahead (pid %d) ended (%s) before it was needed",
             (int)slot->pid, how);
    slot->pid = 0; /* reaped: discard must not wait for it */
    return false;
}

/* Its "R": the imports are done (it may still take the assignment if not).
 * Read, not peeked: a socket closed with unread data resets its peer. */
static bool ready(const prestart_slot *slot)
{
    char byte;
    return recv(slot->sock, &byte, 1, MSG_DONTWAIT) == 1;
}

bool agent__prestart_take(agent_group *group, int local_rank, const agent_spawn *spawn, pid_t *pid,
                          int *out_fd, int *err_fd)
{
    agent_prestarts *p = group->prestarts;
    if (p == NULL || !p->on || p->off || local_rank < 0 || local_rank >= p->nslots) return false;
    prestart_slot *slot = &p->slots[local_rank];
    if (slot->pid <= 0) return false;
    char expected[4096], why[600];
    if (agent__resolve_program(agent__python_interpreter(group->job.opts), expected, sizeof expected) !=
            0 ||
        !fits(group, spawn, expected)) {
        turn_off(group, local_rank, "worker command is not the one it was started for");
        return false;
    }
    if (!alive(slot, why, sizeof why)) {
        turn_off(group, local_rank, why);
        return false;
    }
    bool imported = ready(slot);
    uint64_t age = elastic__now_ms() - slot->started_ms;
    if (!imported && age >= PRESTART_READY_MS) {
        snprintf(why, sizeof why, "interpreter started ahead (pid %d) did not finish its imports in %d s",
                 (int)slot->pid, PRESTART_READY_MS / 1000);
        turn_off(group, local_rank, why);
        return false;
    }
    if (send_assignment(slot, spawn) != 0) {
        snprintf(why, sizeof why, "%s", elastic_last_error());
        turn_off(group, local_rank, why);
        return false;
    }
    close_fd(&slot->sock); /* EOF: the assignment is whole */
    *pid = slot->pid;
    *out_fd = slot->out_fd;
    *err_fd = slot->err_fd;
    ELASTIC_LOG_I("agent", "local rank %d: interpreter started ahead (pid %d, %.1f s ago, %s) is the worker",
                  local_rank, (int)slot->pid, (double)age / 1000.0,
                  imported ? "torch imported" : "still importing");
    slot->pid = 0;
    slot->out_fd = slot->err_fd = -1;
    return true;
}

void agent__prestart_stop(agent_group *group)
{
    agent_prestarts *p = group->prestarts;
    if (p == NULL || !p->on) return;
    p->off = true; /* the job ended here: quietly */
    if (p->timer_open) uv_timer_stop(&p->timer);
    discard_all(p);
}

void agent__prestart_close(agent_group *group)
{
    agent_prestarts *p = group->prestarts;
    if (p == NULL) return;
    agent__prestart_stop(group);
    if (p->timer_open) uv_close((uv_handle_t *)&p->timer, NULL);
    p->timer_open = false;
}

void agent__prestart_destroy(agent_group *group)
{
    agent_prestarts *p = group->prestarts;
    if (p == NULL) return;
    if (p->slots != NULL) discard_all(p);
    free(p->slots);
    free(p);
    group->prestarts = NULL;
}
