/*
 * The simulation itself (simulate.h). Time moves from event to event: a
 * failure, the end of a recovery step, the job's end. Between a recovery and
 * the next failure the job trains in cycles of (interval of training, save
 * stall); the cycles that fit are counted at once, and what the failure cuts
 * short is the redone work (training since the last save) or a lost stall.
 * A failure during a recovery starts the recovery again with its own needs.
 */
#include "elasticctl/simulate.h"

#include <math.h>
#include <string.h>

/* Llama 3 405B, 16,384 H100s, 54 days: 419 unexpected interruptions by root
 * cause ("The Llama 3 Herd of Models", 2024, table 5). The class is how this
 * simulator recovers from each: a GPU or host fault takes its node out of the
 * job; network and NCCL watchdog faults stall collectives (a hang); software
 * and SDC (caught by the trainer's checks) restart in place. */
const sim_cause sim__causes[] = {
    { "faulty GPU", 148, SIM_GPU },
    { "GPU HBM3 memory", 72, SIM_GPU },
    { "software bug", 54, SIM_SOFTWARE },
    { "network switch/cable", 35, SIM_HANG },
    { "host maintenance", 32, SIM_HOST },
    { "GPU SRAM memory", 19, SIM_GPU },
    { "GPU system processor", 17, SIM_GPU },
    { "NIC", 7, SIM_HANG },
    { "NCCL watchdog timeout", 7, SIM_HANG },
    { "silent data corruption", 6, SIM_SOFTWARE },
    { "GPU thermal interface + sensor", 6, SIM_GPU },
    { "SSD", 3, SIM_HOST },
    { "power supply", 3, SIM_HOST },
    { "server chassis", 2, SIM_HOST },
    { "IO expansion board", 2, SIM_HOST },
    { "dependency", 2, SIM_SOFTWARE },
    { "CPU", 2, SIM_HOST },
    { "system memory", 2, SIM_HOST },
};
const int sim__cause_count = (int)(sizeof sim__causes / sizeof sim__causes[0]);

static const char *const class_names[SIM_CLASSES] = { "software", "gpu", "host", "hang" };

const char *sim__class_name(int cls)
{
    return cls >= 0 && cls < SIM_CLASSES ? class_names[cls] : "?";
}

/* splitmix64: a seeded stream, the same on every machine. */
static uint64_t next_u64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *state) /* (0, 1] */
{
    return ((double)(next_u64(state) >> 11) + 1.0) / 9007199254740992.0;
}

static int draw_class(uint64_t *state)
{
    int total = 0;
    for (int i = 0; i < sim__cause_count; i++) total += sim__causes[i].count;
    double at = uniform01(state) * total;
    for (int i = 0; i < sim__cause_count; i++) {
        at -= sim__causes[i].count;
        if (at <= 0) return sim__causes[i].cls;
    }
    return SIM_SOFTWARE;
}

double sim__value(const sim_profiles *all, const sim_profile *p, int param)
{
    return p->set[param] ? p->v[param] : all->model.v[param];
}

double sim__save_s(const sim_profiles *all, const sim_profile *p, double gpus)
{
    double gbps = sim__value(all, p, SP_SAVE_GBPS);
    return gbps > 0 ? sim__value(all, p, SP_STATE_GB) / gpus / gbps : 0;
}

double sim__restore_s(const sim_profiles *all, const sim_profile *p, double gpus)
{
    double gbps = sim__value(all, p, SP_RESTORE_GBPS);
    return gbps > 0 ? sim__value(all, p, SP_STATE_GB) / gpus / gbps : 0;
}

double sim__interval(const sim_profiles *all, const sim_profile *p, double best_s)
{
    double every = sim__value(all, p, SP_EVERY_STEPS);
    if (every > 0) return every * sim__value(all, p, SP_STEP_S);
    double set = sim__value(all, p, SP_INTERVAL_S);
    return set > 0 ? set : best_s;
}

