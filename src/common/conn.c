/* See conn.h. Compiled into elasticctl too (its HTTP GET): it reports only
 * through elastic__fail and uses nothing else of the library's. */
#include "common/conn.h"

#include "common/clock.h"
#include "common/common.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int elastic__conn_wait(int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = events };
        int ready = poll(&pfd, 1, deadline_ms == UINT64_MAX ? -1 : elastic__ms_left(deadline_ms));
        if (ready > 0) return 0;
        if (ready == 0) return ELASTIC_ETIMEDOUT;
        if (errno != EINTR) return ELASTIC_ESYS;
    }
}

/* "Connection refused (ECONNREFUSED)": the sentence and the errno's name;
 * ETIMEDOUT stands for our own deadline and reads "timed out". */
static void cause_text(int cause, char *out, size_t cap)
{
    if (cause == ETIMEDOUT) {
        snprintf(out, cap, "timed out");
        return;
    }
    const char *name = strerrorname_np(cause);
    snprintf(out, cap, "%s (%s)", strerror(cause), name != NULL ? name : "?");
}

/* One address before deadline_ms: 0 and *fd_out, or the errno that ended
 * it (ETIMEDOUT: the deadline) in *cause and the code it maps to. */
static int dial_one(const struct addrinfo *ai, uint64_t deadline_ms, int *fd_out, int *cause)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        *cause = errno;
        return ELASTIC_ESYS;
    }
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            int waited = elastic__conn_wait(fd, POLLOUT, deadline_ms);
            socklen_t len = sizeof err;
            if (waited == ELASTIC_ETIMEDOUT)
                err = ETIMEDOUT;
            else if (waited != 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                err = errno;
        }
    }
    if (err != 0) {
        close(fd);
        *cause = err;
        return err == ETIMEDOUT ? ELASTIC_ETIMEDOUT : ELASTIC_ECONNECT;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *fd_out = fd;
    return 0;
}

/* The deadline of the address with `left` addresses still to try (itself
 * included): an equal share of the time left. */
static uint64_t share_of(uint64_t deadline_ms, int left)
{
    if (left <= 1 || deadline_ms == UINT64_MAX) return deadline_ms;
    return elastic__now_ms() + (uint64_t)elastic__ms_left(deadline_ms) / (uint64_t)left;
}

int elastic__dial_addrs(const struct addrinfo *list, const char *host, int port,
                        uint64_t deadline_ms, const char *what, int *fd_out)
{
    int count = 0;
    for (const struct addrinfo *ai = list; ai != NULL; ai = ai->ai_next) count++;
    int rc = ELASTIC_ECONNECT, code = ELASTIC_ECONNECT, cause = EADDRNOTAVAIL, fd = -1;
    bool tried = false; /* an address reached connect: its cause is the real one */
    for (int left = count; list != NULL && rc != 0; list = list->ai_next, left--) {
        int why = 0;
        rc = dial_one(list, share_of(deadline_ms, left), &fd, &why);
        /* A family this host cannot open a socket in (no IPv6) says less
         * than a refusal or a timeout from an address actually tried. */
        if (rc != 0 && (rc != ELASTIC_ESYS || !tried)) code = rc, cause = why;
        tried = tried || (rc != 0 && rc != ELASTIC_ESYS);
    }
    if (rc != 0) {
        rc = code;
        char why[160];
        cause_text(cause, why, sizeof why);
        return elastic__fail(rc, "connect to %s %s:%d: %s", what, host, port, why);
    }
    *fd_out = fd;
    return 0;
}

int elastic__dial(const char *host, int port, uint64_t deadline_ms, const char *what,
                  int *fd_out)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    struct addrinfo *found = NULL;
    int gai = getaddrinfo(host, port_text, &hints, &found);
    if (gai != 0)
        return elastic__fail(ELASTIC_ECONNECT, "%s host \"%s\": %s", what, host,
                             gai_strerror(gai));
    int rc = elastic__dial_addrs(found, host, port, deadline_ms, what, fd_out);
    freeaddrinfo(found);
    return rc;
}

int elastic__dial_unix(const char *path, uint64_t deadline_ms, const char *what, int *fd_out)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof addr.sun_path)
        return elastic__fail(ELASTIC_EINVAL, "%s: the socket path %s is too long", what, path);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return elastic__fail(ELASTIC_ESYS, "%s: socket: %s", what, strerror(errno));
    /* A Unix socket's connect waits (a full backlog) for SO_SNDTIMEO, not
     * for poll: the time left goes there, and is taken off again after. */
    int left = elastic__ms_left(deadline_ms);
    struct timeval limit = { .tv_sec = left / 1000, .tv_usec = (left % 1000) * 1000 }, none = { 0 };
    if (deadline_ms != UINT64_MAX) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    int rc = 0;
    while (rc == 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int err = errno == EAGAIN || errno == EINPROGRESS ? ETIMEDOUT : errno;
        if (err == EINTR) continue;
        char why[160];
        cause_text(err, why, sizeof why);
        rc = elastic__fail(err == ETIMEDOUT ? ELASTIC_ETIMEDOUT : ELASTIC_ECONNECT,
                           "%s: connect to %s: %s", what, path, why);
    }
    if (rc != 0) {
        close(fd);
        return rc;
    }
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
    *fd_out = fd;
    return 0;
}

/* The failure of one I/O call: the deadline, or the call's errno. */
static int io_failed(int waited, const char *what)
{
    if (waited == ELASTIC_ETIMEDOUT) return elastic__fail(ELASTIC_ETIMEDOUT, "%s: timed out", what);
    return elastic__fail(waited == ELASTIC_ESYS ? ELASTIC_ESYS : ELASTIC_ECONNECT, "%s: %s", what,
                         strerror(errno));
}

int elastic__send_all(int fd, const void *data, size_t len, uint64_t deadline_ms,
                      const char *what)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int waited = elastic__conn_wait(fd, POLLOUT, deadline_ms);
            if (waited != 0) return io_failed(waited, what);
        } else if (n == 0 || errno != EINTR) {
            return io_failed(ELASTIC_ECONNECT, what);
        }
    }
    return 0;
}

int elastic__recv_exact(int fd, void *data, size_t len, uint64_t deadline_ms, const char *what)
{
    uint8_t *p = data;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n == 0) {
            return elastic__fail(ELASTIC_ECONNECT, "%s: the peer closed the connection", what);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int waited = elastic__conn_wait(fd, POLLIN, deadline_ms);
            if (waited != 0) return io_failed(waited, what);
        } else if (errno != EINTR) {
            return io_failed(ELASTIC_ECONNECT, what);
        }
    }
    return 0;
}

int elastic__sendfile_all(int fd, int file_fd, uint64_t offset, uint64_t len,
                          uint64_t deadline_ms, const char *what)
{
    off_t off = (off_t)offset;
    while (len > 0) {
        size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = sendfile(fd, file_fd, &off, want);
        if (n > 0) {
            len -= (uint64_t)n;
        } else if (n == 0) {
            return elastic__fail(ELASTIC_EIO, "%s: the file ended early", what);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int waited = elastic__conn_wait(fd, POLLOUT, deadline_ms);
            if (waited != 0) return io_failed(waited, what);
        } else if (errno != EINTR) {
            return io_failed(ELASTIC_ECONNECT, what);
        }
    }
    return 0;
}
