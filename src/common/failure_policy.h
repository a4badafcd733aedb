/*
 * What the job does about a classified failure (failure_policy.c): one pure
 * function over the job-wide history of failures (their class, signature,
 * generation, step, rank and node), so every node that runs it over the same
 * history reaches the same decision, and a reader of the event logs
 * (`elasticctl explain`) can replay it.
 *
 * The rules, in the order they are tried (the first that fires decides):
 *   consequence      a rank that failed because another failed first decides
 *                    nothing: the cause's decision stands
 *   torchrun         --torchrun-restarts: every failure spends one restart,
 *                    past --max-restarts the job fails (torchrun's counting)
 *   operator         a stop from a person or the scheduler ends the job
 *   most_ranks       user code: the same signature on most ranks at the same
 *                    step of one generation: deterministic, stop now
 *   repeat           user code: the same signature at the same step in an
 *                    earlier generation: deterministic, stop now
 *   node_quarantine  the failing node is in K failures within the window:
 *                    it is quarantined (and drained under Slurm); the
 *                    restart spends what its class spends
 *   hardware         hardware, silent corruption, a lost node or a straggler,
 *                    replaced by a spare or a new node: no restart spent,
 *                    counted against a bound of its own (hardware_bound past it)
 *   budget           everything else spends one restart (budget_exhausted
 *                    past --max-restarts), as torchrun does
 */
#ifndef ELASTIC_COMMON_FAILURE_POLICY_H
#define ELASTIC_COMMON_FAILURE_POLICY_H

#include "common/failure_class.h"

#include <stdbool.h>
#include <stdint.h>

/* A job's exit status when it stopped for a deterministic bug in the training
 * code (EX_SOFTWARE): not 1, so a requeue script can tell "don't retry". */
#define FAILURE_POLICY_EXIT_DETERMINISTIC 70

typedef struct failure_policy_config {
    int max_restarts;        /* --max-restarts: failures the budget pays for */
    int hardware_restarts;   /* the bound on free restarts (hardware, lost nodes) */
    int quarantine_failures; /* K: a node in this many failures within the window (0: off) */
    uint64_t quarantine_window_ms;
    bool torchrun_counting; /* every failure spends one, nothing else applies */
    int world_size;         /* ranks in the failing generation (most_ranks) */
    int nodes;              /* nodes in it: one node is never quarantined from its own job */
} failure_policy_config;

/* Defaults: hardware_restarts 100, quarantine 3 failures within an hour. */
void failure_policy__config_defaults(failure_policy_config *config, int max_restarts);

typedef struct failure_policy_entry {
    uint64_t generation;
    int64_t step; /* the failing rank's last step, -1 not known */
    int rank;     /* -1: a node's failure, no rank */
    char node[128];
    int cls; /* failure_class */
    bool consequence;
    bool replaced; /* a spare or a new node takes its place */
    uint64_t signature_hash;
    char signature[FAILURE_SIGNATURE_MAX];
    uint64_t time_ms;
} failure_policy_entry;

typedef enum failure_decision {
    FD_NONE,          /* a consequence: no decision of its own */
    FD_RESTART,       /* restart, one restart spent */
    FD_RESTART_FREE,  /* restart (replaced), no restart spent */
    FD_STOP_BUG,      /* stop now: a deterministic bug (exit FAILURE_POLICY_EXIT_DETERMINISTIC) */
    FD_STOP_BUDGET,   /* stop: the restart budget is spent */
    FD_STOP_HARDWARE, /* stop: the bound on free restarts is spent */
    FD_STOP_OPERATOR, /* stop: asked to */
    FD_DECISIONS
} failure_decision;

typedef enum failure_rule {
    FR_CONSEQUENCE,
    FR_TORCHRUN,
    FR_OPERATOR,
    FR_MOST_RANKS,
    FR_REPEAT,
    FR_NODE_QUARANTINE,
    FR_HARDWARE,
    FR_BUDGET,
    FR_RULES
} failure_rule;

/* The job's history: bounded; the oldest entries go first when full (the
 * counters keep counting). */
#define FAILURE_POLICY_MAX_ENTRIES 256

typedef struct failure_policy_history {
    failure_policy_entry entries[FAILURE_POLICY_MAX_ENTRIES];
    int count;         /* entries held */
    int budget_used;   /* restarts spent from --max-restarts */
    int hardware_used; /* free restarts taken */
} failure_policy_history;

typedef struct failure_policy_result {
    int decision;                   /* failure_decision */
    int rule;                       /* failure_rule */
    bool spends;                    /* one restart of --max-restarts */
    bool quarantine;                /* the failing node is quarantined */
    int budget_used, hardware_used; /* after this failure */
    uint64_t seen_generations[2];   /* repeat: the earlier generation and this one */
    int ranks_at_step;              /* most_ranks: ranks with the signature at the step */
    int node_failures;              /* the failing node's failures within the window */
    char why[320];                  /* one sentence: the rule, in words */
} failure_policy_result;

/* The decision for `latest` given the history before it (which does not hold
 * it). Pure: the same inputs give the same result on every node. */
void failure_policy__decide(const failure_policy_config *config, const failure_policy_history *h,
                            const failure_policy_entry *latest, failure_policy_result *out);

/* Appends `latest` with its result's counters (after decide). */
void failure_policy__record(failure_policy_history *h, const failure_policy_entry *latest,
                            const failure_policy_result *result);

const char *failure_policy__decision_name(int decision); /* "restart", "stop_bug", ... */
const char *failure_policy__rule_name(int rule);         /* "repeat", "most_ranks", ... */
int failure_policy__rule_of_name(const char *name);      /* -1 when unknown */
int failure_policy__decision_of_name(const char *name);  /* -1 when unknown */

#endif /* ELASTIC_COMMON_FAILURE_POLICY_H */
