/*
 * The TCP transport of the replica channel: non-blocking sockets driven with
 * poll() against each call's deadline (dial, send, receive and sendfile are
 * common/conn.h's); files go out with sendfile(2), so a
 * shard is sent straight from the tmpfs pages it lives in, and come in with
 * splice(2) through a pipe, so the kernel copies them once, from the
 * socket's buffers into the file's pages (recv into a buffer then write is
 * two copies; recv into a mapping of the file is one, plus mapping and
 * unmapping every page: measured in bench/run_memckpt.sh).
 */
#include "replica/replica.h"

#include "common/clock.h"
#include "common/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct tcp_conn {
    replica_conn base;
    int fd;
    int pipe[2]; /* for recv_file, made on first use; -1: none yet */
} tcp_conn;

/* What the pipe between the socket and the file holds at most: the largest
 * pipe an unprivileged process may ask for by default (fs.pipe-max-size);
 * a smaller one (the request refused) only costs more calls. */
#define SPLICE_PIPE_BYTES (1u << 20)
/* The buffer of the fallback (a file system without splice). */
#define RECV_PIECE (512u << 10)

struct replica_listener {
    int fd;
    int port;
};

static int wait_fd(int fd, short events, uint64_t deadline_ms, const char *what)
{
    int rc = elastic__conn_wait(fd, events, deadline_ms);
    if (rc == ELASTIC_ETIMEDOUT) return elastic__fail(rc, "replica %s: timed out", what);
    if (rc != 0) return elastic__fail(ELASTIC_ECONNECT, "replica %s: %s", what, strerror(errno));
    return 0;
}

static int tcp_send(replica_conn *c, const void *data, size_t len, uint64_t deadline_ms)
{
    return elastic__send_all(((tcp_conn *)c)->fd, data, len, deadline_ms, "replica send");
}

static int tcp_send_file(replica_conn *c, int file_fd, uint64_t offset, uint64_t len,
                         uint64_t deadline_ms)
{
    return elastic__sendfile_all(((tcp_conn *)c)->fd, file_fd, offset, len, deadline_ms,
                                 "replica send");
}

static int tcp_recv(replica_conn *c, void *data, size_t len, uint64_t deadline_ms)
{
    return elastic__recv_exact(((tcp_conn *)c)->fd, data, len, deadline_ms, "replica receive");
}

static int make_pipe(tcp_conn *t)
{
    if (t->pipe[0] >= 0) return 0;
    if (pipe2(t->pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        t->pipe[0] = t->pipe[1] = -1;
        return elastic__fail(ELASTIC_ESYS, "replica receive: pipe: %s", strerror(errno));
    }
    (void)fcntl(t->pipe[1], F_SETPIPE_SZ, (int)SPLICE_PIPE_BYTES);
    return 0;
}

/* A pipe left holding bytes of a failed transfer is of no further use. */
static void drop_pipe(tcp_conn *t)
{
    if (t->pipe[0] < 0) return;
    close(t->pipe[0]);
    close(t->pipe[1]);
    t->pipe[0] = t->pipe[1] = -1;
}

static int write_failed(int err)
{
    return elastic__fail(err == ENOSPC ? ELASTIC_ENOSPC : ELASTIC_EIO, "replica receive: write: %s",
                         strerror(err));
}

static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t offset)
{
    for (size_t put = 0; put < n;) {
        ssize_t w = pwrite(fd, p + put, n - put, (off_t)(offset + put));
        if (w > 0)
            put += (size_t)w;
        else if (w == 0)
            return write_failed(EIO);
        else if (errno != EINTR)
            return write_failed(errno);
    }
    return 0;
}

