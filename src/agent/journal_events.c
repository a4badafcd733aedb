/*
 * One constructor per event type (journal_events.h): the only place that
 * knows an event's fields, their JSON names and order, and which goodput
 * record it is. The line writer underneath is journal.c's.
 */
#include "agent/journal_events.h"

#include "common/goodput.h"
#include "common/parse_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* A record of the goodput accounting, stamped with the line's time. */
static goodput_record record(const agent_event *event, int kind, int64_t generation)
{
    return (goodput_record){
        .ts_ms = event->ts_ms, .kind = kind, .generation = generation, .a = -1, .b = -1
    };
}

static goodput_record disruption(const agent_event *event, int cause, uint64_t generation)
{
    goodput_record r = record(event, GP_DISRUPTION, (int64_t)generation);
    r.cause = cause;
    return r;
}

static void put_worker(agent_event *event, const agent_ev_worker *w)
{
    agent__event_int(event, "generation", (int64_t)w->generation);
    agent__event_int(event, "rank", w->rank);
    agent__event_int(event, "local_rank", w->local_rank);
    agent__event_int(event, "pid", w->pid);
}

static void put_score(agent_event *event, double score)
{
    char text[32];
    snprintf(text, sizeof text, "%.3f", score);
    agent__event_str(event, "score", text);
}

void agent__ev_agent_started(agent_events *events, const agent_ev_agent_started *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_AGENT_STARTED);
    agent__event_int(&event, "nproc_per_node", ev->nproc_per_node);
    agent__event_int(&event, "min_nodes", ev->min_nodes);
    agent__event_int(&event, "max_nodes", ev->max_nodes);
    agent__event_int(&event, "max_restarts", ev->max_restarts);
    agent__event_str(&event, "store", ev->store);
    agent__event_int(&event, "hosts_store", ev->hosts_store);
    if (ev->slurm_job != NULL) agent__event_str(&event, "slurm_job", ev->slurm_job);
    if (ev->slurm_node != NULL) agent__event_str(&event, "slurm_node", ev->slurm_node);
    goodput_record r = record(&event, GP_START, -1);
    agent__event_emit_record(events, &event, &r);
}

void agent__ev_generation_formed(agent_events *events, const agent_ev_generation_formed *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_GENERATION_FORMED);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "group_rank", ev->group_rank);
    agent__event_int(&event, "group_world_size", ev->group_world_size);
    agent__event_int(&event, "rank_base", ev->rank_base);
    agent__event_int(&event, "local_world_size", ev->local_world_size);
    agent__event_int(&event, "world_size", ev->world_size);
    agent__event_int(&event, "restart_count", ev->restart_count);
    agent__event_int(&event, "rendezvous_ms", ev->rendezvous_ms);
    goodput_record r = record(&event, GP_FORMED, (int64_t)ev->generation);
    agent__event_emit_record(events, &event, &r);
}

void agent__ev_worker_started(agent_events *events, const agent_ev_worker_started *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_WORKER_STARTED);
    put_worker(&event, &ev->worker);
    agent__event_str(&event, "process", ev->started_ahead ? "started_ahead" : "spawned");
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_worker_reconfigured(agent_events *events, const agent_ev_worker *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_WORKER_RECONFIGURED);
    put_worker(&event, ev);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_worker_exited(agent_events *events, const agent_ev_worker_exited *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_WORKER_EXITED);
    put_worker(&event, &ev->worker);
    agent__event_int(&event, "exit_code", ev->exit_code);
    agent__event_int(&event, "signal", ev->signal);
    agent__event_int(&event, "runtime_ms", ev->runtime_ms);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_failure(agent_events *events, const agent_ev_failure *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_FAILURE);
    put_worker(&event, &ev->worker);
    agent__event_int(&event, "exit_code", ev->exit_code);
    agent__event_int(&event, "signal", ev->signal);
    agent__event_str(&event, "reason", ev->reason);
    goodput_record r = disruption(&event, GP_CAUSE_FAILURE, ev->worker.generation);
    agent__event_emit_record(events, &event, &r);
}

void agent__ev_generation_ended(agent_events *events, const agent_ev_generation_ended *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_GENERATION_ENDED);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "cause", ev->cause);
    agent__event_str(&event, "by_node", ev->by_node);
    agent__event_int(&event, "rank", ev->rank);
    agent__event_str(&event, "reason", ev->reason);
    int cause = goodput__cause_of_end(ev->cause);
    goodput_record r = disruption(&event, cause, ev->generation);
    agent__event_emit_record(events, &event, cause >= 0 ? &r : NULL);
}

