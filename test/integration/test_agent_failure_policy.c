/*
 * The failure policy acted on (issue 37), with the defaults users get:
 * a bug in the training code that fails the same way at the same step in
 * every generation stops the job at its second occurrence, exit 70, with
 * one line naming the error, its frame and both generations, not after
 * --max-restarts 10 more replays; --torchrun-restarts restores torchrun's
 * counting; a rank SIGKILLed once is restarted and is not called user code.
 */
#include "agent/oom.h"
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "support/python_trainer.h"
#include "test.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *at = text; at != NULL && (at = strstr(at, needle)) != NULL; at++) n++;
    return n;
}

static char *read_tmp(const char *name)
{
    char path[600];
    return agent_harness_read_file(agent_harness_path(path, sizeof path, name));
}

/* elasticrun --standalone on the Python trainer that raises ValueError at
 * step 37 on every rank, every generation, --max-restarts 10: it must exit
 * 70 (the policy's stop); returns its event log (free it). Its output is
 * <tmp>/LABEL.err. */
static char *run_python_bug(python_trainer *t, const char *nproc, const char *name,
                            const char *label)
{
    python_trainer_prepare(t, name, python_trainer_lib_dir());
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", nproc, "--max-restarts", "10");
    python_trainer_add_command(t, &cmd);
    elasticrun_args_add(&cmd, "--steps", "50", "--every", "10", "--fail-at-step", "37");
    pid_t agent = elasticrun_args_spawn(&cmd, t->env, label);
    ASSERT_EQ(agent_harness_exit_code(agent, test_scaled_ms(90000)), 70);
    char *log = agent_harness_read_file(t->events);
    ASSERT(log != NULL);
    return log;
}

/* The Python trainer raising ValueError at step 37 on every rank, every
 * generation, --max-restarts 10: stopped after the second occurrence. */
TEST_TIMEOUT(agent_failure_policy_python_bug_stops_at_second_occurrence, 120)
{
    python_trainer t;
    /* one rank: two ranks failing at once would be most_ranks' in generation 1 */
    char *log = run_python_bug(&t, "1", "policy-py", "policy_py");
    char *err = read_tmp("policy_py.err");
    ASSERT(err != NULL);
    /* two failures decided (a rank's each generation), the second the stop */
    if (count_of(log, "\"event\":\"failure_classified\"") != 2 ||
        count_of(log, "\"decision\":\"stop_bug\",\"rule\":\"repeat\"") != 1 ||
        count_of(log, "\"type\":\"ValueError\"") != 2 ||
        count_of(log, "\"event\":\"generation_formed\"") != 2)
        FAIL("events:\n%s", log);
    /* one line: the cause, its frame, the generations seen */
    if (count_of(err, "stopping the job: a deterministic bug in the training code: ValueError "
                      "at trainer.py:") != 1 ||
        strstr(err, "in check_batch: bad batch at step <n>: label out of range at step 36, in "
                    "generations 1 and 2") == NULL) /* the last step the rank beat, 36 (it fails in 37) */
        FAIL("console:\n%s", err);
    /* each failure's own line says what follows it, once decided: the first
     * a restart, the second the stop (never "restarting" before a stop) */
    if (count_of(err, "failed: exit code 1; restarting (9 of 10 restarts left); user code: "
                      "ValueError") != 1 ||
        count_of(err, "failed: exit code 1; the job stops: a deterministic bug (exit 70); user "
                      "code: ValueError") != 1 ||
        count_of(err, "restarting (") != 1)
        FAIL("the failures' lines:\n%s", err);
    free(log);
    free(err);
}

/* The same bug on both ranks of one node, which raise it within ms of each
 * other: the first rank's failure stops the second as its interpreter exits,
 * after its traceback. That one still failed by itself, so most_ranks stops
 * the job in generation 1 (it used to count as stopped by us 5 times in 8:
 * the repeat rule's stop in generation 2, the bug replayed once). */
