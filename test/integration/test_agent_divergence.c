/*
 * Silent data corruption under elasticrun (issue 36), on one node: the demo
 * trainer's --corrupt flips a bit of one rank's replicated weights and the
 * memory save right after finds the replicas different. Two ranks have no
 * majority: the job stops with the evidence and restores nothing. With
 * --on-divergence=warn the step commits, the divergence is journaled, said
 * and counted, and training goes on. (Three hosts and a spare, memory and
 * store-mode disk: test/netns/divergence_spare.sh.)
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "support/metrics_page.h"
#include "support/python_trainer.h"
#include "common/clock.h"
#include "common/http.h"
#include "test.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct job {
    char dir[512], ckpt[600], result[600], events[600], err[600];
} job;

static pid_t start(job *j, const char *name, const char *nproc, const char *corrupt,
                   const char *mode, const char *steps)
{
    agent_harness_path(j->dir, sizeof j->dir, name);
    mkdir(j->dir, 0755);
    snprintf(j->ckpt, sizeof j->ckpt, "%s/ckpt", j->dir);
    mkdir(j->ckpt, 0755);
    snprintf(j->result, sizeof j->result, "%s/result.txt", j->dir);
    snprintf(j->events, sizeof j->events, "%s/events.jsonl", j->dir);
    snprintf(j->err, sizeof j->err, "%s/%s.err", test_tmpdir(), name);
    char trainer[1024];
    snprintf(trainer, sizeof trainer, "%s", test_example_path("demo_trainer"));
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", nproc, "--max-restarts", "2",
                        "--memory-ckpt", "--memory-ckpt-limit", "64M", "--event-log", j->events,
                        "--metrics-port", "0", "--on-divergence", mode, "--no-python", trainer,
                        "--ckpt-dir", j->ckpt, "--steps", steps, "--step-ms", "10", "--ckpt-every",
                        "100000", "--memory-every", "10", "--corrupt", corrupt, "--result",
                        j->result);
    return elasticrun_args_spawn(&cmd, NULL, name);
}

static int count_lines(const char *path, const char *const *needles)
{
    return agent_harness_wait_lines(path, needles, 1000000, 0);
}

/* Two replicas that differ: neither is known right. The job stops (exit 1)
 * with the evidence as its root cause, and no copy of the diverged step (nor
 * any other) is restored. */
TEST_TIMEOUT(agent_divergence_two_ranks_stop_with_the_evidence_and_restore_nothing, 120)
{
    job j;
    pid_t agent = start(&j, "two", "2", "1:40", "stop", "400");
    ASSERT_EQ(agent_harness_exit_code(agent, test_scaled_ms(60000)), 1);
    const char *seen[] = {
        "\"event\":\"replica_divergence\"", "\"step\":40,",      "\"majority\":0,",
        "\"minority_ranks\":\"0,1\"",       "\"mode\":\"stop\"", NULL
    };
    ASSERT_EQ(agent_harness_wait_lines(j.events, seen, 1, 0), 1);
    const char *failed[] = { "\"event\":\"job_end\"", "\"status\":\"failed\"", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.events, failed, 1, 0), 1);
    const char *restored[] = { "\"event\":\"checkpoint_restored\"", NULL };
    ASSERT_EQ(count_lines(j.events, restored), 0);
    const char *formed[] = { "\"event\":\"generation_formed\"", NULL };
    ASSERT_EQ(count_lines(j.events, formed), 1); /* no second generation */
    const char *said[] = { "silent data corruption: step 40: replicated blob \"state\"",
                           "no majority", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.err, said, 1, 0), 1);
    const char *summary[] = { "checkpoint replicas diverged with no majority", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.err, summary, 1, 0), 1);
    /* The trainer never wrote a result: it did not finish on a guess. */
    char *result = agent_harness_read_file(j.result);
    ASSERT(result == NULL);
}

/* --on-divergence=warn: the step commits, the divergence is journaled once
 * (committed), said once, and counted on /metrics at every save; training
 * goes on to the end. */
