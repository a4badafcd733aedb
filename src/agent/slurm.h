/*
 * elasticrun under Slurm (slurm.c, docs/SLURM.md): the job step's settings
 * as defaults, and --slurm-drain.
 */
#ifndef ELASTIC_AGENT_SLURM_H
#define ELASTIC_AGENT_SLURM_H

#include "agent/group.h"

/* The group's --slurm-drain record (private to slurm.c): allocated by
 * init, freed by destroy. */
int agent__slurm_init(agent_group *group);
void agent__slurm_destroy(agent_group *group);

/* When envp has SLURM_JOB_ID: the run id, c10d rendezvous on the step's
 * first node, --nnodes N:N, processes per node, node name, preferred rank,
 * stand-aside and the one-line summary, into opts (static storage: one
 * parse per process). 0 outside Slurm too; ELASTIC_EINVAL naming the
 * malformed variable. */
int agent__slurm_defaults(elastic_agent_opts *opts, const char *const *envp);

/* After the flags: what they make of the Slurm defaults (--standalone: one node). */
void agent__slurm_after_flags(elastic_agent_opts *opts);

/* The job gives up on this node (why: "evicted straggler: ..."): with
 * --slurm-drain, drain it through scontrol on the calls thread, once. */
void agent__slurm_give_up(agent_group *group, const char *why);
/* A node of the generation was lost (its id "<slurm node>-<pid>"): remembered. */
void agent__slurm_note_lost(agent_group *group, const char *node_id);
/* Too few nodes remain and the job ends (exit 75): with --slurm-drain the lost
 * nodes are drained, so a requeue is not scheduled onto one before Slurm marks
 * it DOWN (which takes SlurmdTimeout). */
void agent__slurm_drain_lost(agent_group *group);

#endif /* ELASTIC_AGENT_SLURM_H */
