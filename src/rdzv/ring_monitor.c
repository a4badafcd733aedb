/*
 * The monitor thread: while this node is in a generation it watches one key
 * area, its ring neighbour's (r/<g>/n/<slot>/). The neighbour's lease ending
 * deletes its record there, so exactly one member learns of a lost node
 * within a round trip and ends the generation; the end broadcast touches
 * every area, so every monitor learns of any end the same way. A finished
 * neighbour is skipped (no re-formation). Runs the on_change callback.
 */
#include "rdzv/rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* What is in a watched area right now (one listing). */
typedef struct area_state {
    bool alive, done;
    bool ended; /* the end broadcast's mark is there */
} area_state;

/* With `revision` (not NULL): also the revision the listing was made at,
 * where the backend says it (keys_at), else ELASTIC_EUNSUPPORTED. */
static int read_area(elastic_rdzv *r, uint64_t generation, int slot, area_state *state,
                     uint64_t *revision)
{
    char prefix[64];
    char **names = NULL;
    size_t n = 0;
    rdzv__key_slot(prefix, sizeof prefix, generation, slot, "");
    int rc = revision == NULL
                 ? r->backend->ops->keys(r->backend, prefix, 4096, &names, &n)
                 : r->backend->ops->keys_at(r->backend, prefix, 4096, &names, &n, revision);
    if (rc != 0) return rc;
    size_t plen = strlen(prefix);
    memset(state, 0, sizeof *state);
    for (size_t i = 0; i < n; i++) {
        const char *name = strncmp(names[i], prefix, plen) == 0 ? names[i] + plen : names[i];
        if (strcmp(name, "rec") == 0)
            state->alive = true;
        else if (strcmp(name, "done") == 0)
            state->done = true;
        else if (strcmp(name, "e") == 0)
            state->ended = true;
    }
    elastic_free(names);
    return 0;
}

void rdzv__notify(elastic_rdzv *r, uint64_t generation, const elastic_rdzv_cause *cause)
{
    pthread_mutex_lock(&r->lock);
    elastic_rdzv_change_fn fn = NULL;
    void *user = NULL;
    if (r->notified_generation < generation) {
        r->notified_generation = generation;
        fn = r->on_change;
        user = r->on_change_user;
    }
    pthread_mutex_unlock(&r->lock);
    if (fn != NULL) fn(user, cause);
}

/* The next member after a finished one, from its assignment. */
static int skip_finished(elastic_rdzv *r, uint64_t generation, int *slot, char *node_id)
{
    char key[64];
    void *value = NULL;
    size_t len = 0;
    rdzv__assignment a;
    rdzv__key_slot(key, sizeof key, generation, *slot, "a");
    int rc = r->backend->ops->get(r->backend, key, &value, &len);
    if (rc == 0) rc = rdzv__assignment_decode(value, len, &a);
    elastic_free(value);
    if (rc != 0) return rc;
    if (a.outcome != RDZV__ASSIGNED)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: %s is no member", key);
    *slot = a.next_slot;
    snprintf(node_id, RDZV__MAX_ID, "%s", a.next_node_id);
    return 0;
}

void rdzv__report_lost(elastic_rdzv *r, uint64_t generation, const char *node_id)
{
    char key[64];
    int64_t gone;
    elastic_rdzv_cause cause;
    bool won;
    rdzv__key_round(key, sizeof key, generation, "gone");
    int rc = r->backend->ops->add(r->backend, key, 1, &gone);
    rdzv__fill_cause(r, &cause, ELASTIC_RDZV_NODE_LOST, generation, node_id,
                     "lease ended (node silent or gone)");
    if (rc == 0) rc = rdzv__end(r, generation, &cause, &won);
    if (rc != 0)
        ELASTIC_LOG_W("rdzv", "run %s: reporting lost node %s: %s", r->run_id, node_id,
                      elastic_last_error());
}

