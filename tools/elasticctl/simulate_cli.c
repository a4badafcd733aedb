/*
 * `elasticctl simulate`: the ETTR table (profiles x scales, mean and 95%
 * confidence interval over seeds), every input printed with its source, the
 * best checkpoint interval of each profile beside Young/Daly's; or, with a
 * trace (a real run's own failures), one run of one profile.
 */
#include "elasticctl/ctl.h"
#include "elasticctl/simulate.h"
#include "common/json_writer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRACE      4096
#define MAX_FILE       (1 << 20)
#define MAX_TRACE_LINE 200

static int read_file(const char *path, char **out)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return elastic__fail(errno == ENOENT ? ELASTIC_ENOTFOUND : ELASTIC_EIO, "%s: %s", path,
                             strerror(errno));
    char *text = malloc(MAX_FILE + 1);
    size_t len = text != NULL ? fread(text, 1, MAX_FILE + 1, f) : 0;
    int rc = text == NULL ? elastic__fail(ELASTIC_ENOMEM, "out of memory")
             : ferror(f)  ? elastic__fail(ELASTIC_EIO, "%s: read error", path)
             : len > MAX_FILE
                 ? elastic__fail(ELASTIC_ELIMIT, "%s: larger than %d bytes", path, MAX_FILE)
                 : 0;
    fclose(f);
    if (rc != 0) {
        free(text);
        return rc;
    }
    text[len] = '\0';
    if (strlen(text) != len) {
        free(text);
        return elastic__fail(ELASTIC_EINVAL, "%s: a NUL byte in a text file", path);
    }
    *out = text;
    return 0;
}

/* A trace: "duration_s S" then one failure a line, "AT_S CLASS". */
static int read_trace(const char *path, sim_failure *trace, size_t *count, double *duration_s)
{
    char *text = NULL;
    int rc = read_file(path, &text);
    if (rc != 0) return rc;
    *count = 0;
    *duration_s = 0;
    int number = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL && rc == 0;
         line = strtok_r(NULL, "\n", &save)) {
        number++;
        if (strlen(line) > MAX_TRACE_LINE) {
            rc = elastic__fail(ELASTIC_ELIMIT, "%s:%d: line too long", path, number);
            break;
        }
        char word[32] = "", cls[32] = "";
        double v;
        int fields = sscanf(line, "%31s %lf %31s", word, &v, cls);
        if (word[0] == '#' || fields <= 0) continue;
        if (strcmp(word, "duration_s") == 0 && fields == 2 && isfinite(v) && v > 0 && v < 1e9) {
            *duration_s = v;
            continue;
        }
        int c = -1;
        for (int k = 0; k < SIM_CLASSES; k++)
            if (fields == 3 && strcmp(cls, sim__class_name(k)) == 0) c = k;
        if (strcmp(word, "failure") != 0 || c < 0 || !isfinite(v) || v < 0 || v > 1e9)
            rc = elastic__fail(ELASTIC_EINVAL,
                               "%s:%d: expected \"duration_s S\" or \"failure AT_S "
                               "software|gpu|host|hang\"",
                               path, number);
        else if (*count == MAX_TRACE)
            rc = elastic__fail(ELASTIC_ELIMIT, "%s: more than %d failures", path, MAX_TRACE);
        else if (*count > 0 && v < trace[*count - 1].at_s)
            rc = elastic__fail(ELASTIC_EINVAL, "%s:%d: failures out of time order", path, number);
        else
            trace[(*count)++] = (sim_failure){ .at_s = v, .cls = c };
    }
    free(text);
    if (rc == 0 && *duration_s <= 0)
        rc = elastic__fail(ELASTIC_EINVAL, "%s: no \"duration_s S\" line", path);
    return rc;
}

