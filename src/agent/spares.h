/*
 * Warm spares (--warm-spares=N, spares.c) and the phases of an in-process
 * recovery (phases.c). docs/WARM_SPARES.md has the design.
 */
#ifndef ELASTIC_AGENT_SPARES_H
#define ELASTIC_AGENT_SPARES_H

#include "agent/group.h"

typedef enum agent_spare_state {
    AGENT_SPARE_STARTING, /* running the trainer's start-up, not parked yet */
    AGENT_SPARE_PARKED,   /* said HELLO in its spare slot: ready to take a rank */
    AGENT_SPARE_PROMOTED, /* a worker now: its process and output belong to that worker */
    AGENT_SPARE_GONE      /* exited (or its worker did): freed once its output closed */
} agent_spare_state;

struct agent_spare {
    struct agent_spare *next;
    agent_group *group;
    unsigned index; /* its control slot is local_world_size + index */
    agent_spare_state state;
    pid_t pid;
    bool running; /* started and not reaped (while STARTING or PARKED) */
    agent_exit_watch *exit_watch;
    int exit_code, term_signal;
    uint64_t started_ms, parked_ms;
    bool stopped;         /* told to stop (the job ended here): its exit is expected */
    bool streams_counted; /* promoted: its closing streams count as a worker's */
    agent_stream out, err;
    /* Where its output goes on the console once it parked (-1: nowhere);
     * before, only its log files and the stderr tail get it: a trainer that
     * never parks runs as if it were a worker and fails, and its traceback
     * is the agent's one line about it, not a page on the console. */
    int out_console, err_console;
    char dir[768];        /* spare_<n> under the log root */
    char error_file[800]; /* its TORCHELASTIC_ERROR_FILE, kept when promoted */
};

/* A worker's output streams: its own, or the promoted spare's. */
static inline agent_stream *agent__worker_out(agent_worker *worker)
{
    return worker->spare != NULL ? &worker->spare->out : &worker->out;
}
static inline agent_stream *agent__worker_err(agent_worker *worker)
{
    return worker->spare != NULL ? &worker->spare->err : &worker->err;
}

int agent__spares_init(agent_group *group);
/* Starts spares until N are starting or parked (the group running, spares not disabled). */
void agent__spares_fill(agent_group *group);
/* Warm spares parked, and started, alive, not parked yet within their startup timeout. */
void agent__spares_count(const agent_group *group, int *parked, int *starting);
/* worker's slot waits for a spare still starting: said once (console, spare_awaited); the
 * machine hears SPARE_PARKED when one parked, exited or timed out. Returns how many are
 * starting (so many slots may wait); 0: none, the slot cold-starts. */
int agent__spares_await(agent_group *group, const agent_worker *worker);
/* A parked spare takes worker's slot (worker zeroed, local_rank set); false: none parked. */
bool agent__spares_promote(agent_group *group, agent_worker *worker);
/* Reaps exited spares: a parked one is replaced, one that never parked disables spares. */
void agent__spares_reap(agent_group *group);
/* The control socket said something in spare slot `index` (HELLO: parked). */
void agent__spares_on_control(agent_group *group, unsigned index, int type);
/* A promoted spare's worker was reaped: the record goes once its output closed. */
void agent__spares_worker_reaped(agent_group *group, agent_worker *worker);
/* Does this exit watch belong to a spare still running? */
bool agent__spares_own_watch(const agent_group *group, const agent_exit_watch *watch);
/* The job ended here: parked spares are told to stop, starting ones get SIGTERM. */
void agent__spares_stop(agent_group *group);
/* The group is closing: every spare is killed and its handles closed. */
void agent__spares_close(agent_group *group);
void agent__spares_destroy(agent_group *group);

/* phases.c: recovery_phases, one event per recovery on this node. */
int agent__phases_init(agent_group *group); /* its private record */
void agent__phases_destroy(agent_group *group);
/* A failure is being recovered from (and when the agent saw it). */
bool agent__phases_recovering(const agent_group *group, uint64_t *failure_ms);
void agent__phases_failure(agent_group *group, const agent_worker *failed);
void agent__phases_stopped(agent_group *group);
void agent__phases_formed(agent_group *group);
/* A replacement process (promoted or cold-started) exists for worker. */
void agent__phases_replacement(agent_group *group, agent_worker *worker, bool promoted);
/* HELLO from a worker slot: a replacement attached. */
void agent__phases_on_hello(agent_group *group, agent_worker *worker);
/* A worker's recovery_phase report (PHASE, NS, GENERATION). */
void agent__phases_on_report(agent_group *group, agent_worker *worker, const char *phase,
                             uint64_t ns, uint64_t generation);

#endif /* ELASTIC_AGENT_SPARES_H */
