/*
 * The memory tier as one node's agent hosts it (replica.h, "the node's
 * service"): the tier itself, the receiver for peers' copies, a replicator
 * thread that pushes each newly committed own step to this node's R targets,
 * and a disk thread that writes every Nth memory step to the disk tier from
 * the memory copy. Both threads wake when kicked (a worker committed) and
 * every half second; neither ever blocks the agent: it only kicks and reads
 * the counters.
 */
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
};

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

static void *replicator_main(void *arg)
{
    replica_service *s = arg;
    target local[MAX_TARGETS];
    size_t n_local = 0;
    unsigned seen = 0;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        if (s->targets_changed) { /* new placement: connections to the old targets go */
            for (size_t i = 0; i < n_local; i++) replica__close(local[i].conn);
            n_local = s->n_targets;
            for (size_t i = 0; i < n_local; i++) local[i] = (target){ .peer = s->targets[i].peer };
            s->targets_changed = false;
        }
        uint64_t replicated = s->stats.replicated_step;
        pthread_mutex_unlock(&s->lock);
        uint64_t commit_ms = 0, newest = newest_committed(s, &commit_ms);
        bool done =
            newest > replicated && (n_local == 0 || push_everywhere(s, local, n_local, newest));
        pthread_mutex_lock(&s->lock);
        s->stats.own_step = newest > s->stats.own_step ? newest : s->stats.own_step;
        if (done) {
            s->stats.replicated_step = newest;
            uint64_t now = wall_ms();
            s->stats.lag_ms = now > commit_ms ? now - commit_ms : 0;
            pthread_cond_broadcast(&s->progress);
        } else if (newest > replicated) {
            s->stats.push_failures++;
        }
        if (!done) wait_for_work(s, &seen);
    }
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n_local; i++) replica__close(local[i].conn);
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
    DIR *d = opendir(step_dir);
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
    replica__server_counts(s->server, &out->replicas_in, NULL, NULL);
}

int replica__service_wait_replicated(replica_service *s, uint64_t step, uint64_t deadline_ms)
{
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    while (s->stats.replicated_step < step && rc == 0) {
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
    return rc ? elastic__fail(rc, "step %" PRIu64 " not replicated in time", step) : 0;
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
