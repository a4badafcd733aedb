/*
 * An operator starts a c10d job again after its store was lost (issue 26):
 * the job before reached generation 2 (a worker died once) and left its
 * markers in the checkpoint directory; the job started again on a fresh
 * store counts generations from 1. With the defaults (--max-restarts 0) it
 * must resume from the old job's newest step and commit, because markers
 * and the fence order (incarnation, generation) and the new run's
 * incarnation is larger. Before incarnations its first commit was refused
 * as fenced and the job failed.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include "common/clock.h"
#include "common/dir.h"

#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NODES 2

typedef struct run {
    elastic_store_server *server;
    char endpoint[64];
    pid_t agents[NODES];
    char names[NODES][48];
} run;

/* NODES c10d agents of one demo-trainer rank each on a store the test hosts
 * (so the test can lose it), with `extra` elasticrun flags (NULL-terminated)
 * and the trainer's --steps. */
static void run_start(run *r, const char *tag, const char *ckpt, const char *result,
                      const char *steps, const char *const *extra, const char *const *trainer_extra)
{
    char trainer[1024]; /* test_example_path's buffer is shared with the spawn's */
    snprintf(trainer, sizeof trainer, "%s", test_example_path("demo_trainer"));
    ASSERT_OK(elastic_store_server_start(NULL, &r->server));
    snprintf(r->endpoint, sizeof r->endpoint, "127.0.0.1:%d", test_server_port(r->server));
    for (int i = 0; i < NODES; i++) {
        snprintf(r->names[i], sizeof r->names[i], "%s-agent%d", tag, i);
        elasticrun_args cmd;
        elasticrun_args_init(&cmd);
        elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", r->endpoint, "--rdzv-id", "restarted",
                            "--rdzv-conf", "is_host=0,last_call_timeout=1", "--local-addr",
                            "127.0.0.1");
        elasticrun_args_add_list(&cmd, extra);
        elasticrun_args_add(&cmd, "--no-python", trainer, "--ckpt-dir", ckpt, "--steps", steps,
                            "--step-ms", "20", "--ckpt-every", "10", "--result", result);
        elasticrun_args_add_list(&cmd, trainer_extra);
        r->agents[i] = elasticrun_args_spawn(&cmd, NULL, r->names[i]);
    }
}

/* Waits until one agent's console (rank 0's stdout is on the node that is
 * group rank 0, either one) has a line holding every needle. */
static bool wait_console(const run *r, const char *const *needles, int timeout_ms)
{
    uint64_t deadline = elastic__deadline_ms(test_scaled_ms(timeout_ms));
    for (;;) {
        for (int i = 0; i < NODES; i++) {
            char out[600];
            snprintf(out, sizeof out, "%s/%s.out", test_tmpdir(), r->names[i]);
            if (agent_harness_wait_lines(out, needles, 1, 0) == 1) return true;
        }
        if (elastic__ms_left(deadline) == 0) return false;
        usleep(20000);
    }
}

/* Both agents' consoles on stderr, for a failure's reader. */
static void show_consoles(const run *r)
{
    for (int i = 0; i < NODES; i++)
        for (int k = 0; k < 2; k++) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s.%s", test_tmpdir(), r->names[i], k ? "err" : "out");
            char *text = agent_harness_read_file(path);
            size_t len = text != NULL ? strlen(text) : 0;
            fprintf(stderr, "---- %s (last 3000 bytes)\n%s\n", path,
                    text != NULL ? text + (len > 3000 ? len - 3000 : 0) : "(none)");
            free(text);
        }
}

/* The newest committed step in dir (read as no generation: fences nothing,
 * registers nothing; world 2 so that opening removes no other rank's shard). */
static uint64_t latest_step(const char *dir)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.incarnation = 0, o.generation = 0, o.world = 2, o.rank = 0;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    uint64_t step = 0;
    ASSERT_OK(elastic_ckpt_latest(c, &step));
    elastic_ckpt_close(c);
    return step;
}

/* Whether DIR/generations has a marker of `generation`, and the largest
 * incarnation among them (a bare "<G>" is incarnation 0). */
static bool marker_of(const char *ckpt, uint64_t generation, uint64_t *incarnation)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/generations", ckpt);
    DIR *d = elastic__opendir(dir); /* not opendir: see common/dir.h */
    ASSERT(d != NULL);
    bool found = false;
    *incarnation = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        unsigned long long inc = 0, g = 0;
        char tail;
        bool named = sscanf(e->d_name, "%llu-%llu%c", &inc, &g, &tail) == 2 ||
                     (inc = 0, sscanf(e->d_name, "%llu%c", &g, &tail) == 1);
        if (!named || g != generation) continue;
        found = true;
        if (inc > *incarnation) *incarnation = inc;
    }
    closedir(d);
    return found;
}

