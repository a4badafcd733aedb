/*
 * Warm spares (--warm-spares) with the demo trainer (examples/c/demo_trainer)
 * under elasticrun --in-process-recovery: a killed rank's place goes to the
 * process that was parked before the kill while the survivors keep theirs,
 * and the final weights equal a fault-free run's; more failures than spares
 * cold-start the rest; with memory saves every step the survivors' waiting
 * saves end with the generation and every rank, the promoted spare too,
 * restores the agreed step from memory; a spare killed while parked is replaced at no cost to
 * the job; a trainer that never parks disables spares; the flag without
 * in-process recovery is refused; a rank killed before the spare parked waits for
 * that spare instead of a cold start. Every wait is on an event-log line.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define WAIT_MS 60000

typedef struct demo_run {
    char dir[512], events[600], result[600], console[600];
    pid_t agent;
} demo_run;

/* The value of "key": in an event line (an integer), or -1. */
static long event_field(const char *line, const char *key)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\":", key);
    const char *at = strstr(line, needle);
    return at != NULL ? strtol(at + strlen(needle), NULL, 10) : -1;
}

/* The n-th event line with every needle, its field `key`; fails the test when absent. */
static long nth_event(const demo_run *run, const char *const *needles, int n, const char *key)
{
    char line[2048];
    if (agent_harness_wait_lines(run->events, needles, n + 1, test_scaled_ms(WAIT_MS)) < n + 1)
        return -1;
    if (!agent_harness_nth_line(run->events, needles, n, line, sizeof line)) return -1;
    return event_field(line, key);
}

/* memory_die: with the memory tier (a save every step), and that rank of
 * generation 1 dies (R:S, the trainer's --die-at-save) before its save of
 * step S; NULL: no memory tier. */
static void start_demo_with(demo_run *run, const char *name, const char *spares, bool park,
                            bool in_process, int steps, const char *memory_die,
                            const char *park_delay_ms)
{
    agent_harness_path(run->dir, sizeof run->dir, name);
    mkdir(run->dir, 0755);
    char ckpt[600], trainer[1024], steps_text[16];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", run->dir);
    mkdir(ckpt, 0755);
    snprintf(run->result, sizeof run->result, "%s/result.txt", run->dir);
    snprintf(run->events, sizeof run->events, "%s/events.jsonl", run->dir);
    snprintf(run->console, sizeof run->console, "%s/%s.out", test_tmpdir(), name);
    snprintf(trainer, sizeof trainer, "%s", test_example_path("demo_trainer"));
    snprintf(steps_text, sizeof steps_text, "%d", steps);
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "3", "--max-restarts", "3",
                        "--event-log", run->events);
    if (in_process) elasticrun_args_add(&cmd, "--in-process-recovery");
    if (spares != NULL) elasticrun_args_add(&cmd, "--warm-spares", spares);
    if (memory_die != NULL) elasticrun_args_add(&cmd, "--memory-ckpt");
    elasticrun_args_add(&cmd, "--no-python", trainer, "--ckpt-dir", ckpt, "--steps", steps_text,
                        "--step-ms", "5", "--ckpt-every", "10", "--result", run->result);
    if (!park) elasticrun_args_add(&cmd, "--no-park");
    if (park_delay_ms != NULL) elasticrun_args_add(&cmd, "--park-delay-ms", park_delay_ms);
    /* every step to memory, with a per-rank shard the trainer checks after its restore */
    if (memory_die != NULL)
        elasticrun_args_add(&cmd, "--memory-every", "1", "--state-mib", "1", "--die-at-save",
                            memory_die);
    run->agent = elasticrun_args_spawn(&cmd, NULL, name);
}

static void start_demo(demo_run *run, const char *name, const char *spares, bool park,
                       bool in_process, int steps)
{
    start_demo_with(run, name, spares, park, in_process, steps, NULL, NULL);
}

