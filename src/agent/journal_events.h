/*
 * Every event the agent writes, typed: one struct of fields and one
 * constructor per event type (journal_events.c, the only file that knows
 * an event's fields and its JSON). A caller fills the struct and calls
 * agent__ev_<type>(events, &fields); the constructor writes the line and,
 * for the events the goodput accounting reads, hands the accounting its
 * record as a struct (never by parsing the line just written).
 * docs/OPERATIONS.md lists each event with its fields.
 */
#ifndef ELASTIC_AGENT_JOURNAL_EVENTS_H
#define ELASTIC_AGENT_JOURNAL_EVENTS_H

#include "agent/journal.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define AGENT_EV_ABSENT INT64_MIN /* an optional number not written */

/* The fields every event about one worker starts with. */
typedef struct agent_ev_worker {
    uint64_t generation;
    int rank, local_rank;
    pid_t pid;
} agent_ev_worker;

typedef struct agent_ev_agent_started {
    int nproc_per_node, min_nodes, max_nodes, max_restarts;
    const char *store;
    bool hosts_store;
    const char *slurm_job, *slurm_node; /* NULL: not under Slurm */
} agent_ev_agent_started;
void agent__ev_agent_started(agent_events *events, const agent_ev_agent_started *ev);

typedef struct agent_ev_generation_formed {
    uint64_t generation;
    int group_rank, group_world_size, rank_base, local_world_size, world_size, restart_count;
    int64_t rendezvous_ms;
} agent_ev_generation_formed;
void agent__ev_generation_formed(agent_events *events, const agent_ev_generation_formed *ev);

typedef struct agent_ev_worker_started {
    agent_ev_worker worker;
    bool started_ahead; /* the process is an interpreter started ahead (prestart.c) */
} agent_ev_worker_started;
void agent__ev_worker_started(agent_events *events, const agent_ev_worker_started *ev);
void agent__ev_worker_reconfigured(agent_events *events, const agent_ev_worker *ev);

typedef struct agent_ev_worker_exited {
    agent_ev_worker worker;
    int exit_code, signal;
    int64_t runtime_ms;
} agent_ev_worker_exited;
void agent__ev_worker_exited(agent_events *events, const agent_ev_worker_exited *ev);

typedef struct agent_ev_failure {
    agent_ev_worker worker;
    int exit_code, signal;
    const char *reason;
} agent_ev_failure;
void agent__ev_failure(agent_events *events, const agent_ev_failure *ev);

typedef struct agent_ev_generation_ended {
    uint64_t generation;
    int cause; /* elastic_rdzv_cause_kind */
    const char *by_node;
    int rank;
    const char *reason;
} agent_ev_generation_ended;
void agent__ev_generation_ended(agent_events *events, const agent_ev_generation_ended *ev);

typedef struct agent_ev_fenced {
    uint64_t generation;
    int running;
    const char *store, *reason;
} agent_ev_fenced;
void agent__ev_fenced(agent_events *events, const agent_ev_fenced *ev);

typedef struct agent_ev_generation_stopped {
    uint64_t generation;
    int64_t stop_ms;
} agent_ev_generation_stopped;
void agent__ev_generation_stopped(agent_events *events, const agent_ev_generation_stopped *ev);

/* restarted (full restart) and reconfigured (in process): the generation and how long it took. */
typedef struct agent_ev_recovered {
    uint64_t generation;
    int64_t recovery_ms;
} agent_ev_recovered;
void agent__ev_restarted(agent_events *events, const agent_ev_recovered *ev);
void agent__ev_reconfigured(agent_events *events, const agent_ev_recovered *ev);

typedef struct agent_ev_checkpoint {
    uint64_t generation;
    int rank, local_rank;
    uint64_t step;
    int64_t saved_ms; /* wall clock */
} agent_ev_checkpoint;
void agent__ev_checkpoint(agent_events *events, const agent_ev_checkpoint *ev);

typedef struct agent_ev_waiting {
    int joined, min_nodes;
    int64_t waited_ms;
    const char *missing;
    uint64_t running_generation;
} agent_ev_waiting;
void agent__ev_waiting(agent_events *events, const agent_ev_waiting *ev);