/* Through a buffer, for a file that takes no splice (not tmpfs/ext4...). */
static int recv_file_buffered(replica_conn *c, int file_fd, uint64_t offset, uint64_t len,
                              uint64_t deadline_ms)
{
    size_t cap = len < RECV_PIECE ? (size_t)len : RECV_PIECE;
    uint8_t *buf = malloc(cap);
    if (buf == NULL) return elastic__fail(ELASTIC_ENOMEM, "replica receive buffer");
    int rc = 0;
    for (uint64_t done = 0; done < len && rc == 0;) {
        size_t n = len - done < cap ? (size_t)(len - done) : cap;
        rc = tcp_recv(c, buf, n, deadline_ms);
        if (rc == 0) rc = pwrite_all(file_fd, buf, n, offset + done);
        done += n;
    }
    free(buf);
    return rc;
}

/* The pipe's `in_pipe` bytes written at offset, then `rest` more from the
 * socket after them, all through a buffer. */
static int unsplice(tcp_conn *t, int file_fd, uint64_t offset, size_t in_pipe, uint64_t rest,
                    uint64_t deadline_ms)
{
    uint8_t *buf = malloc(in_pipe > 0 ? in_pipe : 1);
    if (buf == NULL) {
        drop_pipe(t);
        return elastic__fail(ELASTIC_ENOMEM, "replica receive buffer");
    }
    size_t got = 0;
    while (got < in_pipe) { /* the bytes are there: a pipe read does not wait */
        ssize_t n = read(t->pipe[0], buf + got, in_pipe - got);
        if (n > 0)
            got += (size_t)n;
        else if (n == 0 || errno != EINTR)
            break;
    }
    int rc = got == in_pipe ? 0 : elastic__fail(ELASTIC_EIO, "replica receive: pipe read");
    if (rc == 0) rc = pwrite_all(file_fd, buf, got, offset);
    free(buf);
    drop_pipe(t);
    if (rc == 0 && rest > 0)
        rc = recv_file_buffered(&t->base, file_fd, offset + got, rest, deadline_ms);
    return rc;
}

/* socket -> pipe (the socket buffers' pages, moved) -> file (one copy).
 * The pipe is drained whenever it holds bytes, so the socket side only
 * waits (poll) with an empty pipe: the file side never blocks on it. */
static int tcp_recv_file(replica_conn *c, int file_fd, uint64_t offset, uint64_t len,
                         uint64_t deadline_ms)
{
    tcp_conn *t = (tcp_conn *)c;
    int rc = make_pipe(t);
    if (rc) return rc;
    loff_t at = (loff_t)offset;
    uint64_t pull = len; /* still in the socket */
    size_t in_pipe = 0;
    while (pull > 0 || in_pipe > 0) {
        if (pull > 0) {
            size_t want = pull > SPLICE_PIPE_BYTES ? SPLICE_PIPE_BYTES : (size_t)pull;
            ssize_t n =
                splice(t->fd, NULL, t->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                pull -= (uint64_t)n;
                in_pipe += (size_t)n;
            } else if (n == 0) {
                rc = elastic__fail(ELASTIC_ECONNECT, "replica: the peer closed the connection");
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                /* Nothing to read, or a full pipe: drain it, else wait. */
                if (in_pipe == 0) rc = wait_fd(t->fd, POLLIN, deadline_ms, "receive");
            } else if (errno != EINTR) {
                rc = elastic__fail(ELASTIC_ECONNECT, "replica receive: %s", strerror(errno));
            }
        }
        if (rc == 0 && in_pipe > 0) {
            ssize_t n = splice(t->pipe[0], NULL, file_fd, &at, in_pipe, SPLICE_F_MOVE);
            if (n > 0)
                in_pipe -= (size_t)n;
            else if (n == 0)
                rc = elastic__fail(ELASTIC_EIO, "replica receive: the file took no bytes");
            else if (errno == EINVAL && (uint64_t)at == offset)
                /* A file system without splice: what the pipe holds, then
                 * the rest, through a buffer. */
                return unsplice(t, file_fd, offset, in_pipe, pull, deadline_ms);
            else if (errno != EINTR && errno != EAGAIN)
                rc = write_failed(errno);
        }
        if (rc == 0 && pull > 0 && elastic__ms_left(deadline_ms) == 0)
            rc = elastic__fail(ELASTIC_ETIMEDOUT, "replica receive: timed out");
        if (rc) {
            drop_pipe(t);
            return rc;
        }
    }
    return 0;
}

