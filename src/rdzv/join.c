/*
 * elastic_rdzv_next: join the open round (one add for a slot, one leased
 * record, one add for survivors), help seal it when it is complete, and wait
 * on this node's own key area for the assignment. Nodes the round did not
 * admit move to the next round, as waiting nodes or spares.
 */
#include "rdzv/rdzv.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static void delete_record(elastic_rdzv *r, uint64_t round, int slot)
{
    char key[64];
    rdzv__key_slot(key, sizeof key, round, slot, "rec");
    (void)r->backend->ops->del(r->backend, key);
}

/* A waiting node of a generation that runs with room ends it, so the
 * members re-form with the newcomer; a full generation keeps running and the
 * node stays a spare. */
static int end_if_room(elastic_rdzv *r, uint64_t running)
{
    int size = 0;
    elastic_rdzv_cause cause;
    int rc = rdzv__read_formed(r, running, r->keepalive_timeout_ms, &size);
    if (rc == ELASTIC_ENOTFOUND) return 0;
    if (rc != 0 || size == 0 || size >= r->max_nodes) return rc;
    rc = rdzv__read_end(r, running, &cause);
    if (rc != ELASTIC_ENOTFOUND) return rc;
    bool won;
    rdzv__fill_cause(r, &cause, ELASTIC_RDZV_NODES_WAITING, running, NULL,
                     "a node is waiting to join");
    return rdzv__end(r, running, &cause, &won);
}

/* The next time a waiting node re-checks the round: the lowest slots every
 * keep-alive timeout (they stand in for a sealer that died), slot min_nodes
 * exactly at last call, the others after it. */
static uint64_t next_check(elastic_rdzv *r, int slot, uint64_t joined_at, uint64_t now)
{
    uint64_t at = now + (uint64_t)r->last_call_timeout_ms;
    if (slot <= 4) at = now + (uint64_t)r->keepalive_timeout_ms;
    if (slot >= r->min_nodes) {
        uint64_t last_call = joined_at + (uint64_t)r->last_call_timeout_ms +
                             (slot == r->min_nodes ? 0 : (uint64_t)r->keepalive_timeout_ms);
        if (last_call > now && last_call < at) at = last_call;
    }
    return at;
}

/* The generation's commit record is there but our assignment is not (the
 * sealer died between the two writes): compute it from the record. */
static int assignment_from_info(elastic_rdzv *r, uint64_t round, int slot, rdzv__assignment *a)
{
    rdzv__info info;
    rdzv__record *members = NULL;
    int rc = rdzv__read_info(r, round, 0, &info, &members);
    if (rc == ELASTIC_ENOTFOUND) {
        rc = rdzv__void_orphan(r, round);
        if (rc == 0) rc = rdzv__read_info(r, round, 0, &info, &members);
    }
    if (rc != 0) return rc;
    size_t n = (size_t)info.group_world_size;
    rdzv__assignment *all = calloc(n > 0 ? n : 1, sizeof *all);
    memset(a, 0, sizeof *a);
    a->outcome = info.formed ? RDZV__EXCLUDED : RDZV__VOID;
    if (all == NULL)
        rc = elastic__fail(ELASTIC_ENOMEM, "rdzv: out of memory");
    else
        rdzv__assign_all(members, n, round, info.restart_count, all);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (members[i].slot == slot) *a = all[i];
    free(all);
    free(members);
    return rc;
}

static int read_assignment(elastic_rdzv *r, uint64_t round, int slot, rdzv__assignment *a)
{
    char key[64];
    void *value = NULL;
    size_t len = 0;
    rdzv__key_slot(key, sizeof key, round, slot, "a");
    int rc = r->backend->ops->get(r->backend, key, &value, &len);
    if (rc == 0) rc = rdzv__assignment_decode(value, len, a);
    elastic_free(value);
    return rc;
}

/* Running out of join time: a spare of a running generation keeps waiting;
 * anyone else gives up with ELASTIC_ENOTENOUGH. */
