/*
 * The monitor's life and the events the agent feeds it: start and stop,
 * generations starting and pausing, worker processes starting and exiting,
 * and the in-process recovery messages it relays over the control socket.
 */
#include "common/clock.h"
#include "probe/monitor.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void release(uv_handle_t *handle)
{
    probe__monitor *m = handle->data;
    if (--m->open_handles > 0) return;
    probe__straggler_free(m->straggler);
    channel__hb_close(m->region, true);
    for (unsigned i = 0; i < m->opts.local_world_size; i++)
        if (m->workers[i].log_fd >= 0) close(m->workers[i].log_fd);
    free(m->workers);
    free(m->scores);
    free(m->node_stats);
    free(m->node_scores);
    free(m->extra_metrics);
    free(m);
}

static int derive_timeouts(probe__monitor *m)
{
    probe__monitor_opts *o = &m->opts;
    if (o->hang_timeout_ms > 0 && o->interval_ms > o->hang_timeout_ms / 2)
        o->interval_ms = o->hang_timeout_ms / 2 > 10 ? o->hang_timeout_ms / 2 : 10;
    if (o->startup_timeout_ms == 0 && o->hang_timeout_ms > 0)
        o->startup_timeout_ms = o->hang_timeout_ms > 600000 ? o->hang_timeout_ms : 600000;
    m->hang_timeout_ns = (uint64_t)o->hang_timeout_ms * 1000000u;
    m->startup_timeout_ns = (uint64_t)o->startup_timeout_ms * 1000000u;
    int n = snprintf(m->heartbeat_path, sizeof m->heartbeat_path, "%s/heartbeat", o->run_dir);
    int k = snprintf(m->socket_path, sizeof m->socket_path, "%s/agent.sock", o->run_dir);
    if (n < 0 || (size_t)n >= sizeof m->heartbeat_path || k < 0 ||
        (size_t)k >= sizeof m->socket_path)
        return elastic__fail(ELASTIC_EINVAL,
                             "monitor: run directory path too long for a unix socket");
    snprintf(m->run_id, sizeof m->run_id, "%s", o->run_id != NULL ? o->run_id : "");
    snprintf(m->node_id, sizeof m->node_id, "%s", o->node_id != NULL ? o->node_id : "");
    o->run_id = o->node_id = NULL; /* borrowed strings are not kept */
    return 0;
}

static int allocate(probe__monitor *m)
{
    unsigned n = m->opts.local_world_size;
    m->workers = calloc(n, sizeof *m->workers);
    m->scores = malloc(n * sizeof *m->scores);
    if (m->workers == NULL || m->scores == NULL) return elastic__fail(ELASTIC_ENOMEM, "monitor");
    for (unsigned i = 0; i < n; i++) {
        m->workers[i] = (monitored_worker){ .monitor = m, .slot = i, .rank = -1, .log_fd = -1 };
        m->scores[i] = -1;
    }
    return m->opts.straggler_window > 0
               ? probe__straggler_create(n, m->opts.straggler_window, &m->straggler)
               : 0;
}

static void on_control(void *user, int slot, int type, uint64_t generation, uint64_t sent_ns)
{
    probe__monitor *m = user;
    if (m->opts.on_control != NULL)
        m->opts.on_control(m->opts.user, slot, type, generation, sent_ns);
}

static void on_user_probe(void *user, bool healthy, const char *reason)
{
    probe__monitor *m = user;
    m->user_probe_healthy = healthy;
    if (healthy || m->paused || m->user_probe_reported) return;
    m->user_probe_reported = true;
    probe__failure f = { .probe = "user", .local_rank = -1, .rank = -1 };
    snprintf(f.reason, sizeof f.reason, "user probe: %s", reason);
    monitor__report(m, &f);
}

static int start_services(probe__monitor *m)
{
    const probe__monitor_opts *o = &m->opts;
    int rc = channel__hb_create(m->heartbeat_path, o->local_world_size, &m->region);
    if (rc == 0)
        rc = probe__control_start(o->loop, m->socket_path, o->local_world_size + o->spare_slots,
                                  on_control, m, &m->control);
    if (rc == 0) probe__control_on_report(m->control, monitor__on_report, m);
    if (rc == 0 && o->metrics_port >= 0)
        rc = probe__metrics_start(o->loop, o->metrics_host, o->metrics_port, monitor__render,
                                  monitor__health, m, &m->metrics);
    if (rc == 0 && (o->user_probe_command != NULL || o->user_probe_fn != NULL)) {
        m->user_probe_healthy = true;
        rc = probe__user_probe_start(o->loop, o->user_probe_command, o->user_probe_fn,
                                     o->user_probe_user, o->user_probe_interval_ms,
                                     o->user_probe_timeout_ms, on_user_probe, m, &m->user_probe);
    }
    return rc;
}

