/*
 * elasticrun under Slurm (docs/SLURM.md): the job step's settings as the
 * command line's defaults (src/slurm/env.c derives them), and --slurm-drain:
 * the node is drained through scontrol, on the calls thread, when the job
 * gives up on it (an evicted straggler, a failed health check, fenced again
 * and again, a crash loop).
 */
#include "agent/slurm.h"

#include "agent/calls.h"
#include "agent/console.h"
#include "agent/journal_events.h"
#include "slurm/slurm.h"

#include <stdio.h>
#include <stdlib.h>

/* scontrol talks to slurmctld: a bound on how long the calls thread waits. */
#define SLURM_DRAIN_TIMEOUT_MS 10000

/* What parse_args derived (the options point into it: static, one per process). */
static elastic__slurm_settings derived;
static char derived_endpoint[ELASTIC__HOSTLIST_NAME_MAX + 16];
static char derived_summary[768];

/* What --slurm-drain needs to remember of one agent's run; only this file
 * reads or writes it. */
struct agent_slurm {
    bool drain_posted; /* --slurm-drain: the drain call went out (once) */
    char lost[4][128]; /* Slurm node names of nodes lost from this node's generations */
    int lost_count;
};

int agent__slurm_init(agent_group *group)
{
    group->slurm = calloc(1, sizeof *group->slurm);
    return group->slurm != NULL ? 0 : elastic__fail(ELASTIC_ENOMEM, "out of memory (slurm)");
}

void agent__slurm_destroy(agent_group *group)
{
    free(group->slurm);
    group->slurm = NULL;
}

int agent__slurm_defaults(elastic_agent_opts *opts, const char *const *envp)
{
    elastic__slurm_settings s;
    if (elastic__slurm_derive((char *const *)envp, &s) != 0) {
        char detail[400];
        snprintf(detail, sizeof detail, "%s", elastic_last_error());
        return elastic__fail(ELASTIC_EINVAL, "Slurm's environment: %s", detail);
    }
    if (!s.in_slurm) return 0;
    derived = s;
    opts->run_id = derived.run_id;
    if (derived.has_endpoint) {
        snprintf(derived_endpoint, sizeof derived_endpoint, "%s:%d", derived.rdzv_host,
                 derived.rdzv_port);
        opts->rdzv_backend = "c10d";
        opts->rdzv_endpoint = derived_endpoint;
    }
    if (derived.has_nnodes) opts->min_nodes = opts->max_nodes = derived.nnodes;
    if (derived.has_nproc) opts->nproc_per_node = derived.nproc_per_node;
    if (derived.has_node_name) opts->node_name = derived.node_name;
    opts->preferred_rank = derived.has_rank ? derived.preferred_rank : -1;
    opts->slurm_stand_aside = derived.local_id > 0 && derived.tasks_on_node > 1;
    opts->slurm_job = derived.job_id;
    elastic__slurm_describe(&derived, derived_summary, sizeof derived_summary);
    opts->slurm_summary = derived_summary;
    return 0;
}

void agent__slurm_after_flags(elastic_agent_opts *opts)
{
    /* --standalone is one node of its own: Slurm's node count was only a default. */
    if (opts->standalone && opts->slurm_summary != NULL && derived.has_nnodes &&
        opts->min_nodes == derived.nnodes && opts->max_nodes == derived.nnodes)
        opts->min_nodes = opts->max_nodes = 1;
}

/* ---- --slurm-drain -------------------------------------------------------------- */

/* The SLURM_DRAIN call: scontrol drains a node (calls thread), one event
 * and one console line say it (loop). */
typedef struct drain_call {
    agent_call base;
    char node[512];
    char why[AGENT_TAIL_BYTES + 1];
    char detail[4096]; /* scontrol's answer, or why it failed */
} drain_call;

/* The calls thread: scontrol, bounded. */
static void drain_run(agent_call *base)
{
    drain_call *call = (drain_call *)base;
    int rc = elastic__slurm_drain(call->node, call->why, SLURM_DRAIN_TIMEOUT_MS, call->detail,
                                  sizeof call->detail);
    if (rc != 0) elastic__fail(rc, "%s", call->detail);
    agent__call_status(base, rc);
}

/* Back on the loop: one event, one console line (the job goes on either way). */
static void drain_done(agent_group *group, agent_call *base, agent_input *in)
{
    const drain_call *call = (const drain_call *)base;
    char reason[160];
    elastic__slurm_drain_reason(call->why, reason, sizeof reason);
    agent__ev_slurm_drain(group->job.events,
                          &(agent_ev_slurm_drain){ .slurm_node = call->node,
                                                   .slurm_job = group->job.opts->slurm_job,
                                                   .reason = reason,
                                                   .drained = base->rc == 0,
                                                   .detail = call->detail });
    agent__console(group, "slurm: %s", call->detail);
}

static const agent_call_type drain_type = { drain_run, drain_done, NULL };

static void post_drain(agent_group *group, const char *node, const char *why)
{
    drain_call *call = agent__call_alloc(sizeof *call, AGENT_CALL_SLURM_DRAIN, &drain_type);
    if (call == NULL) return;
    snprintf(call->node, sizeof call->node, "%s", node);
    snprintf(call->why, sizeof call->why, "%s", why);
    agent__call_post(group, &call->base);
}

void agent__slurm_give_up(agent_group *group, const char *why)
{
    const elastic_agent_opts *o = group->job.opts;
    if (!o->slurm_drain || o->node_name == NULL || group->slurm->drain_posted) return;
    group->slurm->drain_posted = true; /* once: the node is out either way */
    post_drain(group, o->node_name, why);
}

void agent__slurm_note_lost(agent_group *group, const char *node_id)
{
    if (group->job.opts->node_name == NULL || node_id == NULL) return; /* not under Slurm */
    const char *dash = strrchr(node_id, '-');
    size_t len = dash != NULL ? (size_t)(dash - node_id) : strlen(node_id);
    if (len == 0 || len >= sizeof group->slurm->lost[0]) return;
    for (int i = 0; i < group->slurm->lost_count; i++)
        if (strlen(group->slurm->lost[i]) == len &&
            strncmp(group->slurm->lost[i], node_id, len) == 0)
            return;
    if (group->slurm->lost_count == (int)ELASTIC__ARRAY_LEN(group->slurm->lost)) return;
    memcpy(group->slurm->lost[group->slurm->lost_count], node_id, len);
    group->slurm->lost[group->slurm->lost_count++][len] = '\0';
}

void agent__slurm_drain_lost(agent_group *group)
{
    if (!group->job.opts->slurm_drain) return;
    for (int i = 0; i < group->slurm->lost_count; i++)
        if (strcmp(group->slurm->lost[i], group->job.opts->node_name) != 0)
            post_drain(group, group->slurm->lost[i],
                       "lost from the job, which then had too few nodes (requeue)");
}
