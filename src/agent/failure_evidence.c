/*
 * The classifier's evidence from the agent's record of a failure
 * (failure_evidence.h).
 */
#include "agent/failure_evidence.h"

#include <string.h>

int agent__failure_source_of_probe(const char *probe)
{
    if (probe == NULL || *probe == '\0') return FS_WORKER_EXIT;
    if (strcmp(probe, "hang") == 0 || strcmp(probe, "startup") == 0) return FS_PROBE_HANG;
    if (strncmp(probe, "nccl", 4) == 0) return FS_PROBE_NCCL;
    if (strcmp(probe, "straggler") == 0) return FS_PROBE_STRAGGLER;
    return FS_PROBE_USER;
}

void agent__failure_evidence(const agent_failure *f, const char *probe, const char *reason,
                             bool oom_kill, const char *health_finding, bool peer_failed_first,
                             int peer_rank, failure_evidence *out)
{
    memset(out, 0, sizeof *out);
    out->source = agent__failure_source_of_probe(probe);
    out->exit_code = f->valid ? f->cause.exit_code : -1;
    out->signal = f->valid ? f->cause.signal : 0;
    out->error_file = f->valid && f->detail_is_error_file ? f->detail : NULL;
    out->stderr_tail = f->valid && !f->detail_is_error_file ? f->detail : NULL;
    out->reason = reason;
    out->oom_kill = oom_kill;
    out->health_finding = health_finding;
    out->peer_failed_first = peer_failed_first;
    out->peer_rank = peer_rank;
}
