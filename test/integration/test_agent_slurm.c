/*
 * elasticrun in a Slurm job step, without Slurm: the step's environment is
 * given to agents on this machine (two "nodes", localhost and ghost), and a
 * stand-in scontrol (ELASTIC_SCONTROL) records what would be drained. The
 * real cluster runs the same paths in test/slurm/ (as root); these run
 * everywhere: a job formed from the environment alone, the start line and
 * --help saying what it gave, a second local task standing aside, a
 * malformed variable refused by name, too few nodes -> exit 75 with the
 * lost node drained, and SIGTERM as a notice the workers save on.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define START_MS 20000

/* A job id of this test process's own, so its store port (29400 + id mod
 * 1000) differs from another run's on the same machine. */
static int job_id(void)
{
    return 700000 + (int)(getpid() % 1000);
}

/* The environment of Slurm task `procid` on node `node` of a 2-node step. */
static const char *const *step_env(const char *node, int procid, const char *extra)
{
    static char entries[11][256];
    static const char *env[12];
    int n = 0;
    snprintf(entries[n++], sizeof entries[0], "SLURM_JOB_ID=%d", job_id());
    snprintf(entries[n++], sizeof entries[0], "SLURM_STEP_ID=3");
    snprintf(entries[n++], sizeof entries[0], "SLURM_STEP_NODELIST=localhost,ghost");
    snprintf(entries[n++], sizeof entries[0], "SLURM_JOB_NODELIST=localhost,ghost");
    snprintf(entries[n++], sizeof entries[0], "SLURMD_NODENAME=%s", node);
    snprintf(entries[n++], sizeof entries[0], "SLURM_PROCID=%d", procid);
    snprintf(entries[n++], sizeof entries[0], "SLURM_NODEID=%d", procid);
    snprintf(entries[n++], sizeof entries[0], "SLURM_LOCALID=0");
    snprintf(entries[n++], sizeof entries[0], "SLURM_STEP_TASKS_PER_NODE=1(x2)");
    snprintf(entries[n++], sizeof entries[0], "ELASTIC_SCONTROL=%s/scontrol", test_tmpdir());
    if (extra != NULL) snprintf(entries[n++], sizeof entries[0], "%s", extra);
    for (int i = 0; i < n; i++) env[i] = entries[i];
    env[n] = NULL;
    return env;
}

static bool file_has(const char *name, const char *needle)
{
    char path[1024];
    char *text = agent_harness_read_file(agent_harness_path(path, sizeof path, name));
    bool found = text != NULL && strstr(text, needle) != NULL;
    free(text);
    return found;
}

/* A stand-in scontrol that appends its arguments to <tmpdir>/scontrol.log. */
static void fake_scontrol(void)
{
    char path[1024], log[1024];
    snprintf(path, sizeof path, "%s/scontrol", test_tmpdir());
    snprintf(log, sizeof log, "%s/scontrol.log", test_tmpdir());
    FILE *file = fopen(path, "w");
    ASSERT(file != NULL);
    fprintf(file, "#!/bin/sh\necho \"$*\" >> '%s'\n", log);
    fclose(file);
    ASSERT_EQ(chmod(path, 0755), 0);
}

/* Starts node `node`'s agent with the worker and `extra` flags (NULL-terminated). */
static pid_t start_node(const char *node, int procid, const char *report, const char *const *extra,
                        const char *const *worker_args)
{
    char events[1024], name[64];
    snprintf(name, sizeof name, "events.%s", node);
    agent_harness_path(events, sizeof events, name);
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--event-log", events);
    if (extra != NULL) elasticrun_args_add_list(&cmd, extra);
    elasticrun_args_add(&cmd, "--no-python", agent_harness_worker(), "--report", report);
    if (worker_args != NULL) elasticrun_args_add_list(&cmd, worker_args);
    return elasticrun_args_spawn(&cmd, step_env(node, procid, NULL), node);
}