void agent__ev_fenced(agent_events *events, const agent_ev_fenced *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_FENCED);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "running", ev->running);
    agent__event_str(&event, "store", ev->store);
    agent__event_str(&event, "reason", ev->reason);
    goodput_record r = disruption(&event, GP_CAUSE_FENCED, ev->generation);
    agent__event_emit_record(events, &event, &r);
}

void agent__ev_generation_stopped(agent_events *events, const agent_ev_generation_stopped *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_GENERATION_STOPPED);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "stop_ms", ev->stop_ms);
    goodput_record r = record(&event, GP_STOPPED, (int64_t)ev->generation);
    agent__event_emit_record(events, &event, &r);
}

static void recovered(agent_events *events, agent_event_type type, const agent_ev_recovered *ev)
{
    agent_event event;
    agent__event_begin(&event, events, type);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "recovery_ms", ev->recovery_ms);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_restarted(agent_events *events, const agent_ev_recovered *ev)
{
    recovered(events, AGENT_EVENT_RESTARTED, ev);
}

void agent__ev_reconfigured(agent_events *events, const agent_ev_recovered *ev)
{
    recovered(events, AGENT_EVENT_RECONFIGURED, ev);
}

void agent__ev_checkpoint(agent_events *events, const agent_ev_checkpoint *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_CHECKPOINT);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "rank", ev->rank);
    agent__event_int(&event, "local_rank", ev->local_rank);
    agent__event_int(&event, "step", (int64_t)ev->step);
    agent__event_int(&event, "saved_ms", ev->saved_ms);
    goodput_record r = record(&event, GP_CHECKPOINT, (int64_t)ev->generation);
    r.a = (int64_t)ev->step;
    if (ev->saved_ms > 0) r.ts_ms = (uint64_t)ev->saved_ms; /* when it was saved, not told */
    agent__event_emit_record(events, &event, &r);
}

void agent__ev_waiting(agent_events *events, const agent_ev_waiting *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_WAITING);
    agent__event_int(&event, "joined", ev->joined);
    agent__event_int(&event, "min_nodes", ev->min_nodes);
    agent__event_int(&event, "waited_ms", ev->waited_ms);
    agent__event_str(&event, "missing", ev->missing);
    agent__event_int(&event, "running_generation", (int64_t)ev->running_generation);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_job_end(agent_events *events, const agent_ev_job_end *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_JOB_END);
    agent__event_str(&event, "status", ev->status);
    agent__event_int(&event, "exit_code", ev->exit_code);
    agent__event_int(&event, "generations", (int64_t)ev->generations);
    agent__event_int(&event, "duration_ms", ev->duration_ms);
    agent__event_int(&event, "restarts", ev->restarts);
    agent__event_int(&event, "lost_ms", ev->lost_ms);
    if (ev->why != NULL && ev->why[0] != '\0') agent__event_str(&event, "why", ev->why);
    goodput_record r = record(&event, GP_END, -1);
    agent__event_emit_record(events, &event, &r);
}

void agent__ev_nccl_comm_built(agent_events *events, const agent_ev_nccl_comm_built *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_NCCL_COMM_BUILT);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "rank", ev->rank);
    agent__event_int(&event, "local_rank", ev->local_rank);
    for (int i = 0; i < ev->count; i++) {
        char key[32];
        size_t n = 0;
        for (; ev->keys[i][n] != '\0' && n + 1 < sizeof key; n++)
            key[n] = (char)tolower((unsigned char)ev->keys[i][n]);
        key[n] = '\0';
        int64_t number; /* a field that reads as a number is written as one */
        if (elastic__parse_i64(NULL, ev->values[i], 0, INT64_MAX, &number) == 0)
            agent__event_int(&event, key, number);
        else
            agent__event_str(&event, key, ev->values[i]);
    }
    agent__event_emit_record(events, &event, NULL);
}

