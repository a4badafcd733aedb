/*
 * The test runner: forks each registered test into its own process group,
 * bounds it with a timeout, prints TAP and ends with "N passed, N failed, N
 * skipped". A test's output is kept in a file and shown whole only when it
 * fails. Independent tests run side by side (most of the suite waits on
 * processes, sockets and deadlines, not on the CPU); a TEST_ALONE test runs
 * with nothing else of this runner running (they all run first, one by one);
 * then the tests given 5 minutes or more start first, the rest in order.
 * Results are printed in the tests' order (stable numbers, valid TAP) as soon
 * as every earlier test has its result; the slowest 10 tests come last,
 * before the summary.
 *
 *   run_tests [-j N] [--list] [SUBSTRING | =NAME | --exact NAME]...
 *
 * SUBSTRING selects the tests whose name contains it (`store` selects every
 * store_... test, since names start with their module), =NAME and --exact NAME
 * the one test of that name; no selector selects every test. --list prints the
 * selected names, one per line, and runs nothing. -j N runs up to N tests at
 * once (default: 4 per CPU, at most 16; -j 1 runs them one after another).
 */
#include "test.h"

#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#define SKIP_EXIT_CODE 77

static test_case *registered_tests;
static char current_tmpdir[PATH_MAX]; /* the test's own (set in its process) */
static char
    root_dir[64]; /* /tmp/elastic-test-XXXXXX: where every test's directory and log are made */

void test__register(test_case *tc)
{
    /* Constructors run file by file; keep registration order within a file. */
    test_case **tail = &registered_tests;
    while (*tail != NULL) tail = &(*tail)->next;
    *tail = tc;
}

void test__fail(const char *file, int line, const char *fmt, ...)
{
    va_list args;
    fprintf(stderr, "%s:%d: ", file, line);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    fflush(NULL);
    _exit(1);
}

void test__skip(const char *reason)
{
    fprintf(stderr, "SKIP: %s\n", reason);
    fflush(NULL);
    _exit(SKIP_EXIT_CODE);
}

const char *test_tmpdir(void)
{
    return current_tmpdir;
}

static const char *path_in(const char *env_name, const char *name)
{
    static _Thread_local char path[PATH_MAX];
    const char *dir = getenv(env_name);
    if (dir == NULL)
        test__fail(__FILE__, __LINE__, "%s is not set (run the tests with make test)", env_name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

const char *test_bin_path(const char *name)
{
    return path_in("ELASTIC_BIN_DIR", name);
}
const char *test_helper_path(const char *name)
{
    return path_in("ELASTIC_HELPER_DIR", name);
}
const char *test_example_path(const char *name)
{
    return path_in("ELASTIC_EXAMPLE_DIR", name);
}

const char *test_source_dir(void)
{
    const char *dir = getenv("ELASTIC_SOURCE_DIR");
    return dir != NULL ? dir : ".";
}

char *test_source_text(const char *relative)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_source_dir(), relative);
    FILE *f = fopen(path, "rb");
    if (f == NULL) FAIL("cannot open %s: %s", path, strerror(errno));
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size < 0 || size > 8L * 1024 * 1024) FAIL("%s: size %ld (want 0..8 MiB)", path, size);
    rewind(f);
    char *text = malloc((size_t)size + 1);
    ASSERT(text != NULL);
    size_t got = fread(text, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) FAIL("%s: read %zu of %ld bytes", path, got, size);
    text[size] = '\0';
    return text;
}

static int timeout_scale(void)
{
    const char *value = getenv("ELASTIC_TEST_TIMEOUT_SCALE");
    int scale = value != NULL ? atoi(value) : 1;
    return scale >= 1 && scale <= 100 ? scale : 1;
}

