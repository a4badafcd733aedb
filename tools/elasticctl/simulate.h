/*
 * `elasticctl simulate`: a seeded discrete-event simulation of a long
 * synchronous training job at scale, to say what failures would cost it under
 * each launcher's recovery profile. Failures arrive as a Poisson process
 * (rate per GPU-hour x GPUs) with a cause mix (Llama 3's by default); each
 * cause needs a kind of recovery (a worker restart in place, a node replaced,
 * a hang waited out); a profile gives each recovery step's time, measured here
 * where it can be and a named assumption where it cannot.
 *
 * Between two failures the job alternates checkpoint intervals of training
 * and save stalls; at a failure the training since the last completed save is
 * redone (the same "redone" bucket as `elasticctl goodput`). Each stretch
 * between events is computed in O(1), so months of a 100k-GPU job take
 * milliseconds. Part of elasticctl only.
 */
#ifndef ELASTICCTL_SIMULATE_H
#define ELASTICCTL_SIMULATE_H

#include "common/common.h"
#include "common/goodput.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What a failure needs (how its cause is recovered from). */
typedef enum sim_class {
    SIM_SOFTWARE, /* a process dies; restart in place on the same nodes */
    SIM_GPU,      /* a GPU fault kills its worker; the node is swapped out */
    SIM_HOST,     /* the host dies or goes away; the node is swapped out */
    SIM_HANG,     /* collectives stall (network, NCCL): no process exits */
    SIM_CLASSES
} sim_class;

/* A profile's and the model's parameters (seconds unless the name says). */
typedef enum sim_param {
    /* the model, shared by every profile */
    SP_STEP_S,   /* one training step */
    SP_STATE_GB, /* the job's checkpoint state, all GPUs together (GB) */
    SP_GPUS_PER_NODE,
    SP_RATE, /* unexpected interruptions per GPU-hour */
    /* a launcher's recovery */
    SP_DETECT_SOFTWARE_S, /* failure -> noticed, by class */
    SP_DETECT_GPU_S,
    SP_DETECT_HOST_S,
    SP_DETECT_HANG_S,
    SP_STOP_S,      /* noticed -> every worker stopped */
    SP_RDZV_BASE_S, /* re-forming: base + per node */
    SP_RDZV_PER_NODE_MS,
    SP_REPLACE_S,     /* a swapped-out node's replacement joins (0: a warm spare waits) */
    SP_RESTART_S,     /* a worker process started -> first step (measured: spawn, API) */
    SP_INTERPRETER_S, /* the trainer's interpreter and imports on a real node */
    SP_INIT_S,        /* CUDA context + NCCL communicators at scale */
    SP_RESTORE_GBPS,  /* checkpoint load per GPU (GB/s) */
    SP_SAVE_GBPS,     /* a save's stall on the training path per GPU (GB/s) */
    SP_INTERVAL_S,    /* checkpoint interval; 0: the best one found */
    SP_EVERY_STEPS,   /* > 0: save every N steps (a memory tier), the interval follows */
    SP_PARAMS
} sim_param;

#define SIM_MAX_PROFILES 16
#define SIM_SOURCE_LEN   200

typedef struct sim_profile {
    char name[64];
    double v[SP_PARAMS];
    bool set[SP_PARAMS];
    char source[SP_PARAMS][SIM_SOURCE_LEN]; /* "measured: ...", "assumption: ...", "target: ..." */
} sim_profile;

typedef struct sim_profiles {
    sim_profile model; /* the model's parameters (section "model") */
    sim_profile p[SIM_MAX_PROFILES];
    int count;
} sim_profiles;

/* A failure of a trace (validation: a real run's own fault times). */
typedef struct sim_failure {
    double at_s;
    int cls;
} sim_failure;

typedef struct sim_job {
    double gpus, duration_s;
    uint64_t seed;
    double interval_s;        /* the checkpoint interval used (resolved) */
    const sim_failure *trace; /* non-NULL: these failures instead of the random process */
    size_t trace_count;
} sim_job;

typedef struct sim_result {
    double wall_s, productive_s, ettr;
    double lost_s[GP_BUCKETS]; /* the same buckets as `elasticctl goodput` */
    double failures;
    double class_lost_s[SIM_CLASSES];
    bool truncated; /* SIM_MAX_FAILURES reached: the rest of the run counted as idle */
} sim_result;

#define SIM_MAX_FAILURES 10000000.0 /* a bound on one run's work (rates are validated loosely) */

/* The cause mix: name, share, class. */
typedef struct sim_cause {
    const char *name;
    int count; /* interruptions in Llama 3's 54 days */
    int cls;
} sim_cause;
extern const sim_cause sim__causes[];
extern const int sim__cause_count;

const char *sim__param_name(int param);
const char *sim__class_name(int cls);

/* Profiles: the shipped ones (simulate_defaults.c), replaced by `text` when
 * non-NULL. Lines "profile NAME", "model", "KEY VALUE SOURCE..."; "#" comments.
 * Every key of the model and of each profile must be given, with a source. */
int sim__profiles_parse(const char *text, const char *origin, sim_profiles *out);
const char *sim__default_profiles(void);

/* A profile's value, the model's where the profile does not set it. */
double sim__value(const sim_profiles *all, const sim_profile *p, int param);

/* The checkpoint interval a profile uses at a scale: every N steps, or the
 * interval set, or (0) best_s. */
double sim__interval(const sim_profiles *all, const sim_profile *p, double best_s);

/* The save stall and restore time per checkpoint at a scale (seconds). */
double sim__save_s(const sim_profiles *all, const sim_profile *p, double gpus);
double sim__restore_s(const sim_profiles *all, const sim_profile *p, double gpus);

/* One run. */
void sim__run(const sim_profiles *all, const sim_profile *p, const sim_job *job, sim_result *out);

/* The interval with the best mean ETTR over `seeds` seeds (log-spaced search). */
double sim__best_interval(const sim_profiles *all, const sim_profile *p, double gpus,
                          double duration_s, int seeds, uint64_t seed);

/* One occurrence of a deterministic bug in the training code, restarted:
 * a software failure's recovery (detect, stop, rendezvous, restart,
 * restore) and the training replayed from the last checkpoint to the bug's
 * step, half an interval on average (seconds). Its GPU-hours at a scale are
 * this x GPUs / 3600 per restart: torchrun's counting restarts it
 * --max-restarts times, the failure policy once (it stops at the second
 * occurrence; at the first when most ranks raise it at once). */
double sim__bug_cycle_s(const sim_profiles *all, const sim_profile *p, double gpus,
                        double interval_s);

/* Young/Daly: sqrt(2 x save cost x MTBF). */
double sim__young_daly(const sim_profiles *all, const sim_profile *p, double gpus);

#endif /* ELASTICCTL_SIMULATE_H */
