/*
 * The replica receiver an agent runs: peers push their shards into
 * ROOT/peer/<origin>/ (within the tier's limit, K steps per origin), and
 * fetch shards back from there or from ROOT/own/. One thread accepts; each
 * connection has a thread of its own, so a slow peer delays nobody else: in
 * its handshake it holds one of REPLICA_HANDSHAKES slots for at most
 * handshake_ms (REPLICA_PER_SOURCE per source address), then one of the
 * max_conns slots authenticated peers use. Every read and write has a deadline.
 */
#include "common/dir.h"
#include "replica/wire.h"

#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define IDLE_TIMEOUT_MS 600000 /* a connection with no request for this long is closed */
#define MAX_CONNS_LIMIT 256u

typedef struct conn_slot {
    replica_conn *conn;
    pthread_t thread;
    bool used, done;
    bool authed;   /* past the handshake: one of the max_conns slots peers use */
    char peer[64]; /* the source address */
    struct replica_server *server;
} conn_slot;

struct replica_server {
    replica_server_opts opts;
    char *root, *token;
    ckpt_mem_tier tier;
    replica_listener *listener;
    int wake[2]; /* written by stop: the accept loop returns */
    pthread_t acceptor;
    pthread_mutex_t lock; /* guards slots, stopping, counters, and the tree's directories */
    bool stopping;
    conn_slot *slots; /* max_conns authenticated + REPLICA_HANDSHAKES in their handshake */
    unsigned n_slots;
    uint64_t files, bytes, refused;
};

/* ---- storing a pushed file ------------------------------------------------------ */

static void origin_dir(const replica_server *s, const char *origin, char *out, size_t cap)
{
    snprintf(out, cap, "%s/" CKPT_MEM_PEER_DIR "/%s", s->root, origin);
}

/* "<origin dir>/.spare-<rank>": a pruned step's shard file kept for the
 * next copy of that rank, whose pages are then already allocated (fresh
 * tmpfs pages cost a zeroing and a fault each: more than the copy itself). */
static void spare_path(const char *dir, uint32_t rank, char *out, size_t cap)
{
    snprintf(out, cap, "%s/.spare-%" PRIu32, dir, rank);
}

/* Keeps the newest steps-1 step directories of an origin before a new one
 * starts: with the new one, K steps; and the steps the tier's keep file pins
 * (the job's last memory-committed step: memtier.h). The others' shard files
 * become spares. */
static void prune_origin(const replica_server *s, const char *dir)
{
    uint64_t *steps = NULL;
    size_t n = 0;
    if (ckpt__scan_steps(dir, &steps, &n) != 0) return;
    uint64_t pinned[CKPT_MEM_KEEP_MAX];
    size_t n_pinned = ckpt__mem_keep_read(s->root, pinned);
    size_t keep = s->tier.steps - 1;
    for (size_t i = 0; i + keep < n; i++) {
        if (ckpt__mem_keep_has(pinned, n_pinned, steps[i])) continue;
        char step_dir[PATH_MAX], from[PATH_MAX + 300], to[PATH_MAX + 64];
        ckpt__step_dir(dir, steps[i], step_dir, sizeof step_dir);
        DIR *d = elastic__opendir(step_dir);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            uint32_t rank;
            uint64_t gen;
            if (!ckpt__parse_shard_name(e->d_name, &rank, &gen)) continue;
            snprintf(from, sizeof from, "%s/%s", step_dir, e->d_name);
            spare_path(dir, rank, to, sizeof to);
            rename(from, to); /* replaces an older spare; failing, it is removed below */
        }
        if (d) closedir(d);
        ckpt__remove_step_dir(step_dir);
    }
    free(steps);
}

/* At most one shard file per rank in a step directory of an origin: a push
 * of rank R's shard of this step by another generation replaces the one
 * there (file names carry the generation, so a peer could otherwise add a
 * file per generation it names). Called locked. */
