/*
 * Job-wide straggler scores: every node publishes one small record (its
 * ranks' median step time) under the generation's keys every couple of
 * seconds and reads everyone's back, off the loop on the calls thread; each
 * agent scores every node with the probes' one scoring rule.
 */
#include "agent/console.h"
#include "agent/group.h"
#include "agent/journal_events.h"
#include "agent/membership.h"
#include "agent/probes.h"
#include "agent/slurm.h"

#include "rdzv/rdzv.h"

#include <stdio.h>
#include <stdlib.h>

#define NODE_STATS_ROUNDS_DEFAULT 3   /* without --straggler-rounds: rounds of the exchange */
#define NODE_STRAGGLER_THRESHOLD  0.7 /* the per-rank probe's default threshold */

/* The job-wide straggler scores as this node keeps them; only this file
 * reads or writes it. */
struct agent_node_stats {
    probe__job_straggler *job; /* job-wide node scores; NULL: none yet */
    uint64_t generation;       /* the generation `job` scores */
    bool in_flight;            /* a publish-and-read call is out */
    bool reported;             /* node_straggler said (once per generation) */
    bool refused_logged;       /* "no spare" said once per generation */
};

int agent__node_stats_init(agent_group *group)
{
    group->node_stats = calloc(1, sizeof *group->node_stats);
    return group->node_stats != NULL ? 0
                                     : elastic__fail(ELASTIC_ENOMEM, "out of memory (node stats)");
}

void agent__node_stats_destroy(agent_group *group)
{
    free(group->node_stats);
    group->node_stats = NULL;
}

void agent__node_stats_generation_formed(agent_group *group)
{
    group->node_stats->refused_logged = false;
}

static void stats_prefix(const agent_group *group, uint64_t generation, char *out, size_t size)
{
    snprintf(out, size, "agent/%s/straggler/%llu/", group->job.run_id,
             (unsigned long long)generation);
}

/* The NODE_STATS call: publish this node's statistic, read every node's. */
typedef struct stats_call {
    agent_call base;
    elastic_store *store;
    uint64_t generation;
    char key[512];                    /* ours */
    char value[AGENT_TAIL_BYTES + 1]; /* our record */
    char prefix[256];                 /* the generation's */
    unsigned node_count; /* the generation's nodes, and what was read (by group rank) */
    probe__node_stat *node_stats;
    bool *node_present;
} stats_call;

static void stats_run(agent_call *call);
static void stats_done(agent_group *group, agent_call *call, agent_input *in);

static void stats_release(agent_call *call)
{
    free(((stats_call *)call)->node_stats);
    free(((stats_call *)call)->node_present);
}

static const agent_call_type stats_type = { stats_run, stats_done, stats_release };

static void evict_done(agent_group *group, agent_call *call, agent_input *in);
static const agent_call_type evict_type = { agent__node_evict_run, evict_done, NULL };

void agent__node_stat(void *user, const probe__node_stat *stat)
{
    agent_group *group = user;
    const elastic_rdzv_result *g = &group->current;
    if (!agent__group_is_running(group) || group->store.client == NULL ||
        group->node_stats->in_flight || g->group_world_size < 2 ||
        g->group_world_size > PROBE__JOB_MAX_NODES)
        return; /* one exchange at a time: a slow store only delays the next */
    stats_call *call = agent__call_alloc(sizeof *call, AGENT_CALL_NODE_STATS, &stats_type);
    if (call == NULL) return;
    call->store = group->store.client;
    call->generation = g->generation;
    call->node_count = (unsigned)g->group_world_size;
    stats_prefix(group, g->generation, call->prefix, sizeof call->prefix);
    snprintf(call->key, sizeof call->key, "%s%d", call->prefix, g->group_rank);
    if (probe__node_stat_format(stat, call->value, sizeof call->value) != 0) {
        agent__call_free(&call->base);
        return;
    }
    group->node_stats->in_flight = true;
    agent__call_post(group, &call->base);
}

/* "…/straggler/<gen>/<group rank>" or the bare rank: the rank, or -1. */
static int rank_of_key(const char *key, unsigned nodes)
{
    const char *slash = strrchr(key, '/');
    int rank;
    if (nodes == 0 ||
        elastic__parse_int(NULL, slash != NULL ? slash + 1 : key, 0, (int)nodes - 1, &rank) != 0)
        return -1;
    return rank;
}

