/*
 * What the monitor shows: the Prometheus page (generation, restarts, workers
 * alive, per-rank pid, uptime and liveness (heartbeat or not), heartbeat age,
 * step, steps/s, step time and straggler score,
 * probe failures, recovery durations) and the /healthz verdict.
 */
#include "common/clock.h"
#include "probe/monitor.h"

#include <stdio.h>

static const char *const probe_names[MONITOR_PROBES] = { "hang",      "startup", "straggler",
                                                         "user",      "exit",    "nccl_timeout",
                                                         "nccl_error" };

void monitor__count(probe__monitor *m, const char *probe)
{
    for (int i = 0; i < MONITOR_PROBES; i++)
        if (strcmp(probe, probe_names[i]) == 0) m->failures[i]++;
}

static void metric_head(elastic__text *out, const char *name, const char *type, const char *help)
{
    elastic__text_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static unsigned workers_alive(const probe__monitor *m)
{
    unsigned alive = 0;
    for (unsigned i = 0; i < m->opts.local_world_size; i++) alive += m->workers[i].running;
    return alive;
}

static void render_group(const probe__monitor *m, elastic__text *out)
{
    char run_id[256], node_id[256];
    probe__prom_escape(m->run_id, run_id, sizeof run_id);
    probe__prom_escape(m->node_id, node_id, sizeof node_id);
    metric_head(out, "elastic_job_info", "gauge", "The job and node this agent serves.");
    elastic__text_printf(out, "elastic_job_info{run_id=\"%s\",node=\"%s\"} 1\n", run_id, node_id);
    metric_head(out, "elastic_generation", "gauge", "The worker group's current generation.");
    elastic__text_printf(out, "elastic_generation %llu\n",
                         (unsigned long long)m->generation.generation);
    metric_head(out, "elastic_restarts_total", "counter", "Failures the job has consumed.");
    elastic__text_printf(out, "elastic_restarts_total %d\n", m->generation.restart_count);
    metric_head(out, "elastic_nodes", "gauge", "Nodes in the generation.");
    elastic__text_printf(out, "elastic_nodes %d\n", m->generation.nodes);
    metric_head(out, "elastic_world_size", "gauge", "Workers in the generation.");
    elastic__text_printf(out, "elastic_world_size %d\n", m->generation.world_size);
    metric_head(out, "elastic_group_rank", "gauge", "This node's rank among the nodes.");
    elastic__text_printf(out, "elastic_group_rank %d\n", m->generation.group_rank);
    metric_head(out, "elastic_workers", "gauge", "Workers this node runs.");
    elastic__text_printf(out, "elastic_workers %u\n", m->opts.local_world_size);
    metric_head(out, "elastic_workers_alive", "gauge",
                "Workers of this node with a running process.");
    elastic__text_printf(out, "elastic_workers_alive %u\n", workers_alive(m));
    metric_head(out, "elastic_healthy", "gauge", "1 when no probe has failed in this generation.");
    elastic__text_printf(out, "elastic_healthy %d\n", m->healthy ? 1 : 0);
}

static void render_workers(const probe__monitor *m, elastic__text *out, uint64_t now_ns)
{
    static const struct {
        const char *name, *type, *help;
    } heads[] = {
        { "elastic_worker_heartbeat_age_seconds", "gauge",
          "Time since the worker's last heartbeat." },
        { "elastic_worker_step", "gauge", "The last step the worker reported." },
        { "elastic_worker_steps_per_second", "gauge",
          "Steps per second over the last probe interval." },
        { "elastic_worker_step_time_seconds", "gauge",
          "Mean step time over the straggler window." },
        { "elastic_worker_straggler_score", "gauge",
          "Group median step time / this worker's (1 typical, lower slower)." },
    };
    for (size_t h = 0; h < ELASTIC__ARRAY_LEN(heads); h++) {
        metric_head(out, heads[h].name, heads[h].type, heads[h].help);
        for (unsigned i = 0; i < m->opts.local_world_size; i++) {
            const monitored_worker *mw = &m->workers[i];
            channel__hb_snapshot now; /* fresh numbers, not the last tick's */
            channel__hb_read(m->region, mw->slot, &now);
            if (!mw->running || now.beats == 0) continue;
            double value;
            if (h == 0)
                value = now_ns > now.last_beat_ns ? (double)(now_ns - now.last_beat_ns) / 1e9 : 0;
            else if (h == 1)
                value = (double)now.step;
            else if (h == 2)
                value = mw->steps_per_second;
            else if (h == 3)
                value = m->straggler != NULL ? probe__straggler_step_ns(m->straggler, i) / 1e9 : 0;
            else
                value = m->scores[i];
            if ((h == 2 && value < 0) || (h == 3 && value <= 0) || (h == 4 && value < 0))
                continue; /* no data yet */
            elastic__text_printf(out, "%s{rank=\"%d\",local_rank=\"%u\"} %.6g\n", heads[h].name,
                                 mw->rank, i, value);
        }
    }
}

/* Every worker that ran in its slot, whether it heartbeats or not. */
static void render_processes(const probe__monitor *m, elastic__text *out, uint64_t now_ns)
{
    static const struct {
        const char *name, *help;
    } heads[] = {
        { "elastic_worker_pid", "The worker's process id (the last one, after it exited)." },
        { "elastic_worker_alive", "1 while the worker's process runs." },
        { "elastic_worker_uptime_seconds", "How long the worker's process has run (or ran)." },
    };
    for (size_t h = 0; h < ELASTIC__ARRAY_LEN(heads); h++) {
        metric_head(out, heads[h].name, "gauge", heads[h].help);
        for (unsigned i = 0; i < m->opts.local_world_size; i++) {
            const monitored_worker *mw = &m->workers[i];
            if (mw->started_ns == 0) continue;
            uint64_t end = mw->exited_ns != 0 ? mw->exited_ns : now_ns;
            double value = h == 0 ? (double)mw->shown_pid
                           : h == 1
                               ? (double)mw->running
                               : (double)(end > mw->started_ns ? end - mw->started_ns : 0) / 1e9;
            elastic__text_printf(out, "%s{rank=\"%d\",local_rank=\"%u\"} %.6g\n", heads[h].name,
                                 mw->rank, i, value);
        }
    }
}

static void render_events(const probe__monitor *m, elastic__text *out)
{
    metric_head(out, "elastic_probe_failures_total", "counter",
                "Workers or nodes declared unhealthy, by probe.");
    for (int i = 0; i < MONITOR_PROBES; i++)
        elastic__text_printf(out, "elastic_probe_failures_total{probe=\"%s\"} %llu\n",
                             probe_names[i], (unsigned long long)m->failures[i]);
    static const char *const modes[2] = { "restart", "in_process" };
    metric_head(out, "elastic_recovery_seconds", "summary",
                "Failure to workers back in their loop.");
    for (int i = 0; i < 2; i++)
        elastic__text_printf(out,
                             "elastic_recovery_seconds_sum{mode=\"%s\"} "
                             "%.6f\nelastic_recovery_seconds_count{mode=\"%s\"} %llu\n",
                             modes[i], m->recovery_sum[i], modes[i],
                             (unsigned long long)m->recoveries[i]);
    metric_head(out, "elastic_recovery_last_seconds", "gauge", "Duration of the last recovery.");
    for (int i = 0; i < 2; i++)
        if (m->recoveries[i] > 0)
            elastic__text_printf(out, "elastic_recovery_last_seconds{mode=\"%s\"} %.6f\n", modes[i],
                                 m->recovery_last[i]);
    static const char *const methods[2] = { "created", "shrunk" };
    metric_head(out, "elastic_nccl_comm_build_seconds", "summary",
                "NCCL communicator (re)builds by the workers.");
    for (int i = 0; i < 2; i++)
        elastic__text_printf(out,
                             "elastic_nccl_comm_build_seconds_sum{method=\"%s\"} %.6f\n"
                             "elastic_nccl_comm_build_seconds_count{method=\"%s\"} %llu\n",
                             methods[i], m->nccl_build_sum[i], methods[i],
                             (unsigned long long)m->nccl_builds[i]);
}

void monitor__render(void *user, elastic__text *out)
{
    probe__monitor *m = user;
    uint64_t now = elastic__now_ns();
    render_group(m, out);
    render_processes(m, out, now);
    render_workers(m, out, now);
    render_events(m, out);
    if (m->node_count > 0) {
        metric_head(out, "elastic_node_straggler_rounds_total", "counter",
                    "Job-wide straggler exchanges this node has scored.");
        elastic__text_printf(out, "elastic_node_straggler_rounds_total %llu\n",
                             (unsigned long long)m->node_score_rounds);
        metric_head(out, "elastic_node_straggler_score", "gauge",
                    "Job median step time / this node's (1 typical, lower slower; job-wide).");
        for (unsigned i = 0; i < m->node_count; i++)
            if (m->node_scores[i] >= 0)
                elastic__text_printf(out, "elastic_node_straggler_score{node=\"%s\"} %.6g\n",
                                     m->node_stats[i].node_id, m->node_scores[i]);
    }
    if (m->opts.on_render != NULL) m->opts.on_render(m->opts.user, out);
    if (m->extra_metrics != NULL) elastic__text_printf(out, "%s", m->extra_metrics);
}

bool monitor__health(void *user, char *reason, size_t size)
{
    probe__monitor *m = user;
    if (!m->healthy) {
        snprintf(reason, size, "%s", m->unhealthy_reason);
        return false;
    }
    if (m->user_probe != NULL && !m->user_probe_healthy) {
        snprintf(reason, size, "the user probe reports unhealthy");
        return false;
    }
    return true;
}