static void drop_other_generations(const char *step_dir, const replica_file_id *id)
{
    if (id->kind != REPLICA_KIND_SHARD) return;
    DIR *d = elastic__opendir(step_dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        uint32_t rank;
        uint64_t gen;
        if (!ckpt__parse_shard_name(e->d_name, &rank, &gen) || rank != id->rank ||
            gen == id->generation)
            continue;
        unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d) closedir(d);
}

static int prepare_dirs(replica_server *s, const replica_file_id *id)
{
    char dir[PATH_MAX], step_dir[PATH_MAX];
    origin_dir(s, id->origin, dir, sizeof dir);
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) rc = ckpt__fail_errno(errno, "create", dir);
    ckpt__step_dir(dir, id->step, step_dir, sizeof step_dir);
    struct stat st;
    if (rc == 0 && stat(step_dir, &st) != 0) {
        prune_origin(s, dir);
        if (mkdir(step_dir, 0700) != 0 && errno != EEXIST)
            rc = ckpt__fail_errno(errno, "create", step_dir);
    }
    if (rc == 0) drop_other_generations(step_dir, id);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* The bytes are what the request said: a shard of that step, rank and
 * generation (header and trailer), or that step's commit record. The chunks
 * are checked by whoever reads the copy. */
static int check_received(const replica_incoming *in, const replica_file_id *id)
{
    if (id->kind == REPLICA_KIND_COMMIT) {
        uint8_t *record = malloc(in->len); /* replica__file_max(id) bounded the length */
        if (record == NULL) return elastic__fail(ELASTIC_ENOMEM, "commit record");
        ckpt_commit_record r;
        int rc = ckpt__pread_all(in->fd, record, (size_t)in->len, 0, in->tmp);
        if (rc == 0) rc = ckpt__commit_decode(record, in->len, &r);
        free(record);
        if (rc) return rc;
        bool same = r.step == id->step && r.generation == id->generation && r.world == id->world;
        ckpt__commit_free(&r);
        return same ? 0 : elastic__fail(ELASTIC_ECORRUPT, "commit record of another step");
    }
    ckpt_header h;
    ckpt_trailer t;
    uint8_t header[CKPT_HEADER_BYTES], trailer[CKPT_TRAILER_BYTES];
    int rc = ckpt__pread_all(in->fd, header, sizeof header, 0, in->tmp);
    if (rc == 0) rc = ckpt__header_decode(header, sizeof header, &h);
    if (rc == 0)
        rc =
            ckpt__pread_all(in->fd, trailer, sizeof trailer, in->len - CKPT_TRAILER_BYTES, in->tmp);
    if (rc == 0) rc = ckpt__trailer_decode(trailer, sizeof trailer, &t);
    if (rc) return rc;
    if (h.step != id->step || h.generation != id->generation || h.rank != id->rank ||
        h.world != id->world || t.step != id->step)
        return elastic__fail(ELASTIC_ECORRUPT, "the shard is not the one the request names");
    return 0;
}

static void count(replica_server *s, bool stored, uint64_t len)
{
    pthread_mutex_lock(&s->lock);
    if (stored) {
        s->files++;
        s->bytes += len;
    } else {
        s->refused++;
    }
    pthread_mutex_unlock(&s->lock);
}

/* An authenticated connection moves from the handshake slots to the ones
 * peers use (at most max_conns); none free: it is closed, the peer retries. */
static int take_served_slot(replica_server *s, conn_slot *slot)
{
    pthread_mutex_lock(&s->lock);
    unsigned served = 0;
    for (unsigned i = 0; i < s->n_slots; i++) served += s->slots[i].used && s->slots[i].authed;
    bool room = served < s->opts.max_conns;
    slot->authed = room;
    pthread_mutex_unlock(&s->lock);
    if (room) return 0;
    count(s, false, 0);
    return elastic__fail(ELASTIC_EBUSY, "replica receiver: %u peers served already",
                         s->opts.max_conns);
}

