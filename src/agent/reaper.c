/*
 * No descendant of a worker outlives the agent, SIGKILL included. A tiny
 * reaper process, forked at start, holds the read end of a pipe whose write
 * end only the agent has (close-on-exec): the agent writes "+pgid"/"-pgid" as
 * workers come and go; when the agent dies, however it dies, the kernel closes
 * the pipe, and the reaper kills the workers' cgroup v2 (cgroup.kill: also
 * the descendants that left the group with setsid) when the agent could
 * create one, else every worker process group, removes the agent's run
 * directory, and exits. Independent of how workers are spawned: the agent
 * moves itself into that cgroup once the reaper is forked, so every child is
 * born inside it (no race with a worker that forks at once), and moves back
 * out before a normal exit.
 *
 * Where no cgroup can be made (a container or chroot without a cgroup file
 * system, kernels before 5.14, or ELASTIC_NO_CGROUP=1), a descendant that
 * left its worker's process group (setsid) is caught this way instead: the
 * agent is a child subreaper (an orphan of a worker's tree becomes its child,
 * not init's) and tells the reaper, every 0.2 s, of each descendant outside
 * the workers' groups ("=<pid> <start time>": checked before the kill, so a
 * reused pid is spared). When the agent dies the workers die at once (their
 * parent-death signal) and what they forked is init's: the reaper stops the
 * groups and what it was told of, walks /proc for anything those forked
 * since (by parent, stopping each as found so none forks past the walk) and
 * kills them all. Only a process that leaves its group within the last scan
 * before the agent's death, its parent dying with the agent, can escape.
 */
#include "common/tsan_fd.h"
#include "common/dir.h"
#include "agent/reaper.h"
#include "ckpt/memtier.h"

#include "agent/group.h"
#include "agent/memory.h"
#include "agent/probes.h"
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

#define REAPER_MAX_GROUPS  8192
#define REAPER_MAX_TOLD_OF 4096  /* descendants the agent told of (outside the groups) */
#define REAPER_MAX_DOOMED  32768 /* descendants found by the walk */
#define REAPER_SCAN_MS     200   /* the agent's look at its descendants (no cgroup) */

/* ---- the reaper process (after fork: raw system calls only) ---------------- */

typedef struct reaper_proc {
    pid_t pid;
    uint64_t start; /* start time (clock ticks after boot): a reused pid differs */
} reaper_proc;

static pid_t reaper_groups[REAPER_MAX_GROUPS];
static reaper_proc reaper_told_of[REAPER_MAX_TOLD_OF];
static int reaper_n_told_of;
static pid_t reaper_doomed[REAPER_MAX_DOOMED];
static int reaper_n_doomed;
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

/* "=<pid> <start>": a descendant outside the workers' groups, told by the agent. */
static void told_apply(const char *line)
{
    int64_t pid;
    uint64_t start;
    const char *at = line + 1;
    size_t digits = strspn(at, "0123456789");
    if (elastic__parse_i64_n(NULL, at, digits, 2, INT32_MAX, &pid) != 0 || at[digits] != ' ')
        return;
    at += digits + 1;
    digits = strspn(at, "0123456789");
    if (elastic__parse_u64_n(NULL, at, digits, 0, UINT64_MAX, &start) != 0) return;
    if (reaper_n_told_of < REAPER_MAX_TOLD_OF)
        reaper_told_of[reaper_n_told_of++] = (reaper_proc){ (pid_t)pid, start };
}

/* From /proc/<name>/stat ("pid (comm) state ppid pgrp ... starttime ..."):
 * false for a zombie or a process gone. comm may hold anything: fields are
 * read after its last ')'. */
static bool proc_stat(int proc, const char *name, pid_t *ppid, pid_t *pgrp, uint64_t *start)
{
    char path[48], buf[1024];
    if (strlen(name) > 20) return false;
    snprintf(path, sizeof path, "%s/stat", name);
    int fd = elastic__openat(proc, path, O_RDONLY | O_CLOEXEC); /* seen by TSan (tsan_fd.h) */
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    char *at = strrchr(buf, ')');
    if (at == NULL || at[1] != ' ' || at[2] == 'Z' || at[2] == 'X') return false;
    at += 2; /* field 3, the state; starttime is field 22 */
    int64_t fields[20] = { 0 };
    for (int field = 3; field <= 22; field++) {
        while (*at == ' ') at++;
        size_t len = strcspn(at, " ");
        if (len == 0) return false;
        if (field == 4 || field == 5 || field == 22)
            if (elastic__parse_i64_n(NULL, at, len, INT64_MIN, INT64_MAX, &fields[field - 3]) != 0)
                return false;
        at += len;
    }
    *ppid = (pid_t)fields[1];
    *pgrp = (pid_t)fields[2];
    *start = (uint64_t)fields[19];
    return true;
}

