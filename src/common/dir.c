#include "common/dir.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

DIR *elastic__opendir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return NULL;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return d;
}
