/*
 * The memory tier's directory, marker and bound (memtier.h): creating and
 * removing the tree, reading the marker, counting what the tree holds and
 * reserving room before a write.
 */
#include "common/dir.h"
#include "ckpt/memtier.h"

#include "ckpt/ckpt.h"
#include "common/tsan_fd.h"
#include "common/parse_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MARKER_MAX 256
#define TREE_DEPTH 4 /* ROOT/peer/<node>/step-N/file */

uint64_t ckpt__mem_default_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 1ull << 30;
    return (uint64_t)pages * (uint64_t)page / 4;
}

/* The next entry of d but "." and "..", written as path/name into child;
 * false at the end. A name too long for a path is passed over. */
static bool next_child(DIR *d, const char *path, char *child, size_t size)
{
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if ((size_t)snprintf(child, size, "%s/%s", path, e->d_name) < size) return true;
    }
    return false;
}

int ckpt__mem_tier_remove(const char *root)
{
    return ckpt__mem_tree_remove(root, TREE_DEPTH, false);
}

/* Whether the directory `fd` holds nothing, or only a memory tier's
 * marker and tree (a tier this user made before: emptied by descriptor). */
static int check_contents(int fd, const char *root, bool *is_tier)
{
    DIR *d = NULL;
    int listed = ckpt__mem_tree_list(fd, root, &d);
    if (listed != 0) return listed;
    bool any = false, marker = false;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        any = true;
        marker = marker || strcmp(e->d_name, CKPT_MEM_MARKER) == 0;
    }
    closedir(d);
    *is_tier = any;
    if (any && !marker)
        return elastic__fail(ELASTIC_EEXIST,
                             "memory tier %s: the directory holds files that are not a tier's",
                             root);
    return 0;
}

/* ROOT as the caller made it (mkdtemp) or made now: a directory, not a
 * symlink, this user's, mode 0700, and empty (or a tier of ours, emptied) —
 * checked through its descriptor, so no other local user can have planted
 * it or anything in it. Then own/ and peer/ are made relative to it. */
static int prepare_root(const char *root)
{
    char name[NAME_MAX + 1];
    int parent = -1, fd = -1;
    int rc = ckpt__mem_tree_open(root, &parent, name, sizeof name, &fd);
    if (rc == ELASTIC_ENOTFOUND) {
        elastic__clear_error();
        if (mkdir(root, 0700) != 0 && errno != EEXIST)
            return ckpt__fail_errno(errno, "create", root);
        rc = ckpt__mem_tree_open(root, &parent, name, sizeof name, &fd);
    }
    if (rc != 0) return rc;
    struct stat st;
    bool is_tier = false;
    if (fstat(fd, &st) != 0)
        rc = ckpt__fail_errno(errno, "stat", root);
    else if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700)
        rc = elastic__fail(ELASTIC_EPERM,
                           "memory tier %s: owned by uid %u with mode %04o, not this user's "
                           "(uid %u) with 0700: refused",
                           root, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                           (unsigned)geteuid());
    if (rc == 0) rc = check_contents(fd, root, &is_tier);
    close(fd);
    close(parent);
    /* What a previous holder left is not trusted (the agent restarted);
     * ROOT itself stays, so there is no moment without it. */
    if (rc == 0 && is_tier) rc = ckpt__mem_tree_remove(root, TREE_DEPTH, true);
    return rc;
}

static int make_dir(const char *root, const char *sub)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", root, sub);
    if (mkdir(path, 0700) != 0) return ckpt__fail_errno(errno, "create", path);
    return 0;
}

int ckpt__mem_tier_create(const char *root, uint64_t limit, unsigned steps)
{
    if (root == NULL || *root == '\0' || strlen(root) > 3800)
        return elastic__fail(ELASTIC_EINVAL, "memory tier: bad directory");
    if (limit == 0) return elastic__fail(ELASTIC_EINVAL, "memory tier: the limit must be > 0");
    if (steps < 2 || steps > CKPT_MEM_STEPS_MAX)
        return elastic__fail(ELASTIC_EINVAL, "memory tier: steps kept must be 2..%u",
                             CKPT_MEM_STEPS_MAX);
    int rc = prepare_root(root);
    if (rc == 0) rc = make_dir(root, CKPT_MEM_OWN_DIR);
    if (rc == 0) rc = make_dir(root, CKPT_MEM_PEER_DIR);
    char text[MARKER_MAX];
    int len = snprintf(text, sizeof text, "elastic-memory-tier 1\nlimit %" PRIu64 "\nsteps %u\n",
                       limit, steps);
    if (rc == 0)
        rc = ckpt__write_file_atomic(root, CKPT_MEM_MARKER, "mem", text, (size_t)len, false, 0600);
    return rc;
}