static bool in_groups(pid_t pgrp)
{
    for (int i = 0; i < REAPER_MAX_GROUPS; i++)
        if (reaper_groups[i] > 1 && reaper_groups[i] == pgrp) return true;
    return false;
}

static bool doomed(pid_t pid)
{
    for (int i = 0; i < reaper_n_doomed; i++)
        if (reaper_doomed[i] == pid) return true;
    return false;
}

static void doom(pid_t pid)
{
    if (reaper_n_doomed == REAPER_MAX_DOOMED) return;
    kill(pid, SIGSTOP); /* it forks no more while we look for its children */
    reaper_doomed[reaper_n_doomed++] = pid;
}

/* One pass over /proc: stops and dooms every process in a worker's group or
 * whose parent is doomed, and every one told of that is still the same process.
 * Returns how many it added. */
static int walk_once(void)
{
    int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (proc < 0) return 0;
    int added = 0;
    char buf[8192];
    for (;;) {
        long n = syscall(SYS_getdents64, proc, buf, sizeof buf);
        if (n <= 0) break;
        for (long at = 0; at < n;) {
            struct dirent64 *entry = (struct dirent64 *)(buf + at);
            at += entry->d_reclen;
            int64_t pid;
            if (elastic__parse_i64_n(NULL, entry->d_name, strlen(entry->d_name), 2, INT32_MAX,
                                     &pid) != 0 ||
                pid == getpid() || doomed((pid_t)pid))
                continue;
            pid_t ppid, pgrp;
            uint64_t start;
            if (!proc_stat(proc, entry->d_name, &ppid, &pgrp, &start)) continue;
            bool take = in_groups(pgrp) || doomed(ppid);
            for (int i = 0; !take && i < reaper_n_told_of; i++)
                take = reaper_told_of[i].pid == (pid_t)pid && reaper_told_of[i].start == start;
            if (!take) continue;
            doom((pid_t)pid);
            added++;
        }
    }
    close(proc);
    return added;
}

/* Without a cgroup: every worker group, everything they forked (even in a
 * session of its own) and everything the agent told of, stopped, then killed. */
static void kill_descendants(void)
{
    for (int i = 0; i < REAPER_MAX_GROUPS; i++)
        if (reaper_groups[i] > 1) kill(-reaper_groups[i], SIGSTOP);
    /* Each pass finds the children of what the last one stopped. */
    for (int pass = 0; pass < 1000 && walk_once() > 0; pass++) {
    }
    for (int i = 0; i < REAPER_MAX_GROUPS; i++)
        if (reaper_groups[i] > 1) kill(-reaper_groups[i], SIGKILL);
    for (int i = 0; i < reaper_n_doomed; i++) kill(reaper_doomed[i], SIGKILL);
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

/* Empties one directory level (the run directory holds plain files and a
 * socket), by descriptor: never through a link, only a directory of this
 * user (the stale sweep's too: it looked at the name before opening it). */
static void remove_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
        close(fd);
        return;
    }
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

static _Noreturn void reaper_main(int fd, const char *cgroup_dir, const char *run_dir,
                                  const char *memory_root)
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
    char line[48];
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
            else if (len > 1 && line[0] == '=')
                told_apply(line);
            else if (len > 1)
                groups_apply(line);
            len = 0;
        }
    }
    /* With a cgroup, cgroup.kill below ends every process the workers left,
     * whatever group it is in: the groups are not signalled by number then.
     * A group is told gone only when its slot's next worker starts, so a
     * worker that exited long ago leaves its number here; once its group is
     * empty the kernel may give that number to an unrelated process that
     * leads a group of its own, which a kill(-number) would end (the test
     * suite lost unrelated tests to it). Without a cgroup the groups are all
     * there is to go by. */
    if (cgroup_dir[0] == '\0')
        kill_descendants();
    else if (reaper_spare_cgroup)
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
    /* The memory tier: shared memory nobody frees otherwise. Only a tree
     * with the tier's marker is removed (memtier.c's shape, depth-bounded). */
    if (memory_root[0] != '\0') {
        ckpt_mem_tier tier;
        if (ckpt__mem_tier_open(memory_root, &tier) == 0) {
            ckpt__mem_tier_close(&tier);
            /* A worker the kill has not reached yet can still make a step
             * directory after the tree was listed (then rmdir fails and the
             * tree stays, marker gone): try again for up to a second. */
            for (int attempt = 0; attempt < 50 && ckpt__mem_tier_remove(memory_root) != 0;
                 attempt++)
                usleep(20000);
        }
    }
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
    DIR *dir = elastic__opendir(tmp);
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
    DIR *dir = elastic__opendir(parent);
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