typedef struct agent_ev_job_end {
    const char *status;
    int exit_code;
    uint64_t generations;
    int64_t duration_ms;
    int restarts;
    int64_t lost_ms;
    const char *why; /* a failed end: its summary's first line (NULL or "": omitted) */
} agent_ev_job_end;
void agent__ev_job_end(agent_events *events, const agent_ev_job_end *ev);

/* nccl_comm_built: the worker's report, its upper-case keys written in lower case,
 * a value that reads as a number written as one. */
#define AGENT_EV_MAX_EXTRA 16
typedef struct agent_ev_nccl_comm_built {
    uint64_t generation;
    int rank, local_rank;
    const char *const *keys, *const *values;
    int count;
} agent_ev_nccl_comm_built;
void agent__ev_nccl_comm_built(agent_events *events, const agent_ev_nccl_comm_built *ev);

/* probe_failed and straggler: a probe's finding about one rank. */
typedef struct agent_ev_probe {
    uint64_t generation;
    const char *probe;
    int rank, local_rank;
    uint64_t last_step;
    const char *reason;
} agent_ev_probe;
void agent__ev_probe_failed(agent_events *events, const agent_ev_probe *ev);
void agent__ev_straggler(agent_events *events, const agent_ev_probe *ev);

typedef struct agent_ev_node_straggler {
    uint64_t generation;
    const char *straggler; /* "node" is the reporter */
    double score;
    unsigned rounds;
    int64_t step_time_ms;
} agent_ev_node_straggler;
void agent__ev_node_straggler(agent_events *events, const agent_ev_node_straggler *ev);

/* straggler_evicted and health_stepped_aside: this node stepped aside for a spare. */
typedef struct agent_ev_stepped_aside {
    uint64_t generation;
    const char *straggler; /* straggler_evicted: this node */
    double score;          /* straggler_evicted */
    int64_t step_time_ms;  /* straggler_evicted */
    const char *reason;    /* health_stepped_aside */
    int spares_waiting;
    const char *replacement;
    int quarantine_ms;
} agent_ev_stepped_aside;
void agent__ev_straggler_evicted(agent_events *events, const agent_ev_stepped_aside *ev);
void agent__ev_health_stepped_aside(agent_events *events, const agent_ev_stepped_aside *ev);

/* Silent data corruption: a checkpoint step's replicated blobs differed
 * between ranks (divergence.c; the evidence the worker's library wrote). */
typedef struct agent_ev_replica_divergence {
    uint64_t generation, step;
    const char *tier, *mode;
    bool committed; /* warn mode: the step committed (no disruption) */
    const char *blob;
    int blobs, compared, majority;
    const char *majority_ranks, *majority_digest;
    const char *minority_ranks, *minority_nodes, *minority_local_ranks, *minority_hosts,
        *minority_digests;
    bool here;        /* this node holds a minority rank */
    const char *gpus; /* its minority ranks' GPUs the health inventory knows; "" none */
    const char *reason;
} agent_ev_replica_divergence;
void agent__ev_replica_divergence(agent_events *events, const agent_ev_replica_divergence *ev);

void agent__ev_quarantine_ended(agent_events *events, uint64_t generation);

typedef struct agent_ev_slurm_drain {
    const char *slurm_node, *slurm_job, *reason;
    bool drained;
    const char *detail;
} agent_ev_slurm_drain;
void agent__ev_slurm_drain(agent_events *events, const agent_ev_slurm_drain *ev);

typedef struct agent_ev_steps_started {
    uint64_t generation;
    int64_t step, first_step_ms, restore_ms;
} agent_ev_steps_started;
void agent__ev_steps_started(agent_events *events, const agent_ev_steps_started *ev);

typedef struct agent_ev_steps_ended {
    uint64_t generation;
    int64_t last_step, last_step_ms, step_us, save_stall_ms;
} agent_ev_steps_ended;
void agent__ev_steps_ended(agent_events *events, const agent_ev_steps_ended *ev);

