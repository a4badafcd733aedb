/*
 * OOM-kill witnesses (oom.h): the memory cgroup's oom_kill count, and the
 * kernel's log. Small bounded reads; nothing here blocks (kmsg is read
 * non-blocking, up to a record count).
 */
#include "agent/oom.h"

#include "common/small_file.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OOM_FILE_MAX     4096   /* memory.events, memory.oom_control, /proc/<pid>/cgroup */
#define OOM_KMSG_RECORDS 100000 /* the log's ring holds far fewer on any kernel we know */
#define OOM_KMSG_RECORD  8192

static bool read_number(const char *p, const char *end, uint64_t *out)
{
    uint64_t n = 0;
    const char *start = p;
    while (p < end && isdigit((unsigned char)*p)) {
        if (n > (UINT64_MAX - 9) / 10) return false;
        n = n * 10 + (uint64_t)(*p++ - '0');
    }
    *out = n;
    return p > start;
}

int agent__oom_parse_kills(const char *text, size_t len, uint64_t *kills)
{
    const char *end = text + len;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *stop = nl != NULL ? nl : end;
        if (stop - line > 9 && memcmp(line, "oom_kill ", 9) == 0) {
            uint64_t n;
            const char *after = line + 9;
            if (!read_number(after, stop, &n)) return -1;
            while (after < stop && isdigit((unsigned char)*after)) after++;
            if (after != stop) return -1;
            *kills = n;
            return 0;
        }
        line = stop + 1;
    }
    return -1;
}

int agent__oom_cgroup_dir(const char *proc_cgroup, size_t len, const char *cgroup_root, char *out,
                          size_t size, bool *v1)
{
    const char *end = proc_cgroup + len;
    const char *v2_path = NULL, *v1_path = NULL;
    size_t v2_len = 0, v1_len = 0;
    for (const char *line = proc_cgroup; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *stop = nl != NULL ? nl : end;
        const char *c1 = memchr(line, ':', (size_t)(stop - line));
        const char *c2 = c1 != NULL ? memchr(c1 + 1, ':', (size_t)(stop - c1 - 1)) : NULL;
        if (c2 != NULL && c2 + 1 < stop && c2[1] == '/') {
            size_t ctl_len = (size_t)(c2 - c1 - 1);
            bool memory = false;
            for (const char *q = c1 + 1; q < c2;) { /* "cpu,memory" lists controllers */
                const char *comma = memchr(q, ',', (size_t)(c2 - q));
                const char *e = comma != NULL ? comma : c2;
                memory |= e - q == 6 && memcmp(q, "memory", 6) == 0;
                q = e + 1;
            }
            if (memory) {
                v1_path = c2 + 1;
                v1_len = (size_t)(stop - v1_path);
            } else if (ctl_len == 0 && line[0] == '0' && c1 == line + 1) {
                v2_path = c2 + 1;
                v2_len = (size_t)(stop - v2_path);
            }
        }
        line = stop + 1;
    }
    const char *path = v1_path != NULL ? v1_path : v2_path;
    size_t path_len = v1_path != NULL ? v1_len : v2_len;
    if (path == NULL || memmem(path, path_len, "/../", 4) != NULL) return -1;
    while (path_len > 1 && path[path_len - 1] == '/') path_len--;
    *v1 = v1_path != NULL;
    int n = snprintf(out, size, "%s%s%.*s", cgroup_root, *v1 ? "/memory" : "",
                     path_len == 1 ? 0 : (int)path_len, path);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

bool agent__oom_kmsg_record_names(const char *record, size_t len, pid_t pid, uint64_t since_us)
{
    const char *end = record + len;
    const char *semi = memchr(record, ';', len);
    if (semi == NULL) return false;
    /* prio,seq,ts_us,...: the third field */
    const char *p = record;
    for (int field = 0; field < 2 && p < semi; field++) {
        p = memchr(p, ',', (size_t)(semi - p));
        if (p == NULL) return false;
        p++;
    }
    uint64_t ts = 0;
    if (!read_number(p, semi, &ts) || ts < since_us) return false;
    char want[48];
    int n = snprintf(want, sizeof want, "Killed process %d (", (int)pid);
    return memmem(semi + 1, (size_t)(end - semi - 1), want, (size_t)n) != NULL;
}

static uint64_t monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void agent__oom_mark_at(const char *proc_root, const char *cgroup_root, pid_t pid,
                        agent_oom_mark *mark)
{
    memset(mark, 0, sizeof *mark);
    mark->since_us = monotonic_us();
    char path[256], text[OOM_FILE_MAX], dir[400];
    bool v1 = false;
    snprintf(path, sizeof path, "%s/%d/cgroup", proc_root, (int)pid);
    ssize_t len = elastic__read_small_text(path, text, sizeof text);
    if (len <= 0 ||
        agent__oom_cgroup_dir(text, (size_t)len, cgroup_root, dir, sizeof dir, &v1) != 0)
        return;
    snprintf(mark->counter_path, sizeof mark->counter_path, "%s/%s", dir,
             v1 ? "memory.oom_control" : "memory.events");
    len = elastic__read_small_text(mark->counter_path, text, sizeof text);
    mark->known = len > 0 && agent__oom_parse_kills(text, (size_t)len, &mark->kills) == 0;
}

void agent__oom_mark(pid_t pid, agent_oom_mark *mark)
{
    agent__oom_mark_at("/proc", "/sys/fs/cgroup", pid, mark);
}

/* The kernel's log, from its oldest record on, for "Killed process <pid>". */
static bool kmsg_names(const char *kmsg_path, pid_t pid, uint64_t since_us)
{
    int fd = open(kmsg_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false; /* not root, dmesg_restrict: the cgroup is the only witness */
    char record[OOM_KMSG_RECORD];
    bool found = false;
    for (int i = 0; i < OOM_KMSG_RECORDS && !found; i++) {
        ssize_t got = read(fd, record, sizeof record);
        if (got < 0 && (errno == EINTR || errno == EPIPE)) continue; /* EPIPE: overwritten */
        if (got <= 0) break;                                         /* EAGAIN: the end */
        found = agent__oom_kmsg_record_names(record, (size_t)got, pid, since_us);
    }
    close(fd);
    return found;
}

bool agent__oom_killed_at(const agent_oom_mark *mark, pid_t pid, const char *kmsg_path, char *how,
                          size_t how_size)
{
    if (how_size > 0) how[0] = '\0';
    if (mark->known) {
        char text[OOM_FILE_MAX];
        uint64_t now = 0;
        ssize_t len = elastic__read_small_text(mark->counter_path, text, sizeof text);
        if (len > 0 && agent__oom_parse_kills(text, (size_t)len, &now) == 0 && now > mark->kills) {
            const char *base = strrchr(mark->counter_path, '/');
            snprintf(how, how_size, "%s oom_kill %" PRIu64 " -> %" PRIu64,
                     base != NULL ? base + 1 : mark->counter_path, mark->kills, now);
            return true;
        }
    }
    if (kmsg_path != NULL && kmsg_names(kmsg_path, pid, mark->since_us)) {
        snprintf(how, how_size, "the kernel's log: Killed process %d", (int)pid);
        return true;
    }
    return false;
}

bool agent__oom_killed(const agent_oom_mark *mark, pid_t pid, char *how, size_t how_size)
{
    return agent__oom_killed_at(mark, pid, "/dev/kmsg", how, how_size);
}
