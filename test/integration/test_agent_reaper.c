/*
 * No descendant of a worker outlives the agent: grandchildren, and one that
 * left the worker's process group with setsid, die when the agent is
 * SIGKILLed (the reaper process), and the agent's run directory goes with it
 * (in TMPDIR, which the agent honours).
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* A short private TMPDIR (the test's own path is too long for a socket under it). */
static const char *short_tmpdir(void)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/elastic-reaper-test-XXXXXX");
    ASSERT(mkdtemp(dir) != NULL);
    return dir;
}

static void remove_short_tmpdir(const char *dir)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    ASSERT_EQ(system(command), 0);
}

/* Counts entries "elastic-<pid>-*" in dir. */
static int run_dirs_of(const char *dir, pid_t pid)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "elastic-%d-", (int)pid);
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL)
        count += strncmp(entry->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return count;
}

/* Waits for every pid listed in the file (one per line) to be gone, killing
 * and failing on the first that outlives the deadline; returns how many. */
static int wait_all_gone(const char *pids)
{
    char *text = agent_harness_read_file(pids);
    ASSERT(text != NULL);
    int checked = 0;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        pid_t pid = (pid_t)atol(line);
        ASSERT(pid > 1);
        if (!agent_harness_wait_gone(pid, test_scaled_ms(5000))) {
            kill(pid, SIGKILL);
            FAIL("pid %d outlived the SIGKILLed agent", (int)pid);
        }
        checked++;
    }
    free(text);
    return checked;
}

/* The agent's line saying how its reaper catches descendants ("reaper:
 * cgroup ..." or "reaper: no cgroup (...)"), once it is written. */
static void reaper_mechanism(const char *err_path, char *out, size_t size)
{
    const char *needles[] = { "agent: reaper: ", NULL };
    if (agent_harness_wait_lines(err_path, needles, 1, test_scaled_ms(20000)) < 1 ||
        !agent_harness_nth_line(err_path, needles, 0, out, size))
        FAIL("the agent did not say how its reaper works (%s)", err_path);
    out[strcspn(out, "\n")] = '\0';
}

/* One run: a shell worker with three grandchildren, two in a session of
 * their own, one of those orphaned at once (its parent subshell exits, so it
 * is adopted: by init with a cgroup, by the agent without). Without a cgroup
 * the agent tells the reaper of those two (it looks every 0.2 s): the test
 * waits for that before the SIGKILL. */
static void sigkill_takes_every_descendant(bool cgroup)
{
    char pids[1024], script[4608], tmp_env[4200], name[32], err[1100], line[600];
    snprintf(name, sizeof name, "pids-%s", cgroup ? "cgroup" : "nocgroup");
    agent_harness_path(pids, sizeof pids, name);
    snprintf(script, sizeof script,
             "sleep 4321 & echo $! >> %s; setsid sleep 4322 & echo $! >> %s; "
             "(setsid sleep 4323 & echo $! >> %s); echo $$ >> %s; wait",
             pids, pids, pids, pids);
    const char *tmp = short_tmpdir();
    snprintf(tmp_env, sizeof tmp_env, "TMPDIR=%s", tmp);
    const char *env[] = { tmp_env, "ELASTIC_LOG_LEVEL=debug", cgroup ? NULL : "ELASTIC_NO_CGROUP=1",
                          NULL };
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "1", "--no-python", "/bin/sh",
                        "-c", script);
    snprintf(name, sizeof name, "agent-%s", cgroup ? "cgroup" : "nocgroup");
    pid_t agent = elasticrun_args_spawn(&cmd, env, name);
    const char *any[] = { "", NULL };
    ASSERT_EQ(agent_harness_wait_lines(pids, any, 4, test_scaled_ms(20000)), 4);
    snprintf(name, sizeof name, "agent-%s.err", cgroup ? "cgroup" : "nocgroup");
    agent_harness_path(err, sizeof err, name);
    reaper_mechanism(err, line, sizeof line);
    printf("# %s: %s\n", cgroup ? "with cgroups" : "cgroups forced off", strstr(line, "reaper: "));
    bool used_cgroup = strstr(line, "reaper: cgroup ") != NULL;
    if (cgroup && !used_cgroup) {
        kill(agent, SIGKILL);
        SKIP("no cgroup for the workers can be made here (the other way is tested alone)");
    }
    if (!cgroup && used_cgroup) FAIL("ELASTIC_NO_CGROUP=1, but: %s", line);
    if (!cgroup) {
        /* The two that left the worker's group (lines 2 and 3; the second
         * an orphan the agent adopted): wait until the reaper knows them. */
        char *text = agent_harness_read_file(pids);
        ASSERT(text != NULL);
        int listed[4] = { 0 }, at = 0;
        for (int i = 0; i < 4 && text[at] != '\0'; i++) {
            listed[i] = atoi(text + at);
            at += (int)strcspn(text + at, "\n");
            if (text[at] == '\n') at++;
        }
        free(text);
        for (int i = 1; i <= 2; i++) {
            char told[64];
            snprintf(told, sizeof told, "told of pid %d ", listed[i]);
            const char *needles[] = { told, NULL };
            if (agent_harness_wait_lines(err, needles, 1, test_scaled_ms(10000)) < 1)
                FAIL("the agent never told the reaper of pid %d (in a session of its own%s)",
                     listed[i], i == 2 ? ", orphaned" : "");
        }
    }
    ASSERT_EQ(run_dirs_of(tmp, agent), 1); /* the run directory lives in TMPDIR */
    ASSERT_EQ(kill(agent, SIGKILL), 0);
    int status;
    ASSERT(agent_harness_wait_exit(agent, test_scaled_ms(5000), &status));
    ASSERT_EQ(wait_all_gone(pids), 4);
    for (int waited = 0; run_dirs_of(tmp, agent) > 0 && waited < test_scaled_ms(5000); waited += 20)
        usleep(20 * 1000);
    ASSERT_EQ(run_dirs_of(tmp, agent), 0);
    remove_short_tmpdir(tmp);
}