typedef struct agent_ev_health_check {
    const char *check;
    int gpu;
    const char *uuid, *pci_bus_id, *port;
    int64_t value;
    const char *verdict, *reason;
    uint64_t round;
} agent_ev_health_check;
void agent__ev_health_check(agent_events *events, const agent_ev_health_check *ev);

typedef struct agent_ev_checkpoint_saved {
    uint64_t generation;
    int rank, local_rank;
    uint64_t step;
    const char *tier; /* "memory", "disk" */
} agent_ev_checkpoint_saved;
void agent__ev_checkpoint_saved(agent_events *events, const agent_ev_checkpoint_saved *ev);

typedef struct agent_ev_checkpoint_restored {
    uint64_t generation;
    int rank, local_rank;
    uint64_t step;
    const char *source; /* "local", "peer", "disk" */
    int64_t bytes, ms;
    const char *from_node; /* the copy's node ("node" is the reporter) */
} agent_ev_checkpoint_restored;
void agent__ev_checkpoint_restored(agent_events *events, const agent_ev_checkpoint_restored *ev);

typedef struct agent_ev_restore_planned {
    uint64_t generation;
    bool planned;
    uint64_t step; /* written when planned */
    bool committed;
    const char *why;
} agent_ev_restore_planned;
void agent__ev_restore_planned(agent_events *events, const agent_ev_restore_planned *ev);

/* spare_started, spare_parked, spare_awaited, spare_exited, spares_disabled: one warm spare. */
typedef struct agent_ev_spare {
    uint64_t generation;
    int spare;
    pid_t pid;
    int64_t startup_ms;    /* spare_parked; spare_awaited: its start-up so far */
    int64_t wait_ms;       /* spare_awaited: at most this long (its startup timeout's rest) */
    int rank;              /* spare_awaited: the first rank that waits for it */
    int exit_code, signal; /* spare_exited */
    const char *reason;    /* spares_disabled */
} agent_ev_spare;
void agent__ev_spare_started(agent_events *events, const agent_ev_spare *ev);
void agent__ev_spare_parked(agent_events *events, const agent_ev_spare *ev);
void agent__ev_spare_awaited(agent_events *events, const agent_ev_spare *ev);
void agent__ev_spare_exited(agent_events *events, const agent_ev_spare *ev);
void agent__ev_spares_disabled(agent_events *events, const agent_ev_spare *ev);

typedef struct agent_ev_spare_promoted {
    agent_ev_worker worker;
    int spare;
    int64_t parked_ms;
} agent_ev_spare_promoted;
void agent__ev_spare_promoted(agent_events *events, const agent_ev_spare_promoted *ev);

/* recovery_phases: AGENT_EV_ABSENT for a phase not measured. */
#define AGENT_EV_MAX_PHASES 8
typedef struct agent_ev_recovery_phases {
    uint64_t generation;
    bool complete;
    int64_t detect_ms, stop_ms, rendezvous_ms;
    int64_t attach_ms; /* written as cold_start_ms when cold_started > 0, else promote_ms */
    int promoted, cold_started;
    const char *phase_names[AGENT_EV_MAX_PHASES]; /* the workers' named phases; NULL ends */
    int64_t phase_ms[AGENT_EV_MAX_PHASES];
    int64_t total_ms;
} agent_ev_recovery_phases;
void agent__ev_recovery_phases(agent_events *events, const agent_ev_recovery_phases *ev);

/* failure_classified: a failure's class, signature and the failure policy's
 * decision (src/common/failure_class.h, failure_policy.h; strings never NULL). */
typedef struct agent_ev_failure_classified {
    uint64_t generation;
    int rank, local_rank;
    int64_t step; /* -1: not known */
    int exit_code, signal;
    const char *cls; /* failure__class_name */
    bool consequence;
    int cause_rank; /* a consequence: the rank that failed first, -1 not known */
    const char *type, *frame, *message, *signature, *evidence;
    const char *decision, *rule, *why;
    int budget_used, max_restarts;
    bool quarantine;
} agent_ev_failure_classified;
void agent__ev_failure_classified(agent_events *events, const agent_ev_failure_classified *ev);

#endif /* ELASTIC_AGENT_JOURNAL_EVENTS_H */
