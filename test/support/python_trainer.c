/* examples/python/trainer.py under elasticrun (python_trainer.h). */
#include "support/python_trainer.h"

#include "support/agent_harness.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PYTHON "/usr/bin/python3"

const char *python_trainer_lib_dir(void)
{
    if (access(PYTHON, X_OK) != 0) SKIP(PYTHON " is not installed");
    const char *lib_dir = getenv("ELASTIC_LIB_DIR");
    if (lib_dir == NULL) FAIL("ELASTIC_LIB_DIR is not set (run the tests with make test)");
    if (strstr(lib_dir, "/build/asan") != NULL || strstr(lib_dir, "/build/tsan") != NULL)
        SKIP("the library is built with a sanitizer: plain python cannot load it");
    return lib_dir;
}

void python_trainer_prepare(python_trainer *t, const char *name, const char *lib_dir)
{
    memset(t, 0, sizeof *t);
    agent_harness_path(t->dir, sizeof t->dir, name);
    mkdir(t->dir, 0755);
    snprintf(t->ckpt, sizeof t->ckpt, "%s/ckpt", t->dir);
    mkdir(t->ckpt, 0755);
    snprintf(t->events, sizeof t->events, "%s/events.jsonl", t->dir);
    snprintf(t->script, sizeof t->script, "%s/examples/python/trainer.py", test_source_dir());
    snprintf(t->pythonpath, sizeof t->pythonpath, "PYTHONPATH=%s/bindings/python",
             test_source_dir());
    snprintf(t->lib_env, sizeof t->lib_env, "ELASTIC_LIB_DIR=%s", lib_dir);
    t->env[0] = t->pythonpath;
    t->env[1] = t->lib_env;
    t->env[2] = NULL;
}

void python_trainer_add_command(const python_trainer *t, elasticrun_args *cmd)
{
    elasticrun_args_add(cmd, "--event-log", t->events, "--no-python", PYTHON, t->script, "--dir",
                        t->ckpt);
}
