/*
 * Node health checks in the agent; the checking itself is src/health/
 * (docs/HEALTH.md). A runner thread repeats rounds every
 * --health-check-interval, at once after an Xid, and when a join asks for one;
 * each report reaches the loop as one AGENT_GROUP_HEALTH event. Here: the
 * health_check events (a finding whose verdict changed; every Xid), the
 * console line of what is fatal, the /metrics lines, and the step-aside call.
 * group.c decides what a verdict does to the state.
 */
#include "agent/health.h"

#include "agent/calls.h"
#include "agent/console.h"
#include "agent/journal_events.h"
#include "agent/membership.h"
#include "agent/slurm.h"
#include "common/text.h"
#include "health/health.h"

#include <stdio.h>
#include <stdlib.h>

#define SEEN_MAX    HEALTH__MAX_FINDINGS
#define METRICS_MAX (256u * 1024u)

typedef struct seen_finding {
    char key[HEALTH__CHECK_MAX + 64]; /* check, GPU, port */
    health__verdict verdict;
} seen_finding;

struct agent_health {
    agent_group *group;
    health__runner *runner;
    pthread_mutex_t lock;    /* guards fresh, spare, posted */
    health__report *fresh;   /* the runner's newest, not yet taken; NULL: none */
    health__report *spare;   /* a buffer for the next one */
    bool posted;             /* an AGENT_GROUP_HEALTH is on its way to the loop */
    health__report *applied; /* the loop's: the last one taken */
    uint64_t gate_round;     /* a join waits for a round numbered at least this; 0: none */
    seen_finding *seen;      /* the verdicts reported so far (not ok ones, and their return) */
    int seen_count;
    char reason[300]; /* the last fatal reason */
};

/* ---- the options ------------------------------------------------------------- */

/* --health-checks: auto (default), off, or a list of gpu, network (gpu: NVML
 * must load). The site command runs whenever --health-check-cmd is given. */
static int parse_mode(const char *mode, health__config *config)
{
    if (mode == NULL || strcmp(mode, "auto") == 0) return 1;
    if (strcmp(mode, "off") == 0) return 0;
    config->gpu = config->network = false;
    char copy[64];
    snprintf(copy, sizeof copy, "%s", mode);
    char *save = NULL;
    for (char *word = strtok_r(copy, ",", &save); word != NULL; word = strtok_r(NULL, ",", &save)) {
        if (strcmp(word, "gpu") == 0)
            config->gpu = config->gpu_required = true;
        else if (strcmp(word, "network") == 0)
            config->network = true;
        else
            return -1; /* the flag's parser refused it already */
    }
    return 1;
}

/* ---- the runner's thread --------------------------------------------------------- */

static void deliver(const health__report *report, void *arg)
{
    agent_health *h = arg;
    pthread_mutex_lock(&h->lock);
    if (h->fresh == NULL) { /* the loop took the last one: fill the spare buffer */
        h->fresh = h->spare;
        h->spare = NULL;
    }
    bool post = false;
    if (h->fresh != NULL) {
        health__report_copy(h->fresh, report);
        post = !h->posted;
        h->posted = true;
    }
    pthread_mutex_unlock(&h->lock);
    if (post) agent__group_post_from_thread(h->group, AGENT_GROUP_HEALTH);
}

int agent__health_start(agent_group *group)
{
    const elastic_agent_opts *o = group->job.opts;
    health__config config;
    health__config_defaults(&config);
    int on = parse_mode(o->health_checks, &config);
    if (on < 0) return elastic__fail(ELASTIC_EINVAL, "--health-checks \"%s\"", o->health_checks);
    if (on == 0) return 0;
    config.expected_gpus = o->expected_gpus;
    config.temperature_max_c = o->health_temperature_max;
    config.site_cmd = o->health_check_cmd;
    config.site_timeout_ms = o->health_check_timeout_ms;
    const char *root = getenv("ELASTIC_HEALTH_SYSFS_ROOT"); /* tests: a fake sysfs tree */
    if (root != NULL && *root != '\0') config.sysfs_root = root;
    agent_health *h = calloc(1, sizeof *h);
    if (h == NULL) return elastic__fail(ELASTIC_ENOMEM, "health checks");
    h->group = group;
    h->spare = malloc(sizeof *h->spare);
    h->applied = calloc(1, sizeof *h->applied);
    h->seen = calloc(SEEN_MAX, sizeof *h->seen);
    if (h->spare == NULL || h->applied == NULL || h->seen == NULL) {
        free(h->spare);
        free(h->applied);
        free(h->seen);
        free(h);
        return elastic__fail(ELASTIC_ENOMEM, "health checks");
    }
    pthread_mutex_init(&h->lock, NULL);
    group->health = h;
    int rc = health__runner_start(&config, o->health_check_interval_ms, deliver, h, &h->runner);
    if (rc != 0) {
        group->health = NULL;
        pthread_mutex_destroy(&h->lock);
        free(h->spare);
        free(h->applied);
        free(h->seen);
        free(h);
    }
    return rc;
}

