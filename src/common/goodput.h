/*
 * Goodput accounting: where a job's wall-clock time went. One pure function
 * over the job's events (every node's, merged by time) assigns each
 * millisecond of the job to exactly one of: productive training, or a lost-time
 * bucket (detection, stopping, rendezvous, restart, restore, redone work,
 * checkpoint stalls, idle), each lost millisecond charged to the disruption
 * (failure, hang, lost node, ...) that caused it. ETTR = productive / wall.
 *
 * Shared by elasticctl (`goodput`, `summary`, over event logs) and the agent
 * (its closing console line and /metrics, over its own records), so both say
 * the same thing. No I/O, no clock: the caller gives the records and "now".
 */
#ifndef ELASTIC_COMMON_GOODPUT_H
#define ELASTIC_COMMON_GOODPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum goodput_kind {
    GP_START,         /* an agent started: the job's wall clock starts at the first */
    GP_FORMED,        /* a node joined generation `generation` */
    GP_STEPS_STARTED, /* a node's workers all stepped: a = step restored (first step seen),
                         b = wall ms of that first step, c = checkpoint restore ms */
    GP_STEPS_ENDED,   /* a node's workers of the generation stopped: a = last step seen,
                         b = wall ms it was reached, c = mean step time in us (0: unknown),
                         d = checkpoint stall ms on the training path in this generation */
    GP_DISRUPTION,    /* the generation ends: `cause`; the earliest one of a generation counts */
    GP_STOPPED,       /* a node's workers of the generation have all exited */
    GP_CHECKPOINT,    /* a = a step saved (restore point when no steps_started says one) */
    GP_END,           /* the job ended */
    GP_KINDS
} goodput_kind;

typedef enum goodput_cause {
    GP_CAUSE_START,      /* the job's first start (not a failure) */
    GP_CAUSE_FAILURE,    /* a worker exited with an error or a signal */
    GP_CAUSE_HANG,       /* no progress (hang or startup probe, NCCL watchdog) */
    GP_CAUSE_NODE_LOST,  /* a node's lease ended */
    GP_CAUSE_FENCED,     /* a node lost the store and fenced itself out */
    GP_CAUSE_PROBE,      /* another probe's verdict (straggler, user probe) */
    GP_CAUSE_MEMBERSHIP, /* nodes joined or left: a re-form nothing failed for */
    /* hardware, silent corruption: the replicas of a checkpoint step differed
     * (replica_divergence, not committed): the job went back to the newest
     * step on which they agreed and the faulty node was replaced */
    GP_CAUSE_SILENT_CORRUPTION,
    GP_CAUSES
} goodput_cause;

typedef enum goodput_bucket {
    GP_DETECTION,  /* last progress -> the disruption noticed */
    GP_STOPPING,   /* noticed -> every worker of the generation exited */
    GP_RENDEZVOUS, /* stopped -> the next generation formed on every node (waiting included) */
    GP_RESTART,    /* formed -> first step, less the restore */
    GP_RESTORE,    /* checkpoint load */
    GP_REDONE,     /* steps after the restored step, done before and lost, at the step time */
    GP_CKPT_STALL, /* checkpoint saves on the training path */
    GP_IDLE,       /* after the last step until the job's end, and time nothing else claims */
    GP_BUCKETS
} goodput_bucket;

typedef struct goodput_record {
    uint64_t ts_ms;
    int kind;  /* goodput_kind */
    int cause; /* goodput_cause, GP_DISRUPTION only */
    int64_t generation;
    int64_t a, b, c, d; /* by kind, above; -1 or 0 where unknown */
} goodput_record;

#define GOODPUT_MAX_LINES 4096

/* One disruption (or the job's start) and what it cost. */
typedef struct goodput_line {
    int cause;
    int64_t generation; /* the generation it ended (the start: the first generation) */
    uint64_t at_ms;     /* when it was noticed (the start: the first event) */
    int64_t last_step, restored_step; /* -1: unknown */
    double ms[GP_BUCKETS];
    double lost_ms; /* the sum of ms[] */
} goodput_line;

typedef struct goodput_report {
    uint64_t start_ms, end_ms;
    double wall_ms, productive_ms;
    double lost_ms[GP_BUCKETS]; /* totals per bucket, idle included */
    double cause_ms[GP_CAUSES]; /* lost per cause (idle is no cause's) */
    int cause_count[GP_CAUSES]; /* disruptions per cause (the start counts once) */
    double failures_ms;         /* lost to disruptions: every line but the start's */
    double step_ms;             /* measured step time (median over generations), 0 unknown */
    double steps_run;           /* steps trained, redone ones included (every generation's) */
    double mean_step_ms;        /* training time (productive + redone) per step run, 0 unknown */
    bool steps_known;           /* the records had step events: redone work is counted */
    double ettr;                /* productive / wall, 0..1 */
    goodput_line lines[GOODPUT_MAX_LINES];
    size_t line_count;
    size_t lines_dropped; /* disruptions past GOODPUT_MAX_LINES (their time still counted) */
} goodput_report;

/* Accounts records sorted by ts_ms (stable). end_ms: the job's end when no
 * GP_END record says it (0: the last record's time). Returns 0, or
 * ELASTIC_EINVAL for no records. out is large (tens of KiB): allocate it. */
int goodput__account(const goodput_record *records, size_t count, uint64_t end_ms,
                     goodput_report *out);

/* The bucket that lost the most time over the whole job (idle and checkpoint
 * stalls included: what ETTR is short of), -1 when nothing was lost. Said
 * beside ETTR so a reader sees what the ratio is made of. */
int goodput__largest_bucket(const goodput_report *r);

/* The report on a Prometheus page (/metrics): elastic_goodput_ratio and
 * elastic_goodput_{wall,productive,lost,cause_lost}_seconds_total. floor (may
 * be NULL): the values last rendered, raised to the new ones, so counters
 * never go back when a later accounting moves time into redone work. */
typedef struct goodput_floor {
    double wall_s, productive_s, lost_s[GP_BUCKETS], cause_s[GP_CAUSES];
} goodput_floor;
struct elastic__text;
void goodput__render_metrics(const goodput_report *r, goodput_floor *floor,
                             struct elastic__text *out);

/* One JSONL event line (docs/OPERATIONS.md) as a record: true when it is one
 * the accounting reads (the agent's own journal, fed back). */
bool goodput__record_of_line(const char *line, size_t len, goodput_record *out);

/* generation_ended's cause code (docs/OPERATIONS.md) as the accounting's
 * cause; -1 for 5 (the job ended: not a disruption). The agent's journal
 * and elasticctl's timeline read the code through this one table. */
int goodput__cause_of_end(int64_t code);

const char *goodput__bucket_name(int bucket);
const char *goodput__cause_name(int cause);

#endif /* ELASTIC_COMMON_GOODPUT_H */
