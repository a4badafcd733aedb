/*
 * Names that end up in store keys and file paths, validated in one place:
 * the run id (elasticrun --rdzv-id, elastic_agent_opts.run_id,
 * elastic_rdzv_opts.run_id, and through them the bindings).
 */
#ifndef ELASTIC_COMMON_NAMES_H
#define ELASTIC_COMMON_NAMES_H

#include "common/common.h"

/* 0, or ELASTIC_EINVAL naming the rule: 1..ELASTIC_RUN_ID_MAX characters of
 * [A-Za-z0-9._-], not "." or ".." (no '/', so it cannot reach into another
 * run's keys or directories). `what` names the caller in the message. */
int elastic__check_run_id(const char *run_id, const char *what);

#endif /* ELASTIC_COMMON_NAMES_H */
