/*
 * The node's service (replica.h, "the node's service") as its files share
 * it: the state behind one lock, and the few helpers every thread uses.
 *
 *   service.c      life (start, stop), what the agent calls, the helpers below
 *   replicator.c   the replicator thread: pushes own steps to the R targets
 *   commit_round.c the job-wide memory commit as this node plays its rounds
 *   disk_copy.c    the disk thread: every Nth memory step to the disk tier
 *
 * Both threads wake when kicked (a worker committed) and every POLL_MS;
 * neither ever blocks the agent: it only kicks and reads the counters.
 */
#ifndef ELASTIC_REPLICA_SERVICE_STATE_H
#define ELASTIC_REPLICA_SERVICE_STATE_H

#include "replica/replica.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define POLL_MS     50 /* a scan of ROOT/own: a few directory reads */
#define MAX_TARGETS 16

typedef struct replica_target {
    replica_peer peer;
    replica_conn *conn; /* kept between pushes; reopened after a failure */
} replica_target;

struct replica_service {
    replica_service_opts opts;
    char *root, *token, *disk_dir, node_name[REPLICA_NODE_MAX + 1];
    int owner_fd; /* the tier's owner file, flocked while the service lives (memtier.h) */
    replica_server *server;
    pthread_mutex_t lock;
    pthread_cond_t wake, progress;
    bool stopping;
    unsigned kicks; /* bumped by kick: a thread that saw an older value looks again */
    replica_target targets[MAX_TARGETS];
    size_t n_targets;
    bool targets_changed;
    replica_service_stats
        stats; /* held_bytes, own_bytes: as of usage_ms (replica__refresh_usage) */
    uint64_t usage_ms;
    pthread_t replicator, disk;
    bool replicator_started, disk_started;
    /* The generation's memory commit, set by set_generation and taken by
     * the replicator (which alone uses and closes the store handles). */
    bool generation_changed;
    elastic_store *next_store;
    uint64_t next_generation, next_restored;
    int next_world;
    ckpt_generation_start history[REPLICA_HISTORY_MAX];
    size_t n_history;
};

/* The replicator's view of the memory commit (commit.c), played by
 * commit_round.c. */
typedef struct replica_round_state {
    elastic_store *store; /* NULL: no job store: the newest step is pushed, nothing committed */
    uint64_t generation;
    int world;
    uint64_t k;         /* the round being played, from 1 */
    uint64_t step;      /* its step; 0: not proposed yet */
    uint64_t prev;      /* the last round's step (or the restored one): the next is greater */
    uint64_t prev2;     /* the step of the round before that (0: none committed) */
    bool counted;       /* this node counted itself in */
    uint64_t deadline;  /* when the round is given up */
    uint64_t commit_ms; /* the step's commit on this node (wall clock) */
    uint64_t revision;  /* the store's revision of the round's keys last seen */
} replica_round_state;

/* ---- service.c: what every thread uses ---- */

/* The newest step of ROOT/own with a commit record, and that record's time
 * (commit_wall_ms may be NULL). 0: none. */
uint64_t replica__newest_committed(const replica_service *s, uint64_t *commit_wall_ms);
/* Whether ROOT/own holds `step` with its commit record, and that record's time. */
bool replica__step_committed_here(const replica_service *s, uint64_t step,
                                  uint64_t *commit_wall_ms);
uint64_t replica__wall_ms(void);
/* The tier's bytes (a walk of the tree) into the stats, on the replicator
 * thread: after work (`changed`), else at most every USAGE_MS. Whoever reads
 * the stats (the agent's loop, for /metrics) then never walks the tier. */
#define USAGE_MS 1000
void replica__refresh_usage(replica_service *s, bool changed);
/* Sleeps until kicked (since `seen`), stopping, or POLL_MS. Called locked. */
void replica__wait_for_work(replica_service *s, unsigned *seen);

/* ---- replicator.c ---- */

/* The replicator thread's body (arg: the service). */
void *replica__replicator_main(void *arg);
/* Pushes `step` to every target; true when all hold it. Runs unlocked. */
bool replica__push_everywhere(replica_service *s, replica_target *targets, size_t n, uint64_t step);
/* `step` (committed here at commit_ms) is on every target: the stats say so. */
void replica__replicated(replica_service *s, uint64_t step, uint64_t commit_ms);

/* ---- commit_round.c ---- */

/* The round's steps, and the job's last committed one, pinned against
 * every retention of the tier (memtier.h, the keep file). */
void replica__round_pin(replica_service *s, const replica_round_state *rs);
/* One turn of the current round. True when there is nothing to do until kicked. */
bool replica__play_round(replica_service *s, replica_round_state *rs, replica_target *targets,
                         size_t n);

/* ---- disk_copy.c ---- */

/* The disk thread's body (arg: the service). */
void *replica__disk_main(void *arg);

#endif
