/*
 * Recovery benchmark: elasticrun against torchrun on the same worker
 * (bench/agent_bench_worker). For each launcher and worker count, one job is
 * started and a worker SIGKILLed several times; each time we measure from the
 * kill to the moment the last worker of the next generation has started
 * (the workers report CLOCK_MONOTONIC start times). Prints the medians, the
 * ratio, and each launcher's peak RSS (VmHWM of the agent process).
 *
 * With --hang-timeout S it also measures a hang: a worker stops heartbeating
 * (elasticrun --hang-timeout S), and we time its last beat to the last worker
 * of the next generation started, against the timeout itself (target: at
 * most timeout + 10%). torchrun has no hang probe to compare with.
 *
 *   agent_bench --elasticrun PATH --worker PATH [--sizes 4,16] [--crashes 7] [--python /usr/bin/python3]
 *               [--hang-timeout 2]
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CRASHES 64
#define MAX_SIZES   8
#define WAIT_MS     120000

typedef struct bench_args {
    const char *elasticrun, *worker, *python;
    int sizes[MAX_SIZES], nsizes, crashes;
    const char *hang_timeout; /* seconds, as elasticrun's flag; NULL: no hang run */
} bench_args;

typedef struct outcome {
    bool ran;
    double median_ms, min_ms, max_ms;
    long peak_rss_kb;
    int samples;
} outcome;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    nanosleep(&(struct timespec){ ms / 1000, (long)(ms % 1000) * 1000000L }, NULL);
}

/* Scans the report for the lines of one restart count: how many, the latest
 * start time, and the pid of a given rank. */
static int scan(const char *report, int restart, int rank, long long *latest_ns, pid_t *rank_pid)
{
    FILE *file = fopen(report, "r");
    if (file == NULL) return 0;
    char line[256];
    int count = 0;
    *latest_ns = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        int line_rank, line_restart, pid;
        long long t;
        if (sscanf(line, "start rank=%d restart=%d pid=%d t=%lld", &line_rank, &line_restart, &pid,
                   &t) != 4)
            continue;
        if (line_restart != restart) continue;
        count++;
        if (t > *latest_ns) *latest_ns = t;
        if (line_rank == rank && rank_pid != NULL) *rank_pid = pid;
    }
    fclose(file);
    return count;
}

static bool wait_generation(const char *report, int restart, int nproc, long long *latest_ns)
{
    long long deadline = now_ns() + (long long)WAIT_MS * 1000000LL;
    while (now_ns() < deadline) {
        if (scan(report, restart, -1, latest_ns, NULL) >= nproc) return true;
        sleep_ms(2);
    }
    return false;
}

static long peak_rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *file = fopen(path, "r");
    long kb = -1;
    if (file == NULL) return -1;
    while (fgets(line, sizeof line, file) != NULL)
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    fclose(file);
    return kb;
}

static pid_t launch(const bench_args *args, bool torchrun, int nproc, const char *report,
                    const char *log_path)
{
    char nproc_text[16];
    snprintf(nproc_text, sizeof nproc_text, "%d", nproc);
    pid_t pid = fork();
    if (pid != 0) return pid;
    int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    setpgid(0, 0);
    /* The same torchrun flags for both launchers; torchrun is reached
     * through its Python module, elasticrun directly. */
    const char *argv[] = { args->python, "-m", "torch.distributed.run",
                           "--standalone", "--nproc_per_node", nproc_text,
                           "--max_restarts", "1000", "--monitor_interval", "0.1",
                           "--redirects", "2", "--tee", "2",
                           "--no_python", args->worker, report, NULL };
    const char *const *launcher_argv = argv;
    if (!torchrun) {
        launcher_argv = argv + 2; /* drop "python -m": argv[2] becomes the program */
        argv[2] = args->elasticrun;
    }
    execv(launcher_argv[0], (char *const *)launcher_argv);
    _exit(127);
}

/* elasticrun with heartbeating workers and the hang probe on (the probe
 * tick left at its default: the hang must not wait for it). */
static pid_t launch_hang(const bench_args *args, int nproc, const char *report,
                         const char *log_path)
{
    char nproc_text[16];
    snprintf(nproc_text, sizeof nproc_text, "%d", nproc);
    pid_t pid = fork();
    if (pid != 0) return pid;
    int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    setpgid(0, 0);
    const char *argv[] = { args->elasticrun,
                           "--standalone",
                           "--nproc_per_node",
                           nproc_text,
                           "--max_restarts",
                           "1000",
                           "--hang-timeout",
                           args->hang_timeout,
                           "--no_python",
                           args->worker,
                           report,
                           "heartbeat",
                           NULL };
    execv(args->elasticrun, (char *const *)argv);
    _exit(127);
}

