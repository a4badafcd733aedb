/* libFuzzer target: a control frame's payload as the worker and the agent
 * read it (pairs, then the worker-environment validation of a reconfigure). */
#include "channel/channel.h"
#include "worker/env.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *kv_lookup(void *ctx, const char *name)
{
    return channel__kv_get(ctx, name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > CHANNEL__MSG_MAX_PAYLOAD) return 0;
    char *buf = malloc(size + 1);
    if (buf == NULL) return 0;
    memcpy(buf, data, size);
    channel__kv kv;
    if (channel__kv_parse(buf, size, &kv) == 0) {
        worker__env env;
        if (worker__env_parse(kv_lookup, &kv, &env) == 0 && env.info.rank >= env.info.world_size)
            abort();
    }
    free(buf);
    return 0;
}
