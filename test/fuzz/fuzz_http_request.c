/* libFuzzer target: the metrics endpoint's request parser (common/http.c)
 * must accept or reject any bytes without reading out of bounds, and a head it
 * accepts must lie within the input and name a path. */
#include "common/http.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    elastic__http_request req;
    int rc = elastic__http_parse((const char *)data, size, &req);
    if (rc > 0 && ((size_t)rc > size || req.path[0] != '/')) abort();
    if (rc < 0 && req.status < 400) abort();
    return 0;
}