double sim__young_daly(const sim_profiles *all, const sim_profile *p, double gpus)
{
    double rate = sim__value(all, p, SP_RATE) * gpus / 3600.0; /* per second */
    double mtbf = rate > 0 ? 1.0 / rate : INFINITY;
    return sqrt(2.0 * sim__save_s(all, p, gpus) * mtbf);
}

/* A recovery's steps in order, with their buckets. */
typedef struct recovery_step {
    int bucket;
    double s;
} recovery_step;

static int recovery_of(const sim_profiles *all, const sim_profile *p, double gpus, int cls,
                       bool first_start, recovery_step *steps)
{
    static const int detect_param[SIM_CLASSES] = { SP_DETECT_SOFTWARE_S, SP_DETECT_GPU_S,
                                                   SP_DETECT_HOST_S, SP_DETECT_HANG_S };
    double nodes = ceil(gpus / sim__value(all, p, SP_GPUS_PER_NODE));
    double rdzv = sim__value(all, p, SP_RDZV_BASE_S) +
                  sim__value(all, p, SP_RDZV_PER_NODE_MS) * nodes / 1000.0;
    bool replaced = cls == SIM_GPU || cls == SIM_HOST;
    int n = 0;
    if (!first_start) {
        steps[n++] = (recovery_step){ GP_DETECTION, sim__value(all, p, detect_param[cls]) };
        steps[n++] = (recovery_step){ GP_STOPPING, sim__value(all, p, SP_STOP_S) };
    }
    steps[n++] =
        (recovery_step){ GP_RENDEZVOUS,
                         rdzv + (replaced && !first_start ? sim__value(all, p, SP_REPLACE_S) : 0) };
    steps[n++] = (recovery_step){ GP_RESTART, sim__value(all, p, SP_RESTART_S) +
                                                  sim__value(all, p, SP_INTERPRETER_S) +
                                                  sim__value(all, p, SP_INIT_S) };
    if (!first_start) steps[n++] = (recovery_step){ GP_RESTORE, sim__restore_s(all, p, gpus) };
    return n;
}

double sim__bug_cycle_s(const sim_profiles *all, const sim_profile *p, double gpus,
                        double interval_s)
{
    recovery_step steps[8];
    int n = recovery_of(all, p, gpus, SIM_SOFTWARE, false, steps);
    double s = 0;
    for (int i = 0; i < n; i++) s += steps[i].s;
    return s + interval_s / 2;
}

typedef struct sim_state {
    const sim_profiles *all;
    const sim_profile *p;
    const sim_job *job;
    sim_result *out;
    uint64_t rng;
    double t, rate, next_failure;
    int next_class;
    size_t trace_at;
} sim_state;

static void draw_next(sim_state *s)
{
    const sim_job *job = s->job;
    if (job->trace != NULL) {
        if (s->trace_at < job->trace_count) {
            s->next_failure = job->trace[s->trace_at].at_s;
            s->next_class = job->trace[s->trace_at].cls;
            s->trace_at++;
        } else {
            s->next_failure = INFINITY;
        }
        return;
    }
    s->next_failure = s->rate > 0 ? s->t - log(uniform01(&s->rng)) / s->rate : INFINITY;
    s->next_class = draw_class(&s->rng);
}

/* Runs recovery steps until one completes without a failure cutting it (or
 * the job's end); returns false at the end. */
static bool recover(sim_state *s, int cls, bool first_start)
{
    double end = s->job->duration_s;
    for (;;) {
        recovery_step steps[8];
        int n = recovery_of(s->all, s->p, s->job->gpus, cls, first_start, steps);
        bool cut = false;
        for (int i = 0; i < n && !cut; i++) {
            double until = s->t + steps[i].s, stop = s->next_failure < end ? s->next_failure : end;
            if (until <= stop) {
                s->out->lost_s[steps[i].bucket] += steps[i].s;
                s->out->class_lost_s[cls] += first_start ? 0 : steps[i].s;
                s->t = until;
                continue;
            }
            s->out->lost_s[steps[i].bucket] += stop - s->t;
            s->out->class_lost_s[cls] += first_start ? 0 : stop - s->t;
            s->t = stop;
            if (stop >= end) return false;
            cut = true;
        }
        if (!cut) return true;
        /* Another failure while recovering: recover from it instead. */
        s->out->failures++;
        if (s->out->failures >= SIM_MAX_FAILURES) return false;
        cls = s->next_class;
        first_start = false;
        draw_next(s);
    }
}

