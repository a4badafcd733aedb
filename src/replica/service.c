/*
 * The memory tier as one node's agent hosts it (replica.h, "the node's
 * service"): the tier itself, the receiver for peers' copies, a replicator
 * thread that pushes each newly committed own step to this node's R targets,
 * and a disk thread that writes every Nth memory step to the disk tier from
 * the memory copy. Both threads wake when kicked (a worker committed) and
 * every half second; neither ever blocks the agent: it only kicks and reads
 * the counters.
 */
#include "common/dir.h"
#include "replica/wire.h"

#include "common/clock.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS     50 /* a scan of ROOT/own: a few directory reads */
#define MAX_TARGETS 16
/* A round of the memory commit that has no record by then is given up
 * (some node could not take part: its copy of the step was gone). */
#define ROUND_TIMEOUT_MS 10000

typedef struct target {
    replica_peer peer;
    replica_conn *conn; /* kept between pushes; reopened after a failure */
} target;

struct replica_service {
    replica_service_opts opts;
    char *root, *token, *disk_dir, node_name[REPLICA_NODE_MAX + 1];
    replica_server *server;
    pthread_mutex_t lock;
    pthread_cond_t wake, progress;
    bool stopping;
    unsigned kicks; /* bumped by kick: a thread that saw an older value looks again */
    target targets[MAX_TARGETS];
    size_t n_targets;
    bool targets_changed;
    replica_service_stats stats;
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

/* The replicator's view of the memory commit (commit.c). */
typedef struct round_state {
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
} round_state;

/* The newest step of ROOT/own with a commit record, and that record's time. */
static uint64_t newest_committed(const replica_service *s, uint64_t *commit_wall_ms)
{
    char own[PATH_MAX], path[PATH_MAX + 64];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, s->root);
    uint64_t *steps = NULL, found = 0;
    size_t n = 0;
    if (ckpt__scan_steps(own, &steps, &n) != 0) return 0;
    for (size_t i = n; i-- > 0 && found == 0;) {
        char step_dir[PATH_MAX];
        ckpt__step_dir(own, steps[i], step_dir, sizeof step_dir);
        snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        found = steps[i];
        if (commit_wall_ms)
            *commit_wall_ms =
                (uint64_t)st.st_mtim.tv_sec * 1000u + (uint64_t)st.st_mtim.tv_nsec / 1000000u;
    }
    free(steps);
    return found;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sleeps until kicked (since `seen`), stopping, or POLL_MS. Called locked. */
static void wait_for_work(replica_service *s, unsigned *seen)
{
    if (s->kicks == *seen && !s->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)POLL_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->wake, &s->lock, &until);
    }
    *seen = s->kicks;
}

static int connect_target(replica_service *s, target *t, uint64_t deadline)
{
    if (t->conn != NULL) return 0;
    int rc = replica__tcp_connect(t->peer.host, t->peer.port, deadline, &t->conn);
    if (rc == 0 && (rc = replica__auth_client(t->conn, s->token, deadline)) != 0) {
        replica__close(t->conn);
        t->conn = NULL;
    }
    return rc;
}

/* Pushes `step` to every target; true when all hold it. Runs unlocked: the
 * targets array is only changed by set_peers, which waits for no push (it
 * marks the change; the replicator picks it up before its next round). */
static bool push_everywhere(replica_service *s, target *targets, size_t n, uint64_t step)
{
    char own[PATH_MAX];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, s->root);
    bool all = true;
    for (size_t i = 0; i < n; i++) {
        uint64_t deadline = elastic__deadline_ms(s->opts.io_timeout_ms), bytes = 0;
        int rc = connect_target(s, &targets[i], deadline);
        if (rc == 0)
            rc = replica__push_step(targets[i].conn, s->node_name, own, step, &bytes, deadline);
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

/* The round's steps, and the job's last committed one, pinned against
 * every retention of the tier (memtier.h, the keep file). */
static void pin(replica_service *s, const round_state *rs)
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

static bool step_committed_here(const replica_service *s, uint64_t step, uint64_t *commit_wall_ms)
{
    char own[PATH_MAX], step_dir[PATH_MAX], path[PATH_MAX + 64];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, s->root);
    ckpt__step_dir(own, step, step_dir, sizeof step_dir);
    snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
    struct stat st;
    if (stat(path, &st) != 0) return false;
    *commit_wall_ms = (uint64_t)st.st_mtim.tv_sec * 1000u + (uint64_t)st.st_mtim.tv_nsec / 1000000u;
    return true;
}

