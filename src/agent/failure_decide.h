/*
 * A local failure's job-wide decision, off the loop (failure_say.c builds
 * it, calls.c runs it): the CLASSIFY call's payload. Its run records the
 * failure in the job's history in the rendezvous' keys (c10d store or etcd)
 * and replays the policy over it (agent/failure_history.c), so every node
 * decides the same way, and a decision outlives the agent that made it.
 * With no rendezvous (--standalone, the static backend: one node's
 * membership) the history is this node's own, kept in memory by
 * failure_say.c and touched only by these calls, which run in order.
 */
#ifndef ELASTIC_AGENT_FAILURE_DECIDE_H
#define ELASTIC_AGENT_FAILURE_DECIDE_H

#include "agent/failure_report.h"
#include "common/failure_policy.h"
#include "elastic.h"

/* Store calls of a decision are bounded by this. */
#define AGENT_FAILURE_DECIDE_TIMEOUT_MS 10000

typedef struct agent_classify {
    failure_policy_config config;
    failure_policy_entry entry;
    failure_verdict verdict;
    agent_failure_facts facts;
    failure_policy_result today;    /* what the rendezvous' counting does with it */
    failure_policy_result result;   /* back: the decision said (today's, or the policy's stop) */
    failure_policy_history *memory; /* no rendezvous: failure_say.c's */
    int rc;
    char error[256];
} agent_classify;

/* On the calls thread: the decision into c->result, over the rendezvous'
 * history (rdzv; NULL: c->memory). A stop for a deterministic bug is the
 * policy's, and so is a node quarantine; any other decision is what the
 * rendezvous' budget does today (c->today). A rendezvous that does not
 * answer: today's decision, rc set. */
void agent__failure_decide_run(elastic_rdzv *rdzv, agent_classify *c);

/* On the calls thread, after this failure's END call: the cause that ended
 * the generation (the rendezvous keeps the first; won, NULL: not known). A
 * rank whose collective broke (class comm, or a hang) after another rank's
 * failure had already ended the generation is that failure's consequence:
 * it names that rank and decides nothing. Anything else keeps its verdict: a
 * crash that lost the race to end the generation is still a failure of its
 * own, never blamed on the rank that noticed first. */
void agent__failure_note_peer(agent_classify *c, const elastic_rdzv_cause *won);

#endif /* ELASTIC_AGENT_FAILURE_DECIDE_H */
