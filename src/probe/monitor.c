/*
 * The monitor: everything an agent needs to watch its workers' health, on the
 * agent's libuv loop. It owns the heartbeat file and the control socket, runs
 * the hang and straggler probes on one timer, dumps a hung worker's stacks
 * before reporting it, runs the user probe, and serves the metrics endpoint.
 */
#include "common/clock.h"
#include "probe/monitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void probe__monitor_opts_init(probe__monitor_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->interval_ms = 1000;
    opts->stack_dump_timeout_ms = 15000;
    opts->straggler_threshold = 0.7;
    opts->user_probe_interval_ms = 10000;
    opts->user_probe_timeout_ms = 5000;
    opts->metrics_port = -1;
}

int monitor__check_opts(const probe__monitor_opts *o)
{
    if (o->loop == NULL || o->run_dir == NULL || o->on_failure == NULL)
        return elastic__fail(ELASTIC_EINVAL, "monitor: loop, run_dir and on_failure are required");
    if (o->local_world_size == 0 || o->local_world_size > CHANNEL__HB_MAX_SLOTS ||
        o->spare_slots > CHANNEL__HB_MAX_SLOTS - o->local_world_size)
        return elastic__fail(ELASTIC_EINVAL, "monitor: %u local workers", o->local_world_size);
    if (o->interval_ms <= 0 || o->hang_timeout_ms < 0 || o->startup_timeout_ms < 0 ||
        o->stack_dump_timeout_ms <= 0 || o->stack_dump_budget_ms < 0)
        return elastic__fail(ELASTIC_EINVAL, "monitor: a timeout or interval is negative");
    if (o->straggler_window > 1024 || !(o->straggler_threshold > 0 && o->straggler_threshold <= 1))
        return elastic__fail(ELASTIC_EINVAL,
                             "monitor: straggler window above 1024 or threshold outside (0, 1]");
    if (o->user_probe_command != NULL && o->user_probe_fn != NULL)
        return elastic__fail(ELASTIC_EINVAL,
                             "monitor: a user probe is a command or a callback, not both");
    return 0;
}

/* ---- per-worker probing ---------------------------------------------------- */

static probe__failure make_failure(const monitored_worker *mw, int local_rank, const char *probe)
{
    probe__failure f = {
        .probe = probe, .local_rank = local_rank, .rank = mw->rank, .last_step = mw->last.step
    };
    return f;
}

void monitor__report(probe__monitor *m, const probe__failure *f)
{
    monitor__count(m, f->probe);
    ELASTIC_LOG_W("probe", "%s", f->reason);
    m->healthy = false;
    snprintf(m->unhealthy_reason, sizeof m->unhealthy_reason, "%s", f->reason);
    m->opts.on_failure(m->opts.user, f);
}

/* How long the stacks of a hung worker may take: a twentieth of the timeout
 * that fired (at least 100 ms, at most --stack-dump timeout), so the group is
 * restarted within that timeout + 10%. A short budget skips the debugger
 * (stacks.c) for the worker's own, faster, backtrace. */
static int stack_budget_ms(const probe__monitor *m, bool started)
{
    uint64_t timeout_ms = (started ? m->hang_timeout_ns : m->startup_timeout_ns) / 1000000u;
    uint64_t budget =
        m->opts.stack_dump_budget_ms > 0 ? (uint64_t)m->opts.stack_dump_budget_ms : timeout_ms / 20;
    if (budget < 100) budget = 100;
    if (budget > (uint64_t)m->opts.stack_dump_timeout_ms)
        budget = (uint64_t)m->opts.stack_dump_timeout_ms;
    return (int)budget;
}

/* After the worker's own handler wrote its backtrace (or the wait ran out). */
static void on_backtrace_wait(uv_timer_t *timer)
{
    monitored_worker *mw = timer->data;
    probe__monitor *m = mw->monitor;
    channel__hb_snapshot now;
    channel__hb_read(m->region, mw->slot, &now);
    bool written = now.stack_dumps > mw->dumps_before;
    bool out_of_time = elastic__now_ms() >= mw->dump_deadline_ms;
    if (!written && !out_of_time && mw->waiting_for_dump) return;
    uv_timer_stop(timer);
    if (!mw->waiting_for_dump) return;
    mw->waiting_for_dump = false;
    if (!written) ELASTIC_LOG_W("probe", "rank %d wrote no backtrace in time", mw->rank);
    monitor__report(m, &mw->pending);
}

static void on_stacks_done(void *user, const char *how, bool ok)
{
    monitored_worker *mw = user;
    probe__monitor *m = mw->monitor;
    mw->dump = NULL;
    ELASTIC_LOG_I("probe", "stacks of rank %d: %s%s", mw->rank, how,
                  ok ? "" : " (nothing written)");
    if (ok && strcmp(how, "signal") == 0) {
        /* The backtrace is written by the worker itself (a live process does
         * it in milliseconds): give it a moment, but at most a twentieth of
         * the hang timeout, so the restart stays within timeout + 10%. */
        int budget_ms =
            stack_budget_ms(m, mw->pending.probe != NULL && strcmp(mw->pending.probe, "hang") == 0);
        if (budget_ms > 2000) budget_ms = 2000;
        mw->waiting_for_dump = true;
        mw->dump_deadline_ms = elastic__now_ms() + (uint64_t)budget_ms;
        uv_timer_start(&mw->dump_timer, on_backtrace_wait, 5, 5);
        return;
    }
    monitor__report(m, &mw->pending);
}