static void replicated(replica_service *s, uint64_t step, uint64_t commit_ms)
{
    pthread_mutex_lock(&s->lock);
    if (step > s->stats.replicated_step) s->stats.replicated_step = step;
    uint64_t now = wall_ms();
    s->stats.lag_ms = now > commit_ms ? now - commit_ms : 0;
    pthread_cond_broadcast(&s->progress);
    pthread_mutex_unlock(&s->lock);
}

static void next_round(replica_service *s, round_state *rs)
{
    rs->prev2 = rs->prev;
    rs->prev = rs->step;
    rs->k++;
    rs->step = 0;
    rs->counted = false;
    pin(s, rs);
}

/* Without a job store: each new committed own step goes to every target.
 * True when there is nothing to do until kicked. */
static bool push_newest(replica_service *s, target *targets, size_t n)
{
    pthread_mutex_lock(&s->lock);
    uint64_t replicated_step = s->stats.replicated_step;
    pthread_mutex_unlock(&s->lock);
    uint64_t commit_ms = 0, newest = newest_committed(s, &commit_ms);
    bool done = newest > replicated_step && (n == 0 || push_everywhere(s, targets, n, newest));
    if (done) replicated(s, newest, commit_ms);
    pthread_mutex_lock(&s->lock);
    if (!done && newest > replicated_step) s->stats.push_failures++;
    pthread_mutex_unlock(&s->lock);
    return !done;
}

/* Writes the keep file with `extra` pinned besides the committed step
 * (before proposing it: retention must not evict it meanwhile). */
static void pin_also(replica_service *s, uint64_t extra)
{
    round_state one = { .step = extra };
    pin(s, &one);
}

/* The round's step as this node plays it: learned, proposed (none yet:
 * our newest), or raised (we are past it and no longer hold it: our
 * newest). 0 when the store did not answer. */
