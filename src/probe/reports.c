/*
 * What workers' libraries report on their own over the control socket: a
 * fault (the nccl watchdog found a hung or failed collective) becomes a probe
 * failure like a hang, naming the rank, communicator, collective and time
 * waited; an event (a communicator rebuilt) goes to the metrics and the log.
 */
#include "probe/monitor.h"

#include "common/parse_int.h"

#include <stdio.h>
#include <stdlib.h>

/* The probe names a worker may report; anything else is refused. */
static const char *known_probe(const char *name)
{
    static const char *const names[] = { "nccl_timeout", "nccl_error" };
    for (size_t i = 0; name != NULL && i < ELASTIC__ARRAY_LEN(names); i++)
        if (strcmp(name, names[i]) == 0) return names[i];
    return NULL;
}

static uint64_t number(const channel__kv *kv, const char *key)
{
    uint64_t value;
    if (elastic__parse_u64(NULL, channel__kv_get(kv, key), 0, INT64_MAX, &value) != 0) return 0;
    return value;
}

static void on_fault(probe__monitor *m, monitored_worker *mw, int slot, const channel__kv *kv)
{
    const char *probe = known_probe(channel__kv_get(kv, "PROBE"));
    const char *reason = channel__kv_get(kv, "REASON");
    if (probe == NULL || reason == NULL) {
        ELASTIC_LOG_W("probe",
                      "local rank %d reported a fault without a known PROBE and a REASON: ignored",
                      slot);
        return;
    }
    if (number(kv, "GENERATION") != m->generation.generation)
        return;                                          /* about a generation already over */
    if (m->paused || !mw->running || mw->failed) return; /* the group is already going down */
    mw->failed = true;
    probe__failure f = { .probe = probe,
                         .local_rank = slot,
                         .rank = mw->rank,
                         .last_step = mw->last.step,
                         .silent_ms = number(kv, "WAITED_MS") };
    snprintf(f.reason, sizeof f.reason, "%.200s (pid %d)", reason, mw->pid);
    monitor__report(m, &f);
}

static void on_event(probe__monitor *m, monitored_worker *mw, int slot, const channel__kv *kv)
{
    const char *name = channel__kv_get(kv, "NAME");
    if (name == NULL) return;
    if (strcmp(name, "nccl_comm_built") == 0) {
        const char *method = channel__kv_get(kv, "METHOD");
        int which = method != NULL && strcmp(method, "shrunk") == 0 ? 1 : 0;
        double seconds = (double)number(kv, "MS") / 1000.0;
        m->nccl_builds[which]++;
        m->nccl_build_sum[which] += seconds;
        m->nccl_build_last[which] = seconds;
    }
    if (m->opts.on_worker_event != NULL) m->opts.on_worker_event(m->opts.user, slot, mw->rank, kv);
}

void monitor__on_report(void *user, int slot, int type, const channel__kv *kv)
{
    probe__monitor *m = user;
    if (slot < 0 || (unsigned)slot >= m->opts.local_world_size) return;
    monitored_worker *mw = &m->workers[slot];
    if (type == CHANNEL__MSG_FAULT)
        on_fault(m, mw, slot, kv);
    else if (type == CHANNEL__MSG_EVENT)
        on_event(m, mw, slot, kv);
}