int probe__monitor_start(const probe__monitor_opts *opts, probe__monitor **out)
{
    int rc = opts != NULL ? monitor__check_opts(opts)
                          : elastic__fail(ELASTIC_EINVAL, "monitor: no options");
    if (rc != 0) return rc;
    probe__monitor *m = calloc(1, sizeof *m);
    if (m == NULL) return elastic__fail(ELASTIC_ENOMEM, "monitor");
    m->opts = *opts;
    m->healthy = true;
    m->paused = true; /* until the first generation starts */
    rc = derive_timeouts(m);
    if (rc == 0) rc = allocate(m);
    if (rc == 0) rc = start_services(m);
    uv_timer_init(opts->loop, &m->timer);
    m->timer.data = m;
    uv_timer_init(opts->loop, &m->hang_timer);
    m->hang_timer.data = m;
    m->open_handles = 2;
    for (unsigned i = 0; m->workers != NULL && i < opts->local_world_size; i++) {
        uv_timer_init(opts->loop, &m->workers[i].dump_timer);
        m->workers[i].dump_timer.data = &m->workers[i];
        m->open_handles++;
    }
    if (rc != 0) {
        probe__monitor_stop(m);
        return rc;
    }
    uv_timer_start(&m->timer, monitor__tick, (uint64_t)m->opts.interval_ms,
                   (uint64_t)m->opts.interval_ms);
    *out = m;
    return 0;
}

static void release_worker_timer(uv_handle_t *handle)
{
    monitored_worker *mw = handle->data;
    release((uv_handle_t *)&mw->monitor->timer);
}

void probe__monitor_stop(probe__monitor *m)
{
    if (m == NULL) return;
    probe__control_stop(m->control);
    probe__metrics_stop(m->metrics);
    probe__user_probe_stop(m->user_probe);
    for (unsigned i = 0; m->workers != NULL && i < m->opts.local_world_size; i++) {
        probe__stack_dump_cancel(m->workers[i].dump);
        uv_close((uv_handle_t *)&m->workers[i].dump_timer, release_worker_timer);
    }
    uv_close((uv_handle_t *)&m->hang_timer, release);
    uv_close((uv_handle_t *)&m->timer, release);
}

const char *probe__monitor_heartbeat_path(const probe__monitor *m)
{
    return m->heartbeat_path;
}
const char *probe__monitor_socket_path(const probe__monitor *m)
{
    return m->socket_path;
}
int probe__monitor_metrics_port(const probe__monitor *m)
{
    return m->metrics != NULL ? probe__metrics_port(m->metrics) : -1;
}

/* ---- generations ------------------------------------------------------------ */

void probe__monitor_generation_started(probe__monitor *m, const probe__generation_info *info)
{
    m->generation = *info;
    m->paused = false;
    m->healthy = true;
    m->unhealthy_reason[0] = '\0';
    m->straggler_reported = m->user_probe_reported = false;
    m->steps_reported = false;
    if (m->straggler != NULL) probe__straggler_reset(m->straggler);
    uint64_t now = elastic__now_ns();
    for (unsigned i = 0; i < m->opts.local_world_size; i++) {
        monitored_worker *mw = &m->workers[i];
        mw->failed = false;
        m->scores[i] = -1;
        channel__hb_read(m->region, mw->slot, &mw->last);
        /* A survivor's sums so far belong to the generations before. Every
         * slot's: the agent starts a generation's new workers after this
         * (probe__monitor_worker_starting zeroes their slot and baseline), so
         * a process in a slot now ran in an earlier generation. */
        mw->baseline = mw->last;
        probe__hang_start(&mw->hang, &mw->last, now);
    }
    monitor__arm_hang_timer(m);
}

void probe__monitor_pause(probe__monitor *m)
{
    m->paused = true;
}

/* ---- workers ---------------------------------------------------------------- */

static monitored_worker *worker_at(const probe__monitor *m, int local_rank)
{
    return local_rank >= 0 && (unsigned)local_rank < m->opts.local_world_size
               ? &m->workers[local_rank]
               : NULL;
}

void probe__monitor_worker_starting(probe__monitor *m, int local_rank)
{
    monitored_worker *mw = worker_at(m, local_rank);
    if (mw == NULL) return;
    channel__hb_reset(m->region, mw->slot);
    memset(&mw->last, 0, sizeof mw->last);
    memset(&mw->baseline, 0, sizeof mw->baseline);
    mw->ckpt_saves_seen = 0;
    mw->restore_seen = false;
}

