/*
 * Warm spares, the worker's side (elastic_worker_park): a process the agent
 * started as a spare (ELASTIC_SPARE names its control slot) says HELLO on
 * the agent's socket in that slot and blocks until the agent sends PROMOTE
 * with a rank's environment, or STOP. The environment is validated with the
 * same parser elastic_worker_init uses, then written into the process
 * environment, so the init that follows attaches as that rank exactly like a
 * freshly started worker. The parking connection is closed before returning:
 * init opens its own in the rank's slot.
 */
#include "common/clock.h"
#include "common/parse_int.h"
#include "worker/worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define PARK_MAX_TIMEOUT_MS (7 * 24 * 3600 * 1000)

/* The names a PROMOTE may set: what channel__worker_env_format writes, and
 * GROUP_WORLD_SIZE. Anything else is refused, so the payload cannot change
 * variables the trainer's runtime reads for other purposes. */
static const char *const promoted_names[] = {
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_RUN_ID",
    "MASTER_ADDR",
    "MASTER_PORT",
    CHANNEL__ENV_RUN_ID,
    CHANNEL__ENV_STORE_ENDPOINT,
    CHANNEL__ENV_STORE_PREFIX,
    CHANNEL__ENV_GENERATION,
    CHANNEL__ENV_INCARNATION,
    CHANNEL__ENV_HEARTBEAT_SHM,
    CHANNEL__ENV_HEARTBEAT_SLOT,
    CHANNEL__ENV_AGENT_SOCKET,
    CHANNEL__ENV_RESTORE_STEP,
    CHANNEL__ENV_RESTORE_SOURCE,
    CHANNEL__ENV_RESTORE_NODE,
};

static bool promoted_name(const char *name)
{
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(promoted_names); i++)
        if (strcmp(promoted_names[i], name) == 0) return true;
    return false;
}

ELASTIC_EXTERN int elastic_worker_park_opts_init(elastic_worker_park_opts *opts, size_t struct_size)
{
    elastic_worker_park_opts defaults = { .struct_size = sizeof defaults, .timeout_ms = -1 };
    return ELASTIC__STRUCT_INIT(opts, struct_size, &defaults, "elastic_worker_park_opts");
}

static const char *kv_lookup(void *ctx, const char *name)
{
    return channel__kv_get(ctx, name);
}

/* Checks a PROMOTE payload (kv parsed from a copy) and applies it. */
static int apply_promotion(const char *payload, size_t length)
{
    static _Thread_local char copy[CHANNEL__MSG_MAX_PAYLOAD + 1];
    memcpy(copy, payload, length + 1);
    channel__kv kv;
    int rc = channel__kv_parse(copy, length, &kv);
    if (rc != 0) return rc;
    for (size_t i = 0; i < kv.count; i++)
        if (!promoted_name(kv.keys[i]))
            return elastic__fail(ELASTIC_EPROTO, "warm spare: promotion sets %s, which it may not",
                                 kv.keys[i]);
    worker__env env;
    rc = worker__env_parse(kv_lookup, &kv, &env);
    if (rc == 0 && env.mode != WORKER__AGENT)
        rc = elastic__fail(ELASTIC_EPROTO, "warm spare: the promotion names no job store");
    if (rc != 0) return rc;
    if ((rc = worker__restore_plan_apply(kv_lookup, &kv)) != 0) return rc;
    for (size_t i = 0; i < kv.count; i++)
        if (setenv(kv.keys[i], kv.values[i], 1) != 0)
            return elastic__fail(ELASTIC_ESYS, "setenv %s: %s", kv.keys[i], strerror(errno));
    unsetenv(CHANNEL__ENV_SPARE);
    return 0;
}