static void probe_event(agent_events *events, agent_event_type type, const agent_ev_probe *ev,
                        const goodput_record *r)
{
    agent_event event;
    agent__event_begin(&event, events, type);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_str(&event, "probe", ev->probe);
    agent__event_int(&event, "rank", ev->rank);
    agent__event_int(&event, "local_rank", ev->local_rank);
    agent__event_int(&event, "last_step", (int64_t)ev->last_step);
    agent__event_str(&event, "reason", ev->reason);
    goodput_record stamped;
    if (r != NULL) {
        stamped = *r;
        stamped.ts_ms = event.ts_ms;
    }
    agent__event_emit_record(events, &event, r != NULL ? &stamped : NULL);
}

void agent__ev_probe_failed(agent_events *events, const agent_ev_probe *ev)
{
    /* No progress (a hang, or never a first beat) is its own cause. */
    bool hang =
        ev->probe != NULL && (strcmp(ev->probe, "hang") == 0 || strcmp(ev->probe, "startup") == 0);
    goodput_record r = { .kind = GP_DISRUPTION,
                         .cause = hang ? GP_CAUSE_HANG : GP_CAUSE_PROBE,
                         .generation = (int64_t)ev->generation,
                         .a = -1,
                         .b = -1 };
    probe_event(events, AGENT_EVENT_PROBE_FAILED, ev, &r);
}

void agent__ev_straggler(agent_events *events, const agent_ev_probe *ev)
{
    probe_event(events, AGENT_EVENT_STRAGGLER, ev, NULL);
}

void agent__ev_node_straggler(agent_events *events, const agent_ev_node_straggler *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_NODE_STRAGGLER);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_str(&event, "straggler", ev->straggler);
    put_score(&event, ev->score);
    agent__event_int(&event, "rounds", ev->rounds);
    agent__event_int(&event, "step_time_ms", ev->step_time_ms);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_straggler_evicted(agent_events *events, const agent_ev_stepped_aside *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_STRAGGLER_EVICTED);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_str(&event, "straggler", ev->straggler);
    put_score(&event, ev->score);
    agent__event_int(&event, "step_time_ms", ev->step_time_ms);
    agent__event_int(&event, "spares_waiting", ev->spares_waiting);
    agent__event_str(&event, "replacement", ev->replacement);
    agent__event_int(&event, "quarantine_ms", ev->quarantine_ms);
    goodput_record r = disruption(&event, GP_CAUSE_PROBE, ev->generation);
    agent__event_emit_record(events, &event, &r);
}

void agent__ev_health_stepped_aside(agent_events *events, const agent_ev_stepped_aside *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_HEALTH_STEPPED_ASIDE);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_str(&event, "reason", ev->reason);
    agent__event_int(&event, "spares_waiting", ev->spares_waiting);
    agent__event_str(&event, "replacement", ev->replacement);
    agent__event_int(&event, "quarantine_ms", ev->quarantine_ms);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_replica_divergence(agent_events *events, const agent_ev_replica_divergence *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_REPLICA_DIVERGENCE);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "step", (int64_t)ev->step);
    agent__event_str(&event, "tier", ev->tier);
    agent__event_str(&event, "mode", ev->mode);
    agent__event_int(&event, "committed", ev->committed ? 1 : 0);
    agent__event_str(&event, "blob", ev->blob);
    agent__event_int(&event, "blobs", ev->blobs);
    agent__event_int(&event, "compared", ev->compared);
    agent__event_int(&event, "majority", ev->majority);
    agent__event_str(&event, "majority_ranks", ev->majority_ranks);
    agent__event_str(&event, "majority_digest", ev->majority_digest);
    agent__event_str(&event, "minority_ranks", ev->minority_ranks);
    agent__event_str(&event, "minority_nodes", ev->minority_nodes);
    agent__event_str(&event, "minority_local_ranks", ev->minority_local_ranks);
    agent__event_str(&event, "minority_hosts", ev->minority_hosts);
    agent__event_str(&event, "minority_digests", ev->minority_digests);
    agent__event_int(&event, "here", ev->here ? 1 : 0);
    agent__event_str(&event, "gpus", ev->gpus);
    agent__event_str(&event, "reason", ev->reason);
    /* Acted on (not committed): the job goes back past it, a disruption of
     * its own cause; warn mode loses nothing. */
    goodput_record r = disruption(&event, GP_CAUSE_SILENT_CORRUPTION, ev->generation);
    agent__event_emit_record(events, &event, ev->committed ? NULL : &r);
}