static int join_deadline(elastic_rdzv *r, uint64_t round, int slot, uint64_t *deadline)
{
    int size = 0;
    elastic_rdzv_cause cause;
    if (round > 1 && rdzv__read_formed(r, round - 1, 0, &size) == 0 && size > 0 &&
        rdzv__read_end(r, round - 1, &cause) == ELASTIC_ENOTFOUND) {
        *deadline = elastic__deadline_ms(r->join_timeout_ms);
        return 0;
    }
    char key[64];
    int64_t count = 0;
    rdzv__key_round(key, sizeof key, round, "count");
    (void)rdzv__read_int(r, key, 0, &count);
    delete_record(r, round, slot);
    return elastic__fail(ELASTIC_ENOTENOUGH,
                         "rdzv: run %s: %" PRId64 " node(s) joined round %" PRIu64
                         " but min_nodes is %d; gave up after join_timeout %d ms",
                         r->run_id, count, round, r->min_nodes, r->join_timeout_ms);
}

/* Waits for r/<round>/n/<slot>/a with one parked read per check period
 * (the store answers the moment the sealer or a closer writes it). */
static int await_assignment(elastic_rdzv *r, uint64_t round, int slot, uint64_t joined_at,
                            uint64_t *deadline, rdzv__assignment *a)
{
    char key[64];
    uint64_t check_at = next_check(r, slot, joined_at, joined_at), orphan_since = 0;
    rdzv__key_slot(key, sizeof key, round, slot, "a");
    for (;;) {
        uint64_t now = elastic__now_ms();
        if (now >= *deadline) {
            int rc = join_deadline(r, round, slot, deadline);
            if (rc != 0) return rc;
        }
        if (now >= check_at) {
            rdzv__seal_hint hint = { .round = round,
                                     .slot = slot,
                                     .prev_size = -1,
                                     .back = -1,
                                     .timer_fired = true,
                                     .joined_at_ms = joined_at };
            rdzv__round_ptr ptr;
            int rc = rdzv__read_round(r, &ptr);
            if (rc == 0) rc = rdzv__maybe_seal(r, &ptr, &hint);
            /* Waiting on a running generation: is anyone still watching it? */
            if (rc == 0 && ptr.open_round == round && round > 1)
                rc = rdzv__end_if_orphaned(r, round - 1);
            if (rc != 0) return rc;
            if (ptr.open_round > round && orphan_since == 0) orphan_since = now;
            if (orphan_since != 0 && now - orphan_since >= 3u * (uint64_t)r->keepalive_timeout_ms) {
                rc = read_assignment(r, round, slot, a);
                return rc == ELASTIC_ENOTFOUND ? assignment_from_info(r, round, slot, a) : rc;
            }
            check_at = next_check(r, slot, joined_at, now);
            if (orphan_since != 0 &&
                orphan_since + 3u * (uint64_t)r->keepalive_timeout_ms < check_at)
                check_at = orphan_since + 3u * (uint64_t)r->keepalive_timeout_ms;
        }
        uint64_t until = check_at < *deadline ? check_at : *deadline;
        int wait_ms = until > now ? (int)(until - now < INT32_MAX ? until - now : INT32_MAX) : 1;
        void *value = NULL;
        size_t len = 0;
        int rc = rdzv__wait_value(r, key, wait_ms, &value, &len);
        if (rc == 0) rc = rdzv__assignment_decode(value, len, a);
        elastic_free(value);
        if (rc != ELASTIC_ETIMEDOUT) return rc;
    }
}

/* How far a join got in its round: what a request etcd did not answer
 * leaves behind (a slot counted, perhaps a record under our lease). */
typedef struct join_progress {
    uint64_t round;
    int slot;                 /* 0: no slot taken in `round` (or given up) */
    bool recorded;            /* our record may be there (its write was sent) */
    uint64_t joined_at;       /* when the round saw our record (0: not yet) */
    bool resume;              /* the record lives: wait on in this slot */
    uint64_t record_revision; /* the record's revision where the backend said it (0: not) */
} join_progress;

/* Waits for this node's assignment in the slot a broken-off attempt holds. */
static int resume_round(elastic_rdzv *r, join_progress *at, uint64_t *deadline, rdzv__assignment *a)
{
    at->resume = false;
    uint64_t joined_at = at->joined_at != 0 ? at->joined_at : elastic__now_ms();
    at->joined_at = joined_at;
    int rc = await_assignment(r, at->round, at->slot, joined_at, deadline, a);
    if (rc == 0 && a->outcome != RDZV__ASSIGNED) delete_record(r, at->round, at->slot);
    return rc;
}

