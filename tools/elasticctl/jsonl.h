/*
 * An event log read line by line (jsonl.c), for every reader of elasticctl:
 * each line bounded (TIMELINE_MAX_LINE), blank lines skipped, and an error
 * from the line's reader wrapped with the file and line number.
 */
#ifndef ELASTICCTL_JSONL_H
#define ELASTICCTL_JSONL_H

#include <stddef.h>

/* Calls take(user, line, len) for each non-blank line (newline stripped,
 * NUL-terminated); stops at the first non-zero return. 0, or an ELASTIC_E*
 * code with "<path>:<line>: <why>" in ctl_last_error(). */
int ctl__jsonl_each(const char *path, int (*take)(void *user, const char *line, size_t len),
                    void *user);

#endif /* ELASTICCTL_JSONL_H */