void probe__monitor_worker_started(probe__monitor *m, int local_rank, int rank, int pid, int log_fd)
{
    monitored_worker *mw = worker_at(m, local_rank);
    if (mw == NULL) return;
    if (mw->log_fd >= 0) close(mw->log_fd);
    mw->log_fd = log_fd >= 0 ? fcntl(log_fd, F_DUPFD_CLOEXEC, 3) : -1;
    mw->running = true;
    mw->failed = false;
    mw->rank = rank;
    mw->pid = pid;
    mw->shown_pid = pid;
    mw->started_ns = elastic__now_ns();
    mw->exited_ns = 0;
    mw->steps_per_second = -1;
    channel__hb_read(m->region, mw->slot, &mw->last);
    probe__hang_start(&mw->hang, &mw->last, elastic__now_ns());
    monitor__arm_hang_timer(m);
}

void probe__monitor_worker_renumbered(probe__monitor *m, int local_rank, int rank)
{
    monitored_worker *mw = worker_at(m, local_rank);
    if (mw != NULL) mw->rank = rank;
}

void probe__monitor_worker_exited(probe__monitor *m, int local_rank)
{
    monitored_worker *mw = worker_at(m, local_rank);
    if (mw == NULL) return;
    channel__hb_read(m->region, mw->slot, &mw->last); /* a checkpoint saved since the last tick */
    monitor__check_checkpoint(m, mw, local_rank);
    mw->running = false;
    mw->pid = 0;
    mw->exited_ns = elastic__now_ns();
    probe__stack_dump_cancel(mw->dump);
    mw->dump = NULL;
    if (mw->waiting_for_dump) uv_timer_stop(&mw->dump_timer);
    mw->waiting_for_dump = false;
}

/* ---- in-process recovery ---------------------------------------------------- */

int probe__monitor_abort_worker(probe__monitor *m, int local_rank, const char *reason)
{
    if (worker_at(m, local_rank) == NULL)
        return elastic__fail(ELASTIC_EINVAL, "no local rank %d", local_rank);
    char payload[512];
    char clean[256];
    snprintf(clean, sizeof clean, "%s", reason != NULL ? reason : "");
    for (char *p = clean; *p != '\0'; p++)
        if (*p == '\n') *p = ' ';
    snprintf(payload, sizeof payload, "GENERATION=%llu\nREASON=%s\n",
             (unsigned long long)m->generation.generation, clean);
    return probe__control_send(m->control, (unsigned)local_rank, CHANNEL__MSG_ABORT, payload);
}

int probe__monitor_reconfigure_worker(probe__monitor *m, int local_rank,
                                      const channel__worker_env *env)
{
    if (worker_at(m, local_rank) == NULL)
        return elastic__fail(ELASTIC_EINVAL, "no local rank %d", local_rank);
    elastic__text text;
    elastic__text_init(&text, CHANNEL__MSG_MAX_PAYLOAD);
    int rc = channel__worker_env_format(env, &text);
    if (rc == 0)
        rc = probe__control_send(m->control, (unsigned)local_rank, CHANNEL__MSG_RECONFIGURE,
                                 text.data);
    elastic__text_free(&text);
    return rc;
}

int probe__monitor_notice_worker(probe__monitor *m, int local_rank, int grace_ms,
                                 const char *reason)
{
    if (worker_at(m, local_rank) == NULL)
        return elastic__fail(ELASTIC_EINVAL, "no local rank %d", local_rank);
    char clean[256], payload[320];
    snprintf(clean, sizeof clean, "%s", reason != NULL ? reason : "");
    for (char *p = clean; *p != '\0'; p++)
        if (*p == '\n') *p = ' ';
    snprintf(payload, sizeof payload, "GRACE_MS=%d\nREASON=%s\n", grace_ms < 0 ? 0 : grace_ms,
             clean);
    if (!probe__control_connected(m->control, (unsigned)local_rank)) return 0; /* not attached */
    return probe__control_send(m->control, (unsigned)local_rank, CHANNEL__MSG_NOTICE, payload);
}

int probe__monitor_stop_worker(probe__monitor *m, int local_rank)
{
    if (worker_at(m, local_rank) == NULL)
        return elastic__fail(ELASTIC_EINVAL, "no local rank %d", local_rank);
    return probe__control_send(m->control, (unsigned)local_rank, CHANNEL__MSG_STOP, "");
}

bool probe__monitor_worker_connected(const probe__monitor *m, int local_rank)
{
    return worker_at(m, local_rank) != NULL &&
           probe__control_connected(m->control, (unsigned)local_rank);
}