/* 0: the connection goes on; else it is closed. */
static int serve_put(replica_server *s, replica_conn *c, const replica_request *req)
{
    uint64_t deadline = elastic__deadline_ms(s->opts.io_timeout_ms);
    char dir[PATH_MAX], path[PATH_MAX + 128];
    origin_dir(s, req->id.origin, dir, sizeof dir);
    replica__file_path(dir, &req->id, path, sizeof path);
    char spare[PATH_MAX + 64];
    spare_path(dir, req->id.rank, spare, sizeof spare);
    replica_incoming in;
    int rc = prepare_dirs(s, &req->id);
    if (rc == 0)
        rc = replica__incoming_open(path, req->length, &s->tier,
                                    req->id.kind == REPLICA_KIND_SHARD ? spare : NULL, &in);
    if (rc) { /* refused before any byte was sent: the connection stays usable */
        count(s, false, 0);
        ELASTIC_LOG_W("replica", "refused a copy from %s: %s", req->id.origin,
                      elastic_last_error());
        return replica__send_answer(c, rc, 0, elastic_last_error(), deadline);
    }
    rc = replica__send_answer(c, 0, 0, NULL, deadline);
    if (rc == 0) rc = replica__incoming_receive(c, &in, deadline);
    if (rc) {
        replica__incoming_drop(&in);
        return rc;
    }
    int verdict = check_received(&in, &req->id);
    if (verdict == 0)
        verdict = replica__incoming_keep(&in);
    else
        replica__incoming_drop(&in);
    count(s, verdict == 0, req->length);
    return replica__send_answer(c, verdict, 0, verdict ? elastic_last_error() : NULL, deadline);
}

/* Own shards first, then every origin's copies. */
static int find_file(replica_server *s, const replica_file_id *id, char *path, size_t cap)
{
    char dir[PATH_MAX];
    struct stat st;
    if (id->origin[0] != '\0') {
        origin_dir(s, id->origin, dir, sizeof dir);
        replica__file_path(dir, id, path, cap);
        return stat(path, &st) == 0 ? 0 : ELASTIC_ENOTFOUND;
    }
    snprintf(dir, sizeof dir, "%s/" CKPT_MEM_OWN_DIR, s->root);
    replica__file_path(dir, id, path, cap);
    if (stat(path, &st) == 0) return 0;
    snprintf(dir, sizeof dir, "%s/" CKPT_MEM_PEER_DIR, s->root);
    DIR *d = elastic__opendir(dir);
    if (d == NULL) return ELASTIC_ENOTFOUND;
    struct dirent *e;
    int rc = ELASTIC_ENOTFOUND;
    while (rc != 0 && (e = readdir(d)) != NULL) {
        if (!replica__node_name_ok(e->d_name)) continue;
        char sub[PATH_MAX + 300];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        replica__file_path(sub, id, path, cap);
        if (stat(path, &st) == 0) rc = 0;
    }
    closedir(d);
    return rc;
}

static int serve_get(replica_server *s, replica_conn *c, const replica_request *req)
{
    uint64_t deadline = elastic__deadline_ms(s->opts.io_timeout_ms);
    char path[PATH_MAX + 256];
    int fd = -1;
    if (find_file(s, &req->id, path, sizeof path) == 0)
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        char why[160];
        snprintf(why, sizeof why, "no copy of step %" PRIu64 " rank %" PRIu32 " here", req->id.step,
                 req->id.rank);
        return replica__send_answer(c, ELASTIC_ENOTFOUND, 0, why, deadline);
    }
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? 0 : ckpt__fail_errno(errno, "stat", path);
    if (rc == 0) rc = replica__send_answer(c, 0, (uint64_t)st.st_size, NULL, deadline);
    if (rc == 0) rc = c->ops->send_file(c, fd, 0, (uint64_t)st.st_size, deadline);
    close(fd);
    return rc;
}

