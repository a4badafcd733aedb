/*
 * Interpreters started ahead (prestart.c): one Python interpreter per local
 * rank, torch already imported, waiting to become that rank's worker in the
 * next generation. docs/OPERATIONS.md, "Interpreters started ahead".
 */
#ifndef ELASTIC_AGENT_PRESTART_H
#define ELASTIC_AGENT_PRESTART_H

#include "agent/group.h"
#include "agent/proc.h"

/* Its private record; on only for a Python entrypoint whose group can
 * restart, unless --no-prestart. */
int agent__prestart_init(agent_group *group);
/* A generation's workers started: replacements for the interpreters it used
 * start after a hold, so their imports do not compete with its start. */
void agent__prestart_generation_started(agent_group *group);
/* Instead of spawning `spawn` (the worker's interpreter, argv, environment)
 * for local_rank: hands it to that rank's pre-started interpreter, whose pid
 * and output pipes are returned as agent__proc_spawn's would be. false: none
 * fits (start it afresh); a failure is said once and turns them off. */
bool agent__prestart_take(agent_group *group, int local_rank, const agent_spawn *spawn, pid_t *pid,
                          int *out_fd, int *err_fd);
/* The job ended here: the unused ones are killed and none is started again. */
void agent__prestart_stop(agent_group *group);
/* The group is closing: as stop, and its timer closed. */
void agent__prestart_close(agent_group *group);
void agent__prestart_destroy(agent_group *group);

/* The Python program a pre-started interpreter runs (`python -u -c` it). */
extern const char agent__prestart_program[];

#endif /* ELASTIC_AGENT_PRESTART_H */
