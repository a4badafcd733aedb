/*
 * A fenced generation cannot move the checkpoint forward. Every handle
 * records the generation it writes for as soon as it opens (shared directory:
 * a marker file DIR/generations/<G>; store: the key ckpt/newest_generation,
 * raised by compare-and-set, never lowered). A commit from a generation older
 * than the newest recorded one — a node cut off or frozen that keeps writing
 * after the job re-formed without it — is refused, and a shared-directory
 * COMMIT that raced with a newer generation's start is taken back.
 */
#include "ckpt/ckpt.h"
#include "common/parse_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define NEWEST_KEY "ckpt/newest_generation"
#define MARKER_DIR "generations"

/* A generation as a marker file's name or the store's value. */
static bool parse_generation(const char *text, size_t len, uint64_t *out)
{
    return elastic__parse_u64_n(NULL, text, len, 0, UINT64_MAX, out) == 0;
}

/* ---- shared directory ------------------------------------------------------ */

static int dir_register(elastic_ckpt *c)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/" MARKER_DIR, c->dir);
    bool created = mkdir(dir, ckpt__dir_mode(&c->opts)) == 0;
    if (!created && errno != EEXIST) return ckpt__fail_errno(errno, "create", dir);
    snprintf(path, sizeof path, "%s/%" PRIu64, dir, c->opts.generation);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, c->opts.file_mode);
    if (fd < 0) return ckpt__fail_errno(errno, "create", path);
    close(fd);
    /* The marker must outlive a power cut, or an older generation that
     * kept running could commit again after it. */
    if (c->opts.fsync != ELASTIC_CKPT_FSYNC_FULL) return 0;
    int rc = ckpt__fsync_dir(dir);
    if (rc == 0 && created) rc = ckpt__fsync_dir(c->dir);
    return rc;
}

static int dir_newest(elastic_ckpt *c, uint64_t *newest)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/" MARKER_DIR, c->dir);
    *newest = 0;
    DIR *d = opendir(dir);
    if (d == NULL) return errno == ENOENT ? 0 : ckpt__fail_errno(errno, "open", dir);
    struct dirent *entry;
    uint64_t generation;
    while ((entry = readdir(d)) != NULL)
        if (parse_generation(entry->d_name, strlen(entry->d_name), &generation) &&
            generation > *newest)
            *newest = generation;
    closedir(d);
    return 0;
}

/* ---- store ------------------------------------------------------------------- */

static int store_newest(elastic_ckpt *c, uint64_t *newest, char *raw, size_t raw_size,
                        size_t *raw_len)
{
    void *value = NULL;
    size_t len = 0;
    *newest = 0;
    *raw_len = 0;
    int rc = elastic_store_try_get(c->opts.store, NEWEST_KEY, &value, &len);
    if (rc == ELASTIC_ENOTFOUND) return 0;
    if (rc != 0) return rc;
    if (!parse_generation(value, len, newest) || len >= raw_size)
        rc = elastic__fail(ELASTIC_ECORRUPT, "store key " NEWEST_KEY " is not a generation");
    else
        memcpy(raw, value, len), *raw_len = len;
    elastic_free(value);
    return rc;
}

static int store_register(elastic_ckpt *c)
{
    char mine[24], raw[24];
    int mine_len = snprintf(mine, sizeof mine, "%" PRIu64, c->opts.generation);
    for (int attempt = 0; attempt < 32; attempt++) {
        uint64_t newest;
        size_t raw_len;
        int rc = store_newest(c, &newest, raw, sizeof raw, &raw_len);
        if (rc != 0 || (raw_len > 0 && newest >= c->opts.generation)) return rc;
        void *current = NULL;
        size_t current_len = 0;
        rc = elastic_store_compare_set(c->opts.store, NEWEST_KEY, raw_len > 0 ? raw : NULL, raw_len,
                                       mine, (size_t)mine_len, &current, &current_len);
        bool won =
            rc == 0 && current_len == (size_t)mine_len && memcmp(current, mine, current_len) == 0;
        elastic_free(current);
        if (rc != 0 || won) return rc;
    }
    return elastic__fail(ELASTIC_EBUSY, "store key " NEWEST_KEY ": too much contention");
}

/* ---- the two entry points ----------------------------------------------------------- */

int ckpt__fence_register(elastic_ckpt *c)
{
    if (c->opts.generation == 0) return 0; /* not run by an agent: nothing to fence */
    return c->opts.store != NULL ? store_register(c) : dir_register(c);
}

int ckpt__fence_check(elastic_ckpt *c, uint64_t step)
{
    if (c->opts.generation == 0) return 0;
    uint64_t newest;
    char raw[24];
    size_t raw_len;
    int rc = c->opts.store != NULL ? store_newest(c, &newest, raw, sizeof raw, &raw_len)
                                   : dir_newest(c, &newest);
    if (rc != 0) return rc;
    if (newest <= c->opts.generation) return 0;
    return elastic__fail(ELASTIC_ESTATE,
                         "step %" PRIu64 " not committed: generation %" PRIu64
                         " is fenced, generation %" PRIu64 " has started since",
                         step, c->opts.generation, newest);
}
