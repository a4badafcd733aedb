/*
 * The sending side of the replica channel: pushing a committed step's shards
 * (then its commit record) to a peer, and fetching one file back.
 */
#include "common/dir.h"
#include "replica/wire.h"

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

int replica__push_file(replica_conn *c, const replica_file_id *id, const char *path,
                       uint64_t deadline_ms)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return ckpt__fail_errno(errno, "open", path);
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? 0 : ckpt__fail_errno(errno, "stat", path);
    replica_request req = { .op = REPLICA_OP_PUT, .id = *id, .length = (uint64_t)st.st_size };
    int status = 0;
    uint64_t ignored;
    if (rc == 0) rc = replica__send_request(c, &req, deadline_ms);
    if (rc == 0) rc = replica__recv_answer(c, &status, &ignored, deadline_ms);
    if (rc == 0 && status == 0) rc = c->ops->send_file(c, fd, 0, req.length, deadline_ms);
    if (rc == 0 && status == 0) rc = replica__recv_answer(c, &status, &ignored, deadline_ms);
    close(fd);
    return rc ? rc : status;
}

int replica__push_step(replica_conn *c, const char *origin, const char *dir, uint64_t step,
                       uint64_t *bytes, uint64_t deadline_ms)
{
    *bytes = 0;
    char step_dir[PATH_MAX], path[PATH_MAX + 300];
    ckpt__step_dir(dir, step, step_dir, sizeof step_dir);
    /* The record says which shards belong to the step (generation, world). */
    ckpt_commit_record record;
    int rc = ckpt__read_commit_record(step_dir, &record);
    if (rc) {
        char why[300]; /* copied out: the detail is formatted into its own buffer otherwise */
        snprintf(why, sizeof why, "%s", elastic_last_error());
        return elastic__fail(rc, "step %" PRIu64 " is not committed here: %s", step, why);
    }
    replica_file_id id = { .step = step, .generation = record.generation, .world = record.world };
    snprintf(id.origin, sizeof id.origin, "%s", origin);
    DIR *d = elastic__opendir(step_dir);
    if (d == NULL) rc = ckpt__fail_errno(errno, "open", step_dir);
    struct dirent *e;
    size_t pushed = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        uint32_t rank;
        uint64_t gen;
        if (!ckpt__parse_shard_name(e->d_name, &rank, &gen) || gen != record.generation ||
            rank >= record.world)
            continue;
        id.rank = rank;
        id.kind = REPLICA_KIND_SHARD;
        snprintf(path, sizeof path, "%s/%s", step_dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0) *bytes += (uint64_t)st.st_size;
        rc = replica__push_file(c, &id, path, deadline_ms);
        pushed++;
    }
    if (d) closedir(d);
    if (rc == 0 && pushed == 0)
        rc = elastic__fail(ELASTIC_ENOTFOUND, "step %" PRIu64 ": no shard here", step);
    /* Last: on the peer the step is complete only once its record is there. */
    if (rc == 0) {
        id.rank = 0;
        id.kind = REPLICA_KIND_COMMIT;
        snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, step_dir);
        struct stat st;
        if (stat(path, &st) == 0) *bytes += (uint64_t)st.st_size;
        rc = replica__push_file(c, &id, path, deadline_ms);
    }
    ckpt__commit_free(&record);
    return rc;
}

int replica__fetch_file(replica_conn *c, const replica_file_id *id, const char *dest,
                        const ckpt_mem_tier *tier, uint64_t *bytes, uint64_t deadline_ms)
{
    return replica__fetch_file_checked(c, id, dest, tier, NULL, NULL, bytes, deadline_ms);
}

int replica__fetch_file_checked(replica_conn *c, const replica_file_id *id, const char *dest,
                                const ckpt_mem_tier *tier, replica_check_fn check, void *ctx,
                                uint64_t *bytes, uint64_t deadline_ms)
{
    *bytes = 0;
    replica_request req = { .op = REPLICA_OP_GET, .id = *id };
    int status = 0;
    uint64_t len = 0;
    int rc = replica__send_request(c, &req, deadline_ms);
    if (rc == 0) rc = replica__recv_answer(c, &status, &len, deadline_ms);
    if (rc) return rc;
    if (status) return status;
    if (len > replica__file_max(id))
        return elastic__fail(ELASTIC_EPROTO, "replica fetch: %" PRIu64 " bytes is too large", len);
    /* The bytes are on their way: even when there is no room for them the
     * connection is spent (the caller closes it). */
    replica_incoming in;
    rc = replica__incoming_open(dest, len, tier, NULL, &in);
    if (rc) return rc;
    rc = replica__incoming_receive(c, &in, deadline_ms);
    if (rc == 0 && check != NULL) rc = check(ctx, in.fd, in.len);
    if (rc == 0)
        rc = replica__incoming_keep(&in);
    else
        replica__incoming_drop(&in);
    if (rc == 0) *bytes = len;
    return rc;
}
