/*
 * `elasticctl status`: fetch an agent's /metrics and /healthz over plain
 * HTTP (bounded, with one deadline) and print the job at a glance: node,
 * generation, restarts, workers, health, one line per rank, and the node
 * health checks' verdict (docs/HEALTH.md).
 */
#include "common/http.h"
#include "common/parse_int.h"
#include "common/prom.h"
#include "common/text.h"
#include "elasticctl/ctl.h"
#include "elasticctl/status.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define STATUS_MAX_RANKS 1024

/* ---- formatting ---------------------------------------------------------------- */

typedef struct rank_row {
    int rank, local_rank;
    double pid, alive, uptime;     /* < 0: not on the page */
    double step, rate, age, score; /* < 0: no data (a trainer that does not heartbeat) */
} rank_row;

typedef struct job_view {
    char run_id[128], node[128];
    double generation, restarts, nodes, world_size, group_rank, workers, alive, healthy;
    double failures[5], recovery_last[2], recoveries[2];
    rank_row ranks[STATUS_MAX_RANKS];
    int rank_count;
    char node_scores[1024]; /* "vm-1 1.00, vm-2 0.33" (job-wide straggler scores) */
    double node_health;     /* elastic_node_health: 0 ok, 1 warning, 2 fatal; < 0: no checks */
    int gpus[3];            /* elastic_gpu_health: GPUs ok, warning, fatal */
    char checks[1024];      /* "temperature GPU 3, ib_link_downed mlx5_0/1" (not ok) */
} job_view;

static rank_row *row_for(job_view *v, const char *labels)
{
    char rank_text[32], local_text[32];
    int rank, local;
    if (!elastic__prom_label(labels, "rank", rank_text, sizeof rank_text) ||
        !elastic__prom_label(labels, "local_rank", local_text, sizeof local_text) ||
        elastic__parse_int(NULL, rank_text, 0, INT_MAX, &rank) != 0 ||
        elastic__parse_int(NULL, local_text, 0, INT_MAX, &local) != 0)
        return NULL;
    for (int i = 0; i < v->rank_count; i++)
        if (v->ranks[i].local_rank == local) return &v->ranks[i];
    if (v->rank_count == STATUS_MAX_RANKS) return NULL;
    rank_row *row = &v->ranks[v->rank_count++];
    *row = (rank_row){ .rank = rank,
                       .local_rank = local,
                       .pid = -1,
                       .alive = -1,
                       .uptime = -1,
                       .step = -1,
                       .rate = -1,
                       .age = -1,
                       .score = -1 };
    return row;
}

