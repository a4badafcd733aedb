/*
 * The CPU cost of one health check round (every NVML check of every GPU, the
 * InfiniBand/RoCE ports, no site command), as the agent runs it every
 * --health-check-interval. Against the NVML double (ELASTIC_NVML_LIBRARY, its
 * state in NVML_DOUBLE_STATE) or the real driver (test/gpu/run.sh).
 *
 *   health_bench [--rounds N] [--print]
 *
 * --print first lists every finding of one round (check, GPU, value, verdict,
 * text): on a real GPU that is what each check read. Then one line:
 *   rounds R gpus G findings F cpu_us median M p99 P wall_us median W
 */
#include "health/health.h"

#include <stdio.h>
#include <stdlib.h>

static int compare(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int rounds = 200;
    bool print = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--print") == 0)
            print = true;
        else {
            fprintf(stderr, "usage: health_bench [--rounds N] [--print]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 1000000) {
        fprintf(stderr, "health_bench: --rounds must be 1..1000000\n");
        return 2;
    }
    health__config config;
    health__config_defaults(&config);
    health__monitor *m = NULL;
    if (health__open(&config, &m) != 0) {
        fprintf(stderr, "health_bench: %s\n", elastic_last_error());
        return 1;
    }
    health__report *r = calloc(1, sizeof *r);
    uint64_t *cpu = calloc((size_t)rounds, sizeof *cpu),
             *wall = calloc((size_t)rounds, sizeof *wall);
    if (r == NULL || cpu == NULL || wall == NULL) return 1;
    health__round(m, r); /* the first takes the baselines: not counted */
    if (r->nvml_status[0] != '\0') printf("# %s\n", r->nvml_status);
    if (print) {
        printf("%-16s %-4s %-14s %-8s %s\n", "check", "gpu", "value", "verdict", "text");
        for (int i = 0; i < r->count; i++) {
            const health__finding *f = &r->findings[i];
            char where[64];
            snprintf(where, sizeof where, "%d", f->gpu);
            printf("%-16s %-4s %-14lld %-8s %s%s%s\n", f->check, f->port[0] ? f->port : where,
                   f->value, health__verdict_name(f->verdict), f->text, f->uuid[0] ? " " : "",
                   f->uuid);
        }
        printf("# first round: cpu %.1f us, wall %.1f us\n", r->cpu_ns / 1e3, r->wall_ns / 1e3);
    }
    for (int i = 0; i < rounds; i++) {
        health__round(m, r);
        cpu[i] = r->cpu_ns;
        wall[i] = r->wall_ns;
    }
    qsort(cpu, (size_t)rounds, sizeof *cpu, compare);
    qsort(wall, (size_t)rounds, sizeof *wall, compare);
    printf("rounds %d gpus %d findings %d cpu_us median %.1f p99 %.1f wall_us median %.1f\n",
           rounds, r->gpu_count, r->count, cpu[rounds / 2] / 1e3, cpu[(rounds * 99) / 100] / 1e3,
           wall[rounds / 2] / 1e3);
    health__close(m);
    free(r);
    free(cpu);
    free(wall);
    return 0;
}