/* Both ways: with the workers' cgroup (cgroup.kill), and with cgroups forced
 * off as in a container or chroot without a cgroup file system (process
 * groups, a walk of the descendants, the agent as child subreaper). */
TEST_TIMEOUT(agent_sigkill_takes_every_worker_descendant_and_run_dir_along, 90)
{
    sigkill_takes_every_descendant(false);
    sigkill_takes_every_descendant(true);
}

TEST_TIMEOUT(agent_leaves_no_run_dir_and_sweeps_a_dead_agents, 60)
{
    /* A run directory of an agent that is gone (pid 2^22+1 is above pid_max's default). */
    char stale[4200], tmp_env[4200];
    const char *tmp = short_tmpdir();
    snprintf(stale, sizeof stale, "%s/elastic-4194305-AbCdEf", tmp);
    ASSERT_EQ(mkdir(stale, 0700), 0);
    char file[4300];
    snprintf(file, sizeof file, "%s/heartbeat", stale);
    FILE *f = fopen(file, "w");
    ASSERT(f != NULL);
    fclose(f);
    snprintf(tmp_env, sizeof tmp_env, "TMPDIR=%s", tmp);
    const char *env[] = { tmp_env, NULL };
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--no-python", "/bin/true");
    pid_t agent = elasticrun_args_spawn(&cmd, env, "agent");
    int status;
    ASSERT(agent_harness_wait_exit(agent, test_scaled_ms(20000), &status));
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ(run_dirs_of(tmp, agent), 0);
    struct stat st;
    ASSERT(stat(stale, &st) != 0); /* swept at start */
    remove_short_tmpdir(tmp);
}

/* The agent's child named elastic-reaper (scanning /proc), or 0. */
static pid_t reaper_of(pid_t agent)
{
    DIR *proc = opendir("/proc");
    ASSERT(proc != NULL);
    pid_t found = 0;
    struct dirent *entry;
    while (found == 0 && (entry = readdir(proc)) != NULL) {
        char path[300], stat[512];
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[n] = '\0';
        /* "pid (comm) state ppid ...": comm may hold spaces, so read after the last ')'. */
        char *close = strrchr(stat, ')');
        int ppid = 0;
        char state = 0;
        if (strstr(stat, "(elastic-reaper)") == NULL || close == NULL ||
            sscanf(close + 1, " %c %d", &state, &ppid) != 2)
            continue;
        if (ppid == agent && state != 'Z') found = (pid_t)atol(entry->d_name);
    }
    closedir(proc);
    return found;
}

TEST_TIMEOUT(agent_replaces_a_killed_reaper_so_workers_still_die_with_it, 60)
{
    char pids[1024], script[4096], tmp_env[4200];
    agent_harness_path(pids, sizeof pids, "pids");
    snprintf(script, sizeof script, "sleep 4323 & echo $! >> %s; echo $$ >> %s; wait", pids, pids);
    const char *tmp = short_tmpdir();
    snprintf(tmp_env, sizeof tmp_env, "TMPDIR=%s", tmp);
    const char *env[] = { tmp_env, NULL };
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "1", "--no-python", "/bin/sh",
                        "-c", script);
    pid_t agent = elasticrun_args_spawn(&cmd, env, "agent");
    const char *any[] = { "", NULL };
    ASSERT_EQ(agent_harness_wait_lines(pids, any, 2, test_scaled_ms(20000)), 2);
    pid_t first = reaper_of(agent);
    ASSERT(first > 1);
    ASSERT_EQ(kill(first, SIGKILL), 0);
    /* A new reaper, told about the running worker, replaces it. */
    pid_t second = 0;
    for (int waited = 0; waited < test_scaled_ms(5000); waited += 10) {
        second = reaper_of(agent);
        if (second > 1 && second != first) break;
        usleep(10 * 1000);
    }
    if (second <= 1 || second == first) FAIL("no new reaper after pid %d was killed", (int)first);
    ASSERT_EQ(kill(agent, SIGKILL), 0);
    int status;
    ASSERT(agent_harness_wait_exit(agent, test_scaled_ms(5000), &status));
    ASSERT_EQ(wait_all_gone(pids), 2);
    /* The replacement also cleans up after the agent: its run directory goes. */
    for (int waited = 0; run_dirs_of(tmp, agent) > 0 && waited < test_scaled_ms(5000); waited += 20)
        usleep(20 * 1000);
    ASSERT_EQ(run_dirs_of(tmp, agent), 0);
    char err_path[1024];
    char *err = agent_harness_read_file(agent_harness_path(err_path, sizeof err_path, "agent.err"));
    if (err == NULL || strstr(err, "starting another") == NULL)
        FAIL("no warning about the reaper: %s", err ? err : "");
    free(err);
    remove_short_tmpdir(tmp);
}
