/*
 * elasticctl's end of elastic__fail. The readers it shares with the library
 * (src/common: JSON, text, HTTP GET, Prometheus lines) are compiled into the
 * tool again and report a failure through elastic__fail: in the library that
 * fills elastic_last_error(), here it fills ctl_last_error(). The library's
 * copy is hidden (-fvisibility=hidden), so the two never meet.
 */
#include "common/common.h"
#include "elasticctl/ctl.h"

#include <stdarg.h>

static char last_detail[512];

int elastic__fail(int code, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_detail, sizeof last_detail, fmt, args);
    va_end(args);
    return code;
}

const char *ctl_last_error(void)
{
    return last_detail;
}