static void print_inputs(const sim_profiles *all, FILE *out)
{
    fputs("inputs (value, source):\n  model:\n", out);
    for (int k = 0; k <= SP_RATE; k++)
        fprintf(out, "    %-20s %-12g %s\n", sim__param_name(k), all->model.v[k],
                all->model.source[k]);
    for (int i = 0; i < all->count; i++) {
        fprintf(out, "  profile %s:\n", all->p[i].name);
        for (int k = SP_RATE + 1; k < SP_PARAMS; k++)
            fprintf(out, "    %-20s %-12g %s\n", sim__param_name(k), all->p[i].v[k],
                    all->p[i].source[k]);
    }
}

typedef struct cell {
    double mean, half; /* 95% interval: mean +- half */
    double lost_s[GP_BUCKETS];
    double failures, interval_s, best_s, young_daly_s;
} cell;

static void run_cell(const sim_profiles *all, const sim_profile *p, double gpus, double duration_s,
                     int seeds, uint64_t seed, cell *out)
{
    memset(out, 0, sizeof *out);
    int search_seeds = seeds < 8 ? seeds : 8;
    out->best_s = sim__best_interval(all, p, gpus, duration_s, search_seeds, seed + 1000003);
    out->young_daly_s = sim__young_daly(all, p, gpus);
    out->interval_s = sim__interval(all, p, out->best_s);
    double sum = 0, sum2 = 0;
    for (int i = 0; i < seeds; i++) {
        sim_job job = { .gpus = gpus,
                        .duration_s = duration_s,
                        .seed = seed + (uint64_t)i,
                        .interval_s = out->interval_s };
        sim_result r;
        sim__run(all, p, &job, &r);
        sum += r.ettr;
        sum2 += r.ettr * r.ettr;
        for (int b = 0; b < GP_BUCKETS; b++) out->lost_s[b] += r.lost_s[b] / seeds;
        out->failures += r.failures / seeds;
    }
    out->mean = sum / seeds;
    double var = seeds > 1 ? (sum2 - sum * sum / seeds) / (seeds - 1) : 0;
    out->half = seeds > 1 ? 1.96 * sqrt(var > 0 ? var : 0) / sqrt((double)seeds) : 0;
}

static void gpus_text(double gpus, char *out, size_t size)
{
    long long n = (long long)gpus;
    if (n >= 1000)
        snprintf(out, size, "%lld,%03lld GPUs", n / 1000, n % 1000);
    else
        snprintf(out, size, "%lld GPUs", n);
}

/* The simulated grid: every profile at every scale. */
typedef struct sim_table {
    const sim_profiles *all;
    const double *gpus;
    int scales, seeds;
    double days;
    uint64_t seed;
    cell *cells; /* [profile * scales + scale] */
} sim_table;

static const cell *cell_at(const sim_table *t, int profile, int scale)
{
    return &t->cells[profile * t->scales + scale];
}

static void json_number(elastic__jw *w, const char *key, double value, int decimals)
{
    elastic__jw_key(w, key);
    elastic__jw_double(w, value, decimals);
}

static void json_lost(elastic__jw *w, const double *lost_s, int decimals)
{
    elastic__jw_key(w, "lost_s");
    elastic__jw_object_begin(w);
    for (int b = 0; b < GP_BUCKETS; b++)
        json_number(w, goodput__bucket_name(b), lost_s[b], decimals);
    elastic__jw_object_end(w);
}

