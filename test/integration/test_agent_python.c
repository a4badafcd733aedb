/*
 * The workers' Python: elasticrun's start line names the interpreter
 * (PYTHON_EXEC) and its version, --help mentions PYTHON_EXEC, and a worker
 * that dies of ModuleNotFoundError gets a PYTHON_EXEC hint in the summary.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#define PYTHON "/usr/bin/python3"

/* Runs elasticrun to the end; returns its stderr (free()). */
static char *run_elasticrun(const elasticrun_args *cmd, const char *const *env, int *exit_code)
{
    pid_t agent = elasticrun_args_spawn(cmd, env, "agent");
    int status = 0;
    if (!agent_harness_wait_exit(agent, test_scaled_ms(60000), &status)) {
        kill(agent, SIGKILL);
        waitpid(agent, &status, 0);
        *exit_code = -1;
    } else {
        *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    char path[512];
    return agent_harness_read_file(agent_harness_path(path, sizeof path, "agent.err"));
}

TEST_TIMEOUT(agent_start_line_names_the_interpreter_and_a_missing_module_suggests_python_exec, 120)
{
    if (access(PYTHON, X_OK) != 0) SKIP(PYTHON " is not installed");
    char script[512], version[64] = "";
    snprintf(script, sizeof script, "%s/needs_a_module.py", test_tmpdir());
    FILE *f = fopen(script, "w");
    ASSERT(f != NULL);
    fputs("import elastic_no_such_module_for_this_test\n", f);
    fclose(f);
    FILE *p = popen(PYTHON " --version 2>&1", "r");
    ASSERT(p != NULL);
    ASSERT(fgets(version, sizeof version, p) != NULL);
    pclose(p);
    version[strcspn(version, "\n")] = '\0';

    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", script);
    const char *env[] = { "PYTHON_EXEC=" PYTHON, NULL };
    int code = 0;
    char *err = run_elasticrun(&cmd, env, &code);
    ASSERT(err != NULL);
    ASSERT_EQ(code, 1);
    char start[768];
    snprintf(start, sizeof start, "2 workers on this node: " PYTHON " (%s) -u %s", version, script);
    if (strstr(err, start) == NULL) FAIL("no start line \"%s\" in:\n%s", start, err);
    ASSERT(strstr(err, "ModuleNotFoundError") != NULL);
    char hint[256];
    snprintf(hint, sizeof hint, "hint: the workers ran " PYTHON " (%s); ", version);
    if (strstr(err, hint) == NULL || strstr(err, "set PYTHON_EXEC") == NULL)
        FAIL("no hint in:\n%s", err);
    free(err);

    /* a plain failure gets no hint, and a missing interpreter says so on the start line */
    elasticrun_args fail_cmd;
    elasticrun_args_init(&fail_cmd);
    elasticrun_args_add(&fail_cmd, "--standalone", "-m", "json.tool", "/nonexistent/file");
    const char *missing_env[] = { "PYTHON_EXEC=/nonexistent/python3", NULL };
    err = run_elasticrun(&fail_cmd, env, &code);
    ASSERT(err != NULL);
    ASSERT_EQ(code, 1);
    ASSERT(strstr(err, ": " PYTHON " (Python ") != NULL);
    ASSERT(strstr(err, " -u -m json.tool") != NULL);
    ASSERT(strstr(err, "hint:") == NULL);
    free(err);
    err = run_elasticrun(&fail_cmd, missing_env, &code);
    ASSERT(err != NULL);
    ASSERT_EQ(code, 1);
    if (strstr(err, "/nonexistent/python3 (not found)") == NULL)
        FAIL("missing interpreter not named:\n%s", err);
    free(err);
}

TEST_TIMEOUT(agent_help_mentions_python_exec, 30)
{
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--help");
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, "help");
    int status = 0;
    ASSERT(agent_harness_wait_exit(agent, test_scaled_ms(20000), &status));
    char path[512];
    char *out = agent_harness_read_file(agent_harness_path(path, sizeof path, "help.out"));
    ASSERT(out != NULL);
    ASSERT(strstr(out, "PYTHON_EXEC") != NULL);
    free(out);
}