TEST_TIMEOUT(agent_divergence_warn_mode_reports_counts_and_trains_on, 120)
{
    job j;
    pid_t agent = start(&j, "warn", "3", "2:40", "warn", "600");
    char where[64];
    metrics_endpoint_from(j.err, test_scaled_ms(30000), where, sizeof where);
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(60000));
    double counted = 0;
    while (counted < 2 && elastic__ms_left(deadline) > 0) {
        elastic__text page;
        elastic__text_init(&page, 1 << 22);
        int status = 0;
        if (elastic__http_get(where, "/metrics", 5000, &page, &status) == 0 && status == 200)
            counted =
                metrics_sample(page.data, "elastic_replica_divergences_total", "mode", "warn");
        elastic__text_free(&page);
        if (counted < 2) usleep(50000); /* the job's progress, not a synchronisation */
    }
    if (counted < 2) FAIL("elastic_replica_divergences_total{mode=\"warn\"} %g", counted);
    ASSERT_EQ(agent_harness_exit_code(agent, test_scaled_ms(60000)), 0);
    const char *seen[] = { "\"event\":\"replica_divergence\"",
                           "\"step\":40,",
                           "\"mode\":\"warn\"",
                           "\"committed\":1,",
                           "\"minority_ranks\":\"2\"",
                           NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.events, seen, 1, 0), 1);
    const char *any[] = { "\"event\":\"replica_divergence\"", NULL };
    ASSERT_EQ(count_lines(j.events, any), 1); /* once per generation */
    const char *said[] = { "silent data corruption: step 40:", "--on-divergence=warn", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.err, said, 1, 0), 1);
    char *result = agent_harness_read_file(j.result);
    ASSERT(result != NULL && strstr(result, "steps=600 ") == result);
    free(result);
}

/* The Python trainer (examples/python/trainer.py) the same: --store-commit
 * keeps every rank's copy of the replicated model, --corrupt 1:10 flips a
 * bit of rank 1's after step 10. The save of step 10 is not committed; on
 * one node rank 1's node is the only node (no spare can take its place), so
 * its workers stop as a failure and the job restarts from step 5, the
 * newest step the replicas agreed on, and ends with the fault-free model. */
/* The trainer's run on one node, 3 ranks, 30 steps; `corrupt` NULL: none.
 * Returns its stdout (free()). */
static char *run_python(const char *name, const char *corrupt, const char *lib_dir)
{
    char out[600];
    python_trainer t;
    python_trainer_prepare(&t, name, lib_dir);
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "3", "--max-restarts", "2");
    python_trainer_add_command(&t, &cmd);
    elasticrun_args_add(&cmd, "--steps", "30", "--store-commit");
    if (corrupt != NULL) elasticrun_args_add(&cmd, "--corrupt", corrupt);
    pid_t agent = elasticrun_args_spawn(&cmd, t.env, name);
    ASSERT_EQ(agent_harness_exit_code(agent, test_scaled_ms(90000)), 0);
    if (corrupt != NULL) {
        const char *seen[] = {
            "\"event\":\"replica_divergence\"", "\"step\":10,",    "\"tier\":\"disk\"",
            "\"minority_ranks\":\"1\"",         "\"majority\":2,", NULL
        };
        ASSERT_EQ(agent_harness_wait_lines(t.events, seen, 1, 0), 1);
    }
    snprintf(out, sizeof out, "%s/%s.out", test_tmpdir(), name);
    return agent_harness_read_file(out);
}

/* The model's exact bits, from the first "model=" of a run's output. */
static void model_of(const char *out, char *model, size_t cap)
{
    const char *at = out != NULL ? strstr(out, "model=") : NULL;
    if (at == NULL) FAIL("no model= line in:\n%s", out ? out : "(none)");
    /* Up to the last hex digit: the ranks' lines may run into each other. */
    snprintf(model, cap, "%.*s", (int)strspn(at, "model=0123456789abcdefx.p+-,"), at);
}

/* The Python trainer (examples/python/trainer.py) the same: --store-commit
 * keeps every rank's copy of the replicated model, --corrupt 1:10 flips a
 * bit of rank 1's after step 10. The save of step 10 is not committed; on
 * one node no spare can take rank 1's node's place, so its workers stop as
 * a failure and the job restarts from step 5, the newest step the replicas
 * agreed on, and ends with the fault-free model, bit for bit. */
TEST_TIMEOUT(agent_divergence_python_trainer_restarts_from_the_agreed_step, 180)
{
    const char *lib_dir = python_trainer_lib_dir();
    char *faulty = run_python("py-faulty", "1:10", lib_dir);
    char *clean = run_python("py-clean", NULL, lib_dir);
    ASSERT(faulty != NULL && clean != NULL);
    int resumed = 0;
    for (const char *at = faulty; (at = strstr(at, "start at step 5 ")) != NULL; at++) resumed++;
    if (resumed != 3) FAIL("%d ranks resumed at step 5:\n%s", resumed, faulty);
    char a[200], b[200];
    model_of(faulty, a, sizeof a);
    model_of(clean, b, sizeof b);
    ASSERT_STR_EQ(a, b);
    free(faulty);
    free(clean);
}
