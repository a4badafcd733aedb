/*
 * `elasticctl status`: fetch an agent's /metrics and /healthz over plain
 * HTTP (bounded, with one deadline) and print the job at a glance: node,
 * generation, restarts, workers, health, and one line per rank.
 */
#include "common/clock.h"
#include "probe/probe.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define STATUS_MAX_BODY (16u << 20)
#define STATUS_MAX_RANKS 1024

static int connect_endpoint(const char *endpoint, uint64_t deadline, int *fd_out)
{
    char host[256], port[16];
    const char *colon = strrchr(endpoint, ':');
    if (colon == NULL || (size_t)(colon - endpoint) >= sizeof host || strlen(colon + 1) >= sizeof port)
        return elastic__fail(ELASTIC_EINVAL, "endpoint \"%s\" is not host:port", endpoint);
    const char *start = endpoint[0] == '[' ? endpoint + 1 : endpoint;
    size_t host_len = (size_t)(colon - start) - (endpoint[0] == '[' ? 1 : 0);
    snprintf(host, sizeof host, "%.*s", (int)host_len, start);
    snprintf(port, sizeof port, "%s", colon + 1);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found = NULL;
    if (getaddrinfo(host, port, &hints, &found) != 0 || found == NULL)
        return elastic__fail(ELASTIC_ECONNECT, "cannot resolve %s", endpoint);
    int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -1 : connect(fd, found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t len = sizeof err;
        rc = poll(&pfd, 1, elastic__ms_left(deadline)) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
                     err == 0 ? 0 : -1;
    }
    if (rc != 0) {
        if (fd >= 0) close(fd);
        return elastic__fail(ELASTIC_ECONNECT, "connect to %s failed", endpoint);
    }
    *fd_out = fd;
    return 0;
}

static int exchange(int fd, const char *request, uint64_t deadline, probe__text *response)
{
    size_t sent = 0, len = strlen(request);
    char buf[16384];
    while (true) {
        struct pollfd pfd = {.fd = fd, .events = sent < len ? POLLOUT : POLLIN};
        int ready = poll(&pfd, 1, elastic__ms_left(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return elastic__fail(ELASTIC_ETIMEDOUT, "no complete answer in time");
        if (sent < len) {
            ssize_t n = send(fd, request + sent, len - sent, MSG_NOSIGNAL);
            if (n < 0 && errno != EAGAIN && errno != EINTR) return elastic__fail(ELASTIC_ECONNECT, "send: %s", strerror(errno));
            if (n > 0) sent += (size_t)n;
            continue;
        }
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0) return 0; /* the server closes after one response */
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n < 0) return elastic__fail(ELASTIC_ECONNECT, "recv: %s", strerror(errno));
        probe__text_printf(response, "%.*s", (int)n, buf);
        if (response->overflow) return elastic__fail(ELASTIC_ELIMIT, "answer larger than %u bytes", STATUS_MAX_BODY);
    }
}

int probe__http_get(const char *endpoint, const char *path, int timeout_ms, probe__text *body, int *status)
{
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    int fd = -1;
    int rc = connect_endpoint(endpoint, deadline, &fd);
    if (rc != 0) return rc;
    char request[512];
    snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, endpoint);
    probe__text response;
    probe__text_init(&response, STATUS_MAX_BODY);
    rc = exchange(fd, request, deadline, &response);
    close(fd);
    const char *head_end = response.data != NULL ? strstr(response.data, "\r\n\r\n") : NULL;
    if (rc == 0 && (head_end == NULL || sscanf(response.data, "HTTP/1.%*d %d", status) != 1))
        rc = elastic__fail(ELASTIC_EPROTO, "%s%s: not an HTTP answer", endpoint, path);
    if (rc == 0) probe__text_printf(body, "%s", head_end + 4);
    probe__text_free(&response);
    return rc;
}

/* ---- formatting ---------------------------------------------------------------- */

typedef struct rank_row {
    int rank, local_rank;
    double pid, alive, uptime;       /* < 0: not on the page */
    double step, rate, age, score;   /* < 0: no data (a trainer that does not heartbeat) */
} rank_row;

typedef struct job_view {
    char run_id[128], node[128];
    double generation, restarts, nodes, world_size, group_rank, workers, alive, healthy;
    double failures[5], recovery_last[2], recoveries[2];
    rank_row ranks[STATUS_MAX_RANKS];
    int rank_count;
    char node_scores[1024];          /* "vm-1 1.00, vm-2 0.33" (job-wide straggler scores) */
} job_view;

static rank_row *row_for(job_view *v, const char *labels)
{
    char rank_text[32], local_text[32];
    if (!probe__prom_label(labels, "rank", rank_text, sizeof rank_text) ||
        !probe__prom_label(labels, "local_rank", local_text, sizeof local_text))
        return NULL;
    int local = atoi(local_text);
    for (int i = 0; i < v->rank_count; i++)
        if (v->ranks[i].local_rank == local) return &v->ranks[i];
    if (v->rank_count == STATUS_MAX_RANKS) return NULL;
    rank_row *row = &v->ranks[v->rank_count++];
    *row = (rank_row){.rank = atoi(rank_text), .local_rank = local, .pid = -1, .alive = -1, .uptime = -1,
                      .step = -1, .rate = -1, .age = -1, .score = -1};
    return row;
}

