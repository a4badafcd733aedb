/* The elasticrun argument builder (elasticrun_args.h). */
#include "support/elasticrun_args.h"

#include "support/agent_harness.h"
#include "test.h"

#include <stdarg.h>

void elasticrun_args_init(elasticrun_args *a)
{
    memset(a, 0, sizeof *a);
    a->argv[0] = "elasticrun";
    a->argc = 1;
}

static void append(elasticrun_args *a, const char *arg)
{
    if (arg == NULL) FAIL("elasticrun_args: a NULL argument after \"%s\"", a->argv[a->argc - 1]);
    if (a->argc > ELASTICRUN_ARGS_MAX)
        FAIL("elasticrun_args: more than %d arguments (raise ELASTICRUN_ARGS_MAX)",
             ELASTICRUN_ARGS_MAX);
    a->argv[a->argc++] = arg;
    a->argv[a->argc] = NULL;
}

void elasticrun_args_add_list(elasticrun_args *a, const char *const *list)
{
    for (size_t i = 0; list[i] != NULL; i++) append(a, list[i]);
}

void elasticrun_args_addf(elasticrun_args *a, const char *fmt, ...)
{
    size_t room = sizeof a->text - a->text_used;
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(a->text + a->text_used, room, fmt, args);
    va_end(args);
    if (n < 0 || (size_t)n >= room)
        FAIL("elasticrun_args: formatted arguments exceed %d bytes (raise ELASTICRUN_ARGS_TEXT)",
             ELASTICRUN_ARGS_TEXT);
    append(a, a->text + a->text_used);
    a->text_used += (size_t)n + 1;
}

pid_t elasticrun_args_spawn(const elasticrun_args *a, const char *const *extra_env,
                            const char *name)
{
    return agent_harness_spawn(agent_harness_elasticrun(), a->argv, extra_env, name);
}
