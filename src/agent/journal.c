/*
 * The JSONL event log: one object per line, written with one write() so
 * lines of concurrent agents appending to one file do not interleave.
 * Schema: docs/OPERATIONS.md. Every event type is named here, in one table
 * (test_agent_journal checks the docs list the same names).
 */
#include "agent/journal.h"

#include "common/clock.h"
#include "common/goodput.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *const event_names[AGENT_EVENT_TYPE_COUNT] = {
    [AGENT_EVENT_AGENT_STARTED] = "agent_started",
    [AGENT_EVENT_GENERATION_FORMED] = "generation_formed",
    [AGENT_EVENT_WORKER_STARTED] = "worker_started",
    [AGENT_EVENT_WORKER_EXITED] = "worker_exited",
    [AGENT_EVENT_FAILURE] = "failure",
    [AGENT_EVENT_GENERATION_ENDED] = "generation_ended",
    [AGENT_EVENT_FENCED] = "fenced",
    [AGENT_EVENT_GENERATION_STOPPED] = "generation_stopped",
    [AGENT_EVENT_RESTARTED] = "restarted",
    [AGENT_EVENT_CHECKPOINT] = "checkpoint",
    [AGENT_EVENT_WAITING] = "waiting",
    [AGENT_EVENT_JOB_END] = "job_end",
    [AGENT_EVENT_NCCL_COMM_BUILT] = "nccl_comm_built",
    [AGENT_EVENT_PROBE_FAILED] = "probe_failed",
    [AGENT_EVENT_STRAGGLER] = "straggler",
    [AGENT_EVENT_NODE_STRAGGLER] = "node_straggler",
    [AGENT_EVENT_STRAGGLER_EVICTED] = "straggler_evicted",
    [AGENT_EVENT_QUARANTINE_ENDED] = "quarantine_ended",
    [AGENT_EVENT_RECONFIGURED] = "reconfigured",
    [AGENT_EVENT_WORKER_RECONFIGURED] = "worker_reconfigured",
    [AGENT_EVENT_SLURM_DRAIN] = "slurm_drain",
    [AGENT_EVENT_STEPS_STARTED] = "steps_started",
    [AGENT_EVENT_STEPS_ENDED] = "steps_ended",
    [AGENT_EVENT_HEALTH_CHECK] = "health_check",
    [AGENT_EVENT_HEALTH_STEPPED_ASIDE] = "health_stepped_aside",
    [AGENT_EVENT_CHECKPOINT_SAVED] = "checkpoint_saved",
    [AGENT_EVENT_CHECKPOINT_RESTORED] = "checkpoint_restored",
    [AGENT_EVENT_RESTORE_PLANNED] = "restore_planned",
    [AGENT_EVENT_SPARE_STARTED] = "spare_started",
    [AGENT_EVENT_SPARE_PARKED] = "spare_parked",
    [AGENT_EVENT_SPARE_AWAITED] = "spare_awaited",
    [AGENT_EVENT_SPARE_PROMOTED] = "spare_promoted",
    [AGENT_EVENT_SPARE_EXITED] = "spare_exited",
    [AGENT_EVENT_SPARES_DISABLED] = "spares_disabled",
    [AGENT_EVENT_RECOVERY_PHASES] = "recovery_phases",
    [AGENT_EVENT_REPLICA_DIVERGENCE] = "replica_divergence",
    [AGENT_EVENT_FAILURE_CLASSIFIED] = "failure_classified",
};

const char *agent__event_name(agent_event_type type)
{
    return (unsigned)type < AGENT_EVENT_TYPE_COUNT ? event_names[type] : NULL;
}

#define AGENT_GOODPUT_MAX_RECORDS 65536 /* about 10,000 generations of records */

struct agent_events {
    int fd;                  /* -1: no file */
    goodput_record *records; /* the lines the goodput accounting reads, in order */
    size_t count, cap;
    bool records_full;
    char run_id[160];
    char node_id[160];
};

