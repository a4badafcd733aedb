/* NCCL faults through elasticrun with the test double: a hung collective
 * becomes the job's root cause (nccl_timeout, with rank, communicator,
 * collective and time waited) in the summary and the event log; and with
 * in-process recovery the same hang costs no process: the agent aborts and
 * reconfigures the workers, the library rebuilds the communicator inside
 * poll, and training finishes. */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

static char helper[1024], double_env[3][4200], dir_env[4200];

static const char *const *double_environment(const char *hang)
{
    const char *lib = getenv("ELASTIC_NCCL_DOUBLE");
    if (lib == NULL) SKIP("ELASTIC_NCCL_DOUBLE not set (run through make test)");
    snprintf(double_env[0], sizeof double_env[0], "ELASTIC_NCCL_LIBRARY=%s", lib);
    snprintf(double_env[1], sizeof double_env[1], "ELASTIC_CUDART_LIBRARY=%s", lib);
    snprintf(double_env[2], sizeof double_env[2], "NCCL_DOUBLE_HANG=%s", hang);
    snprintf(dir_env, sizeof dir_env, "NCCL_DOUBLE_DIR=%s", test_tmpdir());
    static const char *env[5];
    env[0] = double_env[0];
    env[1] = double_env[1];
    env[2] = double_env[2];
    env[3] = dir_env;
    env[4] = NULL;
    snprintf(helper, sizeof helper, "%s", test_helper_path("nccl_worker"));
    return env;
}

static int run_elasticrun(const elasticrun_args *cmd, const char *const *env, int timeout_ms)
{
    pid_t pid = elasticrun_args_spawn(cmd, env, "elasticrun");
    int status = 0;
    if (!agent_harness_wait_exit(pid, timeout_ms, &status)) {
        kill(pid, SIGKILL);
        FAIL("elasticrun did not exit in time");
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_TIMEOUT(nccl_hang_is_the_jobs_root_cause, 120)
{
    const char *const *env = double_environment("1:5");
    char events[512];
    agent_harness_path(events, sizeof events, "events.jsonl");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nproc-per-node", "2", "--max-restarts", "0");
    elasticrun_args_addf(&cmd, "--event-log=%s", events);
    elasticrun_args_add(&cmd, "--no-python", helper, "--steps", "100000", "--timeout-ms", "1000");
    int code = run_elasticrun(&cmd, env, test_scaled_ms(60000));
    char path[600];
    char *err = agent_harness_read_file(agent_harness_path(path, sizeof path, "elasticrun.err"));
    ASSERT(err != NULL);
    if (code == 0) FAIL("the job succeeded despite the hang:\n%s", err);
    const char *first = strstr(err, "first failure: rank ");
    if (first == NULL || strstr(first, "nccl_timeout: rank ") == NULL ||
        strstr(first, "communicator \"dp\", collective 5 not done after ") == NULL)
        FAIL("no nccl_timeout root cause in the summary:\n%s", err);
    free(err);
    const char *probe[] = { "\"probe_failed\"", "\"probe\":\"nccl_timeout\"", "collective 5",
                            NULL };
    const char *built[] = { "\"nccl_comm_built\"", "\"tag\":\"dp\"", "\"method\":\"created\"",
                            NULL };
    char line[4096];
    if (!agent_harness_nth_line(events, probe, 0, line, sizeof line) ||
        !agent_harness_nth_line(events, built, 1, line, sizeof line))
        FAIL("events missing:\n%s", agent_harness_read_file(events));
}

TEST_TIMEOUT(nccl_hang_recovers_in_process_without_trainer_code, 120)
{
    const char *const *env = double_environment("1:5");
    char events[512];
    agent_harness_path(events, sizeof events, "events.jsonl");
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nproc-per-node", "2", "--max-restarts", "1",
                        "--in-process-recovery");
    elasticrun_args_addf(&cmd, "--event-log=%s", events);
    /* A deadline that a loaded machine under sanitizers (ThreadSanitizer:
     * scaled) meets in the healthy generation. */
    elasticrun_args_add(&cmd, "--no-python", helper, "--steps", "30", "--timeout-ms");
    elasticrun_args_addf(&cmd, "%d", test_scaled_ms(3000));
    int code = run_elasticrun(&cmd, env, test_scaled_ms(90000));
    char path[600];
    char *out = agent_harness_read_file(agent_harness_path(path, sizeof path, "elasticrun.out"));
    char *err = agent_harness_read_file(agent_harness_path(path, sizeof path, "elasticrun.err"));
    if (code != 0) FAIL("exit %d\nstdout:\n%s\nstderr:\n%s", code, out ? out : "", err ? err : "");
    /* Both processes lived through it: each rebuilt in generation 2 and finished. */
    for (int rank = 0; rank < 2; rank++) {
        char rebuilt[96], done[96];
        snprintf(rebuilt, sizeof rebuilt, "reconfigured rank=%d world=2 generation=2 nccl_rank=%d",
                 rank, rank);
        snprintf(done, sizeof done, "done rank=%d world=2 generation=2", rank);
        if (out == NULL || strstr(out, rebuilt) == NULL || strstr(out, done) == NULL)
            FAIL("rank %d did not rebuild in place:\n%s\n%s", rank, out ? out : "", err ? err : "");
    }
    free(out);
    free(err);
    const char *reconfigured[] = { "\"reconfigured\"", "\"generation\":2", NULL };
    const char *rebuilt[] = { "\"nccl_comm_built\"", "\"generation\":2", "\"rebuilds\":1", NULL };
    char line[4096];
    if (!agent_harness_nth_line(events, reconfigured, 0, line, sizeof line) ||
        !agent_harness_nth_line(events, rebuilt, 1, line, sizeof line))
        FAIL("events missing:\n%s", agent_harness_read_file(events));
}
