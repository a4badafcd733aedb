/*
 * No descendant of a worker outlives the agent, SIGKILL included. A tiny
 * reaper process, forked at start, holds the read end of a pipe whose write
 * end only the agent has (close-on-exec): the agent writes "+pgid"/"-pgid" as
 * workers come and go; when the agent dies, however it dies, the kernel closes
 * the pipe, and the reaper kills every worker process group, kills the
 * workers' cgroup v2 (cgroup.kill: also the descendants that left the group
 * with setsid) when the agent could create one, removes the agent's run
 * directory, and exits. Independent of how workers are spawned: the agent
 * moves itself into that cgroup once the reaper is forked, so every child is
 * born inside it (no race with a worker that forks at once), and moves back
 * out before a normal exit.
 */
#include "agent/reaper.h"

#include "agent/group.h"
#include "common/parse_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define REAPER_MAX_GROUPS 8192

/* ---- the reaper process (after fork: raw system calls only) ---------------- */

static pid_t reaper_groups[REAPER_MAX_GROUPS];
static int reaper_spare_cgroup; /* "!": the agent could not leave the cgroup; do not kill it */

static void groups_apply(const char *line)
{
    int64_t pgid; /* never 0 (our group) or 1 (init); the parser touches no library state */
    size_t digits = strspn(line + 1, "0123456789");
    if (elastic__parse_i64_n(NULL, line + 1, digits, 2, INT32_MAX, &pgid) != 0) return;
    for (int i = 0; i < REAPER_MAX_GROUPS; i++) {
        if (line[0] == '+' && reaper_groups[i] == 0) {
            reaper_groups[i] = (pid_t)pgid;
            return;
        }
        if (line[0] == '-' && reaper_groups[i] == (pid_t)pgid) {
            reaper_groups[i] = 0;
            return;
        }
    }
}

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = write(fd, text, strlen(text));
    (void)n;
    close(fd);
}

/* Whether the cgroup still has processes ("populated 1" in cgroup.events). */
static int cgroup_populated(const char *dir)
{
    char path[600], buf[256];
    snprintf(path, sizeof path, "%s/cgroup.events", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    return strstr(buf, "populated 1") != NULL;
}

/* Empties one directory level (the run directory holds plain files and a socket). */
static void remove_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        for (long at = 0; at < n;) {
            struct dirent64 *entry = (struct dirent64 *)(buf + at);
            at += entry->d_reclen;
            if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0)
                unlinkat(fd, entry->d_name, 0);
        }
    }
    close(fd);
    rmdir(dir);
}

static _Noreturn void reaper_main(int fd, const char *cgroup_dir, const char *run_dir)
{
    /* Only the pipe: an inherited listening socket (the store) must close with the agent. */
    if (fd != 3) {
        dup2(fd, 3);
        fd = 3;
    }
    syscall(SYS_close_range, 4, ~0U, 0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
    }
    setpgid(0, 0); /* a kill of the agent's process group must not take the reaper first */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_NAME, "elastic-reaper");
    char line[32];
    size_t len = 0;
    char buf[512];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break; /* EOF: the agent is gone */
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (len < sizeof line - 1) line[len++] = buf[i];
                continue;
            }
            line[len] = '\0';
            if (len == 1 && line[0] == '!')
                reaper_spare_cgroup = 1;
            else if (len > 1)
                groups_apply(line);
            len = 0;
        }
    }
    for (int i = 0; i < REAPER_MAX_GROUPS; i++)
        if (reaper_groups[i] > 1) kill(-reaper_groups[i], SIGKILL);
    if (cgroup_dir[0] != '\0' && !reaper_spare_cgroup) {
        char path[600];
        snprintf(path, sizeof path, "%s/cgroup.kill", cgroup_dir);
        write_file(path, "1");
        for (int waited = 0; waited < 200 && cgroup_populated(cgroup_dir); waited++) usleep(10000);
        rmdir(cgroup_dir);
    }
    if (run_dir[0] != '\0') remove_dir(run_dir);
    _exit(0);
}

/* The pid in "elastic-<pid>" followed by `after` ('-' or the end), or 0 (not
 * such a name, or pid 0 or 1, never an agent's). */
static int name_pid(const char *name, char after)
{
    if (strncmp(name, "elastic-", 8) != 0) return 0;
    const char *digits = name + 8;
    size_t n = strspn(digits, "0123456789");
    int64_t pid;
    if (digits[n] != after || elastic__parse_i64_n(NULL, digits, n, 2, INT32_MAX, &pid) != 0)
        return 0;
    return (int)pid;
}

