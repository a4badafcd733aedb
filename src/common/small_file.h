/*
 * Reading a small text file whole (small_file.c): a worker's error file, a
 * cgroup's counters, the kernel's log line. Opened without following a link
 * and without blocking on a FIFO someone put in its place.
 */
#ifndef ELASTIC_COMMON_SMALL_FILE_H
#define ELASTIC_COMMON_SMALL_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* At most size-1 bytes of the file at path into out, NUL-terminated (out is
 * "" on failure); the bytes read, or -1 when it cannot be opened. */
ssize_t elastic__read_small_text(const char *path, char *out, size_t size);

#endif /* ELASTIC_COMMON_SMALL_FILE_H */
