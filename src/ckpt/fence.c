/*
 * A fenced generation cannot move the checkpoint forward. Every handle
 * records the (incarnation, generation) it writes for as soon as it opens
 * (shared directory: a marker file DIR/generations/<I>-<G>; store: the key
 * ckpt/newest_generation, raised by compare-and-set, never lowered). A
 * commit from an older pair than the newest recorded one — a node cut off
 * or frozen that keeps writing after the job re-formed without it, or any
 * worker of a job an operator has since started again — is refused, and a
 * shared-directory COMMIT that raced with a newer generation's start is
 * taken back.
 *
 * Pairs compare lexicographically: the incarnation (the run's, from the
 * agent: ELASTIC_INCARNATION) first, so a job started again on a fresh
 * store, whose generations count from 1 again, is newer than every
 * generation of the job before it. A marker without an incarnation ("<G>",
 * written before incarnations existed, or by a handle with incarnation 0)
 * is incarnation 0.
 */
#include "common/dir.h"
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
#define MARK_CHARS 48 /* "<20 digits>-<20 digits>" and the NUL, with room */

/* ---- marks ------------------------------------------------------------------ */

bool ckpt__fence_mark_parse(const char *text, size_t len, ckpt_fence_mark *out)
{
    const char *dash = memchr(text, '-', len);
    uint64_t incarnation = 0, generation = 0;
    if (dash == NULL) {
        if (elastic__parse_u64_n(NULL, text, len, 0, UINT64_MAX, &generation) != 0) return false;
    } else if (elastic__parse_u64_n(NULL, text, (size_t)(dash - text), 1, UINT64_MAX,
                                    &incarnation) != 0 ||
               elastic__parse_u64_n(NULL, dash + 1, len - (size_t)(dash + 1 - text), 0, UINT64_MAX,
                                    &generation) != 0) {
        return false;
    }
    *out = (ckpt_fence_mark){ .incarnation = incarnation, .generation = generation };
    return true;
}

int ckpt__fence_mark_cmp(const ckpt_fence_mark *a, const ckpt_fence_mark *b)
{
    if (a->incarnation != b->incarnation) return a->incarnation < b->incarnation ? -1 : 1;
    if (a->generation != b->generation) return a->generation < b->generation ? -1 : 1;
    return 0;
}