static void declare_hung(probe__monitor *m, monitored_worker *mw, int local_rank, bool started,
                         uint64_t silent_ns)
{
    mw->failed = true;
    mw->pending = make_failure(mw, local_rank, started ? "hang" : "startup");
    mw->pending.silent_ms =
        (silent_ns + 999999) / 1000000; /* silent past the limit: never rounded down onto it */
    if (started)
        snprintf(
            mw->pending.reason, sizeof mw->pending.reason,
            "hang: rank %d (local rank %d, pid %d) sent no heartbeat for %llu ms; last step %llu",
            mw->rank, local_rank, mw->pid, (unsigned long long)mw->pending.silent_ms,
            (unsigned long long)mw->last.step);
    else
        snprintf(mw->pending.reason, sizeof mw->pending.reason,
                 "startup: rank %d (local rank %d, pid %d) sent no first heartbeat in %llu ms",
                 mw->rank, local_rank, mw->pid, (unsigned long long)mw->pending.silent_ms);
    ELASTIC_LOG_W("probe", "%s; writing its stacks to its log", mw->pending.reason);
    mw->dumps_before = mw->last.stack_dumps;
    int rc = probe__stack_dump_start(m->opts.loop, mw->pid, mw->log_fd, mw->last.stack_signal,
                                     stack_budget_ms(m, started), on_stacks_done, mw, &mw->dump);
    if (rc != 0) monitor__report(m, &mw->pending);
}

static void probe_worker(probe__monitor *m, int local_rank, uint64_t now_ns)
{
    monitored_worker *mw = &m->workers[local_rank];
    if (!mw->running) return;
    channel__hb_snapshot previous = mw->last;
    channel__hb_read(m->region, mw->slot, &mw->last);
    if (mw->last.beats > 0 && previous.beats > 0 && now_ns > mw->rate_since_ns &&
        mw->last.step >= previous.step) {
        mw->steps_per_second =
            (double)(mw->last.step - previous.step) * 1e9 / (double)(now_ns - mw->rate_since_ns);
    }
    mw->rate_since_ns = now_ns;
    monitor__check_checkpoint(m, mw, local_rank);
    if (m->straggler != NULL) {
        bool compute = mw->last.compute_count > 0;
        probe__straggler_sample(m->straggler, (unsigned)local_rank,
                                compute ? mw->last.compute_sum_ns : mw->last.interval_sum_ns,
                                compute ? mw->last.compute_count : mw->last.interval_steps);
    }
    if (m->paused || mw->failed || mw->pid <= 0 || m->hang_timeout_ns == 0) return;
    uint64_t silent_ns = 0;
    bool started = false;
    if (probe__hang_check(&mw->hang, &mw->last, now_ns, m->hang_timeout_ns, m->startup_timeout_ns,
                          &silent_ns, &started))
        declare_hung(m, mw, local_rank, started, silent_ns);
}

static void evaluate_stragglers(probe__monitor *m)
{
    if (m->straggler == NULL) return;
    int slowest = probe__straggler_evaluate(m->straggler, m->opts.straggler_threshold,
                                            m->opts.straggler_rounds, m->scores);
    if (slowest < 0 || m->paused || m->straggler_reported) return;
    monitored_worker *mw = &m->workers[slowest];
    m->straggler_reported = true; /* once per generation */
    probe__failure f = make_failure(mw, slowest, "straggler");
    snprintf(f.reason, sizeof f.reason,
             "straggler: rank %d (local rank %d) scored %.2f for %u rounds (threshold %.2f)",
             mw->rank, slowest, m->scores[slowest], m->opts.straggler_rounds,
             m->opts.straggler_threshold);
    monitor__count(m, "straggler");
    ELASTIC_LOG_W("probe", "%s", f.reason);
    if (m->opts.on_straggler != NULL) m->opts.on_straggler(m->opts.user, &f);
}

/* This node's statistic for the job-wide scores, at a low fixed rate. */
static void publish_node_stat(probe__monitor *m, uint64_t now_ns)
{
    if (m->straggler == NULL || m->opts.on_node_stat == NULL ||
        m->opts.node_stat_interval_ms <= 0 || m->paused)
        return;
    if (now_ns - m->node_stat_last_ns < (uint64_t)m->opts.node_stat_interval_ms * 1000000ull)
        return;
    m->node_stat_last_ns = now_ns;
    probe__node_stat st = { .step_ns = (uint64_t)probe__straggler_node_step_ns(m->straggler) };
    bool any = false;
    for (unsigned i = 0; i < m->opts.local_world_size; i++) {
        const monitored_worker *mw = &m->workers[i];
        if (!mw->running) continue;
        uint64_t steps =
            mw->last.compute_count > 0 ? mw->last.compute_count : mw->last.interval_steps;
        if (!any || steps < st.steps)
            st.steps = steps; /* the least: warm-up counts from the last start */
        any = true;
    }
    if (!any) return;
    snprintf(st.node_id, sizeof st.node_id, "%s", m->node_id);
    m->opts.on_node_stat(m->opts.user, &st);
}

