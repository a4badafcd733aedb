/*
 * In-process recovery (--in-process-recovery): when the generation ends, the
 * workers that are still healthy are not stopped. They get ABORT over the
 * control socket (their abort hook unblocks any collective), and once they
 * acknowledged, the agent rendezvouses as usual; the next generation then
 * RECONFIGUREs them in place with their new ranks and starts only the
 * workers that died. A worker that does not acknowledge within
 * --abort-ack-timeout, or is not attached to the channel, is stopped the
 * ordinary way (SIGTERM, SIGKILL after the grace period).
 */
#include "agent/journal.h"
#include "agent/memory.h"
#include "agent/probes.h"
#include "agent/proc.h"
#include "agent/spares.h"
#include "agent/workers.h"

#include "common/clock.h"

#include <signal.h>
#include <stdio.h>

static void on_ack_timeout(uv_timer_t *timer)
{
    agent_group *group = timer->data;
    for (int i = 0; i < group->nworkers; i++) {
        agent_worker *worker = &group->workers[i];
        if (!worker->survivor || worker->abort_acked || !worker->running) continue;
        ELASTIC_LOG_W("agent", "rank %d did not acknowledge the abort in %d ms: restarting it",
                      worker->rank, group->opts->abort_ack_timeout_ms);
        worker->survivor = false;
        agent__proc_signal_group(worker->pid, SIGKILL);
    }
}

bool agent__inprocess_stop(agent_group *group, int failed_local_rank, const char *reason)
{
    if (!group->opts->in_process_recovery || group->monitor == NULL || group->workers == NULL)
        return false;
    probe__monitor_pause(group->monitor);
    int kept = 0;
    for (int i = 0; i < group->nworkers; i++) {
        agent_worker *worker = &group->workers[i];
        worker->survivor = worker->abort_acked = false;
        if (!worker->running) continue;
        bool healthy = i != failed_local_rank && probe__monitor_worker_connected(group->monitor, i);
        if (healthy && probe__monitor_abort_worker(group->monitor, i, reason) == 0) {
            worker->survivor = true;
            kept++;
        } else {
            agent__proc_signal_group(worker->pid, SIGTERM);
        }
    }
    ELASTIC_LOG_I("agent", "in-process recovery: %d of %d workers kept", kept, group->nworkers);
    uv_timer_start(&group->ack_timer, on_ack_timeout, (uint64_t)group->opts->abort_ack_timeout_ms,
                   0);
    return true;
}

int agent__inprocess_kept(const agent_group *group)
{
    int kept = 0;
    for (int i = 0; group->workers != NULL && i < group->nworkers; i++) {
        const agent_worker *worker = &group->workers[i];
        kept += worker->running && worker->survivor && worker->abort_acked;
    }
    return kept;
}

void agent__inprocess_on_control(void *user, int slot, int type, uint64_t generation,
                                 uint64_t sent_ns)
{
    agent_group *group = user;
    if (slot >= group->opts->nproc_per_node) { /* a warm spare's slot */
        agent__spares_on_control(group, (unsigned)(slot - group->opts->nproc_per_node), type);
        return;
    }
    if (group->workers == NULL || slot < 0 || slot >= group->nworkers) return;
    agent_worker *worker = &group->workers[slot];
    if (type == CHANNEL__MSG_HELLO) {
        agent__phases_on_hello(group, worker);
    } else if (type == CHANNEL__MSG_ABORT_ACK) {
        agent__group_post(
            group, &(agent_group_event){ .kind = AGENT_GROUP_ABORT_ACKED, .worker = worker });
    } else if (type == CHANNEL__MSG_READY && generation == group->current.generation &&
               worker->reconfiguring) {
        worker->reconfiguring = false;
        /* the worker's own clock: when it was back in its loop, not when we read it */
        uint64_t back_ms = sent_ns != 0 ? sent_ns / 1000000u : elastic__now_ms();
        if (back_ms > group->inprocess_back_ms) group->inprocess_back_ms = back_ms;
        if (--group->reconfiguring > 0 || group->inprocess_failure_ms == 0) return;
        uint64_t recovery_ms = group->inprocess_back_ms > group->inprocess_failure_ms
                                   ? group->inprocess_back_ms - group->inprocess_failure_ms
                                   : 0;
        group->inprocess_back_ms = 0;
        group->inprocess_failure_ms = 0;
        probe__monitor_record_recovery(group->monitor, (double)recovery_ms / 1000.0, true);
        agent_event event;
        agent__event_begin(&event, group->events, AGENT_EVENT_RECONFIGURED);
        agent__event_int(&event, "generation", (int64_t)generation);
        agent__event_int(&event, "recovery_ms", (int64_t)recovery_ms);
        agent__event_emit(group->events, &event);
    }
}

/* The current generation's settings for `worker` as the control channel
 * hands them over (a reconfigured survivor, a promoted warm spare); sets its
 * rank. `prefix` holds the store prefix `env` points to. */
void agent__inprocess_channel_env(const agent_group *group, agent_worker *worker, char *prefix,
                                  size_t prefix_size, channel__worker_env *env)
{
    const elastic_rdzv_result *g = &group->current;
    agent__worker_store_prefix(group, prefix, prefix_size);
    worker->rank = g->rank_base + worker->local_rank;
    *env = (channel__worker_env){ .rank = worker->rank,
                                  .local_rank = worker->local_rank,
                                  .world_size = g->world_size,
                                  .local_world_size = g->local_world_size,
                                  .group_rank = g->group_rank,
                                  .restart_count = g->restart_count,
                                  .generation = g->generation,
                                  .incarnation = g->incarnation,
                                  .run_id = group->run_id,
                                  .master_addr = g->master_addr,
                                  .master_port = g->master_port,
                                  .store_endpoint = group->store_endpoint,
                                  .store_prefix = prefix,
                                  .heartbeat_shm = probe__monitor_heartbeat_path(group->monitor),
                                  .heartbeat_slot = worker->local_rank,
                                  .agent_socket = probe__monitor_socket_path(group->monitor) };
    agent__memory_plan_for(group, worker->local_rank, &env->restore_step, &env->restore_source,
                           &env->restore_node);
}

int agent__inprocess_reconfigure(agent_group *group, agent_worker *worker)
{
    char prefix[400];
    channel__worker_env env;
    agent__inprocess_channel_env(group, worker, prefix, sizeof prefix, &env);
    worker->survivor = worker->abort_acked = false;
    int rc = probe__monitor_reconfigure_worker(group->monitor, worker->local_rank, &env);
    if (rc != 0) {
        ELASTIC_LOG_W("agent", "rank %d: reconfigure not sent (%s): stopping it", worker->rank,
                      elastic_last_error());
        agent__proc_signal_group(worker->pid, SIGKILL);
        return rc;
    }
    probe__monitor_worker_renumbered(group->monitor, worker->local_rank, worker->rank);
    worker->reconfiguring = true;
    group->reconfiguring++;
    agent_event event;
    agent__event_begin(&event, group->events, AGENT_EVENT_WORKER_RECONFIGURED);
    agent__event_int(&event, "generation", (int64_t)group->current.generation);
    agent__event_int(&event, "rank", worker->rank);
    agent__event_int(&event, "local_rank", worker->local_rank);
    agent__event_int(&event, "pid", worker->pid);
    agent__event_emit(group->events, &event);
    return 0;
}
