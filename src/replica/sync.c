/*
 * One restore step for the whole job (replica.h, "one restore step"): every
 * node publishes a record through the job's store — its receiver's address,
 * its failure domain and every copy its tier holds (and the shared disk
 * tier's steps it sees) — reads every other node's, and runs the planner on
 * the union, which is the same on every node: all agree on one step without
 * a leader. The job's history (each generation's restore step, the fence)
 * is one key that group rank 0 appends to.
 *
 *   memtier/g<generation>/node/<group rank>   the node's record (text, bounded)
 *   memtier/history                          "<generation> <restored 0|1> <step>" lines
 */
#include "common/dir.h"
#include "replica/replica.h"

#include "channel/channel.h"
#include "common/clock.h"
#include "common/parse_int.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_COPIES_PER_NODE 65536u
#define MAX_RECORD_BYTES    (64u + 4u * 300u + MAX_COPIES_PER_NODE * 80u)
#define MAX_HISTORY_LINES   256u
#define MAX_HISTORY_BYTES   (MAX_HISTORY_LINES * 64u)
#define MAX_NODES           4096
#define SYNC_ENDED_CHECK_MS 200 /* how often a wait for records asks whether the generation ended */

typedef struct node_record {
    replica_peer peer;
    ckpt_copy *copies;
    size_t n_copies;
    ckpt_step_ref committed;        /* the memory-commit record the node knows (step 0: none) */
    bool has_digest;                /* and that record's SHA-256 (record_digest.c) */
    uint8_t committed_digest[REPLICA_DIGEST_BYTES];
    ckpt_generation_start *history; /* the job's history as the node knows it */
    size_t n_history;
    bool ranks_known; /* the ranks it runs this generation: [first_rank, + local_ranks) */
    uint32_t first_rank, local_ranks;
} node_record;

/* ---- records --------------------------------------------------------------------- */

/* "committed <step> <generation> [<SHA-256 of its record>]": the digest when
 * this node still holds the step's record (retention pins it), so a node
 * with no record of its own takes only a copy of the job's. */
static void committed_line(const char *root, const replica_service_stats *stats, char *line,
                           size_t cap)
{
    uint8_t digest[REPLICA_DIGEST_BYTES];
    char hex[2 * REPLICA_DIGEST_BYTES + 2] = "";
    if (replica__own_record_digest(root, stats->committed_step, digest) == 0) {
        hex[0] = ' ';
        replica__digest_hex(digest, hex + 1, sizeof hex - 1);
    } else {
        elastic__clear_error();
    }
    snprintf(line, cap, "committed %" PRIu64 " %" PRIu64 "%s\n", stats->committed_step,
             stats->committed_generation, hex);
}

static int encode_record(const replica_sync_in *in, int port, bytes__buf *out)
{
    ckpt_copy *mem = NULL, *disk = NULL;
    size_t n_mem = 0, n_disk = 0;
    const char *root = replica__service_root(in->service);
    int rc = replica__holdings(root, 0, &mem, &n_mem);
    if (rc == 0 && n_mem < MAX_COPIES_PER_NODE)
        rc = replica__disk_copies(root, in->disk_dir, MAX_COPIES_PER_NODE - n_mem, &disk, &n_disk);
    if (rc == 0 && n_mem + n_disk > MAX_COPIES_PER_NODE)
        rc = elastic__fail(ELASTIC_ELIMIT, "more than %u copies in the tier", MAX_COPIES_PER_NODE);
    char line[400];
    int len = snprintf(line, sizeof line, "node %s\nhost %s\nport %d\ndomain %s\n", in->node_name,
                       in->host, port, in->domain && *in->domain ? in->domain : "-");
    if (rc == 0) bytes__put(out, line, (size_t)len);
    /* The ranks it runs: its node-local disk copies count for those only. */
    len = snprintf(line, sizeof line, "ranks %" PRIu32 " %" PRIu32 "\n", in->first_rank,
                   in->local_ranks);
    if (rc == 0) bytes__put(out, line, (size_t)len);
    /* The memory-commit record it knows, and the history (the fence) it
     * knows: a fresh job store (etcd's, per generation) gets both back. */
    replica_service_stats stats;
    replica__service_stats(in->service, &stats);
    if (rc == 0 && stats.committed_step > 0) {
        committed_line(root, &stats, line, sizeof line);
        bytes__put(out, line, strlen(line));
    }
    ckpt_generation_start *history = rc == 0 ? calloc(REPLICA_HISTORY_MAX, sizeof *history) : NULL;
    size_t n_history =
        history != NULL ? replica__service_history(in->service, history, REPLICA_HISTORY_MAX) : 0;
    for (size_t i = 0; i < n_history; i++) {
        len = snprintf(line, sizeof line, "hist %" PRIu64 " %d %" PRIu64 "\n",
                       history[i].generation, history[i].restored ? 1 : 0, history[i].restore_step);
        bytes__put(out, line, (size_t)len);
    }
    free(history);
    for (size_t i = 0; rc == 0 && i < n_mem + n_disk; i++) {
        const ckpt_copy *c = i < n_mem ? &mem[i] : &disk[i - n_mem];
        len = snprintf(line, sizeof line,
                       "%s %" PRIu64 " %" PRIu64 " %" PRIu32 " %" PRIu32 " %" PRIu64 "\n",
                       c->tier == CKPT_TIER_MEMORY    ? "mem"
                       : c->node == REPLICA_NODE_SELF ? "ldisk"
                                                      : "disk",
                       c->step, c->generation, c->world, c->rank, c->bytes);
        bytes__put(out, line, (size_t)len);
    }
    free(mem);
    free(disk);
    if (rc == 0 && out->failed) rc = elastic__fail(ELASTIC_ENOMEM, "memory tier record");
    return rc;
}

