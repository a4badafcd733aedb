/*
 * Writing a memory-tier shard to the disk tier: the file is already a
 * complete shard in the common format, so it is copied as it is by the
 * atomic path (temporary name, fsync, rename, directory fsync) and then
 * takes part in the global commit as if this rank had just written it. The
 * agent runs this in the background for every Nth memory step, from the
 * memory copy: training does not wait for the disk.
 */
#include "ckpt/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_PIECE (8u << 20)

static int copy_bytes(int from, int to, uint64_t len, const char *from_path, const char *to_path)
{
    uint64_t done = 0;
    /* In-kernel copy first; a plain read/write loop where it is not offered
     * (across file systems on old kernels). */
    while (done < len) {
        ssize_t n = copy_file_range(from, NULL, to, NULL, len - done, 0);
        if (n > 0) {
            done += (uint64_t)n;
            continue;
        }
        if (n == 0) return elastic__fail(ELASTIC_EIO, "%s: shorter than it was", from_path);
        if (errno == EINTR) continue;
        if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
            return ckpt__fail_errno(errno, "copy to", to_path);
        break;
    }
    if (done == len) return 0;
    uint8_t *buf = malloc(COPY_PIECE);
    if (buf == NULL) return elastic__fail(ELASTIC_ENOMEM, "copy buffer");
    int rc = 0;
    while (rc == 0 && done < len) {
        size_t piece = len - done < COPY_PIECE ? (size_t)(len - done) : COPY_PIECE;
        rc = ckpt__pread_all(from, buf, piece, done, from_path);
        if (rc == 0) rc = ckpt__write_all(to, buf, piece, to_path);
        done += piece;
    }
    free(buf);
    return rc;
}

static int check_identity(int fd, const char *path, const elastic_ckpt_opts *o, uint64_t step)
{
    uint8_t raw[CKPT_HEADER_BYTES];
    ckpt_header h;
    int rc = ckpt__pread_all(fd, raw, sizeof raw, 0, path);
    if (rc == 0) rc = ckpt__header_decode(raw, sizeof raw, &h);
    if (rc) return ckpt__fail_in(rc, path);
    if (h.step != step || h.rank != o->rank || h.world != o->world || h.generation != o->generation)
        return elastic__fail(ELASTIC_EINVAL,
                             "%s: shard of step %" PRIu64 " rank %" PRIu32 "/%" PRIu32
                             " generation %" PRIu64 ", not this handle's",
                             path, h.step, h.rank, h.world, h.generation);
    return 0;
}

int ckpt__adopt_shard(elastic_ckpt *c, uint64_t step, const char *shard_path)
{
    elastic__clear_error();
    if (!ckpt__txn_try_claim(c))
        return elastic__fail(ELASTIC_EBUSY, "a checkpoint transaction or save is in progress");
    const elastic_ckpt_opts *o = &c->opts;
    char step_dir[PATH_MAX], shard[96], tmp[PATH_MAX + 256], final_path[PATH_MAX + 128];
    int from = open(shard_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), to = -1;
    int rc = from >= 0 ? 0 : ckpt__fail_errno(errno, "open", shard_path);
    struct stat st;
    if (rc == 0 && fstat(from, &st) != 0) rc = ckpt__fail_errno(errno, "stat", shard_path);
    if (rc == 0) rc = check_identity(from, shard_path, o, step);
    if (rc == 0) rc = ckpt__fence_check(c, step);
    ckpt__step_dir(c->dir, step, step_dir, sizeof step_dir);
    ckpt__shard_name(o->rank, o->generation, shard, sizeof shard);
    snprintf(final_path, sizeof final_path, "%s/%s", step_dir, shard);
    snprintf(tmp, sizeof tmp, "%s/" CKPT_TMP_PREFIX "%s.%ld.%u", step_dir, shard, (long)getpid(),
             c->tmp_counter++);
    if (rc == 0 && mkdir(step_dir, ckpt__dir_mode(o)) != 0 && errno != EEXIST)
        rc = ckpt__fail_errno(errno, "create", step_dir);
    if (rc == 0 &&
        (to = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, o->file_mode)) < 0)
        rc = ckpt__fail_errno(errno, "create", tmp);
    bool durable = o->fsync == ELASTIC_CKPT_FSYNC_FULL;
    if (rc == 0) rc = copy_bytes(from, to, (uint64_t)st.st_size, shard_path, tmp);
    if (rc == 0 && durable) rc = ckpt__fsync_fd(to, tmp);
    if (to >= 0 && close(to) != 0 && rc == 0) rc = ckpt__fail_errno(errno, "close", tmp);
    if (from >= 0) close(from);
    if (rc == 0 && rename(tmp, final_path) != 0) rc = ckpt__fail_errno(errno, "rename", tmp);
    if (rc != 0) unlink(tmp);
    if (rc == 0 && durable) rc = ckpt__fsync_dir(step_dir);
    ckpt_shard_digest digest;
    if (rc == 0) rc = ckpt__shard_digest(final_path, &digest, NULL, NULL);
    if (rc == 0) rc = ckpt__global_commit(c, step, &digest, NULL); /* compared when it was saved */
    ckpt__txn_release(c);
    return rc;
}
