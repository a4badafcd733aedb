/* Running a test script (script_test.h). */
#include "support/script_test.h"

#include "test.h"

#include <sys/wait.h>

void script_test_run(const char *dir, const char *script)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/test/%s/%s", test_source_dir(), dir, script);
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
