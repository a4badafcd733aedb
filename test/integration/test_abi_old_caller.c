/*
 * The growth promise of docs/ABI.md, end to end: test/abi/old_caller, built
 * against a shorter copy of the public structs, runs against this build's
 * shared library (it checks every call and the bytes after each struct).
 */
#include "support/agent_harness.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

TEST_TIMEOUT(abi_older_caller_works_with_this_library, 180)
{
    const char *abi_dir = getenv("ELASTIC_ABI_DIR");
    if (abi_dir == NULL) FAIL("ELASTIC_ABI_DIR is not set (run the tests with make test)");
    char program[1024], out_path[512], err_path[512];
    snprintf(program, sizeof program, "%s/old_caller", abi_dir);
    if (access(program, X_OK) != 0) FAIL("%s is not built", program);
    const char *argv[] = { program, test_tmpdir(), NULL };
    pid_t pid = agent_harness_spawn(program, argv, NULL, "old_caller");
    int status = 0;
    if (!agent_harness_wait_exit(pid, 120000, &status)) {
        kill(pid, SIGKILL);
        FAIL("old_caller did not finish in time");
    }
    char *out =
        agent_harness_read_file(agent_harness_path(out_path, sizeof out_path, "old_caller.out"));
    char *err =
        agent_harness_read_file(agent_harness_path(err_path, sizeof err_path, "old_caller.err"));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL("old_caller failed (status %d):\n%s\n%s", status, out ? out : "", err ? err : "");
    ASSERT(out != NULL && strstr(out, "every call worked") != NULL);
    free(out);
    free(err);
}
