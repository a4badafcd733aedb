/*
 * A trainer built only on elastic_loop_run (examples/c/loop_trainer) under
 * elasticrun --memory-ckpt --in-process-recovery --warm-spares=1: a rank
 * SIGKILLed midway is replaced by the parked spare, the survivors keep their
 * processes, every rank restores the agreed step from memory, each redoes at
 * most one step, and the final weights equal a fault-free run's bit for bit;
 * the same, from disk, when the step's wait ends by the abort hook instead
 * of poll (the path of an NCCL trainer whose collective the library aborted).
 * Every wait is on a line in a file, with a deadline.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct loop_run {
    char dir[512], events[600], result[600], console[600];
    pid_t agent;
} loop_run;

static void start(loop_run *run, const char *name, bool recover, bool abort_hook)
{
    char ckpt[600];
    agent_harness_path(run->dir, sizeof run->dir, name);
    mkdir(run->dir, 0755);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", run->dir);
    snprintf(run->events, sizeof run->events, "%s/events.jsonl", run->dir);
    snprintf(run->result, sizeof run->result, "%s/result.txt", run->dir);
    snprintf(run->console, sizeof run->console, "%s/%s.out", test_tmpdir(), name);
    char trainer[1024];
    snprintf(trainer, sizeof trainer, "%s", test_example_path("loop_trainer"));
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "3", "--max-restarts", "2",
                        "--event-log", run->events);
    if (recover) elasticrun_args_add(&cmd, "--in-process-recovery", "--warm-spares", "1");
    /* With --abort-hook the job has no memory tier: no save waits for the dead
     * rank, so a survivor's step is what fails (its wait for the rank's rows). */
    if (recover && !abort_hook) elasticrun_args_add(&cmd, "--memory-ckpt");
    elasticrun_args_add(&cmd, "--no-python", trainer, "--ckpt-dir", ckpt, "--steps", "150",
                        "--step-ms", "10", "--ckpt-every", "10", "--memory-every", "1",
                        "--result", run->result);
    if (abort_hook) elasticrun_args_add(&cmd, "--abort-hook", "1");
    const char *debug[] = { "ELASTIC_LOG_LEVEL=debug", NULL }; /* the loop says which path it took */
    run->agent = elasticrun_args_spawn(&cmd, abort_hook ? debug : NULL, name);
}

/* The pid in rank R's "rank R pid=P generation G trains from" line. */
static long pid_of(const loop_run *run, int rank, int generation)
{
    char who[32], gen[32], line[512];
    snprintf(who, sizeof who, "rank %d pid=", rank);
    snprintf(gen, sizeof gen, " generation %d trains", generation);
    const char *needles[] = { who, gen, NULL };
    ASSERT_EQ(agent_harness_wait_lines(run->console, needles, 1, 0), 1);
    ASSERT(agent_harness_nth_line(run->console, needles, 0, line, sizeof line));
    return agent_harness_line_field(line, "pid");
}

/* rank R's "rank R done: ... recoveries=N redone=M" line, its field. */
static long done_field(const loop_run *run, int rank, const char *key)
{
    char who[32], line[512];
    snprintf(who, sizeof who, "rank %d done:", rank);
    const char *needles[] = { who, NULL };
    ASSERT_EQ(agent_harness_wait_lines(run->console, needles, 1, 0), 1);
    ASSERT(agent_harness_nth_line(run->console, needles, 0, line, sizeof line));
    return agent_harness_line_field(line, key);
}

/* An integer field of generation 2's first `event` line in the event log. */
static long json_int(const char *events, const char *event, const char *key)
{
    char line[4096], pattern[64];
    const char *needles[] = { event, "\"generation\":2,", NULL };
    ASSERT(agent_harness_nth_line(events, needles, 0, line, sizeof line));
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = strstr(line, pattern);
    ASSERT(at != NULL);
    return strtol(at + strlen(pattern), NULL, 10);
}