static void tcp_shutdown(replica_conn *c)
{
    shutdown(((tcp_conn *)c)->fd, SHUT_RDWR);
}

static void tcp_close(replica_conn *c)
{
    tcp_conn *t = (tcp_conn *)c;
    drop_pipe(t);
    close(t->fd);
    free(t);
}

static const replica_transport_ops tcp_ops = {
    .name = "tcp",
    .send = tcp_send,
    .send_file = tcp_send_file,
    .recv = tcp_recv,
    .recv_file = tcp_recv_file,
    .shutdown = tcp_shutdown,
    .close = tcp_close,
};

static int wrap(int fd, replica_conn **out)
{
    tcp_conn *t = calloc(1, sizeof *t);
    if (t == NULL) {
        close(fd);
        return elastic__fail(ELASTIC_ENOMEM, "replica connection");
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    t->base.ops = &tcp_ops;
    t->fd = fd;
    t->pipe[0] = t->pipe[1] = -1;
    *out = &t->base;
    return 0;
}

int replica__tcp_connect(const char *host, int port, uint64_t deadline_ms, replica_conn **out)
{
    int fd = -1;
    int rc = elastic__dial(host, port, deadline_ms, "replica peer", &fd);
    if (rc) return rc;
    return wrap(fd, out);
}

int replica__tcp_listen(const char *host, int port, replica_listener **out)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    struct addrinfo *found = NULL;
    int gai = getaddrinfo(host && *host ? host : NULL, port_text, &hints, &found);
    if (gai != 0)
        return elastic__fail(ELASTIC_EINVAL, "replica listen address \"%s\": %s", host,
                             gai_strerror(gai));
    int fd = -1, err = 0;
    for (struct addrinfo *ai = found; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    if (fd < 0)
        return elastic__fail(ELASTIC_ECONNECT, "replica listen on port %d: %s", port,
                             strerror(err ? err : EADDRNOTAVAIL));
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;
    getsockname(fd, (struct sockaddr *)&addr, &len);
    replica_listener *l = calloc(1, sizeof *l);
    if (l == NULL) {
        close(fd);
        return elastic__fail(ELASTIC_ENOMEM, "replica listener");
    }
    l->fd = fd;
    l->port = addr.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&addr)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&addr)->sin_port);
    *out = l;
    return 0;
}

int replica__tcp_port(const replica_listener *l)
{
    return l->port;
}

int replica__tcp_listener_fd(const replica_listener *l)
{
    return l->fd;
}

int replica__tcp_accept(replica_listener *l, uint64_t deadline_ms, replica_conn **out, char *peer,
                        size_t peer_cap)
{
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t addr_len = sizeof addr;
        int fd = accept4(l->fd, (struct sockaddr *)&addr, &addr_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0 && peer != NULL && peer_cap > 0) {
            const void *ip = addr.ss_family == AF_INET6
                                 ? (const void *)&((struct sockaddr_in6 *)&addr)->sin6_addr
                                 : (const void *)&((struct sockaddr_in *)&addr)->sin_addr;
            if (inet_ntop(addr.ss_family, ip, peer, (socklen_t)peer_cap) == NULL) peer[0] = '\0';
        }
        if (fd >= 0) return wrap(fd, out);
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return elastic__fail(ELASTIC_ECONNECT, "replica accept: %s", strerror(errno));
        int rc = wait_fd(l->fd, POLLIN, deadline_ms, "accept");
        if (rc) return rc;
    }
}

void replica__tcp_listener_close(replica_listener *l)
{
    if (l == NULL) return;
    close(l->fd);
    free(l);
}