/* "elastic-memory-tier 1\nlimit N\nsteps K\n", nothing else. */
int ckpt__mem_marker_parse(const char *path, const char *text, ckpt_mem_tier *tier)
{
    char limit_text[32], steps_text[16];
    int used = 0;
    if (sscanf(text, "elastic-memory-tier 1\nlimit %31[0-9]\nsteps %15[0-9]\n%n", limit_text,
               steps_text, &used) != 2 ||
        text[used] != '\0')
        return elastic__fail(ELASTIC_ECORRUPT, "%s: not a memory tier marker", path);
    uint64_t limit, steps;
    if (elastic__parse_u64("memory tier limit", limit_text, 1, UINT64_MAX, &limit) != 0 ||
        elastic__parse_u64("memory tier steps", steps_text, 2, CKPT_MEM_STEPS_MAX, &steps) != 0)
        return ckpt__fail_in(ELASTIC_ECORRUPT, path);
    tier->limit = limit;
    tier->steps = (unsigned)steps;
    return 0;
}

int ckpt__mem_tier_open(const char *root, ckpt_mem_tier *tier)
{
    memset(tier, 0, sizeof *tier);
    tier->lock_fd = -1;
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/" CKPT_MEM_MARKER, root) >= sizeof path)
        return elastic__fail(ELASTIC_EINVAL, "memory tier: path too long");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) return elastic__fail(ELASTIC_ENOTFOUND, "%s: no memory tier", root);
        return ckpt__fail_errno(errno, "open", path);
    }
    char text[MARKER_MAX + 1];
    ssize_t n = pread(fd, text, MARKER_MAX, 0);
    int rc = n < 0 ? ckpt__fail_errno(errno, "read", path) : 0;
    if (rc == 0) {
        text[n] = '\0';
        rc = ckpt__mem_marker_parse(path, text, tier);
    }
    if (rc == 0 && (tier->root = elastic__strdup(root)) == NULL)
        rc = elastic__fail(ELASTIC_ENOMEM, "memory tier");
    if (rc != 0) {
        close(fd);
        return rc;
    }
    tier->lock_fd = fd;
    return 0;
}

void ckpt__mem_tier_close(ckpt_mem_tier *tier)
{
    if (tier->lock_fd >= 0) close(tier->lock_fd);
    free(tier->root);
    memset(tier, 0, sizeof *tier);
    tier->lock_fd = -1;
}

static _Atomic uint64_t walks; /* whole-tree walks by this process (tests read it) */

static uint64_t usage_below(const char *path, int depth)
{
    DIR *d = elastic__opendir(path);
    if (d == NULL) return 0;
    uint64_t total = 0;
    char child[PATH_MAX];
    while (next_child(d, path, child, sizeof child)) {
        struct stat st;
        if (lstat(child, &st) != 0) continue; /* removed meanwhile */
        /* The count's own page is the bound's bookkeeping, not a holding. */
        if (depth == TREE_DEPTH && strcmp(strrchr(child, '/') + 1, CKPT_MEM_COUNT) == 0) continue;
        if (S_ISREG(st.st_mode))
            total += (uint64_t)st.st_blocks * 512u;
        else if (S_ISDIR(st.st_mode) && depth > 1)
            total += usage_below(child, depth - 1);
    }
    closedir(d);
    return total;
}

uint64_t ckpt__mem_usage(const char *root)
{
    walks++;
    return usage_below(root, TREE_DEPTH);
}

uint64_t ckpt__mem_walks(void)
{
    return walks;
}

/* ---- the running count (memtier.h, "Counted, not walked") ---------------------- */

#define COUNT_MAGIC "elmc0001"
#define COUNT_LEN   16u /* the magic, then the count, little-endian */

static int count_open(const char *root)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/" CKPT_MEM_COUNT, root) >= sizeof path) return -1;
    return open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* The count, false when there is none (a new tier) or it is not one. */
