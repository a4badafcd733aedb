/*
 * Membership of a job with several nodes: the rendezvous module over the
 * job's store. next() blocks (the group runs it on a helper thread); the
 * rendezvous' monitor thread reports a generation's end to the group.
 */
#include "agent/group.h"

#include <stdlib.h>

typedef struct rdzv_membership {
    agent_membership base;
    elastic_rdzv *rdzv;
} rdzv_membership;

static elastic_rdzv *handle(agent_membership *m) { return ((rdzv_membership *)m)->rdzv; }

static int rdzv_next(agent_membership *m, elastic_rdzv_result *result) { return elastic_rdzv_next(handle(m), result); }

static int rdzv_end_generation(agent_membership *m, const elastic_rdzv_cause *cause)
{
    return elastic_rdzv_end_generation(handle(m), cause);
}

static int rdzv_finish(agent_membership *m) { return elastic_rdzv_finish(handle(m)); }
static int rdzv_leave(agent_membership *m) { return elastic_rdzv_leave(handle(m)); }

static int rdzv_first_failure(agent_membership *m, elastic_rdzv_cause *cause)
{
    return elastic_rdzv_first_failure(handle(m), cause);
}

static void rdzv_destroy(agent_membership *m)
{
    elastic_rdzv_free(handle(m));
    free(m);
}

static const agent_membership_ops rdzv_ops = {
    .next_blocks = true,
    .next = rdzv_next,
    .end_generation = rdzv_end_generation,
    .finish = rdzv_finish,
    .leave = rdzv_leave,
    .first_failure = rdzv_first_failure,
    .destroy = rdzv_destroy,
};

int agent__membership_rdzv(const elastic_rdzv_opts *opts, agent_change_fn on_change, void *user, agent_membership **out)
{
    rdzv_membership *membership = calloc(1, sizeof *membership);
    if (membership == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    membership->base.ops = &rdzv_ops;
    int rc = elastic_rdzv_open(opts, &membership->rdzv);
    if (rc == 0) rc = elastic_rdzv_on_change(membership->rdzv, on_change, user);
    if (rc != 0) {
        elastic_rdzv_free(membership->rdzv);
        free(membership);
        return rc;
    }
    *out = &membership->base;
    return 0;
}
