/*
 * The worker both launchers run in bench/agent_bench: appends one line with
 * its rank, restart count, pid and start time (CLOCK_MONOTONIC, comparable
 * across processes) to the report file, then waits to be killed.
 *
 *   agent_bench_worker REPORT_FILE
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (argc < 2) return 2;
    const char *rank = getenv("RANK"), *restart = getenv("TORCHELASTIC_RESTART_COUNT");
    char line[256];
    int len = snprintf(line, sizeof line, "start rank=%s restart=%s pid=%d t=%lld\n", rank ? rank : "-1",
                       restart ? restart : "-1", (int)getpid(), (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, (size_t)len) != len) return 1;
    close(fd);
    for (;;) pause();
}