static bool count_read(int fd, uint64_t *held)
{
    uint8_t raw[COUNT_LEN];
    if (fd < 0 || pread(fd, raw, COUNT_LEN, 0) != (ssize_t)COUNT_LEN ||
        memcmp(raw, COUNT_MAGIC, 8) != 0)
        return false;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | raw[8 + i];
    *held = v;
    return true;
}

/* A count that cannot be written is dropped: the next reservation walks. */
static void count_write(int fd, uint64_t held)
{
    if (fd < 0) return;
    uint8_t raw[COUNT_LEN];
    memcpy(raw, COUNT_MAGIC, 8);
    for (int i = 0; i < 8; i++) raw[8 + i] = (uint8_t)(held >> (8 * i));
    if (pwrite(fd, raw, COUNT_LEN, 0) != (ssize_t)COUNT_LEN && ftruncate(fd, 0) != 0) {
        /* neither: the count is past repair; a torn one fails its magic */
    }
}

/* What a reservation of `need` new bytes may add to the tree's blocks:
 * fallocate works in pages, so up to one more at each end of the range. */
static uint64_t charge_for(uint64_t need)
{
    long page = sysconf(_SC_PAGESIZE);
    uint64_t p = page > 0 ? (uint64_t)page : 4096u;
    if (need == 0) return 0;
    uint64_t up = need + 2 * p;
    return up < need ? UINT64_MAX : up;
}

int ckpt__mem_reserve(const ckpt_mem_tier *tier, int fd, uint64_t from, uint64_t len,
                      const char *what)
{
    if (len == 0) return 0;
    /* One reservation at a time in the whole tree (every process that
     * writes into it): the count and the allocation go together. */
    while (flock(tier->lock_fd, LOCK_EX) != 0)
        if (errno != EINTR) return ckpt__fail_errno(errno, "lock", tier->root);
    /* What the file already has allocated in the range (a reused file) is
     * held already: only the rest is new. Files here are allocated from
     * offset 0 up (written or reserved in order), so the blocks past `from`
     * are the ones in the range. */
    struct stat st;
    uint64_t allocated = fstat(fd, &st) == 0 ? (uint64_t)st.st_blocks * 512u : 0;
    uint64_t inside = allocated > from ? allocated - from : 0;
    uint64_t need = len > inside ? len - inside : 0;
    uint64_t charge = charge_for(need);
    /* The running count is never below what reservations added since the
     * last walk (every one adds its charge here, under this lock), so a
     * reservation that fits the count fits the tree. One that does not fit
     * walks first: files removed since then are given back, and only a
     * walked total ever refuses. */
    int count_fd = count_open(tier->root);
    uint64_t held = 0;
    bool known = count_read(count_fd, &held);
    if (!known || held > tier->limit || charge > tier->limit - held)
        held = ckpt__mem_usage(tier->root), known = false;
    /* need 0: every page of the range is there already (a recycled file):
     * no fallocate, which would still visit each of them (measured 16-32 ms
     * for 256 MiB here, in a push's critical path before its "go"; a fresh
     * 256 MiB costs 0.10-0.17 s, the pages' allocation, paid either here or
     * on the first write). */
    int rc = 0;
    if (held > tier->limit || need > tier->limit - held) {
        rc = elastic__fail(ELASTIC_ENOSPC,
                           "memory checkpoint tier full (--memory-ckpt-limit %" PRIu64
                           " bytes, %" PRIu64 " held): %s needs %" PRIu64 " more bytes (tier %s)",
                           tier->limit, held, what, need, tier->root);
    } else if (need > 0 && fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)len) != 0) {
        /* A file system without fallocate still gets the count, racily. */
        if (errno != EOPNOTSUPP) rc = ckpt__fail_errno(errno, "reserve memory in", tier->root);
    }
    if (rc == 0)
        count_write(count_fd, charge > UINT64_MAX - held ? UINT64_MAX : held + charge);
    else if (!known)
        count_write(count_fd, held); /* the walk's total: the next one starts from it */
    if (count_fd >= 0) close(count_fd);
    flock(tier->lock_fd, LOCK_UN);
    return rc;
}