static void take_sample(job_view *v, const probe__prom_sample *s)
{
    static const char *const probes[5] = {"hang", "startup", "straggler", "user", "exit"};
    static const char *const modes[2] = {"restart", "in_process"};
    struct { const char *name; double *field; } scalars[] = {
        {"elastic_generation", &v->generation}, {"elastic_restarts_total", &v->restarts},
        {"elastic_nodes", &v->nodes}, {"elastic_world_size", &v->world_size},
        {"elastic_group_rank", &v->group_rank}, {"elastic_workers", &v->workers},
        {"elastic_workers_alive", &v->alive}, {"elastic_healthy", &v->healthy}};
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(scalars); i++)
        if (strcmp(s->name, scalars[i].name) == 0) *scalars[i].field = s->value;
    char label[128];
    if (strcmp(s->name, "elastic_job_info") == 0) {
        probe__prom_label(s->labels, "run_id", v->run_id, sizeof v->run_id);
        probe__prom_label(s->labels, "node", v->node, sizeof v->node);
    } else if (strcmp(s->name, "elastic_probe_failures_total") == 0 && probe__prom_label(s->labels, "probe", label, sizeof label)) {
        for (int i = 0; i < 5; i++)
            if (strcmp(label, probes[i]) == 0) v->failures[i] = s->value;
    } else if (strncmp(s->name, "elastic_recovery_", 17) == 0 && probe__prom_label(s->labels, "mode", label, sizeof label)) {
        int mode = strcmp(label, modes[1]) == 0;
        if (strcmp(s->name, "elastic_recovery_last_seconds") == 0) v->recovery_last[mode] = s->value;
        if (strcmp(s->name, "elastic_recovery_seconds_count") == 0) v->recoveries[mode] = s->value;
    } else if (strcmp(s->name, "elastic_node_straggler_score") == 0 &&
               probe__prom_label(s->labels, "node", label, sizeof label)) {
        size_t at = strlen(v->node_scores);
        snprintf(v->node_scores + at, sizeof v->node_scores - at, "%s%s %.2f", at > 0 ? ", " : "",
                 label, s->value);
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
        if (len >= sizeof line) return elastic__fail(ELASTIC_EPROTO, "metrics line longer than %zu bytes", sizeof line);
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (p[len] == '\n');
        probe__prom_sample sample;
        int rc = probe__prom_parse_line(line, &sample);
        if (rc < 0) return elastic__fail(ELASTIC_EPROTO, "malformed metrics line: %.80s", line);
        if (rc == 1) take_sample(v, &sample);
    }
    return 0;
}

int probe__status_format(const char *metrics, int health_status, const char *health_body, probe__text *out)
{
    job_view *v = calloc(1, sizeof *v);
    if (v == NULL) return elastic__fail(ELASTIC_ENOMEM, "status");
    int rc = parse_page(metrics, v);
    if (rc == 0) {
        char health[160];
        snprintf(health, sizeof health, "%s", health_body);
        health[strcspn(health, "\n")] = '\0';
        probe__text_printf(out, "job %s  node %s (group rank %.0f of %.0f nodes)\n", v->run_id, v->node, v->group_rank,
                           v->nodes);
        probe__text_printf(out, "generation %.0f  restarts %.0f  world size %.0f  workers %.0f/%.0f alive  health: %s\n",
                           v->generation, v->restarts, v->world_size, v->alive, v->workers,
                           health_status == 200 ? "healthy" : health);
        probe__text_printf(out, "%6s %6s %8s %5s %9s %10s %9s %10s %9s\n", "rank", "local", "pid", "alive", "uptime",
                           "step", "steps/s", "heartbeat", "straggler");
        for (int i = 0; i < v->rank_count; i++) {
            const rank_row *r = &v->ranks[i];
            char pid[24] = "-", alive[8] = "-", uptime[24] = "-", step[32] = "-", rate[24] = "-", age[24] = "-",
                 score[24] = "-";
            if (r->pid >= 0) snprintf(pid, sizeof pid, "%.0f", r->pid);
            if (r->alive >= 0) snprintf(alive, sizeof alive, "%s", r->alive > 0 ? "yes" : "no");
            if (r->uptime >= 0) snprintf(uptime, sizeof uptime, "%.1fs", r->uptime);
            if (r->step >= 0) snprintf(step, sizeof step, "%.0f", r->step);
            if (r->rate >= 0) snprintf(rate, sizeof rate, "%.2f", r->rate);
            if (r->age >= 0) snprintf(age, sizeof age, "%.2fs", r->age);
            if (r->score >= 0) snprintf(score, sizeof score, "%.2f", r->score);
            probe__text_printf(out, "%6d %6d %8s %5s %9s %10s %9s %10s %9s\n", r->rank, r->local_rank, pid, alive, uptime,
                               step, rate, age, score);
        }
        probe__text_printf(out, "failures: hang %.0f, startup %.0f, straggler %.0f, user %.0f, exit %.0f\n",
                           v->failures[0], v->failures[1], v->failures[2], v->failures[3], v->failures[4]);
        probe__text_printf(out, "recoveries: restart %.0f (last %.3f s), in-process %.0f (last %.3f s)\n",
                           v->recoveries[0], v->recovery_last[0], v->recoveries[1], v->recovery_last[1]);
        if (v->node_scores[0] != '\0')
            probe__text_printf(out, "node straggler scores (job-wide): %s\n", v->node_scores);
    }
    free(v);
    return rc;
}