static int bad_record(int group_rank, const char *why)
{
    return elastic__fail(ELASTIC_EPROTO, "memory tier record of node %d: %s", group_rank, why);
}

/* Reads "key value\n" where value is [^\n]{1,cap-1}. */
static bool take_field(const char **p, const char *end, const char *key, char *value, size_t cap)
{
    size_t klen = strlen(key);
    if ((size_t)(end - *p) <= klen || memcmp(*p, key, klen) != 0 || (*p)[klen] != ' ') return false;
    const char *v = *p + klen + 1, *nl = memchr(v, '\n', (size_t)(end - v));
    if (nl == NULL || nl == v || (size_t)(nl - v) >= cap) return false;
    memcpy(value, v, (size_t)(nl - v));
    value[nl - v] = '\0';
    *p = nl + 1;
    return true;
}

/* "ranks <first> <count>", "committed <step> <generation> [<digest>]" or
 * "hist <generation> <restored 0|1> <step>". */
static int decode_step_line(const char *line, int group_rank, node_record *rec)
{
    char kind[12], f[3][24];
    int used = 0;
    uint64_t a, b, c;
    if (sscanf(line, "%11s %23s %23s%n", kind, f[0], f[1], &used) == 3 && line[used] == '\0' &&
        strcmp(kind, "ranks") == 0) {
        if (elastic__parse_u64(NULL, f[0], 0, CKPT_MAX_WORLD, &a) != 0 ||
            elastic__parse_u64(NULL, f[1], 0, CKPT_MAX_WORLD - a, &b) != 0)
            return bad_record(group_rank, "bad ranks line");
        rec->ranks_known = true;
        rec->first_rank = (uint32_t)a;
        rec->local_ranks = (uint32_t)b;
        return 0;
    }
    char hex[2 * REPLICA_DIGEST_BYTES + 1] = "";
    int n_fields = sscanf(line, "%11s %23s %23s %64s%n", kind, f[0], f[1], hex, &used);
    if ((n_fields == 3 || n_fields == 4) && strcmp(kind, "committed") == 0) {
        if (n_fields == 3) sscanf(line, "%11s %23s %23s%n", kind, f[0], f[1], &used);
        if (line[used] != '\0' || elastic__parse_u64(NULL, f[0], 1, UINT64_MAX - 1, &a) != 0 ||
            elastic__parse_u64(NULL, f[1], 0, UINT64_MAX, &b) != 0 ||
            (n_fields == 4 && !replica__digest_parse(hex, rec->committed_digest)))
            return bad_record(group_rank, "bad committed line");
        rec->committed = (ckpt_step_ref){ .step = a, .generation = b };
        rec->has_digest = n_fields == 4;
        return 0;
    }
    if (sscanf(line, "%11s %23s %23s %23s%n", kind, f[0], f[1], f[2], &used) != 4 ||
        line[used] != '\0' || strcmp(kind, "hist") != 0 ||
        elastic__parse_u64(NULL, f[0], 0, UINT64_MAX, &a) != 0 ||
        elastic__parse_u64(NULL, f[1], 0, 1, &b) != 0 ||
        elastic__parse_u64(NULL, f[2], 0, UINT64_MAX, &c) != 0)
        return bad_record(group_rank, "bad history line");
    if (rec->n_history >= REPLICA_HISTORY_MAX) return bad_record(group_rank, "history too long");
    if (rec->history == NULL &&
        (rec->history = calloc(REPLICA_HISTORY_MAX, sizeof *rec->history)) == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "memory tier record");
    rec->history[rec->n_history++] =
        (ckpt_generation_start){ .generation = a, .restored = b == 1, .restore_step = c };
    return 0;
}

