/*
 * Saying why a failure was handled as it was (failure_report.c): the
 * failure_classified event's fields, the console's one line, and the
 * /metrics counters per class and per decision. Pure over the verdict
 * (src/common/failure_class.h) and the policy's result
 * (src/common/failure_policy.h), so each is tested on its own.
 */
#ifndef ELASTIC_AGENT_FAILURE_REPORT_H
#define ELASTIC_AGENT_FAILURE_REPORT_H

#include "agent/journal_events.h"
#include "common/failure_class.h"
#include "common/failure_policy.h"
#include "common/text.h"

#include <stdint.h>

typedef struct agent_failure_facts {
    uint64_t generation;
    int rank, local_rank; /* -1: a node's failure */
    int64_t step;         /* -1: not known */
    int exit_code, signal;
    int cause_rank; /* a consequence: the rank that failed first, -1 not known */
    int max_restarts;
} agent_failure_facts;

/* The failure_classified event's fields; its strings point into v, r and
 * hash (17 bytes: the signature's hash in hex), valid while they are. */
void agent__failure_event_of(const agent_failure_facts *facts, const failure_verdict *v,
                             const failure_policy_result *r, char hash[17],
                             agent_ev_failure_classified *out);

/* The console's line (without "elasticrun: "): what it was and what is done,
 * e.g. "rank 1 failed: user code (ValueError at trainer.py:42 in check_batch:
 * bad batch at step <n>), step 36: restart 1 of 10", or the deterministic stop's
 * "stopping the job: a deterministic bug ..., in generations 1 and 2 ...". */
void agent__failure_console_line(const agent_failure_facts *facts, const failure_verdict *v,
                                 const failure_policy_result *r, char *out, size_t size);

typedef struct agent_failure_counts {
    uint64_t by_class[FC_CLASSES];
    uint64_t by_decision[FD_DECISIONS];
    uint64_t consequences;
} agent_failure_counts;

void agent__failure_count(agent_failure_counts *c, const failure_verdict *v,
                          const failure_policy_result *r);
/* elastic_failures_total{class=...}, elastic_failure_decisions_total{decision=...},
 * elastic_failure_consequences_total (counters: every class and decision listed). */
void agent__failure_counts_render(const agent_failure_counts *c, elastic__text *out);

#endif /* ELASTIC_AGENT_FAILURE_REPORT_H */
