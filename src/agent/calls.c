/*
 * Membership and store calls off the agent's loop: one thread runs them in
 * the order posted (so ending a generation always precedes the next
 * rendezvous) and posts each result back through the group's uv_async. A
 * store that does not answer therefore delays only these calls, never
 * signals, grace timers, output, /healthz or /metrics.
 *
 * A call's run touches only the call (its inputs were copied in when it
 * was made) and what this thread owns (the membership, the store per
 * generation); its done, on the loop, applies the result when it is back.
 * The rendezvous calls (NEXT, END, FINISH, LEAVE, CLOSE_JOB) are this
 * file's; the others belong to their helpers (summary.c, node_straggler.c,
 * health.c, slurm.c, failure_say.c).
 */
#include "agent/calls.h"
#include "agent/memory.h"

#include "agent/generation_store.h"
#include "agent/group.h"
#include "agent/membership.h"
#include "agent/failure_say.h"
#include "agent/waiting.h"
#include "rdzv/rdzv.h"

#include <stdlib.h>

/* ---- the kinds this file owns: the rendezvous calls ---------------------------------------- */

static void next_run(agent_call *call)
{
    agent_next_call *next = (agent_next_call *)call;
    agent_membership *m = next->membership;
    next->result.struct_size = sizeof next->result;
    int rc = m->ops->next(m, &next->result);
    if (rc == 0) agent__jobstore_take(next->jobstore, next);
    if (rc == 0) agent__memory_sync(next);
    agent__call_status(call, rc);
    /* Closed while we waited: whether the job succeeded without us (a
     * spare left out) or ended otherwise decides our status and root cause. */
    elastic_rdzv *handle = agent__membership_handle(m);
    if (rc == ELASTIC_ECLOSED && handle != NULL) {
        next->closed.struct_size = sizeof next->closed;
        next->closed_known = rdzv__read_closed(handle, &next->closed, &next->closed_budget) == 0;
    }
}

static void next_done(agent_group *group, agent_call *call, agent_input *in)
{
    agent_next_call *next = (agent_next_call *)call;
    agent__waiting_stop(group);
    agent__store_link_apply(&group->store, next);
    in->generation = next->result.generation;
    in->restart_count = next->result.restart_count;
    in->nworkers = next->result.local_world_size;
    in->closed_finished =
        next->closed_known && !next->closed_budget && rdzv__cause_is_finished(&next->closed);
    in->closed_bug =
        next->closed_known && !next->closed_budget && agent__failure_closed_for_bug(&next->closed);
    in->closed_infra =
        next->closed_known && !next->closed_budget && rdzv__cause_is_infra(&next->closed);
}

static void next_release(agent_call *call)
{
    agent_next_call *next = (agent_next_call *)call;
    agent__memory_call_free(next);
    if (next->store_changed) elastic_store_close(next->store); /* a store never applied */
}

static const agent_call_type next_type = { next_run, next_done, next_release };

agent_next_call *agent__next_call_new(agent_group *group)
{
    agent_next_call *next = agent__call_alloc(sizeof *next, AGENT_CALL_NEXT, &next_type);
    if (next == NULL) return NULL;
    next->membership = group->membership;
    next->jobstore = group->store.jobstore;
    if (agent__memory_service(group) != NULL) {
        next->memory = agent__memory_service(group);
        next->memory_store = group->store.client;
        next->opts = group->job.opts;
        next->node_id = group->job.node_id;
        next->node_addr = group->job.node_addr;
    }
    return next;
}

agent_next_call *agent__next_call_of(agent_call *call)
{
    return call != NULL && call->type == &next_type ? (agent_next_call *)call : NULL;
}

static void end_run(agent_call *call)
{
    agent_membership_call *c = (agent_membership_call *)call;
    agent__call_status(call, c->membership->ops->end_generation(c->membership, &c->cause));
}

static void end_done(agent_group *group, agent_call *call, agent_input *in)
{
    agent__call_warn(call, "ending the generation");
    /* The store did not answer the end of a generation: remembered, since
     * the rendezvous fails next for that reason (c10d: its host is gone). */
    if (call->rc == ELASTIC_ECONNECT || call->rc == ELASTIC_ETIMEDOUT)
        agent__group_store_lost(group, call->error);
}

static void finish_run(agent_call *call)
{
    agent_membership_call *c = (agent_membership_call *)call;
    agent__call_status(call, c->membership->ops->finish(c->membership));
}

static void finish_done(agent_group *group, agent_call *call, agent_input *in)
{
    agent__call_warn(call, "finishing");
}

static void leave_run(agent_call *call)
{
    agent_membership_call *c = (agent_membership_call *)call;
    agent__call_status(call, c->membership->ops->leave(c->membership));
}

static void leave_done(agent_group *group, agent_call *call, agent_input *in)
{
    agent__call_warn(call, "leaving the rendezvous");
}

/* The job's "closed" record names the bug: the nodes waiting in the open
 * round wake with ELASTIC_ECLOSED and read it. One node alone (in-memory
 * membership) has no one to tell. */