int probe__monitor_spare_send(probe__monitor *m, unsigned index, const channel__worker_env *env,
                              int group_world_size)
{
    if (index >= m->opts.spare_slots) return elastic__fail(ELASTIC_EINVAL, "no spare %u", index);
    unsigned slot = m->opts.local_world_size + index;
    if (env == NULL) return probe__control_send(m->control, slot, CHANNEL__MSG_STOP, "");
    elastic__text text;
    elastic__text_init(&text, CHANNEL__MSG_MAX_PAYLOAD);
    int rc = channel__worker_env_format(env, &text);
    if (rc == 0) {
        elastic__text_printf(&text, "GROUP_WORLD_SIZE=%d\n", group_world_size);
        rc = text.overflow ? elastic__fail(ELASTIC_ELIMIT, "promotion too long") : 0;
    }
    if (rc == 0) rc = probe__control_send(m->control, slot, CHANNEL__MSG_PROMOTE, text.data);
    elastic__text_free(&text);
    return rc;
}

bool probe__monitor_spare_parked(const probe__monitor *m, unsigned index)
{
    return index < m->opts.spare_slots &&
           probe__control_connected(m->control, m->opts.local_world_size + index);
}

uint64_t probe__monitor_last_beat_ns(const probe__monitor *m, int local_rank)
{
    if (worker_at(m, local_rank) == NULL || m->region == NULL) return 0;
    channel__hb_snapshot now;
    channel__hb_read(m->region, (unsigned)local_rank, &now);
    return now.last_beat_ns;
}

int64_t probe__monitor_last_step(const probe__monitor *m, int local_rank)
{
    if (worker_at(m, local_rank) == NULL || m->region == NULL) return -1;
    channel__hb_snapshot now;
    channel__hb_read(m->region, (unsigned)local_rank, &now);
    return now.beats > 0 && now.step <= (uint64_t)INT64_MAX ? (int64_t)now.step : -1;
}

void probe__monitor_record_recovery(probe__monitor *m, double seconds, bool in_process)
{
    int mode = in_process ? 1 : 0;
    m->recoveries[mode]++;
    m->recovery_sum[mode] += seconds;
    m->recovery_last[mode] = seconds;
}

void probe__monitor_count_failure(probe__monitor *m, const char *probe)
{
    monitor__count(m, probe);
}

void probe__monitor_scores(const probe__monitor *m, double *scores)
{
    memcpy(scores, m->scores, m->opts.local_world_size * sizeof *scores);
}

void probe__monitor_set_node_scores(probe__monitor *m, unsigned n, const probe__node_stat *stats,
                                    const double *scores)
{
    if (n != m->node_count) {
        free(m->node_stats);
        free(m->node_scores);
        m->node_count = 0;
        m->node_stats = n > 0 ? calloc(n, sizeof *m->node_stats) : NULL;
        m->node_scores = n > 0 ? calloc(n, sizeof *m->node_scores) : NULL;
        if (m->node_stats == NULL || m->node_scores == NULL) return;
        m->node_count = n;
    }
    if (n == 0) return;
    m->node_score_rounds++;
    memcpy(m->node_stats, stats, n * sizeof *stats);
    memcpy(m->node_scores, scores, n * sizeof *scores);
}

void probe__monitor_progress(const probe__monitor *m, probe__progress *out)
{
    unsigned n = m->opts.local_world_size;
    channel__hb_snapshot *now = calloc(n > 0 ? n : 1, sizeof *now);
    const channel__hb_snapshot **cur = calloc(n > 0 ? n : 1, sizeof *cur),
                               **base = calloc(n > 0 ? n : 1, sizeof *base);
    if (now == NULL || cur == NULL || base == NULL) {
        memset(out, 0, sizeof *out);
        out->first_step = out->last_step = -1;
    } else {
        for (unsigned i = 0; i < n; i++) {
            const monitored_worker *mw = &m->workers[i];
            if (mw->shown_pid <= 0) continue; /* no process ever ran in the slot */
            channel__hb_read(m->region, mw->slot, &now[i]);
            cur[i] = &now[i];
            base[i] = &mw->baseline;
        }
        probe__progress_of(cur, base, n, elastic__wall_ms(), elastic__now_ns(), out);
    }
    free(now);
    free(cur);
    free(base);
}

void probe__monitor_set_extra_metrics(probe__monitor *m, const char *text)
{
    free(m->extra_metrics);
    m->extra_metrics = text != NULL && *text != '\0' ? elastic__strdup(text) : NULL;
}
