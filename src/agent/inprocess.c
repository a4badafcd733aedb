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
#include "agent/console.h"
#include "agent/journal_events.h"
#include "agent/memory.h"
#include "agent/probes.h"
#include "agent/proc.h"
#include "agent/spares.h"
#include "agent/workers.h"

#include "common/clock.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

/* The recovery's own record; only this file reads or writes it. */
struct agent_inprocess {
    uv_timer_t ack_timer; /* the abort acknowledgement deadline */
    int reconfiguring;    /* workers reconfigured in place whose READY is outstanding */
    uint64_t failure_ms;  /* the failure an in-process recovery is timed from */
    uint64_t back_ms;     /* the latest READY so far (the workers' clock) */
    bool told_unattached; /* the console said once that no worker could be kept */
};

int agent__inprocess_init(agent_group *group)
{
    group->inprocess = calloc(1, sizeof *group->inprocess);
    if (group->inprocess == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "out of memory (in-process)");
    int rc = uv_timer_init(group->loop, &group->inprocess->ack_timer);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "agent loop: %s", uv_strerror(rc));
    group->inprocess->ack_timer.data = group;
    return 0;
}

void agent__inprocess_close(agent_group *group)
{
    uv_close((uv_handle_t *)&group->inprocess->ack_timer, NULL);
}

void agent__inprocess_destroy(agent_group *group)
{
    free(group->inprocess);
    group->inprocess = NULL;
}

bool agent__inprocess_reconfiguring(const agent_group *group)
{
    return group->inprocess->reconfiguring > 0;
}

void agent__inprocess_failed_at(agent_group *group, uint64_t failure_ms)
{
    group->inprocess->failure_ms = failure_ms;
}

void agent__inprocess_stopped(agent_group *group)
{
    uv_timer_stop(&group->inprocess->ack_timer);
}

void agent__inprocess_generation_starting(agent_group *group)
{
    group->inprocess->reconfiguring = 0;
}

static void on_ack_timeout(uv_timer_t *timer)
{
    agent_group *group = timer->data;
    for (int i = 0; i < group->nworkers; i++) {
        agent_worker *worker = &group->workers[i];
        if (!worker->survivor || worker->abort_acked || !worker->running) continue;
        ELASTIC_LOG_W("agent", "rank %d did not acknowledge the abort in %d ms: restarting it",
                      worker->rank, group->job.opts->abort_ack_timeout_ms);
        worker->survivor = false;
        agent__proc_signal_group(worker->pid, SIGKILL);
    }
}

bool agent__inprocess_stop(agent_group *group, int failed_local_rank, const char *reason)
{
    if (!group->job.opts->in_process_recovery || group->monitor == NULL || group->workers == NULL)
        return false;
    probe__monitor_pause(group->monitor);
    int kept = 0, unattached = 0;
    for (int i = 0; i < group->nworkers; i++) {
        agent_worker *worker = &group->workers[i];
        worker->survivor = worker->abort_acked = false;
        if (!worker->running) continue;
        bool connected = probe__monitor_worker_connected(group->monitor, i);
        unattached += i != failed_local_rank && !connected;
        if (i != failed_local_rank && connected &&
            probe__monitor_abort_worker(group->monitor, i, reason) == 0) {
            worker->survivor = true;
            kept++;
        } else {
            agent__proc_signal_group(worker->pid, SIGTERM);
        }
    }
    ELASTIC_LOG_I("agent", "in-process recovery: %d of %d workers kept", kept, group->nworkers);
    if (kept == 0 && unattached > 0 && !group->inprocess->told_unattached) {
        /* A script that never attached (plain torchrun code) cannot be kept:
         * say so once instead of restarting the group in silence. */
        group->inprocess->told_unattached = true;
        agent__console(group,
                       "--in-process-recovery: no worker is attached to elasticrun (the script "
                       "does not use libelastic: elastic.torch.Job, docs/ADOPTING.md), so the "
                       "whole group restarts");
    }
    uv_timer_start(&group->inprocess->ack_timer, on_ack_timeout,
                   (uint64_t)group->job.opts->abort_ack_timeout_ms, 0);
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
    if (slot >= group->job.opts->nproc_per_node) { /* a warm spare's slot */
        agent__spares_on_control(group, (unsigned)(slot - group->job.opts->nproc_per_node), type);
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
        if (back_ms > group->inprocess->back_ms) group->inprocess->back_ms = back_ms;
        if (--group->inprocess->reconfiguring > 0 || group->inprocess->failure_ms == 0) return;
        uint64_t recovery_ms = group->inprocess->back_ms > group->inprocess->failure_ms
                                   ? group->inprocess->back_ms - group->inprocess->failure_ms
                                   : 0;
        group->inprocess->back_ms = 0;
        group->inprocess->failure_ms = 0;
        probe__monitor_record_recovery(group->monitor, (double)recovery_ms / 1000.0, true);
        agent__ev_reconfigured(
            group->job.events,
            &(agent_ev_recovered){ .generation = generation, .recovery_ms = (int64_t)recovery_ms });
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
                                  .run_id = group->job.run_id,
                                  .master_addr = g->master_addr,
                                  .master_port = g->master_port,
                                  .store_endpoint = group->store.endpoint,
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
    group->inprocess->reconfiguring++;
    agent_ev_worker ev = agent__ev_worker_of(group, worker);
    agent__ev_worker_reconfigured(group->job.events, &ev);
    return 0;
}