/* The first wait for the assignment, with the record (set_leased_wait: one
 * message where the backend can): 0 with *a (done), ELASTIC_ETIMEDOUT (the
 * record is written; go on waiting) or an error. A node whose lease ended
 * writes its record under a new one first (rdzv__write_record). */
static int record_with_first_wait(elastic_rdzv *r, uint64_t round, int slot, uint64_t joined_at,
                                  uint64_t deadline, rdzv__assignment *a, uint64_t *record_revision)
{
    uint64_t now = elastic__now_ms(), until = next_check(r, slot, joined_at, joined_at);
    if (deadline < until) until = deadline;
    int wait_ms = until > now ? (int)(until - now < INT32_MAX ? until - now : INT32_MAX) : 1;
    int rc = rdzv__record_and_wait(r, round, slot, wait_ms, a, record_revision);
    if (rc != ELASTIC_EUNSUPPORTED) return rc;
    rc = rdzv__write_record(r, round, slot);
    return rc == 0 ? ELASTIC_ETIMEDOUT : rc;
}

/* One attempt in round `round`: join, help complete it, wait for the outcome.
 * Joining is two backend calls (one message each where the backend batches):
 * the adds with the view, then the record with the wait for the assignment
 * (a node that may seal writes its record alone first, as its own must be
 * there). */
static int join_round(elastic_rdzv *r, uint64_t round, uint64_t *deadline, rdzv__assignment *a,
                      join_progress *at)
{
    if (at->resume && at->round == round) return resume_round(r, at, deadline, a);
    int64_t slot = 0, back = -1;
    rdzv__round_ptr ptr;
    rdzv__join_view view;
    bool joined = false; /* round 1, in the message that found the pointer absent */
    if (round == 0) {
        /* The round pointer unread: round 1 while the pointer is absent (a
         * job's first formation), in the join's own call; else (when it
         * exists) the open round it says. */
        *at = (join_progress){ .round = 1 };
        int rc = rdzv__join_count(r, 1, false, true, &slot, &back, &ptr, &view);
        if (rc != 0) return rc;
        joined = slot > 0;
        round = joined ? 1 : ptr.open_round;
    }
    if (!joined) *at = (join_progress){ .round = round };
    pthread_mutex_lock(&r->lock);
    bool survivor = round > 1 && r->generation == round - 1 && !r->fenced;
    int prev_size = survivor ? r->group_world_size : -1;
    pthread_mutex_unlock(&r->lock);
    int rc = joined ? 0 : rdzv__join_count(r, round, survivor, false, &slot, &back, &ptr, &view);
    if (rc != 0) return rc;
    if (slot < 1 || slot > INT32_MAX / 2)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: bad count in round %" PRIu64, round);
    at->slot = (int)slot;
    if (ptr.open_round > round + 1 || (ptr.open_round == round + 1 && slot > ptr.prev_sealed)) {
        /* Sealed just before our add (or long before: a member whose
         * generation ended while it was slow to rejoin guessed a round the
         * others sealed without it, and more after it): not in it. Our
         * record is not written yet, so no sealer could have admitted us;
         * waiting in that round would cost three keep-alive timeouts and
         * then void a round its members already forgot. */
        if (at->recorded) delete_record(r, round, (int)slot);
        a->outcome = RDZV__EXCLUDED;
        return 0;
    }
    rc = view.have_closed ? view.closed_rc : rdzv__check_closed(r);
    if (rc != 0) return rc;
    uint64_t joined_at = elastic__now_ms();
    at->joined_at = joined_at;
    if (!survivor && round > 1 && ptr.open_round == round) {
        rc = end_if_room(r, round - 1);
        if (rc != 0) return rc;
    }
    rdzv__seal_hint hint = { .round = round,
                             .slot = (int)slot,
                             .prev_size = prev_size,
                             .back = back,
                             .joined_at_ms = joined_at,
                             .have_count = view.have_count,
                             .count = view.count,
                             .have_gone = view.have_gone,
                             .gone = view.gone };
    bool assigned = false;
    if (!at->recorded && !rdzv__may_seal(r, &ptr, &hint)) {
        at->recorded = true;
        rc = record_with_first_wait(r, round, (int)slot, joined_at, *deadline, a,
                                    &at->record_revision);
        assigned = rc == 0;
        if (rc == ELASTIC_ETIMEDOUT) rc = 0;
    } else if (!at->recorded) {
        at->recorded = true;
        rc = rdzv__write_record(r, round, (int)slot);
        if (rc == 0) rc = rdzv__maybe_seal(r, &ptr, &hint);
    } else {
        rc = rdzv__maybe_seal(r, &ptr, &hint);
    }
    if (rc == 0 && !assigned) rc = await_assignment(r, round, (int)slot, joined_at, deadline, a);
    /* Not admitted: our record there must not count us as alive later. */
    if (rc == 0 && a->outcome != RDZV__ASSIGNED) delete_record(r, round, (int)slot);
    return rc;
}

