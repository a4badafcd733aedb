/*
 * Housekeeping: removing what crashed writers left (on open) and old steps
 * (after a commit) according to keep_last / keep_every. Nothing here ever
 * touches the newest valid step, and step directories lose their commit
 * record before anything else, so an interrupted removal leaves an
 * uncommitted step, never a broken committed one.
 */
#include "common/dir.h"
#include "ckpt/ckpt.h"
#include "common/parse_int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The rank a temporary file belongs to, from ".tmp-shard-<rank>-..." or
 * ".tmp-COMMIT-r<rank>...". */
static bool temp_owner(const char *name, uint32_t *rank)
{
    const char *p;
    if (strncmp(name, CKPT_TMP_PREFIX "shard-", 11) == 0)
        p = name + 11;
    else if (strncmp(name, CKPT_TMP_PREFIX CKPT_COMMIT_NAME "-r", 13) == 0)
        p = name + 13;
    else
        return false;
    uint64_t value;
    if (elastic__parse_u64_n(NULL, p, strspn(p, "0123456789"), 0, UINT32_MAX, &value) != 0)
        return false;
    *rank = (uint32_t)value;
    return true;
}

/* Ours to remove: with one rank every temp file; otherwise our own rank's,
 * and rank 0 also takes those of ranks beyond the world (an older, larger
 * generation). Other ranks may be writing theirs right now. */
static bool temp_is_ours(const elastic_ckpt_opts *o, const char *name)
{
    uint32_t owner;
    if (strncmp(name, CKPT_TMP_PREFIX, strlen(CKPT_TMP_PREFIX)) != 0) return false;
    if (o->world == 1) return true;
    if (!temp_owner(name, &owner)) return false;
    return owner == o->rank || (o->rank == 0 && owner >= o->world);
}

/* Removes our temp files in a step directory; true if it holds a commit record. */
static bool clean_step_dir(elastic_ckpt *c, const char *step_dir)
{
    DIR *d = elastic__opendir(step_dir);
    if (d == NULL) return true; /* unreadable: leave it alone */
    bool committed = false;
    struct dirent *e;
    char path[PATH_MAX + 300];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, CKPT_COMMIT_NAME) == 0) committed = true;
        if (!temp_is_ours(&c->opts, e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", step_dir, e->d_name);
        if (unlink(path) == 0)
            ELASTIC_LOG_I("ckpt", "removed leftover %s", path);
        else
            ELASTIC_LOG_D("ckpt", "cannot remove leftover %s: %s", path, strerror(errno));
    }
    closedir(d);
    return committed;
}

void ckpt__cleanup_on_open(elastic_ckpt *c)
{
    uint64_t *steps;
    size_t n;
    if (ckpt__scan_steps(c->dir, &steps, &n) != 0) return;
    char step_dir[PATH_MAX];
    for (size_t i = 0; i < n; i++) {
        ckpt__step_dir(c->dir, steps[i], step_dir, sizeof step_dir);
        bool committed = clean_step_dir(c, step_dir);
        /* With one rank nobody else can be writing: an uncommitted step is
         * what a crash or failed commit left. */
        if (!committed && c->opts.world == 1 && ckpt__remove_step_dir(step_dir) == 0)
            ELASTIC_LOG_I("ckpt", "removed uncommitted step %" PRIu64, steps[i]);
    }
    free(steps);
}

static bool kept(const elastic_ckpt_opts *o, const uint64_t *valid, size_t n_valid, uint64_t step)
{
    if (o->keep_every && step % o->keep_every == 0) {
        for (size_t i = 0; i < n_valid; i++)
            if (valid[i] == step) return true;
    }
    for (size_t i = 0; i < n_valid && i < o->keep_last; i++)
        if (valid[i] == step) return true;
    return false;
}

void ckpt__apply_retention(elastic_ckpt *c)
{
    const elastic_ckpt_opts *o = &c->opts;
    if (o->keep_last == 0) return;
    uint64_t *valid, *all;
    size_t n_valid, n_all;
    if (ckpt__valid_steps(c, ELASTIC_CKPT_VERIFY_MANIFEST, SIZE_MAX, &valid, &n_valid) != 0) return;
    /* A memory tier also keeps what its agent pinned: the job's last
     * memory-committed step and the one being replicated (memtier.h). */
    uint64_t pinned[CKPT_MEM_KEEP_MAX];
    size_t n_pinned = c->mem.root != NULL ? ckpt__mem_keep_read(c->mem.root, pinned) : 0;
    if (n_valid > 0 && ckpt__scan_steps(c->dir, &all, &n_all) == 0) {
        char step_dir[PATH_MAX];
        /* Only below the newest valid step: above it a step may be in progress. */
        for (size_t i = 0; i < n_all && all[i] < valid[0]; i++) {
            if (kept(o, valid, n_valid, all[i]) || ckpt__mem_keep_has(pinned, n_pinned, all[i]))
                continue;
            ckpt__step_dir(c->dir, all[i], step_dir, sizeof step_dir);
            if (c->mem.root != NULL) ckpt__mem_keep_spares(c->dir, step_dir);
            if (ckpt__remove_step_dir(step_dir) == 0)
                ELASTIC_LOG_D("ckpt", "retention removed step %" PRIu64, all[i]);
            else
                ELASTIC_LOG_W("ckpt", "retention: %s", elastic_last_error());
        }
        free(all);
    }
    free(valid);
}
