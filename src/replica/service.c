/*
 * The memory tier as one node's agent hosts it (replica.h, "the node's
 * service"): the tier itself, the receiver for peers' copies, and two
 * threads: the replicator (replicator.c, which plays the memory commit's
 * rounds: commit_round.c) and the disk writer (disk_copy.c). This file is
 * the service's life, what the agent calls (each call only kicks the
 * threads or reads the counters: none blocks the agent), and the helpers
 * the threads share (service_state.h).
 */
#include "replica/service_state.h"

#include "common/clock.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

uint64_t replica__newest_committed(const replica_service *s, uint64_t *commit_wall_ms)
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

bool replica__step_committed_here(const replica_service *s, uint64_t step, uint64_t *commit_wall_ms)
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

uint64_t replica__wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void replica__refresh_usage(replica_service *s, bool changed)
{
    uint64_t now = elastic__now_ms();
    pthread_mutex_lock(&s->lock);
    bool due = changed || s->usage_ms == 0 || now - s->usage_ms >= USAGE_MS;
    pthread_mutex_unlock(&s->lock);
    if (!due) return;
    uint64_t held = ckpt__mem_usage(s->root);
    char own[PATH_MAX];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, s->root);
    uint64_t own_bytes = ckpt__mem_usage(own);
    pthread_mutex_lock(&s->lock);
    s->stats.held_bytes = held;
    s->stats.own_bytes = own_bytes;
    s->usage_ms = now;
    pthread_mutex_unlock(&s->lock);
}

void replica__wait_for_work(replica_service *s, unsigned *seen)
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

static void service_free(replica_service *s)
{
    elastic_store_close(s->next_store);
    replica__server_stop(s->server);
    if (s->root) ckpt__mem_tier_remove(s->root);
    if (s->owner_fd >= 0) close(s->owner_fd); /* after the removal: never a tier without holder */
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

/* The tiers beside ours (/dev/shm/elastic-mem-*) that nobody holds any
 * more: agents that died with their reapers (a cgroup kill, the OOM killer)
 * left them, and tmpfs would keep them until reboot. Ours is held by now. */
static void sweep_beside(const char *root)
{
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", root);
    char *slash = strrchr(parent, '/');
    if (slash == NULL ||
        strncmp(slash + 1, CKPT_MEM_TIER_PREFIX, strlen(CKPT_MEM_TIER_PREFIX)) != 0)
        return; /* not an agent's tier: not our place to look around */
    if (slash == parent)
        slash[1] = '\0';
    else
        *slash = '\0';
    ckpt__mem_sweep_leaked(parent);
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
    s->owner_fd = -1;
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
    if (rc == 0) rc = ckpt__mem_tier_hold(s->root, &s->owner_fd);
    if (rc == 0) sweep_beside(s->root);
    replica_server_opts so = { .tier_root = s->root,
                               .token = s->token,
                               .host = opts->listen_host,
                               .port = opts->port,
                               .io_timeout_ms = s->opts.io_timeout_ms };
    if (rc == 0 && !opts->no_receiver) rc = replica__server_start(&so, &s->server);
    if (rc == 0 && pthread_create(&s->replicator, NULL, replica__replicator_main, s) != 0)
        rc = elastic__fail(ELASTIC_ESYS, "memory tier replicator thread");
    s->replicator_started = rc == 0;
    if (rc == 0 && s->opts.disk_every > 0 &&
        pthread_create(&s->disk, NULL, replica__disk_main, s) != 0)
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
    return s->server != NULL ? replica__server_port(s->server) : 0;
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
    for (size_t i = 0; i < k; i++) s->targets[i] = (replica_target){ .peer = nodes[picked[i]] };
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
    if (s->server != NULL) replica__server_counts(s->server, &out->replicas_in, NULL, NULL);
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
