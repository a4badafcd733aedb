/*
 * Membership of the job: one node in memory (membership_local.c) or the
 * rendezvous (membership_rdzv.c).
 */
#ifndef ELASTIC_AGENT_MEMBERSHIP_H
#define ELASTIC_AGENT_MEMBERSHIP_H

#include "agent/agent.h"

typedef struct agent_membership agent_membership;
/* News that the current generation must end; runs on any thread. */
typedef void (*agent_change_fn)(void *user, const elastic_rdzv_cause *cause);

typedef struct agent_membership_ops {
    bool next_blocks; /* run next() on a helper thread */
    int (*next)(agent_membership *m, elastic_rdzv_result *result);
    int (*end_generation)(agent_membership *m, const elastic_rdzv_cause *cause);
    int (*finish)(agent_membership *m);
    int (*leave)(agent_membership *m);
    int (*first_failure)(agent_membership *m, elastic_rdzv_cause *cause);
    void (*destroy)(agent_membership *m);
} agent_membership_ops;

struct agent_membership {
    const agent_membership_ops *ops;
};

/* One node that needs no one's agreement: generations, budget and the first
 * failure are kept in memory. */
int agent__membership_local(int nproc, int max_restarts, const char *master_addr,
                            agent_membership **m);

/* Several nodes: elastic_rdzv_* over the job's store; on_change runs on the
 * rendezvous' thread when the current generation must end. */
int agent__membership_rdzv(const elastic_rdzv_opts *opts, agent_change_fn on_change, void *user,
                           agent_membership **m);
/* The same on etcd: every generation also gets its own job store (jobstore, not owned). */
typedef struct agent_jobstore agent_jobstore;
int agent__membership_etcd(const elastic_rdzv_opts *opts, agent_jobstore *jobstore,
                           agent_change_fn on_change, void *user, agent_membership **m);
/* The rendezvous handle of a membership made by either (NULL otherwise). */
elastic_rdzv *agent__membership_handle(agent_membership *m);

#endif /* ELASTIC_AGENT_MEMBERSHIP_H */