/* Trains from a fresh restore point until the next failure or the end. */
static void train(sim_state *s, double interval, double save)
{
    double end = s->job->duration_s;
    bool failed = s->next_failure < end;
    double stop = failed ? s->next_failure : end, span = stop - s->t;
    double cycle = interval + save;
    double cycles = cycle > 0 ? floor(span / cycle) : 0;
    double rest = span - cycles * cycle;
    s->out->productive_s += cycles * interval;
    s->out->lost_s[GP_CKPT_STALL] += cycles * save;
    double work = rest < interval ? rest : interval, stalled = rest - work;
    s->out->lost_s[GP_CKPT_STALL] += stalled;
    if (failed) {
        s->out->lost_s[GP_REDONE] += work; /* trained since the last save: done again */
        s->out->class_lost_s[s->next_class] += work;
    } else {
        s->out->productive_s += work; /* the job ends: what it trained counts */
    }
    s->t = stop;
}

void sim__run(const sim_profiles *all, const sim_profile *p, const sim_job *job, sim_result *out)
{
    memset(out, 0, sizeof *out);
    sim_state s = { .all = all, .p = p, .job = job, .out = out, .rng = job->seed };
    s.rate = sim__value(all, p, SP_RATE) * job->gpus / 3600.0;
    double interval = job->interval_s > 0 ? job->interval_s : sim__interval(all, p, 1800);
    double save = sim__save_s(all, p, job->gpus);
    draw_next(&s);
    bool running = recover(&s, SIM_SOFTWARE, true);
    while (running && s.t < job->duration_s) {
        train(&s, interval, save);
        if (s.t >= job->duration_s) break;
        out->failures++;
        if (out->failures >= SIM_MAX_FAILURES) break;
        int cls = s.next_class;
        draw_next(&s);
        running = recover(&s, cls, false);
    }
    if (s.t < job->duration_s) { /* stopped at the failure bound: the rest trains nothing */
        out->lost_s[GP_IDLE] += job->duration_s - s.t;
        out->truncated = true;
    }
    out->wall_s = job->duration_s;
    out->ettr = out->wall_s > 0 ? out->productive_s / out->wall_s : 0;
}

static double mean_ettr(const sim_profiles *all, const sim_profile *p, double gpus,
                        double duration_s, double interval, int seeds, uint64_t seed)
{
    double sum = 0;
    for (int i = 0; i < seeds; i++) {
        sim_job job = { .gpus = gpus,
                        .duration_s = duration_s,
                        .seed = seed + (uint64_t)i,
                        .interval_s = interval };
        sim_result r;
        sim__run(all, p, &job, &r);
        sum += r.ettr;
    }
    return sum / seeds;
}

double sim__best_interval(const sim_profiles *all, const sim_profile *p, double gpus,
                          double duration_s, int seeds, uint64_t seed)
{
    /* Log-spaced from one step to a day, then refined around the best (common
     * seeds for every candidate, so the comparison is not noise). */
    double step = sim__value(all, p, SP_STEP_S), lo = step > 1 ? step : 1, hi = 86400;
    double best = lo, best_ettr = -1;
    for (int round = 0; round < 3; round++) {
        const int points = 24;
        double ratio = pow(hi / lo, 1.0 / (points - 1));
        double at = lo;
        for (int i = 0; i < points; i++, at *= ratio) {
            double e = mean_ettr(all, p, gpus, duration_s, at, seeds, seed);
            if (e > best_ettr) best_ettr = e, best = at;
        }
        lo = best / ratio;
        hi = best * ratio;
        if (lo < step) lo = step;
    }
    return best;
}
