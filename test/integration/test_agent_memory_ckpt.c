/*
 * The memory checkpoint tier under elasticrun: the demo trainer saves every
 * step to memory (and every 50 to disk); a worker SIGKILLed midway comes
 * back from local memory having lost at most one step, its per-rank state
 * checked byte for byte, the checkpoint_restored event and the console say
 * so, the final weights equal a run without the failure, and the tier's
 * shared memory is gone when the job ends.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

static int tiers_in_dev_shm(void)
{
    DIR *d = opendir("/dev/shm");
    int n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        char mine[64];
        snprintf(mine, sizeof mine, "elastic-mem-");
        n += strncmp(e->d_name, mine, strlen(mine)) == 0;
    }
    if (d) closedir(d);
    return n;
}

static char *run(const char *name, bool kill_one, char *events, size_t events_cap)
{
    char dir[512], ckpt[600], result[600];
    agent_harness_path(dir, sizeof dir, name);
    mkdir(dir, 0755);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    snprintf(result, sizeof result, "%s/result.txt", dir);
    mkdir(ckpt, 0755);
    snprintf(events, events_cap, "%s/events.jsonl", dir);
    char trainer[1024];
    snprintf(trainer, sizeof trainer, "%s", test_example_path("demo_trainer"));
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                        "--memory-ckpt", "--memory-ckpt-limit", "256M", "--event-log", events,
                        "--no-python", trainer, "--ckpt-dir", ckpt, "--steps", "200", "--step-ms",
                        "20", "--ckpt-every", "50", "--memory-every", "1", "--state-mib", "2",
                        "--result", result);
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, name);
    if (kill_one) {
        const char *started[] = { "\"event\":\"worker_started\"", "\"generation\":1,",
                                  "\"rank\":1,", NULL };
        char line[1024];
        ASSERT_EQ(agent_harness_wait_lines(events, started, 1, 30000), 1);
        ASSERT(agent_harness_nth_line(events, started, 0, line, sizeof line));
        const char *pid_at = strstr(line, "\"pid\":");
        ASSERT(pid_at != NULL);
        /* Past the disk checkpoint at 50 (rank 0 says so on its stdout): the
         * steps after it are only in memory. */
        char console[600];
        snprintf(console, sizeof console, "%s/%s.out", test_tmpdir(), name);
        const char *disk[] = { "step 50 ", "(checkpoint)", NULL };
        ASSERT_EQ(agent_harness_wait_lines(console, disk, 1, 60000), 1);
        ASSERT_EQ(kill((pid_t)atoi(pid_at + 6), SIGKILL), 0);
    }
    int status = 0;
    if (!agent_harness_wait_exit(agent, 90000, &status)) {
        kill(agent, SIGKILL);
        FAIL("%s: elasticrun did not finish", name);
    }
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    char *text = agent_harness_read_file(result);
    ASSERT(text != NULL);
    return text;
}

TEST_TIMEOUT(agent_memory_ckpt_worker_crash_restores_from_local_memory, 240)
{
    int tiers_before = tiers_in_dev_shm();
    char events[700], clean_events[700];
    char *faulty = run("faulty", true, events, sizeof events);
    char *clean = run("clean", false, clean_events, sizeof clean_events);
    ASSERT_STR_EQ(faulty, clean);
    /* Both ranks of generation 2 restored from local memory, the per-rank
     * 2 MiB shard included. */
    const char *restored[] = { "\"event\":\"checkpoint_restored\"", "\"generation\":2,",
                               "\"source\":\"local\"", NULL };
    ASSERT_EQ(agent_harness_wait_lines(events, restored, 2, 1000), 2);
    char line[2048];
    ASSERT(agent_harness_nth_line(events, restored, 0, line, sizeof line));
    const char *bytes_at = strstr(line, "\"bytes\":");
    ASSERT(bytes_at != NULL);
    ASSERT(atoll(bytes_at + 8) >= 2 << 20);
    /* No older than the last disk checkpoint (50), from memory (a tie goes to memory). */
    const char *step_at = strstr(line, "\"step\":");
    ASSERT(step_at != NULL);
    long long step = atoll(step_at + 7);
    if (!(step >= 50 && step < 200)) FAIL("restored step %lld: %s", step, line);
    char console[600]; /* elasticrun's own lines: its stderr */
    snprintf(console, sizeof console, "%s/faulty.err", test_tmpdir());
    const char *said[] = { "resumed at step ", " from local memory (node ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(console, said, 1, 1000), 1);
    /* The clean run restored nothing. */
    const char *none[] = { "\"event\":\"checkpoint_restored\"", NULL };
    ASSERT_EQ(agent_harness_wait_lines(clean_events, none, 1, 0), 0);
    ASSERT_EQ(tiers_in_dev_shm(), tiers_before);
    free(faulty);
    free(clean);
}