/* ---- the agent's side ------------------------------------------------------ */

#define REAPER_MAX_TOLD 1024 /* adopted processes remembered as told */

/* The agent's view of its reaper; only this file reads or writes it. */
struct agent_reaper {
    int fd; /* the reaper's pipe; -1: none */
    pid_t pid;
    bool watching; /* its pipe is polled: a reaper that dies is replaced */
    pid_t zombie;  /* a replaced reaper not reaped yet; 0: none */
    uv_poll_t watch;
    bool unwatched;           /* the agent is closing: a reaper's end is expected */
    char cgroup[512];         /* the workers' cgroup v2, the agent's own while it runs; "": none */
    char parent_cgroup[400];  /* where the agent was (and returns before a normal exit) */
    char why[400];            /* why there is no cgroup ("" with one) */
    /* Without a cgroup the agent is a child subreaper; this timer looks for
     * the processes it adopted and tells the reaper of each once. */
    uv_timer_t scan;
    bool scanning;
    struct {
        pid_t pid;
        uint64_t start; /* /proc start time: a reused pid is another process */
    } told[REAPER_MAX_TOLD];
    int n_told;
    uint64_t agent_start; /* the agent's /proc start time: descendants start later */
};

int agent__reaper_init(agent_group *group)
{
    group->reaper = calloc(1, sizeof *group->reaper);
    if (group->reaper == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory (reaper)");
    group->reaper->fd = -1;
    return 0;
}

void agent__reaper_destroy(agent_group *group)
{
    free(group->reaper);
    group->reaper = NULL;
}

/* A cgroup of our own for the workers, when the agent may create one. */
static void make_worker_cgroup(agent_group *group)
{
    char *parent = group->reaper->parent_cgroup;
    group->reaper->cgroup[0] = '\0';
    const char *off = getenv("ELASTIC_NO_CGROUP"); /* tests of the fallback; hosts where it fails */
    if (off != NULL && strcmp(off, "1") == 0) {
        snprintf(group->reaper->why, sizeof group->reaper->why, "ELASTIC_NO_CGROUP=1");
        return;
    }
    if (!own_cgroup2(parent, sizeof group->reaper->parent_cgroup)) {
        snprintf(group->reaper->why, sizeof group->reaper->why, "no cgroup v2 file system");
        return;
    }
    sweep_stale_cgroups(parent);
    char dir[sizeof group->reaper->cgroup];
    snprintf(dir, sizeof dir, "%s/elastic-%d", parent, (int)getpid());
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(group->reaper->why, sizeof group->reaper->why, "%.300s: %s", dir, strerror(errno));
        return;
    }
    char kill_path[sizeof dir + 16];
    snprintf(kill_path, sizeof kill_path, "%s/cgroup.kill", dir);
    if (access(kill_path, W_OK) != 0) { /* kernels before 5.14 */
        snprintf(group->reaper->why, sizeof group->reaper->why, "no cgroup.kill (kernel < 5.14)");
        rmdir(dir);
        return;
    }
    snprintf(group->reaper->cgroup, sizeof group->reaper->cgroup, "%s", dir);
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
        if (group->reaper->cgroup[0] != '\0') join_cgroup(group->reaper->parent_cgroup);
        reaper_main(fds[0], group->reaper->cgroup, agent__probes_dir(group),
                    agent__memory_root(group));
    }
    close(fds[0]);
    group->reaper->fd = fds[1];
    group->reaper->pid = pid;
    return 0;
}

static void tell(agent_group *group, char sign, pid_t pgid);
static void watch_reaper(agent_group *group);

static void on_reaper_watch_closed(uv_handle_t *handle)
{
    agent_group *group = handle->data;
    group->reaper->watching = false;
    /* The handle may be initialised again only now: watch a replacement. */
    if (group->reaper->fd >= 0 && !group->reaper->unwatched) watch_reaper(group);
}

/* The reaper ended while the agent runs (killed by someone, or the OOM
 * killer): without one, a SIGKILL of the agent would leave every worker
 * behind. A new reaper is forked at once and told every live worker. */
