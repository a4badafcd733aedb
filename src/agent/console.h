/*
 * console.c: one line on stderr per event a person needs (nothing with
 * --quiet); errorfile.c: a worker's error file as traceback lines.
 */
#ifndef ELASTIC_AGENT_CONSOLE_H
#define ELASTIC_AGENT_CONSOLE_H

#include "agent/group.h"

void agent__console(const agent_group *group, const char *fmt, ...) ELASTIC__PRINTF(2, 3);
/* A local worker's failure, said once it is decided (failure_say.c): head
 * is "rank R (local rank L, pid P) on node N failed: WHAT"; then what
 * follows it and its class and error (kind). */
typedef enum agent_failure_then {
    AGENT_FAILURE_UNDECIDED,     /* the agent left before the decision: nothing claimed */
    AGENT_FAILURE_RESTARTS,      /* a restart, one of --max-restarts spent (or none left) */
    AGENT_FAILURE_RESTARTS_FREE, /* a restart that spends none (the store's host was lost) */
    AGENT_FAILURE_STOPS,         /* the failure policy stops the job: a deterministic bug */
} agent_failure_then;
void agent__console_failure_head(const agent_group *group, const agent_worker *worker,
                                 const elastic_rdzv_cause *cause, char *out, size_t size);
void agent__console_failure_said(const agent_group *group, const char *head,
                                 agent_failure_then then, const char *kind);
void agent__console_ended_elsewhere(const agent_group *group, const elastic_rdzv_cause *cause);
void agent__console_running_again(const agent_group *group, uint64_t recovery_ms);
/* This node lost its membership lease (group.c's handle_fenced). */
void agent__console_fenced(const agent_group *group, uint64_t generation, const char *reason,
                           int killed);
/* This node gave way to a spare as the job's straggler (node_straggler.c). */
void agent__console_evicted(const agent_group *group, const agent_evict_call *call);
void agent__console_job_end(const agent_group *group, agent_end_status status);
/* "killed by signal 9 (SIGKILL)", "exit code 3", or "" when neither. */
void agent__describe_exit(int exit_code, int term_signal, char *out, size_t size);
/* A cause's reason said once (a probe's words plus how the worker ended). */
void agent__describe_cause(const elastic_rdzv_cause *cause, char *out, size_t size);

/* errorfile.c: a worker's torchrun error file as indented traceback lines;
 * 0 when it is not such JSON (the caller shows it as it is). */
size_t agent__error_file_render(const char *json, char *out, size_t size);

#endif /* ELASTIC_AGENT_CONSOLE_H */
