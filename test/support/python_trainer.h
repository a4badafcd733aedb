/*
 * examples/python/trainer.py under elasticrun, as the agent tests run it:
 * Debian's /usr/bin/python3 (the one with torch), the bindings from the
 * source tree and the library the suite built.
 *
 *   const char *lib_dir = python_trainer_lib_dir();   (SKIPs where it cannot run)
 *   python_trainer t;
 *   python_trainer_prepare(&t, "my-run", lib_dir);     (<tmp>/my-run/{ckpt,events.jsonl})
 *   elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2");
 *   python_trainer_add_command(&t, &cmd);              (--event-log ... trainer.py --dir ckpt)
 *   elasticrun_args_add(&cmd, "--steps", "30");        (the trainer's own flags)
 *   pid_t agent = elasticrun_args_spawn(&cmd, t.env, "my_run");
 */
#ifndef ELASTIC_TEST_PYTHON_TRAINER_H
#define ELASTIC_TEST_PYTHON_TRAINER_H

#include "support/elasticrun_args.h"

typedef struct python_trainer {
    char dir[512];    /* <tmp>/<name> */
    char ckpt[600];   /* its ckpt/: the trainer's --dir */
    char events[600]; /* its events.jsonl: elasticrun's --event-log */
    char script[600];
    char pythonpath[700], lib_env[700];
    const char *env[3]; /* PYTHONPATH and ELASTIC_LIB_DIR for the spawn, NULL-ended */
} python_trainer;

/* $ELASTIC_LIB_DIR; the test SKIPs without /usr/bin/python3 or when the
 * library is sanitized (a plain interpreter cannot load it) and FAILs
 * outside make test (the variable unset). */
const char *python_trainer_lib_dir(void);
void python_trainer_prepare(python_trainer *t, const char *name, const char *lib_dir);
/* Appends --event-log, --no-python, the interpreter, the script and --dir. */
void python_trainer_add_command(const python_trainer *t, elasticrun_args *cmd);

#endif