static int decode_record(const char *text, size_t len, int group_rank, node_record *rec)
{
    const char *p = text, *end = text + len;
    char port_text[16];
    memset(rec, 0, sizeof *rec);
    if (!take_field(&p, end, "node", rec->peer.name, sizeof rec->peer.name) ||
        !replica__node_name_ok(rec->peer.name) ||
        !take_field(&p, end, "host", rec->peer.host, sizeof rec->peer.host) ||
        !take_field(&p, end, "port", port_text, sizeof port_text) ||
        elastic__parse_int(NULL, port_text, 1, 65535, &rec->peer.port) != 0 ||
        !take_field(&p, end, "domain", rec->peer.domain, sizeof rec->peer.domain))
        return bad_record(group_rank, "bad header");
    if (strcmp(rec->peer.domain, "-") == 0) rec->peer.domain[0] = '\0';
    size_t cap = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        char line[160];
        if (nl == NULL || (size_t)(nl - p) >= sizeof line)
            return bad_record(group_rank, "bad line");
        memcpy(line, p, (size_t)(nl - p));
        line[nl - p] = '\0';
        p = nl + 1;
        char kind[12], f[5][24];
        int used = 0;
        if (strncmp(line, "committed ", 10) == 0 || strncmp(line, "hist ", 5) == 0 ||
            strncmp(line, "ranks ", 6) == 0) {
            int rc = decode_step_line(line, group_rank, rec);
            if (rc) return rc;
            continue;
        }
        if (sscanf(line, "%7s %23s %23s %23s %23s %23s%n", kind, f[0], f[1], f[2], f[3], f[4],
                   &used) != 6 ||
            line[used] != '\0')
            return bad_record(group_rank, "bad copy line");
        ckpt_copy c = { .node = (uint32_t)group_rank };
        uint64_t world, rank;
        bool local_disk = strcmp(kind, "ldisk") == 0;
        if ((strcmp(kind, "mem") != 0 && strcmp(kind, "disk") != 0 && !local_disk) ||
            elastic__parse_u64(NULL, f[0], 0, UINT64_MAX - 1, &c.step) != 0 ||
            elastic__parse_u64(NULL, f[1], 0, UINT64_MAX, &c.generation) != 0 ||
            elastic__parse_u64(NULL, f[2], 1, CKPT_MAX_WORLD, &world) != 0 ||
            elastic__parse_u64(NULL, f[3], 0, world - 1, &rank) != 0 ||
            elastic__parse_u64(NULL, f[4], 0, UINT64_MAX, &c.bytes) != 0)
            return bad_record(group_rank, "copy out of range");
        c.world = (uint32_t)world;
        c.rank = (uint32_t)rank;
        c.tier = strcmp(kind, "mem") == 0 ? CKPT_TIER_MEMORY : CKPT_TIER_DISK;
        /* A shared disk copy is any node's; a node-local one (ldisk) only
         * its own node's, and only for a rank that node runs: no other
         * node can read it, and the plan must not count it for them. */
        if (c.tier == CKPT_TIER_DISK && !local_disk) c.node = CKPT_NODE_SHARED;
        if (local_disk && !(rec->ranks_known && c.rank >= rec->first_rank &&
                            c.rank - rec->first_rank < rec->local_ranks))
            continue;
        if (rec->n_copies == cap) {
            cap = cap ? cap * 2 : 64;
            ckpt_copy *grown =
                cap <= 2 * MAX_COPIES_PER_NODE ? realloc(rec->copies, cap * sizeof *grown) : NULL;
            if (grown == NULL) return bad_record(group_rank, "too many copies");
            rec->copies = grown;
        }
        rec->copies[rec->n_copies++] = c;
    }
    return 0;
}

int replica__sync_record_parse(const char *text, size_t len)
{
    node_record rec;
    int rc = decode_record(text, len, 0, &rec);
    free(rec.copies); /* a record refused midway may hold some already */
    free(rec.history);
    return rc;
}

/* ---- history ------------------------------------------------------------------------ */