void monitor__check_checkpoint(probe__monitor *m, monitored_worker *mw, int local_rank)
{
    /* A worker restores once per start: the report is passed on once. */
    if (!mw->restore_seen && mw->last.restore_source != CHANNEL__RESTORE_NONE) {
        mw->restore_seen = true;
        if (m->opts.on_restored != NULL)
            m->opts.on_restored(m->opts.user, local_rank, mw->rank, mw->last.restore_source,
                                mw->last.restore_step, mw->last.restore_bytes, mw->last.restore_us);
    }
    if (mw->last.ckpt_saves == mw->ckpt_saves_seen) return;
    mw->ckpt_saves_seen = mw->last.ckpt_saves;
    if (m->opts.on_checkpoint != NULL)
        m->opts.on_checkpoint(m->opts.user, local_rank, mw->rank, mw->last.ckpt_step,
                              mw->last.ckpt_wall_ms);
    if (m->opts.on_checkpoint_tier != NULL)
        m->opts.on_checkpoint_tier(m->opts.user, local_rank, mw->rank, mw->last.ckpt_step,
                                   mw->last.ckpt_tier);
}

void monitor__tick(uv_timer_t *timer)
{
    probe__monitor *m = timer->data;
    uint64_t now = elastic__now_ns();
    for (unsigned i = 0; i < m->opts.local_world_size; i++) probe_worker(m, (int)i, now);
    monitor__check_steps(m);
    evaluate_stragglers(m);
    publish_node_stat(m, now);
    monitor__arm_hang_timer(m);
}

static bool hang_watched(const probe__monitor *m, const monitored_worker *mw)
{
    return !m->paused && !mw->failed && mw->running && mw->pid > 0 && m->hang_timeout_ns > 0;
}

/* The hang timer: checks every watched worker on a fresh snapshot (mw->last
 * stays the tick's, which the rate and straggler figures are based on). */
static void on_hang_timer(uv_timer_t *timer)
{
    probe__monitor *m = timer->data;
    uint64_t now = elastic__now_ns();
    for (unsigned i = 0; i < m->opts.local_world_size; i++) {
        monitored_worker *mw = &m->workers[i];
        if (!hang_watched(m, mw)) continue;
        channel__hb_snapshot fresh;
        channel__hb_read(m->region, mw->slot, &fresh);
        uint64_t silent_ns = 0;
        bool started = false;
        if (probe__hang_check(&mw->hang, &fresh, now, m->hang_timeout_ns, m->startup_timeout_ns,
                              &silent_ns, &started)) {
            mw->last = fresh;
            declare_hung(m, mw, (int)i, started, silent_ns);
        }
    }
    monitor__arm_hang_timer(m);
}

void monitor__arm_hang_timer(probe__monitor *m)
{
    uint64_t now = elastic__now_ns(), earliest = UINT64_MAX;
    for (unsigned i = 0; i < m->opts.local_world_size; i++) {
        monitored_worker *mw = &m->workers[i];
        if (!hang_watched(m, mw)) continue;
        channel__hb_snapshot fresh;
        channel__hb_read(m->region, mw->slot, &fresh);
        uint64_t deadline =
            probe__hang_deadline(&mw->hang, &fresh, m->hang_timeout_ns, m->startup_timeout_ns);
        if (deadline != 0 && deadline < earliest) earliest = deadline;
    }
    if (earliest == UINT64_MAX) {
        uv_timer_stop(&m->hang_timer);
        return;
    }
    /* 1 ms past the deadline: probe__hang_check wants silence longer than the limit. */
    uint64_t delay_ms = earliest > now ? (earliest - now) / 1000000u + 1 : 0;
    uv_timer_start(&m->hang_timer, on_hang_timer, delay_ms, 0);
}

void monitor__check_steps(probe__monitor *m)
{
    if (m->paused || m->steps_reported || m->opts.on_steps_started == NULL) return;
    unsigned running = 0, stepping = 0;
    for (unsigned i = 0; i < m->opts.local_world_size; i++) {
        const monitored_worker *mw = &m->workers[i];
        if (!mw->running) continue;
        running++;
        stepping += mw->last.beats > mw->baseline.beats;
    }
    if (running == 0 || stepping < running) return;
    probe__progress progress;
    probe__monitor_progress(m, &progress);
    m->steps_reported = true;
    m->opts.on_steps_started(m->opts.user, &progress);
}
