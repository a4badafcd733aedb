/*
 * The probe monitor on the group's loop and its hooks (probes.c), the
 * job-wide straggler scores (node_straggler.c) and --in-process-recovery
 * (inprocess.c).
 */
#ifndef ELASTIC_AGENT_PROBES_H
#define ELASTIC_AGENT_PROBES_H

#include "agent/group.h"

int agent__probes_start(agent_group *group);
void agent__probes_stop(agent_group *group);
void agent__probes_generation_started(agent_group *group);
void agent__probes_worker_starting(agent_group *group, agent_worker *worker);
void agent__probes_worker_started(agent_group *group, agent_worker *worker);
void agent__probes_worker_exited(agent_group *group, agent_worker *worker);

/* goodput.c: the accounting's step events (steps_started from the monitor's
 * tick; steps_ended once the generation's workers stopped or the job ends),
 * its report (free() it) and its /metrics lines. */
void agent__goodput_on_steps_started(void *user, const probe__progress *progress);
void agent__goodput_generation_ended(agent_group *group);
int agent__goodput_report(const agent_group *group, goodput_report **out);
void agent__goodput_render(void *user, elastic__text *out);

/* inprocess.c: --in-process-recovery. stop() aborts the healthy workers
 * instead of stopping them (false: not in this mode); kept() counts those that
 * acknowledged; reconfigure() moves a kept worker into the current generation. */
bool agent__inprocess_stop(agent_group *group, int failed_local_rank, const char *reason);
int agent__inprocess_kept(const agent_group *group);
void agent__inprocess_channel_env(const agent_group *group, agent_worker *worker, char *prefix,
                                  size_t prefix_size, channel__worker_env *env);
int agent__inprocess_reconfigure(agent_group *group, agent_worker *worker);
void agent__inprocess_on_control(void *user, int slot, int type, uint64_t generation,
                                 uint64_t sent_ns);

/* node_straggler.c */
#define AGENT_NODE_STAT_INTERVAL_MS \
    2000 /* how often a node publishes and reads the job's statistics */
/* The monitor's node statistic (loop thread): posts the publish-and-read call. */
void agent__node_stat(void *user, const probe__node_stat *stat);
/* Runs on the calls thread: one set, one key listing, one multi-get. */
void agent__node_stats_exchange(agent_call *call);
/* Back on the loop: scores, /metrics, the node_straggler event. */
void agent__node_stats_done(agent_group *group, agent_call *call);
void agent__node_stats_free(agent_group *group);
/* Runs on the calls thread: step aside from the generation if a spare waits. */
void agent__node_evict_run(agent_call *call);
/* Back on the loop: the event, the console line; AGENT_GROUP_EVICTED is posted. */
void agent__node_evict_done(agent_group *group, agent_call *call);

#endif /* ELASTIC_AGENT_PROBES_H */
