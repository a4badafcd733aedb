/*
 * The worker's view of its environment: what the agent (or torchrun) set,
 * parsed and validated in one place. The same parser reads a reconfigure
 * message, whose payload carries the same names.
 */
#ifndef ELASTIC_WORKER_ENV_H
#define ELASTIC_WORKER_ENV_H

#include "common/common.h"

#include <stdbool.h>

#define WORKER__MAX_WORLD_SIZE (1 << 20)
#define WORKER__MAX_PATH       1024
#define WORKER__MAX_PREFIX     512

/* Returns the value of a variable or NULL (getenv, or a parsed message). */
typedef const char *(*worker__lookup_fn)(void *ctx, const char *name);

typedef enum worker__mode {
    WORKER__ALONE = 0,    /* no launcher: a group of one */
    WORKER__TORCHRUN = 1, /* ranks from the environment, no agent channel */
    WORKER__AGENT = 2     /* under elasticrun: store, heartbeats, control */
} worker__mode;

typedef struct worker__env {
    worker__mode mode;
    elastic_worker_info info;
    char store_endpoint[300];
    char store_prefix[WORKER__MAX_PREFIX];
    char heartbeat_shm[WORKER__MAX_PATH];
    int heartbeat_slot;     /* -1 when there is no heartbeat file */
    char agent_socket[108]; /* sizeof(sun_path); "" when none */
} worker__env;

/* Fills *env from the variables lookup returns. ELASTIC_EINVAL (with the
 * variable named in the detail) when a value is malformed, out of range or
 * inconsistent with the others. */
int worker__env_parse(worker__lookup_fn lookup, void *ctx, worker__env *env);

/* getenv as a worker__lookup_fn. */
const char *worker__getenv(void *ctx, const char *name);

#endif /* ELASTIC_WORKER_ENV_H */
