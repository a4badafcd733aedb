/*
 * Files and directories the agent creates (log tree, error files, event
 * log): opened relative to directory descriptors it holds, never through a
 * symbolic link, private (0700 directories, 0600 files), and only inside
 * directories this user owns and nobody else may write.
 */
#include "agent/agent.h"
#include "common/tsan_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* A directory we may fill: ours, and no one else can add or swap entries. */
static int check_dir(int fd, const char *name)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return elastic__fail(elastic__from_errno(errno), "%s: %s", name, strerror(errno));
    if (st.st_uid != geteuid())
        return elastic__fail(ELASTIC_EPERM,
                             "directory %s belongs to uid %u, not to us: refusing to write in it",
                             name, (unsigned)st.st_uid);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return elastic__fail(
            ELASTIC_EPERM,
            "directory %s is writable by others (mode %03o): refusing to write in it", name,
            (unsigned)(st.st_mode & 0777));
    return 0;
}

int agent__dir_private(int parent, const char *name, int *out)
{
    *out = -1;
    if (strchr(name, '/') != NULL || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
        name[0] == '\0')
        return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not a plain directory name", name);
    if (mkdirat(parent, name, 0700) != 0 && errno != EEXIST)
        return elastic__fail(elastic__from_errno(errno), "mkdir %s: %s", name, strerror(errno));
    int fd = elastic__openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int saved = errno;
        return elastic__fail(elastic__from_errno(saved), "%s: %s", name,
                             saved == ELOOP || saved == ENOTDIR
                                 ? "not a directory (a symbolic link?)"
                                 : strerror(saved));
    }
    int rc = check_dir(fd, name);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

/* The open file must be a plain file (not a FIFO or device planted there). */
static int check_file(int fd, const char *name)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return elastic__fail(ELASTIC_EPERM, "%s is not a regular file", name);
    }
    return fd;
}

int agent__file_private(int dir, const char *name, int flags)
{
    int fd =
        elastic__tsan_fd_made(openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
    if (fd < 0) {
        int saved = errno;
        return elastic__fail(elastic__from_errno(saved), "%s: %s", name,
                             saved == ELOOP ? "a symbolic link: not followed" : strerror(saved));
    }
    fd = check_file(fd, name);
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int agent__dir_open_user(const char *path, int *out)
{
    *out = -1;
    char copy[4096];
    if ((size_t)snprintf(copy, sizeof copy, "%s", path) >= sizeof copy)
        return elastic__fail(ELASTIC_EINVAL, "directory path too long: %s", path);
    /* The user named this path: its components are followed as given, and
     * the ones missing are created private. */
    for (char *slash = strchr(copy + 1, '/');; slash = strchr(slash + 1, '/')) {
        if (slash != NULL) *slash = '\0';
        int rc = mkdir(copy, 0700);
        int saved = errno;
        if (slash != NULL) *slash = '/';
        if (rc != 0 && saved != EEXIST)
            return elastic__fail(elastic__from_errno(saved), "mkdir %s: %s", copy, strerror(saved));
        if (slash == NULL) break;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return elastic__fail(elastic__from_errno(errno), "%s: %s", path, strerror(errno));
    *out = fd;
    return 0;
}

int agent__file_private_path(const char *path, int flags)
{
    return agent__file_private(AT_FDCWD, path, flags);
}