static void close_job_run(agent_call *call)
{
    agent_membership_call *c = (agent_membership_call *)call;
    elastic_rdzv *handle = agent__membership_handle(c->membership);
    if (handle == NULL) {
        agent__call_status(call, 0);
        return;
    }
    elastic_rdzv_cause cause = c->cause;
    rdzv__fill_cause(handle, &cause, ELASTIC_RDZV_JOB_ENDED, c->cause.generation, c->cause.node_id,
                     c->cause.reason);
    agent__call_status(call, rdzv__shut_job(handle, &cause, false));
}

static void close_job_done(agent_group *group, agent_call *call, agent_input *in)
{
    agent__call_warn(call, "closing the job");
}

static const agent_call_type end_type = { end_run, end_done, NULL };
static const agent_call_type finish_type = { finish_run, finish_done, NULL };
static const agent_call_type leave_type = { leave_run, leave_done, NULL };
static const agent_call_type close_job_type = { close_job_run, close_job_done, NULL };

agent_membership_call *agent__membership_call_new(agent_group *group, agent_call_kind kind)
{
    const agent_call_type *type = kind == AGENT_CALL_END         ? &end_type
                                  : kind == AGENT_CALL_FINISH    ? &finish_type
                                  : kind == AGENT_CALL_LEAVE     ? &leave_type
                                  : kind == AGENT_CALL_CLOSE_JOB ? &close_job_type
                                                                 : NULL;
    if (type == NULL) {
        ELASTIC_LOG_E("agent", "call kind %d is not a rendezvous call", (int)kind);
        return NULL;
    }
    agent_membership_call *c = agent__call_alloc(sizeof *c, kind, type);
    if (c != NULL) c->membership = group->membership;
    return c;
}

/* ---- every call ---------------------------------------------------------------------------- */

void *agent__call_alloc(size_t size, agent_call_kind kind, const agent_call_type *type)
{
    agent_call *call = calloc(1, size);
    if (call == NULL) return NULL;
    call->kind = kind;
    call->type = type;
    return call;
}

void agent__call_status(agent_call *call, int rc)
{
    call->rc = rc;
    snprintf(call->error, sizeof call->error, "%s", rc != 0 ? elastic_last_error() : "");
}

void agent__call_warn(const agent_call *call, const char *what)
{
    if (call->rc != 0)
        ELASTIC_LOG_W("agent", "%s: %s (%s)", what, elastic_err_name(call->rc), call->error);
}

static void run_call(agent_call *call)
{
    call->type->run(call);
}

static void *calls_main(void *arg)
{
    agent_group *group = arg;
    agent_calls *calls = &group->calls;
    pthread_mutex_lock(&group->queue.lock);
    for (;;) {
        while (calls->queue == NULL && !calls->stopping)
            pthread_cond_wait(&calls->wake, &group->queue.lock);
        if (calls->queue == NULL) break; /* stopping, nothing left */
        agent_call *call = calls->queue;
        calls->queue = call->next;
        calls->busy = true;
        pthread_mutex_unlock(&group->queue.lock);
        run_call(call);
        pthread_mutex_lock(&group->queue.lock);
        calls->busy = false;
        call->next = NULL;
        agent_call **tail = &calls->done;
        while (*tail != NULL) tail = &(*tail)->next;
        *tail = call;
        if (!calls->stopping && !group->queue.wake_closed) uv_async_send(&group->queue.wake);
    }
    pthread_mutex_unlock(&group->queue.lock);
    return NULL;
}

void agent__call_free(agent_call *call)
{
    if (call == NULL) return;
    if (call->type->release != NULL) call->type->release(call);
    free(call);
}

void agent__call_post(agent_group *group, agent_call *call)
{
    if (call == NULL) {
        ELASTIC_LOG_E("agent", "out of memory posting a membership call");
        return;
    }
    agent_calls *calls = &group->calls;
    agent_group_event done = { .kind = AGENT_GROUP_CALL_DONE, .call = call };
    if (!group->membership->ops->next_blocks) { /* in-memory membership: nothing can block */
        run_call(call);
        agent__group_post(group, &done);
        return;
    }
    pthread_mutex_lock(&group->queue.lock);
    if (!calls->started) {
        pthread_cond_init(&calls->wake, NULL);
        if (pthread_create(&calls->thread, NULL, calls_main, group) != 0) {
            pthread_mutex_unlock(&group->queue.lock);
            agent__call_status(
                call, elastic__fail(ELASTIC_ESYS, "cannot start the agent's membership thread"));
            agent__group_post(group, &done);
            return;
        }
        calls->started = true;
    }
    agent_call **tail = &calls->queue;
    while (*tail != NULL) tail = &(*tail)->next;
    *tail = call;
    pthread_cond_signal(&calls->wake);
    pthread_mutex_unlock(&group->queue.lock);
}

agent_call *agent__calls_take_done(agent_group *group)
{
    pthread_mutex_lock(&group->queue.lock);
    agent_call *done = group->calls.done;
    group->calls.done = NULL;
    pthread_mutex_unlock(&group->queue.lock);
    return done;
}

bool agent__calls_stop(agent_group *group)
{
    agent_calls *calls = &group->calls;
    pthread_mutex_lock(&group->queue.lock);
    if (!calls->started) {
        pthread_mutex_unlock(&group->queue.lock);
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
    pthread_mutex_unlock(&group->queue.lock);
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