/* The table's head and its "rows" (the deterministic bug's table follows). */
static void print_json(const sim_table *t, elastic__jw *w)
{
    const sim_profiles *all = t->all;
    elastic__jw_key(w, "days");
    elastic__jw_double_g(w, t->days, 6);
    elastic__jw_key(w, "seeds");
    elastic__jw_int(w, t->seeds);
    elastic__jw_key(w, "seed");
    elastic__jw_uint(w, t->seed);
    elastic__jw_key(w, "rate_per_gpu_hour");
    elastic__jw_double_g(w, all->model.v[SP_RATE], 6);
    elastic__jw_key(w, "rows");
    elastic__jw_array_begin(w);
    for (int i = 0; i < all->count; i++)
        for (int s = 0; s < t->scales; s++) {
            const cell *c = cell_at(t, i, s);
            elastic__jw_object_begin(w);
            elastic__jw_key(w, "profile");
            elastic__jw_string(w, all->p[i].name);
            json_number(w, "gpus", t->gpus[s], 0);
            json_number(w, "ettr", c->mean, 6);
            json_number(w, "ci95", c->half, 6);
            json_number(w, "failures", c->failures, 1);
            json_number(w, "interval_s", c->interval_s, 1);
            json_number(w, "best_interval_s", c->best_s, 1);
            json_number(w, "young_daly_s", c->young_daly_s, 1);
            json_lost(w, c->lost_s, 1);
            elastic__jw_object_end(w);
        }
    elastic__jw_array_end(w);
}

/* Ends a JSON document built in buf: written with its newline, or the
 * overflow reported (a cut document is never printed). */
static int json_emit(elastic__jw *w, FILE *out)
{
    size_t len = 0;
    int rc = elastic__jw_finish(w, &len);
    if (rc == 0 && (fwrite(w->buf, 1, len, out) != len || fputc('\n', out) == EOF))
        rc = elastic__fail(ELASTIC_EIO, "writing the JSON failed");
    return rc;
}

/* The text table's first part: ETTR per profile and scale. */
static void print_ettr(const sim_table *t, FILE *out)
{
    double rate = t->all->model.v[SP_RATE];
    fprintf(out,
            "simulated ETTR: %g days, %.3g unexpected interruptions per GPU-hour (MTBF %.1f h at "
            "16,384 GPUs), Llama 3's cause mix, %d seeds (mean, 95%% interval)\n",
            t->days, rate, rate > 0 ? 1.0 / (rate * 16384) : 0, t->seeds);
    fprintf(out, "%-22s", "profile");
    for (int s = 0; s < t->scales; s++) {
        char head[32];
        gpus_text(t->gpus[s], head, sizeof head);
        fprintf(out, " %17s", head);
    }
    fputc('\n', out);
    for (int i = 0; i < t->all->count; i++) {
        fprintf(out, "%-22s", t->all->p[i].name);
        for (int s = 0; s < t->scales; s++) {
            const cell *c = cell_at(t, i, s);
            fprintf(out, "    %6.2f%% ±%4.2f", 100 * c->mean, 100 * c->half);
        }
        fputc('\n', out);
    }
}

/* The checkpoint intervals: used, best found, Young-Daly. */
static void print_intervals(const sim_table *t, FILE *out)
{
    fputs("\ncheckpoint interval (s): used / best found / Young-Daly sqrt(2 x save x MTBF)\n", out);
    for (int i = 0; i < t->all->count; i++) {
        fprintf(out, "%-22s", t->all->p[i].name);
        for (int s = 0; s < t->scales; s++) {
            const cell *c = cell_at(t, i, s);
            char text[64];
            snprintf(text, sizeof text, "%.0f / %.0f / %.0f", c->interval_s, c->best_s,
                     c->young_daly_s);
            fprintf(out, " %17s", text);
        }
        fputc('\n', out);
    }
}

/* Where the time went at the middle scale, per goodput bucket. */
static void print_lost(const sim_table *t, FILE *out)
{
    int mid = t->scales > 1 ? 1 : 0;
    char head[32];
    gpus_text(t->gpus[mid], head, sizeof head);
    fprintf(out, "\nlost per run at %s (hours, mean over seeds; %g days = %.0f h):\n", head,
            t->days, t->days * 24);
    fprintf(out, "%-22s %9s", "profile", "failures");
    for (int b = 0; b < GP_BUCKETS - 1; b++) fprintf(out, " %10s", goodput__bucket_name(b));
    fputc('\n', out);
    for (int i = 0; i < t->all->count; i++) {
        const cell *c = cell_at(t, i, mid);
        fprintf(out, "%-22s %9.1f", t->all->p[i].name, c->failures);
        for (int b = 0; b < GP_BUCKETS - 1; b++) fprintf(out, " %10.2f", c->lost_s[b] / 3600);
        fputc('\n', out);
    }
    fputc('\n', out);
}

