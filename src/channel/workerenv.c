/*
 * The variables an agent gives its workers, written once for both uses: the
 * spawn environment and the in-process RECONFIGURE and PROMOTE payloads (the
 * worker parses all with worker__env_parse, so they cannot drift apart),
 * with the job's restore plan for the rank when there is one.
 */
#include "channel/channel.h"

static bool line_safe(const char *value)
{
    return value == NULL || strchr(value, '\n') == NULL;
}

int channel__worker_env_format(const channel__worker_env *e, elastic__text *out)
{
    const char *strings[] = {
        e->run_id,        e->master_addr,  e->store_endpoint, e->store_prefix,
        e->heartbeat_shm, e->agent_socket, e->restore_source, e->restore_node
    };
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(strings); i++)
        if (!line_safe(strings[i]))
            return elastic__fail(ELASTIC_EINVAL, "worker environment: newline in a value");
    elastic__text_printf(
        out, "RANK=%d\nLOCAL_RANK=%d\nWORLD_SIZE=%d\nLOCAL_WORLD_SIZE=%d\nGROUP_RANK=%d\n", e->rank,
        e->local_rank, e->world_size, e->local_world_size, e->group_rank);
    elastic__text_printf(out, "ROLE_RANK=%d\nROLE_WORLD_SIZE=%d\nTORCHELASTIC_RESTART_COUNT=%d\n",
                         e->rank, e->world_size, e->restart_count);
    if (e->run_id != NULL)
        elastic__text_printf(out, "TORCHELASTIC_RUN_ID=%s\n%s=%s\n", e->run_id, CHANNEL__ENV_RUN_ID,
                             e->run_id);
    if (e->master_addr != NULL) elastic__text_printf(out, "MASTER_ADDR=%s\n", e->master_addr);
    if (e->master_port > 0) elastic__text_printf(out, "MASTER_PORT=%d\n", e->master_port);
    if (e->store_endpoint != NULL) {
        elastic__text_printf(out, "%s=%s\n%s=%s\n%s=%llu\n", CHANNEL__ENV_STORE_ENDPOINT,
                             e->store_endpoint, CHANNEL__ENV_STORE_PREFIX,
                             e->store_prefix != NULL ? e->store_prefix : "",
                             CHANNEL__ENV_GENERATION, (unsigned long long)e->generation);
        if (e->incarnation != 0)
            elastic__text_printf(out, "%s=%llu\n", CHANNEL__ENV_INCARNATION,
                                 (unsigned long long)e->incarnation);
        if (e->heartbeat_shm != NULL)
            elastic__text_printf(out, "%s=%s\n%s=%d\n", CHANNEL__ENV_HEARTBEAT_SHM,
                                 e->heartbeat_shm, CHANNEL__ENV_HEARTBEAT_SLOT, e->heartbeat_slot);
        if (e->agent_socket != NULL)
            elastic__text_printf(out, "%s=%s\n", CHANNEL__ENV_AGENT_SOCKET, e->agent_socket);
    }
    if (e->restore_source != NULL)
        elastic__text_printf(out, "%s=%llu\n%s=%s\n%s=%s\n", CHANNEL__ENV_RESTORE_STEP,
                             (unsigned long long)e->restore_step, CHANNEL__ENV_RESTORE_SOURCE,
                             e->restore_source, CHANNEL__ENV_RESTORE_NODE,
                             e->restore_node != NULL ? e->restore_node : "");
    return out->overflow ? elastic__fail(ELASTIC_ELIMIT, "worker environment too long") : 0;
}
