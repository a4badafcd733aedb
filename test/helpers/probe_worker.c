/*
 * A trainer stand-in for the probe tests: attaches with elastic_worker_init
 * and behaves as the mode says. Prints one line per event on stdout.
 *   probe_worker hang STEPS      beat STEPS times (10 ms apart), then hang
 *   probe_worker silent          attach and never beat
 *   probe_worker steady STEP_MS  beat forever, one step per STEP_MS
 *   probe_worker compute STEP_MS [STALL_STEP STALL_MS]  steps of STEP_MS reported
 *                                with elastic_worker_report_step_time, forever;
 *                                3x slower while $PROBE_WORKER_SLOW_FILE exists;
 *                                exits 0 once $PROBE_WORKER_DONE_FILE exists;
 *                                step STALL_STEP (of the first run) takes STALL_MS;
 *                                "tick RANK STEP WALL_MS" every 10 steps (the bench's rate)
 *   probe_worker inproc          train; on reconfigure print the new ranks,
 *                                pass a barrier, go on; exit 0 when stopped
 *   probe_worker train STEPS DIR a toy data-parallel job under elasticrun: an
 *                                all-reduce through the store each step, rank 0
 *                                checkpoints to DIR; see train() below
 *   probe_worker hangrank R STEPS  under elasticrun: rank R hangs after STEPS
 *                                in the first run; everyone else (and every rank
 *                                after a restart) beats STEPS times and exits 0
 */
#include <elastic.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* A node's compute time as the straggler scores see it (returns once the
 * done file exists: the job's end, for the test that wants one). */
static void compute(elastic_worker *w, const elastic_worker_info *info, int step_ms,
                    long long stall_step, int stall_ms)
{
    const char *slow_file = getenv("PROBE_WORKER_SLOW_FILE");
    const char *done_file = getenv("PROBE_WORKER_DONE_FILE");
    for (uint64_t step = 1; done_file == NULL || access(done_file, F_OK) != 0; step++) {
        int ms = slow_file != NULL && access(slow_file, F_OK) == 0 ? 3 * step_ms : step_ms;
        bool first_run = info->restart_count == 0 && info->generation <= 1;
        if (first_run && (long long)step == stall_step) ms = stall_ms;
        sleep_ms(ms);
        elastic_worker_report_step_time(w, (uint64_t)ms * 1000000u);
        elastic_worker_heartbeat(w, step);
        if (step % 10 == 0) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            printf("tick %d %llu %lld\n", info->rank, (unsigned long long)step,
                   (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
            fflush(stdout);
        }
    }
}

/* Not static and not inlined: gdb should show it in the hung stack. */
__attribute__((noinline)) void hang_here(void);
__attribute__((noinline)) void hang_here(void)
{
    for (;;) pause();
}

static void on_abort(void *user, uint64_t generation, const char *reason)
{
    (void)user;
    printf("abort generation=%llu reason=%s\n", (unsigned long long)generation, reason);
    fflush(stdout);
    /* PROBE_STUCK_ABORT_RANK: this rank's hook never returns (a collective
     * that cannot be aborted), so the agent must restart it the ordinary way. */
    const char *stuck = getenv("PROBE_STUCK_ABORT_RANK"), *rank = getenv("RANK");
    if (stuck != NULL && rank != NULL && strcmp(stuck, rank) == 0) hang_here();
}

static void on_reconfigure(void *user, const elastic_worker_info *info)
{
    (void)user;
    printf("reconfigured rank=%d world=%d generation=%llu pid=%d\n", info->rank, info->world_size,
           (unsigned long long)info->generation, (int)getpid());
    fflush(stdout);
}

static int train_in_process(elastic_worker *w)
{
    elastic_worker_on_abort(w, on_abort, NULL);
    elastic_worker_on_reconfigure(w, on_reconfigure, NULL);
    printf("training\n"); /* callbacks are in place */
    fflush(stdout);
    for (uint64_t step = 1;; step++) {
        elastic_worker_heartbeat(w, step);
        int rc = elastic_worker_poll(w);
        if (rc == ELASTIC_ERECONFIGURE) {
            printf("barrier rc=%d\n", elastic_worker_barrier(w, 20000));
            fflush(stdout);
        } else if (rc == ELASTIC_ECLOSED) {
            printf("stopped\n");
            return 0;
        } else if (rc != 0) {
            printf("poll failed: %s (%s)\n", elastic_err_name(rc), elastic_last_error());
            return 2;
        }
        sleep_ms(5);
    }
}

/* ---- the toy training job ---------------------------------------------------- */

/* Every rank holds the same model x. Step s all-reduces (through the store)
 * each rank's gradient s and adds the mean, so after STEPS steps
 * x = STEPS (STEPS + 1) / 2 whatever failures happened on the way, provided
 * every rank restarts from the checkpoint of the last completed step. */
typedef struct model {
    long long step, x;
} model;

static const char *checkpoint_dir;

static void load_checkpoint(model *m)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/checkpoint", checkpoint_dir);
    m->step = m->x = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    if (fscanf(f, "%lld %lld", &m->step, &m->x) != 2) m->step = m->x = 0;
    fclose(f);
}

static void save_checkpoint(const model *m)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/checkpoint", checkpoint_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) exit(5);
    fprintf(f, "%lld %lld\n", m->step, m->x);
    fclose(f);
    rename(tmp, path); /* atomic: a reader sees the old or the new step */
}