/* This node is in generation a->generation: remember, watch, report. */
static void become_member(elastic_rdzv *r, int slot, const rdzv__assignment *a,
                          uint64_t record_revision, elastic_rdzv_result *result)
{
    pthread_mutex_lock(&r->lock);
    uint64_t previous = r->generation;
    int previous_slot = r->slot;
    r->generation = a->generation;
    r->slot = slot;
    r->group_rank = a->group_rank;
    r->group_world_size = a->group_world_size;
    r->phase = RDZV__RUNNING;
    r->fenced = false;
    r->guard_lease = r->lease;
    /* Our keys of the last generation go, off this path, on the monitor;
     * an older cleanup the monitor has not reached yet is done here. */
    uint64_t overdue = r->stale_generation;
    int overdue_slot = r->stale_slot;
    if (previous > 0) {
        r->stale_generation = previous;
        r->stale_slot = previous_slot;
    }
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    if (overdue > 0 && overdue != previous) rdzv__forget_slot(r, overdue, overdue_slot);
    rdzv__monitor_watch(r, a->generation, a->next_slot, a->next_node_id, record_revision);
    memset(result, 0, sizeof *result);
    result->struct_size = sizeof *result;
    result->generation = a->generation;
    result->group_rank = a->group_rank;
    result->group_world_size = a->group_world_size;
    result->rank_base = a->rank_base;
    result->local_world_size = a->local_world_size;
    result->world_size = a->world_size;
    result->restart_count = a->restart_count;
    result->max_restarts = r->max_restarts;
    snprintf(result->master_addr, sizeof result->master_addr, "%s", a->master_addr);
    result->master_port = a->master_port;
    result->incarnation = a->incarnation;
}

static int shut(elastic_rdzv *r, int code)
{
    pthread_mutex_lock(&r->lock);
    r->phase = RDZV__SHUT;
    r->shut_code = code;
    pthread_mutex_unlock(&r->lock);
    return code;
}

static int check_phase(elastic_rdzv *r)
{
    pthread_mutex_lock(&r->lock);
    int phase = r->phase, code = r->shut_code;
    uint64_t generation = r->generation;
    pthread_mutex_unlock(&r->lock);
    switch (phase) {
    case RDZV__SHUT:
        return elastic__fail(code, "rdzv: run %s is %s", r->run_id,
                             code == ELASTIC_EBUDGET ? "out of restart budget" : "closed");
    case RDZV__DEPARTED:
        return elastic__fail(ELASTIC_ESTATE, "rdzv: this node already finished or left run %s",
                             r->run_id);
    case RDZV__RUNNING:
        return elastic__fail(ELASTIC_ESTATE,
                             "rdzv: generation %" PRIu64
                             " is still running; end it before the next rendezvous",
                             generation);
    default: return 0;
    }
}

/* A fenced node first waits, probing once per keep-alive interval, until the
 * store answers again (a healed partition, a thawed process), and drops the
 * old lease if it still lives so the others see it gone. A store that refuses
 * us (its host is gone: c10d cannot go on) ends the wait at once. */
