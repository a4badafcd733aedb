/*
 * The node's memory checkpoint tier as the agent hosts it (--memory-ckpt):
 * the tier under /dev/shm (removed when the agent leaves, by its reaper when
 * it is killed), the replica service (receiver, replicator, disk writer;
 * src/replica/service.c and its thread files) on threads of its own, and the two events the
 * workers' reports become: checkpoint_saved (step, tier) and
 * checkpoint_restored (rank, step, source, bytes, ms, node).
 */
#include "agent/memory.h"

#include "agent/calls.h"
#include "agent/console.h"
#include "agent/journal_events.h"
#include "agent/membership.h"
#include "channel/channel.h"
#include "common/text.h"
#include "replica/replica.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The tier as this node hosts it, and the generation's restore plan; only
 * this file reads or writes it. */
struct agent_memory {
    struct replica_service *service; /* NULL: no tier */
    char root[96], dir[112];
    uint64_t restore_said; /* generation + 1 whose "resumed at" line was said */
    /* The generation's restore plan (the memory sync in NEXT), per local rank. */
    bool restore_planned;
    uint64_t restore_step;
    unsigned *restore_sources; /* CHANNEL__RESTORE_*; NONE: no plan for that rank */
    char (*restore_nodes)[72];
    int restore_count;
};

int agent__memory_init(agent_group *group)
{
    group->memory = calloc(1, sizeof *group->memory);
    return group->memory != NULL ? 0 : elastic__fail(ELASTIC_ENOMEM, "out of memory (memory tier)");
}

void agent__memory_destroy(agent_group *group)
{
    if (group->memory == NULL) return;
    free(group->memory->restore_sources);
    free(group->memory->restore_nodes);
    free(group->memory);
    group->memory = NULL;
}

int agent__memory_start(agent_group *group, const char *key, const char *listen_host)
{
    const elastic_agent_opts *o = group->job.opts;
    if (!o->memory_ckpt) return 0;
    if (listen_host != NULL && key == NULL) /* never an open channel */
        return elastic__fail(ELASTIC_EINVAL, "memory checkpoint tier: no key for its replicas");
    snprintf(group->memory->root, sizeof group->memory->root, "/dev/shm/elastic-mem-%d-XXXXXX",
             (int)getpid());
    if (mkdtemp(group->memory->root) == NULL) {
        group->memory->root[0] = '\0';
        return elastic__fail(ELASTIC_ESYS, "memory checkpoint tier under /dev/shm: %s",
                             strerror(errno));
    }
    replica_service_opts so = { .root = group->memory->root,
                                .limit = o->memory_ckpt_limit,
                                .steps = (unsigned)o->memory_ckpt_steps,
                                .token = listen_host != NULL ? key : NULL,
                                .listen_host = listen_host,
                                .no_receiver = listen_host == NULL,
                                .replicas = (unsigned)o->memory_replicas,
                                .disk_dir = o->memory_disk_every > 0 ? o->memory_disk_dir : NULL,
                                .disk_every = (unsigned)o->memory_disk_every };
    int rc = replica__service_start(&so, &group->memory->service);
    if (rc != 0) {
        group->memory->root[0] = '\0';
        return rc;
    }
    snprintf(group->memory->dir, sizeof group->memory->dir, "%s/" CKPT_MEM_OWN_DIR,
             group->memory->root);
    return 0;
}

void agent__memory_stop(agent_group *group)
{
    replica__service_stop(group->memory->service); /* removes the tier: its memory is freed */
    group->memory->service = NULL;
    group->memory->dir[0] = '\0';
}

void agent__memory_saved(agent_group *group, int local_rank, int rank, uint64_t step, unsigned tier)
{
    agent__ev_checkpoint_saved(
        group->job.events,
        &(agent_ev_checkpoint_saved){ .generation = group->current.generation,
                                      .rank = rank,
                                      .local_rank = local_rank,
                                      .step = step,
                                      .tier = tier == CHANNEL__TIER_MEMORY ? "memory" : "disk" });
    if (tier == CHANNEL__TIER_MEMORY && group->memory->service != NULL)
        replica__service_kick(group->memory->service);
}

