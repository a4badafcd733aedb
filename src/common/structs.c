/*
 * The growth rule for public structs (docs/ABI.md): a caller's struct may be
 * older (shorter) or newer (longer) than the library's; only the bytes both
 * know are exchanged, and nothing is ever written past the caller's size.
 */
#include "common/common.h"

int elastic__struct_size_check(size_t struct_size, const char *type)
{
    if (struct_size < sizeof(size_t))
        return elastic__fail(
            ELASTIC_EINVAL,
            "%s.struct_size is %zu, smaller than the field itself: set it to sizeof(%s)", type,
            struct_size, type);
    if (struct_size > ELASTIC__MAX_STRUCT_SIZE)
        return elastic__fail(ELASTIC_EINVAL,
                             "%s.struct_size is %zu (over %zu): the struct was not initialised; "
                             "set it to sizeof(%s)",
                             type, struct_size, ELASTIC__MAX_STRUCT_SIZE, type);
    return 0;
}

int elastic__struct_init(void *caller, size_t struct_size, const void *defaults, size_t full_size,
                         const char *type)
{
    if (caller == NULL)
        return elastic__fail(ELASTIC_EINVAL, "%s_init: the struct pointer is NULL", type);
    int rc = elastic__struct_size_check(struct_size, type);
    if (rc != 0) return rc;
    size_t known = struct_size < full_size ? struct_size : full_size;
    memcpy(caller, defaults, known);
    if (struct_size > known) memset((char *)caller + known, 0, struct_size - known);
    *(size_t *)caller = struct_size;
    return 0;
}

int elastic__struct_read(void *dst, size_t full_size, const void *caller, const char *type)
{
    if (caller == NULL) return 0;
    size_t struct_size = *(const size_t *)caller;
    int rc = elastic__struct_size_check(struct_size, type);
    if (rc != 0) return rc;
    /* An older caller's shorter struct: the rest keeps the defaults; a newer
     * caller's longer one: its extra fields are beyond what this library knows. */
    size_t known = struct_size < full_size ? struct_size : full_size;
    memcpy((char *)dst + sizeof(size_t), (const char *)caller + sizeof(size_t),
           known - sizeof(size_t));
    return 0;
}

int elastic__struct_write(void *caller, const void *src, size_t full_size, const char *type)
{
    if (caller == NULL) return elastic__fail(ELASTIC_EINVAL, "%s pointer is NULL", type);
    size_t struct_size = *(const size_t *)caller;
    int rc = elastic__struct_size_check(struct_size, type);
    if (rc != 0) return rc;
    size_t known = struct_size < full_size ? struct_size : full_size;
    memcpy((char *)caller + sizeof(size_t), (const char *)src + sizeof(size_t),
           known - sizeof(size_t));
    if (struct_size > known) memset((char *)caller + known, 0, struct_size - known);
    *(size_t *)caller = known; /* tells a newer caller how much this library filled */
    return 0;
}