/* Whether the monitor should still follow `generation`; publishes the area. */
static bool still_wanted(elastic_rdzv *r, uint64_t generation, int slot)
{
    pthread_mutex_lock(&r->lock);
    bool wanted = !r->stopping && !r->watch_stop && r->watch_generation == generation;
    if (wanted) r->watching_slot = slot;
    pthread_mutex_unlock(&r->lock);
    return wanted;
}

static void pause_after_error(elastic_rdzv *r)
{
    pthread_mutex_lock(&r->lock);
    struct timespec at = elastic__timespec_at(elastic__now_ms() + 100);
    if (!r->stopping) pthread_cond_timedwait(&r->changed, &r->lock, &at);
    pthread_mutex_unlock(&r->lock);
}

/* Deletes this node's keys of its previous generation, if still pending. */
static void clean_previous(elastic_rdzv *r)
{
    pthread_mutex_lock(&r->lock);
    uint64_t generation = r->stale_generation;
    int slot = r->stale_slot;
    r->stale_generation = 0;
    pthread_mutex_unlock(&r->lock);
    if (generation > 0) rdzv__forget_slot(r, generation, slot);
}

static int cleanup_delay_ms(const elastic_rdzv *r, unsigned *seed)
{
    int spread = r->max_nodes / 4;
    return 1000 + (spread > 0 ? rand_r(seed) % (spread + 1) : 0);
}

/* A monitor's walk along the ring: whose area it watches and where it is. */
typedef struct ring_watch {
    elastic_rdzv *r;
    uint64_t generation;
    int my_slot, slot; /* ours; the neighbour's being watched */
    char *node_id;     /* the neighbour's */
    uint64_t revision; /* the watch goes on from here */
    bool reported, cleaned;
    bool armed;    /* the area was looked at: the next wake-up is a change in it */
    unsigned seed; /* only spreads the cleanup's timing */
} ring_watch;

/* A new area is first read with the revision of the reading, where the
 * backend says it: the watch then starts from there, one message instead of
 * a watch that returns at once (its keys exist) and a read. false: not
 * looked (armed already, or no revision said); else *rc as await_change's. */
static bool first_look(ring_watch *w, area_state *area, bool *area_read, elastic_rdzv_cause *cause,
                       int *rc)
{
    if (w->armed) return false;
    *rc = read_area(w->r, w->generation, w->slot, area, &w->revision);
    if (*rc == ELASTIC_EUNSUPPORTED) return false;
    *area_read = w->armed = *rc == 0;
    if (*rc == 0)
        *rc = area->ended ? rdzv__read_end(w->r, w->generation, cause) : ELASTIC_ENOTFOUND;
    return true;
}

/* Waits for a change in the area: 0 with *cause when the generation ended,
 * ELASTIC_ENOTFOUND (*area_read: what the area holds) when it did not, or an
 * error; *quiet when nothing changed within the slice (the previous
 * generation's cleanup then runs). */
static int await_change(ring_watch *w, const char *prefix, area_state *area, bool *area_read,
                        elastic_rdzv_cause *cause, bool *quiet)
{
    elastic_rdzv *r = w->r;
    /* Cleanup waits for the first quiet second, away from the rush of a
     * re-formation, and a large job's nodes spread theirs over a window
     * that grows with the job (a quarter ms a node: 4 s at 16k nodes,
     * whose 3 deletes each would otherwise reach the store at once). */
    int slice = w->cleaned ? r->watch_slice_ms : cleanup_delay_ms(r, &w->seed);
    void *end = NULL;
    size_t end_len = 0;
    int rc = r->backend->ops->watch_area(r->backend, prefix, w->revision, slice, &w->revision, &end,
                                         &end_len);
    /* The end mark's Put carries the cause where the backend hands it over:
     * no read of the end record (an older writer's "1" does not decode:
     * read it). */
    bool given = rc == 0 && w->armed && end != NULL &&
                 rdzv__cause_decode(end, end_len, cause) == 0 && cause->generation == w->generation;
    elastic_free(end);
    *quiet = rc == ELASTIC_ETIMEDOUT;
    if (*quiet) {
        if (!w->cleaned) clean_previous(r);
        w->cleaned = true;
        return rc;
    }
    /* Most wake-ups are the end broadcast: look for the end first. The first
     * watch of an area returns at once (its keys exist): the area says
     * whether the end came already, one message instead of two. */
    if (given) {
        elastic__clear_error();
    } else if (rc == 0 && w->armed) {
        rc = rdzv__read_end(r, w->generation, cause);
    } else if (rc == 0) {
        w->armed = true;
        *area_read = true;
        rc = read_area(r, w->generation, w->slot, area, NULL);
        if (rc == 0) rc = area->ended ? rdzv__read_end(r, w->generation, cause) : ELASTIC_ENOTFOUND;
    }
    return rc;
}