TEST_TIMEOUT(agent_failure_policy_python_bug_on_every_rank_stops_in_generation_1, 120)
{
    python_trainer t;
    char *log = run_python_bug(&t, "2", "policy-py2", "policy_py2");
    if (count_of(log, "\"event\":\"generation_formed\"") != 1 ||
        count_of(log, "\"event\":\"failure_classified\"") != 2 ||
        count_of(log, "\"decision\":\"stop_bug\",\"rule\":\"most_ranks\"") != 1)
        FAIL("events:\n%s", log);
    /* The first rank's failure alone would restart; its line waits for the
     * stop to settle, so it says what followed (it said "restarting (9 of 10
     * restarts left)" just before the job stopped). */
    char *err = read_tmp("policy_py2.err");
    ASSERT(err != NULL);
    if (count_of(err, "failed: exit code 1; the job stops: a deterministic bug (exit 70); user "
                      "code: ValueError") != 1 ||
        strstr(err, "restarting (") != NULL)
        FAIL("the failures' lines:\n%s", err);
    free(err);
    free(log);
}

/* The C trainer's bad batch (an error file), rank 1 only, --max-restarts 10:
 * the same stop; --torchrun-restarts: every failure spends one, as torchrun. */
static pid_t run_c_bug(const char *events, const char *name, const char *max_restarts,
                       bool torchrun)
{
    char worker[512];
    snprintf(worker, sizeof worker, "%s", test_helper_path("step_bug_worker"));
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--max-restarts",
                        max_restarts, "--event-log", events);
    if (torchrun) elasticrun_args_add(&cmd, "--torchrun-restarts");
    elasticrun_args_add(&cmd, "--no-python", worker, "--fail-at-step", "37", "--step-ms", "5",
                        "--rank-only", "1");
    return elasticrun_args_spawn(&cmd, NULL, name);
}

TEST_TIMEOUT(agent_failure_policy_c_bug_stops_at_second_occurrence, 120)
{
    char events[512];
    agent_harness_path(events, sizeof events, "policy_c_events.jsonl");
    pid_t agent = run_c_bug(events, "policy_c", "10", false);
    ASSERT_EQ(agent_harness_exit_code(agent, test_scaled_ms(60000)), 70);
    char *log = agent_harness_read_file(events);
    char *err = read_tmp("policy_c.err");
    ASSERT(log != NULL && err != NULL);
    if (count_of(log, "\"event\":\"failure_classified\"") != 2 ||
        count_of(log, "\"decision\":\"stop_bug\",\"rule\":\"repeat\"") != 1 ||
        count_of(log, "\"exit_code\":70") < 1 ||
        /* the failing rank's last heartbeat step, the same in both generations */
        count_of(log, "\"rank\":1,\"local_rank\":1,\"step\":37,\"exit_code\":1,") != 2 ||
        strstr(log, "the same error at step 37 in generations 1 and 2") == NULL)
        FAIL("events:\n%s", log);
    if (strstr(err, "stopping the job: a deterministic bug in the training code: BadBatchError "
                    "at step_bug_worker.c:") == NULL ||
        strstr(err, "in generations 1 and 2") == NULL)
        FAIL("console:\n%s", err);
    free(log);
    free(err);
}

TEST_TIMEOUT(agent_failure_policy_torchrun_restarts_counts_every_failure, 120)
{
    char events[512];
    agent_harness_path(events, sizeof events, "policy_torchrun_events.jsonl");
    pid_t agent = run_c_bug(events, "policy_torchrun", "2", true);
    ASSERT_EQ(agent_harness_exit_code(agent, test_scaled_ms(60000)), 1);
    char *log = agent_harness_read_file(events);
    ASSERT(log != NULL);
    if (count_of(log, "\"event\":\"failure_classified\"") != 3 ||
        count_of(log, "\"decision\":\"stop_bug\"") != 0 ||
        count_of(log, "\"rule\":\"torchrun\"") != 3 ||
        count_of(log, "\"decision\":\"stop_budget\"") != 1)
        FAIL("events:\n%s", log);
    free(log);
}