size_t ckpt__fence_mark_format(const ckpt_fence_mark *m, char *out, size_t cap)
{
    /* Incarnation 0 keeps the old name, which older libraries read too. */
    int n = m->incarnation == 0
                ? snprintf(out, cap, "%" PRIu64, m->generation)
                : snprintf(out, cap, "%" PRIu64 "-%" PRIu64, m->incarnation, m->generation);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

static ckpt_fence_mark own_mark(const elastic_ckpt *c)
{
    return (ckpt_fence_mark){ .incarnation = c->opts.incarnation,
                              .generation = c->opts.generation };
}

/* ---- shared directory ------------------------------------------------------ */

static int dir_register(elastic_ckpt *c)
{
    char dir[PATH_MAX], path[PATH_MAX + MARK_CHARS + 2], name[MARK_CHARS];
    snprintf(dir, sizeof dir, "%s/" MARKER_DIR, c->dir);
    bool created = mkdir(dir, ckpt__dir_mode(&c->opts)) == 0;
    if (!created && errno != EEXIST) return ckpt__fail_errno(errno, "create", dir);
    ckpt_fence_mark mine = own_mark(c);
    ckpt__fence_mark_format(&mine, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
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

static int dir_newest(elastic_ckpt *c, ckpt_fence_mark *newest)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/" MARKER_DIR, c->dir);
    *newest = (ckpt_fence_mark){ 0 };
    DIR *d = elastic__opendir(dir);
    if (d == NULL) return errno == ENOENT ? 0 : ckpt__fail_errno(errno, "open", dir);
    struct dirent *entry;
    ckpt_fence_mark mark;
    while ((entry = readdir(d)) != NULL) {
        size_t len = strnlen(entry->d_name, MARK_CHARS);
        if (len < MARK_CHARS && ckpt__fence_mark_parse(entry->d_name, len, &mark) &&
            ckpt__fence_mark_cmp(&mark, newest) > 0)
            *newest = mark;
    }
    closedir(d);
    return 0;
}

/* ---- store ------------------------------------------------------------------- */

static int store_newest(elastic_ckpt *c, ckpt_fence_mark *newest, char *raw, size_t raw_size,
                        size_t *raw_len)
{
    void *value = NULL;
    size_t len = 0;
    *newest = (ckpt_fence_mark){ 0 };
    *raw_len = 0;
    int rc = elastic_store_try_get(c->opts.store, NEWEST_KEY, &value, &len);
    if (rc == ELASTIC_ENOTFOUND) return 0;
    if (rc != 0) return rc;
    if (len >= raw_size || !ckpt__fence_mark_parse(value, len, newest))
        rc = elastic__fail(ELASTIC_ECORRUPT,
                           "store key " NEWEST_KEY " is not a [incarnation-]generation");
    else
        memcpy(raw, value, len), *raw_len = len;
    elastic_free(value);
    return rc;
}

static int store_register(elastic_ckpt *c)
{
    char mine_text[MARK_CHARS], raw[MARK_CHARS];
    ckpt_fence_mark mine = own_mark(c);
    size_t mine_len = ckpt__fence_mark_format(&mine, mine_text, sizeof mine_text);
    for (int attempt = 0; attempt < 32; attempt++) {
        ckpt_fence_mark newest;
        size_t raw_len;
        int rc = store_newest(c, &newest, raw, sizeof raw, &raw_len);
        if (rc != 0 || (raw_len > 0 && ckpt__fence_mark_cmp(&newest, &mine) >= 0)) return rc;
        void *current = NULL;
        size_t current_len = 0;
        rc = elastic_store_compare_set(c->opts.store, NEWEST_KEY, raw_len > 0 ? raw : NULL, raw_len,
                                       mine_text, mine_len, &current, &current_len);
        bool won = rc == 0 && current_len == mine_len && memcmp(current, mine_text, mine_len) == 0;
        elastic_free(current);
        if (rc != 0 || won) return rc;
    }
    return elastic__fail(ELASTIC_EBUSY, "store key " NEWEST_KEY ": too much contention");
}

bool ckpt__shard_is_own_incarnation(const elastic_ckpt *c, const char *path)
{
    uint8_t raw[CKPT_HEADER_BYTES];
    ckpt_header h;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    int rc = ckpt__pread_all(fd, raw, sizeof raw, 0, path);
    close(fd);
    return rc == 0 && ckpt__header_decode(raw, sizeof raw, &h) == 0 &&
           h.incarnation == c->opts.incarnation;
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
    ckpt_fence_mark newest, mine = own_mark(c);
    char raw[MARK_CHARS];
    size_t raw_len;
    int rc = c->opts.store != NULL ? store_newest(c, &newest, raw, sizeof raw, &raw_len)
                                   : dir_newest(c, &newest);
    if (rc != 0) return rc;
    if (ckpt__fence_mark_cmp(&newest, &mine) <= 0) return 0;
    if (newest.incarnation == mine.incarnation)
        return elastic__fail(ELASTIC_ESTATE,
                             "step %" PRIu64 " not committed: generation %" PRIu64
                             " is fenced, generation %" PRIu64 " has started since",
                             step, mine.generation, newest.generation);
    return elastic__fail(
        ELASTIC_ESTATE,
        "step %" PRIu64 " not committed: generation %" PRIu64 " of incarnation %" PRIu64
        " is fenced, generation %" PRIu64 " of the later incarnation %" PRIu64
        " (the job started again) has started since",
        step, mine.generation, mine.incarnation, newest.generation, newest.incarnation);
}
