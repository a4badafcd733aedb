/*
 * A trainer for the agent's failover tests: resumes from the newest
 * committed checkpoint in a shared directory (commits go through the job's
 * store, the generation's own), then commits one step every --step-ms and
 * reports each resume and commit to a file.
 *
 *   ckpt_step_worker --dir DIR --report FILE [--step-ms MS] [--exit-on-store-loss 1]
 *
 * With --exit-on-store-loss a failed save ends the worker with code 6, as a
 * real trainer whose store vanished would; otherwise it waits to be stopped.
 */
#include "elastic.h"
#include "trainer_common.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *dir = NULL, *path = NULL;
    int step_ms = 100, exit_on_loss = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--report") == 0)
            path = argv[i + 1];
        else if (strcmp(argv[i], "--step-ms") == 0)
            step_ms = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--exit-on-store-loss") == 0)
            exit_on_loss = atoi(argv[i + 1]);
    }
    if (dir == NULL || path == NULL || step_ms < 1) {
        fprintf(stderr, "usage: ckpt_step_worker --dir DIR --report FILE [--step-ms MS]\n");
        return 2;
    }
    elastic_worker *w = NULL;
    elastic_worker_info info = { .struct_size = sizeof info };
    if (elastic_worker_init(NULL, &w) != 0 || elastic_worker_get_info(w, &info) != 0) {
        fprintf(stderr, "worker init: %s\n", elastic_last_error());
        return 3;
    }
    elastic_store *store = NULL;
    if (elastic_worker_get_store(w, &store) != 0) {
        fprintf(stderr, "this trainer needs the job's store: %s\n", elastic_last_error());
        return 3;
    }
    elastic_ckpt *ckpt = trainer_open_checkpoint(dir, &info, store);
    if (ckpt == NULL) return 4;
    uint64_t step = 0;
    int resumed = trainer_resume_step(ckpt, &step);
    if (resumed != 0) return resumed;
    char line[256];
    snprintf(line, sizeof line,
             "resume rank=%d world=%d gen=%" PRIu64 " step=%" PRIu64 " pid=%d ppid=%d\n", info.rank,
             info.world_size, info.generation, step, (int)getpid(), (int)getppid());
    trainer_report(path, line);
    for (;;) {
        if (trainer_step(ckpt, info.rank, step_ms, &step) != 0) {
            /* The generation's store went with its host: the agent ends the
             * generation and stops us; a failure of ours would only race it. */
            if (exit_on_loss) return 6;
            for (;;) pause();
        }
        snprintf(line, sizeof line, "commit rank=%d gen=%" PRIu64 " step=%" PRIu64 "\n", info.rank,
                 info.generation, step);
        if (info.rank == 0) trainer_report(path, line);
    }
}