static const char *source_name(unsigned source)
{
    return source == CHANNEL__RESTORE_LOCAL  ? "local"
           : source == CHANNEL__RESTORE_PEER ? "peer"
                                             : "disk";
}

void agent__memory_restored(agent_group *group, int local_rank, int rank, unsigned source,
                            uint64_t step, uint64_t bytes, uint64_t us)
{
    /* The copy's node: this one for local memory; a peer's name as the plan
     * said; none for disk. */
    int at = local_rank;
    const agent_memory *m = group->memory;
    const char *planned =
        m->restore_nodes != NULL && at >= 0 && at < m->restore_count ? m->restore_nodes[at] : "";
    const char *node = source == CHANNEL__RESTORE_LOCAL  ? group->job.node_id
                       : source == CHANNEL__RESTORE_PEER ? planned
                                                         : "";
    agent__ev_checkpoint_restored(
        group->job.events, &(agent_ev_checkpoint_restored){ .generation = group->current.generation,
                                                            .rank = rank,
                                                            .local_rank = local_rank,
                                                            .step = step,
                                                            .source = source_name(source),
                                                            .bytes = (int64_t)bytes,
                                                            .ms = (int64_t)(us / 1000u),
                                                            .from_node = node });
    if (group->memory->restore_said == group->current.generation + 1) return;
    group->memory->restore_said = group->current.generation + 1;
    double mib = (double)bytes / (1024.0 * 1024.0);
    if (source == CHANNEL__RESTORE_DISK)
        agent__console(group, "resumed at step %" PRIu64 " from disk, %.1f MiB in %.1f ms", step,
                       mib, (double)us / 1000.0);
    else
        agent__console(group,
                       "resumed at step %" PRIu64 " from %s memory (node %s), %.1f MiB in %.1f ms",
                       step, source == CHANNEL__RESTORE_LOCAL ? "local" : "peer", node, mib,
                       (double)us / 1000.0);
}

bool agent__memory_plan_for(const agent_group *group, int local_rank, uint64_t *step,
                            const char **source, const char **node)
{
    int at = local_rank;
    const agent_memory *m = group->memory;
    if (!m->restore_planned || at < 0 || at >= m->restore_count ||
        m->restore_sources[at] == CHANNEL__RESTORE_NONE)
        return false;
    *step = m->restore_step;
    *source = source_name(m->restore_sources[at]);
    *node = m->restore_nodes[at];
    return true;
}

/* A node name the replica channel accepts: the node id with anything else
 * replaced (it names a directory on the peers). */
