/*
 * Runs the Python bindings' pytest suite (bindings/python/tests) against the
 * library and tools of this build. Skipped with the reason when
 * /usr/bin/python3 or pytest is missing, or when the library is sanitized.
 */
#include "support/agent_harness.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

#define PYTHON "/usr/bin/python3"

TEST_TIMEOUT(bindings_python_pytest_suite_passes, 600)
{
    if (access(PYTHON, X_OK) != 0) SKIP(PYTHON " is not installed");
    if (system(PYTHON " -c 'import pytest' >/dev/null 2>&1") != 0)
        SKIP(PYTHON " cannot import pytest (install python3-pytest)");
    const char *lib_dir = getenv("ELASTIC_LIB_DIR");
    if (lib_dir == NULL) FAIL("ELASTIC_LIB_DIR is not set (run the tests with make test)");
    /* A sanitized libelastic needs its runtime loaded first; plain python cannot dlopen it. */
    if (strstr(lib_dir, "/build/asan") != NULL || strstr(lib_dir, "/build/tsan") != NULL)
        SKIP("the library is built with a sanitizer and cannot be loaded into an unsanitized "
             "python");
    char tests[1024], basetemp[1024], out_path[512], err_path[512];
    snprintf(tests, sizeof tests, "%s/bindings/python/tests", test_source_dir());
    snprintf(basetemp, sizeof basetemp, "--basetemp=%s/pytest", test_tmpdir());
    const char *argv[] = { PYTHON,   "-m",  "pytest", "-q", "-p", "no:cacheprovider",
                           basetemp, tests, NULL };
    const char *env[] = { "PYTHONDONTWRITEBYTECODE=1", NULL };
    pid_t pytest = agent_harness_spawn(PYTHON, argv, env, "pytest");
    int status = 0;
    if (!agent_harness_wait_exit(pytest, test_scaled_ms(540000), &status)) {
        kill(pytest, SIGKILL);
        FAIL("pytest did not finish in time");
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *out =
            agent_harness_read_file(agent_harness_path(out_path, sizeof out_path, "pytest.out"));
        char *err =
            agent_harness_read_file(agent_harness_path(err_path, sizeof err_path, "pytest.err"));
        FAIL("pytest failed (status %d):\n%s\n%s", status, out ? out : "", err ? err : "");
    }
}
