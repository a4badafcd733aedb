/*
 * One bounded reader of small text files for the agent's evidence (the
 * error file, the stderr tail's file, cgroup counters).
 */
#include "common/small_file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

ssize_t elastic__read_small_text(const char *path, char *out, size_t size)
{
    if (size == 0) return -1;
    out[0] = '\0';
    /* no link followed, no FIFO to hang on */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t len = 0;
    while (len + 1 < size) {
        ssize_t got = read(fd, out + len, size - 1 - len);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        len += (size_t)got;
    }
    close(fd);
    out[len] = '\0';
    return (ssize_t)len;
}
