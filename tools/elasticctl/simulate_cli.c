/*
 * `elasticctl simulate`: the ETTR table (profiles x scales, mean and 95%
 * confidence interval over seeds), every input printed with its source, the
 * best checkpoint interval of each profile beside Young/Daly's; or, with a
 * trace (a real run's own failures), one run of one profile.
 */
#include "elasticctl/ctl.h"
#include "elasticctl/simulate.h"

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

static int table(const sim_profiles *all, const double *gpus, int scales, double days, int seeds,
                 uint64_t seed, bool json, FILE *out)
{
    int count = all->count * scales;
    cell *cells = calloc((size_t)count, sizeof *cells);
    if (cells == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    for (int i = 0; i < all->count; i++)
        for (int s = 0; s < scales; s++)
            run_cell(all, &all->p[i], gpus[s], days * 86400, seeds, seed, &cells[i * scales + s]);
    double rate = all->model.v[SP_RATE];
    if (json) {
        fprintf(out, "{\"days\":%g,\"seeds\":%d,\"seed\":%llu,\"rate_per_gpu_hour\":%g,\"rows\":[",
                days, seeds, (unsigned long long)seed, rate);
        for (int i = 0; i < all->count; i++)
            for (int s = 0; s < scales; s++) {
                const cell *c = &cells[i * scales + s];
                fprintf(out,
                        "%s{\"profile\":\"%s\",\"gpus\":%.0f,\"ettr\":%.6f,\"ci95\":%.6f,"
                        "\"failures\":%.1f,\"interval_s\":%.1f,\"best_interval_s\":%.1f,"
                        "\"young_daly_s\":%.1f,\"lost_s\":{",
                        i + s ? "," : "", all->p[i].name, gpus[s], c->mean, c->half, c->failures,
                        c->interval_s, c->best_s, c->young_daly_s);
                for (int b = 0; b < GP_BUCKETS; b++)
                    fprintf(out, "%s\"%s\":%.1f", b ? "," : "", goodput__bucket_name(b),
                            c->lost_s[b]);
                fputs("}}", out);
            }
        fputs("]}\n", out);
    } else {
        fprintf(
            out,
            "simulated ETTR: %g days, %.3g unexpected interruptions per GPU-hour (MTBF %.1f h at "
            "16,384 GPUs), Llama 3's cause mix, %d seeds (mean, 95%% interval)\n",
            days, rate, rate > 0 ? 1.0 / (rate * 16384) : 0, seeds);
        fprintf(out, "%-22s", "profile");
        for (int s = 0; s < scales; s++) {
            char head[32];
            gpus_text(gpus[s], head, sizeof head);
            fprintf(out, " %17s", head);
        }
        fputc('\n', out);
        for (int i = 0; i < all->count; i++) {
            fprintf(out, "%-22s", all->p[i].name);
            for (int s = 0; s < scales; s++) {
                const cell *c = &cells[i * scales + s];
                fprintf(out, "    %6.2f%% ±%4.2f", 100 * c->mean, 100 * c->half);
            }
            fputc('\n', out);
        }
        fputs("\ncheckpoint interval (s): used / best found / Young-Daly sqrt(2 x save x MTBF)\n",
              out);
        for (int i = 0; i < all->count; i++) {
            fprintf(out, "%-22s", all->p[i].name);
            for (int s = 0; s < scales; s++) {
                const cell *c = &cells[i * scales + s];
                char text[64];
                snprintf(text, sizeof text, "%.0f / %.0f / %.0f", c->interval_s, c->best_s,
                         c->young_daly_s);
                fprintf(out, " %17s", text);
            }
            fputc('\n', out);
        }
        int mid = scales > 1 ? 1 : 0;
        char head[32];
        gpus_text(gpus[mid], head, sizeof head);
        fprintf(out, "\nlost per run at %s (hours, mean over seeds; %g days = %.0f h):\n", head,
                days, days * 24);
        fprintf(out, "%-22s %9s", "profile", "failures");
        for (int b = 0; b < GP_BUCKETS - 1; b++) fprintf(out, " %10s", goodput__bucket_name(b));
        fputc('\n', out);
        for (int i = 0; i < all->count; i++) {
            const cell *c = &cells[i * scales + mid];
            fprintf(out, "%-22s %9.1f", all->p[i].name, c->failures);
            for (int b = 0; b < GP_BUCKETS - 1; b++) fprintf(out, " %10.2f", c->lost_s[b] / 3600);
            fputc('\n', out);
        }
        fputc('\n', out);
        print_inputs(all, out);
    }
    free(cells);
    return ferror(out) ? elastic__fail(ELASTIC_EIO, "writing the table failed") : 0;
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
                fprintf(out,
                        "{\"profile\":\"%s\",\"ettr\":%.6f,\"wall_s\":%.3f,\"productive_s\":%.3f,"
                        "\"failures\":%.0f,\"lost_s\":{",
                        p->name, r.ettr, r.wall_s, r.productive_s, r.failures);
                for (int b = 0; b < GP_BUCKETS; b++)
                    fprintf(out, "%s\"%s\":%.3f", b ? "," : "", goodput__bucket_name(b),
                            r.lost_s[b]);
                fputs("}}\n", out);
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
        rc = table(all, o->gpus, o->gpu_count, o->days, o->seeds, o->seed, o->json, out);
    }
    free(all);
    return rc;
}
