/*
 * The health module's insides: one round of node health checks (GPUs through
 * NVML, InfiniBand/RoCE ports through sysfs, the site's own command) giving a
 * list of findings, and a runner thread that repeats rounds. Verdicts:
 *   fatal   - stop this node's workers and step aside (a spare takes over);
 *   warning - an event and a metric, nothing stops;
 *   ok      - checked and healthy (listed so that a reader sees what ran).
 * docs/HEALTH.md has every check, its value and its verdict.
 */
#ifndef ELASTIC_HEALTH_H
#define ELASTIC_HEALTH_H

#include "common/common.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum health__verdict {
    HEALTH__OK = 0,
    HEALTH__WARNING = 1,
    HEALTH__FATAL = 2
} health__verdict;

#define HEALTH__MAX_GPUS     64
#define HEALTH__MAX_PORTS    64
#define HEALTH__MAX_FINDINGS 1024
#define HEALTH__CHECK_MAX    24
#define HEALTH__TEXT_MAX     192

typedef struct health__finding {
    char check[HEALTH__CHECK_MAX]; /* "xid", "ecc_uncorrected", "ib_port_state", ... */
    int gpu;                       /* NVML index; -1 when the finding is not a GPU's */
    char uuid[96];                 /* GPU-... ("" when unknown or not a GPU) */
    char pci_bus_id[32];           /* 00000000:3B:00.0 */
    char port[48];                 /* network findings: "mlx5_0/1" */
    long long value;               /* the check's number (docs/HEALTH.md says which) */
    health__verdict verdict;
    char text[HEALTH__TEXT_MAX]; /* one line for people: what it is and why it matters */
} health__finding;

/* What one GPU looked like in a round (the per-GPU metrics). -1: not read. */
typedef struct health__gpu {
    char uuid[96], pci_bus_id[32];
    bool present;
    long long temperature_c, ecc_uncorrected, recovery_action, throttle_reasons;
    long long pcie_width, pcie_width_max, pcie_gen, pcie_gen_max, nvlink_down, last_xid;
    health__verdict verdict; /* the worst of its findings this round */
} health__gpu;

typedef struct health__report {
    health__finding findings[HEALTH__MAX_FINDINGS];
    int count;
    int dropped; /* findings past HEALTH__MAX_FINDINGS (counted, not kept) */
    health__verdict worst;
    int gpu_count; /* GPUs NVML reports (0 without NVML) */
    health__gpu gpus[HEALTH__MAX_GPUS];
    char nvml_status[200]; /* "" when NVML was used, else why the GPU checks did not run */
    uint64_t cpu_ns;       /* CPU time of the round on the calling thread */
    uint64_t wall_ns;      /* wall time, the site command included */
    uint64_t round;        /* 1 for the first round of a monitor */
} health__report;

typedef struct health__config {
    bool gpu;          /* the NVML checks (skipped with one line where NVML is missing) */
    bool gpu_required; /* NVML missing is then a fatal finding, not a skip */
    bool network;      /* InfiniBand/RoCE ports under sysfs_root */
    int expected_gpus; /* > 0: fewer GPUs is fatal; 0: the first round's count is the baseline */
    int temperature_max_c; /* warning at or above; 0: the device's slowdown threshold - 5 (else 85) */
    const char *sysfs_root; /* NULL: "/sys" (tests point it at a fake tree) */
    const char *site_cmd;   /* NULL: none; run with /bin/sh -c each round */
    int site_timeout_ms;    /* the site command is killed past this (fatal) */
    int xid_poll_ms;        /* how long the Xid watcher waits per call (bounds close()) */
    /* Called on the Xid watcher's thread when an Xid arrives (may be NULL):
     * lets the owner run a round at once instead of at the next period. */
    void (*on_xid)(void *arg);
    void *on_xid_arg;
} health__config;

void health__config_defaults(health__config *config);

typedef struct health__monitor health__monitor;

/* Loads NVML (when config->gpu), enumerates the GPUs, starts the Xid watcher.
 * NVML missing is not an error: its rounds say why in nvml_status. */
int health__open(const health__config *config, health__monitor **out);
/* Runs every check once. The first round takes the baselines that "rising"
 * and "went down" compare against. Never fails: what cannot be read is a
 * finding or is skipped (docs/HEALTH.md). Not thread-safe per monitor. */
