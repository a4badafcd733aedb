/*
 * InfiniBand and RoCE ports, read from sysfs:
 *   <root>/class/infiniband/<device>/ports/<n>/state            "4: ACTIVE"
 *   <root>/class/infiniband/<device>/ports/<n>/link_layer       "InfiniBand" / "Ethernet"
 *   <root>/class/infiniband/<device>/ports/<n>/counters/<name>  a decimal count
 * A port that was ACTIVE at the first round and is not now is fatal (the job's
 * traffic on it has failed), and so is a growing link_downed; growing error
 * counters are a warning; a port down from the start is a warning (it may be
 * unused). No ports (or no such directory) adds nothing.
 */
#include "health/health.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define STATE_ACTIVE 4

static const char *const error_counters[] = { "symbol_error", "link_error_recovery",
                                              "port_rcv_errors", "local_link_integrity_errors",
                                              "excessive_buffer_overrun_errors" };

/* dir/name into out; false when it does not fit (the entry is then skipped). */
static bool join(char *out, size_t size, const char *dir, const char *name)
{
    int n = snprintf(out, size, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < size;
}

/* A small sysfs file's first line (at most size - 1 bytes), or false. */
static bool read_line(const char *path, char *out, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t got = read(fd, out, size - 1);
    close(fd);
    if (got <= 0) return false;
    out[got] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return true;
}

/* A counter: a decimal number; -1 when missing or not a number. */
static long long read_counter(const char *dir, const char *name)
{
    char counters[4096], path[4096], text[32];
    if (!join(counters, sizeof counters, dir, "counters") ||
        !join(path, sizeof path, counters, name) || !read_line(path, text, sizeof text))
        return -1;
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno != 0 || end == text || value < 0) return -1;
    return value;
}

static health__port_baseline *baseline_of(health__net_state *state, const char *name)
{
    for (int i = 0; i < state->count; i++)
        if (strcmp(state->ports[i].name, name) == 0) return &state->ports[i];
    if (state->count >= HEALTH__MAX_PORTS) return NULL;
    health__port_baseline *b = &state->ports[state->count++];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->link_downed = b->errors = -1;
    return b;
}

static void add_port(health__report *r, const char *check, const char *port,
                     health__verdict verdict, long long value, const char *fmt, ...)
    ELASTIC__PRINTF(6, 7);
static void add_port(health__report *r, const char *check, const char *port,
                     health__verdict verdict, long long value, const char *fmt, ...)
{
    health__finding *f = health__add(r, check, -1, verdict, value, "%s", "");
    if (f == NULL) return;
    snprintf(f->port, sizeof f->port, "%s", port);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
}

static void check_port(const char *dir, const char *name, health__net_state *state,
                       health__report *r)
{
    health__port_baseline *b = baseline_of(state, name);
    if (b == NULL) return;
    bool first = !state->taken;
    char path[4096], text[64] = "", layer[32] = "";
    if (!join(path, sizeof path, dir, "state") || !read_line(path, text, sizeof text))
        return; /* not a port */
    if (!join(path, sizeof path, dir, "link_layer") || !read_line(path, layer, sizeof layer))
        snprintf(layer, sizeof layer, "InfiniBand");
    const char *kind = strcmp(layer, "Ethernet") == 0 ? "RoCE" : "InfiniBand";
    long long code = strtol(text, NULL, 10);
    bool active = code == STATE_ACTIVE;
    if (first) b->was_active = active;
    if (active)
        add_port(r, "ib_port_state", name, HEALTH__OK, code, "%s port active (state %lld)", kind,
                 code);
    else if (b->was_active)
        add_port(r, "ib_port_state", name, HEALTH__FATAL, code, "%s port went down (state %lld)",
                 kind, code);
    else
        add_port(r, "ib_port_state", name, HEALTH__WARNING, code,
                 "%s port not active since the first check (state %lld)", kind, code);

    long long downed = read_counter(dir, "link_downed");
    if (downed >= 0) {
        if (!first && b->link_downed >= 0 && downed > b->link_downed)
            add_port(r, "ib_link_downed", name, HEALTH__FATAL, downed,
                     "%s link went down and retrained %lld times since the last check", kind,
                     downed - b->link_downed);
        else
            add_port(r, "ib_link_downed", name, HEALTH__OK, downed, "%s link_downed %lld", kind,
                     downed);
        b->link_downed = downed;
    }
    long long errors = 0;
    bool any = false;
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(error_counters); i++) {
        long long value = read_counter(dir, error_counters[i]);
        if (value >= 0) {
            errors += value;
            any = true;
        }
    }
    if (!any) return;
    if (!first && b->errors >= 0 && errors > b->errors)
        add_port(r, "ib_errors", name, HEALTH__WARNING, errors - b->errors,
                 "%s port errors grew (symbol, recovery, receive, integrity, overrun) by %lld",
                 kind, errors - b->errors);
    else
        add_port(r, "ib_errors", name, HEALTH__OK, 0, "%s error counters steady (%lld)", kind,
                 errors);
    b->errors = errors;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Names in a directory, sorted (the findings' order does not depend on readdir's). */
static int list_dir(const char *path, char names[][48], int max)
{
    DIR *dir = opendir(path);
    if (dir == NULL) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL && n < max) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len >= 24) continue; /* not a device or port name */
        memcpy(names[n++], e->d_name, len + 1);
    }
    closedir(dir);
    qsort(names, (size_t)n, 48, compare_names);
    return n;
}

void health__net_check(const char *sysfs_root, health__net_state *state, health__report *r)
{
    char base[4096];
    if (!join(base, sizeof base, sysfs_root != NULL ? sysfs_root : "/sys", "class/infiniband"))
        return;
    char devices[HEALTH__MAX_PORTS][48];
    int device_count = list_dir(base, devices, HEALTH__MAX_PORTS);
    for (int d = 0; d < device_count; d++) {
        char device_dir[4096], ports_dir[4096];
        if (!join(device_dir, sizeof device_dir, base, devices[d]) ||
            !join(ports_dir, sizeof ports_dir, device_dir, "ports"))
            continue;
        char ports[32][48];
        int port_count = list_dir(ports_dir, ports, 32);
        for (int p = 0; p < port_count; p++) {
            char dir[4096], name[48];
            if (join(dir, sizeof dir, ports_dir, ports[p]) &&
                join(name, sizeof name, devices[d], ports[p]))
                check_port(dir, name, state, r);
        }
    }
    state->taken = true;
}
