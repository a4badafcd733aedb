/*
 * A node's quarantine: it stepped aside (a straggler, a node the failure
 * policy quarantined, silent corruption) and sits out --straggler-quarantine
 * before it rejoins as a waiting node. Meanwhile it looks every second, on
 * the calls thread, whether the job has been closed (it finished, or
 * stopped): then the quarantine ends at once and the node, rejoining, learns
 * the outcome as any waiting node does (a job that finished without it:
 * exit 0, left out). Without the look, a node quarantined as the job ended
 * sat out its whole quarantine (5 minutes by default), and on c10d found the
 * store's host gone by then (the host serves such a node 30 s): exit 1, "lost
 * the job's store", for a job that had succeeded (a chaos soak, seed 2026).
 */
#include "agent/quarantine.h"

#include "agent/calls.h"
#include "agent/console.h"
#include "agent/group.h"
#include "agent/membership.h"

#include "common/clock.h"
#include "rdzv/rdzv.h"

#include <stdbool.h>
#include <stdlib.h>

#define QUARANTINE_LOOK_MS 1000

struct agent_quarantine {
    agent_group *group;
    uv_timer_t timer;
    bool active;       /* quarantined now */
    uint64_t until_ms; /* monotonic: when it is over */
    bool looking;      /* a LOOK call is out */
};

/* The LOOK call: is the job closed? (ELASTIC_ECLOSED / ELASTIC_EBUDGET: yes) */
typedef struct look_call {
    agent_call base;
    agent_membership *membership;
    agent_quarantine *quarantine;
} look_call;

static void look_run(agent_call *call)
{
    elastic_rdzv *handle = agent__membership_handle(((look_call *)call)->membership);
    agent__call_status(call, handle != NULL ? rdzv__check_closed(handle) : 0);
}

static void look_done(agent_group *group, agent_call *call, agent_input *in)
{
    agent_quarantine *q = ((look_call *)call)->quarantine;
    q->looking = false;
    if (!q->active || (call->rc != ELASTIC_ECLOSED && call->rc != ELASTIC_EBUDGET))
        return; /* over already, open, or the store did not answer: look again */
    q->active = false;
    uv_timer_stop(&q->timer);
    agent__console(group, "the job was closed while this node sat out its quarantine: rejoining "
                          "to learn how it ended");
    in->kind = AGENT_IN_QUARANTINE_OVER;
}

static const agent_call_type look_type = { look_run, look_done, NULL };

static void on_tick(uv_timer_t *timer)
{
    agent_quarantine *q = timer->data;
    if (!q->active) return;
    if (elastic__now_ms() >= q->until_ms) {
        q->active = false;
        uv_timer_stop(&q->timer);
        agent__group_post(q->group, &(agent_group_event){ .kind = AGENT_GROUP_QUARANTINE_OVER });
        return;
    }
    if (q->looking || agent__membership_handle(q->group->membership) == NULL) return;
    look_call *call = agent__call_alloc(sizeof *call, AGENT_CALL_QUARANTINE_LOOK, &look_type);
    if (call == NULL) return; /* no memory: the quarantine still ends on time */
    call->membership = q->group->membership;
    call->quarantine = q;
    q->looking = true;
    agent__call_post(q->group, &call->base);
}

int agent__quarantine_init(agent_group *group)
{
    agent_quarantine *q = calloc(1, sizeof *q);
    if (q == NULL) return elastic__fail(ELASTIC_ENOMEM, "agent: quarantine");
    int rc = uv_timer_init(group->loop, &q->timer);
    if (rc != 0) {
        free(q);
        return elastic__fail(ELASTIC_ESYS, "agent loop: %s", uv_strerror(rc));
    }
    q->group = group;
    q->timer.data = q;
    group->quarantine = q;
    return 0;
}

void agent__quarantine_start(agent_group *group, int64_t ms)
{
    agent_quarantine *q = group->quarantine;
    q->active = true;
    q->until_ms = elastic__now_ms() + (uint64_t)(ms > 0 ? ms : 0);
    uint64_t first = ms < QUARANTINE_LOOK_MS ? (uint64_t)(ms > 0 ? ms : 0) : QUARANTINE_LOOK_MS;
    uv_timer_start(&q->timer, on_tick, first, QUARANTINE_LOOK_MS);
}

void agent__quarantine_stop(agent_group *group)
{
    if (group->quarantine == NULL) return;
    group->quarantine->active = false;
    uv_timer_stop(&group->quarantine->timer);
}

static void free_on_close(uv_handle_t *handle)
{
    free(handle->data);
}

void agent__quarantine_close(agent_group *group)
{
    if (group->quarantine == NULL) return;
    uv_close((uv_handle_t *)&group->quarantine->timer, free_on_close);
    group->quarantine = NULL;
}