void agent__ev_quarantine_ended(agent_events *events, uint64_t generation)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_QUARANTINE_ENDED);
    agent__event_int(&event, "generation", (int64_t)generation);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_slurm_drain(agent_events *events, const agent_ev_slurm_drain *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_SLURM_DRAIN);
    agent__event_str(&event, "slurm_node", ev->slurm_node);
    agent__event_str(&event, "slurm_job", ev->slurm_job != NULL ? ev->slurm_job : "");
    agent__event_str(&event, "reason", ev->reason);
    agent__event_int(&event, "drained", ev->drained);
    agent__event_str(&event, "detail", ev->detail);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_steps_started(agent_events *events, const agent_ev_steps_started *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_STEPS_STARTED);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "step", ev->step);
    agent__event_int(&event, "first_step_ms", ev->first_step_ms);
    agent__event_int(&event, "restore_ms", ev->restore_ms);
    goodput_record r = record(&event, GP_STEPS_STARTED, (int64_t)ev->generation);
    r.a = ev->step, r.b = ev->first_step_ms, r.c = ev->restore_ms;
    agent__event_emit_record(events, &event, &r);
}

void agent__ev_steps_ended(agent_events *events, const agent_ev_steps_ended *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_STEPS_ENDED);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "last_step", ev->last_step);
    agent__event_int(&event, "last_step_ms", ev->last_step_ms);
    agent__event_int(&event, "step_us", ev->step_us);
    agent__event_int(&event, "save_stall_ms", ev->save_stall_ms);
    goodput_record r = record(&event, GP_STEPS_ENDED, (int64_t)ev->generation);
    r.a = ev->last_step, r.b = ev->last_step_ms, r.c = ev->step_us, r.d = ev->save_stall_ms;
    agent__event_emit_record(events, &event, &r);
}

void agent__ev_health_check(agent_events *events, const agent_ev_health_check *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_HEALTH_CHECK);
    agent__event_str(&event, "check", ev->check);
    agent__event_int(&event, "gpu", ev->gpu);
    agent__event_str(&event, "uuid", ev->uuid);
    agent__event_str(&event, "pci_bus_id", ev->pci_bus_id);
    agent__event_str(&event, "port", ev->port);
    agent__event_int(&event, "value", ev->value);
    agent__event_str(&event, "verdict", ev->verdict);
    agent__event_str(&event, "reason", ev->reason);
    agent__event_int(&event, "round", (int64_t)ev->round);
    agent__event_emit_record(events, &event, NULL);
}

static void begin_rank_step(agent_event *event, agent_events *events, agent_event_type type,
                            uint64_t generation, int rank, int local_rank, uint64_t step)
{
    agent__event_begin(event, events, type);
    agent__event_int(event, "generation", (int64_t)generation);
    agent__event_int(event, "rank", rank);
    agent__event_int(event, "local_rank", local_rank);
    agent__event_int(event, "step", (int64_t)step);
}

void agent__ev_checkpoint_saved(agent_events *events, const agent_ev_checkpoint_saved *ev)
{
    agent_event event;
    begin_rank_step(&event, events, AGENT_EVENT_CHECKPOINT_SAVED, ev->generation, ev->rank,
                    ev->local_rank, ev->step);
    agent__event_str(&event, "tier", ev->tier);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_checkpoint_restored(agent_events *events, const agent_ev_checkpoint_restored *ev)
{
    agent_event event;
    begin_rank_step(&event, events, AGENT_EVENT_CHECKPOINT_RESTORED, ev->generation, ev->rank,
                    ev->local_rank, ev->step);
    agent__event_str(&event, "source", ev->source);
    agent__event_int(&event, "bytes", ev->bytes);
    agent__event_int(&event, "ms", ev->ms);
    agent__event_str(&event, "from_node", ev->from_node);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_restore_planned(agent_events *events, const agent_ev_restore_planned *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_RESTORE_PLANNED);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "planned", ev->planned ? 1 : 0);
    if (ev->planned) agent__event_int(&event, "step", (int64_t)ev->step);
    agent__event_int(&event, "committed", ev->planned && ev->committed ? 1 : 0);
    agent__event_str(&event, "why", ev->why);
    agent__event_emit_record(events, &event, NULL);
}

static void begin_spare(agent_event *event, agent_events *events, agent_event_type type,
                        const agent_ev_spare *ev)
{
    agent__event_begin(event, events, type);
    agent__event_int(event, "generation", (int64_t)ev->generation);
    agent__event_int(event, "spare", ev->spare);
    agent__event_int(event, "pid", ev->pid);
}