void agent__health_stop(agent_group *group)
{
    agent_health *h = group->health;
    if (h == NULL) return;
    health__runner_stop(h->runner); /* no deliver after this */
    group->health = NULL;
    pthread_mutex_destroy(&h->lock);
    free(h->fresh);
    free(h->spare);
    free(h->applied);
    free(h->seen);
    free(h);
}

/* ---- the loop ------------------------------------------------------------------- */

agent_health_gate agent__health_gate(agent_group *group, char *reason, size_t size)
{
    agent_health *h = group->health;
    reason[0] = '\0';
    if (h == NULL) return AGENT_HEALTH_GO;
    /* Nothing taken yet: the first round, under way since the start, is fresh enough. */
    h->gate_round = h->applied->round == 0 ? 1 : health__runner_now(h->runner);
    if (h->applied->round < h->gate_round) return AGENT_HEALTH_WAIT;
    h->gate_round = 0; /* the first round was taken before the join asked */
    if (h->applied->worst != HEALTH__FATAL) return AGENT_HEALTH_GO;
    snprintf(reason, size, "%s", h->reason);
    return AGENT_HEALTH_STOP;
}

/* "GPU 5 (GPU-…, 00000000:15:00.0)", "port mlx5_0/1", or "" (the node's). */
static void where_of(const health__finding *f, char *out, size_t size)
{
    if (f->port[0] != '\0')
        snprintf(out, size, "port %s", f->port);
    else if (f->gpu >= 0)
        snprintf(out, size, "GPU %d (%s, %s)", f->gpu, f->uuid[0] ? f->uuid : "no UUID",
                 f->pci_bus_id[0] ? f->pci_bus_id : "no PCI bus id");
    else
        out[0] = '\0';
}

static void describe(const health__finding *f, char *out, size_t size)
{
    char where[200];
    where_of(f, where, sizeof where);
    snprintf(out, size, "%s%s%s", where, where[0] ? ": " : "", f->text);
}

static seen_finding *seen_of(agent_health *h, const char *key)
{
    for (int i = 0; i < h->seen_count; i++)
        if (strcmp(h->seen[i].key, key) == 0) return &h->seen[i];
    if (h->seen_count == SEEN_MAX) return NULL;
    seen_finding *s = &h->seen[h->seen_count++];
    snprintf(s->key, sizeof s->key, "%s", key);
    s->verdict = HEALTH__OK;
    return s;
}

static void emit(agent_group *group, const health__report *r, const health__finding *f)
{
    agent__ev_health_check(group->job.events,
                           &(agent_ev_health_check){ .check = f->check,
                                                     .gpu = f->gpu,
                                                     .uuid = f->uuid,
                                                     .pci_bus_id = f->pci_bus_id,
                                                     .port = f->port,
                                                     .value = f->value,
                                                     .verdict = health__verdict_name(f->verdict),
                                                     .reason = f->text,
                                                     .round = r->round });
}

/* A finding worth saying: every Xid; any other when its verdict changed. */
static void report_finding(agent_health *h, const health__report *r, const health__finding *f)
{
    bool say = strcmp(f->check, "xid") == 0;
    if (!say) {
        char key[sizeof h->seen[0].key];
        snprintf(key, sizeof key, "%s/%d/%s", f->check, f->gpu, f->port);
        seen_finding *s = seen_of(h, key);
        say = s != NULL && s->verdict != f->verdict;
        if (s != NULL) s->verdict = f->verdict;
    }
    if (!say) return;
    emit(h->group, r, f);
    char text[400];
    describe(f, text, sizeof text);
    if (f->verdict == HEALTH__FATAL) {
        agent__console(h->group, "node %s unhealthy: %s", h->group->job.node_id, text);
        char why[440];
        snprintf(why, sizeof why, "health check failed: %s", text);
        agent__slurm_give_up(h->group, why); /* --slurm-drain: out of the pool */
    }
    else if (f->verdict == HEALTH__WARNING)
        ELASTIC_LOG_W("health", "%s", text);
    else
        ELASTIC_LOG_I("health", "healthy again: %s", text);
}

static void update_metrics(agent_group *group, const health__report *r)
{
    if (group->monitor == NULL) return;
    elastic__text text;
    elastic__text_init(&text, METRICS_MAX);
    health__render_metrics(r, &text);
    if (!text.overflow) probe__monitor_set_extra_metrics(group->monitor, text.data);
    elastic__text_free(&text);
}