static void on_reaper_gone(uv_poll_t *poll, int status, int events)
{
    (void)status, (void)events;
    agent_group *group = poll->data;
    uv_close((uv_handle_t *)poll, on_reaper_watch_closed);       /* stops polling the fd at once */
    if (group->reaper->fd < 0 || group->reaper->unwatched) return; /* stopping: it was told to go */
    ELASTIC_LOG_W(
        "agent", "the reaper (pid %d) is gone; starting another so no worker can outlive the agent",
        (int)group->reaper->pid);
    close(group->reaper->fd);
    group->reaper->fd = -1;
    /* Its pipe end closes as it exits, so it is (about to be) a zombie,
     * reaped now if it already is, else at stop. */
    pid_t old = group->reaper->pid;
    group->reaper->zombie = waitpid(old, NULL, WNOHANG) == old ? 0 : old;
    if (fork_reaper(group) != 0) {
        ELASTIC_LOG_E("agent", "%s: workers would outlive a SIGKILL of the agent",
                      elastic_last_error());
        return;
    }
    for (int i = 0; i < group->nworkers; i++)
        if (group->workers[i].running) tell(group, '+', group->workers[i].pid);
    group->reaper->n_told = 0; /* the next scan tells the new one of every descendant */
}

/* The write end of the reaper's pipe on the agent's loop: the kernel marks
 * it with an error (EPOLLERR) once no reader is left, i.e. the reaper has
 * ended. (Not a pidfd: a descriptor made by pipe2() is one ThreadSanitizer
 * knows, where a raw pidfd_open() number can look like another thread's
 * closed socket.) */
static void watch_reaper(agent_group *group)
{
    if (uv_poll_init(group->loop, &group->reaper->watch, group->reaper->fd) != 0) return;
    group->reaper->watch.data = group;
    group->reaper->watching = true;
    /* No readiness asked for (the pipe is always writable): only its error wakes us. */
    uv_poll_start(&group->reaper->watch, UV_DISCONNECT, on_reaper_gone);
}

/* One process of the table the agent's scan reads. */
typedef struct scanned {
    pid_t pid, ppid, pgrp;
    uint64_t start;
} scanned;

static bool worker_group(const agent_group *group, pid_t pgrp)
{
    for (int i = 0; i < group->nworkers; i++)
        if (group->workers[i].running && group->workers[i].pid == pgrp) return true;
    return false;
}

/* Tells the reaper of one process (once: the told list remembers it). */
static void tell_process(agent_group *group, const scanned *p)
{
    for (int i = 0; i < group->reaper->n_told; i++)
        if (group->reaper->told[i].pid == p->pid && group->reaper->told[i].start == p->start)
            return;
    if (group->reaper->n_told == REAPER_MAX_TOLD) { /* forget the oldest */
        memmove(group->reaper->told, group->reaper->told + 1,
                (REAPER_MAX_TOLD - 1) * sizeof group->reaper->told[0]);
        group->reaper->n_told--;
    }
    group->reaper->told[group->reaper->n_told].pid = p->pid;
    group->reaper->told[group->reaper->n_told++].start = p->start;
    char line[48];
    int len = snprintf(line, sizeof line, "=%d %llu\n", (int)p->pid, (unsigned long long)p->start);
    ssize_t n;
    do n = group->reaper->fd >= 0 ? write(group->reaper->fd, line, (size_t)len) : len;
    while (n < 0 && errno == EINTR);
    ELASTIC_LOG_D("agent", "reaper: told of pid %d (a descendant outside the workers' groups)",
                  (int)p->pid);
}

/* No cgroup: a worker's parent-death signal kills it the moment the agent
 * dies, and whatever it forked into a session of its own is then init's,
 * out of the reaper's reach. So while the agent runs, every 0.2 s, each of
 * its descendants outside the workers' process groups (setsid, or adopted:
 * the agent is a child subreaper) is told to the reaper once. */
static void scan_descendants(uv_timer_t *timer)
{
    agent_group *group = timer->data;
    enum { MAX_SCANNED = 16384 };
    scanned *table = malloc(MAX_SCANNED * sizeof *table);
    bool *mine = calloc(MAX_SCANNED, sizeof *mine);
    DIR *proc = elastic__opendir("/proc");
    int proc_fd = proc != NULL ? dirfd(proc) : -1;
    size_t n = 0;
    struct dirent *entry;
    while (table != NULL && mine != NULL && proc_fd >= 0 && n < MAX_SCANNED &&
           (entry = readdir(proc)) != NULL) {
        int64_t pid;
        if (elastic__parse_i64_n(NULL, entry->d_name, strlen(entry->d_name), 2, INT32_MAX, &pid) !=
                0 ||
            pid == group->reaper->pid)
            continue;
        table[n].pid = (pid_t)pid;
        /* Only what started after the agent can descend from it: a short table. */
        if (proc_stat(proc_fd, entry->d_name, &table[n].ppid, &table[n].pgrp, &table[n].start) &&
            table[n].start >= group->reaper->agent_start)
            n++;
    }
    if (proc != NULL) closedir(proc);
    /* The agent's descendants: a closure over parents, a pass per level. */
    pid_t self = getpid();
    for (bool grew = true; grew && table != NULL && mine != NULL;) {
        grew = false;
        for (size_t i = 0; i < n; i++) {
            if (mine[i]) continue;
            bool child = table[i].ppid == self;
            for (size_t j = 0; !child && j < n; j++)
                child = mine[j] && table[j].pid == table[i].ppid;
            if (child) mine[i] = grew = true;
        }
    }
    for (size_t i = 0; table != NULL && mine != NULL && i < n; i++)
        if (mine[i] && !worker_group(group, table[i].pgrp)) tell_process(group, &table[i]);
    free(table);
    free(mine);
}