static void take_sample(job_view *v, const elastic__prom_sample *s)
{
    static const char *const probes[5] = { "hang", "startup", "straggler", "user", "exit" };
    static const char *const modes[2] = { "restart", "in_process" };
    struct {
        const char *name;
        double *field;
    } scalars[] = {
        { "elastic_generation", &v->generation }, { "elastic_restarts_total", &v->restarts },
        { "elastic_nodes", &v->nodes },           { "elastic_world_size", &v->world_size },
        { "elastic_group_rank", &v->group_rank }, { "elastic_workers", &v->workers },
        { "elastic_workers_alive", &v->alive },   { "elastic_healthy", &v->healthy }
    };
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(scalars); i++)
        if (strcmp(s->name, scalars[i].name) == 0) *scalars[i].field = s->value;
    char label[128];
    if (strcmp(s->name, "elastic_job_info") == 0) {
        elastic__prom_label(s->labels, "run_id", v->run_id, sizeof v->run_id);
        elastic__prom_label(s->labels, "node", v->node, sizeof v->node);
    } else if (strcmp(s->name, "elastic_probe_failures_total") == 0 &&
               elastic__prom_label(s->labels, "probe", label, sizeof label)) {
        for (int i = 0; i < 5; i++)
            if (strcmp(label, probes[i]) == 0) v->failures[i] = s->value;
    } else if (strncmp(s->name, "elastic_recovery_", 17) == 0 &&
               elastic__prom_label(s->labels, "mode", label, sizeof label)) {
        int mode = strcmp(label, modes[1]) == 0;
        if (strcmp(s->name, "elastic_recovery_last_seconds") == 0)
            v->recovery_last[mode] = s->value;
        if (strcmp(s->name, "elastic_recovery_seconds_count") == 0) v->recoveries[mode] = s->value;
    } else if (strcmp(s->name, "elastic_node_straggler_score") == 0 &&
               elastic__prom_label(s->labels, "node", label, sizeof label)) {
        size_t at = strlen(v->node_scores);
        snprintf(v->node_scores + at, sizeof v->node_scores - at, "%s%s %.2f", at > 0 ? ", " : "",
                 label, s->value);
    } else if (strcmp(s->name, "elastic_node_health") == 0) {
        v->node_health = s->value;
    } else if (strcmp(s->name, "elastic_gpu_health") == 0) {
        if (s->value >= 0 && s->value <= 2) v->gpus[(int)s->value]++;
    } else if (strcmp(s->name, "elastic_health_check_verdict") == 0 &&
               elastic__prom_label(s->labels, "check", label, sizeof label)) {
        char gpu[16] = "", port[64] = "", where[96] = "";
        elastic__prom_label(s->labels, "gpu", gpu, sizeof gpu);
        elastic__prom_label(s->labels, "port", port, sizeof port);
        if (port[0] != '\0')
            snprintf(where, sizeof where, " %s", port);
        else if (gpu[0] != '\0' && strcmp(gpu, "-1") != 0)
            snprintf(where, sizeof where, " GPU %s", gpu);
        size_t at = strlen(v->checks);
        snprintf(v->checks + at, sizeof v->checks - at, "%s%s%s%s", at > 0 ? ", " : "", label,
                 where, s->value >= 2 ? " (fatal)" : "");
    } else if (strncmp(s->name, "elastic_worker_", 15) == 0) {
        rank_row *row = row_for(v, s->labels);
        if (row == NULL) return;
        if (strcmp(s->name, "elastic_worker_pid") == 0) row->pid = s->value;
        if (strcmp(s->name, "elastic_worker_alive") == 0) row->alive = s->value;
        if (strcmp(s->name, "elastic_worker_uptime_seconds") == 0) row->uptime = s->value;
        if (strcmp(s->name, "elastic_worker_step") == 0) row->step = s->value;
        if (strcmp(s->name, "elastic_worker_steps_per_second") == 0) row->rate = s->value;
        if (strcmp(s->name, "elastic_worker_heartbeat_age_seconds") == 0) row->age = s->value;
        if (strcmp(s->name, "elastic_worker_straggler_score") == 0) row->score = s->value;
    }
}

static int parse_page(const char *metrics, job_view *v)
{
    char line[2048];
    for (const char *p = metrics; *p != '\0';) {
        size_t len = strcspn(p, "\n");
        if (len >= sizeof line)
            return elastic__fail(ELASTIC_EPROTO, "metrics line longer than %zu bytes", sizeof line);
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (p[len] == '\n');
        elastic__prom_sample sample;
        int rc = elastic__prom_parse_line(line, &sample);
        if (rc < 0) return elastic__fail(ELASTIC_EPROTO, "malformed metrics line: %.80s", line);
        if (rc == 1) take_sample(v, &sample);
    }
    return 0;
}