static int read_history(elastic_store *store, uint64_t before, ckpt_generation_start **out,
                        size_t *n, char **raw_out)
{
    *out = NULL;
    *n = 0;
    *raw_out = NULL;
    void *value = NULL;
    size_t len = 0;
    int rc = elastic_store_try_get(store, "memtier/history", &value, &len);
    if (rc == ELASTIC_ENOTFOUND) return 0; /* the first generation */
    if (rc) return rc;
    if (len > MAX_HISTORY_BYTES) len = MAX_HISTORY_BYTES;
    char *text = malloc(len + 1);
    *out = calloc(MAX_HISTORY_LINES, sizeof **out);
    if (text == NULL || *out == NULL) {
        free(text);
        elastic_free(value);
        return elastic__fail(ELASTIC_ENOMEM, "history");
    }
    memcpy(text, value, len);
    text[len] = '\0';
    elastic_free(value);
    for (char *line = text, *next; line && *line && *n < MAX_HISTORY_LINES; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char g[24], r[4], s[24];
        uint64_t gen, step, restored;
        if (sscanf(line, "%23s %3s %23s", g, r, s) != 3 ||
            elastic__parse_u64(NULL, g, 0, UINT64_MAX, &gen) != 0 ||
            elastic__parse_u64(NULL, r, 0, 1, &restored) != 0 ||
            elastic__parse_u64(NULL, s, 0, UINT64_MAX, &step) != 0 || gen >= before)
            continue;
        (*out)[(*n)++] = (ckpt_generation_start){ .generation = gen,
                                                  .restored = restored == 1,
                                                  .restore_step = step };
    }
    *raw_out = text; /* kept for the append (lines of this and later generations dropped) */
    return 0;
}

static void append_history(elastic_store *store, const ckpt_generation_start *history, size_t n,
                           const ckpt_plan *plan, uint64_t generation)
{
    bytes__buf out = { 0 };
    char line[80];
    size_t first = n + 1 > MAX_HISTORY_LINES ? n + 1 - MAX_HISTORY_LINES : 0;
    for (size_t i = first; i < n; i++) {
        int len = snprintf(line, sizeof line, "%" PRIu64 " %d %" PRIu64 "\n", history[i].generation,
                           history[i].restored ? 1 : 0, history[i].restore_step);
        bytes__put(&out, line, (size_t)len);
    }
    int len = snprintf(line, sizeof line, "%" PRIu64 " %d %" PRIu64 "\n", generation,
                       plan->found ? 1 : 0, plan->found ? plan->step : 0);
    bytes__put(&out, line, (size_t)len);
    if (!out.failed && elastic_store_set(store, "memtier/history", out.data, out.len) != 0)
        ELASTIC_LOG_W("replica", "recording the restore step: %s", elastic_last_error());
    bytes__buf_free(&out);
}

/* What a tier keeps of its steps at a generation's start: none newer than
 * the plan's (the job goes back to it: the trainer saves those numbers
 * again) and none the fence refuses (written by a generation whose steps a
 * later one went back on: a node cut off and back holds such copies; a
 * worker restoring on its own must never find them). */
typedef struct drop_rule {
    const ckpt_plan_input *fence;
    bool planned;
    uint64_t plan_step;
} drop_rule;

/* The generation that wrote a step directory (its commit record's). */
static bool step_generation(const char *step_dir, uint64_t *generation)
{
    ckpt_commit_record r;
    if (ckpt__read_commit_record(step_dir, &r) != 0) return false;
    *generation = r.generation;
    ckpt__commit_free(&r);
    return true;
}

static void drop_steps(const char *dir, const drop_rule *rule)
{
    uint64_t *steps = NULL;
    size_t n = 0;
    if (ckpt__scan_steps(dir, &steps, &n) != 0) return;
    for (size_t i = 0; i < n; i++) {
        char step_dir[PATH_MAX];
        ckpt__step_dir(dir, steps[i], step_dir, sizeof step_dir);
        uint64_t generation = 0;
        bool newer = rule->planned && steps[i] > rule->plan_step;
        bool fenced = step_generation(step_dir, &generation) &&
                      !ckpt__plan_copy_usable(rule->fence, steps[i], generation);
        if (!newer && !fenced) continue;
        if (fenced)
            ELASTIC_LOG_I("replica",
                          "dropping step %" PRIu64 " of generation %" PRIu64
                          " from %s: a history the job left",
                          steps[i], generation, dir);
        ckpt__remove_step_dir(step_dir);
    }
    free(steps);
}