/* The calls thread: one set, one key listing, one multi-get. */
static void stats_exchange(stats_call *call)
{
    call->base.rc = elastic_store_set(call->store, call->key, call->value, strlen(call->value));
    if (call->base.rc != 0) return;
    call->node_stats = calloc(call->node_count, sizeof *call->node_stats);
    call->node_present = calloc(call->node_count, sizeof *call->node_present);
    if (call->node_stats == NULL || call->node_present == NULL) {
        call->base.rc = elastic__fail(ELASTIC_ENOMEM, "straggler statistics");
        return;
    }
    char **keys = NULL;
    size_t n = 0;
    call->base.rc = elastic_store_keys(call->store, call->prefix, call->node_count, &keys, &n);
    if (call->base.rc != 0 || n == 0) {
        elastic_free(keys);
        return;
    }
    void **values = calloc(n, sizeof *values);
    size_t *lens = calloc(n, sizeof *lens);
    if (values == NULL || lens == NULL)
        call->base.rc = elastic__fail(ELASTIC_ENOMEM, "straggler statistics");
    else
        call->base.rc =
            elastic_store_multi_get(call->store, (const char *const *)keys, n, 0, values, lens);
    for (size_t i = 0; call->base.rc == 0 && i < n; i++) {
        int rank = rank_of_key(keys[i], call->node_count);
        if (rank >= 0 && probe__node_stat_parse(values[i], lens[i], &call->node_stats[rank]) == 0)
            call->node_present[rank] = true;
        else
            ELASTIC_LOG_W("agent", "straggler statistic %s ignored: malformed", keys[i]);
    }
    for (size_t i = 0; values != NULL && i < n; i++) elastic_free(values[i]);
    free(values);
    free(lens);
    elastic_free(keys);
}

static void stats_run(agent_call *call)
{
    stats_exchange((stats_call *)call);
    agent__call_status(call, call->rc);
}

static void emit_node_straggler(agent_group *group, const probe__node_stat *stat, double score,
                                unsigned rounds)
{
    agent__ev_node_straggler(
        group->job.events,
        &(agent_ev_node_straggler){ .generation = group->current.generation,
                                    .straggler = stat->node_id,
                                    .score = score,
                                    .rounds = rounds,
                                    .step_time_ms = (int64_t)(stat->step_ns / 1000000) });
}

/* The job's persistent straggler is this node: with --straggler-evict it
 * steps aside itself. The slow node is the one decision-maker: it needs no
 * message to stop and quarantine itself, and the generation's end is one
 * compare-and-set, so two nodes never evict two nodes in one generation (a
 * node that lost that race is still a member and simply re-forms). */
static void maybe_evict(agent_group *group, const probe__node_stat *st, int slow, double score,
                        unsigned rounds)
{
    if (!group->job.opts->straggler_evict || group->m.evict_in_flight ||
        slow != group->current.group_rank || strcmp(st->node_id, group->job.node_id) != 0 ||
        agent__membership_handle(group->membership) == NULL)
        return;
    agent_evict_call *call = agent__evict_call_new(group, &evict_type);
    if (call == NULL) return;
    call->score = score;
    call->step_ms = st->step_ns / 1000000;
    snprintf(call->reason, sizeof call->reason,
             "straggler evicted: scored %.2f against the job's median for %u rounds (step %llu ms)",
             score, rounds, (unsigned long long)call->step_ms);
    agent__group_tell(group, AGENT_IN_EVICT_ASKED);
    agent__call_post(group, &call->base);
}

agent_evict_call *agent__evict_call_new(agent_group *group, const agent_call_type *type)
{
    agent_evict_call *call = agent__call_alloc(sizeof *call, AGENT_CALL_EVICT, type);
    if (call == NULL) return NULL;
    call->membership = group->membership;
    call->generation = group->current.generation;
    return call;
}

