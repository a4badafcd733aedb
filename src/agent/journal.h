/*
 * The agent's event journal (journal.c): every event type it writes.
 */
#ifndef ELASTIC_AGENT_JOURNAL_H
#define ELASTIC_AGENT_JOURNAL_H

#include "agent/agent.h"
#include "common/json_writer.h"

typedef struct agent_events agent_events;

/* Every event type the agent writes; their names are journal.c's table
 * (docs/OPERATIONS.md lists each with its fields). */
typedef enum agent_event_type {
    AGENT_EVENT_AGENT_STARTED,
    AGENT_EVENT_GENERATION_FORMED,
    AGENT_EVENT_WORKER_STARTED,
    AGENT_EVENT_WORKER_EXITED,
    AGENT_EVENT_FAILURE,
    AGENT_EVENT_GENERATION_ENDED,
    AGENT_EVENT_FENCED,
    AGENT_EVENT_GENERATION_STOPPED,
    AGENT_EVENT_RESTARTED,
    AGENT_EVENT_CHECKPOINT,
    AGENT_EVENT_WAITING,
    AGENT_EVENT_JOB_END,
    AGENT_EVENT_NCCL_COMM_BUILT,
    AGENT_EVENT_PROBE_FAILED,
    AGENT_EVENT_STRAGGLER,
    AGENT_EVENT_NODE_STRAGGLER,
    AGENT_EVENT_STRAGGLER_EVICTED,
    AGENT_EVENT_QUARANTINE_ENDED,
    AGENT_EVENT_RECONFIGURED,
    AGENT_EVENT_WORKER_RECONFIGURED,
    AGENT_EVENT_SLURM_DRAIN,
    AGENT_EVENT_STEPS_STARTED,
    AGENT_EVENT_STEPS_ENDED,
    AGENT_EVENT_HEALTH_CHECK,
    AGENT_EVENT_HEALTH_STEPPED_ASIDE,
    AGENT_EVENT_CHECKPOINT_SAVED,
    AGENT_EVENT_CHECKPOINT_RESTORED,
    AGENT_EVENT_RESTORE_PLANNED,
    AGENT_EVENT_SPARE_STARTED,
    AGENT_EVENT_SPARE_PARKED,
    AGENT_EVENT_SPARE_PROMOTED,
    AGENT_EVENT_SPARE_EXITED,
    AGENT_EVENT_SPARES_DISABLED,
    AGENT_EVENT_SPARE_AWAITED,
    AGENT_EVENT_RECOVERY_PHASES,
    AGENT_EVENT_REPLICA_DIVERGENCE,
    AGENT_EVENT_FAILURE_CLASSIFIED,
    AGENT_EVENT_TYPE_COUNT
} agent_event_type;

/* The event's name in the log ("job_end"); NULL for no such type. */
const char *agent__event_name(agent_event_type type);

/* One line being written (journal_events.c's constructors only). */
typedef struct agent_event {
    char text[4096];
    elastic__jw jw; /* writes text; a field that does not fit is left out whole, and logged */
    agent_event_type type;
    uint64_t ts_ms; /* the line's time (wall clock) */
} agent_event;

/* path NULL: events are only logged at debug level. */
int agent__events_open(const char *path, const char *run_id, const char *node_id,
                       agent_events **events);
void agent__events_close(agent_events *events);
/* The line writer under the typed constructors (journal_events.h): only
 * journal_events.c calls these (test_agent_journal checks it). */
void agent__event_begin(agent_event *event, const agent_events *events, agent_event_type type);
void agent__event_int(agent_event *event, const char *key, int64_t value);
void agent__event_str(agent_event *event, const char *key, const char *value);
/* Writes the line; record (NULL: none) is what the goodput accounting keeps of it. */
struct goodput_record;
void agent__event_emit_record(agent_events *events, agent_event *event,
                              const struct goodput_record *record);
/* The goodput accounting (src/common/goodput.h) of every event journaled so
 * far, this node's view, up to now_ms: the closing line's and /metrics' figures. */
struct goodput_report;
int agent__events_goodput(const agent_events *events, uint64_t now_ms, struct goodput_report *out);
/* The records kept so far (tests compare them with the lines read back). */
const struct goodput_record *agent__events_records(const agent_events *events, size_t *count);

#endif /* ELASTIC_AGENT_JOURNAL_H */
