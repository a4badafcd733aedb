/*
 * Crash-consistency helper: commits checkpoints with content derived from the
 * step (test/support/ckpt_content.h) in an endless loop, printing each step
 * once its commit returned, until the test SIGKILLs it at a random moment.
 * Usage: ckpt_crash_writer DIR [threads]
 */
#include "support/ckpt_content.h"

#include <inttypes.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [threads]\n", argv[0]);
        return 2;
    }
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.chunk_bytes = 64 << 10;
    o.keep_last = 3;
    o.keep_every = 10;
    o.threads = argc > 2 ? atoi(argv[2]) : 2;
    elastic_ckpt *c;
    int rc = elastic_ckpt_open(argv[1], &o, &c);
    if (rc) {
        fprintf(stderr, "open: %s (%s)\n", elastic_err_name(rc), elastic_last_error());
        return 1;
    }
    uint64_t step = 0;
    if (elastic_ckpt_latest(c, &step) != 0) step = 0;
    for (;;) {
        step++;
        rc = ckpt_test_save(c, step, 0);
        if (rc) {
            fprintf(stderr, "save %" PRIu64 ": %s (%s)\n", step, elastic_err_name(rc),
                    elastic_last_error());
            return 1;
        }
        printf("%" PRIu64 "\n", step);
        fflush(stdout);
    }
}
