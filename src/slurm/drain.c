/*
 * Draining a node the job gives up on: `scontrol update NodeName=X
 * State=DRAIN Reason="elastic: <why>"`, run with a deadline (it talks to
 * slurmctld, which may be slow or gone). It blocks, so the agent calls it
 * from its thread pool. Without Slurm operator rights scontrol refuses; that
 * is ELASTIC_EPERM with one line saying so, and the caller goes on.
 */
#include "slurm/slurm.h"

#include "common/clock.h"
#include "common/env_secrets.h"
#include "common/names.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void elastic__slurm_drain_reason(const char *why, char *reason, size_t size)
{
    if (size == 0) return;
    snprintf(reason, size, "elastic: %s", why != NULL && why[0] != '\0' ? why : "gave up on it");
    /* One line of plain text: scontrol and sinfo print it as it is. */
    for (char *c = reason; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e || *c == '"' || *c == '\\')
            *c = ' ';
}

/* The first line of what scontrol wrote, trimmed. */
static void first_line(const char *text, char *line, size_t size)
{
    while (*text == ' ' || *text == '\n') text++;
    size_t len = strcspn(text, "\n");
    if (len >= size) len = size - 1;
    memcpy(line, text, len);
    line[len] = '\0';
}

static bool says_no_permission(const char *output)
{
    return strstr(output, "ermission denied") != NULL || strstr(output, "Invalid user") != NULL ||
           strstr(output, "Access denied") != NULL;
}

/* Reads the child's output into buf until EOF or the deadline. */
static bool read_until(int fd, char *buf, size_t size, uint64_t deadline)
{
    size_t used = 0;
    for (;;) {
        uint64_t now = elastic__now_ms();
        if (now >= deadline) return false;
        struct pollfd pfd = { fd, POLLIN, 0 };
        int ready = poll(&pfd, 1, (int)(deadline - now));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return ready == 0 ? false : true;
        char scratch[512];
        ssize_t n = read(fd, used + 1 < size ? buf + used : scratch,
                         used + 1 < size ? size - 1 - used : sizeof scratch);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return true;
        if (used + 1 < size) used += (size_t)n;
        buf[used] = '\0';
    }
}

/* `node` is a plain host name and one of the job's own nodes
 * (SLURM_JOB_NODELIST): scontrol expands host lists, so a name such as
 * "gpu[001-512],login01" — a peer's node id, say — would drain every node it
 * names. 0, or ELASTIC_EPERM with detail saying why nothing ran. */
static int check_node(const char *node, char *detail, size_t detail_size)
{
    if (!elastic__host_name_ok(node, ELASTIC__HOSTLIST_NAME_MAX)) {
        snprintf(detail, detail_size,
                 "will not drain \"%.64s\": not a plain host name (scontrol would read it as "
                 "a host list)",
                 node != NULL ? node : "");
        return ELASTIC_EPERM;
    }
    const char *nodelist = getenv("SLURM_JOB_NODELIST");
    elastic__hostlist list = { 0 };
    if (nodelist == NULL || elastic__hostlist_expand("SLURM_JOB_NODELIST", nodelist, 0, &list)) {
        snprintf(detail, detail_size,
                 "will not drain %s: the job's node list (SLURM_JOB_NODELIST) is %s", node,
                 nodelist == NULL ? "not set" : "not readable");
        return ELASTIC_EPERM;
    }
    bool member = false;
    for (size_t i = 0; i < list.count && !member; i++) member = strcmp(list.names[i], node) == 0;
    elastic__hostlist_free(&list);
    if (!member) {
        snprintf(detail, detail_size,
                 "will not drain %s: not a node of this job (SLURM_JOB_NODELIST)", node);
        return ELASTIC_EPERM;
    }
    return 0;
}

int elastic__slurm_drain(const char *node, const char *why, int timeout_ms, char *detail,
                         size_t detail_size)
{
    int refused = check_node(node, detail, detail_size);
    if (refused != 0) return refused;
    char reason[160], node_arg[ELASTIC__HOSTLIST_NAME_MAX + 16], reason_arg[176];
    elastic__slurm_drain_reason(why, reason, sizeof reason);
    snprintf(node_arg, sizeof node_arg, "NodeName=%s", node);
    snprintf(reason_arg, sizeof reason_arg, "Reason=%s", reason);
    const char *scontrol = getenv("ELASTIC_SCONTROL");
    if (scontrol == NULL || scontrol[0] == '\0') scontrol = "scontrol";
    char *argv[] = { (char *)scontrol, "update", node_arg, "State=DRAIN", reason_arg, NULL };
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        snprintf(detail, detail_size, "cannot drain %s: pipe: %s", node, strerror(errno));
        return ELASTIC_ESYS;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipefd[1], 2);
    pid_t pid = -1;
    char **env = elastic__environ_without_secrets(); /* scontrol needs no token */
    int rc = env != NULL ? posix_spawnp(&pid, scontrol, &actions, NULL, argv, env) : ENOMEM;
    free(env);
    posix_spawn_file_actions_destroy(&actions);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        snprintf(detail, detail_size, "cannot drain %s: cannot run %s: %s", node, scontrol,
                 strerror(rc));
        return ELASTIC_ENOTFOUND;
    }
    char output[1024] = "";
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    bool in_time = read_until(pipefd[0], output, sizeof output, deadline);
    close(pipefd[0]);
    int status = 0;
    /* Its output ended; its exit must come by the same deadline. */
    while (in_time && waitpid(pid, &status, WNOHANG) == 0) {
        if (elastic__now_ms() >= deadline) {
            in_time = false;
            break;
        }
        struct timespec pause_time = { 0, 5 * 1000 * 1000 };
        nanosleep(&pause_time, NULL);
    }
    if (!in_time) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    char line[200];
    first_line(output, line, sizeof line);
    if (!in_time) {
        snprintf(detail, detail_size, "cannot drain %s: scontrol did not answer within %d ms", node,
                 timeout_ms);
        return ELASTIC_ETIMEDOUT;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        snprintf(detail, detail_size, "drained %s (Reason=\"%s\")", node, reason);
        return 0;
    }
    if (says_no_permission(output)) {
        snprintf(detail, detail_size,
                 "cannot drain %s: scontrol says \"%s\" (draining needs Slurm operator rights); "
                 "the job goes on",
                 node, line);
        return ELASTIC_EPERM;
    }
    snprintf(detail, detail_size, "cannot drain %s: scontrol failed (%s%d): %s", node,
             WIFEXITED(status) ? "exit " : "signal ",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
             line[0] != '\0' ? line : "no output");
    return ELASTIC_EIO;
}
