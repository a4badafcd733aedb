/*
 * The monitor's insides, shared by monitor.c (the probes), monitor_api.c
 * (start, stop, worker and generation events) and monitor_metrics.c (the
 * metrics page and /healthz).
 */
#ifndef ELASTIC_PROBE_MONITOR_H
#define ELASTIC_PROBE_MONITOR_H

#include "probe/probe.h"

#include <limits.h>

typedef struct monitored_worker {
    probe__monitor *monitor;
    unsigned slot;
    bool running; /* a process is in the slot */
    bool failed;  /* reported (or being reported) this generation */
    int rank, pid, log_fd;
    probe__hang_state hang;
    channel__hb_snapshot last;
    uint64_t rate_since_ns;
    double steps_per_second;  /* < 0: not measured yet (no two beats) */
    int shown_pid;            /* the last process in the slot, kept after it exited (status) */
    uint64_t ckpt_saves_seen; /* the slot's ckpt_saves already passed to on_checkpoint */
    bool restore_seen;        /* the slot's restore report already passed to on_restored */
    uint64_t started_ns, exited_ns; /* its start and end (monotonic; exited 0: running) */
    probe__stack_dump *dump;
    uv_timer_t dump_timer; /* waits for the worker's own backtrace */
    bool waiting_for_dump;
    uint64_t dumps_before, dump_deadline_ms;
    probe__failure pending;        /* reported once its stacks are out */
    channel__hb_snapshot baseline; /* the slot as this generation began (zero: a fresh process) */
} monitored_worker;

#define MONITOR_PROBES 7 /* hang, startup, straggler, user, exit, nccl_timeout, nccl_error */

struct probe__monitor {
    probe__monitor_opts opts;
    char heartbeat_path[PATH_MAX];
    char socket_path[108];
    char run_id[128], node_id[128];
    channel__hb_region *region;
    probe__control *control;
    probe__metrics_server *metrics;
    probe__user_probe *user_probe;
    probe__straggler *straggler;
    uv_timer_t timer;
    uv_timer_t hang_timer; /* fires at the earliest hang deadline (monitor.c) */
    int open_handles;
    monitored_worker *workers;
    double *scores;
    uint64_t hang_timeout_ns, startup_timeout_ns;

    probe__generation_info generation;
    bool paused, healthy, straggler_reported, user_probe_reported, user_probe_healthy;
    bool steps_reported; /* on_steps_started called for this generation */
    char unhealthy_reason[256];
    uint64_t failures[MONITOR_PROBES];
    uint64_t recoveries[2]; /* [0] full restart, [1] in-process */
    double recovery_sum[2], recovery_last[2];
    uint64_t nccl_builds[2]; /* [0] created, [1] shrunk (the workers' nccl_comm_built events) */
    double nccl_build_sum[2], nccl_build_last[2];
    uint64_t node_stat_last_ns; /* the last on_node_stat */
    unsigned node_count;        /* job-wide scores shown on /metrics */
    uint64_t node_score_rounds; /* exchanges scored so far (a counter on /metrics) */
    probe__node_stat *node_stats;
    double *node_scores;
    char *extra_metrics; /* probe__monitor_set_extra_metrics; NULL: none */
};

int monitor__check_opts(const probe__monitor_opts *opts);
/* The probe timer: reads every slot, runs the hang and straggler probes. */
void monitor__tick(uv_timer_t *timer);
/* Arms the hang timer for the earliest deadline of any worker, so a hang is
 * declared when its timeout runs out, not at the next tick. */
void monitor__arm_hang_timer(probe__monitor *m);
/* Tells the agent, once a generation, that every running worker has stepped. */
void monitor__check_steps(probe__monitor *m);
/* Tells the agent about a checkpoint the worker saved since the last look. */
void monitor__check_checkpoint(probe__monitor *m, monitored_worker *mw, int local_rank);
/* Marks the group unhealthy and tells the agent. */
void monitor__report(probe__monitor *m, const probe__failure *failure);
void monitor__count(probe__monitor *m, const char *probe);
/* A worker's FAULT or EVENT from the control socket (reports.c). */
void monitor__on_report(void *user, int slot, int type, const channel__kv *kv);
void monitor__render(void *user, elastic__text *out);
bool monitor__health(void *user, char *reason, size_t size);

#endif /* ELASTIC_PROBE_MONITOR_H */