int agent__reaper_start(agent_group *group)
{
    make_worker_cgroup(group);
    int rc = fork_reaper(group);
    if (rc != 0) return rc;
    if (group->reaper->cgroup[0] != '\0' && join_cgroup(group->reaper->cgroup) != 0) {
        snprintf(group->reaper->why, sizeof group->reaper->why, "cannot enter %.300s: %s",
                 group->reaper->cgroup, strerror(errno));
        group->reaper->cgroup[0] = '\0'; /* the reaper finds it empty and removes it */
    }
    if (group->reaper->cgroup[0] != '\0') {
        ELASTIC_LOG_I("agent", "reaper: cgroup %s (cgroup.kill takes every descendant)",
                      group->reaper->cgroup);
    } else {
        /* Orphans of the workers' trees become ours, not init's, while we run. */
        bool subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
        int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        pid_t ppid, pgrp;
        char self[24];
        snprintf(self, sizeof self, "%d", (int)getpid());
        if (proc < 0 || !proc_stat(proc, self, &ppid, &pgrp, &group->reaper->agent_start))
            subreaper = false; /* no /proc: process groups only */
        if (proc >= 0) close(proc);
        ELASTIC_LOG_I("agent", "reaper: no cgroup (%s): %s", group->reaper->why,
                      subreaper ? "process groups, and every descendant that leaves them "
                                  "(the agent, a child subreaper, tells the reaper of each)"
                                : "process groups only (no /proc or no child subreaper)");
        if (subreaper && uv_timer_init(group->loop, &group->reaper->scan) == 0) {
            group->reaper->scan.data = group;
            group->reaper->scanning = true;
            uv_timer_start(&group->reaper->scan, scan_descendants, 0, REAPER_SCAN_MS);
            uv_unref((uv_handle_t *)&group->reaper->scan); /* never what keeps the loop alive */
        }
    }
    watch_reaper(group);
    return 0;
}

static void tell(agent_group *group, char sign, pid_t pgid)
{
    if (group->reaper->fd < 0 || pgid <= 1) return;
    char line[24];
    int len = snprintf(line, sizeof line, "%c%d\n", sign, (int)pgid);
    ssize_t n;
    do n = write(group->reaper->fd, line, (size_t)len); /* < PIPE_BUF: atomic */
    while (n < 0 && errno == EINTR);
}

void agent__reaper_track(agent_group *group, pid_t old_pgid, pid_t pgid)
{
    if (old_pgid > 1) tell(group, '-', old_pgid);
    tell(group, '+', pgid);
}

void agent__reaper_unwatch(agent_group *group)
{
    group->reaper->unwatched = true;
    if (group->reaper->scanning) {
        uv_close((uv_handle_t *)&group->reaper->scan, NULL);
        group->reaper->scanning = false;
    }
    if (group->reaper->watching && !uv_is_closing((uv_handle_t *)&group->reaper->watch))
        uv_close((uv_handle_t *)&group->reaper->watch, on_reaper_watch_closed);
}

void agent__reaper_stop(agent_group *group)
{
    if (group->reaper->fd < 0) return;
    /* Out of the workers' cgroup first: the reaper kills whatever is left in it. */
    if (group->reaper->cgroup[0] != '\0' && join_cgroup(group->reaper->parent_cgroup) != 0) {
        ELASTIC_LOG_W("agent", "cannot leave %s (%s): leaving its processes alone",
                      group->reaper->cgroup, strerror(errno));
        ssize_t n = write(group->reaper->fd, "!\n", 2);
        (void)n;
    }
    close(group->reaper->fd); /* the reaper's EOF: it cleans up and exits */
    group->reaper->fd = -1;
    int status;
    while (waitpid(group->reaper->pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (group->reaper->zombie > 0)
        waitpid(group->reaper->zombie, NULL, WNOHANG); /* ended long ago */
}