int test_scaled_ms(int ms)
{
    return ms * timeout_scale();
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* What the command line asked for: substrings and exact names (pointers into argv). */
typedef struct selection {
    const char **substrings, **exact;
    int n_substrings, n_exact;
    bool list;
    int jobs; /* 0: the default (default_jobs) */
} selection;

static bool name_selected(const char *name, const selection *sel)
{
    if (sel->n_substrings == 0 && sel->n_exact == 0) return true;
    for (int i = 0; i < sel->n_substrings; i++)
        if (strstr(name, sel->substrings[i]) != NULL) return true;
    for (int i = 0; i < sel->n_exact; i++)
        if (strcmp(name, sel->exact[i]) == 0) return true;
    return false;
}

static bool test_exists(const char *name)
{
    for (test_case *tc = registered_tests; tc != NULL; tc = tc->next)
        if (strcmp(tc->name, name) == 0) return true;
    return false;
}

#define MAX_JOBS 64

/* 4 per CPU, at most 16: the suite mostly waits (on processes it starts, on
 * sockets, on deadlines), so a 2-CPU machine keeps 8 tests going. */
static int default_jobs(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    return cpus * 4 > 16 ? 16 : (int)cpus * 4;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: run_tests [-j N] [--list] [SUBSTRING | =NAME | --exact NAME]...\n"
            "  SUBSTRING      the tests whose name contains it (e.g. store, rdzv_etcd)\n"
            "  =NAME          the test named exactly NAME (also --exact NAME)\n"
            "  --list         print the selected tests' names, one per line; run nothing\n"
            "  -j N           run up to N tests at once (1..%d; default %d here: 4 per CPU,\n"
            "                 at most 16); TEST_ALONE tests still run alone\n"
            "No selector selects every test.\n",
            MAX_JOBS, default_jobs());
}

/* N of -j N (1..MAX_JOBS), or -1 after saying what is wrong. */
static int parse_jobs(const char *value)
{
    char *end = NULL;
    errno = 0;
    long n = value != NULL ? strtol(value, &end, 10) : 0;
    if (value == NULL || *value == '\0' || *end != '\0' || errno != 0 || n < 1 || n > MAX_JOBS) {
        fprintf(stderr, "run_tests: -j needs a number of tests from 1 to %d, not \"%s\"\n",
                MAX_JOBS, value != NULL ? value : "");
        return -1;
    }
    return (int)n;
}

/* 0, or 2 after saying what is wrong (an unknown option, a missing or unknown
 * exact name, a bad -j): a typo must not pass as "0 tests, 0 failed". */
static int parse_args(int argc, char **argv, selection *sel)
{
    sel->substrings = calloc((size_t)argc, sizeof *sel->substrings);
    sel->exact = calloc((size_t)argc, sizeof *sel->exact);
    if (sel->substrings == NULL || sel->exact == NULL) {
        perror("run_tests");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *exact = NULL;
        if (strcmp(arg, "--list") == 0) {
            sel->list = true;
            continue;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(arg, "-j") == 0 || strcmp(arg, "--jobs") == 0 || strncmp(arg, "-j", 2) == 0 ||
            strncmp(arg, "--jobs=", 7) == 0) {
            const char *value = strcmp(arg, "-j") == 0 || strcmp(arg, "--jobs") == 0
                                    ? (i + 1 < argc ? argv[++i] : NULL)
                                    : arg + (arg[1] == 'j' ? 2 : 7);
            if ((sel->jobs = parse_jobs(value)) < 0) return 2;
            continue;
        }
        if (strcmp(arg, "--exact") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "run_tests: --exact needs a test name\n");
                return 2;
            }
            exact = argv[++i];
        } else if (strncmp(arg, "--exact=", 8) == 0) {
            exact = arg + 8;
        } else if (arg[0] == '=') {
            exact = arg + 1;
        } else if (arg[0] == '-') {
            fprintf(stderr, "run_tests: unknown option %s\n", arg);
            usage(stderr);
            return 2;
        }
        if (exact == NULL) {
            sel->substrings[sel->n_substrings++] = arg;
        } else if (!test_exists(exact)) {
            fprintf(stderr, "run_tests: no test is named \"%s\" (--list prints them)\n", exact);
            return 2;
        } else {
            sel->exact[sel->n_exact++] = exact;
        }
    }
    return 0;
}

