/*
 * Parses and validates the worker environment (torchrun's names plus ours).
 * Every value is bounded: integers are strict decimals in range
 * (common/parse_int.h), the store endpoint is common/endpoint.h's, strings have
 * a maximum length and an allowed alphabet, ranks agree with sizes.
 */
#include "worker/env.h"
#include "channel/channel.h"
#include "common/endpoint.h"
#include "common/parse_int.h"

#include <stdio.h>
#include <stdlib.h>

const char *worker__getenv(void *ctx, const char *name)
{
    (void)ctx;
    return getenv(name);
}

/* An optional integer: keeps *out (the default) when the variable is unset. */
static int lookup_int(worker__lookup_fn lookup, void *ctx, const char *name, int min, int max,
                      int *out)
{
    const char *value = lookup(ctx, name);
    return value == NULL ? 0 : elastic__parse_int(name, value, min, max, out);
}

/* Alphanumerics plus `allowed`; NULL allows any printable ASCII but space. */
static bool byte_allowed(unsigned char c, const char *allowed)
{
    if (allowed == NULL) return c > 0x20 && c < 0x7f;
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    return alnum || (c != 0 && strchr(allowed, c) != NULL);
}

/* Copies a string of at most size-1 bytes, each of them allowed. */
static int copy_checked(const char *name, const char *value, const char *allowed, char *out,
                        size_t size)
{
    size_t len = strlen(value);
    if (len >= size)
        return elastic__fail(ELASTIC_EINVAL, "%s is longer than %zu bytes", name, size - 1);
    for (size_t i = 0; i < len; i++)
        if (!byte_allowed((unsigned char)value[i], allowed))
            return elastic__fail(ELASTIC_EINVAL, "%s has a byte 0x%02x that is not allowed", name,
                                 (unsigned char)value[i]);
    memcpy(out, value, len + 1);
    return 0;
}

static const char host_chars[] = ".-_:[]%";

static int lookup_string(worker__lookup_fn lookup, void *ctx, const char *name, const char *allowed,
                         char *out, size_t size)
{
    const char *value = lookup(ctx, name);
    return value == NULL ? 0 : copy_checked(name, value, allowed, out, size);
}

/* "host:port" or "[v6]:port", the grammar elastic_store_connect reads it with. */
static int check_endpoint(const char *name, const char *endpoint)
{
    char host[ELASTIC__HOST_MAX + 1];
    int port;
    return elastic__endpoint_parse(name, endpoint, ELASTIC__PORT_REQUIRED, host, sizeof host,
                                   &port);
}

static int parse_ranks(worker__lookup_fn lookup, void *ctx, elastic_worker_info *info)
{
    const char *rank = lookup(ctx, "RANK"), *world = lookup(ctx, "WORLD_SIZE");
    if (rank == NULL || world == NULL)
        return elastic__fail(ELASTIC_EINVAL, "%s is set but %s is not",
                             rank != NULL ? "RANK" : "WORLD_SIZE",
                             rank != NULL ? "WORLD_SIZE" : "RANK");
    int rc = elastic__parse_int("WORLD_SIZE", world, 1, WORKER__MAX_WORLD_SIZE, &info->world_size);
    if (rc == 0) rc = elastic__parse_int("RANK", rank, 0, info->world_size - 1, &info->rank);
    info->local_world_size = info->world_size;
    info->local_rank = info->rank;
    if (rc == 0)
        rc = lookup_int(lookup, ctx, "LOCAL_WORLD_SIZE", 1, info->world_size,
                        &info->local_world_size);
    if (rc == 0 && lookup(ctx, "LOCAL_WORLD_SIZE") != NULL && lookup(ctx, "LOCAL_RANK") == NULL)
        return elastic__fail(ELASTIC_EINVAL, "LOCAL_WORLD_SIZE is set but LOCAL_RANK is not");
    if (rc == 0)
        rc =
            lookup_int(lookup, ctx, "LOCAL_RANK", 0, info->local_world_size - 1, &info->local_rank);
    if (rc == 0)
        rc = lookup_int(lookup, ctx, "GROUP_RANK", 0, info->world_size - 1, &info->group_rank);
    if (rc == 0)
        rc =
            lookup_int(lookup, ctx, "TORCHELASTIC_RESTART_COUNT", 0, 1 << 30, &info->restart_count);
    if (rc == 0) rc = lookup_int(lookup, ctx, "MASTER_PORT", 1, 65535, &info->master_port);
    if (rc == 0)
        rc = lookup_string(lookup, ctx, "MASTER_ADDR", host_chars, info->master_addr,
                           sizeof info->master_addr);
    if (rc == 0)
        rc = lookup_string(lookup, ctx, "TORCHELASTIC_RUN_ID", NULL, info->run_id,
                           sizeof info->run_id);
    return rc;
}

