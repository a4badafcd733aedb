/*
 * Error codes: names and sentences from the one X-macro list in elastic.h,
 * plus a per-thread detail string so a failure can say what exactly failed.
 */
#include "common/common.h"

#include <errno.h>
#include <stdio.h>

static _Thread_local char last_error_detail[512];

ELASTIC_EXTERN const char *elastic_strerror(int err)
{
    switch (err) {
    case ELASTIC_OK: return "success";
#define ELASTIC__ERR_TEXT(name, value, text) \
    case ELASTIC_##name: return text;
        ELASTIC_ERRNO_MAP(ELASTIC__ERR_TEXT)
#undef ELASTIC__ERR_TEXT
    default: return "unknown error";
    }
}

ELASTIC_EXTERN const char *elastic_err_name(int err)
{
    switch (err) {
    case ELASTIC_OK: return "ELASTIC_OK";
#define ELASTIC__ERR_NAME(name, value, text) \
    case ELASTIC_##name: return "ELASTIC_" #name;
        ELASTIC_ERRNO_MAP(ELASTIC__ERR_NAME)
#undef ELASTIC__ERR_NAME
    default: return "ELASTIC_EUNKNOWN";
    }
}

ELASTIC_EXTERN const char *elastic_last_error(void)
{
    return last_error_detail;
}

void elastic__clear_error(void)
{
    last_error_detail[0] = '\0';
}

int elastic__fail(int code, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_error_detail, sizeof last_error_detail, fmt, args);
    va_end(args);
    return code;
}

int elastic__from_errno(int err)
{
    switch (err) {
    case 0: return ELASTIC_OK;
    case ENOMEM: return ELASTIC_ENOMEM;
    case ETIMEDOUT: return ELASTIC_ETIMEDOUT;
    case ENOENT: return ELASTIC_ENOTFOUND;
    case EEXIST: return ELASTIC_EEXIST;
    case ENOSPC:
    case EDQUOT: return ELASTIC_ENOSPC;
    case EACCES:
    case EPERM: return ELASTIC_EPERM;
    case EROFS: return ELASTIC_EROFS;
    case EINVAL: return ELASTIC_EINVAL;
    case EIO: return ELASTIC_EIO;
    case EBUSY: return ELASTIC_EBUSY;
    case ECANCELED: return ELASTIC_ECANCELED;
    case ERANGE:
    case EOVERFLOW: return ELASTIC_ERANGE;
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case ENOTCONN:
    case EHOSTUNREACH:
    case ENETUNREACH: return ELASTIC_ECONNECT;
    default: return ELASTIC_ESYS;
    }
}