ELASTIC_EXTERN int elastic_worker_park(const elastic_worker_park_opts *opts, int *promoted,
                                       char **environment)
{
    elastic__clear_error();
    if (promoted != NULL) *promoted = 0;
    if (environment != NULL) *environment = NULL;
    elastic_worker_park_opts o = { .struct_size = sizeof o, .timeout_ms = -1 };
    int rc = ELASTIC__STRUCT_READ(&o, opts, "elastic_worker_park_opts");
    if (rc != 0) return rc;
    if (o.timeout_ms < -1 || o.timeout_ms > PARK_MAX_TIMEOUT_MS)
        return elastic__fail(ELASTIC_EINVAL, "park: timeout_ms %d out of range", o.timeout_ms);
    const char *spare = getenv(CHANNEL__ENV_SPARE);
    if (spare == NULL) return 0; /* not a spare: a rank already */
    int slot;
    if (elastic__parse_int(CHANNEL__ENV_SPARE, spare, 0, (int)CHANNEL__HB_MAX_SLOTS - 1, &slot) !=
        0)
        return ELASTIC_EINVAL;
    const char *socket_path = getenv(CHANNEL__ENV_AGENT_SOCKET);
    if (socket_path == NULL || socket_path[0] == '\0')
        return elastic__fail(ELASTIC_EINVAL, "%s is set but %s is not", CHANNEL__ENV_SPARE,
                             CHANNEL__ENV_AGENT_SOCKET);
    int fd = -1;
    if ((rc = worker__connect_agent(socket_path, "warm spare", &fd)) != 0) return rc;
    char hello[128];
    snprintf(hello, sizeof hello, "SLOT=%d\nPID=%ld\nTIME_NS=%llu\n", slot, (long)getpid(),
             (unsigned long long)elastic__now_ns());
    rc = channel__msg_write(fd, CHANNEL__MSG_HELLO, hello, strlen(hello));
    static _Thread_local char payload[CHANNEL__MSG_MAX_PAYLOAD + 1];
    channel__msg_header header = { 0 };
    uint64_t deadline = o.timeout_ms < 0 ? 0 : elastic__deadline_ms(o.timeout_ms);
    while (rc == 0) {
        int wait_ms = -1;
        if (o.timeout_ms >= 0) {
            wait_ms = (int)elastic__ms_left(deadline);
            if (wait_ms <= 0) {
                rc = elastic__fail(ELASTIC_ETIMEDOUT, "warm spare: not promoted within %d ms",
                                   o.timeout_ms);
                break;
            }
        }
        rc = channel__msg_read(fd, wait_ms, &header, payload);
        if (rc == ELASTIC_ECLOSED) {
            rc = elastic__fail(ELASTIC_ECLOSED, "warm spare: the agent went away");
        } else if (rc == 0 && header.type == CHANNEL__MSG_STOP) {
            rc = elastic__fail(ELASTIC_ECLOSED, "warm spare: the agent no longer needs it");
        } else if (rc == 0 && header.type == CHANNEL__MSG_PROMOTE) {
            break;
        } else if (rc == 0) {
            ELASTIC_LOG_W("worker", "warm spare: control message %u ignored while parked",
                          header.type);
        }
    }
    close(fd);
    if (rc != 0) return rc;
    if ((rc = apply_promotion(payload, header.length)) != 0) return rc;
    if (environment != NULL && (*environment = elastic__strdup(payload)) == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "warm spare: environment copy");
    if (promoted != NULL) *promoted = 1;
    ELASTIC_LOG_I("worker", "warm spare promoted: rank %s", getenv("RANK"));
    return 0;
}

ELASTIC_EXTERN int elastic_worker_report_phase(elastic_worker *w, const char *phase,
                                               uint64_t duration_ns)
{
    if (w == NULL || phase == NULL) return elastic__fail(ELASTIC_EINVAL, "worker or phase is NULL");
    size_t len = strlen(phase);
    if (len == 0 || len > 31 || strspn(phase, "abcdefghijklmnopqrstuvwxyz0123456789_") != len)
        return elastic__fail(ELASTIC_EINVAL, "phase \"%.40s\": 1..31 of [a-z0-9_]", phase);
    if (w->control_fd < 0) return 0;
    pthread_mutex_lock(&w->lock);
    uint64_t generation = w->env.info.generation;
    pthread_mutex_unlock(&w->lock);
    char payload[160];
    snprintf(payload, sizeof payload, "NAME=recovery_phase\nPHASE=%s\nNS=%llu\nGENERATION=%llu\n",
             phase, (unsigned long long)duration_ns, (unsigned long long)generation);
    return worker__control_send(w, CHANNEL__MSG_EVENT, payload);
}
