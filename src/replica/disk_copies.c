/*
 * The disk copies a node counts in its restore-plan record (sync.c): the
 * steps committed in the agent's shared --memory-disk-dir, and in every disk
 * tier its workers announced (channel.h, "the trainer's disk tier"). A
 * shared directory's steps carry every rank (CKPT_NODE_SHARED: any node
 * reads them); a node-local one (store mode) only the shards present in it,
 * which only this node can read (REPLICA_NODE_SELF until the record's
 * reader puts the node's group rank in).
 */
#include "common/dir.h"
#include "replica/replica.h"

#include "channel/channel.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_ANNOUNCED 64u /* distinct announced tiers counted; more are logged and skipped */

typedef struct copy_list {
    ckpt_copy *items;
    size_t n, cap, max;
} copy_list;

/* Appends a copy; ELASTIC_ELIMIT at the list's bound. */
static int push(copy_list *l, const ckpt_copy *c)
{
    if (l->n >= l->max) return elastic__fail(ELASTIC_ELIMIT, "more than %zu disk copies", l->max);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        if (cap > l->max) cap = l->max;
        ckpt_copy *grown = realloc(l->items, cap * sizeof *grown);
        if (grown == NULL) return elastic__fail(ELASTIC_ENOMEM, "disk copies");
        l->items = grown;
        l->cap = cap;
    }
    l->items[l->n++] = *c;
    return 0;
}

/* The shards of `generation` in step_dir (a node-local tier holds this
 * node's ranks' only): one readdir, not a look-up per rank of the world. */
static int local_shards(const char *step_dir, const ckpt_commit_record *r, uint64_t step,
                        copy_list *l)
{
    DIR *d = elastic__opendir(step_dir);
    int rc = 0;
    for (struct dirent *e; rc == 0 && d != NULL && (e = readdir(d)) != NULL;) {
        uint32_t rank;
        uint64_t generation;
        if (!ckpt__parse_shard_name(e->d_name, &rank, &generation) || generation != r->generation ||
            rank >= r->world)
            continue;
        ckpt_copy c = { .step = step,
                        .generation = r->generation,
                        .world = r->world,
                        .rank = rank,
                        .node = REPLICA_NODE_SELF,
                        .tier = CKPT_TIER_DISK,
                        .bytes = r->shards[rank].file_size };
        rc = push(l, &c);
    }
    if (d) closedir(d);
    return rc;
}

/* The committed steps of `dir`, newest first, while they fit under the
 * list's bound (the plan wants the newest; a directory that keeps every
 * step must not make the node's record too large to publish): every rank
 * of a step when shared, else the ranks whose shard is in it. */
static void dir_copies(const char *dir, bool shared, copy_list *l)
{
    uint64_t *steps = NULL;
    size_t n_steps = 0;
    if (dir == NULL || ckpt__scan_steps(dir, &steps, &n_steps) != 0) return;
    bool full = false;
    for (size_t i = n_steps; i-- > 0 && !full;) {
        char step_dir[PATH_MAX];
        ckpt__step_dir(dir, steps[i], step_dir, sizeof step_dir);
        ckpt_commit_record r;
        if (ckpt__read_commit_record(step_dir, &r) != 0) continue;
        size_t before = l->n;
        if (shared) {
            for (uint32_t rank = 0; rank < r.world && !full; rank++) {
                ckpt_copy c = { .step = steps[i],
                                .generation = r.generation,
                                .world = r.world,
                                .rank = rank,
                                .node = CKPT_NODE_SHARED,
                                .tier = CKPT_TIER_DISK,
                                .bytes = r.shards[rank].file_size };
                full = push(l, &c) != 0;
            }
        } else {
            full = local_shards(step_dir, &r, steps[i], l) != 0;
        }
        if (full) { /* a step counts whole or not at all */
            l->n = before;
            ELASTIC_LOG_W("replica",
                          "%s: steps up to %" PRIu64 " left out of the restore plan (more than %zu "
                          "copies)",
                          dir, steps[i], l->max);
        }
        ckpt__commit_free(&r);
    }
    free(steps);
}

