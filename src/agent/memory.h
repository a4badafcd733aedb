/*
 * The node's memory checkpoint tier as the agent hosts it (memory.c;
 * --memory-ckpt, docs/CHECKPOINT.md "Memory tier").
 */
#ifndef ELASTIC_AGENT_MEMORY_H
#define ELASTIC_AGENT_MEMORY_H

#include "agent/group.h"

/* The group's tier record (private to memory.c): allocated by init (no
 * tier yet), freed by destroy with the restore plan. */
int agent__memory_init(agent_group *group);
void agent__memory_destroy(agent_group *group);

/* Creates the tier and starts its service when opts.memory_ckpt is set.
 * `key`: what the replica channel authenticates with (the job's token, or
 * the run's replica key); `listen_host`: the node's address, where its
 * receiver listens; NULL: a one-node job, no receiver (no key needed). */
int agent__memory_start(agent_group *group, const char *key, const char *listen_host);
void agent__memory_stop(agent_group *group);
/* A worker saved `step` in `tier` (CHANNEL__TIER_*): checkpoint_saved, and
 * the service looks for the new memory step at once. */
void agent__memory_saved(agent_group *group, int local_rank, int rank, uint64_t step,
                         unsigned tier);
/* A worker restored: checkpoint_restored, and the console's "resumed at step
 * S from ..." line (once per generation, for the node's first worker). */
void agent__memory_restored(agent_group *group, int local_rank, int rank, unsigned source,
                            uint64_t step, uint64_t bytes, uint64_t us);

/* The tier's directory root, which the reaper removes ("": no tier). */
const char *agent__memory_root(const agent_group *group);
/* The node's own shard directory the workers write to; NULL: no tier. */
const char *agent__memory_dir(const agent_group *group);
/* The tier's replica service, for the NEXT call's memory sync; NULL: none. */
struct replica_service *agent__memory_service(const agent_group *group);

/* The tier's /metrics lines (loop thread; nothing without --memory-ckpt):
 * memory held (own shards, peers' copies), the limit, copies placed, the
 * newest own / replicated / memory-committed / disk steps and the
 * replication lag (steps and ms). */
struct elastic__text;
void agent__memory_render_metrics(agent_group *group, struct elastic__text *out);

/* Calls thread, in NEXT after the rendezvous: the job's one restore step
 * (replica__sync_generation); the result waits in the call for the loop. */
struct agent_next_call;
void agent__memory_sync(struct agent_next_call *call);
/* Loop, NEXT back: the plan goes to the workers' environment; a plan that
 * passed over newer steps says why on the console. */
void agent__memory_apply(agent_group *group, struct agent_next_call *call);
/* The current generation's restore plan for a local rank: its step, source
 * ("local", "peer", "disk") and node, as a cold-started rank, a reconfigured
 * survivor and a promoted spare get them; false when there is none. */
bool agent__memory_plan_for(const agent_group *group, int local_rank, uint64_t *step,
                            const char **source, const char **node);
/* The call's result, when the loop did not take it. */
void agent__memory_call_free(struct agent_next_call *call);

#endif /* ELASTIC_AGENT_MEMORY_H */