static void drop_everywhere(const char *root, const drop_rule *rule)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/" CKPT_MEM_OWN_DIR, root);
    drop_steps(dir, rule);
    snprintf(dir, sizeof dir, "%s/" CKPT_MEM_PEER_DIR, root);
    DIR *d = elastic__opendir(dir);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (!replica__node_name_ok(e->d_name)) continue;
        char sub[PATH_MAX + 300];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        drop_steps(sub, rule);
    }
    if (d) closedir(d);
}

/* ---- staging through the records' addresses ---------------------------------------------- */

typedef struct dial_ctx {
    const node_record *records;
    size_t n;
    const char *token;
    int timeout_ms;
} dial_ctx;

static int dial_record(void *p, uint32_t node, replica_conn **out)
{
    const dial_ctx *ctx = p;
    if (node >= ctx->n) return elastic__fail(ELASTIC_ECONNECT, "no node %" PRIu32, node);
    const replica_peer *peer = &ctx->records[node].peer;
    uint64_t deadline = elastic__deadline_ms(ctx->timeout_ms);
    int rc = replica__tcp_connect(peer->host, peer->port, deadline, out);
    if (rc == 0 && (rc = replica__auth_client(*out, ctx->token, deadline)) != 0)
        replica__close(*out);
    return rc;
}

static void free_records(node_record *records, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(records[i].copies);
        free(records[i].history);
    }
    free(records);
}

/* The history the store has, completed with what the live nodes know
 * (generations before `generation` only; one entry per generation). */
static size_t merge_history(ckpt_generation_start *history, size_t n, const node_record *records,
                            size_t n_records, uint64_t generation)
{
    for (size_t i = 0; i < n_records; i++) {
        for (size_t j = 0; j < records[i].n_history && n < MAX_HISTORY_LINES; j++) {
            const ckpt_generation_start *g = &records[i].history[j];
            bool known = g->generation >= generation;
            for (size_t k = 0; k < n && !known; k++) known = history[k].generation == g->generation;
            if (!known) history[n++] = *g;
        }
    }
    return n;
}

/* Whether node record r published a digest of the plan's step. */
static bool knows_record(const node_record *r, const ckpt_plan *plan)
{
    return r->has_digest && r->committed.step == plan->step &&
           r->committed.generation == plan->generation;
}

/* The digest of the job's record of the plan's step: this node's own when it
 * published one (it trusts its own record), else the one most of the nodes
 * that know the step as memory-committed published. NULL when none did (a
 * step that was not memory-committed: the copies' own records are all there
 * is) or when no digest has more votes than another (said once). */
static const uint8_t *jobs_record_digest(const ckpt_plan *plan, const node_record *records,
                                         size_t n, size_t self)
{
    if (self < n && knows_record(&records[self], plan)) return records[self].committed_digest;
    const uint8_t *best = NULL;
    size_t best_votes = 0;
    bool tied = false;
    for (size_t i = 0; i < n; i++) {
        if (!knows_record(&records[i], plan)) continue;
        size_t votes = 0;
        for (size_t j = 0; j < n; j++)
            votes += knows_record(&records[j], plan) &&
                     memcmp(records[j].committed_digest, records[i].committed_digest,
                            REPLICA_DIGEST_BYTES) == 0;
        if (best != NULL && votes == best_votes &&
            memcmp(best, records[i].committed_digest, REPLICA_DIGEST_BYTES) != 0)
            tied = true;
        if (votes > best_votes) {
            best = records[i].committed_digest;
            best_votes = votes;
            tied = false;
        }
    }
    if (tied) {
        ELASTIC_LOG_W("replica",
                      "the nodes published different records of step %" PRIu64
                      ", none by a majority: copies are checked against their own",
                      plan->step);
        return NULL;
    }
    return best;
}

/* Stages shard `shard` of the plan's step into this node's tier for `rank`
 * and says where it came from; a failure leaves NONE (the worker falls back
 * on its own) and is logged. */