static void *serve_conn(void *arg)
{
    conn_slot *slot = arg;
    replica_server *s = slot->server;
    replica_conn *c = slot->conn;
    /* A short deadline: a handshake is two round trips (REPLICA_HANDSHAKE_MS). */
    int rc = replica__auth_server(c, s->token, elastic__deadline_ms(s->opts.handshake_ms));
    if (rc) {
        count(s, false, 0);
        ELASTIC_LOG_W("replica", "connection from %s refused: %s", slot->peer,
                      elastic_last_error());
    } else {
        rc = take_served_slot(s, slot);
    }
    while (rc == 0) {
        replica_request req;
        rc = replica__recv_request(c, &req, elastic__deadline_ms(IDLE_TIMEOUT_MS));
        if (rc == ELASTIC_EPROTO)
            ELASTIC_LOG_W("replica", "closing a connection: %s", elastic_last_error());
        if (rc == 0) rc = req.op == REPLICA_OP_PUT ? serve_put(s, c, &req) : serve_get(s, c, &req);
    }
    pthread_mutex_lock(&s->lock);
    slot->done = true;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Joins finished connection threads; returns a free slot or NULL. */
static conn_slot *reap_and_find(replica_server *s)
{
    conn_slot *free_slot = NULL;
    for (unsigned i = 0; i < s->n_slots; i++) {
        conn_slot *slot = &s->slots[i];
        pthread_mutex_lock(&s->lock);
        bool finished = slot->used && slot->done;
        pthread_mutex_unlock(&s->lock);
        if (finished) {
            pthread_join(slot->thread, NULL);
            replica__close(slot->conn);
            pthread_mutex_lock(&s->lock);
            slot->used = slot->done = slot->authed = false;
            slot->conn = NULL;
            pthread_mutex_unlock(&s->lock);
        }
        if (!slot->used && free_slot == NULL) free_slot = slot;
    }
    return free_slot;
}

/* Whether one more connection may start its handshake: fewer than
 * REPLICA_HANDSHAKES in theirs, fewer than REPLICA_PER_SOURCE from `peer`. */
static bool handshake_room(replica_server *s, const char *peer)
{
    unsigned pending = 0, from_peer = 0;
    pthread_mutex_lock(&s->lock);
    for (unsigned i = 0; i < s->n_slots; i++) {
        const conn_slot *slot = &s->slots[i];
        if (!slot->used || slot->done || slot->authed) continue;
        pending++;
        from_peer += strcmp(slot->peer, peer) == 0;
    }
    pthread_mutex_unlock(&s->lock);
    return pending < REPLICA_HANDSHAKES && from_peer < REPLICA_PER_SOURCE;
}

static void *accept_loop(void *arg)
{
    replica_server *s = arg;
    for (;;) {
        struct pollfd fds[2] = { { .fd = replica__tcp_listener_fd(s->listener), .events = POLLIN },
                                 { .fd = s->wake[0], .events = POLLIN } };
        int ready = poll(fds, 2, 1000); /* also reaps finished connections each second */
        if (ready < 0 && errno != EINTR) break;
        if (fds[1].revents) break;
        conn_slot *slot = reap_and_find(s);
        if (ready <= 0 || !(fds[0].revents & POLLIN)) continue;
        replica_conn *c;
        char peer[64];
        if (replica__tcp_accept(s->listener, elastic__now_ms(), &c, peer, sizeof peer) != 0)
            continue;
        if (slot == NULL || !handshake_room(s, peer)) { /* the peer retries later */
            count(s, false, 0);
            replica__close(c);
            continue;
        }
        pthread_mutex_lock(&s->lock);
        *slot = (conn_slot){ .conn = c, .used = true, .server = s };
        snprintf(slot->peer, sizeof slot->peer, "%s", peer);
        pthread_mutex_unlock(&s->lock);
        if (pthread_create(&slot->thread, NULL, serve_conn, slot) != 0) {
            replica__close(c);
            pthread_mutex_lock(&s->lock);
            slot->used = false;
            pthread_mutex_unlock(&s->lock);
        }
    }
    return NULL;
}

static void server_free(replica_server *s)
{
    replica__tcp_listener_close(s->listener);
    if (s->wake[0] >= 0) close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    ckpt__mem_tier_close(&s->tier);
    pthread_mutex_destroy(&s->lock);
    free(s->slots);
    free(s->root);
    if (s->token) {
        memset(s->token, 0, strlen(s->token));
        free(s->token);
    }
    free(s);
}

int replica__server_start(const replica_server_opts *opts, replica_server **out)
{
    if (opts == NULL || opts->tier_root == NULL || out == NULL)
        return elastic__fail(ELASTIC_EINVAL, "replica server: NULL argument");
    replica_server *s = calloc(1, sizeof *s);
    if (s == NULL) return elastic__fail(ELASTIC_ENOMEM, "replica server");
    s->opts = *opts;
    if (s->opts.io_timeout_ms <= 0) s->opts.io_timeout_ms = 30000;
    if (s->opts.max_conns == 0) s->opts.max_conns = 16;
    if (s->opts.max_conns > MAX_CONNS_LIMIT) s->opts.max_conns = MAX_CONNS_LIMIT;
    if (s->opts.handshake_ms <= 0) s->opts.handshake_ms = REPLICA_HANDSHAKE_MS;
    s->n_slots = s->opts.max_conns + REPLICA_HANDSHAKES;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->lock, NULL);
    s->root = elastic__strdup(opts->tier_root);
    s->token = opts->token ? elastic__strdup(opts->token) : NULL;
    s->slots = calloc(s->n_slots, sizeof *s->slots);
    s->opts.tier_root = s->root;
    s->opts.token = s->token;
    int rc = s->root && s->slots && (opts->token == NULL || s->token)
                 ? 0
                 : elastic__fail(ELASTIC_ENOMEM, "replica server");
    if (rc == 0) rc = ckpt__mem_tier_open(s->root, &s->tier);
    if (rc == 0 && pipe2(s->wake, O_CLOEXEC) != 0)
        rc = elastic__fail(ELASTIC_ESYS, "pipe: %s", strerror(errno));
    if (rc == 0) rc = replica__tcp_listen(opts->host, opts->port, &s->listener);
    if (rc == 0 && pthread_create(&s->acceptor, NULL, accept_loop, s) != 0)
        rc = elastic__fail(ELASTIC_ESYS, "replica server thread");
    if (rc) {
        server_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int replica__server_port(const replica_server *s)
{
    return replica__tcp_port(s->listener);
}

void replica__server_counts(replica_server *s, uint64_t *files, uint64_t *bytes, uint64_t *refused)
{
    pthread_mutex_lock(&s->lock);
    if (files) *files = s->files;
    if (bytes) *bytes = s->bytes;
    if (refused) *refused = s->refused;
    pthread_mutex_unlock(&s->lock);
}

void replica__server_stop(replica_server *s)
{
    if (s == NULL) return;
    char byte = 1;
    ssize_t ignored = write(s->wake[1], &byte, 1);
    (void)ignored;
    pthread_join(s->acceptor, NULL);
    /* Wake every connection thread (their calls fail), then join them. */
    pthread_mutex_lock(&s->lock);
    for (unsigned i = 0; i < s->n_slots; i++)
        if (s->slots[i].used) s->slots[i].conn->ops->shutdown(s->slots[i].conn);
    pthread_mutex_unlock(&s->lock);
    for (unsigned i = 0; i < s->n_slots; i++) {
        if (!s->slots[i].used) continue;
        pthread_join(s->slots[i].thread, NULL);
        replica__close(s->slots[i].conn);
    }
    server_free(s);
}