/* Removes run directories ("elastic-<pid>-*" under tmp) of agents that died
 * without cleaning up (SIGKILL before the reaper existed, or an old version). */
void agent__reaper_sweep_stale(const char *tmp)
{
    DIR *dir = opendir(tmp);
    if (dir == NULL) return;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        int pid = name_pid(entry->d_name, '-');
        if (pid == 0) continue;
        if (kill(pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to judge) */
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", tmp, entry->d_name);
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
        ELASTIC_LOG_I("agent", "removing %s, left by agent %d that is gone", path, pid);
        remove_dir(path);
    }
    closedir(dir);
}

/* ---- the agent's side --------------------------------------------------------- */

/* The cgroup v2 mount point and this process's cgroup in it, or false. */
static bool own_cgroup2(char *dir, size_t size)
{
    char line[1024], mount[512] = "", path[512] = "";
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) return false;
    while (mount[0] == '\0' && fgets(line, sizeof line, f) != NULL) {
        char *sep = strstr(line, " - cgroup2 ");
        char point[512];
        if (sep != NULL && sscanf(line, "%*s %*s %*s %*s %511s", point) == 1)
            snprintf(mount, sizeof mount, "%s", point);
    }
    fclose(f);
    f = fopen("/proc/self/cgroup", "re");
    if (f == NULL) return false;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "0::", 3) == 0) sscanf(line + 3, "%511s", path);
    fclose(f);
    if (mount[0] == '\0' || path[0] == '\0') return false;
    int n = snprintf(dir, size, "%s%s", mount, strcmp(path, "/") == 0 ? "" : path);
    return n > 0 && (size_t)n < size;
}

/* Moves this whole process (every thread) into a cgroup directory. */
static int join_cgroup(const char *dir)
{
    char path[600], text[24];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    snprintf(text, sizeof text, "%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    int rc = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;
    int err = errno;
    if (fd >= 0) close(fd);
    errno = err;
    return rc;
}

/* Removes empty "elastic-<pid>" cgroups of agents that are gone (a reaper that
 * was killed itself); rmdir of a cgroup that still has processes just fails. */
static void sweep_stale_cgroups(const char *parent)
{
    DIR *dir = opendir(parent);
    if (dir == NULL) return;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        int pid = name_pid(entry->d_name, '\0');
        if (pid == 0) continue;
        if (kill(pid, 0) == 0 || errno != ESRCH) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", parent, entry->d_name);
        rmdir(path);
    }
    closedir(dir);
}

/* A cgroup of our own for the workers, when the agent may create one. */
static void make_worker_cgroup(agent_group *group)
{
    char *parent = group->reaper_parent_cgroup;
    group->reaper_cgroup[0] = '\0';
    if (!own_cgroup2(parent, sizeof group->reaper_parent_cgroup)) return;
    sweep_stale_cgroups(parent);
    char dir[sizeof group->reaper_cgroup];
    snprintf(dir, sizeof dir, "%s/elastic-%d", parent, (int)getpid());
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        ELASTIC_LOG_I("agent", "no cgroup for the workers (%s: %s): process groups only", dir,
                      strerror(errno));
        return;
    }
    char kill_path[sizeof dir + 16];
    snprintf(kill_path, sizeof kill_path, "%s/cgroup.kill", dir);
    if (access(kill_path, W_OK) != 0) { /* kernels before 5.14 */
        rmdir(dir);
        return;
    }
    snprintf(group->reaper_cgroup, sizeof group->reaper_cgroup, "%s", dir);
}

/* Forks the reaper process for the group's cgroup and run directory. */
static int fork_reaper(agent_group *group)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return elastic__fail(ELASTIC_ESYS, "reaper pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return elastic__fail(ELASTIC_ESYS, "cannot start the reaper: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[1]);
        /* A replacement is forked from inside the workers' cgroup: out of it
         * first, or its own cgroup.kill would end it before it cleans up. */
        if (group->reaper_cgroup[0] != '\0') join_cgroup(group->reaper_parent_cgroup);
        reaper_main(fds[0], group->reaper_cgroup, group->probe_dir);
    }
    close(fds[0]);
    group->reaper_fd = fds[1];
    group->reaper_pid = pid;
    return 0;
}

static void tell(agent_group *group, char sign, pid_t pgid);
static void watch_reaper(agent_group *group);

static void on_reaper_watch_closed(uv_handle_t *handle)
{
    agent_group *group = handle->data;
    group->reaper_watching = false;
    /* The handle may be initialised again only now: watch a replacement. */
    if (group->reaper_fd >= 0 && !group->reaper_unwatched) watch_reaper(group);
}