bool agent__health_take(agent_group *group, agent_health_news *news)
{
    memset(news, 0, sizeof *news);
    agent_health *h = group->health;
    if (h == NULL) return false;
    pthread_mutex_lock(&h->lock);
    health__report *taken = h->fresh;
    h->fresh = NULL;
    h->posted = false;
    if (taken != NULL) {
        h->spare = h->applied; /* the old applied one becomes the runner's next buffer */
        h->applied = taken;
    }
    pthread_mutex_unlock(&h->lock);
    if (taken == NULL) return false;
    const health__report *r = h->applied;
    if (r->round == 1 && r->nvml_status[0] != '\0') ELASTIC_LOG_I("health", "%s", r->nvml_status);
    for (int i = 0; i < r->count; i++) report_finding(h, r, &r->findings[i]);
    if (r->dropped > 0)
        ELASTIC_LOG_W("health", "%d findings of round %llu not kept (more than %d)", r->dropped,
                      (unsigned long long)r->round, HEALTH__MAX_FINDINGS);
    update_metrics(group, r);
    news->fatal = r->worst == HEALTH__FATAL;
    if (news->fatal) {
        /* The reason people read: an Xid says what happened, so it goes first. */
        const health__finding *first = NULL;
        for (int i = 0; i < r->count; i++) {
            const health__finding *f = &r->findings[i];
            if (f->verdict != HEALTH__FATAL) continue;
            if (first == NULL || (strcmp(f->check, "xid") == 0 && strcmp(first->check, "xid") != 0))
                first = f;
        }
        if (first != NULL) {
            describe(first, news->reason, sizeof news->reason);
            snprintf(h->reason, sizeof h->reason, "%s", news->reason);
        }
    }
    if (h->gate_round != 0 && r->round >= h->gate_round) {
        news->gate_done = true;
        h->gate_round = 0;
    }
    return true;
}

bool agent__health_gpu(const agent_group *group, int index, char *out, size_t size)
{
    const agent_health *h = group->health;
    if (h == NULL || h->applied == NULL || index < 0 || index >= h->applied->gpu_count)
        return false;
    const health__gpu *g = &h->applied->gpus[index];
    if (!g->present || g->uuid[0] == '\0') return false;
    snprintf(out, size, "GPU %d (%s, %s)", index, g->uuid, g->pci_bus_id);
    return true;
}

const char *agent__health_reason(const agent_group *group)
{
    return group->health != NULL ? group->health->reason : "";
}

/* ---- stepping aside ------------------------------------------------------------- */

/* No spare can take this node's place (or there is no rendezvous to ask):
 * its workers stop as a failure stops them, and the check before it rejoins
 * keeps it out while it stays unhealthy. */
static void stop_as_failure(agent_group *group, const char *reason)
{
    agent__console(group,
                   "node %s unhealthy and no spare can take its place: stopping its workers "
                   "(a failure: the job restarts without it while it stays unhealthy)",
                   group->job.node_id);
    if (group->nworkers == 0) return;
    char text[256];
    snprintf(text, sizeof text, "node unhealthy: %s", reason);
    agent__group_worker_unhealthy(group, &group->workers[0], text, -1, 0);
}

static void health_evict_done(agent_group *group, agent_call *call, agent_input *in);
static const agent_call_type health_evict_type = { agent__node_evict_run, health_evict_done, NULL };

void agent__health_step_aside(agent_group *group, const char *reason)
{
    /* One step-aside at a time, a straggler's or ours: the machine asks only
     * when none is in flight, and EVICT_ASKED also tells it that the
     * NODE_LEFT news about us is our own doing. Also without health checks:
     * a replica that diverged steps aside the same way (divergence.c). */
    if (agent__membership_handle(group->membership) == NULL) { /* one node, no rendezvous */
        stop_as_failure(group, reason);
        return;
    }
    agent_evict_call *call = agent__evict_call_new(group, &health_evict_type);
    if (call == NULL) return;
    snprintf(call->reason, sizeof call->reason, "unhealthy: %s", reason);
    agent__group_tell(group, AGENT_IN_EVICT_ASKED);
    agent__call_post(group, &call->base);
}

/* The EVICT call of a health step-aside is back. */
static void health_evict_done(agent_group *group, agent_call *base, agent_input *in)
{
    agent_evict_call *call = (agent_evict_call *)base;
    agent__call_warn(base, "stepping aside, unhealthy");
    if (!agent__group_is_running(group) || call->generation != group->current.generation)
        return; /* the generation ended meanwhile: the check before rejoining decides */
    const char *reason = call->reason + strlen("unhealthy: ");
    if (base->rc != 0 || !call->evicted) { /* no spare waits and --nnodes' minimum needs it */
        stop_as_failure(group, reason);
        return;
    }
    agent__ev_health_stepped_aside(
        group->job.events,
        &(agent_ev_stepped_aside){ .generation = call->generation,
                                   .reason = reason,
                                   .spares_waiting = call->waiting,
                                   .replacement = call->replacement,
                                   .quarantine_ms = group->job.opts->straggler_quarantine_ms });
    agent__console(group,
                   "node %s steps aside: generation %llu ends without using the restart budget, "
                   "%s%s takes its place; it is checked again after %.0f s before it rejoins",
                   group->job.node_id, (unsigned long long)call->generation,
                   call->replacement[0] ? "spare " : "a waiting spare", call->replacement,
                   group->job.opts->straggler_quarantine_ms / 1e3);
    agent__group_post(group, &(agent_group_event){ .kind = AGENT_GROUP_EVICTED, .unhealthy = true });
}