/* A rank SIGKILLed once, at a step drawn at random: restarted, the job
 * finishes, and the failure is not the training code's. */
TEST_TIMEOUT(agent_failure_policy_sigkill_once_restarts, 120)
{
    char events[512], mark[512], steps[16];
    agent_harness_path(events, sizeof events, "policy_kill_events.jsonl");
    agent_harness_path(mark, sizeof mark, "policy_kill_mark");
    unlink(mark);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    snprintf(steps, sizeof steps, "%d", 1 + rand() % 9); /* of the 10 */
    /* rank 1's first life steps (10 ms each) to the drawn step, then is
     * SIGKILLed; every rank of the next generation steps 10 and exits 0 */
    const char *script = "i=0; while [ $i -lt 10 ]; do"
                         "  if [ \"$RANK\" = 1 ] && [ ! -e \"$1\" ] && [ $i -eq \"$2\" ]; then"
                         "    : > \"$1\"; kill -9 $$; fi;"
                         "  sleep 0.01; i=$((i + 1)); done";
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--max-restarts", "3",
                        "--event-log", events, "--no-python", "/bin/sh", "-c", script, "sh", mark,
                        steps);
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "policy_kill");
    ASSERT_EQ(agent_harness_exit_code(agent, test_scaled_ms(60000)), 0);
    char *log = agent_harness_read_file(events);
    ASSERT(log != NULL);
    if (count_of(log, "\"event\":\"failure_classified\"") != 1 ||
        count_of(log, "\"signal\":9") < 1 || count_of(log, "\"class\":\"user_code\"") != 0 ||
        count_of(log, "\"decision\":\"restart\"") != 1)
        FAIL("step %s; events:\n%s", steps, log);
    free(log);
}

/* Two nodes (c10d, the first hosting the store), the bug on rank 1's node
 * only: that node decides, closes the job with the bug as its cause, and
 * both exit 70; the other node's summary names the bug and the decider. */
TEST_TIMEOUT(agent_failure_policy_bug_on_one_node_stops_every_node, 120)
{
    elastic_store_server *probe; /* a free port for the endpoint */
    ASSERT_OK(elastic_store_server_start(NULL, &probe));
    char endpoint[64], worker[512];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(probe));
    elastic_store_server_close(probe);
    snprintf(worker, sizeof worker, "%s", test_helper_path("step_bug_worker"));
    pid_t agents[2];
    for (int i = 0; i < 2; i++) {
        char events[512], name[64];
        snprintf(name, sizeof name, "policy_node%d_events.jsonl", i);
        agent_harness_path(events, sizeof events, name);
        elasticrun_args cmd;
        elasticrun_args_init(&cmd);
        elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "policybug",
                            "--local-addr", "127.0.0.1", "--max-restarts", "10", "--event-log",
                            events, "--no-python", worker, "--fail-at-step", "37", "--step-ms", "5",
                            "--rank-only", "1");
        snprintf(name, sizeof name, "policy_node%d", i);
        agents[i] = elasticrun_args_spawn(&cmd, NULL, name);
    }
    int decided = 0, told = 0;
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(agent_harness_exit_code(agents[i], test_scaled_ms(60000)), 70);
        char name[64];
        snprintf(name, sizeof name, "policy_node%d.err", i);
        char *err = read_tmp(name);
        ASSERT(err != NULL);
        if (strstr(err, "stopping the job: a deterministic bug in the training code: "
                        "BadBatchError at step_bug_worker.c:") != NULL)
            decided++;
        else if (strstr(err, "it was closed while this node waited") != NULL &&
                 strstr(err, "deterministic bug: BadBatchError at step_bug_worker.c:") != NULL &&
                 strstr(err, "in generations 1 and 2") != NULL)
            told++;
        else
            FAIL("node %d said:\n%s", i, err);
        free(err);
    }
    ASSERT_EQ(decided, 1);
    ASSERT_EQ(told, 1);
}

static int count_lines(const char *text, const char *a, const char *b, const char *c);