/* The generation goes on: a neighbour alive is followed on; one that
 * finished hands the watch to the next member; one gone is reported once. */
static void act_on_area(ring_watch *w, const area_state *area)
{
    if (w->slot == w->my_slot || area->alive) return;
    if (area->done) {
        if (skip_finished(w->r, w->generation, &w->slot, w->node_id) != 0) pause_after_error(w->r);
        w->revision = 0;
        w->armed = false;
    } else if (!w->reported) {
        w->reported = true;
        rdzv__report_lost(w->r, w->generation, w->node_id);
    }
}

static void watch_ring(elastic_rdzv *r, uint64_t generation, int my_slot, int slot, char *node_id,
                       uint64_t from_revision)
{
    ring_watch w = {
        .r = r, .generation = generation, .my_slot = my_slot, .slot = slot, .node_id = node_id
    };
    if (from_revision > 0) { /* said only where watch_area skips the area's Puts (etcd) */
        /* The sealer read the records after ours: from our record's revision
         * the area holds the neighbour's live record and nothing else we
         * follow, and every change after it is an event. */
        w.revision = from_revision;
        w.armed = true;
    }
    w.seed = (unsigned)(elastic__now_ms() ^ (uintptr_t)r ^ (unsigned)my_slot * 2654435761u);
    char prefix[64];
    while (still_wanted(r, generation, w.slot)) {
        rdzv__key_slot(prefix, sizeof prefix, generation, w.slot, "");
        elastic_rdzv_cause cause;
        area_state area = { 0 };
        bool area_read = false, quiet = false;
        int rc = 0;
        if (!first_look(&w, &area, &area_read, &cause, &rc))
            rc = await_change(&w, prefix, &area, &area_read, &cause, &quiet);
        if (quiet) continue;
        if (rc == 0 && cause.kind == ELASTIC_RDZV_NODE_LOST &&
            strcmp(cause.node_id, r->node_id) == 0) {
            /* The others lost us (we were frozen or cut off) and moved on. */
            rdzv__fence(r, generation,
                        "the other nodes lost this node's lease and ended its generation");
            return;
        }
        if (rc == 0) {
            rdzv__note_end(r, generation, &cause);
            rdzv__notify(r, generation, &cause);
            return;
        }
        /* The generation goes on: act on the area as read (a first look
         * finds a neighbour already gone or finished: its record went before
         * the revision the watch goes on from, so no later change would
         * tell), else read it now. */
        if (rc == ELASTIC_ENOTFOUND)
            rc = area_read ? 0 : read_area(r, generation, w.slot, &area, NULL);
        if (rc != 0) {
            ELASTIC_LOG_D("rdzv", "run %s: watch: %s", r->run_id, elastic_last_error());
            pause_after_error(r);
            continue;
        }
        act_on_area(&w, &area);
    }
}

static void follow_ring(elastic_rdzv *r, uint64_t generation, int my_slot, int slot, char *node_id,
                        uint64_t from_revision)
{
    watch_ring(r, generation, my_slot, slot, node_id, from_revision);
    /* A generation too short for a quiet second still cleans up after
     * itself (a no-op when done already). */
    clean_previous(r);
}