static void stage_rank(const replica_sync_in *in, const ckpt_plan *plan, uint32_t rank,
                       uint32_t shard, const replica_dialer *dialer, int timeout_ms,
                       const node_record *records, size_t n, const uint8_t *record_digest,
                       replica_sync_rank *out)
{
    replica_restored got;
    if (replica__stage_shard_expecting(
            replica__service_root(in->service), plan, shard, (uint32_t)in->group_rank, dialer,
            elastic__deadline_ms(timeout_ms), record_digest, &got) != 0) {
        ELASTIC_LOG_E("replica", "rank %" PRIu32 " (shard %" PRIu32 "): %s", rank, shard,
                      elastic_last_error());
        return;
    }
    out->source = got.source == CKPT_SOURCE_LOCAL  ? CHANNEL__RESTORE_LOCAL
                  : got.source == CKPT_SOURCE_PEER ? CHANNEL__RESTORE_PEER
                                                   : CHANNEL__RESTORE_DISK;
    if (got.source != CKPT_SOURCE_DISK && got.node < n)
        snprintf(out->node, sizeof out->node, "%s", records[got.node].peer.name);
}

/* 1. our record */
static int publish_record(elastic_store *store, const replica_sync_in *in)
{
    bytes__buf rec = { .limit = MAX_RECORD_BYTES };
    char key[128];
    int rc = encode_record(in, replica__service_port(in->service), &rec);
    snprintf(key, sizeof key, "memtier/g%" PRIu64 "/node/%d", in->generation, in->group_rank);
    if (rc == 0) rc = elastic_store_set(store, key, rec.data, rec.len);
    bytes__buf_free(&rec);
    return rc;
}

/* 2. everyone's (ours included: the same bytes every node reads), into
 * records[n] (the caller's to free, also after a failure). */
static int read_records(elastic_store *store, const replica_sync_in *in, node_record *records,
                        size_t n, int timeout_ms)
{
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char key[128];
        snprintf(key, sizeof key, "memtier/g%" PRIu64 "/node/%zu", in->generation, i);
        void *value = NULL;
        size_t len = 0;
        /* In slices when the caller can say the generation ended. */
        for (;;) {
            int left = elastic__ms_left(deadline);
            int slice =
                in->ended != NULL && left > SYNC_ENDED_CHECK_MS ? SYNC_ENDED_CHECK_MS : left;
            rc = elastic_store_get(store, key, slice, &value, &len);
            if (rc != ELASTIC_ETIMEDOUT || slice == left) break;
            if (in->ended(in->ended_user))
                return elastic__fail(ELASTIC_ECANCELED,
                                     "generation %" PRIu64
                                     " ended while waiting for node %zu's record",
                                     in->generation, i);
        }
        if (rc == 0 && len > MAX_RECORD_BYTES) rc = bad_record((int)i, "too large");
        if (rc == 0) rc = decode_record(value, len, (int)i, &records[i]);
        elastic_free(value);
    }
    return rc;
}

/* 3. placement of our copies among the generation's nodes */
static int place_copies(const replica_sync_in *in, const node_record *records, size_t n)
{
    replica_peer *peers = calloc(n, sizeof *peers);
    if (peers == NULL) return elastic__fail(ELASTIC_ENOMEM, "memory tier sync");
    for (size_t i = 0; i < n; i++) peers[i] = records[i].peer;
    int rc = replica__service_set_peers(in->service, peers, n, (size_t)in->group_rank);
    free(peers);
    return rc;
}

/* 4a. the job's history of generation starts: the store's, completed with
 * what the live nodes know (*history: MAX_HISTORY_LINES entries, freed by
 * the caller). */
static int job_history(elastic_store *store, const replica_sync_in *in, const node_record *records,
                       size_t n, ckpt_generation_start **history, size_t *n_history)
{
    char *raw_history = NULL;
    int rc = read_history(store, in->generation, history, n_history, &raw_history);
    free(raw_history);
    if (rc == 0 && *history == NULL &&
        (*history = calloc(MAX_HISTORY_LINES, sizeof **history)) == NULL)
        rc = elastic__fail(ELASTIC_ENOMEM, "history");
    if (rc == 0) *n_history = merge_history(*history, *n_history, records, n, in->generation);
    return rc;
}

/* 4b. the plan over every node's copies and commit records: the same on every node. */
static int plan_from_records(const replica_sync_in *in, const node_record *records, size_t n,
                             const ckpt_generation_start *history, size_t n_history,
                             ckpt_plan *plan)
{
    ckpt_step_ref *committed = calloc(n, sizeof *committed);
    size_t n_committed = 0, total = 0;
    for (size_t i = 0; committed != NULL && i < n; i++)
        if (records[i].committed.step > 0) committed[n_committed++] = records[i].committed;
    for (size_t i = 0; i < n; i++) total += records[i].n_copies;
    ckpt_copy *all = malloc((total ? total : 1) * sizeof *all);
    int rc = all == NULL ? elastic__fail(ELASTIC_ENOMEM, "memory tier sync") : 0;
    for (size_t i = 0, at = 0; rc == 0 && i < n; i++) {
        if (records[i].n_copies == 0) continue; /* copies is NULL then: memcpy's NULL is UB */
        memcpy(all + at, records[i].copies, records[i].n_copies * sizeof *all);
        at += records[i].n_copies;
    }
    ckpt_plan_input pin = { .copies = all,
                            .n_copies = total,
                            .committed = committed,
                            .n_committed = n_committed,
                            .history = history,
                            .n_history = n_history,
                            .generation = in->generation };
    if (rc == 0) rc = ckpt__plan_restore(&pin, plan);
    free(all);
    free(committed);
    return rc;
}

