/*
 * The probe monitor on the group's loop and its hooks (probes.c), the
 * job-wide straggler scores (node_straggler.c) and --in-process-recovery
 * (inprocess.c).
 */
#ifndef ELASTIC_AGENT_PROBES_H
#define ELASTIC_AGENT_PROBES_H

#include "agent/group.h"

/* The probes' record (private to probes.c): allocated by init, before
 * start; freed by destroy, after stop. */
int agent__probes_init(agent_group *group);
void agent__probes_destroy(agent_group *group);
int agent__probes_start(agent_group *group);
void agent__probes_stop(agent_group *group);
void agent__probes_generation_started(agent_group *group);
void agent__probes_worker_starting(agent_group *group, agent_worker *worker);
void agent__probes_worker_started(agent_group *group, agent_worker *worker);
void agent__probes_worker_exited(agent_group *group, agent_worker *worker);
/* The agent's private run directory (heartbeat file, socket, token); ""
 * before start and after stop. */
const char *agent__probes_dir(const agent_group *group);
/* The newest checkpoint a worker reported (its step, wall clock, rank);
 * false: none. */
bool agent__probes_last_checkpoint(const agent_group *group, uint64_t *step, uint64_t *wall_ms,
                                   int *rank);

/* goodput.c: the accounting's step events (steps_started from the monitor's
 * tick; steps_ended once the generation's workers stopped or the job ends),
 * its report (free() it) and its /metrics lines. */
int agent__goodput_init(agent_group *group); /* its private record (goodput.c) */
void agent__goodput_destroy(agent_group *group);
void agent__goodput_on_steps_started(void *user, const probe__progress *progress);
void agent__goodput_generation_ended(agent_group *group);
int agent__goodput_report(const agent_group *group, goodput_report **out);
void agent__goodput_render(void *user, elastic__text *out);

/* inprocess.c: --in-process-recovery. stop() aborts the healthy workers
 * instead of stopping them (false: not in this mode); kept() counts those that
 * acknowledged; reconfigure() moves a kept worker into the current generation. */
/* Its private record and the abort deadline's timer; close before the
 * loop's last run, destroy after it. */
int agent__inprocess_init(agent_group *group);
void agent__inprocess_close(agent_group *group);
void agent__inprocess_destroy(agent_group *group);
bool agent__inprocess_stop(agent_group *group, int failed_local_rank, const char *reason);
/* The recovery stop() began is timed from failure_ms (the group's failure). */
void agent__inprocess_failed_at(agent_group *group, uint64_t failure_ms);
/* The generation stopped: the abort acknowledgements' deadline is off. */
void agent__inprocess_stopped(agent_group *group);
/* A new generation's workers are being set up: no READY is outstanding. */
void agent__inprocess_generation_starting(agent_group *group);
/* Survivors reconfigured in place whose READY is outstanding: their
 * recovery is recorded when the last READY is back, not at formation. */
bool agent__inprocess_reconfiguring(const agent_group *group);
int agent__inprocess_kept(const agent_group *group);
void agent__inprocess_channel_env(const agent_group *group, agent_worker *worker, char *prefix,
                                  size_t prefix_size, channel__worker_env *env);
int agent__inprocess_reconfigure(agent_group *group, agent_worker *worker);
void agent__inprocess_on_control(void *user, int slot, int type, uint64_t generation,
                                 uint64_t sent_ns);

/* node_straggler.c */
#define AGENT_NODE_STAT_INTERVAL_MS \
    2000 /* how often a node publishes and reads the job's statistics */
/* The group's straggler-score record (private to node_straggler.c). */
int agent__node_stats_init(agent_group *group);
void agent__node_stats_destroy(agent_group *group);
/* A generation formed: "no spare to take over" may be said again in it. */
void agent__node_stats_generation_formed(agent_group *group);
/* The monitor's node statistic (loop thread): posts the publish-and-read call. */
void agent__node_stat(void *user, const probe__node_stat *stat);
void agent__node_stats_free(agent_group *group);

#endif /* ELASTIC_AGENT_PROBES_H */