static void show_output(const char *log_path, const char *prefix)
{
    FILE *log = fopen(log_path, "r");
    if (log == NULL) return;
    char line[2048];
    while (fgets(line, sizeof line, log) != NULL) printf("%s%s", prefix, line);
    fclose(log);
}

static void skip_reason(const char *log_path, char *reason, size_t size)
{
    snprintf(reason, size, "skipped");
    FILE *log = fopen(log_path, "r");
    if (log == NULL) return;
    char line[1024];
    while (fgets(line, sizeof line, log) != NULL)
        if (strncmp(line, "SKIP: ", 6) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(reason, size, "%s", line + 6);
        }
    fclose(log);
}

enum outcome { PASSED, FAILED, SKIPPED };
enum phase { WAITING, RUNNING, FINISHED };

/* One selected test through its life: waiting, running (its process group
 * and deadline), finished (its exit status, or timed out). */
typedef struct run {
    test_case *tc;
    int number;
    enum phase phase;
    pid_t pid;
    int pidfd; /* -1: none (kernels without pidfd_open: the loop polls every 10 ms) */
    uint64_t started_ms, deadline_ms;
    double seconds;
    bool timed_out;
    int status;
    char dir[PATH_MAX];
    char log_path[PATH_MAX + 16];
} run;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The runs this runner started and has not reaped, for the child (which
 * closes their pidfds: a test counting its descriptors must not see them) and
 * for an interrupted runner (which kills their groups). */
static run *running_runs[MAX_JOBS];
static int n_running;
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    interrupted = sig;
}

static void close_pidfd(run *r)
{
    if (r->pidfd < 0) return;
    syscall(SYS_close, r->pidfd); /* as opened: by raw syscall, unseen by TSan (agent_harness.c) */
    r->pidfd = -1;
}

