/* Shared by the health tests: the NVML double, its state file, finding lookups. */
#ifndef ELASTIC_TEST_HEALTH_FIXTURE_H
#define ELASTIC_TEST_HEALTH_FIXTURE_H

#include "test.h"
#include "health/health.h"

#include <stdio.h>
#include <stdlib.h>

/* Points the health module at the NVML double with a state file in the test's directory. */
static inline void health_use_double(void)
{
    const char *lib = getenv("ELASTIC_NVML_DOUBLE");
    if (lib == NULL) SKIP("ELASTIC_NVML_DOUBLE not set (run through make test)");
    setenv("ELASTIC_NVML_LIBRARY", lib, 1);
    char path[4096];
    snprintf(path, sizeof path, "%s/nvml_state", test_tmpdir());
    setenv("NVML_DOUBLE_STATE", path, 1);
}

/* Replaces the double's state at once (written aside, then renamed over). */
static inline void health_state(const char *text)
{
    const char *path = getenv("NVML_DOUBLE_STATE");
    ASSERT(path != NULL);
    char aside[4200];
    snprintf(aside, sizeof aside, "%s.new", path);
    FILE *f = fopen(aside, "w");
    ASSERT(f != NULL);
    ASSERT(fputs(text, f) >= 0);
    ASSERT(fclose(f) == 0);
    ASSERT(rename(aside, path) == 0);
}

static inline health__report *health_new_report(void)
{
    health__report *r = calloc(1, sizeof *r);
    ASSERT(r != NULL);
    return r;
}

/* The finding of `check` for `gpu` (-1: a node's), or NULL. */
static inline const health__finding *health_find(const health__report *r, const char *check,
                                                 int gpu)
{
    for (int i = 0; i < r->count; i++)
        if (strcmp(r->findings[i].check, check) == 0 && r->findings[i].gpu == gpu)
            return &r->findings[i];
    return NULL;
}

static inline int health_count(const health__report *r, const char *check)
{
    int n = 0;
    for (int i = 0; i < r->count; i++) n += strcmp(r->findings[i].check, check) == 0;
    return n;
}

/* The finding, which must be there with this verdict. */
static inline const health__finding *health_expect(const health__report *r, const char *check,
                                                   int gpu, health__verdict verdict)
{
    const health__finding *f = health_find(r, check, gpu);
    if (f == NULL) FAIL("no %s finding for gpu %d (%d findings)", check, gpu, r->count);
    if (f->verdict != verdict)
        FAIL("%s of gpu %d: %s, expected %s (%s)", check, gpu, health__verdict_name(f->verdict),
             health__verdict_name(verdict), f->text);
    return f;
}

/* A monitor of the GPU checks only (no network, no site command). */
static inline health__monitor *health_gpu_monitor(int expected_gpus)
{
    health__config config;
    health__config_defaults(&config);
    config.network = false;
    config.expected_gpus = expected_gpus;
    health__monitor *m = NULL;
    ASSERT_OK(health__open(&config, &m));
    return m;
}

#endif