/* Waits for the job; its result line (free()), or NULL when it failed. */
static char *finish_demo(demo_run *run)
{
    int status = 0;
    if (!agent_harness_wait_exit(run->agent, test_scaled_ms(120000), &status)) {
        kill(run->agent, SIGKILL);
        return NULL;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return NULL;
    return agent_harness_read_file(run->result);
}

static char *clean_result(int steps)
{
    demo_run run;
    start_demo(&run, "clean", NULL, true, false, steps);
    return finish_demo(&run);
}

/* A worker's pid in generation 1, by rank (from its worker_started line). */
static long first_pid(const demo_run *run, int rank)
{
    char rank_text[32];
    snprintf(rank_text, sizeof rank_text, "\"rank\":%d,", rank);
    const char *started[] = { "\"event\":\"worker_started\"", "\"generation\":1,", rank_text,
                              NULL };
    return nth_event(run, started, 0, "pid");
}

/* Rank 0 printed this checkpoint step: training is under way. */
static bool wait_step(const demo_run *run, const char *step)
{
    const char *midway[] = { step, "(checkpoint)", NULL };
    return agent_harness_wait_lines(run->console, midway, 1, test_scaled_ms(WAIT_MS)) == 1;
}

static const char *const parked_ev[] = { "\"event\":\"spare_parked\"", NULL };
static const char *const promoted_ev[] = { "\"event\":\"spare_promoted\"", NULL };

TEST_TIMEOUT(agent_warm_spare_takes_a_killed_ranks_place_and_the_survivors_stay, 240)
{
    demo_run run;
    start_demo(&run, "spare", "1", true, true, 400);
    long parked = nth_event(&run, parked_ev, 0, "pid");
    long pid0 = first_pid(&run, 0), pid1 = first_pid(&run, 1), pid2 = first_pid(&run, 2);
    ASSERT(parked > 0 && pid0 > 0 && pid1 > 0 && pid2 > 0);
    ASSERT(wait_step(&run, "step 40 "));
    ASSERT_EQ(kill((pid_t)pid1, SIGKILL), 0);
    ASSERT_EQ(nth_event(&run, promoted_ev, 0, "pid"), parked); /* the parked process */
    ASSERT_EQ(nth_event(&run, promoted_ev, 0, "rank"), 1);
    const char *kept0[] = { "\"event\":\"worker_reconfigured\"", "\"rank\":0,", NULL };
    const char *kept2[] = { "\"event\":\"worker_reconfigured\"", "\"rank\":2,", NULL };
    ASSERT_EQ(nth_event(&run, kept0, 0, "pid"), pid0); /* the survivors keep their pids */
    ASSERT_EQ(nth_event(&run, kept2, 0, "pid"), pid2);
    const char *phases[] = { "\"event\":\"recovery_phases\"", "\"complete\":1",
                             "\"promote_ms\":", "\"restore_ms\":", NULL };
    ASSERT_EQ(nth_event(&run, phases, 0, "promoted"), 1);
    /* and a new spare is started in the background, parked under another pid */
    long replacement = nth_event(&run, parked_ev, 1, "pid");
    ASSERT(replacement > 0 && replacement != parked);
    char *faulty = finish_demo(&run);
    ASSERT(faulty != NULL);
    const char *cold[] = { "\"event\":\"worker_started\"", "\"generation\":2,", NULL };
    ASSERT_EQ(agent_harness_wait_lines(run.events, cold, 1, 0), 0); /* nothing cold-started */
    char *clean = clean_result(400);
    ASSERT(clean != NULL && strstr(clean, "steps=400 ") != NULL);
    ASSERT_STR_EQ(faulty, clean);
    free(faulty);
    free(clean);
}

TEST_TIMEOUT(agent_warm_spare_with_memory_saves_every_step_restores_the_agreed_step_from_memory,
             240)
{
    /* The memory tier takes a save every step and rank 1 dies after its share
     * of step 143, before saving it: the survivors' saves of step 143 wait for
     * its shard until the generation's end cuts them short (step abandoned);
     * then every rank, the promoted spare too, restores the step the agents
     * agreed on from this node's memory. */
    demo_run run;
    start_demo_with(&run, "spare_memory", "1", true, true, 400, "1:143", NULL);
    long parked = nth_event(&run, parked_ev, 0, "pid");
    long pid0 = first_pid(&run, 0), pid1 = first_pid(&run, 1), pid2 = first_pid(&run, 2);
    ASSERT(parked > 0 && pid0 > 0 && pid1 > 0 && pid2 > 0);
    const char *exited[] = { "\"event\":\"worker_exited\"", "\"rank\":1,", NULL };
    ASSERT_EQ(nth_event(&run, exited, 0, "pid"), pid1); /* by the trainer's own hand */
    const char *abandoned0[] = { "rank 0: step 143 abandoned: generation 1 ended", NULL };
    const char *abandoned2[] = { "rank 2: step 143 abandoned: generation 1 ended", NULL };
    ASSERT_EQ(agent_harness_wait_lines(run.console, abandoned0, 1, test_scaled_ms(WAIT_MS)), 1);
    ASSERT_EQ(agent_harness_wait_lines(run.console, abandoned2, 1, test_scaled_ms(WAIT_MS)), 1);
    ASSERT_EQ(nth_event(&run, promoted_ev, 0, "pid"), parked);
    const char *kept0[] = { "\"event\":\"worker_reconfigured\"", "\"rank\":0,", NULL };
    const char *kept2[] = { "\"event\":\"worker_reconfigured\"", "\"rank\":2,", NULL };
    ASSERT_EQ(nth_event(&run, kept0, 0, "pid"), pid0);
    ASSERT_EQ(nth_event(&run, kept2, 0, "pid"), pid2);
    /* The three ranks of generation 2 restore one step, each from this node's memory. */
    const char *restored[] = { "\"event\":\"checkpoint_restored\"", "\"generation\":2,", NULL };
    long step = nth_event(&run, restored, 0, "step");
    ASSERT_EQ(step, 142); /* the last step every rank committed */
    for (int i = 0; i < 3; i++) {
        char line[2048];
        ASSERT(agent_harness_wait_lines(run.events, restored, i + 1, test_scaled_ms(WAIT_MS)) >=
               i + 1);
        ASSERT(agent_harness_nth_line(run.events, restored, i, line, sizeof line));
        ASSERT_EQ(event_field(line, "step"), step);
        if (strstr(line, "\"source\":\"local\"") == NULL) FAIL("not from local memory: %s", line);
    }
    const char *promoted_restore[] = { "\"event\":\"checkpoint_restored\"", "\"generation\":2,",
                                       "\"rank\":1,", NULL };
    ASSERT_EQ(nth_event(&run, promoted_restore, 0, "step"), step); /* the spare's too */
    char *faulty = finish_demo(&run);
    ASSERT(faulty != NULL);
    const char *cold[] = { "\"event\":\"worker_started\"", "\"generation\":2,", NULL };
    ASSERT_EQ(agent_harness_wait_lines(run.events, cold, 1, 0), 0); /* nothing cold-started */
    char *clean = clean_result(400);
    ASSERT(clean != NULL && strstr(clean, "steps=400 ") != NULL);
    ASSERT_STR_EQ(faulty, clean);
    free(faulty);
    free(clean);
}

/* A rank dies in the job's first seconds, while the spare is still in its
 * start-up (the trainer's spare takes 5 s to park): the dead slot waits for
 * that spare, which is ahead of a cold start, and the spare is promoted. The
 * kill waits for the ranks to train (attached: the survivors can be kept; a
 * rank killed before its peers attached takes them down with it). */
TEST_TIMEOUT(agent_warm_spare_still_starting_is_awaited_not_passed_over, 240)
{
    demo_run run;
    start_demo_with(&run, "awaited", "1", true, true, 400, NULL, "5000");
    const char *started_ev[] = { "\"event\":\"spare_started\"", NULL };
    long spare = nth_event(&run, started_ev, 0, "pid");
    long pid0 = first_pid(&run, 0), pid1 = first_pid(&run, 1), pid2 = first_pid(&run, 2);
    ASSERT(spare > 0 && pid0 > 0 && pid1 > 0 && pid2 > 0);
    ASSERT(wait_step(&run, "step 10 "));
    ASSERT_EQ(agent_harness_wait_lines(run.events, parked_ev, 1, 0), 0); /* it sleeps 5 s first */
    ASSERT_EQ(kill((pid_t)pid1, SIGKILL), 0);
    const char *awaited_ev[] = { "\"event\":\"spare_awaited\"", NULL };
    ASSERT_EQ(nth_event(&run, awaited_ev, 0, "pid"), spare); /* waited for, not parked then */
    ASSERT_EQ(nth_event(&run, awaited_ev, 0, "rank"), 1);
    ASSERT_EQ(nth_event(&run, parked_ev, 0, "pid"), spare);
    ASSERT_EQ(nth_event(&run, promoted_ev, 0, "pid"), spare); /* the same process took rank 1 */
    ASSERT_EQ(nth_event(&run, promoted_ev, 0, "rank"), 1);
    const char *kept0[] = { "\"event\":\"worker_reconfigured\"", "\"rank\":0,", NULL };
    const char *kept2[] = { "\"event\":\"worker_reconfigured\"", "\"rank\":2,", NULL };
    ASSERT_EQ(nth_event(&run, kept0, 0, "pid"), pid0); /* the survivors keep their pids */
    ASSERT_EQ(nth_event(&run, kept2, 0, "pid"), pid2);
    char *result = finish_demo(&run);
    ASSERT(result != NULL && strstr(result, "steps=400 ") != NULL);
    free(result);
    const char *cold[] = { "\"event\":\"worker_started\"", "\"generation\":2,", NULL };
    ASSERT_EQ(agent_harness_wait_lines(run.events, cold, 1, 0), 0); /* nothing cold-started */
    ASSERT_EQ(agent_harness_wait_lines(run.events, awaited_ev, 2, 0), 1); /* said once */
    char err[600], said_pid[64];
    snprintf(err, sizeof err, "%s/awaited.err", test_tmpdir());
    snprintf(said_pid, sizeof said_pid, "waiting for the warm spare (pid %ld) to park", spare);
    const char *said[] = { "rank 1: ", said_pid, NULL };
    ASSERT_EQ(agent_harness_wait_lines(err, said, 1, 0), 1);
}

TEST_TIMEOUT(agent_warm_spares_more_failures_than_spares_cold_start_the_rest, 240)
{
    demo_run run;
    start_demo(&run, "two", "1", true, true, 400);
    long parked = nth_event(&run, parked_ev, 0, "pid");
    long pid1 = first_pid(&run, 1), pid2 = first_pid(&run, 2);
    ASSERT(parked > 0 && pid1 > 0 && pid2 > 0);
    ASSERT(wait_step(&run, "step 40 "));
    ASSERT_EQ(kill((pid_t)pid1, SIGKILL), 0);
    ASSERT_EQ(kill((pid_t)pid2, SIGKILL), 0);
    ASSERT_EQ(nth_event(&run, promoted_ev, 0, "pid"), parked);
    /* the one spare took one rank; the other was started afresh */
    const char *cold[] = { "\"event\":\"worker_started\"", NULL };
    ASSERT(nth_event(&run, cold, 3, "generation") >= 2);
    char *faulty = finish_demo(&run);
    ASSERT(faulty != NULL);
    ASSERT_EQ(agent_harness_wait_lines(run.events, promoted_ev, 2, 0), 1);
    char *clean = clean_result(400);
    ASSERT(clean != NULL);
    ASSERT_STR_EQ(faulty, clean);
    free(faulty);
    free(clean);
}

TEST_TIMEOUT(agent_warm_spare_killed_while_parked_is_replaced_at_no_cost, 180)
{
    demo_run run;
    start_demo(&run, "parked", "1", true, true, 400);
    long parked = nth_event(&run, parked_ev, 0, "pid");
    ASSERT(parked > 0);
    ASSERT_EQ(kill((pid_t)parked, SIGKILL), 0);
    const char *exited[] = { "\"event\":\"spare_exited\"", "\"signal\":9", NULL };
    ASSERT_EQ(nth_event(&run, exited, 0, "pid"), parked);
    long replacement = nth_event(&run, parked_ev, 1, "pid");
    ASSERT(replacement > 0 && replacement != parked);
    char *result = finish_demo(&run);
    ASSERT(result != NULL && strstr(result, "steps=400 ") != NULL);
    free(result);
    const char *end[] = { "\"event\":\"job_end\"", "\"status\":\"succeeded\"", "\"restarts\":0,",
                          NULL };
    ASSERT_EQ(agent_harness_wait_lines(run.events, end, 1, 0), 1); /* no restart spent */
    const char *failure[] = { "\"event\":\"failure\"", NULL };
    ASSERT_EQ(agent_harness_wait_lines(run.events, failure, 1, 0), 0);
    char err[600];
    snprintf(err, sizeof err, "%s/parked.err", test_tmpdir());
    const char *said[] = { "warm spare", "while parked: replacing it", NULL };
    ASSERT_EQ(agent_harness_wait_lines(err, said, 1, 0), 1);
}

TEST_TIMEOUT(agent_warm_spares_a_trainer_that_never_parks_runs_unchanged, 180)
{
    demo_run run;
    start_demo(&run, "noparks", "1", false, true, 400);
    const char *disabled[] = { "\"event\":\"spares_disabled\"", NULL };
    ASSERT(nth_event(&run, disabled, 0, "pid") > 0);
    long pid1 = first_pid(&run, 1);
    ASSERT(pid1 > 0);
    ASSERT(wait_step(&run, "step 40 "));
    ASSERT_EQ(kill((pid_t)pid1, SIGKILL), 0); /* recovered the way it is without spares */
    char *faulty = finish_demo(&run);
    ASSERT(faulty != NULL);
    ASSERT_EQ(agent_harness_wait_lines(run.events, promoted_ev, 1, 0), 0);
    const char *cold[] = { "\"event\":\"worker_started\"", "\"generation\":2,", "\"rank\":1,",
                           NULL };
    ASSERT_EQ(agent_harness_wait_lines(run.events, cold, 1, 0), 1);
    char *clean = clean_result(400);
    ASSERT(clean != NULL);
    ASSERT_STR_EQ(faulty, clean);
    free(faulty);
    free(clean);
    /* The spare's own error is said once, in the agent's line, not relayed
     * to the console beside it. */
    char err_path[600];
    snprintf(err_path, sizeof err_path, "%s/noparks.err", test_tmpdir());
    char *err = agent_harness_read_file(err_path);
    ASSERT(err != NULL);
    const char *line = strstr(err, "warm spares off: spare (pid ");
    if (line == NULL || strstr(line, "its last line: demo_trainer: this process was started as a "
                                     "warm spare") == NULL)
        FAIL("no one line naming the spare's error:\n%s", err);
    const char *first = strstr(err, "started as a warm spare");
    if (first == NULL || strstr(first + 1, "started as a warm spare") != NULL)
        FAIL("the spare's error is not said exactly once:\n%s", err);
    free(err);
}

TEST(agent_warm_spares_without_in_process_recovery_are_refused)
{
    demo_run run;
    start_demo(&run, "refused", "1", true, false, 10);
    int status = 0;
    ASSERT(agent_harness_wait_exit(run.agent, test_scaled_ms(WAIT_MS), &status));
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    char err[600];
    snprintf(err, sizeof err, "%s/refused.err", test_tmpdir());
    const char *said[] = { "--warm-spares needs --in-process-recovery", NULL };
    ASSERT_EQ(agent_harness_wait_lines(err, said, 1, 0), 1);
    const char *started[] = { "\"event\":\"worker_started\"", NULL };
    ASSERT_EQ(agent_harness_wait_lines(run.events, started, 1, 0), 0);
}