/* 4c. the plan known: rank 0 appends it to the job's history, and the
 * service learns the history and this generation's start. */
static void record_plan(elastic_store *store, const replica_sync_in *in,
                        const ckpt_generation_start *history, size_t n_history,
                        const ckpt_plan *plan, replica_sync_out *out)
{
    if (in->group_rank == 0) append_history(store, history, n_history, plan, in->generation);
    for (size_t i = 0; i < n_history; i++)
        replica__service_history_record(in->service, &history[i]);
    replica__service_history_record(
        in->service, &(ckpt_generation_start){ .generation = in->generation,
                                               .restored = plan->found,
                                               .restore_step = plan->found ? plan->step : 0 });
    out->planned = plan->found;
    out->committed = plan->committed;
    out->step = plan->step;
    snprintf(out->why, sizeof out->why, "%s", plan->why);
}

/* The fence including this generation's own start (n_history + 1 entries,
 * the caller's to free). The copies it refuses go before staging: a node
 * cut off and back may hold the plan's very step, written by a history the
 * job left, where the step's real shards are staged now. */
static ckpt_generation_start *fence_off(const replica_sync_in *in,
                                        const ckpt_generation_start *history, size_t n_history,
                                        const ckpt_plan *plan)
{
    ckpt_generation_start *fence = calloc(n_history + 1, sizeof *fence);
    if (fence == NULL) return NULL;
    memcpy(fence, history, n_history * sizeof *fence);
    fence[n_history] = (ckpt_generation_start){ .generation = in->generation,
                                                .restored = plan->found,
                                                .restore_step = plan->step };
    ckpt_plan_input fence_in = { .history = fence,
                                 .n_history = n_history + 1,
                                 .generation = in->generation };
    drop_rule fenced_only = { &fence_in, false, 0 };
    drop_everywhere(replica__service_root(in->service), &fenced_only);
    return fence;
}

/* What staging a rank needs: the plan, the nodes' records and how to dial them. */
typedef struct sync_stage {
    const replica_sync_in *in;
    const ckpt_plan *plan;
    const node_record *records;
    size_t n;
    int timeout_ms;
    dial_ctx ctx;
    replica_dialer dialer; /* dials through ctx: the struct is not copied */
    const uint8_t *record_digest;
} sync_stage;

static void stage_init(sync_stage *st, const replica_sync_in *in, const ckpt_plan *plan,
                       const node_record *records, size_t n, int timeout_ms)
{
    *st = (sync_stage){ .in = in, .plan = plan, .records = records, .n = n,
                        .timeout_ms = timeout_ms };
    st->ctx = (dial_ctx){ records, n, replica__service_token(in->service), timeout_ms };
    st->dialer = (replica_dialer){ dial_record, &st->ctx };
    st->record_digest = jobs_record_digest(plan, records, n, (size_t)in->group_rank);
}

/* 5. this node's ranks, staged from their cheapest verified copies. Ranks
 * beyond the step's world (the job grew): the same step, so every rank
 * resumes at one step. They have no shard of it: they read the step's
 * replicated part (any shard carries it) and start their own part fresh. A
 * shard one of this node's ranks staged serves; else rank (rank mod
 * world)'s is staged, which spreads the new ranks' reads over the step's
 * shards. */