int ctl_status_format(const char *metrics, int health_status, const char *health_body,
                      elastic__text *out)
{
    job_view *v = calloc(1, sizeof *v);
    if (v == NULL) return elastic__fail(ELASTIC_ENOMEM, "status");
    v->node_health = -1;
    int rc = parse_page(metrics, v);
    if (rc == 0) {
        char health[160];
        snprintf(health, sizeof health, "%s", health_body);
        health[strcspn(health, "\n")] = '\0';
        elastic__text_printf(out, "job %s  node %s (group rank %.0f of %.0f nodes)\n", v->run_id,
                             v->node, v->group_rank, v->nodes);
        elastic__text_printf(out,
                             "generation %.0f  restarts %.0f  world size %.0f  workers %.0f/%.0f "
                             "alive  health: %s\n",
                             v->generation, v->restarts, v->world_size, v->alive, v->workers,
                             health_status == 200 ? "healthy" : health);
        elastic__text_printf(out, "%6s %6s %8s %5s %9s %10s %9s %10s %9s\n", "rank", "local", "pid",
                             "alive", "uptime", "step", "steps/s", "heartbeat", "straggler");
        for (int i = 0; i < v->rank_count; i++) {
            const rank_row *r = &v->ranks[i];
            char pid[24] = "-", alive[8] = "-", uptime[24] = "-", step[32] = "-", rate[24] = "-",
                 age[24] = "-", score[24] = "-";
            if (r->pid >= 0) snprintf(pid, sizeof pid, "%.0f", r->pid);
            if (r->alive >= 0) snprintf(alive, sizeof alive, "%s", r->alive > 0 ? "yes" : "no");
            if (r->uptime >= 0) snprintf(uptime, sizeof uptime, "%.1fs", r->uptime);
            if (r->step >= 0) snprintf(step, sizeof step, "%.0f", r->step);
            if (r->rate >= 0) snprintf(rate, sizeof rate, "%.2f", r->rate);
            if (r->age >= 0) snprintf(age, sizeof age, "%.2fs", r->age);
            if (r->score >= 0) snprintf(score, sizeof score, "%.2f", r->score);
            elastic__text_printf(out, "%6d %6d %8s %5s %9s %10s %9s %10s %9s\n", r->rank,
                                 r->local_rank, pid, alive, uptime, step, rate, age, score);
        }
        elastic__text_printf(
            out, "failures: hang %.0f, startup %.0f, straggler %.0f, user %.0f, exit %.0f\n",
            v->failures[0], v->failures[1], v->failures[2], v->failures[3], v->failures[4]);
        elastic__text_printf(
            out, "recoveries: restart %.0f (last %.3f s), in-process %.0f (last %.3f s)\n",
            v->recoveries[0], v->recovery_last[0], v->recoveries[1], v->recovery_last[1]);
        if (v->node_scores[0] != '\0')
            elastic__text_printf(out, "node straggler scores (job-wide): %s\n", v->node_scores);
        if (v->node_health >= 0) {
            static const char *const verdicts[3] = { "ok", "warning", "fatal" };
            int worst = v->node_health >= 2 ? 2 : v->node_health >= 1 ? 1 : 0;
            elastic__text_printf(out, "node checks: %s", verdicts[worst]);
            if (v->gpus[0] + v->gpus[1] + v->gpus[2] > 0)
                elastic__text_printf(out, "  GPUs: %d ok, %d warning, %d fatal", v->gpus[0],
                                     v->gpus[1], v->gpus[2]);
            if (v->checks[0] != '\0') elastic__text_printf(out, "  (%s)", v->checks);
            elastic__text_printf(out, "\n");
        }
    }
    free(v);
    return rc;
}

int ctl_status(const char *endpoint, int timeout_ms, FILE *out)
{
    elastic__text metrics, health, text;
    elastic__text_init(&metrics, 16u << 20);
    elastic__text_init(&health, 4096);
    elastic__text_init(&text, 1u << 20);
    int metrics_status = 0, health_status = 0;
    int rc = elastic__http_get(endpoint, "/metrics", timeout_ms, &metrics, &metrics_status);
    if (rc == 0 && metrics_status != 200)
        rc = elastic__fail(ELASTIC_EPROTO, "/metrics answered %d", metrics_status);
    if (rc == 0) rc = elastic__http_get(endpoint, "/healthz", timeout_ms, &health, &health_status);
    if (rc == 0)
        rc = ctl_status_format(metrics.data ? metrics.data : "", health_status,
                               health.data ? health.data : "", &text);
    if (rc == 0 && text.data != NULL) fputs(text.data, out);
    elastic__text_free(&metrics);
    elastic__text_free(&health);
    elastic__text_free(&text);
    return rc;
}
