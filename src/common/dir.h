/*
 * Opening a directory to list it (dir.c). Every directory scan in the library
 * goes through here instead of opendir(3).
 */
#ifndef ELASTIC_COMMON_DIR_H
#define ELASTIC_COMMON_DIR_H

#include <dirent.h>

/* opendir(path), with the descriptor opened by open(2) (O_DIRECTORY, O_CLOEXEC)
 * and handed to fdopendir(3); NULL with errno set, as opendir. Close it with
 * closedir. Why not opendir: ThreadSanitizer intercepts closedir but not
 * opendir, and libuv closes its sockets with a raw close syscall that
 * ThreadSanitizer never sees; a directory descriptor reusing the number of a
 * socket the store server closed then looked like a data race on that
 * descriptor (the replica service's scans, make tsan). open(2) is
 * intercepted, so the descriptor starts fresh. */
DIR *elastic__opendir(const char *path);

#endif
