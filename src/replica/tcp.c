/*
 * The TCP transport of the replica channel: non-blocking sockets driven with
 * poll() against each call's deadline; files go out with sendfile(2), so a
 * shard is sent straight from the tmpfs pages it lives in.
 */
#include "replica/replica.h"

#include "common/clock.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct tcp_conn {
    replica_conn base;
    int fd;
} tcp_conn;

struct replica_listener {
    int fd;
    int port;
};

static int wait_fd(int fd, short events, uint64_t deadline_ms, const char *what)
{
    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = events };
        int ready = poll(&pfd, 1, elastic__ms_left(deadline_ms));
        if (ready > 0) return 0;
        if (ready == 0) return elastic__fail(ELASTIC_ETIMEDOUT, "replica %s: timed out", what);
        if (errno != EINTR)
            return elastic__fail(ELASTIC_ECONNECT, "replica %s: %s", what, strerror(errno));
    }
}

static int tcp_send(replica_conn *c, const void *data, size_t len, uint64_t deadline_ms)
{
    int fd = ((tcp_conn *)c)->fd;
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLOUT, deadline_ms, "send");
            if (rc) return rc;
            continue;
        }
        return elastic__fail(ELASTIC_ECONNECT, "replica send: %s", strerror(errno));
    }
    return 0;
}

static int tcp_send_file(replica_conn *c, int file_fd, uint64_t offset, uint64_t len,
                         uint64_t deadline_ms)
{
    int fd = ((tcp_conn *)c)->fd;
    off_t off = (off_t)offset;
    while (len > 0) {
        size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = sendfile(fd, file_fd, &off, want);
        if (n > 0) {
            len -= (uint64_t)n;
            continue;
        }
        if (n == 0) return elastic__fail(ELASTIC_EIO, "replica send: the file ended early");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(fd, POLLOUT, deadline_ms, "send");
            if (rc) return rc;
            continue;
        }
        return elastic__fail(ELASTIC_ECONNECT, "replica send: %s", strerror(errno));
    }
    return 0;
}

static int tcp_recv(replica_conn *c, void *data, size_t len, uint64_t deadline_ms)
{
    int fd = ((tcp_conn *)c)->fd;
    uint8_t *p = data;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return elastic__fail(ELASTIC_ECONNECT, "replica: the peer closed the connection");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(fd, POLLIN, deadline_ms, "receive");
            if (rc) return rc;
            continue;
        }
        return elastic__fail(ELASTIC_ECONNECT, "replica receive: %s", strerror(errno));
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
    close(t->fd);
    free(t);
}

static const replica_transport_ops tcp_ops = {
    .name = "tcp",
    .send = tcp_send,
    .send_file = tcp_send_file,
    .recv = tcp_recv,
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
    *out = &t->base;
    return 0;
}

static int connect_one(const struct addrinfo *ai, uint64_t deadline_ms, int *out)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return elastic__fail(ELASTIC_ESYS, "socket: %s", strerror(errno));
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        int rc = errno == EINPROGRESS ? wait_fd(fd, POLLOUT, deadline_ms, "connect")
                                      : elastic__fail(ELASTIC_ECONNECT, "%s", strerror(errno));
        int so_error = 0;
        socklen_t len = sizeof so_error;
        if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) == 0 && so_error != 0)
            rc = elastic__fail(ELASTIC_ECONNECT, "%s", strerror(so_error));
        if (rc) {
            close(fd);
            return rc;
        }
    }
    *out = fd;
    return 0;
}

int replica__tcp_connect(const char *host, int port, uint64_t deadline_ms, replica_conn **out)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    struct addrinfo *found = NULL;
    int gai = getaddrinfo(host, port_text, &hints, &found);
    if (gai != 0)
        return elastic__fail(ELASTIC_ECONNECT, "replica peer \"%s\": %s", host, gai_strerror(gai));
    int rc = ELASTIC_ECONNECT, fd = -1;
    for (struct addrinfo *ai = found; ai != NULL && rc != 0; ai = ai->ai_next)
        rc = connect_one(ai, deadline_ms, &fd);
    freeaddrinfo(found);
    if (rc) {
        char why[256];
        snprintf(why, sizeof why, "%s", elastic_last_error());
        return elastic__fail(rc, "connect to replica peer %s:%d: %s", host, port, why);
    }
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

int replica__tcp_accept(replica_listener *l, uint64_t deadline_ms, replica_conn **out)
{
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