static void stage_local_ranks(const sync_stage *st, replica_sync_out *out)
{
    const replica_sync_in *in = st->in;
    const ckpt_plan *plan = st->plan;
    for (uint32_t i = 0; i < in->local_ranks; i++) {
        uint32_t rank = in->first_rank + i;
        if (rank < plan->world)
            stage_rank(in, plan, rank, rank, &st->dialer, st->timeout_ms, st->records, st->n,
                       st->record_digest, &out->ranks[i]);
    }
    for (uint32_t i = 0; i < in->local_ranks; i++) {
        uint32_t rank = in->first_rank + i;
        if (rank < plan->world) continue;
        const replica_sync_rank *staged = NULL;
        for (uint32_t j = 0; j < in->local_ranks && staged == NULL; j++)
            if (in->first_rank + j < plan->world && out->ranks[j].source != CHANNEL__RESTORE_NONE)
                staged = &out->ranks[j];
        if (staged != NULL)
            out->ranks[i] = *staged;
        else
            stage_rank(in, plan, rank, rank % plan->world, &st->dialer, st->timeout_ms,
                       st->records, st->n, st->record_digest, &out->ranks[i]);
        out->ranks[i].beyond_step = out->ranks[i].source != CHANNEL__RESTORE_NONE;
    }
}

/* 6. departed ranks (a smaller world): readable on every node, for resharding */
static void stage_departed_ranks(const sync_stage *st)
{
    const replica_sync_in *in = st->in;
    for (uint32_t rank = in->job_world; in->job_world > 0 && rank < st->plan->world; rank++) {
        replica_restored got;
        if (replica__stage_shard_expecting(replica__service_root(in->service), st->plan, rank,
                                           (uint32_t)in->group_rank, &st->dialer,
                                           elastic__deadline_ms(st->timeout_ms),
                                           st->record_digest, &got) != 0)
            ELASTIC_LOG_W("replica", "departed rank %" PRIu32 " of step %" PRIu64 ": %s", rank,
                          st->plan->step, elastic_last_error());
    }
}

/* Steps newer than the plan's are never among its copies, so no peer's
 * staging can be fetching them: they go. */
static void drop_newer_than_plan(const replica_sync_in *in, ckpt_generation_start *fence,
                                 size_t n_fence, const ckpt_plan *plan)
{
    ckpt_plan_input fence_in = { .history = fence, .n_history = n_fence,
                                 .generation = in->generation };
    drop_rule rule = { &fence_in, plan->found, plan->step };
    drop_everywhere(replica__service_root(in->service), &rule);
}

int replica__sync_generation(elastic_store *store, const replica_sync_in *in, replica_sync_out *out)
{
    memset(out, 0, sizeof *out);
    if (store == NULL || in == NULL || in->service == NULL || in->group_world_size < 1 ||
        in->group_world_size > MAX_NODES || in->group_rank < 0 ||
        in->group_rank >= in->group_world_size || !replica__node_name_ok(in->node_name))
        return elastic__fail(ELASTIC_EINVAL, "memory tier sync: bad arguments");
    int timeout_ms = in->timeout_ms > 0 ? in->timeout_ms : 30000;
    out->ranks = calloc(in->local_ranks ? in->local_ranks : 1, sizeof *out->ranks);
    if (out->ranks == NULL) return elastic__fail(ELASTIC_ENOMEM, "memory tier sync");
    int rc = publish_record(store, in);
    if (rc) return rc;
    size_t n = (size_t)in->group_world_size;
    node_record *records = calloc(n, sizeof *records);
    if (records == NULL) return elastic__fail(ELASTIC_ENOMEM, "memory tier sync");
    rc = read_records(store, in, records, n, timeout_ms);
    if (rc == 0) rc = place_copies(in, records, n);
    /* 4. the plan, the same on every node */
    ckpt_generation_start *history = NULL;
    size_t n_history = 0;
    ckpt_plan plan = { 0 };
    if (rc == 0) rc = job_history(store, in, records, n, &history, &n_history);
    if (rc == 0) rc = plan_from_records(in, records, n, history, n_history, &plan);
    if (rc == 0) record_plan(store, in, history, n_history, &plan, out);
    ckpt_generation_start *fence = rc == 0 ? fence_off(in, history, n_history, &plan) : NULL;
    if (rc == 0 && plan.found) {
        sync_stage st;
        stage_init(&st, in, &plan, records, n, timeout_ms);
        stage_local_ranks(&st, out);
        stage_departed_ranks(&st);
    }
    if (fence != NULL) drop_newer_than_plan(in, fence, n_history + 1, &plan);
    free(fence);
    free(history);
    /* The generation's memory commit starts from the step every node
     * restored; without a plan (a failed sync) there is none. */
    int set = replica__service_set_generation(in->service, rc == 0 ? store : NULL, in->generation,
                                              in->group_world_size, plan.found ? plan.step : 0,
                                              plan.generation);
    if (rc == 0) rc = set;
    ckpt__plan_free(&plan);
    free_records(records, n);
    return rc;
}
