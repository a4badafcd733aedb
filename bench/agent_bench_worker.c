/*
 * The worker both launchers run in bench/agent_bench: appends one line with
 * its rank, restart count, pid and start time (CLOCK_MONOTONIC, comparable
 * across processes) to the report file, then waits to be killed. With
 * "heartbeat" (elasticrun only) it heartbeats through libelastic every 20 ms
 * until SIGUSR1, then reports the time of its last beat and hangs.
 *
 *   agent_bench_worker REPORT_FILE [heartbeat]
 */
#include <elastic.h>

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t hang_now;

static void on_usr1(int signum)
{
    (void)signum, hang_now = 1;
}

static long long monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

static int report(const char *path, const char *what, long long t)
{
    const char *rank = getenv("RANK"), *restart = getenv("TORCHELASTIC_RESTART_COUNT");
    char line[256];
    int len = snprintf(line, sizeof line, "%s rank=%s restart=%s pid=%d t=%lld\n", what,
                       rank ? rank : "-1", restart ? restart : "-1", (int)getpid(), t);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, (size_t)len) != len) return 1;
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    long long started = monotonic_ns();
    if (argc < 2) return 2;
    bool heartbeat = argc > 2 && strcmp(argv[2], "heartbeat") == 0;
    elastic_worker *w = NULL;
    if (heartbeat) {
        signal(SIGUSR1, on_usr1);
        if (elastic_worker_init(NULL, &w) != 0) return 1;
        elastic_worker_heartbeat(w, 0);
    }
    if (report(argv[1], "start", started) != 0) return 1;
    if (!heartbeat)
        for (;;) pause();
    long long last_beat = monotonic_ns();
    for (uint64_t step = 1; !hang_now; step++) {
        elastic_worker_heartbeat(w, step);
        last_beat = monotonic_ns();
        nanosleep(&(struct timespec){ 0, 20000000L }, NULL);
    }
    if (report(argv[1], "hung", last_beat) != 0) return 1;
    for (;;) pause(); /* hung: no more beats */
}