/* The reaper ended while the agent runs (killed by someone, or the OOM
 * killer): without one, a SIGKILL of the agent would leave every worker
 * behind. A new reaper is forked at once and told every live worker. */
static void on_reaper_gone(uv_poll_t *poll, int status, int events)
{
    (void)status, (void)events;
    agent_group *group = poll->data;
    uv_close((uv_handle_t *)poll, on_reaper_watch_closed);       /* stops polling the fd at once */
    if (group->reaper_fd < 0 || group->reaper_unwatched) return; /* stopping: it was told to go */
    ELASTIC_LOG_W(
        "agent", "the reaper (pid %d) is gone; starting another so no worker can outlive the agent",
        (int)group->reaper_pid);
    close(group->reaper_fd);
    group->reaper_fd = -1;
    /* Its pipe end closes as it exits, so it is (about to be) a zombie,
     * reaped now if it already is, else at stop. */
    pid_t old = group->reaper_pid;
    group->reaper_zombie = waitpid(old, NULL, WNOHANG) == old ? 0 : old;
    if (fork_reaper(group) != 0) {
        ELASTIC_LOG_E("agent", "%s: workers would outlive a SIGKILL of the agent",
                      elastic_last_error());
        return;
    }
    for (int i = 0; i < group->nworkers; i++)
        if (group->workers[i].running) tell(group, '+', group->workers[i].pid);
}

/* The write end of the reaper's pipe on the agent's loop: the kernel marks
 * it with an error (EPOLLERR) once no reader is left, i.e. the reaper has
 * ended. (Not a pidfd: a descriptor made by pipe2() is one ThreadSanitizer
 * knows, where a raw pidfd_open() number can look like another thread's
 * closed socket.) */
static void watch_reaper(agent_group *group)
{
    if (uv_poll_init(group->loop, &group->reaper_watch, group->reaper_fd) != 0) return;
    group->reaper_watch.data = group;
    group->reaper_watching = true;
    /* No readiness asked for (the pipe is always writable): only its error wakes us. */
    uv_poll_start(&group->reaper_watch, UV_DISCONNECT, on_reaper_gone);
}

int agent__reaper_start(agent_group *group)
{
    make_worker_cgroup(group);
    int rc = fork_reaper(group);
    if (rc != 0) return rc;
    if (group->reaper_cgroup[0] != '\0' && join_cgroup(group->reaper_cgroup) != 0) {
        ELASTIC_LOG_I("agent", "cannot enter %s (%s): process groups only", group->reaper_cgroup,
                      strerror(errno));
        group->reaper_cgroup[0] = '\0'; /* the reaper finds it empty and removes it */
    }
    watch_reaper(group);
    return 0;
}

static void tell(agent_group *group, char sign, pid_t pgid)
{
    if (group->reaper_fd < 0 || pgid <= 1) return;
    char line[24];
    int len = snprintf(line, sizeof line, "%c%d\n", sign, (int)pgid);
    ssize_t n;
    do n = write(group->reaper_fd, line, (size_t)len); /* < PIPE_BUF: atomic */
    while (n < 0 && errno == EINTR);
}

void agent__reaper_track(agent_group *group, pid_t old_pgid, pid_t pgid)
{
    if (old_pgid > 1) tell(group, '-', old_pgid);
    tell(group, '+', pgid);
}

void agent__reaper_unwatch(agent_group *group)
{
    group->reaper_unwatched = true;
    if (group->reaper_watching && !uv_is_closing((uv_handle_t *)&group->reaper_watch))
        uv_close((uv_handle_t *)&group->reaper_watch, on_reaper_watch_closed);
}

void agent__reaper_stop(agent_group *group)
{
    if (group->reaper_fd < 0) return;
    /* Out of the workers' cgroup first: the reaper kills whatever is left in it. */
    if (group->reaper_cgroup[0] != '\0' && join_cgroup(group->reaper_parent_cgroup) != 0) {
        ELASTIC_LOG_W("agent", "cannot leave %s (%s): leaving its processes alone",
                      group->reaper_cgroup, strerror(errno));
        ssize_t n = write(group->reaper_fd, "!\n", 2);
        (void)n;
    }
    close(group->reaper_fd); /* the reaper's EOF: it cleans up and exits */
    group->reaper_fd = -1;
    int status;
    while (waitpid(group->reaper_pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (group->reaper_zombie > 0) waitpid(group->reaper_zombie, NULL, WNOHANG); /* ended long ago */
}
