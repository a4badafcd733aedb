/*
 * One way for the integration tests to say how elasticrun is started: an
 * argument vector built flag by flag, instead of a hand-counted array per call
 * site. argv[0] is "elasticrun" and the vector is always NULL-terminated; going
 * past its bounds fails the test (never a silently cut command line).
 *
 *   elasticrun_args a;
 *   elasticrun_args_init(&a);
 *   elasticrun_args_add(&a, "--standalone", "--nproc-per-node", "2", "--no-python");
 *   elasticrun_args_addf(&a, "--event-log=%s", events);
 *   elasticrun_args_add(&a, agent_harness_worker(), "--report", report);
 *   pid_t agent = elasticrun_args_spawn(&a, NULL, "agent");
 *
 * elasticrun_args_add keeps the caller's pointers (the strings must live until
 * the spawn); elasticrun_args_addf formats into the builder's own storage.
 */
#ifndef ELASTIC_TEST_ELASTICRUN_ARGS_H
#define ELASTIC_TEST_ELASTICRUN_ARGS_H

#include <stddef.h>
#include <sys/types.h>

#define ELASTICRUN_ARGS_MAX  96   /* arguments after argv[0] */
#define ELASTICRUN_ARGS_TEXT 8192 /* bytes for elasticrun_args_addf's copies */

typedef struct elasticrun_args {
    const char *argv[ELASTICRUN_ARGS_MAX + 2]; /* "elasticrun", the arguments, NULL */
    int argc;
    char text[ELASTICRUN_ARGS_TEXT];
    size_t text_used;
} elasticrun_args;

void elasticrun_args_init(elasticrun_args *a);
/* Appends each argument of a NULL-terminated list. */
void elasticrun_args_add_list(elasticrun_args *a, const char *const *list);
/* Appends the arguments given (one or more strings). */
#define elasticrun_args_add(a, ...) \
    elasticrun_args_add_list((a), (const char *const[]){ __VA_ARGS__, NULL })
/* Appends one argument formatted like printf (copied). */
void elasticrun_args_addf(elasticrun_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Starts bin/elasticrun with these arguments (agent_harness_spawn: extra_env
 * may be NULL; output in <tmpdir>/<name>.out and .err). */
pid_t elasticrun_args_spawn(const elasticrun_args *a, const char *const *extra_env,
                            const char *name);

#endif