static int parse_heartbeat(worker__lookup_fn lookup, void *ctx, worker__env *env)
{
    const char *shm = lookup(ctx, CHANNEL__ENV_HEARTBEAT_SHM),
               *slot = lookup(ctx, CHANNEL__ENV_HEARTBEAT_SLOT);
    if ((shm == NULL) != (slot == NULL))
        return elastic__fail(ELASTIC_EINVAL, "%s and %s must be set together",
                             CHANNEL__ENV_HEARTBEAT_SHM, CHANNEL__ENV_HEARTBEAT_SLOT);
    if (shm == NULL) return 0;
    if (shm[0] != '/')
        return elastic__fail(ELASTIC_EINVAL, "%s must be an absolute path",
                             CHANNEL__ENV_HEARTBEAT_SHM);
    int rc = copy_checked(CHANNEL__ENV_HEARTBEAT_SHM, shm, NULL, env->heartbeat_shm,
                          sizeof env->heartbeat_shm);
    if (rc == 0)
        rc = elastic__parse_int(CHANNEL__ENV_HEARTBEAT_SLOT, slot, 0, CHANNEL__HB_MAX_SLOTS - 1,
                                &env->heartbeat_slot);
    return rc;
}

static int parse_agent(worker__lookup_fn lookup, void *ctx, worker__env *env)
{
    const char *endpoint = lookup(ctx, CHANNEL__ENV_STORE_ENDPOINT),
               *generation = lookup(ctx, CHANNEL__ENV_GENERATION);
    if (endpoint == NULL) return 0;
    if (generation == NULL || lookup(ctx, CHANNEL__ENV_STORE_PREFIX) == NULL)
        return elastic__fail(ELASTIC_EINVAL, "%s is set but %s or %s is not",
                             CHANNEL__ENV_STORE_ENDPOINT, CHANNEL__ENV_GENERATION,
                             CHANNEL__ENV_STORE_PREFIX);
    env->mode = WORKER__AGENT;
    int rc = copy_checked(CHANNEL__ENV_STORE_ENDPOINT, endpoint, host_chars, env->store_endpoint,
                          sizeof env->store_endpoint);
    if (rc == 0) rc = check_endpoint(CHANNEL__ENV_STORE_ENDPOINT, endpoint);
    if (rc == 0)
        rc = elastic__parse_u64(CHANNEL__ENV_GENERATION, generation, 0, UINT64_MAX / 2,
                                &env->info.generation);
    const char *incarnation = lookup(ctx, CHANNEL__ENV_INCARNATION);
    if (rc == 0 && incarnation != NULL)
        rc = elastic__parse_u64(CHANNEL__ENV_INCARNATION, incarnation, 0, UINT64_MAX / 2,
                                &env->info.incarnation);
    if (rc == 0)
        rc = lookup_string(lookup, ctx, CHANNEL__ENV_STORE_PREFIX, NULL, env->store_prefix,
                           sizeof env->store_prefix);
    if (rc == 0)
        rc = lookup_string(lookup, ctx, CHANNEL__ENV_RUN_ID, NULL, env->info.run_id,
                           sizeof env->info.run_id);
    if (rc == 0) rc = parse_heartbeat(lookup, ctx, env);
    const char *socket_path = lookup(ctx, CHANNEL__ENV_AGENT_SOCKET);
    if (rc == 0 && socket_path != NULL && socket_path[0] != '/')
        rc =
            elastic__fail(ELASTIC_EINVAL, "%s must be an absolute path", CHANNEL__ENV_AGENT_SOCKET);
    if (rc == 0)
        rc = lookup_string(lookup, ctx, CHANNEL__ENV_AGENT_SOCKET, NULL, env->agent_socket,
                           sizeof env->agent_socket);
    return rc;
}

int worker__env_parse(worker__lookup_fn lookup, void *ctx, worker__env *env)
{
    memset(env, 0, sizeof *env);
    env->info.struct_size = sizeof env->info;
    env->heartbeat_slot = -1;
    env->info.world_size = 1;
    env->info.local_world_size = 1;
    bool launched = lookup(ctx, "RANK") != NULL || lookup(ctx, "WORLD_SIZE") != NULL;
    if (!launched) {
        if (lookup(ctx, CHANNEL__ENV_STORE_ENDPOINT) != NULL)
            return elastic__fail(ELASTIC_EINVAL, "%s is set but RANK and WORLD_SIZE are not",
                                 CHANNEL__ENV_STORE_ENDPOINT);
        env->mode = WORKER__ALONE;
        return 0;
    }
    env->mode = WORKER__TORCHRUN;
    int rc = parse_ranks(lookup, ctx, &env->info);
    if (rc == 0) rc = parse_agent(lookup, ctx, env);
    env->info.attached =
        env->mode == WORKER__AGENT && (env->agent_socket[0] != '\0' || env->heartbeat_slot >= 0);
    return rc;
}
