/*
 * `elasticctl explain EVENTS.jsonl...`: per failure of a job, what happened,
 * its class (src/common/failure_class.h), which rule of the policy fired
 * (src/common/failure_policy.h), what was decided, and what a person should
 * look at. Where the agent logged its own verdict (`failure_classified`) that
 * is what is said; an older log's failures (`failure`, `probe_failed`, ...)
 * are classified from what the log holds and the policy replayed over them,
 * and the report says so.
 */
#ifndef ELASTICCTL_EXPLAIN_H
#define ELASTICCTL_EXPLAIN_H

#include "common/failure_class.h"
#include "common/failure_policy.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EXPLAIN_MAX_FAILURES 4096

typedef struct explain_failure {
    uint64_t ts_ms;
    uint64_t generation;
    int rank, local_rank; /* -1: a node's */
    char node[160];
    int64_t step; /* -1: not known */
    int exit_code, signal;
    bool from_agent; /* the agent's own failure_classified (else replayed here) */
    failure_verdict verdict;
    failure_policy_result result;
    int cause_rank;   /* a consequence: the rank that failed first (-1: not known) */
    char reason[256]; /* what the log said */
} explain_failure;

typedef struct explain_report {
    char run_id[160];
    int max_restarts; /* -1: not in the logs */
    bool torchrun_counting;
    explain_failure failures[EXPLAIN_MAX_FAILURES];
    int count;
    int dropped; /* failures past EXPLAIN_MAX_FAILURES */
    bool ended;
    int exit_code; /* the job's (job_end) */
    char status[32];
    char why[400]; /* the failed end's own words (job_end's why: a bound, a bug), "" if none */
    uint64_t t0_ms;
} explain_report;

/* Reads the logs (bounded like the timeline's) into out (large: allocate it). */
int explain__load(const char *const *paths, int count, const char *run_id, explain_report *out);
int explain__write_text(const explain_report *r, FILE *out);
/* What a person should look at, for a class (one sentence). */
const char *explain__advice(int cls);
/* The class of generation g's causing failure, -1 when none was logged. */
int explain__class_of_generation(const explain_report *r, uint64_t generation);

#endif /* ELASTICCTL_EXPLAIN_H */
