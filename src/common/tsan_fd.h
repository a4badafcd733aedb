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
#else
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
