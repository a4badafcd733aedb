/*
 * libelastic — keep distributed training running through failures.
 *
 * The whole public C ABI. What every module shares (versions, error codes,
 * timeouts, logging, memory) is in include/elastic/common.h; each module's
 * functions live in include/elastic/<module>.h; this file includes them all,
 * so that `#include <elastic.h>` is all a trainer ever writes.
 *
 * Conventions (see docs/ABI.md):
 *   - every function that can fail returns int: 0, or a negative ELASTIC_E* code;
 *     other outputs go through pointer parameters;
 *   - handles are opaque; `_free`/`_close` only release a handle (a call that ends
 *     something for every node says so in its name, e.g. elastic_rdzv_end_job);
 *   - public structs start with `size_t struct_size`: options are filled by
 *     elastic_<thing>_opts_init(&opts, sizeof opts), output structs get
 *     `out.struct_size = sizeof out` from the caller; the library reads and writes
 *     only that many bytes, so older and newer callers both work; NULL options
 *     mean "all defaults";
 *   - timeouts: > 0 waits up to that many ms, 0 does not wait, < 0 waits without
 *     limit, ELASTIC_TIMEOUT_DEFAULT takes the handle's default;
 *   - memory the library returns (values, strings, lists) is released with elastic_free();
 *   - the library never exits, never prints to stdout, never installs signal handlers
 *     behind the host's back (the few it installs are listed in docs/ABI.md); it logs
 *     through elastic_set_log_callback().
 *
 * Each include/elastic/<module>.h may also be included on its own: it includes
 * common.h and the module headers whose types it uses, inside its own guard.
 */
#ifndef ELASTIC_H
#define ELASTIC_H

#include "elastic/common.h"

/* The modules. Each header declares only elastic_<module>_* names. */
#include "elastic/store.h"
#include "elastic/rdzv.h"
#include "elastic/ckpt.h"
#include "elastic/worker.h"
#include "elastic/nccl.h"
#include "elastic/loop.h"
#include "elastic/agent.h"

#endif /* ELASTIC_H */
