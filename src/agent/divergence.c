/*
 * A worker's replica_divergence report, read (divergence.h). What the
 * library wrote is bounded and checked here as any input from a worker:
 * numbers by the one grammar, text fields cut to their buffers and kept
 * printable, lists of ranks as digits, commas and "+N".
 */
#include "agent/divergence.h"

#include "agent/console.h"
#include "agent/health.h"
#include "agent/journal_events.h"
#include "agent/slurm.h"
#include "common/parse_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void text_of(const channel__kv *kv, const char *key, char *out, size_t cap)
{
    const char *v = channel__kv_get(kv, key);
    size_t n = 0;
    for (; v != NULL && v[n] != '\0' && n + 1 < cap; n++)
        out[n] = v[n] >= 0x20 && v[n] < 0x7f ? v[n] : '?'; /* the journal escapes the rest */
    out[n] = '\0';
}

/* A list of ranks: digits, '?', ',' and '+' only (else empty). */
static bool list_of(const channel__kv *kv, const char *key, char *out, size_t cap)
{
    const char *v = channel__kv_get(kv, key);
    if (v == NULL || strlen(v) >= cap || strspn(v, "0123456789?,+") != strlen(v)) return false;
    snprintf(out, cap, "%s", v);
    return true;
}

bool agent__divergence_list_has(const char *list, int value)
{
    for (const char *at = list; at != NULL && *at != '\0';) {
        char *end;
        long v = *at == '+' ? -1 : strtol(at, &end, 10);
        if (*at != '+' && end != at && v == value) return true;
        at = strchr(at, ',');
        if (at != NULL) at++;
    }
    return false;
}

int agent__divergence_parse(const channel__kv *kv, int group_rank, agent_divergence *out)
{
    memset(out, 0, sizeof *out);
    uint64_t majority = 0, blobs = 0, compared = 0, committed = 0;
    const char *mode = channel__kv_get(kv, "MODE");
    if (elastic__parse_u64(NULL, channel__kv_get(kv, "GENERATION"), 0, INT64_MAX,
                           &out->generation) ||
        elastic__parse_u64(NULL, channel__kv_get(kv, "STEP"), 0, INT64_MAX, &out->step) ||
        elastic__parse_u64(NULL, channel__kv_get(kv, "MAJORITY"), 0, 1u << 24, &majority) ||
        elastic__parse_u64(NULL, channel__kv_get(kv, "BLOBS"), 0, 1u << 24, &blobs) ||
        elastic__parse_u64(NULL, channel__kv_get(kv, "COMPARED"), 0, 1u << 24, &compared) ||
        elastic__parse_u64(NULL, channel__kv_get(kv, "COMMITTED"), 0, 1, &committed) ||
        mode == NULL || (strcmp(mode, "stop") != 0 && strcmp(mode, "warn") != 0) ||
        !list_of(kv, "MAJORITY_RANKS", out->majority_ranks, sizeof out->majority_ranks) ||
        !list_of(kv, "MINORITY_RANKS", out->minority_ranks, sizeof out->minority_ranks) ||
        !list_of(kv, "MINORITY_NODES", out->minority_nodes, sizeof out->minority_nodes) ||
        !list_of(kv, "MINORITY_LOCAL_RANKS", out->minority_local_ranks,
                 sizeof out->minority_local_ranks))
        return elastic__fail(ELASTIC_EINVAL, "a malformed replica_divergence report");
    out->warn = strcmp(mode, "warn") == 0;
    out->committed = committed == 1;
    out->majority = majority > 0;
    out->majority_count = (int)majority;
    out->blobs = (int)blobs;
    out->compared = (int)compared;
    text_of(kv, "TIER", out->tier, sizeof out->tier);
    text_of(kv, "BLOB", out->blob, sizeof out->blob);
    text_of(kv, "MINORITY_HOSTS", out->minority_hosts, sizeof out->minority_hosts);
    text_of(kv, "MAJORITY_DIGEST", out->majority_digest, sizeof out->majority_digest);
    text_of(kv, "MINORITY_DIGESTS", out->minority_digests, sizeof out->minority_digests);
    text_of(kv, "DETAIL", out->detail, sizeof out->detail);
    /* With no majority every rank is named: "minority" says nothing then. */
    out->minority_here = out->majority && group_rank >= 0 &&
                         agent__divergence_list_has(out->minority_nodes, group_rank);
    return 0;
}

/* ---- on the loop ------------------------------------------------------------------- */

struct agent_divergence_state {
    bool seen;
    uint64_t generation, step;  /* the last report acted on: its other local ranks' are the same */
    uint64_t stopped, warned;   /* the counter's two series */
    uint64_t warned_generation; /* warn mode: said (event, console) once per generation */
    char summary[600];          /* no majority: the job's end says why */
};

static struct agent_divergence_state *state_of(agent_group *group)
{
    if (group->divergence == NULL) group->divergence = calloc(1, sizeof *group->divergence);
    return group->divergence;
}