void health__round(health__monitor *monitor, health__report *report);
/* Any thread: a site command running in a round is killed now (the owner is
 * stopping); later rounds run none. */
void health__cancel(health__monitor *monitor);
void health__close(health__monitor *monitor);

const char *health__verdict_name(health__verdict verdict);
/* What an Xid means (one phrase) and its verdict (xid.c). */
const char *health__xid_meaning(unsigned xid, health__verdict *verdict);

/* ---- the parts of a round (one file each) ------------------------------------ */

/* report.c: copies what a report holds (its findings up to count). */
void health__report_copy(health__report *dst, const health__report *src);
/* report.c: appends a finding (counted as dropped when full); raises worst. */
health__finding *health__add(health__report *report, const char *check, int gpu,
                             health__verdict verdict, long long value, const char *fmt, ...)
    ELASTIC__PRINTF(6, 7);

/* sitecmd.c: runs `cmd` with /bin/sh -c, its output (stdout and stderr, the
 * first 4 KiB kept) read until it exits or timeout_ms passes, when its
 * process group is killed. Exit 0 is ok; anything else is fatal, the first
 * line of its output the reason. Adds one "site_cmd" finding. `cancel` (may
 * be NULL) becoming true ends the wait early the same way (the owner stops). */
void health__site_check(const char *cmd, int timeout_ms, const _Atomic bool *cancel,
                        health__report *report);

/* net.c: InfiniBand/RoCE ports under <root>/class/infiniband. */
typedef struct health__port_baseline {
    char name[48];
    bool was_active;
    long long link_downed, errors;
} health__port_baseline;
typedef struct health__net_state {
    health__port_baseline ports[HEALTH__MAX_PORTS];
    int count;
    bool taken;
} health__net_state;
void health__net_check(const char *sysfs_root, health__net_state *state, health__report *report);

/* gpu.c: the NVML checks of every GPU. NULL with `why` where NVML is missing. */
typedef struct health__gpus health__gpus;
health__gpus *health__gpus_open(const health__config *config, char *why, size_t why_size);
void health__gpus_check(health__gpus *gpus, const health__config *config, health__report *report);
void health__gpus_close(health__gpus *gpus);

/* xid.c: a thread waiting on an NVML event set for Xids of the given devices. */
struct nvml__api;
typedef struct health__xid_watch health__xid_watch;
typedef struct health__xid {
    int gpu;
    unsigned xid;
    uint64_t wall_ms;
} health__xid;
/* NULL (with a log line) where the driver has no event support: no Xid checks then. */
health__xid_watch *health__xid_watch_start(const struct nvml__api *api, void *const *devices,
                                           int count, const health__config *config);
/* Moves the Xids seen since the last call into out (at most max); returns how
 * many, and *lost the ones that did not fit in the watcher's ring meanwhile. */
int health__xid_drain(health__xid_watch *watch, health__xid *out, int max, int *lost);
void health__xid_watch_stop(health__xid_watch *watch);

/* metrics.c: the report as Prometheus text (per-GPU gauges, the node's verdict). */
struct elastic__text;
void health__render_metrics(const health__report *report, struct elastic__text *out);

/* ---- the runner: rounds on a thread ------------------------------------------ */

typedef struct health__runner health__runner;
/* Called on the runner's thread after each round; `report` is valid only
 * during the call (copy what is kept). */
typedef void (*health__deliver_fn)(const health__report *report, void *arg);

/* Starts a thread that runs a round at once, then every interval_ms (and at
 * once after an Xid or health__runner_now). interval_ms <= 0: only on request. */
int health__runner_start(const health__config *config, int interval_ms, health__deliver_fn deliver,
                         void *arg, health__runner **out);
/* Asks for a round as soon as the current one (if any) ends; returns the
 * number of the first round that starts after this call (a report with a
 * round at least this is fresh). */
uint64_t health__runner_now(health__runner *runner);
/* Stops the thread: a running site command is killed; an NVML call the
 * driver does not return from is waited for at most 5 s, then the thread is
 * left behind (and its memory kept: the process is ending). */
void health__runner_stop(health__runner *runner);

#endif /* ELASTIC_HEALTH_H */
