/*
 * Runs the Python bindings' pytest suite (bindings/python/tests) against the
 * library and tools of this build. The adoption examples (test_torch_job.py:
 * ddp_plain.py and ddp_elastic.py under torchrun, elasticrun and alone, a
 * SIGKILL survived in place) and the wheel (test_wheel.py: a fresh venv, pip
 * install --no-index, elasticrun) are tests of their own, so a filter can pick
 * them. Skipped with the reason when /usr/bin/python3 or pytest is missing, or
 * when the library is sanitized.
 */
#include "support/agent_harness.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

#define PYTHON "/usr/bin/python3"

/* pytest over `what` (a file under bindings/python/tests, or "" for all of
 * it, then without the two files that are tests of their own); fails with
 * pytest's output. */
static void run_pytest(const char *what, int timeout_ms)
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
    char ignore1[1100] = "--ignore=/dev/null", ignore2[1100] = "--ignore=/dev/null";
    snprintf(tests, sizeof tests, "%s/bindings/python/tests/%s", test_source_dir(), what);
    snprintf(basetemp, sizeof basetemp, "--basetemp=%s/pytest", test_tmpdir());
    if (what[0] == '\0') {
        /* the adoption and wheel tests run as their own tests below */
        snprintf(ignore1, sizeof ignore1, "--ignore=%s/bindings/python/tests/test_torch_job.py",
                 test_source_dir());
        snprintf(ignore2, sizeof ignore2, "--ignore=%s/bindings/python/tests/test_wheel.py",
                 test_source_dir());
    }
    const char *argv[] = { PYTHON,   "-m",    "pytest", "-q",    "-p", "no:cacheprovider",
                           basetemp, ignore1, ignore2,  tests, NULL };
    const char *env[] = { "PYTHONDONTWRITEBYTECODE=1", NULL };
    pid_t pytest = agent_harness_spawn(PYTHON, argv, env, "pytest");
    int status = 0;
    if (!agent_harness_wait_exit(pytest, test_scaled_ms(timeout_ms), &status)) {
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

TEST_TIMEOUT(bindings_python_pytest_suite_passes, 600)
{
    run_pytest("", 540000);
}

TEST_TIMEOUT(bindings_python_adoption_examples_run_everywhere_and_recover_in_place, 600)
{
    run_pytest("test_torch_job.py", 540000);
}

TEST_TIMEOUT(bindings_python_wheel_installs_offline_and_runs_elasticrun, 600)
{
    run_pytest("test_wheel.py", 540000);
}