static void replica_name(const char *node_id, char *out, size_t cap)
{
    size_t i = 0;
    for (; node_id[i] != '\0' && i + 1 < cap && i < REPLICA_NODE_MAX; i++) {
        char c = node_id[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        out[i] = ok ? c : '_';
    }
    out[i] = '\0';
    if (i == 0 || out[0] == '.') snprintf(out, cap, "node");
}

/* The generation next() just gave us has ended already (a member lost): its
 * other members' records may never come. */
static bool generation_ended(void *user)
{
    agent_next_call *call = user;
    elastic_rdzv *rdzv = agent__membership_handle(call->membership);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    return rdzv != NULL && elastic_rdzv_watch(rdzv, 0, &cause) == 0 &&
           cause.generation == call->result.generation;
}

void agent__memory_sync(agent_next_call *call)
{
    if (call->memory == NULL) return;
    /* On etcd the job store comes per generation, in this very call (its
     * group rank 0 hosts it): the plan goes through that one; the previous
     * generation's, if any, may be gone with its host. */
    elastic_store *store = call->store_changed ? call->store : call->memory_store;
    if (store == NULL) return;
    const elastic_rdzv_result *g = &call->result;
    replica_sync_out *out = calloc(1, sizeof *out);
    if (out == NULL) return;
    char name[REPLICA_NODE_MAX + 1];
    replica_name(call->node_id, name, sizeof name);
    replica_sync_in in = { .service = call->memory,
                           .node_name = name,
                           .host = call->node_addr,
                           .domain = call->opts->failure_domain,
                           .generation = g->generation,
                           .group_rank = g->group_rank,
                           .group_world_size = g->group_world_size,
                           .first_rank = (uint32_t)g->rank_base,
                           .local_ranks = (uint32_t)g->local_world_size,
                           .job_world = (uint32_t)g->world_size,
                           .disk_dir = call->opts->memory_disk_dir,
                           .ended = generation_ended,
                           .ended_user = call };
    call->memory_rc = replica__sync_generation(store, &in, out);
    if (call->memory_rc != 0)
        ELASTIC_LOG_W("agent",
                      "memory tier: no job-wide restore plan (%s): each worker restores on its own",
                      elastic_last_error());
    call->memory_out = out;
    call->memory_synced = true;
}

void agent__memory_call_free(agent_next_call *call)
{
    if (call->memory_out != NULL) free(call->memory_out->ranks);
    free(call->memory_out);
    call->memory_out = NULL;
}

void agent__memory_apply(agent_group *group, agent_next_call *call)
{
    agent_memory *m = group->memory;
    free(m->restore_sources);
    free(m->restore_nodes);
    m->restore_sources = NULL;
    m->restore_nodes = NULL;
    m->restore_count = 0;
    m->restore_planned = false;
    replica_sync_out *out = call->memory_out;
    if (!call->memory_synced || out == NULL || call->memory_rc != 0) {
        agent__memory_call_free(call);
        return;
    }
    int n = call->result.local_world_size;
    m->restore_sources = calloc((size_t)(n > 0 ? n : 1), sizeof *m->restore_sources);
    m->restore_nodes = calloc((size_t)(n > 0 ? n : 1), sizeof *m->restore_nodes);
    if (m->restore_sources != NULL && m->restore_nodes != NULL && out->planned) {
        m->restore_planned = true;
        m->restore_step = out->step;
        m->restore_count = n;
        for (int i = 0; i < n; i++) {
            m->restore_sources[i] = out->ranks[i].source;
            snprintf(m->restore_nodes[i], sizeof m->restore_nodes[i], "%s",
                     out->ranks[i].node);
        }
    }
    /* The job's one plan, as this node ran it: the step, whether it was
     * committed (memory-committed job-wide or on disk) and what was passed
     * over and why (a shard without a live copy names its step and rank). */
    agent__ev_restore_planned(group->job.events,
                              &(agent_ev_restore_planned){ .generation = call->result.generation,
                                                           .planned = out->planned,
                                                           .step = out->step,
                                                           .committed = out->committed,
                                                           .why = out->why });
    /* Said when the plan left something out (a fresh job has nothing to say). */
    bool passed = strstr(out->why, "passed over") != NULL || strstr(out->why, "ignored") != NULL ||
                  strstr(out->why, "not memory-committed") != NULL;
    if (passed && out->planned)
        agent__console(group, "restore plan: %s; the job restores step %" PRIu64, out->why,
                       out->step);
    else if (passed)
        agent__console(group, "restore plan: %s: every worker restores on its own", out->why);
    agent__memory_call_free(call);
}

void agent__memory_render_metrics(agent_group *group, elastic__text *out)
{
    if (group->memory->service == NULL) return;
    replica_service_stats st;
    replica__service_stats(group->memory->service, &st);
    uint64_t replicas = st.held_bytes > st.own_bytes ? st.held_bytes - st.own_bytes : 0;
    elastic__text_printf(out,
                         "# HELP elastic_memory_ckpt_held_bytes memory the node's checkpoint tier "
                         "holds: its own shards and peers' copies\n"
                         "# TYPE elastic_memory_ckpt_held_bytes gauge\n"
                         "elastic_memory_ckpt_held_bytes{kind=\"own\"} %" PRIu64 "\n"
                         "elastic_memory_ckpt_held_bytes{kind=\"replicas\"} %" PRIu64 "\n",
                         st.own_bytes, replicas);
    elastic__text_printf(out,
                         "# HELP elastic_memory_ckpt_limit_bytes --memory-ckpt-limit\n"
                         "# TYPE elastic_memory_ckpt_limit_bytes gauge\n"
                         "elastic_memory_ckpt_limit_bytes %" PRIu64 "\n",
                         group->job.opts->memory_ckpt_limit > 0 ? group->job.opts->memory_ckpt_limit
                                                                : ckpt__mem_default_limit());
    elastic__text_printf(out,
                         "# HELP elastic_memory_ckpt_replica_peers peers holding this node's "
                         "copies (R, fewer when the job has too few nodes)\n"
                         "# TYPE elastic_memory_ckpt_replica_peers gauge\n"
                         "elastic_memory_ckpt_replica_peers %u\n"
                         "# HELP elastic_memory_ckpt_replica_files_received_total peers' shard "
                         "files this node stored\n"
                         "# TYPE elastic_memory_ckpt_replica_files_received_total counter\n"
                         "elastic_memory_ckpt_replica_files_received_total %" PRIu64 "\n",
                         st.targets, st.replicas_in);
    elastic__text_printf(
        out,
        "# HELP elastic_memory_ckpt_step newest step: own (committed on this "
        "node), replicated (at every peer), committed (memory-committed job-wide), "
        "disk (written to disk from memory)\n"
        "# TYPE elastic_memory_ckpt_step gauge\n"
        "elastic_memory_ckpt_step{kind=\"own\"} %" PRIu64 "\n"
        "elastic_memory_ckpt_step{kind=\"replicated\"} %" PRIu64 "\n"
        "elastic_memory_ckpt_step{kind=\"committed\"} %" PRIu64 "\n"
        "elastic_memory_ckpt_step{kind=\"disk\"} %" PRIu64 "\n",
        st.own_step, st.replicated_step, st.committed_step, st.disk_step);
    elastic__text_printf(
        out,
        "# HELP elastic_memory_ckpt_replication_lag_steps own steps newer than the job's last "
        "memory-committed one (what a node loss could cost)\n"
        "# TYPE elastic_memory_ckpt_replication_lag_steps gauge\n"
        "elastic_memory_ckpt_replication_lag_steps %" PRIu64 "\n"
        "# HELP elastic_memory_ckpt_replication_lag_ms the last replicated step: from its commit "
        "on "
        "this node to its last peer copy (kind=replica), to the job's memory-commit record "
        "(kind=commit)\n"
        "# TYPE elastic_memory_ckpt_replication_lag_ms gauge\n"
        "elastic_memory_ckpt_replication_lag_ms{kind=\"replica\"} %" PRIu64 "\n"
        "elastic_memory_ckpt_replication_lag_ms{kind=\"commit\"} %" PRIu64 "\n",
        st.own_step > st.committed_step ? st.own_step - st.committed_step : 0, st.lag_ms,
        st.commit_lag_ms);
    elastic__text_printf(out,
                         "# HELP elastic_memory_ckpt_failures_total pushes to peers that failed "
                         "(retried), commit rounds given up, disk writes that failed\n"
                         "# TYPE elastic_memory_ckpt_failures_total counter\n"
                         "elastic_memory_ckpt_failures_total{kind=\"push\"} %" PRIu64 "\n"
                         "elastic_memory_ckpt_failures_total{kind=\"round\"} %" PRIu64 "\n"
                         "elastic_memory_ckpt_failures_total{kind=\"disk\"} %" PRIu64 "\n",
                         st.push_failures, st.rounds_missed, st.disk_failures);
}

const char *agent__memory_root(const agent_group *group)
{
    return group->memory->root;
}

const char *agent__memory_dir(const agent_group *group)
{
    return group->memory->dir[0] != '\0' ? group->memory->dir : NULL;
}

struct replica_service *agent__memory_service(const agent_group *group)
{
    return group->memory->service;
}