TEST_TIMEOUT(agent_slurm_job_forms_from_the_step_environment_alone, 60)
{
    char report[512], want[256];
    agent_harness_path(report, sizeof report, "report");
    const char *worker[] = { "--exit-when-world", "2", NULL };
    pid_t a = start_node("localhost", 0, report, NULL, worker);
    pid_t b = start_node("ghost", 1, report, NULL, worker);
    ASSERT_EQ(agent_harness_exit_code(a, START_MS), 0);
    ASSERT_EQ(agent_harness_exit_code(b, START_MS), 0);
    const char *started[] = { "start ", "world=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, started, 2, 1000), 2);
    snprintf(want, sizeof want,
             "elasticrun: slurm job %d step 3: run id slurm-%d.3, nnodes 2:2, rdzv c10d "
             "localhost:%d (this node hosts it)",
             job_id(), job_id(), 29400 + job_id() % 1000);
    ASSERT(file_has("localhost.err", want));
    ASSERT(file_has("ghost.err", ", node ghost, preferred rank 1"));
    /* Events name the Slurm node and job; the node order is SLURM_PROCID's. */
    snprintf(want, sizeof want, "\"slurm_job\":\"%d\",\"slurm_node\":\"ghost\"", job_id());
    ASSERT(file_has("events.ghost", want));
    ASSERT(file_has("events.ghost", "\"node\":\"ghost-"));
    ASSERT(file_has("events.ghost", "\"group_rank\":1,"));
    ASSERT(file_has("events.localhost", "\"group_rank\":0,"));
}

TEST_TIMEOUT(agent_slurm_help_and_stand_aside_say_what_the_step_gave, 30)
{
    elasticrun_args help;
    elasticrun_args_init(&help);
    elasticrun_args_add(&help, "--help");
    ASSERT_EQ(agent_harness_exit_code(elasticrun_args_spawn(&help, step_env("ghost", 1, NULL), "help"), 10000),
              0);
    ASSERT(file_has("help.out", "In this Slurm job step (each a default its flag overrides):"));
    ASSERT(file_has("help.out", "nnodes 2:2, rdzv c10d localhost:"));
    ASSERT(file_has("help.out", "--slurm-drain"));
    /* The second of two tasks srun started on this node: the first is its agent. */
    char report[512];
    agent_harness_path(report, sizeof report, "aside-report");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--no-python", agent_harness_worker(), "--report", report);
    static const char *const aside_env[] = { "SLURM_JOB_ID=9",
                                             "SLURM_STEP_ID=0",
                                             "SLURM_STEP_NODELIST=localhost",
                                             "SLURMD_NODENAME=localhost",
                                             "SLURM_NODEID=0",
                                             "SLURM_LOCALID=1",
                                             "SLURM_STEP_TASKS_PER_NODE=2",
                                             NULL };
    ASSERT_EQ(agent_harness_exit_code(elasticrun_args_spawn(&cmd, aside_env, "aside"), 10000), 0);
    ASSERT(file_has("aside.err", "another task of this step runs node localhost's agent"));
    ASSERT(access(report, F_OK) != 0); /* no worker ran */
}

TEST_TIMEOUT(agent_slurm_malformed_step_variable_is_refused_by_name, 30)
{
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--no-python", "true");
    ASSERT_EQ(
        agent_harness_exit_code(elasticrun_args_spawn(
                         &cmd, step_env("localhost", 0, "SLURM_STEP_NODELIST=node[1-"), "bad"),
                     10000),
        2);
    ASSERT(file_has("bad.err", "Slurm's environment: SLURM_STEP_NODELIST: \"node[1-\""));
    /* A flag overrides what the step gives: --standalone and --nnodes 1 run alone. */
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--no-python", "true");
    ASSERT_EQ(agent_harness_exit_code(elasticrun_args_spawn(&cmd, step_env("localhost", 0, NULL), "alone"),
                           START_MS),
              0);
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nnodes", "1", "--no-python", "true");
    ASSERT_EQ(
        agent_harness_exit_code(elasticrun_args_spawn(&cmd, step_env("localhost", 0, NULL), "one"), START_MS),
        0);
}

TEST_TIMEOUT(agent_slurm_too_few_nodes_exit_75_and_drain_the_lost_one, 60)
{
    fake_scontrol();
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    const char *flags[] = { "--slurm-drain", "--rdzv-conf", "join_timeout=3", NULL };
    pid_t a = start_node("localhost", 0, report, flags, NULL);
    /* The second node joins once the first hosts the store. */
    const char *hosting[] = { "\"hosts_store\":1", NULL };
    char events[1024];
    ASSERT_EQ(
        agent_harness_wait_lines(agent_harness_path(events, sizeof events, "events.localhost"),
                                 hosting, 1, START_MS),
        1);
    pid_t b = start_node("ghost", 1, report, flags, NULL);
    const char *started[] = { "start ", "world=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, started, 2, START_MS), 2);
    ASSERT_EQ(kill(b, SIGKILL), 0); /* the node is gone, its workers with it (their reaper) */
    ASSERT_EQ(agent_harness_exit_code(a, 30000), 75);
    int status;
    agent_harness_wait_exit(b, 5000, &status);
    ASSERT(file_has("scontrol.log", "update NodeName=ghost State=DRAIN Reason=elastic: lost from "
                                    "the job, which then had too few nodes (requeue)"));
    ASSERT(!file_has("scontrol.log", "NodeName=localhost"));
    ASSERT(file_has("events.localhost", "\"event\":\"slurm_drain\""));
    ASSERT(file_has("events.localhost", "\"slurm_node\":\"ghost\""));
    ASSERT(file_has("localhost.err", "slurm: drained ghost"));
}

TEST_TIMEOUT(agent_slurm_sigterm_is_a_notice_the_workers_save_on, 60)
{
    char report[512], ckpt[512], trainer[1024];
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(ckpt, sizeof ckpt, "ckpt");
    /* a copy: test_helper_path's buffer is shared with the spawn's test_bin_path */
    snprintf(trainer, sizeof trainer, "%s", test_helper_path("slurm_trainer"));
    static const char *const one_node[] = { "SLURM_JOB_ID=11", "SLURM_STEP_ID=0",
                                            "SLURM_STEP_NODELIST=localhost",
                                            "SLURMD_NODENAME=localhost", NULL };
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nproc-per-node", "2", "--grace-period", "10", "--no-python",
                        trainer);
    elasticrun_args_add(&cmd, "--dir", ckpt, "--report", report, "--step-ms", "50",
                        "--save-on-notice", "1");
    pid_t agent = elasticrun_args_spawn(&cmd, one_node, "agent");
    const char *trained[] = { "commit ", " step=3 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, trained, 1, START_MS), 1);
    ASSERT_EQ(kill(agent, SIGTERM), 0); /* as scancel: the agent first (the workers may be too) */
    ASSERT_EQ(agent_harness_exit_code(agent, 20000), 143);
    const char *noticed[] = { "notice ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, noticed, 2, 1000), 2);
    char first[512], second[512];
    ASSERT(agent_harness_nth_line(report, noticed, 0, first, sizeof first));
    ASSERT(agent_harness_nth_line(report, noticed, 1, second, sizeof second));
    long saved = agent_harness_line_field(first, "saved");
    ASSERT(saved >= 3);
    ASSERT_EQ(agent_harness_line_field(second, "saved"), saved); /* both ranks, one step */
}

/* A node whose own rank keeps failing (3 of the job's 3 failures within the
 * failure policy's hour, with the defaults): the policy quarantines it, and
 * the one path that drains a failing node drains it (--slurm-drain); it
 * steps aside (--straggler-quarantine 0: for good, exit 0) and the other
 * node goes on alone at once (the quarantined node was counted gone) and
 * finishes. Every failure spends its restart: 3 of --max-restarts 10. */
TEST_TIMEOUT(agent_slurm_policy_quarantine_drains_the_failing_node, 90)
{
    fake_scontrol();
    char report[512];
    agent_harness_path(report, sizeof report, "report");
    const char *flags[] = { "--slurm-drain", "--nnodes", "1:2", "--max-restarts", "10",
                            "--straggler-quarantine", "0", NULL };
    /* rank 1 (ghost's: the preferred rank from SLURM_PROCID) fails at once,
     * saying nothing (class unknown: never a deterministic bug); alone,
     * rank 0 finishes */
    const char *worker[] = { "--fail-rank", "1", "--fail-code", "3", "--fail-until-restart", "100",
                             "--exit-when-world", "1", NULL };
    pid_t a = start_node("localhost", 0, report, flags, worker);
    const char *hosting[] = { "\"hosts_store\":1", NULL };
    char events[1024];
    ASSERT_EQ(
        agent_harness_wait_lines(agent_harness_path(events, sizeof events, "events.localhost"),
                                 hosting, 1, START_MS),
        1);
    pid_t b = start_node("ghost", 1, report, flags, worker);
    ASSERT_EQ(agent_harness_exit_code(b, 60000), 0);
    ASSERT_EQ(agent_harness_exit_code(a, 30000), 0);
    ASSERT(file_has("ghost.err", "steps aside: quarantined by the failure policy: 3 failures of "
                                 "this node within 3600 s, most of the job's"));
    ASSERT(file_has("scontrol.log", "update NodeName=ghost State=DRAIN Reason=elastic: "
                                    "quarantined by the failure policy: 3 failures"));
    ASSERT(!file_has("scontrol.log", "NodeName=localhost"));
    ASSERT(file_has("events.ghost", "\"rule\":\"node_quarantine\""));
    ASSERT(file_has("events.ghost", "\"quarantine\":1"));
    ASSERT(file_has("events.ghost", "\"status\":\"evicted\""));
    /* the survivor's last generation is its own, world 1 */
    const char *alone[] = { "start rank=0 local=0 world=1 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, alone, 1, 1000), 1);
}
