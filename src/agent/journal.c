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
    [AGENT_EVENT_SPARE_PROMOTED] = "spare_promoted",
    [AGENT_EVENT_SPARE_EXITED] = "spare_exited",
    [AGENT_EVENT_SPARES_DISABLED] = "spares_disabled",
    [AGENT_EVENT_RECOVERY_PHASES] = "recovery_phases",
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
    agent__json_escape(run_id, events->run_id, sizeof events->run_id);
    agent__json_escape(node_id, events->node_id, sizeof events->node_id);
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

void agent__json_escape(const char *text, char *out, size_t size)
{
    size_t at = 0;
    if (size == 0) return;
    for (; text != NULL && *text != '\0'; text++) {
        unsigned char c = (unsigned char)*text;
        char escaped[8];
        if (c == '"' || c == '\\')
            snprintf(escaped, sizeof escaped, "\\%c", c);
        else if (c == '\n')
            snprintf(escaped, sizeof escaped, "\\n");
        else if (c == '\t')
            snprintf(escaped, sizeof escaped, "\\t");
        else if (c < 0x20 || c == 0x7f)
            snprintf(escaped, sizeof escaped, "\\u%04x", c);
        else
            escaped[0] = (char)c, escaped[1] = '\0';
        size_t len = strlen(escaped);
        if (at + len + 1 > size) break;
        memcpy(out + at, escaped, len);
        at += len;
    }
    out[at] = '\0';
}

static void append(agent_event *event, const char *fmt, ...) ELASTIC__PRINTF(2, 3);
static void append(agent_event *event, const char *fmt, ...)
{
    if (event->overflow) return;
    va_list args;
    va_start(args, fmt);
    int written = vsnprintf(event->text + event->len, sizeof event->text - event->len, fmt, args);
    va_end(args);
    if (written < 0 || (size_t)written >= sizeof event->text - event->len - 2) {
        event->overflow = true; /* the line is cut at the last whole field */
        event->text[event->len] = '\0';
        return;
    }
    event->len += (size_t)written;
}

void agent__event_begin(agent_event *event, const agent_events *events, agent_event_type type)
{
    const char *name = agent__event_name(type);
    event->len = 0;
    event->overflow = false;
    append(event, "{\"ts_ms\":%llu,\"event\":\"%s\",\"run_id\":\"%s\",\"node\":\"%s\"",
           (unsigned long long)elastic__wall_ms(), name, events->run_id, events->node_id);
}

void agent__event_int(agent_event *event, const char *key, int64_t value)
{
    append(event, ",\"%s\":%lld", key, (long long)value);
}

void agent__event_str(agent_event *event, const char *key, const char *value)
{
    char escaped[2048];
    agent__json_escape(value, escaped, sizeof escaped);
    append(event, ",\"%s\":\"%s\"", key, escaped);
}

/* The accounting's copy of the journal, kept with or without a log file:
 * bounded; past the bound the accounting stops there (and says so once). */
static void keep_record(agent_events *events, const agent_event *event)
{
    goodput_record r;
    if (events->records_full || !goodput__record_of_line(event->text, event->len - 1, &r)) return;
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
    events->records[events->count++] = r;
}

int agent__events_goodput(const agent_events *events, uint64_t now_ms, goodput_report *out)
{
    return goodput__account(events->records, events->count, now_ms, out);
}

void agent__event_emit(agent_events *events, agent_event *event)
{
    event->text[event->len++] = '}';
    event->text[event->len++] = '\n';
    event->text[event->len] = '\0';
    ELASTIC_LOG_D("agent", "event %.*s", (int)event->len - 1, event->text);
    keep_record(events, event);
    if (events->fd < 0) return;
    ssize_t written;
    do written = write(events->fd, event->text, event->len);
    while (written < 0 && errno == EINTR);
    if (written != (ssize_t)event->len) ELASTIC_LOG_W("agent", "event log: short write");
}