/* A deterministic bug: GPU-hours from its first occurrence to the job's end,
 * restarted `restarts` times (torchrun's counting) or once (the failure
 * policy stops at the second occurrence), each profile at its interval. */
static void print_bug_json(const sim_table *t, int restarts, elastic__jw *w)
{
    const sim_profiles *all = t->all;
    elastic__jw_key(w, "deterministic_bug");
    elastic__jw_object_begin(w);
    elastic__jw_key(w, "max_restarts");
    elastic__jw_int(w, restarts);
    elastic__jw_key(w, "rows");
    elastic__jw_array_begin(w);
    for (int i = 0; i < all->count; i++)
        for (int s = 0; s < t->scales; s++) {
            double cycle =
                sim__bug_cycle_s(all, &all->p[i], t->gpus[s], cell_at(t, i, s)->interval_s);
            elastic__jw_object_begin(w);
            elastic__jw_key(w, "profile");
            elastic__jw_string(w, all->p[i].name);
            json_number(w, "gpus", t->gpus[s], 0);
            json_number(w, "restart_s", cycle, 1);
            json_number(w, "torchrun_counting_gpu_hours", restarts * cycle * t->gpus[s] / 3600, 1);
            json_number(w, "stop_at_second_gpu_hours", cycle * t->gpus[s] / 3600, 1);
            elastic__jw_object_end(w);
        }
    elastic__jw_array_end(w);
    elastic__jw_object_end(w);
}

static void print_bug(const sim_table *t, int restarts, FILE *out)
{
    const sim_profiles *all = t->all;
    fprintf(
        out,
        "a deterministic bug in the training code, --max-restarts %d: GPU-hours from its first "
        "occurrence\nto the job's end, torchrun's counting (%d restarts) / the failure policy "
        "(stops at the 2nd\noccurrence: 1 restart); a restart = the profile's software recovery "
        "+ half an interval replayed\n",
        restarts, restarts);
    fprintf(out, "%-22s", "profile");
    for (int s = 0; s < t->scales; s++) {
        char head[32];
        gpus_text(t->gpus[s], head, sizeof head);
        fprintf(out, " %21s", head);
    }
    fputc('\n', out);
    for (int i = 0; i < all->count; i++) {
        fprintf(out, "%-22s", all->p[i].name);
        for (int s = 0; s < t->scales; s++) {
            double cycle =
                sim__bug_cycle_s(all, &all->p[i], t->gpus[s], cell_at(t, i, s)->interval_s);
            char text[64];
            snprintf(text, sizeof text, "%.0f / %.0f", restarts * cycle * t->gpus[s] / 3600,
                     cycle * t->gpus[s] / 3600);
            fprintf(out, " %21s", text);
        }
        fputc('\n', out);
    }
    fputc('\n', out);
}

static int table(const sim_profiles *all, const double *gpus, int scales, double days, int seeds,
                 uint64_t seed, int bug_restarts, bool json, FILE *out)
{
    sim_table t = {
        .all = all, .gpus = gpus, .scales = scales, .seeds = seeds, .days = days, .seed = seed
    };
    t.cells = calloc((size_t)(all->count * scales), sizeof *t.cells);
    if (t.cells == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    for (int i = 0; i < all->count; i++)
        for (int s = 0; s < scales; s++)
            run_cell(all, &all->p[i], gpus[s], days * 86400, seeds, seed, &t.cells[i * scales + s]);
    int rc = 0;
    if (json) {
        /* Each row is well under 1 KiB: the bound only catches a bug. */
        size_t cap = 16 * 1024 + (size_t)(all->count * scales) * 2048;
        char *buf = malloc(cap);
        if (buf == NULL) rc = elastic__fail(ELASTIC_ENOMEM, "out of memory");
        elastic__jw w;
        if (rc == 0) {
            elastic__jw_init(&w, buf, cap);
            elastic__jw_object_begin(&w);
            print_json(&t, &w);
            print_bug_json(&t, bug_restarts, &w);
            elastic__jw_object_end(&w);
            rc = json_emit(&w, out);
        }
        free(buf);
    } else {
        print_ettr(&t, out);
        print_intervals(&t, out);
        print_lost(&t, out);
        print_bug(&t, bug_restarts, out);
        print_inputs(all, out);
    }
    free(t.cells);
    if (rc != 0) return rc;
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "writing the table failed") : 0;
}