/* Issue 37's race made certain: two nodes, both ranks find the bad batch
 * at step 37, rank 1 half a second late and ignoring its agent's SIGTERM
 * (it finishes its step first). Rank 1's agent hears rank 0's end of the
 * generation before its own rank fails; that failure is its own all the
 * same (not our signal) and reaches the job-wide history: most_ranks stops
 * the job in generation 1, not at the replay, and both nodes exit 70. */
TEST_TIMEOUT(agent_failure_policy_failure_after_the_end_elsewhere_stops_in_generation_1, 120)
{
    elastic_store_server *probe; /* a free port for the endpoint */
    ASSERT_OK(elastic_store_server_start(NULL, &probe));
    char endpoint[64], worker[512], events[2][512];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(probe));
    elastic_store_server_close(probe);
    snprintf(worker, sizeof worker, "%s", test_helper_path("step_bug_worker"));
    pid_t agents[2];
    for (int i = 0; i < 2; i++) {
        char name[64];
        snprintf(name, sizeof name, "policy_late%d_events.jsonl", i);
        agent_harness_path(events[i], sizeof events[i], name);
        unlink(events[i]);
        elasticrun_args cmd;
        elasticrun_args_init(&cmd);
        elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "policylate",
                            "--local-addr", "127.0.0.1", "--max-restarts", "10", "--event-log",
                            events[i], "--no-python", worker, "--fail-at-step", "37", "--step-ms",
                            "5", "--late-rank", "1", "--late-ms", "500");
        snprintf(name, sizeof name, "policy_late%d", i);
        agents[i] = elasticrun_args_spawn(&cmd, NULL, name);
    }
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(agent_harness_exit_code(agents[i], test_scaled_ms(60000)), 70);
    char *log[2] = { agent_harness_read_file(events[0]), agent_harness_read_file(events[1]) };
    ASSERT(log[0] != NULL && log[1] != NULL);
    /* the late node: the one that heard rank 0's end of the generation */
    int l = count_lines(log[0], "\"event\":\"generation_ended\"", "\"rank\":0,", NULL) > 0 ? 0 : 1;
    int formed = count_of(log[0], "\"event\":\"generation_formed\"") +
                 count_of(log[1], "\"event\":\"generation_formed\"");
    /* one generation on each node; on the late node no failure of its own
     * ended it (no "failure" event), yet rank 1's failure was classified
     * there and decided the stop, on 2 of 2 ranks */
    if (formed != 2 ||
        count_lines(log[l], "\"event\":\"generation_ended\"", "\"rank\":0,", NULL) != 1 ||
        count_of(log[l], "\"event\":\"failure\"") != 0 ||
        count_lines(log[l], "\"event\":\"failure_classified\"", "\"rank\":1,",
                    "\"decision\":\"stop_bug\",\"rule\":\"most_ranks\"") != 1 ||
        count_of(log[l], "the same error on 2 of 2 ranks at step 37 of generation 1") != 1 ||
        count_of(log[1 - l], "\"decision\":\"stop_bug\"") != 0)
        FAIL("node 0's events:\n%s\nnode 1's events:\n%s", log[0], log[1]);
    free(log[0]);
    free(log[1]);
}

/* A memory cgroup of the test's own with a small limit (v1's
 * memory.limit_in_bytes or v2's memory.max, no swap), made under this
 * process's memory cgroup; false where the host does not let it. The agent's
 * own cgroup (reaper.c) is a cgroup v2 one that only kills: on a host whose
 * memory controller is v1 it has no memory.max, so the limit is set here and
 * elasticrun is started inside it (its workers inherit it). */
