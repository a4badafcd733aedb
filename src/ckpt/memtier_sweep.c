/*
 * Tiers left behind (memtier.h, ckpt__mem_sweep_leaked): when an agent and
 * its reaper die together (a cgroup kill, the OOM killer, Slurm's
 * freeze-then-kill) nobody removes the tier, and tmpfs keeps it until
 * reboot. The owner file says whether anyone still holds a tier: the agent's
 * service keeps an exclusive flock on it for its whole life (its reaper
 * inherits the descriptor), and the kernel drops the lock when the last of
 * them dies, in whatever PID namespace they ran. A tier whose owner file
 * takes the lock is nobody's: it is removed by descriptor, with the same
 * checks as any removal (memtier_tree.c). A tier without an owner file (in
 * its creation, or from an older version) is left alone.
 */
#include "ckpt/memtier.h"

#include "ckpt/ckpt.h"
#include "common/tsan_fd.h"
#include "common/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int ckpt__mem_tier_hold(const char *root, int *fd)
{
    char path[PATH_MAX], tmp[PATH_MAX + 16];
    if ((size_t)snprintf(path, sizeof path, "%s/" CKPT_MEM_OWNER, root) >= sizeof path)
        return elastic__fail(ELASTIC_EINVAL, "memory tier: path too long");
    snprintf(tmp, sizeof tmp, "%s.new", path);
    /* Locked before it takes its name: a sweep never finds the owner file
     * of a tier in its creation unlocked. */
    unlink(tmp);
    *fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (*fd < 0) return ckpt__fail_errno(errno, "create", tmp);
    int rc = 0;
    if (flock(*fd, LOCK_EX | LOCK_NB) != 0)
        rc = ckpt__fail_errno(errno, "lock", tmp);
    else if (rename(tmp, path) != 0)
        rc = ckpt__fail_errno(errno, "rename", tmp);
    if (rc != 0) {
        close(*fd);
        *fd = -1;
        unlink(tmp);
    }
    return rc;
}

/* Whether dir/name is a tier of this user that nobody holds. */
static bool leaked(int dir_fd, const char *name)
{
    int fd = elastic__openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    bool mine = fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700;
    int owner = mine ? elastic__openat(fd, CKPT_MEM_OWNER, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    close(fd);
    if (owner < 0) return false;
    struct stat ost;
    bool free_lock = fstat(owner, &ost) == 0 && S_ISREG(ost.st_mode) && ost.st_uid == geteuid() &&
                     flock(owner, LOCK_EX | LOCK_NB) == 0;
    close(owner); /* the lock goes with it: removal needs none (nobody holds the tier) */
    return free_lock;
}

size_t ckpt__mem_sweep_leaked(const char *dir)
{
    int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dir_fd >= 0 ? fdopendir(dir_fd) : NULL;
    if (d == NULL) {
        if (dir_fd >= 0) close(dir_fd);
        return 0;
    }
    size_t removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, CKPT_MEM_TIER_PREFIX, strlen(CKPT_MEM_TIER_PREFIX)) != 0) continue;
        if (!leaked(dir_fd, e->d_name)) continue;
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path) continue;
        if (ckpt__mem_tier_remove(path) == 0) {
            removed++;
            ELASTIC_LOG_I("ckpt", "removed %s, a memory tier nobody holds any more", path);
        } else {
            ELASTIC_LOG_W("ckpt", "cannot remove the leaked memory tier %s: %s", path,
                          elastic_last_error());
        }
    }
    closedir(d);
    return removed;
}
