/*
 * What every module of the public ABI shares: the export macro, versions,
 * feature queries, timeouts, error codes, memory and logging. Each
 * include/elastic/<module>.h includes it inside its own include guard, so any
 * header may be included first and alone. The conventions these follow are
 * listed in <elastic.h> and docs/ABI.md.
 */
#ifndef ELASTIC_COMMON_H
#define ELASTIC_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ELASTIC_BUILDING) && defined(__GNUC__)
#define ELASTIC_EXTERN __attribute__((visibility("default")))
#else
#define ELASTIC_EXTERN
#endif

/* Marks a name kept only for older callers; the compiler names the
 * replacement when it is used (docs/ABI.md, "Deprecated names"). */
#if defined(__GNUC__) || defined(__clang__)
#define ELASTIC_DEPRECATED(replacement) __attribute__((deprecated("use " replacement)))
#else
#define ELASTIC_DEPRECATED(replacement)
#endif

/* ---- versions ------------------------------------------------------------ */

/* The only place the version is written: the Makefile reads it from here for
 * the SONAME (libelastic.so.<MAJOR>) and the pkg-config file. */
#define ELASTIC_VERSION_MAJOR 1
#define ELASTIC_VERSION_MINOR 0
#define ELASTIC_VERSION_PATCH 0
/* One comparable integer: (major << 16) | (minor << 8) | patch. */
#define ELASTIC_VERSION_HEX \
    ((ELASTIC_VERSION_MAJOR << 16) | (ELASTIC_VERSION_MINOR << 8) | ELASTIC_VERSION_PATCH)

/* The version of the library actually loaded (may differ from the header's),
 * as ELASTIC_VERSION_HEX encodes it. */
ELASTIC_EXTERN unsigned elastic_version(void);
/* The same version as "MAJOR.MINOR.PATCH" (static storage, never NULL). */
ELASTIC_EXTERN const char *elastic_version_string(void);

/* 1 when the named optional feature is available in this build and on this
 * machine ("store", "auth", "zstd", "xxhash", "etcd", "nccl", "cuda"), else 0. */
ELASTIC_EXTERN int elastic_has_feature(const char *name);

/* ---- timeouts ------------------------------------------------------------ */

/* Every `timeout_ms` argument: > 0 waits up to that many milliseconds, 0 does
 * not wait (just looks), < 0 waits without limit. ELASTIC_TIMEOUT_DEFAULT takes
 * the default of the handle it is passed with (e.g. elastic_store_opts.timeout_ms);
 * a handle without one waits without limit. It is INT_MIN so that it cannot be
 * confused with the others: -1 (the usual "forever") still means no limit, and
 * no positive duration negated or overflowing by one step lands on it. */
#define ELASTIC_TIMEOUT_NO_LIMIT (-1)
#define ELASTIC_TIMEOUT_DEFAULT  (-2147483647 - 1)

/* ---- errors -------------------------------------------------------------- */

/* The one list of error codes: X(NAME, value, description). Values are stable. */
#define ELASTIC_ERRNO_MAP(X)                                      \
    X(EINVAL, -1, "invalid argument")                             \
    X(ENOMEM, -2, "out of memory")                                \
    X(ETIMEDOUT, -3, "timed out")                                 \
    X(ENOTFOUND, -4, "not found")                                 \
    X(ECLOSED, -5, "closed")                                      \
    X(EAUTH, -6, "authentication failed")                         \
    X(EPROTO, -7, "protocol error")                               \
    X(EIO, -8, "input/output error")                              \
    X(ECONNECT, -9, "connection failed or lost")                  \
    X(ELIMIT, -10, "exceeds a configured limit")                  \
    X(EEXIST, -11, "already exists")                              \
    X(ENOSPC, -12, "no space left on device")                     \
    X(EPERM, -13, "permission denied")                            \
    X(ECORRUPT, -14, "data is corrupt")                           \
    X(EBUSY, -15, "busy")                                         \
    X(ECANCELED, -16, "canceled")                                 \
    X(ERECONFIGURE, -17, "the worker group changed; reconfigure") \
    X(EUNSUPPORTED, -18, "not supported")                         \
    X(EBUDGET, -19, "restart budget exhausted")                   \
    X(ESTATE, -20, "operation not valid in the current state")    \
    X(ESYS, -21, "system call failed")                            \
    X(ERANGE, -22, "value out of range")                          \
    X(ENOTENOUGH, -23, "too few nodes joined before the timeout") \
    X(EROFS, -24, "read-only file system")                        \
    X(EDIVERGED, -25, "replicas that must be equal differ")

typedef enum elastic_errno {
    ELASTIC_OK = 0,
#define ELASTIC__ERR_ENUM(name, value, text) ELASTIC_##name = (value),
    ELASTIC_ERRNO_MAP(ELASTIC__ERR_ENUM)
#undef ELASTIC__ERR_ENUM
        ELASTIC_ERRNO_END_ = -1000
} elastic_errno;

/* A human sentence for a code ("timed out"); never NULL. */
ELASTIC_EXTERN const char *elastic_strerror(int err);
/* The code's name ("ELASTIC_ETIMEDOUT"); never NULL. */
ELASTIC_EXTERN const char *elastic_err_name(int err);
/* The detail of the last error on the calling thread ("connect 10.0.0.1:29400:
 * connection refused"), or "" when the last call gave none. Valid until the
 * thread's next library call. */
ELASTIC_EXTERN const char *elastic_last_error(void);

/* ---- memory -------------------------------------------------------------- */

/* Releases memory the library handed to the caller (values, lists, strings). */
ELASTIC_EXTERN void elastic_free(void *ptr);

/* ---- logging ------------------------------------------------------------- */

typedef enum elastic_log_level {
    ELASTIC_LOG_ERROR = 0,
    ELASTIC_LOG_WARN = 1,
    ELASTIC_LOG_INFO = 2,
    ELASTIC_LOG_DEBUG = 3
} elastic_log_level;

/* Receives every log line. Runs on whichever thread logged (library threads
 * included), so it must be thread-safe. `module` is "store", "rdzv", ... */
typedef void (*elastic_log_fn)(void *user, int level, const char *module, const char *message);

/* Replaces the log sink; NULL restores the default (stderr). Process-wide. */
ELASTIC_EXTERN void elastic_set_log_callback(elastic_log_fn fn, void *user);
/* Messages above `level` are dropped. Default: ELASTIC_LOG_WARN, or the value
 * of ELASTIC_LOG_LEVEL (error|warn|info|debug) in the environment. */
ELASTIC_EXTERN void elastic_set_log_level(int level);

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_COMMON_H */