int agent__events_open(const char *path, const char *run_id, const char *node_id,
                       agent_events **out)
{
    agent_events *events = calloc(1, sizeof *events);
    if (events == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    events->fd = -1;
    snprintf(events->run_id, sizeof events->run_id, "%s", run_id != NULL ? run_id : "");
    snprintf(events->node_id, sizeof events->node_id, "%s", node_id != NULL ? node_id : "");
    if (path != NULL && *path != '\0') {
        events->fd = agent__file_private_path(path, O_WRONLY | O_CREAT | O_APPEND);
        if (events->fd < 0) {
            int rc = events->fd;
            char detail[300];
            snprintf(detail, sizeof detail, "%s", elastic_last_error());
            free(events);
            return elastic__fail(rc, "--event-log %s: %s", path, detail);
        }
    }
    *out = events;
    return 0;
}

void agent__events_close(agent_events *events)
{
    if (events == NULL) return;
    if (events->fd >= 0) close(events->fd);
    free(events->records);
    free(events);
}

#define FIELD_MAX 2047 /* escaped bytes of one string field: a bound of the log's format */

void agent__event_begin(agent_event *event, const agent_events *events, agent_event_type type)
{
    const char *name = agent__event_name(type);
    event->type = type;
    event->ts_ms = elastic__wall_ms();
    /* One byte held back for the line's '\n'. */
    elastic__jw_init(&event->jw, event->text, sizeof event->text - 1);
    elastic__jw_object_begin(&event->jw);
    agent__event_int(event, "ts_ms", (int64_t)event->ts_ms);
    agent__event_str(event, "event", name);
    agent__event_str(event, "run_id", events->run_id);
    agent__event_str(event, "node", events->node_id);
}

void agent__event_int(agent_event *event, const char *key, int64_t value)
{
    elastic__jw_key(&event->jw, key);
    elastic__jw_int(&event->jw, value);
}

void agent__event_str(agent_event *event, const char *key, const char *value)
{
    if (value == NULL) value = "";
    size_t len = strlen(value);
    size_t keep = elastic__json_escaped_prefix(value, len, FIELD_MAX);
    if (keep < len)
        ELASTIC_LOG_W("agent", "event log: %s's %s cut to its first %zu of %zu bytes",
                      agent__event_name(event->type), key, keep, len);
    elastic__jw_key(&event->jw, key);
    elastic__jw_string_n(&event->jw, value, keep);
}

/* The accounting's copy of the journal, kept with or without a log file:
 * bounded; past the bound the accounting stops there (and says so once). */
static void keep_record(agent_events *events, const goodput_record *r)
{
    if (events->records_full || r == NULL) return;
    if (events->count == events->cap) {
        size_t cap = events->cap ? events->cap * 2 : 64;
        goodput_record *grown =
            cap <= AGENT_GOODPUT_MAX_RECORDS ? realloc(events->records, cap * sizeof *grown) : NULL;
        if (grown == NULL) {
            events->records_full = true;
            ELASTIC_LOG_W("agent", "goodput: no room for more events; its accounting stops here");
            return;
        }
        events->records = grown;
        events->cap = cap;
    }
    events->records[events->count++] = *r;
}

int agent__events_goodput(const agent_events *events, uint64_t now_ms, goodput_report *out)
{
    return goodput__account(events->records, events->count, now_ms, out);
}

const goodput_record *agent__events_records(const agent_events *events, size_t *count)
{
    *count = events->count;
    return events->records;
}

void agent__event_emit_record(agent_events *events, agent_event *event,
                              const goodput_record *record)
{
    elastic__jw_object_end(&event->jw);
    if (event->jw.overflow)
        ELASTIC_LOG_W("agent",
                      "event log: a %s line over %zu bytes: fields that did not fit "
                      "were left out",
                      agent__event_name(event->type), sizeof event->text - 2);
    size_t len = event->jw.len;
    event->text[len++] = '\n';
    event->text[len] = '\0';
    ELASTIC_LOG_D("agent", "event %.*s", (int)len - 1, event->text);
    keep_record(events, record);
    if (events->fd < 0) return;
    ssize_t written;
    do written = write(events->fd, event->text, len);
    while (written < 0 && errno == EINTR);
    if (written != (ssize_t)len) ELASTIC_LOG_W("agent", "event log: short write");
}