void agent__ev_spare_started(agent_events *events, const agent_ev_spare *ev)
{
    agent_event event;
    begin_spare(&event, events, AGENT_EVENT_SPARE_STARTED, ev);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_spare_parked(agent_events *events, const agent_ev_spare *ev)
{
    agent_event event;
    begin_spare(&event, events, AGENT_EVENT_SPARE_PARKED, ev);
    agent__event_int(&event, "startup_ms", ev->startup_ms);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_spare_awaited(agent_events *events, const agent_ev_spare *ev)
{
    agent_event event;
    begin_spare(&event, events, AGENT_EVENT_SPARE_AWAITED, ev);
    agent__event_int(&event, "rank", ev->rank);
    agent__event_int(&event, "startup_ms", ev->startup_ms);
    agent__event_int(&event, "wait_ms", ev->wait_ms);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_spare_exited(agent_events *events, const agent_ev_spare *ev)
{
    agent_event event;
    begin_spare(&event, events, AGENT_EVENT_SPARE_EXITED, ev);
    agent__event_int(&event, "exit_code", ev->exit_code);
    agent__event_int(&event, "signal", ev->signal);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_spares_disabled(agent_events *events, const agent_ev_spare *ev)
{
    agent_event event;
    begin_spare(&event, events, AGENT_EVENT_SPARES_DISABLED, ev);
    agent__event_str(&event, "reason", ev->reason);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_spare_promoted(agent_events *events, const agent_ev_spare_promoted *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_SPARE_PROMOTED);
    put_worker(&event, &ev->worker);
    agent__event_int(&event, "spare", ev->spare);
    agent__event_int(&event, "parked_ms", ev->parked_ms);
    agent__event_emit_record(events, &event, NULL);
}

static void put_known(agent_event *event, const char *key, int64_t value)
{
    if (value != AGENT_EV_ABSENT) agent__event_int(event, key, value);
}

void agent__ev_recovery_phases(agent_events *events, const agent_ev_recovery_phases *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_RECOVERY_PHASES);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "complete", ev->complete);
    put_known(&event, "detect_ms", ev->detect_ms);
    put_known(&event, "stop_ms", ev->stop_ms);
    put_known(&event, "rendezvous_ms", ev->rendezvous_ms);
    put_known(&event, ev->cold_started > 0 ? "cold_start_ms" : "promote_ms", ev->attach_ms);
    agent__event_int(&event, "promoted", ev->promoted);
    agent__event_int(&event, "cold_started", ev->cold_started);
    for (int i = 0; i < AGENT_EV_MAX_PHASES && ev->phase_names[i] != NULL; i++) {
        char key[40];
        snprintf(key, sizeof key, "%s_ms", ev->phase_names[i]);
        agent__event_int(&event, key, ev->phase_ms[i]);
    }
    agent__event_int(&event, "total_ms", ev->total_ms);
    agent__event_emit_record(events, &event, NULL);
}

void agent__ev_failure_classified(agent_events *events, const agent_ev_failure_classified *ev)
{
    agent_event event;
    agent__event_begin(&event, events, AGENT_EVENT_FAILURE_CLASSIFIED);
    agent__event_int(&event, "generation", (int64_t)ev->generation);
    agent__event_int(&event, "rank", ev->rank);
    agent__event_int(&event, "local_rank", ev->local_rank);
    agent__event_int(&event, "step", ev->step);
    agent__event_int(&event, "exit_code", ev->exit_code);
    agent__event_int(&event, "signal", ev->signal);
    agent__event_str(&event, "class", ev->cls);
    agent__event_int(&event, "consequence", ev->consequence);
    agent__event_int(&event, "cause_rank", ev->cause_rank);
    agent__event_str(&event, "type", ev->type);
    agent__event_str(&event, "frame", ev->frame);
    agent__event_str(&event, "message", ev->message);
    agent__event_str(&event, "signature", ev->signature);
    agent__event_str(&event, "evidence", ev->evidence);
    agent__event_str(&event, "decision", ev->decision);
    agent__event_str(&event, "rule", ev->rule);
    agent__event_str(&event, "why", ev->why);
    agent__event_int(&event, "budget_used", ev->budget_used);
    agent__event_int(&event, "max_restarts", ev->max_restarts);
    agent__event_int(&event, "quarantine", ev->quarantine);
    agent__event_emit_record(events, &event, NULL);
}
