/*
 * elastic__slurm_derive (slurm.h): what a job step's environment gives
 * elasticrun. Each variable is validated on its own; the node list is
 * expanded through the hostlist grammar; nothing is guessed when a variable
 * is malformed (the error names it). The rules are in docs/SLURM.md.
 */
#include "slurm/slurm.h"

#include "common/parse_int.h"

#include <stdio.h>
#include <stdlib.h>

/* The most nodes and processes a step is read with (a bound, not a guess:
 * more is a broken environment). */
#define SLURM_MAX_NODES ELASTIC__HOSTLIST_MAX_HOSTS
#define SLURM_MAX_NPROC 4096

static const char *env_get(char *const *envp, const char *name)
{
    size_t len = strlen(name);
    for (char *const *e = envp; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, len) == 0 && (*e)[len] == '=') return *e + len + 1;
    return NULL;
}

/* A variable that must be an integer in [min, max] when set: 0 and *found. */
static int env_int(char *const *envp, const char *name, int64_t min, int64_t max, bool *found,
                   int64_t *value)
{
    const char *text = env_get(envp, name);
    *found = text != NULL;
    if (text == NULL) return 0;
    return elastic__parse_i64(name, text, min, max, value);
}

static bool host_name_ok(const char *name)
{
    size_t len = strnlen(name, ELASTIC__HOSTLIST_NAME_MAX + 1);
    if (len == 0 || len > ELASTIC__HOSTLIST_NAME_MAX) return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* The node list of the step (its agents are where the store can be), else the job's. */
static int derive_nodes(char *const *envp, elastic__slurm_settings *s, uint64_t job)
{
    const char *name = "SLURM_STEP_NODELIST";
    const char *text = env_get(envp, name);
    if (text == NULL) text = env_get(envp, name = "SLURM_JOB_NODELIST");
    if (text == NULL) text = env_get(envp, name = "SLURM_NODELIST");
    if (text == NULL) return 0;
    elastic__hostlist list;
    int rc = elastic__hostlist_expand(name, text, SLURM_MAX_NODES, &list);
    if (rc != 0) return rc;
    snprintf(s->rdzv_host, sizeof s->rdzv_host, "%s", list.names[0]);
    s->rdzv_port = ELASTIC__SLURM_PORT_BASE + (int)(job % ELASTIC__SLURM_PORT_SPAN);
    s->has_endpoint = true;
    s->nnodes = (int)list.count;
    s->has_nnodes = true;
    elastic__hostlist_free(&list);
    return 0;
}

/* Tasks Slurm started on this node: this node's entry of the step's
 * tasks-per-node list, else SLURM_NTASKS_PER_NODE, else 1. */
static int derive_tasks(char *const *envp, elastic__slurm_settings *s, int *tasks_source_nodeid)
{
    bool found = false;
    int64_t node_id = 0, v = 0;
    int rc = env_int(envp, "SLURM_NODEID", 0, SLURM_MAX_NODES - 1, &found, &node_id);
    if (rc != 0) return rc;
    *tasks_source_nodeid = found ? (int)node_id : -1;
    const char *name = "SLURM_STEP_TASKS_PER_NODE";
    const char *text = env_get(envp, name);
    if (text == NULL) text = env_get(envp, name = "SLURM_TASKS_PER_NODE");
    s->tasks_on_node = 1;
    if (text != NULL && found) {
        size_t nodes = 0;
        return elastic__slurm_tasks_per_node(name, text, (size_t)node_id, &s->tasks_on_node,
                                             &nodes);
    }
    rc = env_int(envp, "SLURM_NTASKS_PER_NODE", 1, SLURM_MAX_NPROC, &found, &v);
    if (rc == 0 && found) s->tasks_on_node = (int)v;
    return rc;
}

int elastic__slurm_derive(char *const *envp, elastic__slurm_settings *out)
{
    elastic__slurm_settings s;
    memset(&s, 0, sizeof s);
    const char *job_text = env_get(envp, "SLURM_JOB_ID");
    if (job_text == NULL) job_text = env_get(envp, "SLURM_JOBID");
    if (job_text == NULL) {
        *out = s;
        return 0;
    }
    uint64_t job = 0, step = 0;
    int rc = elastic__parse_u64("SLURM_JOB_ID", job_text, 1, UINT32_MAX, &job);
    if (rc != 0) return rc;
    s.in_slurm = true;
    snprintf(s.job_id, sizeof s.job_id, "%llu", (unsigned long long)job);
    const char *step_text = env_get(envp, "SLURM_STEP_ID");
    if (step_text == NULL) step_text = env_get(envp, "SLURM_STEPID");
    if (step_text != NULL) {
        rc = elastic__parse_u64("SLURM_STEP_ID", step_text, 0, UINT32_MAX, &step);
        if (rc != 0) return rc;
        snprintf(s.step_id, sizeof s.step_id, "%llu", (unsigned long long)step);
        snprintf(s.run_id, sizeof s.run_id, "slurm-%s.%s", s.job_id, s.step_id);
    } else {
        snprintf(s.run_id, sizeof s.run_id, "slurm-%s", s.job_id);
    }
    if ((rc = derive_nodes(envp, &s, job)) != 0) return rc;

    const char *node = env_get(envp, "SLURMD_NODENAME");
    if (node != NULL) {
        if (!host_name_ok(node))
            return elastic__fail(ELASTIC_EINVAL,
                                 "SLURMD_NODENAME: \"%.80s\" is not a node name "
                                 "(1..253 of [A-Za-z0-9._-])",
                                 node);
        snprintf(s.node_name, sizeof s.node_name, "%s", node);
        s.has_node_name = true;
        s.is_host = s.has_endpoint && strcmp(s.node_name, s.rdzv_host) == 0;
    }

    int node_id = -1;
    if ((rc = derive_tasks(envp, &s, &node_id)) != 0) return rc;
    bool found = false;
    int64_t v = 0;
    if ((rc = env_int(envp, "SLURM_LOCALID", 0, SLURM_MAX_NPROC - 1, &found, &v)) != 0) return rc;
    s.local_id = found ? (int)v : 0;

    if ((rc = env_int(envp, "SLURM_GPUS_ON_NODE", 0, SLURM_MAX_NPROC, &found, &v)) != 0) return rc;
    if (found && v > 0) {
        s.nproc_per_node = (int)v;
        s.nproc_source = "SLURM_GPUS_ON_NODE";
    } else {
        s.nproc_per_node = s.tasks_on_node;
        s.nproc_source = "tasks per node";
    }
    s.has_nproc = true;

    /* One agent per node: with one task there, SLURM_PROCID is the node's
     * place; with several, the node's index is (the others stand aside). */
    if (s.tasks_on_node == 1) {
        if ((rc = env_int(envp, "SLURM_PROCID", 0, SLURM_MAX_NODES - 1, &found, &v)) != 0)
            return rc;
        if (found) s.preferred_rank = (int)v;
        s.has_rank = found;
    } else if (node_id >= 0) {
        s.preferred_rank = node_id;
        s.has_rank = true;
    }
    *out = s;
    return 0;
}

void elastic__slurm_describe(const elastic__slurm_settings *s, char *buf, size_t size)
{
    if (size == 0) return;
    if (!s->in_slurm) {
        snprintf(buf, size, "not in a Slurm job");
        return;
    }
    size_t used = 0;
#define PUT(...)                                                     \
    do {                                                             \
        if (used < size) {                                           \
            int n_ = snprintf(buf + used, size - used, __VA_ARGS__); \
            used = n_ < 0 ? size : used + (size_t)n_;                \
        }                                                            \
    } while (0)
    PUT("slurm job %s", s->job_id);
    if (s->step_id[0] != '\0') PUT(" step %s", s->step_id);
    PUT(": run id %s", s->run_id);
    if (s->has_nnodes) PUT(", nnodes %d:%d", s->nnodes, s->nnodes);
    if (s->has_endpoint)
        PUT(", rdzv c10d %s:%d%s", s->rdzv_host, s->rdzv_port,
            s->is_host ? " (this node hosts it)" : "");
    if (s->has_nproc) PUT(", nproc-per-node %d (%s)", s->nproc_per_node, s->nproc_source);
    if (s->has_node_name) PUT(", node %s", s->node_name);
    if (s->has_rank) PUT(", preferred rank %d", s->preferred_rank);
#undef PUT
}