static bool write_cg(const char *dir, const char *name, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    if (f == NULL) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static bool make_limited_memory_cgroup(char *dir, size_t size, const char *limit)
{
    char text[4096], own[400];
    bool v1 = false;
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL) return false;
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    if (agent__oom_cgroup_dir(text, len, "/sys/fs/cgroup", own, sizeof own, &v1) != 0) return false;
    snprintf(dir, size, "%s/elastic_oom_agent.%d", own, (int)getpid());
    if (mkdir(dir, 0755) != 0) return false;
    bool limited = write_cg(dir, v1 ? "memory.limit_in_bytes" : "memory.max", limit);
    write_cg(dir, v1 ? "memory.memsw.limit_in_bytes" : "memory.swap.max", v1 ? limit : "0");
    if (!limited) rmdir(dir);
    return limited;
}

/* A worker allocating past its cgroup's memory limit, --max-restarts 0: the
 * OOM killer's SIGKILL is seen as such (the mark the agent took at the
 * worker's start), classified OOM, and said "out of memory", never "killed
 * by signal 9". */
TEST_TIMEOUT(agent_failure_policy_oom_kill_is_said_out_of_memory, 120)
{
    char cg[600], events[512], procs[700], worker[512];
    if (!make_limited_memory_cgroup(cg, sizeof cg, "100663296")) /* 96 MiB */
        SKIP("this host does not let the test make and limit a memory cgroup");
    agent_harness_path(events, sizeof events, "policy_oom_events.jsonl");
    unlink(events);
    snprintf(procs, sizeof procs, "%s/cgroup.procs", cg);
    snprintf(worker, sizeof worker, "%s", test_helper_path("oom_worker"));
    /* sh joins the limited cgroup, then becomes elasticrun */
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    cmd.argv[0] = "sh";
    elasticrun_args_add(&cmd, "-c", "echo $$ > \"$1\" && shift && exec \"$@\"", "sh", procs,
                        agent_harness_elasticrun(), "--standalone", "--nproc-per-node", "1",
                        "--max-restarts", "0", "--event-log", events, "--no-python", worker,
                        "--mib", "1024");
    pid_t agent = agent_harness_spawn("/bin/sh", cmd.argv, NULL, "policy_oom");
    int code = agent_harness_exit_code(agent, test_scaled_ms(90000));
    for (int i = 0; i < 500 && rmdir(cg) != 0 && errno == EBUSY; i++) usleep(10000);
    char *log = agent_harness_read_file(events);
    char *err = read_tmp("policy_oom.err");
    ASSERT(log != NULL && err != NULL);
    if (code == 0 || code == 70 || strstr(err, "allocated and not killed") != NULL)
        FAIL("exit %d; console:\n%s", code, err);
    if (count_of(log, "\"event\":\"failure_classified\"") != 1 ||
        count_of(log, "\"class\":\"oom\"") != 1 || count_of(log, "\"signal\":9") < 1)
        FAIL("events:\n%s", log);
    if (strstr(err, "out of memory: killed by the kernel's OOM killer") == NULL ||
        strstr(err, "killed by signal 9") != NULL)
        FAIL("console:\n%s", err);
    /* explain says it the same way */
    const char *explain[] = { "elasticctl", "explain", events, NULL };
    pid_t ctl =
        agent_harness_spawn(test_bin_path("elasticctl"), explain, NULL, "policy_oom_explain");
    ASSERT_EQ(agent_harness_exit_code(ctl, test_scaled_ms(30000)), 0);
    char *said = read_tmp("policy_oom_explain.out");
    ASSERT(said != NULL);
    if (strstr(said, "what:      out of memory: killed by the kernel's OOM killer (signal 9)") ==
            NULL ||
        strstr(said, "class:     OOM") == NULL)
        FAIL("explain said:\n%s", said);
    free(said);
    free(log);
    free(err);
}

/* Two nodes, one rank each: rank 1 is SIGKILLed in the first generation;
 * rank 0's collective then breaks under it (it says so, as torch does, once
 * its peer's failure was decided: a failure_classified event in either
 * node's log). Whether rank 0's agent stopped it first or it failed first,
 * the job counts one failure, caused by rank 1: exactly one
 * failure_classified that is no consequence, rank 1's, and any other is a
 * consequence naming rank 1; one restart, and the job finishes. */
