/*
 * The job-wide memory commit (commit.c: the rounds' keys in the job store)
 * as this node's replicator plays it: learn the current round's step,
 * propose or raise it, push that step to the targets when this node holds
 * it, count in, look for the record, and give a round up after
 * ROUND_TIMEOUT_MS.
 */
#include "replica/service_state.h"

#include "common/clock.h"

#include <inttypes.h>

/* A round of the memory commit that has no record by then is given up
 * (some node could not take part: its copy of the step was gone). */
#define ROUND_TIMEOUT_MS 10000

void replica__round_pin(replica_service *s, const replica_round_state *rs)
{
    pthread_mutex_lock(&s->lock);
    uint64_t steps[2];
    size_t n = 0;
    if (s->stats.committed_step > 0) steps[n++] = s->stats.committed_step;
    if (rs->step > 0 && rs->step != s->stats.committed_step) steps[n++] = rs->step;
    pthread_mutex_unlock(&s->lock);
    if (ckpt__mem_keep_write(s->root, steps, n) != 0)
        ELASTIC_LOG_W("replica", "pinning the committed step: %s", elastic_last_error());
}

static void next_round(replica_service *s, replica_round_state *rs)
{
    rs->prev2 = rs->prev;
    rs->prev = rs->step;
    rs->k++;
    rs->step = 0;
    rs->counted = false;
    replica__round_pin(s, rs);
}

/* Writes the keep file with `extra` pinned besides the committed step
 * (before proposing it: retention must not evict it meanwhile). */
static void pin_also(replica_service *s, uint64_t extra)
{
    replica_round_state one = { .step = extra };
    replica__round_pin(s, &one);
}

/* The round's step as this node plays it: learned, proposed (none yet:
 * our newest), or raised (we are past it and no longer hold it: our
 * newest). 0 when the store did not answer. */
static uint64_t round_target(replica_service *s, replica_round_state *rs, uint64_t newest)
{
    uint64_t current = 0, commit_ms = 0;
    if (replica__round_current(rs->store, rs->generation, rs->k, &current) != 0) {
        ELASTIC_LOG_D("replica", "memory commit round %" PRIu64 ": %s", rs->k,
                      elastic_last_error());
        return 0;
    }
    bool lacking =
        current > 0 && current < newest && !replica__step_committed_here(s, current, &commit_ms);
    if ((current == 0 || lacking) && newest > rs->prev) {
        pin_also(s, newest);
        if (replica__round_propose(rs->store, rs->generation, rs->k, current, newest, &current) !=
            0) {
            ELASTIC_LOG_D("replica", "memory commit round %" PRIu64 ": %s", rs->k,
                          elastic_last_error());
            return 0;
        }
    }
    return current;
}

bool replica__play_round(replica_service *s, replica_round_state *rs, replica_target *targets,
                         size_t n)
{
    uint64_t newest = replica__newest_committed(s, NULL);
    if (rs->step == 0 && newest <= rs->prev) return true; /* nothing newer than the last round */
    uint64_t want = round_target(s, rs, newest);
    if (want == 0) return true;
    if (want != rs->step) { /* a new step for the round: progress, the clock starts again */
        rs->step = want;
        rs->counted = false;
        rs->deadline = elastic__deadline_ms(ROUND_TIMEOUT_MS);
        replica__round_pin(s, rs);
    }
    uint64_t commit_ms = 0;
    if (!rs->counted && replica__step_committed_here(s, rs->step, &commit_ms)) {
        if (n == 0 || replica__push_everywhere(s, targets, n, rs->step)) {
            replica__replicated(s, rs->step, commit_ms);
            rs->commit_ms = commit_ms;
            bool completed = false;
            if (replica__round_count_in(rs->store, rs->generation, rs->k, rs->step, rs->world,
                                        &completed) == 0)
                rs->counted = true;
            else
                ELASTIC_LOG_W("replica", "memory commit of step %" PRIu64 ": %s", rs->step,
                              elastic_last_error());
            if (completed && rs->k > 2 && rs->prev2 > 0)
                replica__round_forget(rs->store, rs->generation, rs->k - 2, rs->prev2);
        } else {
            pthread_mutex_lock(&s->lock);
            s->stats.push_failures++;
            pthread_mutex_unlock(&s->lock);
        }
    }
    int left = elastic__ms_left(rs->deadline);
    uint64_t step = 0;
    int rc = replica__round_committed(rs->store, rs->generation, rs->k, 0, &step);
    if (rc == 0) {
        pthread_mutex_lock(&s->lock);
        if (step > s->stats.committed_step) {
            s->stats.committed_step = step;
            s->stats.committed_generation = rs->generation;
        }
        uint64_t now = replica__wall_ms();
        s->stats.commit_lag_ms =
            step == rs->step && rs->commit_ms > 0 && now > rs->commit_ms ? now - rs->commit_ms : 0;
        pthread_cond_broadcast(&s->progress);
        pthread_mutex_unlock(&s->lock);
        rs->step = step;
        next_round(s, rs);
        return false;
    }
    if (left == 0) {
        ELASTIC_LOG_W("replica",
                      "memory commit round %" PRIu64 " (step %" PRIu64
                      ") has no record after %d ms: %s; the next round starts",
                      rs->k, rs->step, ROUND_TIMEOUT_MS,
                      rs->counted ? "some node did not count in" : "this node lacked the step");
        pthread_mutex_lock(&s->lock);
        s->stats.rounds_missed++;
        pthread_mutex_unlock(&s->lock);
        next_round(s, rs);
        return false;
    }
    /* Until the round changes (a raise must be seen within a step: the
     * raised step is evicted here once a newer one commits) or this node's
     * trainer commits (seen on the next look, POLL_MS at most). */
    rc = replica__round_watch(rs->store, rs->generation, rs->k, &rs->revision,
                              left < POLL_MS ? left : POLL_MS);
    if (rc == 0 || rc == ELASTIC_ETIMEDOUT) return false;
    ELASTIC_LOG_D("replica", "memory commit round %" PRIu64 ": %s", rs->k, elastic_last_error());
    return true; /* the store does not answer: the pause is wait_for_work's */
}
