/*
 * A trainer for the Slurm tests (test/slurm/): resumes from the newest
 * committed checkpoint in a shared directory, commits one step every
 * --step-ms, and appends what it does to --report with the wall clock (ms)
 * and its Slurm node, so a test can tell which node trained when:
 *
 *   resume node=N rank=R world=W gen=G step=S t=MS
 *   commit node=N gen=G step=S t=MS            (rank 0 only)
 *   done node=N rank=R step=S t=MS             (then exit 0)
 *
 *   notice node=N rank=R saved=S t=MS           (--save-on-notice; then exit 0)
 *
 *   slurm_trainer --dir DIR --report FILE [--step-ms MS] [--stop-file F]
 *                 [--save-on-notice 1]
 *
 * --stop-file F holds a step number: every rank exits 0 once it has
 * committed that step (the test writes a step ahead of all ranks, so they
 * all stop at the same one and none waits on a commit a peer never makes).
 * --save-on-notice 1: SIGTERM (Slurm's scancel signals every process of the
 * step) and the agent's stop notice are a notice (elastic_worker_stop_notice):
 * the first rank to see it proposes "the step after next" in the store
 * (compare-and-set, so one proposal wins), every rank trains to that step,
 * saves it and exits 0 within the grace.
 */
#include "elastic.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long wall_ms(void)
{
    struct timeval now;
    gettimeofday(&now, NULL);
    return (long long)now.tv_sec * 1000 + now.tv_usec / 1000;
}

static void report(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t ignored = write(fd, line, strlen(line)); /* one write: lines of workers do not mix */
    (void)ignored;
    close(fd);
}

static elastic_ckpt *open_checkpoint(const char *dir, const elastic_worker_info *info,
                                     elastic_store *store)
{
    elastic_ckpt_opts opts;
    elastic_ckpt_opts_init(&opts, sizeof opts);
    opts.rank = (uint32_t)info->rank;
    opts.world = (uint32_t)info->world_size;
    opts.generation = info->generation;
    opts.store = store;
    opts.shared_storage = 1;
    opts.compression = ELASTIC_CKPT_NONE;
    opts.fsync = ELASTIC_CKPT_FSYNC_NONE;
    opts.threads = 0;
    opts.commit_timeout_ms = 10000;
    elastic_ckpt *ckpt = NULL;
    if (elastic_ckpt_open(dir, &opts, &ckpt) != 0) {
        fprintf(stderr, "ckpt open: %s\n", elastic_last_error());
        return NULL;
    }
    return ckpt;
}

/* The step in the stop file, or UINT64_MAX while there is none. */
static uint64_t stop_step(const char *stop_file)
{
    FILE *file = fopen(stop_file, "r");
    if (file == NULL) return UINT64_MAX;
    unsigned long long at = 0;
    int got = fscanf(file, "%llu", &at);
    fclose(file);
    return got == 1 ? (uint64_t)at : UINT64_MAX;
}

/* The step every rank stops at: the first proposal stored wins. */
static uint64_t agree_on_stop(elastic_store *store, uint64_t proposal)
{
    char text[32];
    snprintf(text, sizeof text, "%" PRIu64, proposal);
    void *current = NULL;
    size_t len = 0;
    if (elastic_store_compare_set(store, "slurm_trainer/stop", NULL, 0, text, strlen(text),
                                  &current, &len) != 0)
        return proposal;
    uint64_t agreed = current != NULL ? strtoull(current, NULL, 10) : proposal;
    elastic_free(current);
    return agreed;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *path = NULL, *stop_file = NULL;
    int step_ms = 100, save_on_notice = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--report") == 0)
            path = argv[i + 1];
        else if (strcmp(argv[i], "--step-ms") == 0)
            step_ms = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--stop-file") == 0)
            stop_file = argv[i + 1];
        else if (strcmp(argv[i], "--save-on-notice") == 0)
            save_on_notice = atoi(argv[i + 1]);
    }
    if (dir == NULL || path == NULL || step_ms < 1) {
        fprintf(stderr, "usage: slurm_trainer --dir DIR --report FILE [--step-ms MS] "
                        "[--stop-file F]\n");
        return 2;
    }
    const char *node = getenv("SLURMD_NODENAME") != NULL ? getenv("SLURMD_NODENAME") : "-";
    elastic_worker *w = NULL;
    elastic_worker_info info = { .struct_size = sizeof info };
    elastic_store *store = NULL;
    if (elastic_worker_init(NULL, &w) != 0 || elastic_worker_get_info(w, &info) != 0 ||
        elastic_worker_get_store(w, &store) != 0) {
        fprintf(stderr, "worker init: %s\n", elastic_last_error());
        return 3;
    }
    if (save_on_notice && elastic_worker_notice_on_sigterm(w) != 0) {
        fprintf(stderr, "notice on SIGTERM: %s\n", elastic_last_error());
        return 3;
    }
    elastic_ckpt *ckpt = open_checkpoint(dir, &info, store);
    if (ckpt == NULL) return 4;
    uint64_t step = 0, latest = 0;
    if (elastic_ckpt_latest(ckpt, &latest) == 0) {
        void *data = NULL;
        size_t len = 0;
        if (elastic_ckpt_read(ckpt, latest, "step", &data, &len) != 0 || len != sizeof step) {
            fprintf(stderr, "ckpt read of step %" PRIu64 ": %s\n", latest, elastic_last_error());
            return 5;
        }
        memcpy(&step, data, sizeof step);
        elastic_free(data);
    }
    char line[256];
    snprintf(line, sizeof line,
             "resume node=%s rank=%d world=%d gen=%" PRIu64 " step=%" PRIu64 " t=%lld\n", node,
             info.rank, info.world_size, info.generation, step, wall_ms());
    report(path, line);
    uint64_t notice_stop = UINT64_MAX;
    for (;;) {
        if (save_on_notice && notice_stop == UINT64_MAX && elastic_worker_stop_notice(w, NULL))
            notice_stop = agree_on_stop(store, step + 2);
        if (step >= notice_stop) {
            snprintf(line, sizeof line, "notice node=%s rank=%d saved=%" PRIu64 " t=%lld\n", node,
                     info.rank, step, wall_ms());
            report(path, line);
            elastic_ckpt_close(ckpt);
            return 0;
        }
        if (stop_file != NULL && step >= stop_step(stop_file)) {
            snprintf(line, sizeof line, "done node=%s rank=%d step=%" PRIu64 " t=%lld\n", node,
                     info.rank, step, wall_ms());
            report(path, line);
            elastic_ckpt_close(ckpt);
            return 0;
        }
        struct timespec step_time = { step_ms / 1000, (long)(step_ms % 1000) * 1000000L };
        nanosleep(&step_time, NULL); /* the "training" of one step */
        step++;
        elastic_ckpt_blob blob = {
            .name = "step", .data = &step, .len = sizeof step, .flags = ELASTIC_CKPT_REPLICATED
        };
        if (elastic_ckpt_save(ckpt, step, &blob, 1) != 0) {
            /* A peer is gone: the agent ends the generation and stops us. */
            fprintf(stderr, "rank %d: save of step %" PRIu64 ": %s\n", info.rank, step,
                    elastic_last_error());
            for (;;) pause();
        }
        snprintf(line, sizeof line, "commit node=%s gen=%" PRIu64 " step=%" PRIu64 " t=%lld\n",
                 node, info.generation, step, wall_ms());
        if (info.rank == 0) report(path, line);
    }
}
