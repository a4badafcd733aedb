/*
 * elasticctl's numbers (--port, --timeout, store add's delta) read by the
 * library's one decimal grammar: src/common/parse_int.c is compiled into the
 * tool, and this is the door the public-API-only command line goes through.
 */
#include "common/parse_int.h"
#include "elasticctl/ctl.h"

#include <stdint.h>

int ctl_parse_int(const char *text, long long min, long long max, long long *out)
{
    int64_t value;
    int rc = elastic__parse_i64(NULL, text, min, max, &value);
    if (rc == 0) *out = value;
    return rc;
}
