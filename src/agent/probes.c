/*
 * The agent's probes: the probe monitor (src/probe/) on the group's loop,
 * fed by the group's events, with its verdicts routed into the one
 * "worker unhealthy" path. Owns the directory of the workers' channel (the
 * heartbeat file and the control socket), short enough for a socket path.
 */
#include "agent/probes.h"
#include "agent/failure_say.h"
#include "agent/memory.h"

#include "agent/journal_events.h"
#include "agent/console.h"
#include "agent/divergence.h"
#include "agent/proc.h"
#include "agent/reaper.h"
#include "agent/slurm.h"
#include "agent/spares.h"

#include "common/clock.h"
#include "common/parse_int.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The probes' own record: the run directory the monitor's heartbeat file
 * and socket live in, and the newest checkpoint a worker reported; only
 * this file writes it. */
struct agent_probes {
    char dir[96];         /* short: a socket path goes under it; "": none */
    bool ckpt_step_valid; /* a worker reported a committed checkpoint */
    uint64_t ckpt_step, ckpt_wall_ms;
    int ckpt_rank;
};

int agent__probes_init(agent_group *group)
{
    group->probes = calloc(1, sizeof *group->probes);
    return group->probes != NULL ? 0 : elastic__fail(ELASTIC_ENOMEM, "out of memory (probes)");
}

void agent__probes_destroy(agent_group *group)
{
    free(group->probes);
    group->probes = NULL;
}

static agent_worker *worker_at(agent_group *group, int local_rank)
{
    if (group->workers == NULL || group->nworkers == 0) return NULL;
    if (local_rank < 0)
        return &group->workers[0]; /* a node-wide probe: the cause names local rank 0 */
    return local_rank < group->nworkers ? &group->workers[local_rank] : NULL;
}

static agent_ev_probe probe_event(const agent_group *group, const probe__failure *f)
{
    return (agent_ev_probe){ .generation = group->current.generation,
                             .probe = f->probe,
                             .rank = f->rank,
                             .local_rank = f->local_rank,
                             .last_step = f->last_step,
                             .reason = f->reason };
}

static void on_failure(void *user, const probe__failure *f)
{
    agent_group *group = user;
    agent_ev_probe failed = probe_event(group, f);
    agent__ev_probe_failed(group->job.events, &failed);
    if (strcmp(f->probe, "user") == 0) { /* the node's health check: out of the job's pool */
        char why[300];
        snprintf(why, sizeof why, "health check failed: %s", f->reason);
        agent__slurm_give_up(group, why);
    }
    agent_worker *worker = worker_at(group, f->local_rank);
    if (worker == NULL) return;
    /* A hung worker will not stop on SIGTERM in time (a stopped process
     * does not even see it): its stacks are written, so kill it now rather
     * than after the grace period. */
    bool hung = strcmp(f->probe, "hang") == 0 || strcmp(f->probe, "startup") == 0;
    if (hung && worker->running && f->local_rank >= 0)
        agent__proc_signal_group(worker->pid, SIGKILL);
    if (strncmp(f->probe, "nccl_", 5) == 0)
        agent__group_worker_faulted(group, worker, f->reason);
    else
        agent__group_worker_unhealthy(group, worker, f->reason, -1, 0);
}

