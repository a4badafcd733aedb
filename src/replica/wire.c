/*
 * Encoding and checking the replica channel's requests and answers
 * (wire.h), and receiving a file into the memory tier.
 */
#include "replica/wire.h"

#include "common/bytes.h"
#include "common/parse_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define REQUEST_FIXED 48u
#define ANSWER_FIXED  20u

static const char request_magic[4] = { 'E', 'L', 'R', 'Q' };
static const char answer_magic[4] = { 'E', 'L', 'R', 'A' };

bool replica__node_name_ok(const char *name)
{
    size_t len = strnlen(name, REPLICA_NODE_MAX + 1);
    if (len == 0 || len > REPLICA_NODE_MAX || name[0] == '.') return false;
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        if (!ok) return false;
    }
    return true;
}

uint64_t replica__file_max(const replica_file_id *id)
{
    if (id->kind == REPLICA_KIND_COMMIT) return 32u + 16ull * id->world + 8u;
    return REPLICA_FILE_MAX;
}

void replica__file_path(const char *dir, const replica_file_id *id, char *out, size_t cap)
{
    char step_dir[PATH_MAX], name[96];
    ckpt__step_dir(dir, id->step, step_dir, sizeof step_dir);
    if (id->kind == REPLICA_KIND_COMMIT)
        snprintf(name, sizeof name, CKPT_COMMIT_NAME);
    else
        ckpt__shard_name(id->rank, id->generation, name, sizeof name);
    snprintf(out, cap, "%s/%s", step_dir, name);
}

int replica__send_request(replica_conn *c, const replica_request *r, uint64_t deadline_ms)
{
    uint8_t buf[REQUEST_FIXED + REPLICA_NODE_MAX];
    size_t origin_len = strnlen(r->id.origin, REPLICA_NODE_MAX);
    bytes__buf w = bytes__buf_over(buf, sizeof buf);
    bytes__put(&w, request_magic, 4);
    bytes__put_u32(&w, r->op);
    bytes__put_u64(&w, r->id.step);
    bytes__put_u64(&w, r->id.generation);
    bytes__put_u32(&w, r->id.rank);
    bytes__put_u32(&w, r->id.world);
    bytes__put_u32(&w, r->id.kind);
    bytes__put_u32(&w, (uint32_t)origin_len);
    bytes__put_u64(&w, r->length);
    bytes__put(&w, r->id.origin, origin_len);
    return c->ops->send(c, buf, w.len, deadline_ms);
}

static int bad(const char *why)
{
    return elastic__fail(ELASTIC_EPROTO, "replica request: %s", why);
}

int replica__recv_request(replica_conn *c, replica_request *r, uint64_t deadline_ms)
{
    memset(r, 0, sizeof *r);
    uint8_t buf[REQUEST_FIXED];
    int rc = c->ops->recv(c, buf, sizeof buf, deadline_ms);
    if (rc) return rc;
    if (memcmp(buf, request_magic, 4) != 0) return bad("bad magic");
    bytes__reader rd = bytes__reader_of(buf + 4, sizeof buf - 4);
    r->op = bytes__read_u32(&rd);
    r->id.step = bytes__read_u64(&rd);
    r->id.generation = bytes__read_u64(&rd);
    r->id.rank = bytes__read_u32(&rd);
    r->id.world = bytes__read_u32(&rd);
    r->id.kind = bytes__read_u32(&rd);
    uint32_t origin_len = bytes__read_u32(&rd);
    r->length = bytes__read_u64(&rd);
    if (r->op != REPLICA_OP_PUT && r->op != REPLICA_OP_GET) return bad("unknown operation");
    if (r->id.kind != REPLICA_KIND_SHARD && r->id.kind != REPLICA_KIND_COMMIT)
        return bad("unknown file kind");
    if (r->id.world == 0 || r->id.world > CKPT_MAX_WORLD || r->id.rank >= r->id.world)
        return bad("rank/world out of range");
    if (r->id.step == UINT64_MAX) return bad("step out of range");
    if (origin_len > REPLICA_NODE_MAX) return bad("origin name too long");
    if (origin_len > 0 && (rc = c->ops->recv(c, r->id.origin, origin_len, deadline_ms)) != 0)
        return rc;
    r->id.origin[origin_len] = '\0';
    if (origin_len > 0 && !replica__node_name_ok(r->id.origin)) return bad("bad origin name");
    if (r->op == REPLICA_OP_PUT && origin_len == 0) return bad("a push names its origin");
    if (r->op == REPLICA_OP_PUT &&
        (r->length > replica__file_max(&r->id) ||
         r->length <
             (r->id.kind == REPLICA_KIND_SHARD ? CKPT_HEADER_BYTES + CKPT_TRAILER_BYTES : 40u)))
        return bad("file length out of range");
    if (r->op == REPLICA_OP_GET && r->length != 0) return bad("a fetch carries no bytes");
    return 0;
}

int replica__send_answer(replica_conn *c, int status, uint64_t length, const char *message,
                         uint64_t deadline_ms)
{
    uint8_t buf[ANSWER_FIXED + REPLICA_MSG_MAX];
    size_t msg_len = message ? strnlen(message, REPLICA_MSG_MAX) : 0;
    bytes__buf w = bytes__buf_over(buf, sizeof buf);
    bytes__put(&w, answer_magic, 4);
    bytes__put_u32(&w, (uint32_t)status);
    bytes__put_u64(&w, length);
    bytes__put_u32(&w, (uint32_t)msg_len);
    bytes__put(&w, message, msg_len);
    return c->ops->send(c, buf, w.len, deadline_ms);
}

