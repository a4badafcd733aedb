/*
 * What the agent saw of a failure, as the classifier's evidence
 * (failure_evidence.c): its recorded local failure (the error file or the
 * stderr tail, failure.h), the probe that ended it, the OOM witnesses
 * (oom.h), a fatal health finding, and whether a peer failed first.
 */
#ifndef ELASTIC_AGENT_FAILURE_EVIDENCE_H
#define ELASTIC_AGENT_FAILURE_EVIDENCE_H

#include "agent/failure.h"
#include "common/failure_class.h"

/* The source a probe's name says (hang, startup, nccl_timeout, nccl_error,
 * straggler, anything else a user probe's); NULL: a worker's own exit. */
int agent__failure_source_of_probe(const char *probe);

/* out's strings point into f and the arguments: valid while they are. */
void agent__failure_evidence(const agent_failure *f, const char *probe, const char *reason,
                             bool oom_kill, const char *health_finding, bool peer_failed_first,
                             int peer_rank, failure_evidence *out);

#endif /* ELASTIC_AGENT_FAILURE_EVIDENCE_H */