TEST_TIMEOUT(agent_operator_restart_of_a_c10d_job_resumes_from_its_checkpoint_with_the_defaults,
             240)
{
    char dir[512], ckpt[600], result[600];
    agent_harness_path(dir, sizeof dir, "operator-restart");
    mkdir(dir, 0755);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    snprintf(result, sizeof result, "%s/result.txt", dir);
    mkdir(ckpt, 0755);

    /* The job before: rank 1 dies at step 25 of generation 1, generation 2
     * resumes from step 20 and checkpoints on. */
    run old;
    const char *old_flags[] = { "--max-restarts", "1", NULL };
    const char *die[] = { "--die-at-save", "1:25", NULL };
    run_start(&old, "old", ckpt, result, "100000", old_flags, die);
    const char *resumed[] = { "at step 20 from disk", NULL }; /* resumed or reconfigured */
    if (!wait_console(&old, resumed, 60000)) {
        show_consoles(&old);
        FAIL("the old job's generation 2 did not resume");
    }
    /* Step 60 committed: rank 0's "(checkpoint)" says its own shard is saved,
     * and the other rank may still be saving (the last to save commits); the
     * ranks all-reduce every step, so once rank 0 saved step 70 every rank
     * is past its save of step 60. */
    const char *past[] = { "step 70 ", "(checkpoint)", NULL };
    if (!wait_console(&old, past, 60000)) {
        show_consoles(&old);
        FAIL("the old job's generation 2 did not reach step 70");
    }
    /* Its store's host is lost: the store goes and every agent with it. */
    elastic_store_server_close(old.server);
    for (int i = 0; i < NODES; i++) {
        kill(old.agents[i], SIGKILL);
        int status;
        ASSERT(agent_harness_wait_exit(old.agents[i], 10000, &status));
    }
    uint64_t old_step = latest_step(ckpt);
    ASSERT(old_step >= 60);
    uint64_t old_incarnation = 0;
    if (!marker_of(ckpt, 2, &old_incarnation))
        FAIL("the old job left no marker of generation 2 in %s", ckpt);

    /* The operator starts it again on a fresh store, with the defaults. */
    run again;
    char steps[32];
    snprintf(steps, sizeof steps, "%" PRIu64, old_step + 20);
    const char *none[] = { NULL };
    run_start(&again, "again", ckpt, result, steps, none, none);
    for (int i = 0; i < NODES; i++)
        if (agent_harness_exit_code(again.agents[i], 120000) != 0) {
            show_consoles(&again);
            FAIL("the restarted job failed on %s", again.names[i]);
        }
    elastic_store_server_close(again.server);
    char said[64];
    snprintf(said, sizeof said, "resumed at step %" PRIu64 " from disk", old_step);
    const char *from_old[] = { said, NULL };
    if (!wait_console(&again, from_old, 1000)) {
        show_consoles(&again);
        FAIL("the restarted job did not say \"%s\"", said);
    }
    ASSERT_EQ(latest_step(ckpt), old_step + 20);
    /* Its generation 1 is a later incarnation than the old job's. */
    uint64_t new_incarnation = 0;
    ASSERT(marker_of(ckpt, 1, &new_incarnation));
    if (new_incarnation <= old_incarnation)
        FAIL("generation 1's incarnation %" PRIu64 " is not past the old job's %" PRIu64,
             new_incarnation, old_incarnation);
    char *text = agent_harness_read_file(result);
    ASSERT(text != NULL);
    free(text);
}

/* The job run again after it finished resumes at its final step and trains
 * nothing: it reports the result the first run did, loss included (the demo
 * trainer keeps the last step's loss in its checkpointed state; it reported
 * loss 0 when a chaos job's last generation restored its final step). */
static char *run_standalone(const char *tag, const char *ckpt, const char *result)
{
    char trainer[1024];
    snprintf(trainer, sizeof trainer, "%s", test_example_path("demo_trainer"));
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--no-python", trainer,
                        "--ckpt-dir", ckpt, "--steps", "30", "--result", result);
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, tag);
    ASSERT_EQ(agent_harness_exit_code(agent, test_scaled_ms(60000)), 0);
    return agent_harness_read_file(result);
}

TEST_TIMEOUT(agent_operator_restart_of_a_finished_job_reports_the_same_result, 120)
{
    char dir[512], ckpt[600], first[600], again[600];
    agent_harness_path(dir, sizeof dir, "finished");
    mkdir(dir, 0755);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    mkdir(ckpt, 0755);
    snprintf(first, sizeof first, "%s/first.txt", dir);
    snprintf(again, sizeof again, "%s/again.txt", dir);
    char *want = run_standalone("finished-first", ckpt, first);
    char *got = run_standalone("finished-again", ckpt, again);
    ASSERT(want != NULL && got != NULL);
    ASSERT(strstr(want, "steps=30 ") == want);
    ASSERT_STR_EQ(got, want);
    char out[700];
    snprintf(out, sizeof out, "%s/finished-again.out", test_tmpdir());
    const char *resumed[] = { "resumed at step 30 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(out, resumed, 1, 0), 1);
    free(want);
    free(got);
}
