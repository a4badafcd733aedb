/*
 * A worker that allocates and touches memory until the kernel stops it: in a
 * memory cgroup with a small limit the OOM killer ends it with SIGKILL
 * (test_agent_oom_integration.c). Bounded: past --mib MiB it exits 5 (the
 * limit did not hold), so a host without one fails the test, never hangs.
 *
 *   oom_worker [--mib N]      default 1024
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long mib = 1024;
    if (argc == 3 && strcmp(argv[1], "--mib") == 0) mib = strtol(argv[2], NULL, 10);
    if (mib <= 0 || mib > 65536) {
        fprintf(stderr, "oom_worker: --mib must be 1..65536\n");
        return 2;
    }
    long page = sysconf(_SC_PAGESIZE);
    for (long i = 0; i < mib; i++) {
        char *p = malloc(1u << 20);
        if (p == NULL) return 4;
        for (long at = 0; at < (1L << 20); at += page) p[at] = 1; /* touched: charged */
    }
    fprintf(stderr, "oom_worker: %ld MiB allocated and not killed\n", mib);
    return 5;
}