/* A worker library's event (nccl_comm_built) into the event log, its fields as sent. */
static void on_worker_event(void *user, int local_rank, int rank, const channel__kv *kv)
{
    agent_group *group = user;
    const char *name = channel__kv_get(kv, "NAME");
    if (name != NULL && strcmp(name, "recovery_phase") == 0) {
        const char *phase = channel__kv_get(kv, "PHASE");
        uint64_t ns, generation;
        size_t len = phase != NULL ? strlen(phase) : 0;
        if (len == 0 || len > 31 || strspn(phase, "abcdefghijklmnopqrstuvwxyz0123456789_") != len ||
            elastic__parse_u64(NULL, channel__kv_get(kv, "NS"), 0, INT64_MAX, &ns) != 0 ||
            elastic__parse_u64(NULL, channel__kv_get(kv, "GENERATION"), 0, INT64_MAX,
                               &generation) != 0)
            return; /* malformed: dropped */
        agent_worker *worker = worker_at(group, local_rank);
        if (worker != NULL) agent__phases_on_report(group, worker, phase, ns, generation);
        return;
    }
    if (name != NULL && strcmp(name, "replica_divergence") == 0) {
        agent__divergence_report(group, local_rank, kv);
        return;
    }
    if (name == NULL || strcmp(name, "nccl_comm_built") != 0) return; /* the only other one */
    /* The report's own upper-case fields, but those the event has already. */
    const char *keys[AGENT_EV_MAX_EXTRA], *values[AGENT_EV_MAX_EXTRA];
    int count = 0;
    for (size_t i = 0; i < kv->count && count < AGENT_EV_MAX_EXTRA; i++) {
        if (strcmp(kv->keys[i], "NAME") == 0 || strcmp(kv->keys[i], "RANK") == 0 ||
            strcmp(kv->keys[i], "GENERATION") == 0 ||
            strspn(kv->keys[i], "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen(kv->keys[i]))
            continue;
        keys[count] = kv->keys[i];
        values[count++] = kv->values[i];
    }
    agent__ev_nccl_comm_built(group->job.events,
                              &(agent_ev_nccl_comm_built){ .generation = group->current.generation,
                                                           .rank = rank,
                                                           .local_rank = local_rank,
                                                           .keys = keys,
                                                           .values = values,
                                                           .count = count });
}

/* A worker saved a checkpoint step: the job's end line names the last one. */
static void on_checkpoint(void *user, int local_rank, int rank, uint64_t step, uint64_t wall_ms)
{
    agent_group *group = user;
    agent_probes *pr = group->probes;
    if (!pr->ckpt_step_valid || step >= pr->ckpt_step) {
        pr->ckpt_step_valid = true;
        pr->ckpt_step = step;
        pr->ckpt_wall_ms = wall_ms;
        pr->ckpt_rank = rank;
    }
    agent__ev_checkpoint(group->job.events,
                         &(agent_ev_checkpoint){ .generation = group->current.generation,
                                                 .rank = rank,
                                                 .local_rank = local_rank,
                                                 .step = step,
                                                 .saved_ms = (int64_t)wall_ms });
}

static void on_checkpoint_tier(void *user, int local_rank, int rank, uint64_t step, unsigned tier)
{
    agent__memory_saved(user, local_rank, rank, step, tier);
}

static void on_restored(void *user, int local_rank, int rank, unsigned source, uint64_t step,
                        uint64_t bytes, uint64_t us)
{
    agent__memory_restored(user, local_rank, rank, source, step, bytes, us);
}

static void on_straggler(void *user, const probe__failure *f)
{
    agent_group *group = user;
    agent_ev_probe slow = probe_event(group, f);
    agent__ev_straggler(group->job.events, &slow);
    agent_worker *worker = worker_at(group, f->local_rank);
    if (group->job.opts->straggler_evict && worker != NULL)
        agent__group_worker_unhealthy(group, worker, f->reason, -1, 0);
}

/* The agent's own /metrics lines: goodput, then the memory tier's. */
static void render_metrics(void *user, elastic__text *out)
{
    agent__goodput_render(user, out);
    agent__memory_render_metrics(user, out);
    agent__divergence_render_metrics(user, out);
    agent__failure_render_metrics(user, out);
}

int agent__probes_start(agent_group *group)
{
    const elastic_agent_opts *o = group->job.opts;
    /* TMPDIR when its path leaves room for the socket's name (sun_path is 108 bytes). */
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] != '/' || strlen(tmp) > 64) tmp = "/tmp";
    agent__reaper_sweep_stale(tmp);
    snprintf(group->probes->dir, sizeof group->probes->dir, "%s/elastic-%d-XXXXXX", tmp,
             (int)getpid());
    if (mkdtemp(group->probes->dir) == NULL) {
        group->probes->dir[0] = '\0';
        return elastic__fail(ELASTIC_ESYS, "probe directory: %s", strerror(errno));
    }
    probe__monitor_opts opts;
    probe__monitor_opts_init(&opts);
    opts.loop = group->loop;
    opts.run_dir = group->probes->dir;
    opts.local_world_size = (unsigned)o->nproc_per_node;
    opts.spare_slots = (unsigned)(o->warm_spares > 0 ? o->warm_spares : 0);
    opts.run_id = group->job.run_id;
    opts.node_id = group->job.node_id;
    opts.interval_ms =
        o->monitor_interval_ms > 0 && o->monitor_interval_ms < 1000 ? o->monitor_interval_ms : 1000;
    opts.hang_timeout_ms = o->hang_timeout_ms;
    opts.startup_timeout_ms = o->startup_timeout_ms;
    opts.straggler_window = (unsigned)o->straggler_window;
    opts.straggler_rounds = (unsigned)o->straggler_rounds;
    opts.user_probe_command = o->user_probe;
    opts.user_probe_interval_ms = o->user_probe_interval_ms;
    opts.metrics_host = o->metrics_host;
    opts.metrics_port = o->metrics_port;
    opts.on_failure = on_failure;
    opts.on_straggler = on_straggler;
    opts.on_control = agent__inprocess_on_control;
    opts.on_checkpoint = on_checkpoint;
    opts.on_checkpoint_tier = on_checkpoint_tier;
    opts.on_restored = on_restored;
    opts.on_worker_event = on_worker_event;
    opts.node_stat_interval_ms = AGENT_NODE_STAT_INTERVAL_MS;
    opts.on_node_stat = agent__node_stat;
    opts.on_steps_started = agent__goodput_on_steps_started;
    opts.on_render = render_metrics;
    opts.user = group;
    int rc = probe__monitor_start(&opts, &group->monitor);
    if (rc != 0) return rc;
    const char *host = o->metrics_host ? o->metrics_host : "127.0.0.1";
    int port = probe__monitor_metrics_port(group->monitor);
    /* Information, not a warning; a port we picked (--metrics-port 0) is
     * something the person needs to know, so it also goes to the console. */
    if (o->metrics_port >= 0) ELASTIC_LOG_I("agent", "metrics on http://%s:%d/metrics", host, port);
    if (o->metrics_port == 0) agent__console(group, "metrics on http://%s:%d/metrics", host, port);
    return 0;
}