void ckpt__mem_release_tail(int fd, uint64_t size, uint64_t reserved_end)
{
    if (reserved_end > size)
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)size,
                  (off_t)(reserved_end - size));
}

/* The directory's parent, then grandparent: ROOT/own, ROOT/peer/<node>. */
int ckpt__mem_attach(elastic_ckpt *c)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", c->dir);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(path, '/');
        while (slash != NULL && slash > path && slash[1] == '\0') { /* trailing slashes */
            *slash = '\0';
            slash = strrchr(path, '/');
        }
        if (slash == NULL) {
            if (up > 0 || strcmp(path, ".") == 0) return 0;
            snprintf(path, sizeof path, "."); /* a relative name: its parent is "." */
        } else if (slash == path) {
            path[1] = '\0';
        } else {
            *slash = '\0';
        }
        int rc = ckpt__mem_tier_open(path, &c->mem);
        if (rc == ELASTIC_ENOTFOUND) continue;
        if (rc != 0) return rc;
        /* tmpfs has nothing to flush; K steps kept: the one being written
         * and K-1 committed ones. */
        c->opts.fsync = ELASTIC_CKPT_FSYNC_NONE;
        if (c->opts.keep_last == 0) c->opts.keep_last = c->mem.steps - 1;
        return 0;
    }
    return 0;
}

static void spare_name(const char *dir, uint32_t rank, char *out, size_t cap)
{
    snprintf(out, cap, "%s/.spare-%" PRIu32, dir, rank);
}

void ckpt__mem_keep_spares(const char *dir, const char *step_dir)
{
    char path[PATH_MAX + 300], spare[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
    unlink(path); /* first, as ckpt__remove_step_dir does: never a committed step missing shards */
    DIR *d = elastic__opendir(step_dir);
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint32_t rank;
        uint64_t gen;
        if (!ckpt__parse_shard_name(e->d_name, &rank, &gen)) continue;
        snprintf(path, sizeof path, "%s/%s", step_dir, e->d_name);
        spare_name(dir, rank, spare, sizeof spare);
        rename(path, spare); /* replaces an older spare; failing, the file goes with its step */
    }
    closedir(d);
}

bool ckpt__mem_take_spare(const char *dir, uint32_t rank, const char *path)
{
    char spare[PATH_MAX + 32];
    spare_name(dir, rank, spare, sizeof spare);
    return rename(spare, path) == 0;
}

/* ---- the keep file ------------------------------------------------------------ */

int ckpt__mem_keep_write(const char *root, const uint64_t *steps, size_t n)
{
    char text[CKPT_MEM_KEEP_MAX * 24 + 1];
    size_t len = 0;
    for (size_t i = 0; i < n && i < CKPT_MEM_KEEP_MAX; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%" PRIu64 "\n", steps[i]);
    return ckpt__write_file_atomic(root, CKPT_MEM_KEEP, "keep", text, len, false, 0600);
}

size_t ckpt__mem_keep_parse(const uint8_t *raw, size_t len, uint64_t *steps)
{
    size_t n = 0;
    for (size_t at = 0; at < len && n < CKPT_MEM_KEEP_MAX;) {
        const uint8_t *nl = memchr(raw + at, '\n', len - at);
        if (nl == NULL) break;
        size_t line = (size_t)(nl - (raw + at));
        if (elastic__parse_u64_n(NULL, (const char *)raw + at, line, 0, UINT64_MAX - 1,
                                 &steps[n]) != 0)
            return 0; /* not ours: keep nothing extra rather than something wrong */
        n++;
        at += line + 1;
    }
    return n;
}

size_t ckpt__mem_keep_read(const char *root, uint64_t *steps)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/" CKPT_MEM_KEEP, root) >= sizeof path) return 0;
    uint8_t *raw = NULL;
    size_t len = 0;
    if (ckpt__read_small_file(path, CKPT_MEM_KEEP_MAX * 24, &raw, &len) != 0) {
        elastic__clear_error(); /* no file: nothing kept beyond K */
        return 0;
    }
    size_t n = ckpt__mem_keep_parse(raw, len, steps);
    free(raw);
    return n;
}

bool ckpt__mem_keep_has(const uint64_t *steps, size_t n, uint64_t step)
{
    for (size_t i = 0; i < n; i++)
        if (steps[i] == step) return true;
    return false;
}