static int await_store_after_fence(elastic_rdzv *r, uint64_t deadline)
{
    if (r->backend->ops->outlives_clients) return 0; /* etcd: read_round_within's business */
    for (;;) {
        int left = elastic__ms_left(deadline);
        if (left <= 0)
            return elastic__fail(ELASTIC_ETIMEDOUT,
                                 "rdzv: run %s: the store did not answer for join_timeout %d ms",
                                 r->run_id, r->join_timeout_ms);
        int wait = left < r->keepalive_interval_ms ? left : r->keepalive_interval_ms;
        uint64_t started = elastic__now_ms();
        int rc = r->have_lease ? r->backend->ops->lease_check(r->backend, r->lease, wait)
                               : r->backend->ops->lease_check(r->backend, 0, wait);
        if (rc == 0 && r->have_lease) { /* it outlived our silence: end it, then join anew */
            (void)r->backend->ops->lease_revoke(r->backend, r->lease);
            r->have_lease = false;
            return 0;
        }
        if (rc == ELASTIC_ECONNECT || rc == ELASTIC_ECLOSED) return rc;
        if (rc != ELASTIC_ETIMEDOUT)
            return 0; /* any answer: the store is back (our lease is gone) */
        uint64_t next = started + (uint64_t)wait;
        uint64_t now = elastic__now_ms();
        if (next > now) usleep((useconds_t)(next - now) * 1000u);
    }
}

/* One keep-alive interval, or what is left until the deadline. */
static void pause_for_retry(const elastic_rdzv *r, uint64_t deadline)
{
    int left = elastic__ms_left(deadline);
    int wait = left < r->keepalive_interval_ms ? left : r->keepalive_interval_ms;
    if (wait > 0) usleep((useconds_t)wait * 1000u);
}

/* The round pointer, for a fenced node. On etcd (a service that outlives
 * its clients) not answering is transient (a member
 * restarts, an election ends, a partition heals): tried again, once per
 * keep-alive interval, until the join deadline. c10d's store that does not
 * answer is await_store_after_fence's business. */
static int read_round_within(elastic_rdzv *r, rdzv__round_ptr *ptr, uint64_t deadline)
{
    bool said = false;
    for (;;) {
        int rc = rdzv__read_round(r, ptr);
        if ((rc != ELASTIC_ECONNECT && rc != ELASTIC_ETIMEDOUT) ||
            !r->backend->ops->outlives_clients)
            return rc;
        if (elastic__ms_left(deadline) <= 0) return rc;
        if (!said)
            ELASTIC_LOG_W("rdzv", "run %s: %s; trying again until join_timeout", r->run_id,
                          elastic_last_error());
        said = true;
        pause_for_retry(r, deadline);
    }
}

/* etcd outlives its clients: a request that found no endpoint in time (this
 * node cut off, a member restarting, an election) is no reason to end the
 * job. */
static bool transient_on_etcd(const elastic_rdzv *r, int rc)
{
    return r->backend->ops->outlives_clients && (rc == ELASTIC_ECONNECT || rc == ELASTIC_ETIMEDOUT);
}

/* A join on etcd broke off half way; once etcd answers again (tried once per
 * keep-alive interval until the join deadline) the node either waits on in
 * its slot, where its record still lives under a lease that was kept alive
 * all along, or joins anew. A node whose lease lapsed comes back as a fenced
 * one does, as a new member; that lease (and so the record it holds) is
 * revoked first, so the round never counts the node twice. */
static int recover_attempt(elastic_rdzv *r, join_progress *at, uint64_t deadline)
{
    rdzv__round_ptr ptr;
    int rc;
    while ((rc = rdzv__read_round(r, &ptr)) != 0) {
        if (!transient_on_etcd(r, rc) || elastic__ms_left(deadline) <= 0) return rc;
        pause_for_retry(r, deadline);
    }
    bool lease_alive = r->have_lease && !__atomic_load_n(&r->lease_lost, __ATOMIC_ACQUIRE);
    if (lease_alive && at->slot > 0 && at->recorded) {
        char key[64];
        void *value = NULL;
        size_t len = 0;
        rdzv__key_slot(key, sizeof key, at->round, at->slot, "rec");
        rc = r->backend->ops->get(r->backend, key, &value, &len);
        elastic_free(value);
        if (rc == 0) {
            at->resume = true;
            return 0;
        }
        if (rc != ELASTIC_ENOTFOUND) return rc;
    }
    bool took_slot = at->slot > 0;
    at->slot = 0;
    if (lease_alive && !took_slot) return 0; /* nothing of ours in a round: join as before */
    /* A slot counted without us in it, or a lapsed lease: a new member (a
     * survivor's "back" must not count it twice). */
    pthread_mutex_lock(&r->lock);
    r->fenced = true;
    pthread_mutex_unlock(&r->lock);
    if (!lease_alive && r->have_lease) {
        rc = r->backend->ops->lease_revoke(r->backend, r->lease);
        if (transient_on_etcd(r, rc)) return rc; /* any answer: the lease is gone now */
        r->have_lease = false;
        __atomic_store_n(&r->lease_lost, 1, __ATOMIC_RELEASE);
    }
    return 0;
}

