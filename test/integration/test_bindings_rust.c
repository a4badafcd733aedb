/*
 * Runs the Rust bindings' cargo tests (bindings/rust/run-tests.sh: unit,
 * integration with a real store and two workers under elasticrun, doc tests)
 * against the library and tools of this build. Skipped with the reason when
 * cargo or Debian's packaged crates are missing, or under ThreadSanitizer.
 */
#include "support/agent_harness.h"
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

#define CRATES "/usr/share/cargo/registry"

/* The first executable `name` on PATH, into out; false when there is none. */
static bool find_on_path(const char *name, char *out, size_t size)
{
    const char *path = getenv("PATH");
    for (const char *dir = path; dir != NULL && *dir != '\0';) {
        const char *end = strchr(dir, ':');
        size_t len = end != NULL ? (size_t)(end - dir) : strlen(dir);
        if (len > 0 && snprintf(out, size, "%.*s/%s", (int)len, dir, name) < (int)size &&
            access(out, X_OK) == 0)
            return true;
        dir = end != NULL ? end + 1 : NULL;
    }
    return false;
}

TEST_TIMEOUT(bindings_rust_cargo_tests_pass, 1200)
{
    char cargo[1024];
    if (!find_on_path("cargo", cargo, sizeof cargo))
        SKIP("cargo is not installed (apt-get install cargo)");
    if (access(CRATES "/bindgen-0.60.1", R_OK) != 0)
        SKIP("Debian's Rust crates are missing (apt-get install librust-bindgen-dev "
             "librust-libc-dev "
             "librust-pkg-config-dev)");
    const char *lib_dir = getenv("ELASTIC_LIB_DIR");
    if (lib_dir == NULL) FAIL("ELASTIC_LIB_DIR is not set (run the tests with make test)");
    if (strstr(lib_dir, "/build/tsan") != NULL)
        SKIP("the library is built with ThreadSanitizer; Rust's std is not instrumented, so its "
             "reports would be noise");
    const char *mode = strstr(lib_dir, "/build/asan") != NULL ? "asan" : "plain";
    char script[1024], cargo_env[1100];
    snprintf(script, sizeof script, "%s/bindings/rust/run-tests.sh", test_source_dir());
    snprintf(cargo_env, sizeof cargo_env, "CARGO=%s", cargo);
    const char *argv[] = { "/bin/sh", script, mode, NULL };
    const char *env[] = { cargo_env, NULL };
    pid_t run = agent_harness_spawn("/bin/sh", argv, env, "cargo");
    int status = 0;
    /* The first build compiles bindgen and its dependencies (minutes on a loaded machine). */
    if (!agent_harness_wait_exit(run, 1140000, &status)) {
        kill(-run, SIGKILL); /* cargo and everything it started: the spawn made it a group */
        FAIL("cargo test did not finish in time");
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char out_path[512], err_path[512];
        char *out =
            agent_harness_read_file(agent_harness_path(out_path, sizeof out_path, "cargo.out"));
        char *err =
            agent_harness_read_file(agent_harness_path(err_path, sizeof err_path, "cargo.err"));
        FAIL("cargo test (%s) failed (status %d):\n%s\n%s", mode, status, out ? out : "",
             err ? err : "");
    }
}
