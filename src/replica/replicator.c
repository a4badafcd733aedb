/*
 * The replicator thread of the node's service (service_state.h): pushes
 * each newly committed own step to this node's R targets. With a job store
 * it pushes the step of the memory commit's round (commit_round.c);
 * without one, simply the newest.
 */
#include "replica/service_state.h"

#include "common/clock.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

static int connect_target(replica_service *s, replica_target *t, uint64_t deadline)
{
    if (t->conn != NULL) return 0;
    int rc = replica__tcp_connect(t->peer.host, t->peer.port, deadline, &t->conn);
    if (rc == 0 && (rc = replica__auth_client(t->conn, s->token, deadline)) != 0) {
        replica__close(t->conn);
        t->conn = NULL;
    }
    return rc;
}

/* Runs unlocked: the targets array is only changed by set_peers, which
 * waits for no push (it marks the change; the replicator picks it up
 * before its next round). */
bool replica__push_everywhere(replica_service *s, replica_target *targets, size_t n, uint64_t step)
{
    char own[PATH_MAX], origin[REPLICA_NODE_MAX + 1];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, s->root);
    pthread_mutex_lock(&s->lock); /* set_peers writes it under the lock */
    snprintf(origin, sizeof origin, "%s", s->node_name);
    pthread_mutex_unlock(&s->lock);
    bool all = true;
    for (size_t i = 0; i < n; i++) {
        uint64_t deadline = elastic__deadline_ms(s->opts.io_timeout_ms), bytes = 0;
        int rc = connect_target(s, &targets[i], deadline);
        if (rc == 0)
            rc = replica__push_step(targets[i].conn, origin, own, step, &bytes, deadline);
        if (rc != 0) {
            ELASTIC_LOG_W("replica", "step %" PRIu64 " to %s: %s", step, targets[i].peer.name,
                          elastic_last_error());
            replica__close(targets[i].conn);
            targets[i].conn = NULL;
            all = false;
        }
    }
    return all;
}

void replica__replicated(replica_service *s, uint64_t step, uint64_t commit_ms)
{
    pthread_mutex_lock(&s->lock);
    if (step > s->stats.replicated_step) s->stats.replicated_step = step;
    uint64_t now = replica__wall_ms();
    s->stats.lag_ms = now > commit_ms ? now - commit_ms : 0;
    pthread_cond_broadcast(&s->progress);
    pthread_mutex_unlock(&s->lock);
}

/* Without a job store: each new committed own step goes to every target.
 * True when there is nothing to do until kicked. */
static bool push_newest(replica_service *s, replica_target *targets, size_t n)
{
    pthread_mutex_lock(&s->lock);
    uint64_t replicated_step = s->stats.replicated_step;
    pthread_mutex_unlock(&s->lock);
    uint64_t commit_ms = 0, newest = replica__newest_committed(s, &commit_ms);
    bool done =
        newest > replicated_step && (n == 0 || replica__push_everywhere(s, targets, n, newest));
    if (done) replica__replicated(s, newest, commit_ms);
    pthread_mutex_lock(&s->lock);
    if (!done && newest > replicated_step) s->stats.push_failures++;
    pthread_mutex_unlock(&s->lock);
    return !done;
}

void *replica__replicator_main(void *arg)
{
    replica_service *s = arg;
    replica_target local[MAX_TARGETS];
    size_t n_local = 0;
    unsigned seen = 0;
    replica_round_state rs = { 0 };
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        if (s->targets_changed) { /* new placement: connections to the old targets go */
            for (size_t i = 0; i < n_local; i++) replica__close(local[i].conn);
            n_local = s->n_targets;
            for (size_t i = 0; i < n_local; i++)
                local[i] = (replica_target){ .peer = s->targets[i].peer };
            s->targets_changed = false;
        }
        elastic_store *old = NULL;
        bool fresh = s->generation_changed;
        if (fresh) { /* a new generation: its rounds start at 1 */
            old = rs.store;
            rs = (replica_round_state){ .store = s->next_store,
                                        .generation = s->next_generation,
                                        .world = s->next_world,
                                        .k = 1,
                                        .prev = s->next_restored };
            s->next_store = NULL;
            s->generation_changed = false;
        }
        pthread_mutex_unlock(&s->lock);
        if (old != NULL) elastic_store_close(old);
        if (fresh) replica__round_pin(s, &rs); /* the restored step, until a round commits */
        uint64_t newest = replica__newest_committed(s, NULL);
        bool idle = rs.store != NULL ? replica__play_round(s, &rs, local, n_local)
                                     : push_newest(s, local, n_local);
        replica__refresh_usage(s, !idle);
        pthread_mutex_lock(&s->lock);
        s->stats.own_step = newest > s->stats.own_step ? newest : s->stats.own_step;
        s->stats.targets = (unsigned)n_local;
        if (idle) replica__wait_for_work(s, &seen);
    }
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n_local; i++) replica__close(local[i].conn);
    elastic_store_close(rs.store);
    return NULL;
}
