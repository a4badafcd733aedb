/*
 * Job-wide straggler scores: every node publishes one small record (its
 * ranks' median step time) under the generation's keys every couple of
 * seconds and reads everyone's back, off the loop on the calls thread; each
 * agent scores every node with the probes' one scoring rule.
 */
#include "agent/console.h"
#include "agent/group.h"
#include "agent/journal.h"
#include "agent/membership.h"
#include "agent/probes.h"
#include "agent/slurm.h"

#include "rdzv/rdzv.h"

#include <stdio.h>
#include <stdlib.h>

#define NODE_STATS_ROUNDS_DEFAULT 3   /* without --straggler-rounds: rounds of the exchange */
#define NODE_STRAGGLER_THRESHOLD  0.7 /* the per-rank probe's default threshold */

static void stats_prefix(const agent_group *group, uint64_t generation, char *out, size_t size)
{
    snprintf(out, size, "agent/%s/straggler/%llu/", group->run_id, (unsigned long long)generation);
}

void agent__node_stat(void *user, const probe__node_stat *stat)
{
    agent_group *group = user;
    const elastic_rdzv_result *g = &group->current;
    if (!agent__group_is_running(group) || group->store == NULL || group->node_stats_in_flight ||
        g->group_world_size < 2 || g->group_world_size > PROBE__JOB_MAX_NODES)
        return; /* one exchange at a time: a slow store only delays the next */
    agent_call *call = agent__call_new(AGENT_CALL_NODE_STATS);
    if (call == NULL) return;
    call->generation = g->generation;
    call->node_count = (unsigned)g->group_world_size;
    stats_prefix(group, g->generation, call->prefix, sizeof call->prefix);
    snprintf(call->key, sizeof call->key, "%s%d", call->prefix, g->group_rank);
    if (probe__node_stat_format(stat, call->value, sizeof call->value) != 0) {
        agent__call_free(call);
        return;
    }
    group->node_stats_in_flight = true;
    agent__call_post(group, call);
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

void agent__node_stats_exchange(agent_call *call)
{
    call->rc = elastic_store_set(call->store, call->key, call->value, strlen(call->value));
    if (call->rc != 0) return;
    call->node_stats = calloc(call->node_count, sizeof *call->node_stats);
    call->node_present = calloc(call->node_count, sizeof *call->node_present);
    if (call->node_stats == NULL || call->node_present == NULL) {
        call->rc = elastic__fail(ELASTIC_ENOMEM, "straggler statistics");
        return;
    }
    char **keys = NULL;
    size_t n = 0;
    call->rc = elastic_store_keys(call->store, call->prefix, call->node_count, &keys, &n);
    if (call->rc != 0 || n == 0) {
        elastic_free(keys);
        return;
    }
    void **values = calloc(n, sizeof *values);
    size_t *lens = calloc(n, sizeof *lens);
    if (values == NULL || lens == NULL)
        call->rc = elastic__fail(ELASTIC_ENOMEM, "straggler statistics");
    else
        call->rc =
            elastic_store_multi_get(call->store, (const char *const *)keys, n, 0, values, lens);
    for (size_t i = 0; call->rc == 0 && i < n; i++) {
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

static void emit_node_straggler(agent_group *group, const probe__node_stat *stat, double score,
                                unsigned rounds)
{
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_NODE_STRAGGLER);
    agent__event_int(&event, "generation", (int64_t)group->current.generation);
    agent__event_str(&event, "straggler", stat->node_id); /* "node" is the reporter */
    char text[32];
    snprintf(text, sizeof text, "%.3f", score);
    agent__event_str(&event, "score", text);
    agent__event_int(&event, "rounds", rounds);
    agent__event_int(&event, "step_time_ms", (int64_t)(stat->step_ns / 1000000));
    agent__event_emit(group->events, &event);
}

/* The job's persistent straggler is this node: with --straggler-evict it
 * steps aside itself. The slow node is the one decision-maker: it needs no
 * message to stop and quarantine itself, and the generation's end is one
 * compare-and-set, so two nodes never evict two nodes in one generation (a
 * node that lost that race is still a member and simply re-forms). */
static void maybe_evict(agent_group *group, const probe__node_stat *st, int slow, double score,
                        unsigned rounds)
{
    if (!group->opts->straggler_evict || group->evict_in_flight ||
        slow != group->current.group_rank || strcmp(st->node_id, group->node_id) != 0 ||
        agent__membership_handle(group->membership) == NULL)
        return;
    agent_call *call = agent__call_new(AGENT_CALL_EVICT);
    if (call == NULL) return;
    call->generation = group->current.generation;
    call->score = score;
    call->step_ms = st->step_ns / 1000000;
    snprintf(call->value, sizeof call->value,
             "straggler evicted: scored %.2f against the job's median for %u rounds (step %llu ms)",
             score, rounds, (unsigned long long)call->step_ms);
    group->evict_in_flight = true;
    agent__call_post(group, call);
}

void agent__node_evict_run(agent_call *call)
{
    rdzv__step_aside_result result;
    call->rc = rdzv__step_aside(agent__membership_handle(call->membership), call->value, &result);
    call->evicted = call->rc == 0 && result.stepped_aside && result.generation == call->generation;
    call->waiting = result.waiting;
    snprintf(call->replacement, sizeof call->replacement, "%s", result.replacement);
}

static void emit_evicted(agent_group *group, const agent_call *call)
{
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_STRAGGLER_EVICTED);
    agent__event_int(&event, "generation", (int64_t)call->generation);
    agent__event_str(&event, "straggler", group->node_id);
    char text[32];
    snprintf(text, sizeof text, "%.3f", call->score);
    agent__event_str(&event, "score", text);
    agent__event_int(&event, "step_time_ms", (int64_t)call->step_ms);
    agent__event_int(&event, "spares_waiting", call->waiting);
    agent__event_str(&event, "replacement", call->replacement);
    agent__event_int(&event, "quarantine_ms", group->opts->straggler_quarantine_ms);
    agent__event_emit(group->events, &event);
    char why[160];
    snprintf(why, sizeof why,
             "evicted straggler: step %llu ms, score %.2f against the job's median",
             (unsigned long long)call->step_ms, call->score);
    agent__slurm_give_up(group, why);
}

void agent__node_evict_done(agent_group *group, agent_call *call)
{
    group->evict_in_flight = false;
    if (call->rc != 0 || !agent__group_is_running(group) ||
        call->generation != group->current.generation)
        return;
    if (!call->evicted) {
        if (!group->evict_refused_logged)
            ELASTIC_LOG_W("agent",
                          "this node is the job's straggler but stays: no spare waits and "
                          "--nnodes' minimum needs it (%d nodes)",
                          group->current.group_world_size);
        group->evict_refused_logged = true; /* asked again at each exchange while it holds */
        return;
    }
    emit_evicted(group, call);
    agent__console_evicted(group, call);
    agent__group_post(group, &(agent_group_event){ .kind = AGENT_GROUP_EVICTED });
}

void agent__node_stats_done(agent_group *group, agent_call *call)
{
    group->node_stats_in_flight = false;
    if (call->rc != 0 || call->node_stats == NULL ||
        call->generation != group->current.generation || !agent__group_is_running(group))
        return; /* a stale round: the next one comes within the period */
    if (group->job_straggler == NULL || group->job_straggler_generation != call->generation) {
        probe__job_straggler_free(group->job_straggler);
        group->job_straggler = NULL;
        group->node_straggler_reported = false;
        if (probe__job_straggler_create(call->node_count, &group->job_straggler) != 0) return;
        group->job_straggler_generation = call->generation;
    }
    const elastic_agent_opts *o = group->opts;
    unsigned rounds =
        o->straggler_rounds > 0 ? (unsigned)o->straggler_rounds : NODE_STATS_ROUNDS_DEFAULT;
    uint64_t warmup = o->straggler_window > 0 ? (uint64_t)o->straggler_window : 1;
    double *scores = calloc(call->node_count, sizeof *scores);
    if (scores == NULL) return;
    int slow =
        probe__job_straggler_evaluate(group->job_straggler, call->node_stats, call->node_present,
                                      warmup, NODE_STRAGGLER_THRESHOLD, rounds, scores);
    if (group->monitor != NULL)
        probe__monitor_set_node_scores(group->monitor, call->node_count, call->node_stats, scores);
    if (slow >= 0 && !group->node_straggler_reported) {
        group->node_straggler_reported = true; /* once per generation */
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
    probe__job_straggler_free(group->job_straggler);
    group->job_straggler = NULL;
}
