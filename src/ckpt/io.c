/*
 * File-system helpers of the checkpoint store: names, full writes and reads,
 * fsync of files and directories, the small atomic file write used for commit
 * records, and the fault-injection hook the tests use for EIO/ENOSPC (built
 * only with ELASTIC_TEST_HOOKS: the library that ships has no such hook).
 */
#include "common/dir.h"
#include "ckpt/ckpt.h"
#include "common/parse_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef ELASTIC_TEST_HOOKS
static atomic_int fault_countdown[2];
static atomic_int fault_errno[2];

void ckpt__inject_fault(ckpt_fault_op op, int countdown, int err)
{
    atomic_store(&fault_errno[op], err);
    atomic_store(&fault_countdown[op], countdown);
}

/* True (errno set) when an injected fault fires for this call. */
static bool fault_fires(ckpt_fault_op op)
{
    int left = atomic_load(&fault_countdown[op]);
    while (left > 0) {
        if (atomic_compare_exchange_weak(&fault_countdown[op], &left, left - 1)) {
            if (left != 1) return false;
            errno = atomic_load(&fault_errno[op]);
            return true;
        }
    }
    return false;
}
#else
static inline bool fault_fires(ckpt_fault_op op)
{
    (void)op;
    return false;
}
#endif

void *ckpt__alloc_large(size_t len)
{
    enum { HUGE_PAGE = 2u << 20 };
    if (len < 2 * HUGE_PAGE) return malloc(len ? len : 1);
    /* Huge pages: a 1 GiB blob faults in 512 times instead of 262144. The
     * memory is still freed with free() (elastic_free). */
    size_t rounded = (len + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
    void *p = aligned_alloc(HUGE_PAGE, rounded);
    if (p != NULL) madvise(p, rounded, MADV_HUGEPAGE);
    return p;
}

void ckpt__step_dir(const char *dir, uint64_t step, char *out, size_t cap)
{
    snprintf(out, cap, "%s/step-%020" PRIu64, dir, step);
}

void ckpt__shard_name(uint32_t rank, uint64_t generation, char *out, size_t cap)
{
    snprintf(out, cap, "shard-%05" PRIu32 "-g%" PRIu64 ".elck", rank, generation);
}

bool ckpt__parse_step_dir(const char *name, uint64_t *step)
{
    /* Exactly 20 digits, as ckpt__step_dir writes them. */
    if (strncmp(name, "step-", 5) != 0 || strlen(name) != 25) return false;
    return elastic__parse_u64(NULL, name + 5, 0, UINT64_MAX, step) == 0;
}

int ckpt__fail_errno(int err, const char *what, const char *path)
{
    return elastic__fail(elastic__from_errno(err), "%s %s: %s", what, path, strerror(err));
}

int ckpt__fail_in(int rc, const char *path)
{
    char detail[512];
    snprintf(detail, sizeof detail, "%s",
             elastic_last_error()); /* the detail buffer is rewritten below */
    if (strstr(detail, path) != NULL) return elastic__fail(rc, "%s", detail);
    return elastic__fail(rc, "%s: %s", path, detail);
}

int ckpt__write_all(int fd, const void *data, size_t len, const char *path)
{
    const uint8_t *p = data;
    while (len > 0) {
        if (fault_fires(CKPT_FAULT_WRITE)) return ckpt__fail_errno(errno, "write", path);
        ssize_t n = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return ckpt__fail_errno(errno, "write", path);
        if (n == 0) return ckpt__fail_errno(ENOSPC, "write", path);
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int ckpt__pread_all(int fd, void *buf, size_t len, uint64_t offset, const char *path)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len > (1u << 30) ? (1u << 30) : len, (off_t)offset);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return ckpt__fail_errno(errno, "read", path);
        if (n == 0) return elastic__fail(ELASTIC_ECORRUPT, "read %s: file ends early", path);
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

int ckpt__fsync_fd(int fd, const char *path)
{
    if (fault_fires(CKPT_FAULT_FSYNC) || fsync(fd) != 0)
        return ckpt__fail_errno(errno, "fsync", path);
    return 0;
}

int ckpt__fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ckpt__fail_errno(errno, "open directory", path);
    int rc = ckpt__fsync_fd(fd, path);
    close(fd);
    return rc;
}

int ckpt__fsync_parent(const char *path)
{
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", path);
    size_t len = strlen(parent);
    while (len > 1 && parent[len - 1] == '/') parent[--len] = '\0'; /* "a/b/" names "a/b" */
    char *slash = strrchr(parent, '/');
    if (slash == NULL)
        snprintf(parent, sizeof parent, ".");
    else if (slash == parent)
        parent[1] = '\0'; /* "/a": the root */
    else
        *slash = '\0';
    return ckpt__fsync_dir(parent);
}

int ckpt__write_file_atomic(const char *dir, const char *name, const char *tmp_tag,
                            const void *data, size_t len, bool durable, unsigned mode)
{
    char tmp[4096], final[4096];
    snprintf(tmp, sizeof tmp, "%s/" CKPT_TMP_PREFIX "%s-%s.%ld", dir, name, tmp_tag,
             (long)getpid());
    snprintf(final, sizeof final, "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) return ckpt__fail_errno(errno, "create", tmp);
    int rc = ckpt__write_all(fd, data, len, tmp);
    if (rc == 0 && durable) rc = ckpt__fsync_fd(fd, tmp);
    if (close(fd) != 0 && rc == 0) rc = ckpt__fail_errno(errno, "close", tmp);
    if (rc == 0 && rename(tmp, final) != 0) rc = ckpt__fail_errno(errno, "rename", tmp);
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    return durable ? ckpt__fsync_dir(dir) : 0;
}

int ckpt__read_small_file(const char *path, size_t max, uint8_t **data, size_t *len)
{
    *data = NULL; /* callers free it on every path */
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ckpt__fail_errno(errno, "open", path);
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = ckpt__fail_errno(errno, "stat", path);
    else if ((uint64_t)st.st_size > max)
        rc = elastic__fail(ELASTIC_ECORRUPT, "%s: %lld bytes, more than %zu", path,
                           (long long)st.st_size, max);
    uint8_t *buf = NULL;
    if (rc == 0 && (buf = malloc((size_t)st.st_size + 1)) == NULL)
        rc = elastic__fail(ELASTIC_ENOMEM, "reading %s", path);
    if (rc == 0) rc = ckpt__pread_all(fd, buf, (size_t)st.st_size, 0, path);
    close(fd);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *data = buf;
    *len = (size_t)st.st_size;
    return 0;
}

int ckpt__read_commit_record(const char *step_dir, ckpt_commit_record *r)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
    uint8_t *raw = NULL;
    size_t len = 0;
    int rc = ckpt__read_small_file(path, CKPT_MAX_COMMIT_RECORD, &raw, &len);
    if (rc == 0) rc = ckpt__commit_decode(raw, len, r);
    free(raw);
    return rc == ELASTIC_ECORRUPT ? ckpt__fail_in(rc, path) : rc;
}

int ckpt__remove_step_dir(const char *path)
{
    DIR *d = elastic__opendir(path);
    if (d == NULL) return errno == ENOENT ? 0 : ckpt__fail_errno(errno, "open directory", path);
    /* The commit record goes first, so a crash half way leaves an
     * uncommitted (ignored) step, never a committed one missing shards. */
    char entry_path[4096];
    snprintf(entry_path, sizeof entry_path, "%s/" CKPT_COMMIT_NAME, path);
    int rc = 0;
    if (unlink(entry_path) != 0 && errno != ENOENT)
        rc = ckpt__fail_errno(errno, "remove", entry_path);
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(entry_path, sizeof entry_path, "%s/%s", path, e->d_name);
        if (unlink(entry_path) != 0 && errno != ENOENT)
            rc = ckpt__fail_errno(errno, "remove", entry_path);
    }
    closedir(d);
    if (rc == 0 && rmdir(path) != 0 && errno != ENOENT)
        rc = ckpt__fail_errno(errno, "remove", path);
    return rc;
}

/* "shard-<rank>-g<generation>.elck" */
bool ckpt__parse_shard_name(const char *name, uint32_t *rank, uint64_t *generation)
{
    uint64_t r, g;
    size_t len = strlen(name);
    if (strncmp(name, "shard-", 6) != 0 || len < 15 || strcmp(name + len - 5, ".elck") != 0)
        return false;
    const char *p = name + 6, *dash = strstr(p, "-g");
    if (dash == NULL || dash + 2 > name + len - 5) return false;
    if (elastic__parse_u64_n(NULL, p, (size_t)(dash - p), 0, CKPT_MAX_WORLD - 1, &r) != 0 ||
        elastic__parse_u64_n(NULL, dash + 2, (size_t)(name + len - 5 - dash - 2), 0, UINT64_MAX,
                             &g) != 0)
        return false;
    *rank = (uint32_t)r;
    *generation = g;
    return true;
}