static void survives_a_killed_rank(bool abort_hook)
{
    loop_run faulty, clean;
    start(&faulty, "faulty", true, abort_hook);
    /* Past the disk save of step 30 (rank 0 says so): rank 1 of generation 1 dies. */
    agent_harness_kill_rank1_after_checkpoint(faulty.events, "faulty", "step 30 ");
    ASSERT_EQ(agent_harness_exit_code(faulty.agent, test_scaled_ms(90000)), 0);
    start(&clean, "clean", false, false);
    ASSERT_EQ(agent_harness_exit_code(clean.agent, test_scaled_ms(90000)), 0);
    char *got = agent_harness_read_file(faulty.result), *want = agent_harness_read_file(clean.result);
    ASSERT(got != NULL && want != NULL);
    ASSERT_STR_EQ(got, want); /* "steps=150 loss=... weights=<digest of the bits>" */
    /* The survivors kept their processes; rank 1 is a new one (the spare). */
    ASSERT_EQ(pid_of(&faulty, 0, 2), pid_of(&faulty, 0, 1));
    ASSERT_EQ(pid_of(&faulty, 2, 2), pid_of(&faulty, 2, 1));
    ASSERT_NE(pid_of(&faulty, 1, 2), pid_of(&faulty, 1, 1));
    /* Every rank restored the agreed step, from memory (one event each) ... */
    const char *restored[] = { "\"event\":\"checkpoint_restored\"", "\"generation\":2,",
                               abort_hook ? "\"source\":\"disk\"" : "\"source\":\"local\"",
                               NULL };
    ASSERT_EQ(agent_harness_wait_lines(faulty.events, restored, 3, 0), 3);
    /* The agent measured generation 2 from where its kept workers stood: its
     * steps_started names the restored step (it said step 1, the survivors'
     * first beat in generation 1, and goodput charged their whole history
     * as redone steps). */
    long agreed = json_int(faulty.events, "\"event\":\"checkpoint_restored\"", "step");
    long first = json_int(faulty.events, "\"event\":\"steps_started\"", "step");
    ASSERT(agreed >= 10); /* a step past generation 1's first (disk: every 10) */
    ASSERT(first >= agreed && first <= agreed + 1);
    /* ... and redid at most one step (from disk: the 10 since its last save,
     * and the 10 before when the save the kill interrupted was still in
     * flight: disk saves are asynchronous; under TSan a run passed 10). */
    for (int rank = 0; rank < 3; rank++) {
        ASSERT_EQ(done_field(&faulty, rank, "steps"), 150);
        long redone = done_field(&faulty, rank, "redone");
        if (redone > (abort_hook ? 20 : 1)) FAIL("rank %d redid %ld steps", rank, redone);
    }
    if (abort_hook) { /* a survivor's step failed, and the loop waited for the generation's end
                       * (both, unless the abort came in the microseconds between a step's
                       * all-reduce and the loop's poll) */
        char err[600];
        snprintf(err, sizeof err, "%s/faulty.err", test_tmpdir());
        const char *waited[] = { "failed: waiting up to", "for the generation to end", NULL };
        ASSERT(agent_harness_wait_lines(err, waited, 2, 0) >= 1);
    }
    /* The closing line names the bucket that cost the most beside ETTR. */
    char err_path[600];
    snprintf(err_path, sizeof err_path, "%s/faulty.err", test_tmpdir());
    const char *closing[] = { "job succeeded after", " s lost to failures (ETTR ",
                              "; most time lost: ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(err_path, closing, 1, 0), 1);
    ASSERT_EQ(done_field(&faulty, 0, "recoveries"), 1);
    ASSERT_EQ(done_field(&clean, 0, "recoveries"), 0);
    free(got);
    free(want);
}

TEST_TIMEOUT(worker_loop_trainer_survives_a_killed_rank_in_process, 180)
{
    survives_a_killed_rank(false); /* the step's wait polls the worker */
}

/* The step fails without polling, as an NCCL collective the library aborted
 * (and no memory save waits for the dead rank): the loop waits for the
 * generation's end itself, polls and reloads from disk. */
TEST_TIMEOUT(worker_loop_a_step_failed_by_an_abort_is_recovered_in_process, 180)
{
    survives_a_killed_rank(true);
}