void agent__probes_stop(agent_group *group)
{
    probe__monitor_stop(group->monitor); /* removes the heartbeat file and the socket */
    group->monitor = NULL;
    agent__node_stats_free(group);
    if (group->probes->dir[0] != '\0') rmdir(group->probes->dir);
    group->probes->dir[0] = '\0';
}

void agent__probes_generation_started(agent_group *group)
{
    if (group->monitor == NULL) return;
    const elastic_rdzv_result *g = &group->current;
    probe__generation_info info = { .generation = g->generation,
                                    .restart_count = g->restart_count,
                                    .world_size = g->world_size,
                                    .nodes = g->group_world_size,
                                    .group_rank = g->group_rank };
    probe__monitor_generation_started(group->monitor, &info);
}

void agent__probes_worker_starting(agent_group *group, agent_worker *worker)
{
    if (group->monitor != NULL) probe__monitor_worker_starting(group->monitor, worker->local_rank);
}

void agent__probes_worker_started(agent_group *group, agent_worker *worker)
{
    if (group->monitor != NULL)
        probe__monitor_worker_started(group->monitor, worker->local_rank, worker->rank, worker->pid,
                                      worker->err.file_fd);
}

void agent__probes_worker_exited(agent_group *group, agent_worker *worker)
{
    if (group->monitor == NULL) return;
    probe__monitor_worker_exited(group->monitor, worker->local_rank);
    if (worker->exit_code != 0 && agent__group_is_running(group))
        probe__monitor_count_failure(group->monitor, "exit");
}

const char *agent__probes_dir(const agent_group *group)
{
    return group->probes->dir;
}

bool agent__probes_last_checkpoint(const agent_group *group, uint64_t *step, uint64_t *wall_ms,
                                   int *rank)
{
    const agent_probes *pr = group->probes;
    if (!pr->ckpt_step_valid) return false;
    *step = pr->ckpt_step;
    *wall_ms = pr->ckpt_wall_ms;
    *rank = pr->ckpt_rank;
    return true;
}