int replica__recv_answer(replica_conn *c, int *status, uint64_t *length, uint64_t deadline_ms)
{
    uint8_t buf[ANSWER_FIXED];
    int rc = c->ops->recv(c, buf, sizeof buf, deadline_ms);
    if (rc) return rc;
    if (memcmp(buf, answer_magic, 4) != 0)
        return elastic__fail(ELASTIC_EPROTO, "replica answer: bad magic");
    int32_t code = (int32_t)bytes__le32(buf + 4);
    *length = bytes__le64(buf + 8);
    uint32_t msg_len = bytes__le32(buf + 16);
    if (msg_len > REPLICA_MSG_MAX || code > 0 || code < -1000)
        return elastic__fail(ELASTIC_EPROTO, "replica answer out of range");
    char msg[REPLICA_MSG_MAX + 1];
    if (msg_len > 0 && (rc = c->ops->recv(c, msg, msg_len, deadline_ms)) != 0) return rc;
    msg[msg_len] = '\0';
    for (uint32_t i = 0; i < msg_len; i++)
        if ((unsigned char)msg[i] < 0x20) msg[i] = '?'; /* a peer's text, shown in logs */
    *status = code;
    if (code != 0) elastic__fail(code, "replica peer: %s", msg);
    return 0;
}

int replica__incoming_open(const char *path, uint64_t len, const ckpt_mem_tier *tier,
                           const char *recycle, replica_incoming *in)
{
    static unsigned counter;
    memset(in, 0, sizeof *in);
    in->fd = -1;
    in->len = len;
    snprintf(in->path, sizeof in->path, "%s", path);
    snprintf(in->tmp, sizeof in->tmp, "%s.tmp-recv.%ld.%u", path, (long)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    /* A spare file's pages are reused (overwritten, then cut to length),
     * unless another name still shares them: a copy staged for a restore is
     * a hard link, and overwriting its pages would destroy that copy. */
    if (recycle != NULL && rename(recycle, in->tmp) == 0) {
        in->fd = open(in->tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (in->fd >= 0 && fstat(in->fd, &st) == 0 && st.st_nlink == 1)
            in->recycled = true;
        else {
            if (in->fd >= 0) close(in->fd);
            unlink(in->tmp); /* this name only: the other keeps its data */
            in->fd = -1;
        }
    }
    if (in->fd < 0)
        in->fd = open(in->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (in->fd < 0) return ckpt__fail_errno(errno, "create", in->tmp);
    /* The step directory and file name say which copy. */
    const char *tail = path + strlen(path);
    for (int slashes = 0; tail > path && slashes < 2; tail--)
        if (tail[-1] == '/' && ++slashes == 2) break;
    char what[PATH_MAX + 32];
    snprintf(what, sizeof what, "a copy of %s", tail);
    int rc = tier ? ckpt__mem_reserve(tier, in->fd, 0, len, what) : 0;
    if (rc == 0 && ftruncate(in->fd, (off_t)len) != 0)
        rc = ckpt__fail_errno(errno, "size", in->tmp);
    if (rc != 0) replica__incoming_drop(in);
    return rc;
}

/* A transport without recv_file: through a buffer that stays in the core's
 * cache, then written into the file (two copies). */
#define RECEIVE_PIECE (512u << 10)

int replica__incoming_receive(replica_conn *c, replica_incoming *in, uint64_t deadline_ms)
{
    if (in->len == 0) return 0;
    /* The transport's own way into the file's pages (tcp: splice, one copy
     * by the kernel; into a recycled file, over pages already allocated). */
    if (c->ops->recv_file != NULL) return c->ops->recv_file(c, in->fd, 0, in->len, deadline_ms);
    size_t cap = in->len < RECEIVE_PIECE ? (size_t)in->len : RECEIVE_PIECE;
    uint8_t *buf = malloc(cap);
    if (buf == NULL) return elastic__fail(ELASTIC_ENOMEM, "receive buffer");
    int rc = 0;
    for (uint64_t done = 0; done < in->len && rc == 0;) {
        size_t n = in->len - done < cap ? (size_t)(in->len - done) : cap;
        rc = c->ops->recv(c, buf, n, deadline_ms);
        if (rc == 0) rc = ckpt__write_all(in->fd, buf, n, in->tmp); /* from offset 0, in order */
        done += n;
    }
    free(buf);
    return rc;
}

int replica__incoming_keep(replica_incoming *in)
{
    int rc = close(in->fd) == 0 ? 0 : ckpt__fail_errno(errno, "close", in->tmp);
    in->fd = -1;
    if (rc == 0 && rename(in->tmp, in->path) != 0) rc = ckpt__fail_errno(errno, "rename", in->tmp);
    if (rc != 0) unlink(in->tmp);
    return rc;
}

void replica__incoming_drop(replica_incoming *in)
{
    if (in->fd >= 0) {
        close(in->fd);
        unlink(in->tmp);
    }
    in->fd = -1;
}
