/*
 * Names that end up in store keys and file paths, validated in one place:
 * the run id (elasticrun --rdzv-id, elastic_agent_opts.run_id,
 * elastic_rdzv_opts.run_id, and through them the bindings), and node ids
 * and node names, which must be plain host names.
 */
#ifndef ELASTIC_COMMON_NAMES_H
#define ELASTIC_COMMON_NAMES_H

#include "common/common.h"

/* 0, or ELASTIC_EINVAL naming the rule: 1..ELASTIC_RUN_ID_MAX characters of
 * [A-Za-z0-9._-], not "." or ".." (no '/', so it cannot reach into another
 * run's keys or directories). `what` names the caller in the message. */
int elastic__check_run_id(const char *run_id, const char *what);

/* Whether `name` could be a host name: 1..max characters of
 * [A-Za-z0-9._-] starting with a letter or digit. Node ids (the rendezvous'
 * members) and the Slurm node names handed to scontrol must be: nothing a
 * host list expands ("gpu[001-512]", "a,b") or an argument parser reads as
 * something else. */
bool elastic__host_name_ok(const char *name, size_t max);

#endif /* ELASTIC_COMMON_NAMES_H */
