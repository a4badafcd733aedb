/*
 * What a memory tier holds, as the restore planner's input (replica.h,
 * replica__holdings): every committed step of ROOT/own and of each
 * ROOT/peer/<origin>, one copy per shard file whose size is what the step's
 * commit record says. Cheap (directory listings, records, stat): the bytes
 * are verified by whoever reads them.
 */
#include "common/dir.h"
#include "replica/replica.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>

#define MAX_COPIES (1u << 20)

typedef struct copy_list {
    ckpt_copy *items;
    size_t n, cap;
    uint32_t node;
} copy_list;

static int add(copy_list *l, const ckpt_copy *c)
{
    if (l->n == MAX_COPIES) return elastic__fail(ELASTIC_ELIMIT, "more than %u copies", MAX_COPIES);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        ckpt_copy *grown = realloc(l->items, cap * sizeof *grown);
        if (grown == NULL) return elastic__fail(ELASTIC_ENOMEM, "holdings");
        l->items = grown;
        l->cap = cap;
    }
    l->items[l->n++] = *c;
    return 0;
}

static int scan_step(copy_list *l, const char *dir, uint64_t step)
{
    char step_dir[PATH_MAX], path[PATH_MAX + 128], name[96];
    ckpt__step_dir(dir, step, step_dir, sizeof step_dir);
    snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
    ckpt_commit_record r;
    if (access(path, F_OK) != 0) return 0; /* not committed */
    int decoded = ckpt__read_commit_record(step_dir, &r);
    if (decoded != 0 || r.step != step) {
        if (decoded == 0) ckpt__commit_free(&r);
        ELASTIC_LOG_W("replica", "%s: ignored (%s)", path, elastic_last_error());
        return 0;
    }
    int rc = 0;
    for (uint32_t rank = 0; rank < r.world && rc == 0; rank++) {
        ckpt__shard_name(rank, r.generation, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", step_dir, name);
        struct stat st;
        if (stat(path, &st) != 0 || (uint64_t)st.st_size != r.shards[rank].file_size) continue;
        ckpt_copy c = { .step = step,
                        .generation = r.generation,
                        .world = r.world,
                        .rank = rank,
                        .node = l->node,
                        .tier = CKPT_TIER_MEMORY,
                        .bytes = (uint64_t)st.st_size };
        rc = add(l, &c);
    }
    ckpt__commit_free(&r);
    return rc;
}

static int scan_dir(copy_list *l, const char *dir)
{
    uint64_t *steps = NULL;
    size_t n = 0;
    if (ckpt__scan_steps(dir, &steps, &n) != 0) return 0; /* missing: nothing held */
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = scan_step(l, dir, steps[i]);
    free(steps);
    return rc;
}

int replica__holdings(const char *root, uint32_t self_node, ckpt_copy **copies, size_t *n)
{
    copy_list l = { .node = self_node };
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/" CKPT_MEM_OWN_DIR, root);
    int rc = scan_dir(&l, dir);
    snprintf(dir, sizeof dir, "%s/" CKPT_MEM_PEER_DIR, root);
    DIR *d = rc == 0 ? elastic__opendir(dir) : NULL;
    struct dirent *e;
    while (d != NULL && rc == 0 && (e = readdir(d)) != NULL) {
        if (!replica__node_name_ok(e->d_name)) continue;
        char sub[PATH_MAX + 300];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        rc = scan_dir(&l, sub);
    }
    if (d) closedir(d);
    if (rc) {
        free(l.items);
        return rc;
    }
    *copies = l.items;
    *n = l.n;
    return 0;
}
