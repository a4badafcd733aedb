/*
 * libFuzzer target for the checkpoint format decoders: manifest, shard
 * header, trailer and commit record. The first byte picks the decoder; the
 * next 4 give the data region's end for the manifest's layout checks.
 * Anything may be rejected; nothing may crash, leak or read out of bounds.
 */
#include "ckpt/ckpt.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5) return 0;
    uint8_t which = data[0];
    uint64_t data_end = CKPT_HEADER_BYTES + ((uint64_t)data[1] | (uint64_t)data[2] << 8 |
                                             (uint64_t)data[3] << 16 | (uint64_t)data[4] << 24);
    data += 5;
    size -= 5;
    switch (which % 4) {
    case 0: {
        ckpt_manifest m;
        if (ckpt__manifest_decode(data, size, CKPT_HEADER_BYTES, data_end, &m) == 0) {
            /* A decoded manifest re-encodes to the same bytes. */
            bytes__buf out = { 0 };
            if (ckpt__manifest_encode(&m, &out) == 0 &&
                (out.len != size || memcmp(out.data, data, size) != 0))
                abort();
            free(out.data);
            for (size_t i = 0; i < m.blob_count; i++)
                if (ckpt__manifest_find(&m, m.blobs[i].name) == NULL) abort();
            ckpt__manifest_free(&m);
        }
        break;
    }
    case 1: {
        ckpt_header h;
        (void)ckpt__header_decode(data, size, &h);
        break;
    }
    case 2: {
        ckpt_trailer t;
        (void)ckpt__trailer_decode(data, size, &t);
        break;
    }
    default: {
        ckpt_commit_record r;
        if (ckpt__commit_decode(data, size, &r) == 0) ckpt__commit_free(&r);
        break;
    }
    }
    return 0;
}
