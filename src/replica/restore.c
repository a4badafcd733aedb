/*
 * Staging one shard of the agreed restore step into ROOT/own, from the
 * cheapest copy that verifies (replica.h, replica__stage_shard).
 */
#include "common/dir.h"
#include "replica/wire.h"

#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SOURCES 64

static int load_record(const char *path, uint64_t step, ckpt_commit_record *r)
{
    uint8_t *raw = NULL;
    size_t len = 0;
    int rc = ckpt__read_small_file(path, CKPT_MAX_COMMIT_RECORD, &raw, &len);
    if (rc == 0) rc = ckpt__commit_decode(raw, len, r);
    free(raw);
    if (rc == 0 && r->step != step) {
        ckpt__commit_free(r);
        rc = elastic__fail(ELASTIC_ECORRUPT, "%s: a record of another step", path);
    }
    return rc == ELASTIC_ECORRUPT ? ckpt__fail_in(rc, path) : rc;
}

/* The shard in this node's tree: ROOT/own, else a replica under ROOT/peer. */
static bool find_local(const char *root, const replica_file_id *id, char *path, size_t cap)
{
    char dir[PATH_MAX];
    struct stat st;
    snprintf(dir, sizeof dir, "%s/" CKPT_MEM_OWN_DIR, root);
    replica__file_path(dir, id, path, cap);
    if (stat(path, &st) == 0) return true;
    snprintf(dir, sizeof dir, "%s/" CKPT_MEM_PEER_DIR, root);
    DIR *d = elastic__opendir(dir);
    if (d == NULL) return false;
    struct dirent *e;
    bool found = false;
    while (!found && (e = readdir(d)) != NULL) {
        if (!replica__node_name_ok(e->d_name)) continue;
        char sub[PATH_MAX + 300];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        replica__file_path(sub, id, path, cap);
        found = stat(path, &st) == 0;
    }
    closedir(d);
    return found;
}

/* Hard links within the tree: a replica becomes readable in ROOT/own
 * without a byte copied (and without counting twice against the limit). */
static int link_into(const char *from, const char *to)
{
    if (strcmp(from, to) == 0) return 0;
    if (link(from, to) == 0) return 0;
    if (errno == EEXIST && unlink(to) == 0 && link(from, to) == 0) return 0;
    return ckpt__fail_errno(errno, "link", to);
}

typedef struct stage {
    const char *root;
    const uint8_t *record_digest; /* the job's record's SHA-256; NULL: none known */
    replica_file_id shard, commit;
    char own_dir[PATH_MAX], shard_path[PATH_MAX + 256], commit_path[PATH_MAX + 256];
} stage;

static int stage_local(stage *s)
{
    char from[PATH_MAX + 256];
    if (!find_local(s->root, &s->shard, from, sizeof from))
        return elastic__fail(ELASTIC_ENOTFOUND, "not in this node's memory any more");
    int rc = link_into(from, s->shard_path);
    struct stat st;
    if (rc == 0 && stat(s->commit_path, &st) != 0) {
        /* The record beside the copy. */
        char *slash = strrchr(from, '/');
        snprintf(slash + 1, sizeof from - (size_t)(slash + 1 - from), CKPT_COMMIT_NAME);
        rc = link_into(from, s->commit_path);
    }
    return rc;
}

/* The step's record, checked against the copy wanted; a bad one is removed
 * (the next source brings its own). */
static int load_checked_record(stage *s, ckpt_commit_record *r)
{
    /* The job's record, not merely one that came with the copy. */
    int rc = s->record_digest != NULL
                 ? replica__record_is_the_jobs(s->commit_path, s->record_digest)
                 : 0;
    if (rc) {
        unlink(s->commit_path);
        return rc;
    }
    rc = load_record(s->commit_path, s->shard.step, r);
    if (rc) {
        unlink(s->commit_path);
        return rc;
    }
    if (r->generation != s->shard.generation || r->world != s->shard.world) {
        ckpt__commit_free(r);
        unlink(s->commit_path);
        return elastic__fail(ELASTIC_ECORRUPT, "%s: the record is of another generation",
                             s->commit_path);
    }
    return 0;
}

typedef struct shard_check {
    const stage *s;
    const ckpt_commit_record *record;
} shard_check;

static int check_received_shard(void *p, int fd, uint64_t len)
{
    const shard_check *k = p;
    return ckpt__verify_shard_fd(fd, len, k->s->shard_path, k->record, k->s->shard.rank);
}

/* The record, then the shard, verified before it takes its name (through a
 * small window, from the pages it was just written to). */
