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
void __sanitizer_syscall_pre_impl_close(long fd);
static inline void elastic__tsan_fd_closing(int fd)
{
    if (fd >= 0) __sanitizer_syscall_pre_impl_close((long)fd);
}
#else
static inline void elastic__tsan_fd_closing(int fd)
{
    (void)fd;
}
#endif

#endif
