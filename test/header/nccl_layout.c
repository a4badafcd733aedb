/* Compiled (syntax only) by `make header-check` where the CUDA toolkit's
 * nccl.h exists: the NCCL ABI that src/nccl/nccl.h declares by hand must
 * match the real header's layout. */
#include "nccl/nccl.h"

#include <nccl.h>
#include <stddef.h>

_Static_assert(sizeof(nccl__unique_id) == sizeof(ncclUniqueId), "ncclUniqueId size");
_Static_assert(sizeof(nccl__config) == sizeof(ncclConfig_t), "ncclConfig_t size");
_Static_assert(offsetof(nccl__config, blocking) == offsetof(ncclConfig_t, blocking), "blocking");
_Static_assert(offsetof(nccl__config, comm_name) == offsetof(ncclConfig_t, commName), "commName");
_Static_assert(offsetof(nccl__config, nvlink_centric_sched) ==
                   offsetof(ncclConfig_t, nvlinkCentricSched),
               "the last field");
_Static_assert(NCCL__IN_PROGRESS == ncclInProgress && NCCL__SHRINK_ABORT == NCCL_SHRINK_ABORT,
               "constants");
