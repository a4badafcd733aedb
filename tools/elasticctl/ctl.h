/*
 * elasticctl's own code (tools/elasticctl/) behind one small interface, so the
 * command line (tools/elasticctl.c) sees only libelastic's public API and this
 * header. Calls return 0 or an ELASTIC_E* code with the detail in
 * ctl_last_error() (not elastic_last_error(): this code is not the library's).
 */
#ifndef ELASTICCTL_CTL_H
#define ELASTICCTL_CTL_H

#include <stdbool.h>
#include <stdio.h>

#define CTL_MAX_EVENT_LOGS 256

/* `elasticctl status`: GETs an agent's /metrics and /healthz (--metrics-port;
 * one deadline for each exchange) and prints the job at a glance to out. */
int ctl_status(const char *endpoint, int timeout_ms, FILE *out);

/* `elasticctl timeline`: reads the event logs (run_id NULL: they must hold
 * one job) and writes the SVG picture to svg_path, created only once the
 * logs were read. */
int ctl_timeline(const char *const *paths, int count, const char *run_id, const char *svg_path);
/* `elasticctl summary`: the same logs as text on out. */
int ctl_summary(const char *const *paths, int count, const char *run_id, FILE *out);

/* `elasticctl explain`: per failure of the job in the logs, its class, the
 * rule of the failure policy that fired, the decision, what to look at. */
int ctl_explain(const char *const *paths, int count, const char *run_id, FILE *out);

/* `elasticctl goodput`: where the job's time went (src/common/goodput.h), as
 * text or JSON on out; svg_path: also the stacked bars there; profile_path and
 * trace_path: the run's measured recovery profile and its failures, for
 * `elasticctl simulate --profile ... --trace ...`. */
typedef struct ctl_goodput_opts {
    bool json;
    const char *svg_path, *profile_path, *trace_path; /* NULL: not written */
} ctl_goodput_opts;
int ctl_goodput(const char *const *paths, int count, const char *run_id,
                const ctl_goodput_opts *opts, FILE *out);

/* `elasticctl simulate` (tools/elasticctl/simulate*.c). */
#define CTL_SIM_MAX_SCALES 8
typedef struct ctl_simulate_opts {
    double gpus[CTL_SIM_MAX_SCALES];
    int gpu_count;
    double days;
    int seeds;
    unsigned long long seed;
    const char *profile_path; /* NULL: the shipped profiles */
    const char *trace_path;   /* non-NULL: one run per profile over these failures */
    const char *only;         /* non-NULL: that profile only */
    int bug_restarts;         /* the deterministic-bug table's --max-restarts (0: 10) */
    bool json;
} ctl_simulate_opts;
int ctl_simulate(const ctl_simulate_opts *opts, FILE *out);

/* A whole decimal number in [min, max] by the library's one grammar
 * (src/common/parse_int.c): 0, or ELASTIC_EINVAL. */
int ctl_parse_int(const char *text, long long min, long long max, long long *out);

const char *ctl_last_error(void);

#endif /* ELASTICCTL_CTL_H */
