/*
 * One generation's local workers (workers.c) and how their exits reach the
 * loop (exits.c).
 */
#ifndef ELASTIC_AGENT_WORKERS_H
#define ELASTIC_AGENT_WORKERS_H

#include "agent/group.h"
#include "agent/journal.h"

/* The workers' key space in the job store for the current generation. */
void agent__worker_store_prefix(const agent_group *group, char *out, size_t size);

/* Begins a worker event: name, generation, rank, local_rank, pid. */
void agent__event_worker(agent_event *event, const agent_group *group, agent_event_type type,
                         const agent_worker *worker);
/* Starts the generation's workers; one that cannot start is posted as unhealthy. */
int agent__workers_start(agent_group *group);
/* Reaps whichever workers exited, each handed to on_exit in rank order. */
void agent__workers_reap(agent_group *group, void (*on_exit)(agent_group *, agent_worker *));
/* Signals every worker's process group (while stopping: not those
 * in-process recovery keeps). */
void agent__workers_signal(agent_group *group, int signum);
/* The job is stopping (SIGTERM/SIGINT to the agent): each attached worker
 * gets a stop notice with the grace period, before the signal follows. */
void agent__workers_notice(agent_group *group);

/* exits.c: a worker's exit reaches the loop through its pidfd (SIGCHLD where
 * pidfds are unavailable), posted as AGENT_GROUP_CHILDREN_EXITED. start()
 * right after spawning; stop() once reaped. */
int agent__exits_init(agent_group *group);
void agent__exits_close(agent_group *group);
void agent__exit_watch_start(agent_group *group, agent_worker *worker);
void agent__exit_watch_stop(agent_worker *worker);

#endif /* ELASTIC_AGENT_WORKERS_H */
