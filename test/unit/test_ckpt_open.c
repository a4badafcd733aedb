/*
 * Opening a checkpoint directory that does not exist yet from many ranks at
 * once always succeeds (the mkdir race is not an error for the loser).
 */
#include "test.h"

#include <signal.h>
#include <sys/wait.h>

TEST(ckpt_concurrent_open_of_a_new_directory_always_succeeds)
{
    enum { RANKS = 8, ROUNDS = 20 };
    for (int round = 0; round < ROUNDS; round++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/ckpt-%d", test_tmpdir(), round);
        int go[2];
        ASSERT_EQ(pipe(go), 0);
        pid_t pids[RANKS];
        for (int rank = 0; rank < RANKS; rank++) {
            pids[rank] = fork();
            ASSERT(pids[rank] >= 0);
            if (pids[rank] == 0) {
                close(go[1]);
                char byte;
                if (read(go[0], &byte, 1) != 0) _exit(3);
                elastic_ckpt *ckpt = NULL;
                int rc = elastic_ckpt_open(dir, NULL, &ckpt);
                if (rc != 0) {
                    fprintf(stderr, "rank %d: %s: %s\n", rank, elastic_err_name(rc),
                            elastic_last_error());
                    _exit(1);
                }
                elastic_ckpt_close(ckpt);
                _exit(0);
            }
        }
        close(go[0]);
        close(go[1]); /* go */
        for (int rank = 0; rank < RANKS; rank++) {
            int status = 0;
            ASSERT_EQ(waitpid(pids[rank], &status, 0), pids[rank]);
            ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
    }
}
