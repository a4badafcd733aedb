/*
 * The job's history of classified failures, job-wide, in the rendezvous'
 * own keys (failure_history.c; src/rdzv/jobkv.c): the c10d store or etcd
 * alike, so it outlives the generation and the agent that decided, and a
 * node replaced or restarted decides over the same history. A ring of
 * AGENT_FAILURE_HISTORY_SLOTS records, agent/failures/<slot>, the slot
 * taken from one counter (agent/failures_seq): bounded in size however long
 * the job runs (the oldest are overwritten). Each value is a failure record
 * (src/common/failure_record.h), validated when read back: the store is
 * input. Every node that records a failure writes it; the node that decides
 * reads the ring back and replays the policy over the newest
 * FAILURE_POLICY_MAX_ENTRIES, so every decider sees the same history.
 * Calls: the calls thread's (each is one or two backend requests).
 */
#ifndef ELASTIC_AGENT_FAILURE_HISTORY_H
#define ELASTIC_AGENT_FAILURE_HISTORY_H

#include "common/failure_policy.h"
#include "elastic.h"

/* Records kept job-wide: 1024 x at most FAILURE_RECORD_MAX bytes. */
#define AGENT_FAILURE_HISTORY_SLOTS 1024

int agent__failure_history_put(elastic_rdzv *r, const failure_policy_entry *entry);
/* The newest entries in (generation, time) order, one per (generation,
 * node, rank), and the counters the policy reaches replaying them under
 * config (records that do not decode are skipped). */
int agent__failure_history_read(elastic_rdzv *r, int timeout_ms,
                                const failure_policy_config *config, failure_policy_history *out);

/* The job-wide decision for `latest`, this node's failure: its record is
 * written (not a consequence's: the policy never counts those, and a broken
 * collective on every rank must not flush the ring), the history read back
 * (it holds latest and every other node's failures written so far) and the
 * policy run over the history before latest, then over latest. */
int agent__failure_history_decide(elastic_rdzv *r, int timeout_ms,
                                  const failure_policy_config *config,
                                  const failure_policy_entry *latest, failure_policy_result *out);

#endif /* ELASTIC_AGENT_FAILURE_HISTORY_H */
