/*
 * The agent's side of the checkpoint store's divergence check (issue 36;
 * docs/CHECKPOINT.md, "Divergence check"): a worker's replica_divergence
 * report (CHANNEL__MSG_EVENT, "KEY=value" evidence its library wrote) read
 * and bounded here, then journaled, said on the console and counted, and
 * handed to the machine as one input (AGENT_IN_DIVERGED): the minority node
 * steps aside, no majority stops the job, warn mode only reports.
 */
#ifndef ELASTIC_AGENT_DIVERGENCE_H
#define ELASTIC_AGENT_DIVERGENCE_H

#include "agent/group.h"
#include "channel/channel.h"
#include "common/text.h"

#include <stdbool.h>
#include <stdint.h>

#define AGENT_DIVERGENCE_LIST 160 /* a list field's text, bounded */

typedef struct agent_divergence {
    uint64_t generation, step;
    bool warn;          /* MODE=warn: the step committed; only reported */
    bool committed;     /* COMMITTED=1 */
    bool majority;      /* MAJORITY > 0 */
    bool minority_here; /* this node's group rank is among MINORITY_NODES */
    int majority_count, blobs, compared;
    char tier[8]; /* "memory", "disk" */
    char blob[208];
    char majority_ranks[AGENT_DIVERGENCE_LIST], minority_ranks[AGENT_DIVERGENCE_LIST];
    char minority_nodes[AGENT_DIVERGENCE_LIST], minority_local_ranks[AGENT_DIVERGENCE_LIST];
    char minority_hosts[AGENT_DIVERGENCE_LIST];
    char majority_digest[20], minority_digests[AGENT_DIVERGENCE_LIST];
    char detail[400];
} agent_divergence;

/* Reads a report (bounded, every field checked). group_rank: this node's,
 * to say whether it is in the minority. ELASTIC_EINVAL when malformed. */
int agent__divergence_parse(const channel__kv *kv, int group_rank, agent_divergence *out);

/* Whether the comma list ("2,5,+3") names `value`. */
bool agent__divergence_list_has(const char *list, int value);

/* On the loop (probes.c): a worker's report. Once per (generation, step) on
 * this node (every local rank reports it): the replica_divergence event, the
 * console line, the counter, under Slurm the minority node's drain, and the
 * machine's DIVERGED input. */
void agent__divergence_report(agent_group *group, int local_rank, const channel__kv *kv);
/* elastic_replica_divergences_total{mode} on /metrics. */
void agent__divergence_render_metrics(agent_group *group, elastic__text *out);
/* A job stopped with no majority: its summary (the evidence); "" otherwise. */
const char *agent__divergence_summary(const agent_group *group);
void agent__divergence_free(agent_group *group);

#endif /* ELASTIC_AGENT_DIVERGENCE_H */
