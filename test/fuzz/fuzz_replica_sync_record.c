/* libFuzzer target for a node's memory-tier record as another node reads it
 * from the job's store (src/replica/sync.c): anything may be refused;
 * nothing may crash, leak or read out of bounds. */
#include "replica/replica.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int rc = replica__sync_record_parse((const char *)data, size);
    if (rc != 0 && rc != ELASTIC_ECORRUPT && rc != ELASTIC_EPROTO && rc != ELASTIC_ENOMEM) abort();
    elastic__clear_error();
    return 0;
}