void agent__node_evict_run(agent_call *base)
{
    agent_evict_call *call = (agent_evict_call *)base;
    rdzv__step_aside_result result;
    int rc = rdzv__step_aside(agent__membership_handle(call->membership), call->reason, &result);
    agent__call_status(base, rc);
    call->evicted = rc == 0 && result.stepped_aside && result.generation == call->generation;
    call->waiting = result.waiting;
    snprintf(call->replacement, sizeof call->replacement, "%s", result.replacement);
}

static void emit_evicted(agent_group *group, const agent_evict_call *call)
{
    agent__ev_straggler_evicted(
        group->job.events,
        &(agent_ev_stepped_aside){ .generation = call->generation,
                                   .straggler = group->job.node_id,
                                   .score = call->score,
                                   .step_time_ms = (int64_t)call->step_ms,
                                   .spares_waiting = call->waiting,
                                   .replacement = call->replacement,
                                   .quarantine_ms = group->job.opts->straggler_quarantine_ms });
    char why[160];
    snprintf(why, sizeof why,
             "evicted straggler: step %llu ms, score %.2f against the job's median",
             (unsigned long long)call->step_ms, call->score);
    agent__slurm_give_up(group, why);
}

/* Back on the loop: the event, the console line; AGENT_GROUP_EVICTED is posted. */
static void evict_done(agent_group *group, agent_call *base, agent_input *in)
{
    agent_evict_call *call = (agent_evict_call *)base;
    agent__call_warn(base, "stepping aside as a straggler");
    if (base->rc != 0 || !agent__group_is_running(group) ||
        call->generation != group->current.generation)
        return;
    if (!call->evicted) {
        if (!group->node_stats->refused_logged)
            ELASTIC_LOG_W("agent",
                          "this node is the job's straggler but stays: no spare waits and "
                          "--nnodes' minimum needs it (%d nodes)",
                          group->current.group_world_size);
        group->node_stats->refused_logged = true; /* asked again at each exchange while it holds */
        return;
    }
    emit_evicted(group, call);
    agent__console_evicted(group, call);
    agent__group_post(group, &(agent_group_event){ .kind = AGENT_GROUP_EVICTED });
}

/* Back on the loop: scores, /metrics, the node_straggler event. */
static void stats_done(agent_group *group, agent_call *base, agent_input *in)
{
    stats_call *call = (stats_call *)base;
    agent__call_warn(base, "exchanging straggler statistics");
    group->node_stats->in_flight = false;
    if (base->rc != 0 || call->node_stats == NULL ||
        call->generation != group->current.generation || !agent__group_is_running(group))
        return; /* a stale round: the next one comes within the period */
    if (group->node_stats->job == NULL || group->node_stats->generation != call->generation) {
        probe__job_straggler_free(group->node_stats->job);
        group->node_stats->job = NULL;
        group->node_stats->reported = false;
        if (probe__job_straggler_create(call->node_count, &group->node_stats->job) != 0) return;
        group->node_stats->generation = call->generation;
    }
    const elastic_agent_opts *o = group->job.opts;
    unsigned rounds =
        o->straggler_rounds > 0 ? (unsigned)o->straggler_rounds : NODE_STATS_ROUNDS_DEFAULT;
    uint64_t warmup = o->straggler_window > 0 ? (uint64_t)o->straggler_window : 1;
    double *scores = calloc(call->node_count, sizeof *scores);
    if (scores == NULL) return;
    int slow =
        probe__job_straggler_evaluate(group->node_stats->job, call->node_stats, call->node_present,
                                      warmup, NODE_STRAGGLER_THRESHOLD, rounds, scores);
    if (group->monitor != NULL)
        probe__monitor_set_node_scores(group->monitor, call->node_count, call->node_stats, scores);
    if (slow >= 0 && !group->node_stats->reported) {
        group->node_stats->reported = true; /* once per generation */
        const probe__node_stat *st = &call->node_stats[slow];
        ELASTIC_LOG_W("agent",
                      "node %s is a straggler: scored %.2f against the job's median for %u rounds",
                      st->node_id, scores[slow], rounds);
        emit_node_straggler(group, st, scores[slow], rounds);
    }
    if (slow >= 0) maybe_evict(group, &call->node_stats[slow], slow, scores[slow], rounds);
    free(scores);
}

void agent__node_stats_free(agent_group *group)
{
    probe__job_straggler_free(group->node_stats->job);
    group->node_stats->job = NULL;
}