/* 0, or ELASTIC_ERECONFIGURE when the generation changed on the way. */
static int all_reduce_mean(elastic_worker *w, long long step, long long grad, long long *mean)
{
    elastic_worker_info info = { .struct_size = sizeof info };
    elastic_worker_get_info(w, &info);
    elastic_store *store = NULL;
    if (elastic_worker_get_store(w, &store) != 0) return ELASTIC_ERECONFIGURE;
    char key[96];
    snprintf(key, sizeof key, "grad/%lld/%d", step, info.rank);
    char value[32];
    int len = snprintf(value, sizeof value, "%lld", grad);
    if (elastic_store_set(store, key, value, (size_t)len) != 0) return ELASTIC_ERECONFIGURE;
    long long sum = 0;
    for (int r = 0; r < info.world_size; r++) {
        snprintf(key, sizeof key, "grad/%lld/%d", step, r);
        for (;;) {
            void *got = NULL;
            size_t got_len = 0;
            int rc = elastic_store_get(store, key, 100, &got, &got_len);
            if (rc == 0) {
                sum += atoll(got);
                elastic_free(got);
                break;
            }
            if (rc != ELASTIC_ETIMEDOUT) return ELASTIC_ERECONFIGURE;
            rc = elastic_worker_poll(w); /* a peer died: wait here for the next generation */
            if (rc == ELASTIC_ERECONFIGURE) return rc;
            if (rc != 0) exit(6);
        }
    }
    *mean = sum / info.world_size;
    return 0;
}

static int train(elastic_worker *w, long long steps)
{
    elastic_worker_on_abort(w, on_abort, NULL);
    elastic_worker_on_reconfigure(w, on_reconfigure, NULL);
    elastic_worker_info info = { .struct_size = sizeof info };
    elastic_worker_get_info(w, &info);
    const char *fail_rank = getenv("PROBE_FAIL_RANK"), *fail_step = getenv("PROBE_FAIL_STEP");
    model m;
    load_checkpoint(&m);
    while (m.step < steps) {
        long long step = m.step + 1, mean = 0;
        if (fail_rank != NULL && info.restart_count == 0 && info.rank == atoi(fail_rank) &&
            step == atoll(fail_step)) {
            printf("failing at step %lld\n", step);
            fflush(stdout);
            _exit(1);
        }
        int rc = all_reduce_mean(w, step, step, &mean);
        if (rc == 0)
            rc = elastic_worker_barrier(
                w, 30000); /* everyone read step's values before rank 0 saves */
        if (rc == ELASTIC_ERECONFIGURE) {
            elastic_worker_get_info(w, &info);
            load_checkpoint(&m); /* back to the last completed step */
            continue;
        }
        if (rc != 0) {
            printf("step %lld failed: %s (%s)\n", step, elastic_err_name(rc), elastic_last_error());
            return 7;
        }
        m.step = step;
        m.x += mean;
        if (info.rank == 0) save_checkpoint(&m);
        elastic_worker_heartbeat(w, (uint64_t)step);
        rc =
            elastic_worker_barrier(w, 30000); /* the checkpoint is on disk before anyone moves on */
        if (rc == ELASTIC_ERECONFIGURE) {
            elastic_worker_get_info(w, &info);
            load_checkpoint(&m);
        }
    }
    printf("result x=%lld steps=%lld rank=%d pid=%d\n", m.x, m.step, info.rank, (int)getpid());
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 64;
    elastic_worker *w = NULL;
    int rc = elastic_worker_init(NULL, &w);
    if (rc != 0) {
        printf("init failed: %s (%s)\n", elastic_err_name(rc), elastic_last_error());
        return 3;
    }
    elastic_worker_info info = { .struct_size = sizeof info };
    elastic_worker_get_info(w, &info);
    printf("started rank=%d world=%d generation=%llu pid=%d\n", info.rank, info.world_size,
           (unsigned long long)info.generation, (int)getpid());
    fflush(stdout);
    if (strcmp(argv[1], "hang") == 0 && argc == 3) {
        int steps = atoi(argv[2]);
        for (int step = 1; step <= steps; step++) {
            elastic_worker_heartbeat(w, (uint64_t)step);
            sleep_ms(10);
        }
        hang_here();
    } else if (strcmp(argv[1], "silent") == 0) {
        hang_here();
    } else if (strcmp(argv[1], "steady") == 0 && argc == 3) {
        int step_ms = atoi(argv[2]);
        for (uint64_t step = 1;; step++) {
            elastic_worker_heartbeat(w, step);
            sleep_ms(step_ms);
        }
    } else if (strcmp(argv[1], "compute") == 0 && (argc == 3 || argc == 5)) {
        bool stall = argc == 5;
        compute(w, &info, atoi(argv[2]), stall ? atoll(argv[3]) : 0, stall ? atoi(argv[4]) : 0);
        elastic_worker_close(w);
        return 0;
    } else if (strcmp(argv[1], "train") == 0 && argc == 4) {
        checkpoint_dir = argv[3];
        rc = train(w, atoll(argv[2]));
        elastic_worker_close(w);
        return rc;
    } else if (strcmp(argv[1], "hangrank") == 0 && argc == 4) {
        int steps = atoi(argv[3]);
        for (int step = 1; step <= steps; step++) {
            elastic_worker_heartbeat(w, (uint64_t)step);
            sleep_ms(10);
        }
        if (info.restart_count == 0 && info.rank == atoi(argv[2])) hang_here();
        elastic_worker_close(w);
        return 0;
    } else if (strcmp(argv[1], "inproc") == 0) {
        rc = train_in_process(w);
        elastic_worker_close(w);
        return rc;
    }
    elastic_worker_close(w);
    return 64;
}
