/*
 * Membership and store calls off the agent's loop: one thread runs them in
 * the order posted (so ending a generation always precedes the next
 * rendezvous) and posts each result back through the group's uv_async. A
 * store that does not answer therefore delays only these calls, never
 * signals, grace timers, output, /healthz or /metrics.
 *
 * A call's run touches only the call (its inputs were copied in when it
 * was posted) and what this thread owns (the membership, the store per
 * generation); the loop applies its results when it is back.
 */
#include "agent/calls.h"
#include "agent/memory.h"

#include "agent/generation_store.h"
#include "agent/group.h"
#include "agent/membership.h"
#include "agent/probes.h"
#include "agent/slurm.h"
#include "agent/summary.h"

#include <stdlib.h>

static void run_call(agent_call *call)
{
    agent_membership *m = call->membership;
    switch (call->kind) {
    case AGENT_CALL_NEXT:
        call->result.struct_size = sizeof call->result;
        call->rc = m->ops->next(m, &call->result);
        if (call->rc == 0) agent__jobstore_take(call->jobstore, call);
        if (call->rc == 0) agent__memory_sync(call);
        break;
    case AGENT_CALL_END: call->rc = m->ops->end_generation(m, &call->cause); break;
    case AGENT_CALL_FINISH: call->rc = m->ops->finish(m); break;
    case AGENT_CALL_LEAVE: call->rc = m->ops->leave(m); break;
    case AGENT_CALL_SHARE_FAILURE:
        call->rc = call->store != NULL
                       ? elastic_store_set(call->store, call->key, call->value, strlen(call->value))
                       : 0;
        break;
    case AGENT_CALL_SUMMARY:
        agent__summary_run(call);
        call->rc = 0;
        return;
    case AGENT_CALL_NODE_STATS: agent__node_stats_exchange(call); break;
    case AGENT_CALL_EVICT: agent__node_evict_run(call); break;
    case AGENT_CALL_SLURM_DRAIN: agent__slurm_drain_run(call); break;
    }
    snprintf(call->error, sizeof call->error, "%s", call->rc != 0 ? elastic_last_error() : "");
}

static void *calls_main(void *arg)
{
    agent_group *group = arg;
    agent_calls *calls = &group->calls;
    pthread_mutex_lock(&group->lock);
    for (;;) {
        while (calls->queue == NULL && !calls->stopping)
            pthread_cond_wait(&calls->wake, &group->lock);
        if (calls->queue == NULL) break; /* stopping, nothing left */
        agent_call *call = calls->queue;
        calls->queue = call->next;
        calls->busy = true;
        pthread_mutex_unlock(&group->lock);
        run_call(call);
        pthread_mutex_lock(&group->lock);
        calls->busy = false;
        call->next = NULL;
        agent_call **tail = &calls->done;
        while (*tail != NULL) tail = &(*tail)->next;
        *tail = call;
        if (!calls->stopping) uv_async_send(&group->wake);
    }
    pthread_mutex_unlock(&group->lock);
    return NULL;
}

void agent__call_free(agent_call *call)
{
    if (call != NULL) agent__memory_call_free(call);
    if (call == NULL) return;
    if (call->store_changed) elastic_store_close(call->store); /* a store never applied */
    free(call->node_stats);
    free(call->node_present);
    free(call);
}

agent_call *agent__call_new(agent_call_kind kind)
{
    agent_call *call = calloc(1, sizeof *call);
    if (call != NULL) call->kind = kind;
    return call;
}

void agent__call_post(agent_group *group, agent_call *call)
{
    if (call == NULL) {
        ELASTIC_LOG_E("agent", "out of memory posting a membership call");
        return;
    }
    agent_calls *calls = &group->calls;
    call->membership = group->membership;
    if (call->kind != AGENT_CALL_NEXT) call->store = group->store;
    if (call->kind == AGENT_CALL_NEXT && group->memory != NULL) {
        call->memory = group->memory;
        call->memory_store = group->store;
        call->opts = group->opts;
        call->node_id = group->node_id;
        call->node_addr = group->node_addr;
    }
    agent_group_event done = { .kind = AGENT_GROUP_CALL_DONE, .call = call };
    if (!group->membership->ops->next_blocks) { /* in-memory membership: nothing can block */
        run_call(call);
        agent__group_post(group, &done);
        return;
    }
    pthread_mutex_lock(&group->lock);
    if (!calls->started) {
        pthread_cond_init(&calls->wake, NULL);
        if (pthread_create(&calls->thread, NULL, calls_main, group) != 0) {
            pthread_mutex_unlock(&group->lock);
            call->rc = elastic__fail(ELASTIC_ESYS, "cannot start the agent's membership thread");
            snprintf(call->error, sizeof call->error, "%s", elastic_last_error());
            agent__group_post(group, &done);
            return;
        }
        calls->started = true;
    }
    agent_call **tail = &calls->queue;
    while (*tail != NULL) tail = &(*tail)->next;
    *tail = call;
    pthread_cond_signal(&calls->wake);
    pthread_mutex_unlock(&group->lock);
}

agent_call *agent__calls_take_done(agent_group *group)
{
    pthread_mutex_lock(&group->lock);
    agent_call *done = group->calls.done;
    group->calls.done = NULL;
    pthread_mutex_unlock(&group->lock);
    return done;
}

bool agent__calls_stop(agent_group *group)
{
    agent_calls *calls = &group->calls;
    pthread_mutex_lock(&group->lock);
    if (!calls->started) {
        pthread_mutex_unlock(&group->lock);
        return true;
    }
    bool busy = calls->busy;
    calls->stopping = true;
    /* Calls not started yet are dropped: the agent is leaving. */
    while (calls->queue != NULL) {
        agent_call *next = calls->queue->next;
        agent__call_free(calls->queue);
        calls->queue = next;
    }
    pthread_cond_signal(&calls->wake);
    pthread_mutex_unlock(&group->lock);
    if (busy) {
        /* A call blocked on the store cannot be interrupted; the process is
         * about to exit and the thread still uses the group: keep it all. */
        pthread_detach(calls->thread);
        return false;
    }
    pthread_join(calls->thread, NULL);
    while (calls->done != NULL) {
        agent_call *next = calls->done->next;
        agent__call_free(calls->done);
        calls->done = next;
    }
    calls->started = false;
    return true;
}
