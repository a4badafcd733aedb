/*
 * One way to load an optional shared library at run time (NCCL, the CUDA
 * runtime, NVML, libcurl), so libelastic has no link-time dependency on any of
 * them: an override path from an environment variable when set (alone: a
 * wrong override is an error, not a reason to pick up some other copy), else
 * a list of sonames/paths in turn; then a table of symbols, each required or
 * optional, with older aliases tried after the preferred name. A failure is
 * one line naming the library, what was tried and dlerror's cause once.
 */
#ifndef ELASTIC_COMMON_DYNLIB_H
#define ELASTIC_COMMON_DYNLIB_H

#include <stdbool.h>
#include <stddef.h>

typedef struct elastic__dynlib {
    void *handle;   /* never closed by these helpers: the library's threads may outlive callers */
    char name[256]; /* the override path or soname that opened */
} elastic__dynlib;

/* One symbol to resolve: `slot` is a void ** view of the caller's function
 * pointer (the conversion POSIX sanctions in dlsym's own example); `names`
 * the preferred name first, then aliases, NULL-terminated (at most 3). */
typedef struct elastic__dynsym {
    void **slot;
    bool required;
    const char *names[4];
} elastic__dynsym;

#define ELASTIC__DYNSYM(field_ptr, required_, ...)                                            \
    {                                                                                         \
        .slot = (void **)(field_ptr), .required = (required_), .names = { __VA_ARGS__, NULL } \
    }

/* Opens the library. `override_var` may be NULL; `names` is NULL-terminated.
 * On failure returns -1 with `why` holding "ELASTIC_X=path: cause" (override)
 * or "tried a, b, c: cause" (each name's cause listed when they differ). */
int elastic__dynlib_open(elastic__dynlib *lib, const char *override_var, const char *const *names,
                         int flags, char *why, size_t why_cap);

/* Resolves every symbol of the table; an optional one missing is NULL. On a
 * required one missing returns -1 with `why` "<library> lacks <symbol>". */
int elastic__dynlib_bind(const elastic__dynlib *lib, const elastic__dynsym *syms, size_t count,
                         char *why, size_t why_cap);

/* True when one of `names` loads here (opened lazily and closed again). */
bool elastic__dynlib_loadable(const char *const *names);

#endif
