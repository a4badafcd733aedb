/*
 * One generation's local workers (workers.c) and how their exits reach the
 * loop (exits.c).
 */
#ifndef ELASTIC_AGENT_WORKERS_H
#define ELASTIC_AGENT_WORKERS_H

#include "agent/group.h"
#include "agent/journal.h"
#include "agent/worker_env.h"

/* The workers' key space in the job store for the current generation. */
void agent__worker_store_prefix(const agent_group *group, char *out, size_t size);

/* What a worker of local_rank gets in the running generation: the job, the
 * store (store_prefix: agent__worker_store_prefix's, the caller's buffer),
 * the probes and the memory tier; the restore plan is the caller's to add. */
agent_worker_env agent__worker_env_of(const agent_group *group, int local_rank,
                                      const char *error_file, const char *store_prefix);

/* Begins a worker event: name, generation, rank, local_rank, pid. */
struct agent_ev_worker;
/* The fields of every event about one worker (journal_events.h). */
struct agent_ev_worker agent__ev_worker_of(const agent_group *group, const agent_worker *worker);
/* Starts the generation's workers; one that cannot start is posted as unhealthy.
 * wait_spare (the machine's decision): a dead slot no parked spare fills waits
 * for a starting spare instead of a cold start (agent__spares_await). */
int agent__workers_start(agent_group *group, bool wait_spare);
/* The spare those slots waited for parked (promoted), or exited or timed out
 * (cold-started). */
int agent__workers_start_waiting(agent_group *group);
/* Reaps whichever workers exited, each handed to on_exit in rank order. */
void agent__workers_reap(agent_group *group,
                         void (*on_exit)(agent_group *, agent_worker *, int streams_closing));
/* Signals every worker's process group; keep_survivors: not those
 * in-process recovery keeps (a generation's stop; the agent's own end
 * signals all). */
void agent__workers_signal(agent_group *group, int signum, bool keep_survivors);
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
