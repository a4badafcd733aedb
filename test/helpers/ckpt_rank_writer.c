/*
 * One rank of a distributed checkpoint test: commits its shard of steps
 * FIRST..LAST (content derived from step and rank, plus a replicated
 * "config" blob), and kills itself just before committing DIE_AT (0: never).
 * With ENDPOINT the global commit goes through that store (4 s commit
 * timeout; exit status 3 when it times out), else through the shared DIR.
 * Usage: ckpt_rank_writer DIR RANK WORLD GENERATION FIRST LAST DIE_AT [ENDPOINT]
 */
#include "support/ckpt_content.h"

#include <inttypes.h>
#include <signal.h>

int main(int argc, char **argv)
{
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: %s DIR RANK WORLD GENERATION FIRST LAST DIE_AT [ENDPOINT]\n",
                argv[0]);
        return 2;
    }
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.rank = (uint32_t)atoi(argv[2]);
    o.world = (uint32_t)atoi(argv[3]);
    o.generation = strtoull(argv[4], NULL, 10);
    o.chunk_bytes = 64 << 10;
    o.threads = 1;
    uint64_t first = strtoull(argv[5], NULL, 10), last = strtoull(argv[6], NULL, 10);
    uint64_t die_at = strtoull(argv[7], NULL, 10);
    elastic_store *store = NULL;
    int rc = argc == 9 ? elastic_store_connect(argv[8], NULL, &store) : 0;
    o.store = store;
    o.commit_timeout_ms = 4000;
    elastic_ckpt *c = NULL;
    if (rc == 0) rc = elastic_ckpt_open(argv[1], &o, &c);
    for (uint64_t step = first; rc == 0 && step <= last; step++) {
        elastic_ckpt_txn *txn;
        rc = elastic_ckpt_begin(c, step, &txn);
        if (rc) break;
        char config[64];
        int len = snprintf(config, sizeof config, "step=%" PRIu64, step);
        rc = ckpt_test_put_all(txn, step, o.rank);
        if (rc == 0)
            rc =
                elastic_ckpt_put_flags(txn, "config", config, (size_t)len, ELASTIC_CKPT_REPLICATED);
        if (rc) {
            elastic_ckpt_abort(txn);
            break;
        }
        if (step == die_at) raise(SIGKILL);
        rc = elastic_ckpt_commit(txn);
    }
    if (rc)
        fprintf(stderr, "rank %s: %s (%s)\n", argv[2], elastic_err_name(rc), elastic_last_error());
    elastic_ckpt_close(c);
    elastic_store_close(store);
    return rc == ELASTIC_ETIMEDOUT ? 3 : rc ? 1 : 0;
}