static void *monitor_main(void *arg)
{
    elastic_rdzv *r = arg;
    pthread_mutex_lock(&r->lock);
    while (!r->stopping) {
        if (r->watch_stop && r->watch_generation != 0) {
            /* Asked to stop before we started following: acknowledge. */
            r->watch_generation = 0;
            pthread_cond_broadcast(&r->changed);
        }
        if (r->watch_generation == 0 || r->watch_stop) {
            struct timespec at = elastic__timespec_at(UINT64_MAX);
            pthread_cond_timedwait(&r->changed, &r->lock, &at);
            continue;
        }
        uint64_t generation = r->watch_generation;
        int my_slot = r->slot, next = r->watch_next_slot;
        uint64_t from = r->watch_from;
        char next_id[RDZV__MAX_ID];
        snprintf(next_id, sizeof next_id, "%s", r->watch_next_id);
        pthread_mutex_unlock(&r->lock);
        follow_ring(r, generation, my_slot, next, next_id, from);
        pthread_mutex_lock(&r->lock);
        if (r->watch_generation == generation) r->watch_generation = 0;
        r->watching_slot = 0;
        pthread_cond_broadcast(&r->changed);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

int rdzv__monitor_start(elastic_rdzv *r)
{
    int rc = pthread_create(&r->monitor, NULL, monitor_main, r);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "rdzv: cannot start the monitor thread");
    r->monitor_running = true;
    return 0;
}

void rdzv__monitor_watch(elastic_rdzv *r, uint64_t generation, int next_slot, const char *next_id,
                         uint64_t from_revision)
{
    pthread_mutex_lock(&r->lock);
    r->watch_generation = generation;
    r->watch_from = from_revision;
    r->watch_next_slot = next_slot;
    snprintf(r->watch_next_id, sizeof r->watch_next_id, "%s", next_id);
    r->watch_stop = false;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
}

/* Wakes the monitor out of its watch by writing a key of our own into the
 * area it follows (no one else watches that area). */
static void kick(elastic_rdzv *r, uint64_t generation, int area_slot, int my_slot)
{
    char key[64], name[24];
    snprintf(name, sizeof name, "x%d", my_slot);
    rdzv__key_slot(key, sizeof key, generation, area_slot, name);
    int rc = r->have_lease ? r->backend->ops->set_leased(r->backend, key, "1", 1, r->lease)
                           : r->backend->ops->set(r->backend, key, "1", 1);
    if (rc != 0)
        ELASTIC_LOG_D("rdzv", "run %s: waking the monitor: %s", r->run_id, elastic_last_error());
}

void rdzv__monitor_unwatch(elastic_rdzv *r)
{
    uint64_t deadline = elastic__now_ms() + (uint64_t)r->watch_slice_ms + 1000;
    pthread_mutex_lock(&r->lock);
    r->watch_stop = true;
    while (r->watch_generation != 0 && elastic__now_ms() < deadline) {
        uint64_t generation = r->watch_generation;
        int area = r->watching_slot, mine = r->slot;
        pthread_mutex_unlock(&r->lock);
        if (area != 0) kick(r, generation, area, mine);
        pthread_mutex_lock(&r->lock);
        struct timespec at = elastic__timespec_at(elastic__now_ms() + 500);
        if (r->watch_generation != 0) pthread_cond_timedwait(&r->changed, &r->lock, &at);
    }
    r->watch_generation = 0;
    pthread_mutex_unlock(&r->lock);
}

void rdzv__monitor_stop(elastic_rdzv *r)
{
    if (!r->monitor_running) return;
    rdzv__monitor_unwatch(r);
    pthread_mutex_lock(&r->lock);
    r->stopping = true;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->monitor, NULL);
    r->monitor_running = false;
}
