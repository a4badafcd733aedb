/*
 * A worker's disk checkpoint tier, announced to its agent (channel.h, "the
 * trainer's disk tier"): the agents' restore planner otherwise sees only
 * memory and the agent's own --memory-disk-dir, and could plan a memory
 * step older than a step the trainer committed on disk.
 */
#include "ckpt/ckpt.h"

#include "channel/channel.h"
#include "common/parse_int.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int ckpt__announce_disk_to(const char *tier_root, uint32_t local_rank, const char *dir, bool shared)
{
    char abs[PATH_MAX];
    if (realpath(dir, abs) == NULL) return ckpt__fail_errno(errno, "resolve", dir);
    if (strchr(abs, '\n') != NULL)
        return elastic__fail(ELASTIC_EINVAL, "checkpoint directory name holds a newline");
    char path[PATH_MAX + 64], tmp[PATH_MAX + 80], line[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/" CHANNEL__DISK_ANNOUNCE_PREFIX "%" PRIu32, tier_root,
             local_rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int len = snprintf(line, sizeof line, "%s %s\n", shared ? "shared" : "local", abs);
    if (len < 0 || (size_t)len >= sizeof line || (size_t)len > CHANNEL__DISK_ANNOUNCE_MAX)
        return elastic__fail(ELASTIC_EINVAL, "checkpoint directory name too long");
    /* Written whole and renamed: the agent never reads half a line. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return ckpt__fail_errno(errno, "create", tmp);
    ssize_t put = write(fd, line, (size_t)len);
    int rc = put == len ? 0 : ckpt__fail_errno(put < 0 ? errno : EIO, "write", tmp);
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0) rc = ckpt__fail_errno(errno, "rename", tmp);
    if (rc) unlink(tmp);
    return rc;
}

void ckpt__announce_disk(const elastic_ckpt *c)
{
    const char *own = getenv(CHANNEL__ENV_MEMORY_CKPT_DIR), *local = getenv("LOCAL_RANK");
    uint64_t local_rank;
    if (own == NULL || *own == '\0' || local == NULL || c->mem.root != NULL ||
        elastic__parse_u64(NULL, local, 0, CHANNEL__HB_MAX_SLOTS - 1, &local_rank) != 0)
        return; /* not a worker of an agent with a memory tier, or the tier itself */
    char root[PATH_MAX];
    snprintf(root, sizeof root, "%s", own);
    char *slash = strrchr(root, '/');
    if (slash == NULL || slash == root) return;
    *slash = '\0';
    bool shared = c->opts.store == NULL || c->opts.shared_storage;
    /* Best effort: without it the plan weighs memory only, as before. */
    if (ckpt__announce_disk_to(root, (uint32_t)local_rank, c->dir, shared) != 0)
        ELASTIC_LOG_W("ckpt", "telling the agent about %s: %s", c->dir, elastic_last_error());
}
