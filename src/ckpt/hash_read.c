/*
 * Reading a chunk and checking it in one pass: the bytes are read in pieces
 * small enough to stay in the core's cache and each piece is hashed right
 * after it lands, so the checksum costs no second trip through memory (a
 * 4 MiB chunk read whole, then hashed, is read from DRAM twice: measured
 * here as most of a restore's verify time).
 */
#include "ckpt/ckpt.h"

#include <xxhash.h>

/* Well under a core's L2 (1 MiB here), large enough that a read costs
 * little more per byte than one big read. */
#define HASH_PIECE (256u << 10)

static int read_hashed(int fd, uint8_t *dst, bool advance, size_t len, uint64_t offset,
                       const char *path, uint64_t *hash)
{
    XXH3_state_t *state = XXH3_createState();
    if (state == NULL || XXH3_64bits_reset(state) != XXH_OK) {
        XXH3_freeState(state);
        return elastic__fail(ELASTIC_ENOMEM, "hash state");
    }
    int rc = 0;
    for (size_t done = 0; done < len && rc == 0;) {
        size_t n = len - done < HASH_PIECE ? len - done : HASH_PIECE;
        uint8_t *at = advance ? dst + done : dst;
        rc = ckpt__pread_all(fd, at, n, offset + done, path);
        if (rc == 0) XXH3_64bits_update(state, at, n);
        done += n;
    }
    if (rc == 0) *hash = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    return rc;
}

int ckpt__pread_hashed(int fd, void *dst, size_t len, uint64_t offset, const char *path,
                       uint64_t *hash)
{
    return read_hashed(fd, dst, true, len, offset, path, hash);
}

size_t ckpt__hash_window(void)
{
    return HASH_PIECE;
}

int ckpt__hash_range(int fd, void *window, size_t len, uint64_t offset, const char *path,
                     uint64_t *hash)
{
    return read_hashed(fd, window, false, len, offset, path, hash);
}