/* One profile's run of a trace: one JSON line. */
static int print_trace_json(const char *name, const sim_result *r, FILE *out)
{
    char buf[2048];
    elastic__jw w;
    elastic__jw_init(&w, buf, sizeof buf);
    elastic__jw_object_begin(&w);
    elastic__jw_key(&w, "profile");
    elastic__jw_string(&w, name);
    json_number(&w, "ettr", r->ettr, 6);
    json_number(&w, "wall_s", r->wall_s, 3);
    json_number(&w, "productive_s", r->productive_s, 3);
    json_number(&w, "failures", r->failures, 0);
    json_lost(&w, r->lost_s, 3);
    elastic__jw_object_end(&w);
    return json_emit(&w, out);
}

int ctl_simulate(const ctl_simulate_opts *o, FILE *out)
{
    char *text = NULL;
    int rc = o->profile_path != NULL ? read_file(o->profile_path, &text) : 0;
    if (rc != 0) return rc;
    sim_profiles *all = malloc(sizeof *all);
    if (all == NULL) rc = elastic__fail(ELASTIC_ENOMEM, "out of memory");
    if (rc == 0)
        rc =
            sim__profiles_parse(text, o->profile_path != NULL ? o->profile_path : "(shipped)", all);
    free(text);
    if (rc == 0 && o->only != NULL) {
        int found = -1;
        for (int i = 0; i < all->count; i++)
            if (strcmp(all->p[i].name, o->only) == 0) found = i;
        if (found < 0)
            rc = elastic__fail(ELASTIC_ENOTFOUND, "no profile %s", o->only);
        else
            all->p[0] = all->p[found], all->count = 1;
    }
    if (rc == 0 && o->trace_path != NULL) {
        sim_failure *trace = malloc(MAX_TRACE * sizeof *trace);
        size_t count = 0;
        double duration_s = 0;
        rc = trace == NULL ? elastic__fail(ELASTIC_ENOMEM, "out of memory")
                           : read_trace(o->trace_path, trace, &count, &duration_s);
        for (int i = 0; rc == 0 && i < all->count; i++) {
            const sim_profile *p = &all->p[i];
            sim_job job = { .gpus = o->gpus[0],
                            .duration_s = duration_s,
                            .seed = o->seed,
                            .interval_s = sim__interval(all, p, 1800),
                            .trace = trace,
                            .trace_count = count };
            sim_result r;
            sim__run(all, p, &job, &r);
            if (o->json) {
                rc = print_trace_json(p->name, &r, out);
            } else {
                fprintf(out,
                        "profile %s, %zu failures of the trace over %.3f s: productive %.3f s\n",
                        p->name, count, r.wall_s, r.productive_s);
                for (int b = 0; b < GP_BUCKETS; b++)
                    fprintf(out, "%s%s %.3f s", b ? ", " : "  lost: ", goodput__bucket_name(b),
                            r.lost_s[b]);
                fprintf(out, "\nETTR %.1f%%\n", 100 * r.ettr);
            }
        }
        free(trace);
    } else if (rc == 0) {
        rc = table(all, o->gpus, o->gpu_count, o->days, o->seeds, o->seed,
                   o->bug_restarts > 0 ? o->bug_restarts : 10, o->json, out);
    }
    free(all);
    return rc;
}
