/*
 * The one validation of run ids and host-name-like names (see names.h): the
 * same alphabet and length for the command line, the C API and the
 * bindings, as docs/OPERATIONS.md states them.
 */
#include "common/names.h"

static const char run_id_alphabet[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

int elastic__check_run_id(const char *run_id, const char *what)
{
    size_t len = run_id != NULL ? strnlen(run_id, ELASTIC_RUN_ID_MAX + 1) : 0;
    if (len == 0 || len > ELASTIC_RUN_ID_MAX || strspn(run_id, run_id_alphabet) != len ||
        strcmp(run_id, ".") == 0 || strcmp(run_id, "..") == 0)
        return elastic__fail(
            ELASTIC_EINVAL,
            "%s: the run id must be 1-%d characters of [A-Za-z0-9._-] (not . or ..)", what,
            ELASTIC_RUN_ID_MAX);
    return 0;
}

bool elastic__host_name_ok(const char *name, size_t max)
{
    size_t len = name != NULL ? strnlen(name, max + 1) : 0;
    if (len == 0 || len > max || strspn(name, run_id_alphabet) != len) return false;
    char first = name[0];
    return (first >= 'a' && first <= 'z') || (first >= 'A' && first <= 'Z') ||
           (first >= '0' && first <= '9');
}
