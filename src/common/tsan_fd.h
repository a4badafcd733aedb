/*
 * Telling ThreadSanitizer that libuv is about to close a descriptor. Debian's
 * libuv is not instrumented and closes with a raw close syscall, which
 * ThreadSanitizer never sees; when the number was then reused by another
 * thread (a pipe for a worker, a socket the store accepts), it reported a
 * race on that descriptor. libuv built with ThreadSanitizer makes this same
 * call itself (uv__close_nocancel). No effect outside ThreadSanitizer builds.
 */
#ifndef ELASTIC_COMMON_TSAN_FD_H
#define ELASTIC_COMMON_TSAN_FD_H

#if defined(__SANITIZE_THREAD__)
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
void __sanitizer_syscall_pre_impl_close(long fd);
static inline void elastic__tsan_fd_closing(int fd)
{
    if (fd >= 0) __sanitizer_syscall_pre_impl_close((long)fd);
}
/* openat(2) is not intercepted either: ThreadSanitizer never learns that the
 * number is a new descriptor, and its close looked like a race with the
 * libuv thread that last used the number (epoll_ctl on a socket the store
 * server had closed). The descriptor is swapped for a dup(2) of it, which is
 * intercepted, and the unseen one is closed unseen. */
static inline int elastic__tsan_fd_made(int fd)
{
    if (fd < 0) return fd;
    int seen = dup(fd);
    if (seen < 0) return fd;
    (void)fcntl(seen, F_SETFD, FD_CLOEXEC);
    syscall(SYS_close, fd);
    return seen;
}
/* openat(2) as ThreadSanitizer sees it: where dup(2) of a number a libuv
 * socket last used still reads that socket's state (a race report of its
 * own), open(2) of the same name through the directory's descriptor's
 * /proc link starts the number afresh. Same semantics: the link is the
 * directory itself, the flags apply to `name` (O_NOFOLLOW included). */
#include <stdio.h>
static inline int elastic__openat(int dir_fd, const char *name, int flags)
{
    char path[64 + 256];
    if ((size_t)snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dir_fd, name) >= sizeof path)
        return openat(dir_fd, name, flags);
    int fd = open(path, flags);
    return fd >= 0 || errno != ENOENT || access("/proc/self/fd", X_OK) == 0
               ? fd
               : elastic__tsan_fd_made(openat(dir_fd, name, flags));
}
#else
#include <fcntl.h>
static inline int elastic__openat(int dir_fd, const char *name, int flags)
{
    return openat(dir_fd, name, flags);
}
static inline void elastic__tsan_fd_closing(int fd)
{
    (void)fd;
}
static inline int elastic__tsan_fd_made(int fd)
{
    return fd;
}
#endif

#endif
