/*
 * The job's restore plan for a rank that is not started afresh: a survivor
 * reconfigured in place (elastic_worker_poll) and a promoted warm spare
 * (elastic_worker_park) get it in their payload, and it replaces the
 * process' ELASTIC_RESTORE_* variables, which elastic_ckpt_restore_begin
 * reads (src/ckpt/restore.c) exactly as it does in a cold-started rank. Every
 * rank of the generation then restores the step the agents agreed on, not
 * the newest its own node holds (which can differ by a step when the
 * generation ended during a commit).
 */
#include "common/parse_int.h"
#include "worker/worker.h"

#include <errno.h>
#include <stdlib.h>

int worker__restore_plan_apply(const char *(*lookup)(void *ctx, const char *name), void *ctx)
{
    const char *step = lookup(ctx, CHANNEL__ENV_RESTORE_STEP),
               *source = lookup(ctx, CHANNEL__ENV_RESTORE_SOURCE),
               *node = lookup(ctx, CHANNEL__ENV_RESTORE_NODE);
    if (step == NULL && source == NULL) {
        unsetenv(CHANNEL__ENV_RESTORE_STEP);
        unsetenv(CHANNEL__ENV_RESTORE_SOURCE);
        unsetenv(CHANNEL__ENV_RESTORE_NODE);
        return 0;
    }
    uint64_t parsed;
    if (step == NULL || source == NULL)
        return elastic__fail(ELASTIC_EPROTO, "restore plan: %s and %s come together",
                             CHANNEL__ENV_RESTORE_STEP, CHANNEL__ENV_RESTORE_SOURCE);
    if (elastic__parse_u64(CHANNEL__ENV_RESTORE_STEP, step, 0, UINT64_MAX - 1, &parsed) != 0)
        return ELASTIC_EPROTO;
    if (strcmp(source, "local") != 0 && strcmp(source, "peer") != 0 && strcmp(source, "disk") != 0)
        return elastic__fail(ELASTIC_EPROTO, "restore plan: %s \"%.16s\": local, peer or disk",
                             CHANNEL__ENV_RESTORE_SOURCE, source);
    const char *names[] = { CHANNEL__ENV_RESTORE_STEP, CHANNEL__ENV_RESTORE_SOURCE,
                            CHANNEL__ENV_RESTORE_NODE };
    const char *values[] = { step, source, node != NULL ? node : "" };
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(names); i++)
        if (setenv(names[i], values[i], 1) != 0)
            return elastic__fail(ELASTIC_ESYS, "setenv %s: %s", names[i], strerror(errno));
    return 0;
}