static int count_lines(const char *text, const char *a, const char *b, const char *c)
{
    int n = 0;
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        char buf[8192];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        if (strstr(buf, a) != NULL && (b == NULL || strstr(buf, b) != NULL) &&
            (c == NULL || strstr(buf, c) != NULL))
            n++;
        line = end != NULL ? end + 1 : NULL;
    }
    return n;
}

TEST_TIMEOUT(agent_failure_policy_collective_failure_after_a_death_is_one_failure, 120)
{
    elastic_store_server *probe; /* a free port for the endpoint */
    ASSERT_OK(elastic_store_server_start(NULL, &probe));
    char endpoint[64], events[2][512];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(probe));
    elastic_store_server_close(probe);
    for (int i = 0; i < 2; i++) {
        char name[64];
        snprintf(name, sizeof name, "policy_peer%d_events.jsonl", i);
        agent_harness_path(events[i], sizeof events[i], name);
        unlink(events[i]);
    }
    /* generation 1: rank 1 dies; rank 0 waits (bounded) for its peer's
     * failure to be decided, then fails as a broken collective does;
     * generation 2: both finish */
    const char *script =
        "[ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] || exit 0;"
        "[ \"$RANK\" = 1 ] && kill -9 $$;"
        "i=0; while [ $i -lt 3000 ]; do"
        "  if grep -q failure_classified \"$1\" \"$2\" 2>/dev/null; then"
        "    echo 'torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "remote process exited or there was a network error' >&2; exit 1; fi;"
        "  sleep 0.01; i=$((i + 1)); done; exit 3";
    pid_t agents[2];
    for (int i = 0; i < 2; i++) {
        char name[64];
        elasticrun_args cmd;
        elasticrun_args_init(&cmd);
        elasticrun_args_add(&cmd, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "policypeer",
                            "--local-addr", "127.0.0.1", "--max-restarts", "3", "--event-log",
                            events[i], "--no-python", "/bin/sh", "-c", script, "sh", events[0],
                            events[1]);
        snprintf(name, sizeof name, "policy_peer%d", i);
        agents[i] = elasticrun_args_spawn(&cmd, NULL, name);
    }
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(agent_harness_exit_code(agents[i], test_scaled_ms(60000)), 0);
    char *log[2] = { agent_harness_read_file(events[0]), agent_harness_read_file(events[1]) };
    ASSERT(log[0] != NULL && log[1] != NULL);
    int causes = 0, rank1_causes = 0, all = 0, consequences_of_1 = 0, restarts = 0;
    for (int i = 0; i < 2; i++) {
        const char *ev = "\"event\":\"failure_classified\"";
        all += count_lines(log[i], ev, NULL, NULL);
        causes += count_lines(log[i], ev, "\"consequence\":0", NULL);
        rank1_causes += count_lines(log[i], ev, "\"consequence\":0", "\"rank\":1,");
        consequences_of_1 += count_lines(log[i], ev, "\"consequence\":1", "\"cause_rank\":1,");
        restarts +=
            count_lines(log[i], "\"event\":\"generation_formed\"", "\"restart_count\":1", NULL);
    }
    if (causes != 1 || rank1_causes != 1 || consequences_of_1 != all - 1 || restarts != 2)
        FAIL("node 0's events:\n%s\nnode 1's events:\n%s", log[0], log[1]);
    /* explain over both logs names one cause (advice only for a cause) */
    const char *explain[] = { "elasticctl", "explain", events[0], events[1], NULL };
    pid_t ctl =
        agent_harness_spawn(test_bin_path("elasticctl"), explain, NULL, "policy_peer_explain");
    ASSERT_EQ(agent_harness_exit_code(ctl, test_scaled_ms(30000)), 0);
    char *said = read_tmp("policy_peer_explain.out");
    ASSERT(said != NULL);
    if (count_of(said, "look at:") != 1 ||
        (all > 1 && strstr(said, "(a consequence of rank 1's failure)") == NULL))
        FAIL("explain said:\n%s", said);
    free(said);
    /* which way the race went: a consequence was decided, or rank 0 was stopped first */
    fprintf(stderr, "# rank 0's collective failure %s\n",
            all > 1 ? "was decided a consequence of rank 1's" : "was stopped by its agent first");
    free(log[0]);
    free(log[1]);
}

