/*
 * Membership of a job with several nodes: the rendezvous module over the
 * job's store or etcd. next() blocks (the group runs it on a helper thread);
 * the rendezvous' monitor thread reports a generation's end to the group.
 * On etcd, next() also gives the generation its job store (generation_store.c).
 */
#include "agent/membership.h"

#include "agent/generation_store.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct rdzv_membership {
    agent_membership base;
    elastic_rdzv *rdzv;
    agent_jobstore *jobstore; /* etcd: the per-generation store; NULL otherwise */
} rdzv_membership;

static elastic_rdzv *handle(agent_membership *m)
{
    return ((rdzv_membership *)m)->rdzv;
}

static int rdzv_next(agent_membership *m, elastic_rdzv_result *result)
{
    agent_jobstore *jobstore = ((rdzv_membership *)m)->jobstore;
    for (;;) {
        int rc = elastic_rdzv_next(handle(m), result);
        if (rc != 0 || jobstore == NULL) return rc;
        rc = agent__jobstore_attach(jobstore, handle(m), result);
        if (rc == 0) return 0;
        /* The host died before it published (or cannot be reached): this
         * generation cannot work; end it for all (a lost node costs no
         * budget) and form the next one. */
        char reason[256];
        snprintf(reason, sizeof reason, "job store of generation %llu unreachable: %.180s",
                 (unsigned long long)result->generation, elastic_last_error());
        ELASTIC_LOG_W("agent", "%s", reason);
        elastic_rdzv_cause cause = {
            .struct_size = sizeof cause, .kind = ELASTIC_RDZV_NODE_LOST, .rank = -1, .exit_code = -1
        };
        snprintf(cause.reason, sizeof cause.reason, "%s", reason);
        rc = elastic_rdzv_end_generation(handle(m), &cause);
        if (rc != 0) return rc;
    }
}

static int rdzv_end_generation(agent_membership *m, const elastic_rdzv_cause *cause)
{
    return elastic_rdzv_end_generation(handle(m), cause);
}

static int rdzv_finish(agent_membership *m)
{
    return elastic_rdzv_finish(handle(m));
}
static int rdzv_leave(agent_membership *m)
{
    return elastic_rdzv_leave(handle(m));
}

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

elastic_rdzv *agent__membership_handle(agent_membership *m)
{
    return m != NULL && m->ops == &rdzv_ops ? handle(m) : NULL;
}

int agent__membership_etcd(const elastic_rdzv_opts *opts, agent_jobstore *jobstore,
                           agent_change_fn on_change, void *user, agent_membership **out)
{
    int rc = agent__membership_rdzv(opts, on_change, user, out);
    if (rc == 0) ((rdzv_membership *)*out)->jobstore = jobstore;
    return rc;
}

int agent__membership_rdzv(const elastic_rdzv_opts *opts, agent_change_fn on_change, void *user,
                           agent_membership **out)
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
