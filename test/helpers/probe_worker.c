/*
 * A trainer stand-in for the probe tests: attaches with elastic_worker_init
 * and behaves as the mode says. Prints one line per event on stdout.
 *   probe_worker hang STEPS      beat STEPS times (10 ms apart), then hang
 *   probe_worker silent          attach and never beat
 *   probe_worker steady STEP_MS  beat forever, one step per STEP_MS
 *   probe_worker inproc          train; on reconfigure print the new ranks,
 *                                pass a barrier, go on; exit 0 when stopped
 */
#include <elastic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
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

int main(int argc, char **argv)
{
    if (argc < 2) return 64;
    elastic_worker *w = NULL;
    int rc = elastic_worker_init(NULL, &w);
    if (rc != 0) {
        printf("init failed: %s (%s)\n", elastic_err_name(rc), elastic_last_error());
        return 3;
    }
    elastic_worker_info info;
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
    } else if (strcmp(argv[1], "inproc") == 0) {
        rc = train_in_process(w);
        elastic_worker_close(w);
        return rc;
    }
    elastic_worker_close(w);
    return 64;
}