static void start(run *r)
{
    snprintf(r->dir, sizeof r->dir, "%s/%s", root_dir, r->tc->name);
    mkdir(r->dir, 0700);
    snprintf(r->log_path, sizeof r->log_path, "%s.log", r->dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        for (int i = 0; i < n_running; i++) close_pidfd(running_runs[i]);
        snprintf(current_tmpdir, sizeof current_tmpdir, "%s", r->dir);
        int log_fd = open(r->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        close(log_fd);
        r->tc->fn();
        fflush(NULL);
        exit(0);
    }
    if (pid < 0) { /* no process for it: it fails, saying why */
        FILE *log = fopen(r->log_path, "w");
        if (log != NULL) {
            fprintf(log, "run_tests: fork: %s\n", strerror(errno));
            fclose(log);
        }
        r->phase = FINISHED;
        r->status = 1 << 8; /* exit code 1 */
        return;
    }
    setpgid(pid, pid);
    r->pid = pid;
    r->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    r->started_ms = now_ms();
    r->deadline_ms = r->started_ms + (uint64_t)r->tc->timeout_s * 1000u * (uint64_t)timeout_scale();
    r->phase = RUNNING;
    running_runs[n_running++] = r;
}

/* Ends a run whose process exited (zombie, not yet reaped) or is past its
 * deadline: the whole group goes first, while the zombie still holds the
 * group's id (so no new process can have taken it), then the reaping. */
static void finish(run *r, bool timed_out)
{
    kill(-r->pid, SIGKILL); /* whatever the test started in its group goes too */
    int status = 0;
    while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {
    }
    close_pidfd(r);
    /* Its directory goes now, not when its result is printed (in order, maybe
     * long after): finished tests' files must not pile up behind a slow one. */
    nftw(r->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    r->status = status;
    r->timed_out = timed_out;
    r->seconds = (double)(now_ms() - r->started_ms) / 1000.0;
    r->phase = FINISHED;
    for (int i = 0; i < n_running; i++)
        if (running_runs[i] == r) {
            running_runs[i] = running_runs[--n_running];
            break;
        }
}

/* Whether r's process has exited (left a zombie: WNOWAIT does not reap it). */
static bool exited(const run *r)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    return waitid(P_PID, (id_t)r->pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == r->pid;
}

/* Waits until some running test exits or reaches its deadline (or a signal
 * interrupts), then finishes every run that did. */
static void wait_for_runs(void)
{
    struct pollfd fds[MAX_JOBS];
    int n_fds = 0;
    uint64_t now = now_ms(), first_deadline = UINT64_MAX;
    bool without_pidfd = false;
    for (int i = 0; i < n_running; i++) {
        run *r = running_runs[i];
        if (r->deadline_ms < first_deadline) first_deadline = r->deadline_ms;
        if (r->pidfd >= 0)
            fds[n_fds++] = (struct pollfd){ .fd = r->pidfd, .events = POLLIN };
        else
            without_pidfd = true;
    }
    int timeout = first_deadline <= now          ? 0
                  : first_deadline - now > 60000 ? 60000
                                                 : (int)(first_deadline - now);
    if (without_pidfd && timeout > 10) timeout = 10;
    poll(fds, (nfds_t)n_fds, timeout); /* EINTR: a signal; the checks below still run */
    now = now_ms();
    for (int i = 0; i < n_running;) {
        run *r = running_runs[i];
        if (exited(r))
            finish(r, false); /* moves the last running run to i */
        else if (now >= r->deadline_ms)
            finish(r, true);
        else
            i++;
    }
}

static enum outcome report(const run *r)
{
    const test_case *tc = r->tc;
    int status = r->status;
    enum outcome result;
    if (r->timed_out) {
        printf("not ok %d - %s # timed out after %d s\n", r->number, tc->name,
               tc->timeout_s * timeout_scale());
        show_output(r->log_path, "#   ");
        result = FAILED;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("ok %d - %s\n", r->number, tc->name);
        result = PASSED;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == SKIP_EXIT_CODE) {
        char reason[1024];
        skip_reason(r->log_path, reason, sizeof reason);
        printf("ok %d - %s # SKIP %s\n", r->number, tc->name, reason);
        result = SKIPPED;
    } else {
        if (WIFSIGNALED(status))
            printf("not ok %d - %s # killed by signal %d\n", r->number, tc->name, WTERMSIG(status));
        else
            printf("not ok %d - %s # exit code %d\n", r->number, tc->name, WEXITSTATUS(status));
        show_output(r->log_path, "#   ");
        result = FAILED;
    }
    remove(r->log_path);
    fflush(stdout);
    return result;
}

static int by_seconds_descending(const void *a, const void *b)
{
    double x = (*(const run *const *)a)->seconds, y = (*(const run *const *)b)->seconds;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The 10 slowest tests (TAP comments): where the suite's wall time goes. */
static void print_slowest(run *runs, int n, double wall_s, int jobs)
{
    if (n <= 0) return;
    run **order = calloc((size_t)n, sizeof *order);
    if (order == NULL) return;
    for (int i = 0; i < n; i++) order[i] = &runs[i];
    qsort(order, (size_t)n, sizeof *order, by_seconds_descending);
    printf("# %d tests in %.0f s, up to %d at once; the slowest:\n", n, wall_s, jobs);
    for (int i = 0; i < n && i < 10; i++)
        printf("#   %6.1f s  %s%s\n", order[i]->seconds, order[i]->tc->name,
               order[i]->tc->alone ? " (alone)" : "");
    free(order);
}

/* A test given this long (before scaling) starts before the others: the
 * suite's wall time is at least its longest test's, so those go first. */
#define LONG_TEST_S 300

/* The next test to start beside others: the long ones first, then the rest
 * in their order; NULL when none is left. */
static run *next_shared(run *runs, int n, int *next_long, int *next_any)
{
    for (; *next_long < n; ++*next_long) {
        run *r = &runs[*next_long];
        if (!r->tc->alone && r->tc->timeout_s >= LONG_TEST_S && r->phase == WAITING) {
            ++*next_long;
            return r;
        }
    }
    for (; *next_any < n; ++*next_any) {
        run *r = &runs[*next_any];
        if (!r->tc->alone && r->phase == WAITING) {
            ++*next_any;
            return r;
        }
    }
    return NULL;
}

/* Runs every selected test: first the TEST_ALONE ones, one by one with
 * nothing beside them, then the rest, up to `jobs` at once (the long ones
 * first, then in their order). counts[] gets the outcomes; false if
 * interrupted. */
static bool run_all(run *runs, int n, int jobs, int counts[3])
{
    int next_alone = 0, next_long = 0, next_any = 0, next_report = 0;
    while (next_report < n) {
        if (interrupted) return false;
        while (next_alone < n && !runs[next_alone].tc->alone) next_alone++;
        if (next_alone < n) {
            if (n_running == 0) start(&runs[next_alone++]);
        } else {
            run *r;
            while (n_running < jobs && (r = next_shared(runs, n, &next_long, &next_any)) != NULL)
                start(r);
        }
        if (n_running > 0) wait_for_runs();
        while (next_report < n && runs[next_report].phase == FINISHED)
            counts[report(&runs[next_report++])]++;
    }
    return true;
}

/* Run inside a Slurm allocation (a CI job under sbatch), elasticrun would
 * take its settings from the allocation's SLURM_* variables: the suite
 * starts without them; the Slurm tests give their own. */
static void forget_slurm_environment(void)
{
    extern char **environ;
    for (int i = 0; environ[i] != NULL;) {
        const char *entry = environ[i];
        if (strncmp(entry, "SLURM_", 6) != 0 && strncmp(entry, "SLURMD_", 7) != 0) {
            i++;
            continue;
        }
        char name[256];
        size_t len = strcspn(entry, "=");
        if (len >= sizeof name) { /* no such Slurm variable: leave it */
            i++;
            continue;
        }
        snprintf(name, sizeof name, "%.*s", (int)len, entry);
        unsetenv(name); /* environ shifts: look at index i again */
    }
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    forget_slurm_environment();
    selection sel = { 0 };
    int rc = parse_args(argc, argv, &sel);
    if (rc != 0) {
        free(sel.substrings);
        free(sel.exact);
        return rc;
    }
    if (sel.list) {
        for (test_case *tc = registered_tests; tc != NULL; tc = tc->next)
            if (name_selected(tc->name, &sel)) printf("%s\n", tc->name);
        free(sel.substrings);
        free(sel.exact);
        return fflush(stdout) == 0 ? 0 : 2;
    }
    int jobs = sel.jobs > 0 ? sel.jobs : default_jobs();
    char root_template[] = "/tmp/elastic-test-XXXXXX";
    const char *root = mkdtemp(root_template);
    if (root == NULL) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(root_dir, sizeof root_dir, "%s", root);
    int selected = 0;
    for (test_case *tc = registered_tests; tc != NULL; tc = tc->next)
        if (name_selected(tc->name, &sel)) selected++;
    run *runs = calloc(selected > 0 ? (size_t)selected : 1, sizeof *runs);
    if (runs == NULL) {
        perror("run_tests");
        return 2;
    }
    int number = 0;
    for (test_case *tc = registered_tests; tc != NULL; tc = tc->next)
        if (name_selected(tc->name, &sel))
            runs[number] = (run){ .tc = tc, .number = number + 1, .pidfd = -1 }, number++;
    printf("1..%d\n", selected);
    fflush(stdout);

    /* Ctrl-C or a CI timeout: the tests' process groups go too (they are not
     * in the terminal's group, so nothing else would end them). */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt; /* no SA_RESTART: poll returns at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    uint64_t began = now_ms();
    int counts[3] = { 0, 0, 0 };
    bool whole = run_all(runs, selected, jobs, counts);
    if (!whole) {
        while (n_running > 0) finish(running_runs[0], true);
        printf("# interrupted (signal %d)\n", (int)interrupted);
    } else {
        print_slowest(runs, selected, (double)(now_ms() - began) / 1000.0, jobs);
    }
    nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(runs);
    free(sel.substrings);
    free(sel.exact);
    if (!whole) return 128 + (int)interrupted;

    printf("%d passed, %d failed, %d skipped\n", counts[PASSED], counts[FAILED], counts[SKIPPED]);
    return counts[FAILED] == 0 ? 0 : 1;
}