static uint64_t round_target(replica_service *s, round_state *rs, uint64_t newest)
{
    uint64_t current = 0, commit_ms = 0;
    if (replica__round_current(rs->store, rs->generation, rs->k, &current) != 0) {
        ELASTIC_LOG_D("replica", "memory commit round %" PRIu64 ": %s", rs->k,
                      elastic_last_error());
        return 0;
    }
    bool lacking = current > 0 && current < newest && !step_committed_here(s, current, &commit_ms);
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

/* One turn of the memory commit's current round (commit.c): learn,
 * propose or raise its step, push that step when this node has it, count
 * in, look for the record. True when there is nothing to do until kicked. */
static bool play_round(replica_service *s, round_state *rs, target *targets, size_t n)
{
    uint64_t newest = newest_committed(s, NULL);
    if (rs->step == 0 && newest <= rs->prev) return true; /* nothing newer than the last round */
    uint64_t want = round_target(s, rs, newest);
    if (want == 0) return true;
    if (want != rs->step) { /* a new step for the round: progress, the clock starts again */
        rs->step = want;
        rs->counted = false;
        rs->deadline = elastic__deadline_ms(ROUND_TIMEOUT_MS);
        pin(s, rs);
    }
    uint64_t commit_ms = 0;
    if (!rs->counted && step_committed_here(s, rs->step, &commit_ms)) {
        if (n == 0 || push_everywhere(s, targets, n, rs->step)) {
            replicated(s, rs->step, commit_ms);
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
        uint64_t now = wall_ms();
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

static void *replicator_main(void *arg)
{
    replica_service *s = arg;
    target local[MAX_TARGETS];
    size_t n_local = 0;
    unsigned seen = 0;
    round_state rs = { 0 };
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        if (s->targets_changed) { /* new placement: connections to the old targets go */
            for (size_t i = 0; i < n_local; i++) replica__close(local[i].conn);
            n_local = s->n_targets;
            for (size_t i = 0; i < n_local; i++) local[i] = (target){ .peer = s->targets[i].peer };
            s->targets_changed = false;
        }
        elastic_store *old = NULL;
        bool fresh = s->generation_changed;
        if (fresh) { /* a new generation: its rounds start at 1 */
            old = rs.store;
            rs = (round_state){ .store = s->next_store,
                                .generation = s->next_generation,
                                .world = s->next_world,
                                .k = 1,
                                .prev = s->next_restored };
            s->next_store = NULL;
            s->generation_changed = false;
        }
        pthread_mutex_unlock(&s->lock);
        if (old != NULL) elastic_store_close(old);
        if (fresh) pin(s, &rs); /* the restored step, until a round commits */
        uint64_t newest = newest_committed(s, NULL);
        bool idle =
            rs.store != NULL ? play_round(s, &rs, local, n_local) : push_newest(s, local, n_local);
        pthread_mutex_lock(&s->lock);
        s->stats.own_step = newest > s->stats.own_step ? newest : s->stats.own_step;
        s->stats.targets = (unsigned)n_local;
        if (idle) wait_for_work(s, &seen);
    }
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n_local; i++) replica__close(local[i].conn);
    elastic_store_close(rs.store);
    return NULL;
}

/* Every shard of the step in ROOT/own, written to the disk tier. */
static int write_to_disk(replica_service *s, uint64_t step)
{
    char own[PATH_MAX], step_dir[PATH_MAX], path[PATH_MAX + 300];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, s->root);
    ckpt__step_dir(own, step, step_dir, sizeof step_dir);
    snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
    uint8_t *raw = NULL;
    size_t len = 0;
    ckpt_commit_record r;
    int rc = ckpt__read_small_file(path, 32u + 16u * CKPT_MAX_WORLD + 8u, &raw, &len);
    if (rc == 0) rc = ckpt__commit_decode(raw, len, &r);
    free(raw);
    if (rc) return rc;
    DIR *d = elastic__opendir(step_dir);
    if (d == NULL) rc = ckpt__fail_errno(errno, "open", step_dir);
    struct dirent *e;
    while (rc == 0 && d != NULL && (e = readdir(d)) != NULL) {
        uint32_t rank;
        uint64_t gen;
        if (!ckpt__parse_shard_name(e->d_name, &rank, &gen) || gen != r.generation ||
            rank >= r.world)
            continue;
        snprintf(path, sizeof path, "%s/%s", step_dir, e->d_name);
        elastic_ckpt_opts o;
        elastic_ckpt_opts_init(&o, sizeof o);
        o.rank = rank;
        o.world = r.world;
        o.generation = r.generation;
        o.threads = 1;
        elastic_ckpt *disk;
        rc = elastic_ckpt_open(s->disk_dir, &o, &disk);
        if (rc == 0) {
            rc = ckpt__adopt_shard(disk, step, path);
            elastic_ckpt_close(disk);
        }
    }
    if (d) closedir(d);
    ckpt__commit_free(&r);
    return rc;
}

static void *disk_main(void *arg)
{
    replica_service *s = arg;
    unsigned seen = 0;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        uint64_t written = s->stats.disk_step;
        pthread_mutex_unlock(&s->lock);
        uint64_t newest = newest_committed(s, NULL);
        bool due = newest > written && newest % s->opts.disk_every == 0;
        int rc = due ? write_to_disk(s, newest) : 0;
        if (due && rc != 0)
            ELASTIC_LOG_W("replica", "step %" PRIu64 " to disk: %s", newest, elastic_last_error());
        pthread_mutex_lock(&s->lock);
        if (due && rc == 0) s->stats.disk_step = newest;
        if (due && rc != 0) s->stats.disk_failures++;
        if (!due || rc != 0) wait_for_work(s, &seen);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void service_free(replica_service *s)
{
    elastic_store_close(s->next_store);
    replica__server_stop(s->server);
    if (s->root) ckpt__mem_tier_remove(s->root);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->progress);
    free(s->root);
    if (s->token) {
        memset(s->token, 0, strlen(s->token));
        free(s->token);
    }
    free(s->disk_dir);
    free(s);
}

int replica__service_start(const replica_service_opts *opts, replica_service **out)
{
    if (opts == NULL || opts->root == NULL || out == NULL)
        return elastic__fail(ELASTIC_EINVAL, "memory tier service: NULL argument");
    if (opts->disk_every > 0 && opts->disk_dir == NULL)
        return elastic__fail(ELASTIC_EINVAL, "memory tier service: disk_every without disk_dir");
    replica_service *s = calloc(1, sizeof *s);
    if (s == NULL) return elastic__fail(ELASTIC_ENOMEM, "memory tier service");
    s->opts = *opts;
    if (s->opts.limit == 0) s->opts.limit = ckpt__mem_default_limit();
    if (s->opts.steps == 0) s->opts.steps = 2;
    if (s->opts.io_timeout_ms <= 0) s->opts.io_timeout_ms = 30000;
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &attr);
    pthread_cond_init(&s->progress, &attr);
    pthread_condattr_destroy(&attr);
    s->root = elastic__strdup(opts->root);
    s->token = opts->token ? elastic__strdup(opts->token) : NULL;
    s->disk_dir = opts->disk_dir ? elastic__strdup(opts->disk_dir) : NULL;
    int rc = s->root && (!opts->token || s->token) && (!opts->disk_dir || s->disk_dir)
                 ? 0
                 : elastic__fail(ELASTIC_ENOMEM, "memory tier service");
    if (rc == 0) rc = ckpt__mem_tier_create(s->root, s->opts.limit, s->opts.steps);
    replica_server_opts so = { .tier_root = s->root,
                               .token = s->token,
                               .host = opts->listen_host,
                               .port = opts->port,
                               .io_timeout_ms = s->opts.io_timeout_ms };
    if (rc == 0) rc = replica__server_start(&so, &s->server);
    if (rc == 0 && pthread_create(&s->replicator, NULL, replicator_main, s) != 0)
        rc = elastic__fail(ELASTIC_ESYS, "memory tier replicator thread");
    s->replicator_started = rc == 0;
    if (rc == 0 && s->opts.disk_every > 0 && pthread_create(&s->disk, NULL, disk_main, s) != 0)
        rc = elastic__fail(ELASTIC_ESYS, "memory tier disk thread");
    s->disk_started = rc == 0 && s->opts.disk_every > 0;
    if (rc) {
        replica__service_stop(s);
        return rc;
    }
    *out = s;
    return 0;
}

