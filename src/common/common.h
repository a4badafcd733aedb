/*
 * Internal helpers shared by every module: error details, logging, options
 * structs and small utilities. Only the library includes this file.
 */
#ifndef ELASTIC_COMMON_INTERNAL_H
#define ELASTIC_COMMON_INTERNAL_H

#include "elastic.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ELASTIC__PRINTF(fmt_index, args_index) \
    __attribute__((format(printf, fmt_index, args_index)))
#define ELASTIC__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Build knob: `make ELASTIC_ETCD=0` compiles with -DELASTIC_WITH_ETCD=0 and
 * leaves out the etcd client (src/etcd/), the etcd rendezvous backend and libcurl. */
#ifndef ELASTIC_WITH_ETCD
#define ELASTIC_WITH_ETCD 1
#endif

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

/* Public structs that grow (docs/ABI.md, "Structs that grow"). Each starts
 * with `size_t struct_size`, the caller's sizeof. These three helpers are the
 * only code that touches a caller's struct by size; every module uses them. */
#define ELASTIC__MAX_STRUCT_SIZE ((size_t)65536) /* larger is garbage, not a struct */
/* ELASTIC_EINVAL naming `type` when struct_size is below its first field or absurd. */
int elastic__struct_size_check(size_t struct_size, const char *type);
/* elastic_X_opts_init: writes the first struct_size bytes of `defaults` (a full
 * struct of full_size bytes) into the caller's struct, zeroes a newer caller's
 * tail beyond full_size, and stores struct_size. Never writes further. */
int elastic__struct_init(void *caller, size_t struct_size, const void *defaults, size_t full_size,
                         const char *type);
/* Input: copies what the caller's struct_size covers over `dst`, a full struct
 * already holding the defaults. NULL caller: dst keeps every default. */
int elastic__struct_read(void *dst, size_t full_size, const void *caller, const char *type);
/* Output: copies the library's full struct `src` into the part of the caller's
 * struct its struct_size covers (a newer caller's tail is zeroed) and sets
 * struct_size to the bytes filled: min(caller's, library's). */
int elastic__struct_write(void *caller, const void *src, size_t full_size, const char *type);
#define ELASTIC__STRUCT_INIT(opts, size, defaults, type) \
    elastic__struct_init((opts), (size), (defaults), sizeof(*(defaults)), (type))
#define ELASTIC__STRUCT_READ(dst, caller, type) \
    elastic__struct_read((dst), sizeof(*(dst)), (caller), (type))
#define ELASTIC__STRUCT_WRITE(caller, src, type) \
    elastic__struct_write((caller), (src), sizeof(*(src)), (type))

/* Duplicates a string; NULL stays NULL. */
char *elastic__strdup(const char *s);

#endif /* ELASTIC_COMMON_INTERNAL_H */
