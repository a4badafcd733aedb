/*
 * Internal helpers shared by every module: error details, logging, options
 * structs and small utilities. Only the library includes this file.
 */
#ifndef ELASTIC_COMMON_H
#define ELASTIC_COMMON_H

#include "elastic.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ELASTIC__PRINTF(fmt_index, args_index) __attribute__((format(printf, fmt_index, args_index)))
#define ELASTIC__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Records a detail for elastic_last_error() and returns `code`, so a failure
 * reads `return elastic__fail(ELASTIC_EIO, "write %s: %s", path, strerror(errno));` */
int elastic__fail(int code, const char *fmt, ...) ELASTIC__PRINTF(2, 3);
/* Clears the calling thread's error detail (at the start of a public call). */
void elastic__clear_error(void);
/* Maps an errno value to the closest ELASTIC_E* code. */
int elastic__from_errno(int err);

/* Logging through the sink set by elastic_set_log_callback(). */
void elastic__log(int level, const char *module, const char *fmt, ...) ELASTIC__PRINTF(3, 4);
bool elastic__log_enabled(int level);
#define ELASTIC_LOG_E(mod, ...) elastic__log(ELASTIC_LOG_ERROR, mod, __VA_ARGS__)
#define ELASTIC_LOG_W(mod, ...) elastic__log(ELASTIC_LOG_WARN, mod, __VA_ARGS__)
#define ELASTIC_LOG_I(mod, ...) elastic__log(ELASTIC_LOG_INFO, mod, __VA_ARGS__)
#define ELASTIC_LOG_D(mod, ...) elastic__log(ELASTIC_LOG_DEBUG, mod, __VA_ARGS__)

/* Options structs: copy what the caller's struct_size covers over the defaults
 * already in `dst`. Rejects a struct_size that is 0 or not a size this or an
 * older library could have written (smaller than the first field). */
int elastic__opts_copy(void *dst, size_t dst_size, const void *src);
#define ELASTIC__OPTS_COPY(dst, src) elastic__opts_copy((dst), sizeof(*(dst)), (src))

/* Duplicates a string; NULL stays NULL. */
char *elastic__strdup(const char *s);

#endif /* ELASTIC_COMMON_H */