/* One attempt: wait out a fence, find the open round, join rounds until
 * assigned or shut (or go on in the slot a broken-off attempt kept). */
static int join_attempt(elastic_rdzv *r, elastic_rdzv_result *result, uint64_t *deadline,
                        join_progress *at)
{
    int rc = 0;
    rdzv__round_ptr ptr;
    uint64_t round = at->resume ? at->round : 0;
    pthread_mutex_lock(&r->lock);
    bool fenced = r->fenced;
    pthread_mutex_unlock(&r->lock);
    if (round == 0 && fenced && (rc = await_store_after_fence(r, *deadline)) != 0) return rc;
    /* A member whose generation just ended guesses the next round; a wrong
     * guess costs one exclusion (the round was sealed without it). A fenced
     * node reads the round: the others have moved on. Any other node tries
     * round 1 while the round pointer is absent, in its join (join_round). */
    pthread_mutex_lock(&r->lock);
    if (round == 0) round = r->phase == RDZV__ENDED && !r->fenced ? r->generation + 1 : 0;
    pthread_mutex_unlock(&r->lock);
    if (round == 0 && fenced) {
        rc = read_round_within(r, &ptr, *deadline);
        round = ptr.open_round;
    }
    /* round 0: join_round finds the open round with the join itself */
    while (rc == 0) {
        rdzv__assignment a;
        rc = join_round(r, round, deadline, &a, at);
        if (rc != 0) break;
        round = at->round;
        /* An assignment rebuilt from the round's record (or an older
         * sealer's) carries no incarnation: the round's sealer made sure
         * the key exists. */
        if (a.outcome == RDZV__ASSIGNED && a.incarnation == 0 &&
            (rc = rdzv__incarnation(r, &a.incarnation)) != 0)
            break;
        if (a.outcome == RDZV__ASSIGNED) {
            elastic_rdzv_result full;
            become_member(r, at->slot, &a, at->record_revision, &full);
            ELASTIC__STRUCT_WRITE(result, &full, "elastic_rdzv_result");
            ELASTIC_LOG_I("rdzv", "run %s: node %s is group rank %d of %d in generation %" PRIu64,
                          r->run_id, r->node_id, a.group_rank, a.group_world_size, a.generation);
            return 0;
        }
        at->slot = 0; /* not admitted: its record is gone (join_round) */
        if (a.outcome == RDZV__CLOSED) {
            rc = rdzv__check_closed(r);
            if (rc == 0) rc = elastic__fail(ELASTIC_ECLOSED, "rdzv: run %s has ended", r->run_id);
            break;
        }
        rc = rdzv__read_round(r, &ptr);
        round = ptr.open_round > round ? ptr.open_round : round + 1;
    }
    return rc;
}

ELASTIC_EXTERN int elastic_rdzv_next(elastic_rdzv *r, elastic_rdzv_result *result)
{
    elastic__clear_error();
    if (r == NULL || result == NULL)
        return elastic__fail(ELASTIC_EINVAL, "rdzv_next: NULL argument");
    int rc = elastic__struct_size_check(result->struct_size, "elastic_rdzv_result");
    if (rc == 0) rc = check_phase(r);
    if (rc != 0) return rc;
    uint64_t deadline = elastic__deadline_ms(r->join_timeout_ms);
    join_progress at = { 0 };
    bool said = false;
    for (;;) {
        rc = join_attempt(r, result, &deadline, &at);
        if (!transient_on_etcd(r, rc) || elastic__ms_left(deadline) <= 0) break;
        if (!said)
            ELASTIC_LOG_W("rdzv", "run %s: %s; trying again until join_timeout", r->run_id,
                          elastic_last_error());
        said = true;
        while (transient_on_etcd(r, rc = recover_attempt(r, &at, deadline)) &&
               elastic__ms_left(deadline) > 0)
            pause_for_retry(r, deadline);
        if (rc != 0) break;
    }
    if (rc == ELASTIC_ECLOSED || rc == ELASTIC_EBUDGET) return shut(r, rc);
    return rc;
}
