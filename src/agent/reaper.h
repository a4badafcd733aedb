/*
 * reaper.c: a process that kills every worker's process group (and cgroup)
 * and removes the run directory when the agent dies, SIGKILL included.
 */
#ifndef ELASTIC_AGENT_REAPER_H
#define ELASTIC_AGENT_REAPER_H

#include <sys/types.h>

struct agent_group;

/* The agent's side of the reaper: its pipe, cgroups and the descendants it
 * was told of; private to reaper.c. */
typedef struct agent_reaper agent_reaper;

/* Allocates the group's reaper record (no process yet); destroy frees it,
 * after agent__reaper_stop. */
int agent__reaper_init(struct agent_group *group);
void agent__reaper_destroy(struct agent_group *group);
int agent__reaper_start(struct agent_group *group);
/* A worker now leads process group `pgid` (replacing old_pgid, 0: none). */
void agent__reaper_track(struct agent_group *group, pid_t old_pgid, pid_t pgid);
void agent__reaper_stop(struct agent_group *group);
/* Stops watching the reaper (before the loop closes; the reaper stays). */
void agent__reaper_unwatch(struct agent_group *group);
/* Removes the run directories of dead agents under tmp. */
void agent__reaper_sweep_stale(const char *tmp);

#endif /* ELASTIC_AGENT_REAPER_H */