int replica__service_port(const replica_service *s)
{
    return replica__server_port(s->server);
}

int replica__service_set_peers(replica_service *s, const replica_peer *nodes, size_t n, size_t self)
{
    if (self >= n) return elastic__fail(ELASTIC_EINVAL, "memory tier: self not among the nodes");
    if (!replica__node_name_ok(nodes[self].name))
        return elastic__fail(ELASTIC_EINVAL, "memory tier: bad node name \"%s\"", nodes[self].name);
    replica_node *list = calloc(n, sizeof *list);
    size_t *picked = calloc(MAX_TARGETS, sizeof *picked);
    if (list == NULL || picked == NULL) {
        free(list);
        free(picked);
        return elastic__fail(ELASTIC_ENOMEM, "placement");
    }
    for (size_t i = 0; i < n; i++) list[i] = (replica_node){ nodes[i].name, nodes[i].domain };
    size_t r = s->opts.replicas < MAX_TARGETS ? s->opts.replicas : MAX_TARGETS;
    size_t k = replica__place(list, n, self, r, picked);
    if (k < r) ELASTIC_LOG_W("replica", "%zu of %zu copies placed: not enough other nodes", k, r);
    pthread_mutex_lock(&s->lock);
    snprintf(s->node_name, sizeof s->node_name, "%s", nodes[self].name);
    for (size_t i = 0; i < k; i++) s->targets[i] = (target){ .peer = nodes[picked[i]] };
    s->n_targets = k;
    s->targets_changed = true;
    /* Copies of the current step may be missing on a new target: push again. */
    s->stats.replicated_step = 0;
    s->kicks++;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    free(list);
    free(picked);
    return 0;
}

