/*
 * "waiting for nodes" on the console while a rendezvous takes long: every
 * few seconds rdzv's look at the open round (how many joined, which members
 * of the last generation are not back, or that the newest generation runs
 * without us: a spare waits for a failure, not for anyone missing), done on libuv's thread pool because
 * store calls block, then one console line.
 */
#include "agent/waiting.h"

#include "agent/console.h"
#include "agent/group.h"
#include "agent/journal_events.h"

#include "common/clock.h"
#include "rdzv/rdzv.h"

#include <stdio.h>
#include <stdlib.h>

#define WAITING_EVERY_MS 5000

/* Thread pool: the open round as rdzv sees it (store calls block). */
static void look(uv_work_t *req)
{
    agent_waiting *w = req->data;
    rdzv__look seen;
    w->joined = -1;
    if (rdzv__look_open_round(w->group->store.client, w->group->job.run_id, w->group->job.node_id,
                              w->last_generation, &seen) != 0)
        return;
    w->joined = seen.joined;
    w->missing_count = seen.missing_count;
    w->running_generation = seen.running_generation;
    w->running_nodes = seen.running_nodes;
    snprintf(w->missing, sizeof w->missing, "%s", seen.missing);
}

static void looked(uv_work_t *req, int status)
{
    agent_waiting *w = req->data;
    agent_group *group = w->group;
    w->in_flight = false;
    if (status != 0 || !agent__group_in_rendezvous(group) || w->joined < 0) return;
    uint64_t waited = elastic__now_ms() - group->clock.rendezvous_started_ms;
    char missing[sizeof w->missing + 32] = "";
    if (w->missing_count > 0) snprintf(missing, sizeof missing, "; missing: %s", w->missing);
    char wanted[48];
    if (group->job.opts->min_nodes == group->job.opts->max_nodes)
        snprintf(wanted, sizeof wanted, "%d", group->job.opts->min_nodes);
    else
        snprintf(wanted, sizeof wanted, "%d to %d", group->job.opts->min_nodes,
                 group->job.opts->max_nodes);
    if (w->running_generation != 0) /* the job runs without us: nobody is missing */
        agent__console(group,
                       "waiting as a spare: generation %llu runs with %d node%s (%s wanted), "
                       "%d waiting, %.0f s so far",
                       (unsigned long long)w->running_generation, w->running_nodes,
                       w->running_nodes == 1 ? "" : "s", wanted, w->joined,
                       (double)waited / 1000.0);
    else
        agent__console(group, "waiting for nodes: %d joined, %s wanted, %.0f s so far%s", w->joined,
                       wanted, (double)waited / 1000.0, missing);
    agent__ev_waiting(group->job.events,
                      &(agent_ev_waiting){ .joined = w->joined,
                                           .min_nodes = group->job.opts->min_nodes,
                                           .waited_ms = (int64_t)waited,
                                           .missing = w->missing,
                                           .running_generation = w->running_generation });
}

/* On etcd the rendezvous keys are not in the job's store (and the agent's
 * store handle changes every generation): no look, only how long. */
static bool rendezvous_in_store(const agent_group *group)
{
    const char *backend = group->job.opts != NULL ? group->job.opts->rdzv_backend : NULL;
    return backend == NULL || (strcmp(backend, "etcd-v3") != 0 && strcmp(backend, "etcd") != 0);
}

static void on_waiting_timer(uv_timer_t *timer)
{
    agent_waiting *w = timer->data;
    if (w->in_flight || !agent__group_in_rendezvous(w->group)) return;
    if (!rendezvous_in_store(w->group)) {
        agent__console(w->group, "waiting for nodes: %d to %d wanted, %.0f s so far",
                       w->group->job.opts->min_nodes, w->group->job.opts->max_nodes,
                       (double)(elastic__now_ms() - w->group->clock.rendezvous_started_ms) /
                           1000.0);
        return;
    }
    w->last_generation = w->group->m.generations > 0 ? w->group->current.generation : 0;
    w->work.data = w;
    if (uv_queue_work(w->group->loop, &w->work, look, looked) == 0) w->in_flight = true;
}

int agent__waiting_init(agent_group *group)
{
    agent_waiting *w = &group->waiting;
    w->group = group;
    int rc = uv_timer_init(group->loop, &w->timer);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "agent loop: %s", uv_strerror(rc));
    w->timer.data = w;
    return 0;
}

void agent__waiting_start(agent_group *group)
{
    if (group->job.opts == NULL || group->job.opts->max_nodes <= 1)
        return; /* one node: nobody to wait for */
    if (rendezvous_in_store(group) && group->store.client == NULL) return;
    uv_timer_start(&group->waiting.timer, on_waiting_timer, WAITING_EVERY_MS, WAITING_EVERY_MS);
}

void agent__waiting_stop(agent_group *group)
{
    uv_timer_stop(&group->waiting.timer);
}

void agent__waiting_close(agent_group *group)
{
    uv_close((uv_handle_t *)&group->waiting.timer, NULL);
}
