/*
 * Was a worker killed by the kernel's OOM killer (oom.c)? A SIGKILL says
 * nothing of who sent it; two witnesses do:
 *  - the worker's memory cgroup counts its OOM kills: `oom_kill` in
 *    memory.events (cgroup v2) or memory.oom_control (v1). The agent marks
 *    the count when a worker starts (its cgroup read from /proc/<pid>/cgroup
 *    while it lives: a dead process shows the root cgroup) and compares when
 *    it exits;
 *  - where there is no memory cgroup, the kernel's log: "Killed process
 *    <pid> (...)" in /dev/kmsg after the worker started (readable by root,
 *    or where dmesg_restrict is 0).
 * Every read is bounded (a few KiB per file, a record count for the log).
 */
#ifndef ELASTIC_AGENT_OOM_H
#define ELASTIC_AGENT_OOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A worker's failure reason when a witness saw the OOM killer end it: said
 * alone on the console, never "killed by signal 9" (console.c). */
#define AGENT_OOM_REASON "out of memory: killed by the kernel's OOM killer"

typedef struct agent_oom_mark {
    bool known;             /* a memory cgroup was found and its count read */
    char counter_path[512]; /* its memory.events (v2) or memory.oom_control (v1) */
    uint64_t kills;         /* oom_kill when marked */
    uint64_t since_us;      /* CLOCK_MONOTONIC when marked: the log's records after it */
} agent_oom_mark;

/* "oom_kill N" in a memory.events or memory.oom_control text: 0 and *kills,
 * or -1 when the line is absent or malformed. */
int agent__oom_parse_kills(const char *text, size_t len, uint64_t *kills);

/* The memory cgroup's directory under cgroup_root from a /proc/<pid>/cgroup
 * text: the v1 memory controller's line when there is one ("N:memory:/p" ->
 * <root>/memory/p, *v1 true), else the v2 line ("0::/p" -> <root>/p). */
int agent__oom_cgroup_dir(const char *proc_cgroup, size_t len, const char *cgroup_root, char *out,
                          size_t size, bool *v1);

/* Does one /dev/kmsg record ("prio,seq,ts_us,flags;text") say the OOM killer
 * killed pid at or after since_us? */
bool agent__oom_kmsg_record_names(const char *record, size_t len, pid_t pid, uint64_t since_us);

/* Marks pid's cgroup count now (proc_root "/proc", cgroup_root "/sys/fs/cgroup"
 * outside tests). Never fails: mark->known says whether a count was read. */
void agent__oom_mark_at(const char *proc_root, const char *cgroup_root, pid_t pid,
                        agent_oom_mark *mark);
void agent__oom_mark(pid_t pid, agent_oom_mark *mark);

/* After the worker exited: its cgroup's count rose since the mark, or the
 * kernel's log (kmsg_path, "/dev/kmsg"; NULL: not read) names pid after it.
 * *how says which ("memory.events oom_kill 0 -> 1", "kernel log"). */
bool agent__oom_killed_at(const agent_oom_mark *mark, pid_t pid, const char *kmsg_path, char *how,
                          size_t how_size);
bool agent__oom_killed(const agent_oom_mark *mark, pid_t pid, char *how, size_t how_size);

#endif /* ELASTIC_AGENT_OOM_H */
