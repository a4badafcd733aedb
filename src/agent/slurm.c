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
#include "agent/journal.h"
#include "slurm/slurm.h"

#include <stdio.h>

/* scontrol talks to slurmctld: a bound on how long the calls thread waits. */
#define SLURM_DRAIN_TIMEOUT_MS 10000

/* What parse_args derived (the options point into it: static, one per process). */
static elastic__slurm_settings derived;
static char derived_endpoint[ELASTIC__HOSTLIST_NAME_MAX + 16];
static char derived_summary[768];

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

static void post_drain(agent_group *group, const char *node, const char *why)
{
    agent_call *call = agent__call_new(AGENT_CALL_SLURM_DRAIN);
    if (call == NULL) return;
    snprintf(call->key, sizeof call->key, "%s", node);
    snprintf(call->value, sizeof call->value, "%s", why);
    agent__call_post(group, call);
}

void agent__slurm_give_up(agent_group *group, const char *why)
{
    const elastic_agent_opts *o = group->opts;
    if (!o->slurm_drain || o->node_name == NULL || group->slurm_drain_posted) return;
    group->slurm_drain_posted = true; /* once: the node is out either way */
    post_drain(group, o->node_name, why);
}

void agent__slurm_note_lost(agent_group *group, const char *node_id)
{
    if (group->opts->node_name == NULL || node_id == NULL) return; /* not under Slurm */
    const char *dash = strrchr(node_id, '-');
    size_t len = dash != NULL ? (size_t)(dash - node_id) : strlen(node_id);
    if (len == 0 || len >= sizeof group->slurm_lost[0]) return;
    for (int i = 0; i < group->slurm_lost_count; i++)
        if (strlen(group->slurm_lost[i]) == len && strncmp(group->slurm_lost[i], node_id, len) == 0)
            return;
    if (group->slurm_lost_count == (int)ELASTIC__ARRAY_LEN(group->slurm_lost)) return;
    memcpy(group->slurm_lost[group->slurm_lost_count], node_id, len);
    group->slurm_lost[group->slurm_lost_count++][len] = '\0';
}

void agent__slurm_drain_lost(agent_group *group)
{
    if (!group->opts->slurm_drain) return;
    for (int i = 0; i < group->slurm_lost_count; i++)
        if (strcmp(group->slurm_lost[i], group->opts->node_name) != 0)
            post_drain(group, group->slurm_lost[i],
                       "lost from the job, which then had too few nodes (requeue)");
}

/* The calls thread: scontrol, bounded. */
void agent__slurm_drain_run(agent_call *call)
{
    call->rc = elastic__slurm_drain(call->key, call->value, SLURM_DRAIN_TIMEOUT_MS, call->summary,
                                    sizeof call->summary);
    if (call->rc != 0) elastic__fail(call->rc, "%s", call->summary);
}

/* Back on the loop: one event, one console line (the job goes on either way). */
void agent__slurm_drain_done(agent_group *group, const agent_call *call)
{
    char reason[160];
    elastic__slurm_drain_reason(call->value, reason, sizeof reason);
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_SLURM_DRAIN);
    agent__event_str(&event, "slurm_node", call->key);
    agent__event_str(&event, "slurm_job",
                     group->opts->slurm_job != NULL ? group->opts->slurm_job : "");
    agent__event_str(&event, "reason", reason);
    agent__event_int(&event, "drained", call->rc == 0);
    agent__event_str(&event, "detail", call->summary);
    agent__event_emit(group->events, &event);
    agent__console(group, "slurm: %s", call->summary);
}