/* The "hung" line of a restart count: the victim's last beat. */
static bool hung_at(const char *report, int restart, long long *t)
{
    FILE *file = fopen(report, "r");
    if (file == NULL) return false;
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof line, file) != NULL) {
        int rank, line_restart, pid;
        found = sscanf(line, "hung rank=%d restart=%d pid=%d t=%lld", &rank, &line_restart, &pid,
                       t) == 4 &&
                line_restart == restart;
    }
    fclose(file);
    return found;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void stop(pid_t launcher)
{
    kill(launcher, SIGTERM);
    for (int waited = 0; waited < 30000; waited += 10) {
        if (waitpid(launcher, NULL, WNOHANG) == launcher) return;
        sleep_ms(10);
    }
    kill(-launcher, SIGKILL);
    kill(launcher, SIGKILL);
    waitpid(launcher, NULL, 0);
}

static outcome measure(const bench_args *args, bool torchrun, int nproc, const char *dir)
{
    outcome result = { 0 };
    char report[512], log_path[512];
    snprintf(report, sizeof report, "%s/%s-%d.report", dir, torchrun ? "torchrun" : "elasticrun",
             nproc);
    snprintf(log_path, sizeof log_path, "%s/%s-%d.log", dir, torchrun ? "torchrun" : "elasticrun",
             nproc);
    unlink(report);
    pid_t launcher = launch(args, torchrun, nproc, report, log_path);
    long long latest;
    if (!wait_generation(report, 0, nproc, &latest)) {
        fprintf(stderr, "agent_bench: %s with %d workers did not start (see %s)\n",
                torchrun ? "torchrun" : "elasticrun", nproc, log_path);
        stop(launcher);
        return result;
    }
    double samples[MAX_CRASHES];
    for (int crash = 1; crash <= args->crashes; crash++) {
        pid_t victim = 0;
        int victim_rank = crash % nproc;
        scan(report, crash - 1, victim_rank, &latest, &victim);
        sleep_ms(
            300); /* let the previous generation settle (torchrun's monitor, our stop timers) */
        long long killed_at = now_ns();
        if (victim <= 0 || kill(victim, SIGKILL) != 0) break;
        if (!wait_generation(report, crash, nproc, &latest)) {
            fprintf(stderr, "agent_bench: restart %d did not happen\n", crash);
            break;
        }
        samples[result.samples++] = (double)(latest - killed_at) / 1e6;
    }
    result.peak_rss_kb = peak_rss_kb(launcher);
    stop(launcher);
    if (result.samples == 0) return result;
    qsort(samples, (size_t)result.samples, sizeof samples[0], compare_double);
    result.ran = true;
    result.median_ms = result.samples % 2
                           ? samples[result.samples / 2]
                           : (samples[result.samples / 2 - 1] + samples[result.samples / 2]) / 2;
    result.min_ms = samples[0];
    result.max_ms = samples[result.samples - 1];
    return result;
}

static outcome measure_hang(const bench_args *args, int nproc, const char *dir)
{
    outcome result = { 0 };
    char report[512], log_path[512];
    snprintf(report, sizeof report, "%s/hang-%d.report", dir, nproc);
    snprintf(log_path, sizeof log_path, "%s/hang-%d.log", dir, nproc);
    unlink(report);
    pid_t launcher = launch_hang(args, nproc, report, log_path);
    long long latest;
    double samples[MAX_CRASHES];
    if (!wait_generation(report, 0, nproc, &latest)) {
        fprintf(stderr, "agent_bench: the hang job did not start (see %s)\n", log_path);
        stop(launcher);
        return result;
    }
    for (int round = 1; round <= args->crashes; round++) {
        pid_t victim = 0;
        scan(report, round - 1, round % nproc, &latest, &victim);
        sleep_ms(300);
        long long last_beat = 0, deadline = now_ns() + (long long)WAIT_MS * 1000000LL;
        if (victim <= 0 || kill(victim, SIGUSR1) != 0) break;
        while (!hung_at(report, round - 1, &last_beat) && now_ns() < deadline) sleep_ms(2);
        if (last_beat == 0 || !wait_generation(report, round, nproc, &latest)) {
            fprintf(stderr, "agent_bench: hang round %d: no restart (see %s)\n", round, log_path);
            break;
        }
        samples[result.samples++] = (double)(latest - last_beat) / 1e6;
    }
    result.peak_rss_kb = peak_rss_kb(launcher);
    stop(launcher);
    if (result.samples == 0) return result;
    qsort(samples, (size_t)result.samples, sizeof samples[0], compare_double);
    result.ran = true;
    result.median_ms = result.samples % 2
                           ? samples[result.samples / 2]
                           : (samples[result.samples / 2 - 1] + samples[result.samples / 2]) / 2;
    result.min_ms = samples[0];
    result.max_ms = samples[result.samples - 1];
    return result;
}

