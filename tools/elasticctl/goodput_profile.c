/*
 * A run's accounting as the simulator's input: its measured recovery profile
 * (each bucket's mean over the run's disruptions, the step time, the
 * checkpoint interval and a save's stall) and its failures as a trace (when
 * each one happened: noticed less its detection; of which class). Feeding
 * both to `elasticctl simulate` must give back the run's ETTR: that is how
 * the simulator is checked against reality
 * (test/integration/test_ctl_goodput_validation.c).
 */
#include "elasticctl/goodput.h"

#include <stdlib.h>
#include <string.h>

/* The simulator's failure classes by the accounting's causes. */
static const char *class_of(int cause)
{
    switch (cause) {
    case GP_CAUSE_HANG: return "hang";
    case GP_CAUSE_NODE_LOST:
    case GP_CAUSE_FENCED:
    case GP_CAUSE_SILENT_CORRUPTION: return "host"; /* the node is replaced, as a lost host is */
    default: return "software";
    }
}

static double mean_of(const goodput_report *r, int bucket, int cause)
{
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < r->line_count; i++) {
        const goodput_line *l = &r->lines[i];
        if (l->cause == GP_CAUSE_START || (cause >= 0 && l->cause != cause)) continue;
        sum += l->ms[bucket];
        n++;
    }
    return n > 0 ? sum / n / 1000.0 : -1;
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Steps between two saves: the greatest common divisor of the steps saved
 * (the agent sees the last save of each probe tick, so neighbouring events
 * can be several saves apart). */
static int64_t save_every(const timeline *t)
{
    int64_t every = 0;
    for (size_t i = 0; i < t->count; i++)
        if (t->events[i].kind == TL_CHECKPOINT && t->events[i].value > 0)
            every = gcd(t->events[i].value, every);
    return every;
}

static int world_of(const timeline *t, int *nodes)
{
    int64_t world = 1, group = 1;
    for (size_t i = 0; i < t->count; i++)
        if (t->events[i].kind == TL_GENERATION_FORMED) {
            if (t->events[i].value > world) world = t->events[i].value;
            if (t->events[i].value2 > group) group = t->events[i].value2;
        }
    *nodes = (int)group;
    return (int)world;
}

int goodput__write_profile(const goodput_report *r, const timeline *t, FILE *out)
{
    if (!r->steps_known)
        return elastic__fail(ELASTIC_EINVAL, "the logs have no steps_started/steps_ended events "
                                             "(an older elasticrun): no step time to measure");
    int nodes = 1, gpus = world_of(t, &nodes);
    int64_t every = save_every(t);
    /* Saves made: one every `every` steps run (redone ones save again). */
    int saves = every > 0 ? (int)(r->steps_run / (double)every) : 0;
    double failures = 0;
    for (int c = GP_CAUSE_START + 1; c < GP_CAUSES; c++) failures += r->cause_count[c];
    /* The run's pace: training time over the steps it ran (load and all), so
     * the simulated checkpoint intervals fall where the run's did. */
    double hours = r->wall_ms / 3600000.0,
           step_s = (r->mean_step_ms > 0 ? r->mean_step_ms : r->step_ms) / 1000.0;
    double stall = saves > 0 ? r->lost_ms[GP_CKPT_STALL] / 1000.0 / saves : 0;
    double restore = mean_of(r, GP_RESTORE, -1);
    double software = mean_of(r, GP_DETECTION, GP_CAUSE_FAILURE),
           hang = mean_of(r, GP_DETECTION, GP_CAUSE_HANG),
           host = mean_of(r, GP_DETECTION, GP_CAUSE_NODE_LOST);
    const char *from = "measured: elasticctl goodput of job";
    fprintf(out, "# the recovery profile of job %s, measured by elasticctl goodput\nmodel\n",
            t->run_id);
    fprintf(out, "step_s %.6f %s %s (training time per step run)\n", step_s > 0 ? step_s : 1, from,
            t->run_id);
    fprintf(out, "state_gb %d nominal: 1 GB per worker, so a save or restore lasts 1/GB/s\n", gpus);
    fprintf(out, "gpus_per_node %d %s %s (workers per node)\n", gpus / (nodes > 0 ? nodes : 1),
            from, t->run_id);
    fprintf(out, "rate_per_gpu_hour %.6g %s %s (its failures per worker-hour)\n",
            hours > 0 ? failures / gpus / hours : 0, from, t->run_id);
    fputs("profile measured\n", out);
    fprintf(out, "detect_software_s %.6f %s\n", software > 0 ? software : 0, from);
    fprintf(out, "detect_gpu_s %.6f %s (as software)\n", software > 0 ? software : 0, from);
    fprintf(out, "detect_host_s %.6f %s\n", host > 0 ? host : 0, from);
    fprintf(out, "detect_hang_s %.6f %s\n", hang > 0 ? hang : 0, from);
    fprintf(out, "stop_s %.6f %s\n",
            mean_of(r, GP_STOPPING, -1) > 0 ? mean_of(r, GP_STOPPING, -1) : 0, from);
    fprintf(out, "rdzv_base_s %.6f %s\n",
            mean_of(r, GP_RENDEZVOUS, -1) > 0 ? mean_of(r, GP_RENDEZVOUS, -1) : 0, from);
    fputs("rdzv_per_node_ms 0 measured: one scale only\n", out);
    fputs("replace_s 0 measured: no node was replaced\n", out);
    fprintf(out, "restart_s %.6f %s\n",
            mean_of(r, GP_RESTART, -1) > 0 ? mean_of(r, GP_RESTART, -1) : 0, from);
    fputs("interpreter_s 0 measured: within restart_s\n", out);
    fputs("init_s 0 measured: within restart_s\n", out);
    fprintf(out, "restore_gbps %.6f %s (1 / mean restore s)\n", restore > 0 ? 1.0 / restore : 0,
            from);
    fprintf(out, "save_gbps %.6f %s (1 / stall s per save, %d saves)\n",
            stall > 0 ? 1.0 / stall : 0, from, saves);
    fprintf(out, "interval_s %.6f %s (every %lld steps)\n",
            every > 0 ? (double)every * (step_s > 0 ? step_s : 1) : 0, from, (long long)every);
    fputs("every_steps 0 measured: see interval_s\n", out);
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "writing the profile failed") : 0;
}

int goodput__write_trace(const goodput_report *r, const timeline *t, FILE *out)
{
    fprintf(out, "# the failures of job %s: when each happened (s from its start), its class\n",
            t->run_id);
    fprintf(out, "duration_s %.3f\n", r->wall_ms / 1000.0);
    for (size_t i = 0; i < r->line_count; i++) {
        const goodput_line *l = &r->lines[i];
        if (l->cause == GP_CAUSE_START) continue;
        double at = ((double)(l->at_ms - r->start_ms) - l->ms[GP_DETECTION]) / 1000.0;
        fprintf(out, "failure %.3f %s\n", at > 0 ? at : 0, class_of(l->cause));
    }
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "writing the trace failed") : 0;
}
