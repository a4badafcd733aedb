/*
 * Multi-host tests on simulated hosts (network namespaces, test/netns/): each
 * TEST runs one bash script of test/netns/, which skips itself (exit 77, with
 * the reason) when this machine cannot make namespaces, e.g. not root.
 */
#include "test.h"

#include <sys/wait.h>

/* Runs test/netns/<script> with bash; passes, skips or fails as the script did. */
static void run_netns_script(const char *script)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/test/netns/%s", test_source_dir(), script);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        setenv("TMPDIR", test_tmpdir(), 1);
        execlp("bash", "bash", path, (char *)NULL);
        fprintf(stderr, "cannot run bash %s\n", path);
        _exit(127);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) _exit(77); /* it printed "SKIP: why" */
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL("%s failed (status 0x%x); its output is above", script, status);
}

TEST_TIMEOUT(netns_harness_cuts_partitions_delays_and_tears_down, 90)
{
    run_netns_script("selftest.sh");
}