void agent__divergence_free(agent_group *group)
{
    free(group->divergence);
    group->divergence = NULL;
}

const char *agent__divergence_summary(const agent_group *group)
{
    return group->divergence != NULL ? group->divergence->summary : "";
}

/* The health inventory's GPUs of this node's minority ranks (local rank i on
 * GPU i, as the workers are started), "" when it knows none. */
static void gpus_of(agent_group *group, const agent_divergence *d, char *out, size_t size)
{
    out[0] = '\0';
    size_t len = 0;
    const char *node = d->minority_nodes, *local = d->minority_local_ranks;
    while (node != NULL && local != NULL && *node != '\0' && *local != '\0') {
        char gpu[160];
        if (atoi(node) == group->current.group_rank && *local != '?' &&
            agent__health_gpu(group, atoi(local), gpu, sizeof gpu) && len < size)
            len += (size_t)snprintf(out + len, size - len, "%s%s", len ? "; " : "", gpu);
        node = strchr(node, ',');
        local = strchr(local, ',');
        if (node != NULL) node++;
        if (local != NULL) local++;
    }
}

static void emit(agent_group *group, const agent_divergence *d, const char *gpus)
{
    agent_ev_replica_divergence ev = { .generation = d->generation,
                                       .step = d->step,
                                       .tier = d->tier,
                                       .mode = d->warn ? "warn" : "stop",
                                       .committed = d->committed,
                                       .blob = d->blob,
                                       .blobs = d->blobs,
                                       .compared = d->compared,
                                       .majority = d->majority_count,
                                       .majority_ranks = d->majority_ranks,
                                       .majority_digest = d->majority_digest,
                                       .minority_ranks = d->minority_ranks,
                                       .minority_nodes = d->minority_nodes,
                                       .minority_local_ranks = d->minority_local_ranks,
                                       .minority_hosts = d->minority_hosts,
                                       .minority_digests = d->minority_digests,
                                       .here = d->minority_here,
                                       .gpus = gpus,
                                       .reason = d->detail };
    agent__ev_replica_divergence(group->job.events, &ev);
}

void agent__divergence_report(agent_group *group, int local_rank, const channel__kv *kv)
{
    agent_divergence d;
    if (agent__divergence_parse(kv, group->current.group_rank, &d) != 0) {
        ELASTIC_LOG_W("agent", "local rank %d: %s: ignored", local_rank, elastic_last_error());
        return;
    }
    struct agent_divergence_state *s = state_of(group);
    if (s == NULL) return;
    if (s->seen && s->generation == d.generation && s->step == d.step) return; /* said */
    s->seen = true;
    s->generation = d.generation;
    s->step = d.step;
    if (d.warn)
        s->warned++;
    else
        s->stopped++;
    /* Replicas that are not bitwise equal by design differ at every save:
     * warn mode says so once per generation and counts the rest. */
    if (d.warn && s->warned > 1 && s->warned_generation == d.generation) return;
    if (d.warn) s->warned_generation = d.generation;
    char gpus[400];
    gpus_of(group, &d, gpus, sizeof gpus);
    emit(group, &d, gpus);
    const char *what = d.warn ? "--on-divergence=warn: the step was committed, training goes on"
                       : !d.majority     ? "no majority: the job stops, nothing is restored from "
                                           "either copy"
                       : d.minority_here ? "this node's replica is the odd one: it steps aside "
                                           "for a spare, the job restores the newest agreed step"
                                         : "the node that differs steps aside, the job restores "
                                           "the newest agreed step";
    agent__console(group, "silent data corruption: %s%s%s (%s)", d.detail, gpus[0] ? "; on " : "",
                   gpus, what);
    char why[256];
    snprintf(why, sizeof why, "silent data corruption: %.200s", d.detail);
    if (!d.warn && d.majority && d.minority_here) agent__slurm_give_up(group, why);
    if (!d.warn && !d.majority)
        snprintf(s->summary, sizeof s->summary,
                 "checkpoint replicas diverged with no majority (the job stopped, no copy "
                 "restored): %s",
                 d.detail);
    agent_group_event ev = { .kind = AGENT_GROUP_DIVERGED,
                             .minority = d.minority_here,
                             .no_majority = !d.majority,
                             .warn = d.warn };
    snprintf(ev.reason, sizeof ev.reason, "%s", why);
    agent__group_post(group, &ev);
}

void agent__divergence_render_metrics(agent_group *group, elastic__text *out)
{
    const struct agent_divergence_state *s = group->divergence;
    elastic__text_printf(out,
                         "# HELP elastic_replica_divergences_total Checkpoint steps whose "
                         "replicated blobs differed between ranks (silent data corruption), by "
                         "the response.\n# TYPE elastic_replica_divergences_total counter\n"
                         "elastic_replica_divergences_total{mode=\"stop\"} %llu\n"
                         "elastic_replica_divergences_total{mode=\"warn\"} %llu\n",
                         (unsigned long long)(s ? s->stopped : 0),
                         (unsigned long long)(s ? s->warned : 0));
}