static int stage_peer(stage *s, const replica_dialer *dialer, uint32_t node, uint64_t deadline_ms,
                      uint64_t *bytes)
{
    if (dialer == NULL || dialer->connect == NULL)
        return elastic__fail(ELASTIC_ECONNECT, "no way to reach node %" PRIu32, node);
    ckpt_mem_tier tier;
    int rc = ckpt__mem_tier_open(s->root, &tier);
    if (rc) return rc;
    replica_conn *c = NULL;
    rc = dialer->connect(dialer->ctx, node, &c);
    uint64_t got = 0;
    struct stat st;
    if (rc == 0 && stat(s->commit_path, &st) != 0)
        rc = replica__fetch_file(c, &s->commit, s->commit_path, &tier, &got, deadline_ms);
    ckpt_commit_record r;
    bool loaded = false;
    if (rc == 0 && (rc = load_checked_record(s, &r)) == 0) loaded = true;
    shard_check check = { s, &r };
    if (rc == 0)
        rc = replica__fetch_file_checked(c, &s->shard, s->shard_path, &tier, check_received_shard,
                                         &check, &got, deadline_ms);
    if (rc == 0) *bytes = r.shards[s->shard.rank].file_size;
    if (loaded) ckpt__commit_free(&r);
    if (c) replica__close(c);
    ckpt__mem_tier_close(&tier);
    return rc;
}

/* A copy already in this node's memory: the file checked completely. */
static int verify_local(stage *s, uint64_t *bytes)
{
    ckpt_commit_record r;
    int rc = load_checked_record(s, &r);
    if (rc) return rc;
    rc = ckpt__verify_shard_file(s->shard_path, &r, s->shard.rank);
    if (rc == 0) *bytes = r.shards[s->shard.rank].file_size;
    ckpt__commit_free(&r);
    return rc;
}

static const char *source_name(ckpt_source src)
{
    return src == CKPT_SOURCE_LOCAL  ? "local memory"
           : src == CKPT_SOURCE_PEER ? "peer memory"
                                     : "disk";
}

int replica__stage_shard(const char *root, const ckpt_plan *plan, uint32_t rank, uint32_t self,
                         const replica_dialer *dialer, uint64_t deadline_ms, replica_restored *out)
{
    return replica__stage_shard_expecting(root, plan, rank, self, dialer, deadline_ms, NULL, out);
}

int replica__stage_shard_expecting(const char *root, const ckpt_plan *plan, uint32_t rank,
                                   uint32_t self, const replica_dialer *dialer,
                                   uint64_t deadline_ms, const uint8_t *record_digest,
                                   replica_restored *out)
{
    memset(out, 0, sizeof *out);
    if (!plan->found || rank >= plan->world)
        return elastic__fail(ELASTIC_EINVAL, "rank %" PRIu32 " is not in the restore step", rank);
    ckpt_copy copies[MAX_SOURCES];
    ckpt_source kinds[MAX_SOURCES];
    size_t n = ckpt__plan_sources(plan, rank, self, copies, kinds, MAX_SOURCES);
    stage s = { .root = root, .record_digest = record_digest };
    s.shard = (replica_file_id){ .step = plan->step,
                                 .generation = plan->generation,
                                 .rank = rank,
                                 .world = plan->world,
                                 .kind = REPLICA_KIND_SHARD };
    s.commit = s.shard;
    s.commit.rank = 0;
    s.commit.kind = REPLICA_KIND_COMMIT;
    snprintf(s.own_dir, sizeof s.own_dir, "%s/" CKPT_MEM_OWN_DIR, root);
    replica__file_path(s.own_dir, &s.shard, s.shard_path, sizeof s.shard_path);
    replica__file_path(s.own_dir, &s.commit, s.commit_path, sizeof s.commit_path);
    char step_dir[PATH_MAX];
    ckpt__step_dir(s.own_dir, plan->step, step_dir, sizeof step_dir);
    if (mkdir(step_dir, 0700) != 0 && errno != EEXIST)
        return ckpt__fail_errno(errno, "create", step_dir);
    char reasons[1024] = "";
    for (size_t i = 0; i < n; i++) {
        uint64_t start = elastic__now_ns(), bytes = 0;
        out->source = kinds[i];
        out->node = copies[i].node;
        if (kinds[i] == CKPT_SOURCE_DISK) {
            out->bytes = copies[i].bytes;
            return 0; /* the worker reads the disk tier itself */
        }
        int rc = 0;
        if (kinds[i] == CKPT_SOURCE_LOCAL) {
            rc = stage_local(&s);
            if (rc == 0) rc = verify_local(&s, &bytes);
        } else {
            rc = stage_peer(&s, dialer, copies[i].node, deadline_ms, &bytes);
        }
        if (rc == 0) {
            out->bytes = bytes;
            out->ns = elastic__now_ns() - start;
            return 0;
        }
        out->refused++;
        snprintf(out->why, sizeof out->why, "%s of node %" PRIu32 ": %s", source_name(kinds[i]),
                 copies[i].node, elastic_last_error());
        ELASTIC_LOG_W("replica",
                      "step %" PRIu64 " rank %" PRIu32 ": copy refused, trying the next: %s",
                      plan->step, rank, out->why);
        size_t used = strlen(reasons);
        snprintf(reasons + used, sizeof reasons - used, "%s%s", used ? "; " : "", out->why);
        unlink(s.shard_path);
    }
    return elastic__fail(ELASTIC_ENOTFOUND,
                         "step %" PRIu64 " rank %" PRIu32 ": no usable copy (%s)", plan->step, rank,
                         n ? reasons : "none listed");
}