/* One announcement: "shared|local <absolute dir>\n", nothing else. */
static bool read_announcement(const char *path, char *dir, size_t cap, bool *shared)
{
    uint8_t *raw = NULL;
    size_t len = 0;
    if (ckpt__read_small_file(path, CHANNEL__DISK_ANNOUNCE_MAX, &raw, &len) != 0) return false;
    const char *text = (const char *)raw, *space = memchr(text, ' ', len);
    bool ok = space != NULL && len >= 2 && text[len - 1] == '\n';
    size_t word = ok ? (size_t)(space - text) : 0, dir_len = ok ? len - word - 2 : 0;
    ok = ok && ((word == 6 && memcmp(text, "shared", 6) == 0) ||
                (word == 5 && memcmp(text, "local", 5) == 0));
    ok = ok && dir_len > 1 && dir_len < cap && space[1] == '/' &&
         memchr(space + 1, '\n', dir_len) == NULL && memchr(space + 1, '\0', dir_len) == NULL;
    if (ok) {
        *shared = word == 6;
        memcpy(dir, space + 1, dir_len);
        dir[dir_len] = '\0';
    }
    free(raw);
    return ok;
}

typedef struct announced {
    char dir[PATH_MAX];
    bool shared;
} announced;

/* The distinct tiers announced in ROOT (the shared disk_dir, counted apart, left out). */
static size_t announced_tiers(const char *root, const char *disk_dir, announced *out, size_t max)
{
    DIR *d = elastic__opendir(root);
    size_t n = 0, prefix_len = strlen(CHANNEL__DISK_ANNOUNCE_PREFIX);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        size_t name_len = strlen(e->d_name);
        /* "trainer-disk.<local rank>": digits only (the writer's .tmp is not one) */
        if (strncmp(e->d_name, CHANNEL__DISK_ANNOUNCE_PREFIX, prefix_len) != 0 ||
            name_len == prefix_len ||
            strspn(e->d_name + prefix_len, "0123456789") != name_len - prefix_len)
            continue;
        char path[PATH_MAX + 300];
        announced a;
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        if (!read_announcement(path, a.dir, sizeof a.dir, &a.shared)) {
            ELASTIC_LOG_W("replica", "%s: not \"shared|local <absolute dir>\": ignored", path);
            continue;
        }
        bool known = disk_dir != NULL && a.shared && strcmp(a.dir, disk_dir) == 0;
        for (size_t i = 0; i < n && !known; i++)
            known = out[i].shared == a.shared && strcmp(out[i].dir, a.dir) == 0;
        if (known) continue;
        if (n == max) {
            ELASTIC_LOG_W("replica", "more than %zu announced disk tiers: %s not counted", max,
                          a.dir);
            continue;
        }
        out[n++] = a;
    }
    if (d) closedir(d);
    return n;
}

int replica__disk_copies(const char *tier_root, const char *disk_dir, size_t max, ckpt_copy **out,
                         size_t *n)
{
    copy_list l = { .max = max };
    dir_copies(disk_dir, true, &l);
    announced *tiers = calloc(MAX_ANNOUNCED, sizeof *tiers);
    if (tiers == NULL) {
        free(l.items);
        return elastic__fail(ELASTIC_ENOMEM, "announced disk tiers");
    }
    /* Announcements name resolved paths: --memory-disk-dir may not be one. */
    char disk_abs[PATH_MAX];
    const char *disk_key =
        disk_dir != NULL && realpath(disk_dir, disk_abs) != NULL ? disk_abs : disk_dir;
    size_t n_tiers = announced_tiers(tier_root, disk_key, tiers, MAX_ANNOUNCED);
    for (size_t i = 0; i < n_tiers; i++) dir_copies(tiers[i].dir, tiers[i].shared, &l);
    free(tiers);
    *out = l.items;
    *n = l.n;
    return 0;
}
