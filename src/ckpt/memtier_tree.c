/*
 * The memory tier's tree as one process removes it (memtier.h): by
 * descriptor, never by path. Every directory is opened relative to its
 * parent's descriptor with O_NOFOLLOW, checked (a directory, on the tier's
 * device, owned by this user) and emptied with unlinkat; a symlink is
 * removed as a link, never followed, so nobody who swaps one in during the
 * walk steers it anywhere else; what is not this user's stays (and so does
 * the directory holding it). The tree has a fixed shape: deeper than
 * TREE_DEPTH is not the tier's.
 */
#include "ckpt/memtier.h"

#include "ckpt/ckpt.h"
#include "common/tsan_fd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct tree_owner {
    dev_t dev;
    uid_t uid;
} tree_owner;

/* `fd` (opened O_NOFOLLOW) is a directory of the tree. */
static bool ours(int fd, const tree_owner *o, struct stat *st)
{
    return fstat(fd, st) == 0 && S_ISDIR(st->st_mode) && st->st_dev == o->dev &&
           st->st_uid == o->uid;
}

static int empty_dir(int fd, const tree_owner *o, int depth, const char *root);

/* Removes the entry `name` of the directory `parent` (and below). */
static int remove_entry(int parent, const char *name, const tree_owner *o, int depth,
                        const char *root)
{
    struct stat st;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : ckpt__fail_errno(errno, "stat in", root);
    if (st.st_uid != o->uid || st.st_dev != o->dev)
        return elastic__fail(ELASTIC_EPERM, "memory tier %s: \"%s\" is not this user's: left", root,
                             name);
    if (!S_ISDIR(st.st_mode)) { /* files, and symlinks as links */
        if (unlinkat(parent, name, 0) != 0 && errno != ENOENT)
            return ckpt__fail_errno(errno, "remove in", root);
        return 0;
    }
    if (depth == 0)
        return elastic__fail(ELASTIC_EINVAL, "memory tier %s: \"%s\" is deeper than a tier", root,
                             name);
    int fd = elastic__openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) /* swapped for a symlink or a file since: removed as such next time */
        return errno == ENOENT ? 0 : ckpt__fail_errno(errno, "open in", root);
    int rc = ours(fd, o, &st)
                 ? empty_dir(fd, o, depth - 1, root)
                 : elastic__fail(ELASTIC_EPERM, "memory tier %s: \"%s\" changed during removal",
                                 root, name);
    close(fd);
    if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        rc = ckpt__fail_errno(errno, "remove in", root);
    return rc;
}

int ckpt__mem_tree_list(int fd, const char *root, DIR **dir)
{
    int list_fd = elastic__openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *dir = list_fd >= 0 ? fdopendir(list_fd) : NULL;
    if (*dir != NULL) return 0;
    int err = errno;
    if (list_fd >= 0) close(list_fd);
    return ckpt__fail_errno(err, "list", root);
}

/* Removes every entry of the directory `fd` (which stays open: the caller's). */
static int empty_dir(int fd, const tree_owner *o, int depth, const char *root)
{
    DIR *d = NULL;
    int listed = ckpt__mem_tree_list(fd, root, &d);
    if (listed != 0) return listed;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        int one = remove_entry(fd, e->d_name, o, depth, root);
        if (rc == 0) rc = one;
    }
    closedir(d);
    return rc;
}

/* The parent of `path` opened, and the last component's name in it. */
static int open_parent(const char *path, char *name, size_t cap)
{
    char parent[PATH_MAX];
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    if (len == 0 || len >= sizeof parent) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(parent, path, len);
    parent[len] = '\0';
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : parent;
    if (strlen(base) >= cap || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        errno = EINVAL;
        return -1;
    }
    snprintf(name, cap, "%s", base);
    if (slash == parent)
        parent[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
    else
        snprintf(parent, sizeof parent, ".");
    return open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int ckpt__mem_tree_open(const char *root, int *parent_fd, char *name, size_t cap, int *fd)
{
    *fd = -1;
    *parent_fd = open_parent(root, name, cap);
    if (*parent_fd < 0) return ckpt__fail_errno(errno, "open the parent of", root);
    *fd = elastic__openat(*parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd >= 0) return 0;
    int err = errno;
    close(*parent_fd);
    *parent_fd = -1;
    if (err == ENOENT) return elastic__fail(ELASTIC_ENOTFOUND, "%s: no memory tier", root);
    return ckpt__fail_errno(err, "open", root);
}

int ckpt__mem_tree_remove(const char *root, int depth, bool keep_root)
{
    char name[NAME_MAX + 1];
    int parent = -1, fd = -1;
    int rc = ckpt__mem_tree_open(root, &parent, name, sizeof name, &fd);
    if (rc == ELASTIC_ENOTFOUND) {
        elastic__clear_error();
        return 0;
    }
    if (rc != 0) return rc;
    struct stat st;
    tree_owner o = { .uid = geteuid() };
    if (fstat(fd, &st) != 0)
        rc = ckpt__fail_errno(errno, "stat", root);
    else if (st.st_uid != o.uid)
        rc = elastic__fail(ELASTIC_EPERM,
                           "memory tier %s belongs to uid %u, not this user (%u): not removed",
                           root, (unsigned)st.st_uid, (unsigned)o.uid);
    o.dev = st.st_dev;
    if (rc == 0) rc = empty_dir(fd, &o, depth - 1, root);
    close(fd);
    if (rc == 0 && !keep_root && unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        rc = ckpt__fail_errno(errno, "remove", root);
    close(parent);
    return rc;
}