static void parse_args(int argc, char **argv, bench_args *args)
{
    *args =
        (bench_args){ .python = "/usr/bin/python3", .sizes = { 4, 16 }, .nsizes = 2, .crashes = 7 };
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--elasticrun") == 0)
            args->elasticrun = argv[i + 1];
        else if (strcmp(argv[i], "--worker") == 0)
            args->worker = argv[i + 1];
        else if (strcmp(argv[i], "--python") == 0)
            args->python = argv[i + 1];
        else if (strcmp(argv[i], "--crashes") == 0)
            args->crashes = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--hang-timeout") == 0)
            args->hang_timeout = argv[i + 1];
        else if (strcmp(argv[i], "--sizes") == 0) {
            args->nsizes = 0;
            for (char *save = NULL, *item = strtok_r(argv[i + 1], ",", &save);
                 item && args->nsizes < MAX_SIZES; item = strtok_r(NULL, ",", &save))
                args->sizes[args->nsizes++] = atoi(item);
        }
    }
    if (args->crashes < 1) args->crashes = 1;
    if (args->crashes > MAX_CRASHES) args->crashes = MAX_CRASHES;
}

static bool torch_available(const char *python)
{
    char command[512];
    snprintf(command, sizeof command, "%s -c 'import torch.distributed.run' >/dev/null 2>&1",
             python);
    return system(command) == 0;
}

static void print_row(const char *name, int nproc, const outcome *o)
{
    if (!o->ran) {
        printf("| %-10s | %7d | %10s | %8s | %8s | %13s |\n", name, nproc, "n/a", "", "", "");
        return;
    }
    printf("| %-10s | %7d | %10.1f | %8.1f | %8.1f | %13.1f |\n", name, nproc, o->median_ms,
           o->min_ms, o->max_ms, o->peak_rss_kb / 1024.0);
}

int main(int argc, char **argv)
{
    bench_args args;
    parse_args(argc, argv, &args);
    if (args.elasticrun == NULL || args.worker == NULL) {
        fprintf(
            stderr,
            "usage: agent_bench --elasticrun PATH --worker PATH [--sizes 4,16] [--crashes 7]\n");
        return 2;
    }
    char dir[] = "/tmp/agent-bench-XXXXXX";
    if (mkdtemp(dir) == NULL) return 1;
    bool torch = torch_available(args.python);
    printf("crash -> every worker restarted (kill to the last new worker's start), %d crashes per "
           "job\n",
           args.crashes);
    printf("| launcher   | workers | median ms  | min ms   | max ms   | peak RSS (MB) |\n");
    printf("|------------|---------|------------|----------|----------|---------------|\n");
    outcome ours[MAX_SIZES], theirs[MAX_SIZES];
    for (int i = 0; i < args.nsizes; i++) {
        ours[i] = measure(&args, false, args.sizes[i], dir);
        print_row("elasticrun", args.sizes[i], &ours[i]);
        theirs[i] = torch ? measure(&args, true, args.sizes[i], dir) : (outcome){ 0 };
        print_row("torchrun", args.sizes[i], &theirs[i]);
        fflush(stdout);
    }
    if (!torch) printf("torchrun: skipped (%s cannot import torch)\n", args.python);
    for (int i = 0; i < args.nsizes; i++)
        if (ours[i].ran && theirs[i].ran)
            printf("%d workers: elasticrun restarts %.0fx faster, with %.0fx less memory\n",
                   args.sizes[i], theirs[i].median_ms / ours[i].median_ms,
                   (double)theirs[i].peak_rss_kb / (double)ours[i].peak_rss_kb);
    if (args.hang_timeout != NULL) {
        double timeout_ms = atof(args.hang_timeout) * 1000.0;
        outcome hang = measure_hang(&args, 4, dir);
        printf("\nhang -> group restarted (the hung worker's last beat to the last new worker's "
               "start), "
               "--hang-timeout %s, 4 workers, %d rounds\n",
               args.hang_timeout, args.crashes);
        printf("| what                  | median ms  | min ms   | max ms   | median / timeout |\n");
        printf("|-----------------------|------------|----------|----------|------------------|\n");
        printf("| --hang-timeout itself | %10.1f |          |          |             1.00 |\n",
               timeout_ms);
        if (hang.ran)
            printf("| elasticrun            | %10.1f | %8.1f | %8.1f | %16.3f |\n", hang.median_ms,
                   hang.min_ms, hang.max_ms, hang.median_ms / timeout_ms);
        else
            printf("| elasticrun            | %10s |          |          |                  |\n",
                   "n/a");
    }
    char command[600];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0) fprintf(stderr, "agent_bench: could not remove %s\n", dir);
    return 0;
}
