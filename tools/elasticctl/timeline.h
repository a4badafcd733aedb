/*
 * A job's history read back from elasticrun event logs (--event-log), for
 * `elasticctl timeline` (an SVG picture) and `elasticctl summary` (the same
 * as text). Several nodes' logs of one job merge into one time-ordered list.
 * Part of elasticctl only (tools/elasticctl/), not of the library.
 */
#ifndef ELASTICCTL_TIMELINE_H
#define ELASTICCTL_TIMELINE_H

#include "common/common.h"

#include <stdint.h>
#include <stdio.h>

#define TIMELINE_MAX_NODES  256
#define TIMELINE_MAX_LOCAL  64 /* worker lanes per node */
#define TIMELINE_MAX_EVENTS 500000
#define TIMELINE_MAX_LINE   8192 /* one event line, newline included */
#define TIMELINE_MAX_FILES  256

typedef enum timeline_kind {
    TL_AGENT_STARTED,
    TL_GENERATION_FORMED, /* value: world size, value2: nodes */
    TL_WORKER_STARTED,
    TL_WORKER_EXITED,      /* value: exit code, value2: signal */
    TL_FAILURE,            /* a local worker failed; value/value2 as above, text: reason */
    TL_HANG,               /* a hang or startup probe fired; text: reason */
    TL_PROBE,              /* another probe (straggler, user); text: reason */
    TL_GENERATION_ENDED,   /* ended by another node; value: cause, text: reason */
    TL_GENERATION_STOPPED, /* value: stop ms */
    TL_RESTARTED,          /* value: recovery ms */
    TL_CHECKPOINT,         /* value: step */
    TL_WAITING,            /* value: nodes joined, text: missing */
    TL_FENCED,             /* text: reason */
    TL_JOB_END,            /* value: exit code, text: status */
    TL_STEPS_STARTED, /* a node's workers stepped: value step, value2 its wall ms, value3 restore ms */
    TL_STEPS_ENDED, /* value last step, value2 its wall ms, value3 step us, value4 save stall ms */
    TL_RECOVERY_PHASES,    /* value: total ms, text: "stop 1, promote 4, ..." (ms) */
    TL_DIVERGENCE, /* replica_divergence: value committed (1: warn mode), text: the evidence's line */
    TL_KINDS
} timeline_kind;

typedef struct timeline_event {
    uint64_t ts_ms;       /* wall clock */
    int kind;             /* timeline_kind */
    int node;             /* index into timeline.nodes */
    int local_rank, rank; /* -1: the node itself */
    int64_t generation;   /* -1: unknown */
    int64_t value, value2, value3, value4;
    char text[200];
} timeline_event;

typedef struct timeline {
    char run_id[160];
    char nodes[TIMELINE_MAX_NODES][160];
    int node_count;
    int local_count[TIMELINE_MAX_NODES]; /* worker lanes of each node */
    timeline_event *events; /* sorted by time (stable: file order within a millisecond) */
    size_t count, cap;
    uint64_t t0_ms, t1_ms; /* first and last event */
    size_t skipped;        /* lines that were not events of this job (other run_id, unknown) */
} timeline;

/* Reads the event logs (each line bounded and validated). run_id NULL: the
 * logs must hold one job; else only its events are kept. */
int timeline__load(const char *const *paths, int count, const char *run_id, timeline *out);
void timeline__free(timeline *t);

/* The picture: one lane per node and per worker (local rank), generations
 * as spans, failures, hangs, restarts, fences as marks, checkpoints as ticks,
 * a time axis. */
int timeline__write_svg(const timeline *t, FILE *out);
/* The same as text: totals (time lost to failures by the goodput accounting,
 * src/common/goodput.h), the accounting's verdict, then every mark in time order. */
struct goodput_report;
int timeline__write_text(const timeline *t, const struct goodput_report *goodput, FILE *out);

/* Shared by both: "+12.345 s" offsets and a kind's word. */
const char *timeline__kind_name(int kind);

#endif /* ELASTICCTL_TIMELINE_H */