/* Lost nodes past --max-infra-restarts (0 here, so one loss is past it;
 * 20 an hour by default): three nodes, the third's agent SIGKILLed; the
 * loss spends no restart, but the two left close the job and exit 69, their
 * summary naming the bound and the lost node, and `elasticctl explain` over
 * a survivor's log prints it as the job's end. */
TEST_TIMEOUT(agent_failure_policy_lost_nodes_past_the_infra_bound_exit_69, 120)
{
    elastic_store_server *probe; /* a free port for the endpoint */
    ASSERT_OK(elastic_store_server_start(NULL, &probe));
    char endpoint[64], report[512], events[3][512];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", test_server_port(probe));
    elastic_store_server_close(probe);
    agent_harness_path(report, sizeof report, "infra_report");
    unlink(report);
    pid_t agents[3];
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "infra_node%d_events.jsonl", i);
        agent_harness_path(events[i], sizeof events[i], name);
        unlink(events[i]);
        elasticrun_args cmd;
        elasticrun_args_init(&cmd);
        elasticrun_args_add(&cmd, "--nnodes", "2:3", "--nproc-per-node", "1", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "infrabound",
                            "--rdzv-conf", i == 0 ? "is_host=1" : "is_host=0", "--local-addr",
                            "127.0.0.1", "--max-restarts", "10", "--max-infra-restarts", "0",
                            "--event-log", events[i], "--no-python", agent_harness_worker(),
                            "--report", report);
        snprintf(name, sizeof name, "infra_node%d", i);
        agents[i] = elasticrun_args_spawn(&cmd, NULL, name);
        if (i == 0) { /* the others join once it hosts the store */
            const char *hosting[] = { "\"hosts_store\":1", NULL };
            ASSERT_EQ(agent_harness_wait_lines(events[0], hosting, 1, test_scaled_ms(20000)), 1);
        }
    }
    const char *started[] = { "start ", "world=3 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(report, started, 3, test_scaled_ms(30000)), 3);
    ASSERT_EQ(kill(agents[2], SIGKILL), 0);
    int status;
    agent_harness_wait_exit(agents[2], test_scaled_ms(5000), &status);
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(agent_harness_exit_code(agents[i], test_scaled_ms(30000)), 69);
        char name[64];
        snprintf(name, sizeof name, "infra_node%d.err", i);
        char *err = read_tmp(name);
        ASSERT(err != NULL);
        if (strstr(err, "the job failed: infrastructure failures past their bound: lost or "
                        "replaced nodes ended 1 generation within an hour, "
                        "--max-infra-restarts 0 (last: node ") == NULL ||
            strstr(err, "exit 69") == NULL || strstr(err, "restart budget") != NULL)
            FAIL("node %d said:\n%s", i, err);
        free(err);
    }
    char *log = agent_harness_read_file(events[1]);
    ASSERT(log != NULL);
    if (count_of(log, "\"event\":\"job_end\"") != 1 || count_of(log, "\"exit_code\":69") != 1 ||
        count_of(log, "\"restarts\":0,") != 1)
        FAIL("events:\n%s", log);
    free(log);
    const char *explain[] = { "elasticctl", "explain", events[1], NULL };
    pid_t ctl = agent_harness_spawn(test_bin_path("elasticctl"), explain, NULL, "infra_explain");
    ASSERT_EQ(agent_harness_exit_code(ctl, 30000), 0);
    char *text = read_tmp("infra_explain.out");
    ASSERT(text != NULL);
    if (strstr(text, "the job ended: failed, exit 69") == NULL ||
        strstr(text, "why:       infrastructure failures past their bound") == NULL ||
        strstr(text, "class:     node lost") == NULL)
        FAIL("explain said:\n%s", text);
    free(text);
}
