/*
 * A failure this node saw first-hand, for the root-cause summary (summary.c).
 */
#ifndef ELASTIC_AGENT_FAILURE_H
#define ELASTIC_AGENT_FAILURE_H

#include "agent/stream.h"
#include "agent/agent.h"

#include <stdbool.h>

typedef struct agent_failure {
    bool valid;
    elastic_rdzv_cause cause;
    int local_rank;
    char detail[AGENT_TAIL_BYTES + 1]; /* its error file, else the tail of its stderr */
    bool detail_is_error_file;
} agent_failure;

#endif /* ELASTIC_AGENT_FAILURE_H */