int replica__service_set_generation(replica_service *s, elastic_store *store, uint64_t generation,
                                    int world, uint64_t restored_step, uint64_t restored_generation)
{
    if (world < 1) return elastic__fail(ELASTIC_EINVAL, "memory commit: world %d", world);
    elastic_store *mine = NULL;
    if (store != NULL) {
        int rc = elastic_store_clone(store, "", &mine);
        if (rc != 0) return rc;
    }
    pthread_mutex_lock(&s->lock);
    elastic_store *untaken = s->next_store;
    s->next_store = mine;
    s->next_generation = generation;
    s->next_world = world;
    s->next_restored = restored_step;
    s->generation_changed = true;
    /* Every node restored this step: the generation's first committed one. */
    s->stats.committed_step = restored_step;
    s->stats.committed_generation = restored_step > 0 ? restored_generation : 0;
    s->kicks++;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    elastic_store_close(untaken); /* a generation the replicator never saw */
    return 0;
}

void replica__service_history_record(replica_service *s, const ckpt_generation_start *g)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_history; i++) {
        if (s->history[i].generation != g->generation) continue;
        s->history[i] = *g;
        pthread_mutex_unlock(&s->lock);
        return;
    }
    if (s->n_history == REPLICA_HISTORY_MAX) { /* the oldest goes */
        memmove(s->history, s->history + 1, (REPLICA_HISTORY_MAX - 1) * sizeof *s->history);
        s->n_history--;
    }
    s->history[s->n_history++] = *g;
    pthread_mutex_unlock(&s->lock);
}

size_t replica__service_history(replica_service *s, ckpt_generation_start *out, size_t max)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->n_history < max ? s->n_history : max;
    memcpy(out, s->history + (s->n_history - n), n * sizeof *out);
    pthread_mutex_unlock(&s->lock);
    return n;
}

void replica__service_kick(replica_service *s)
{
    pthread_mutex_lock(&s->lock);
    s->kicks++;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void replica__service_stats(replica_service *s, replica_service_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    pthread_mutex_unlock(&s->lock);
    out->held_bytes = ckpt__mem_usage(s->root);
    char own[PATH_MAX];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, s->root);
    out->own_bytes = ckpt__mem_usage(own);
    replica__server_counts(s->server, &out->replicas_in, NULL, NULL);
}

/* Waits on `progress` until *field reaches `step`. Called unlocked. */
static int wait_progress(replica_service *s, const uint64_t *field, uint64_t step,
                         uint64_t deadline_ms)
{
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    while (*field < step && rc == 0) {
        int left = elastic__ms_left(deadline_ms);
        if (left == 0) {
            rc = ELASTIC_ETIMEDOUT;
            break;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += left / 1000;
        until.tv_nsec += (long)(left % 1000) * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->progress, &s->lock, &until);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int replica__service_wait_replicated(replica_service *s, uint64_t step, uint64_t deadline_ms)
{
    int rc = wait_progress(s, &s->stats.replicated_step, step, deadline_ms);
    return rc ? elastic__fail(rc, "step %" PRIu64 " not replicated in time", step) : 0;
}

int replica__service_wait_committed(replica_service *s, uint64_t step, uint64_t deadline_ms)
{
    int rc = wait_progress(s, &s->stats.committed_step, step, deadline_ms);
    return rc ? elastic__fail(rc, "step %" PRIu64 " not memory-committed in time", step) : 0;
}

void replica__service_stop(replica_service *s)
{
    if (s == NULL) return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (s->replicator_started) pthread_join(s->replicator, NULL);
    if (s->disk_started) pthread_join(s->disk, NULL);
    service_free(s);
}

const char *replica__service_root(const replica_service *s)
{
    return s->root;
}

const char *replica__service_token(const replica_service *s)
{
    return s->token;
}
