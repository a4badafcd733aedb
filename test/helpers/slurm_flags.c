/*
 * Prints the elasticrun flags that src/slurm/env.c derives from this
 * process's Slurm environment, one shell word per line ("--nnodes", "3:3",
 * ...), or exits 1 with the reason. The Slurm tests use it to start a job
 * from Slurm's environment alone until elasticrun derives the same itself.
 */
#include "slurm/slurm.h"

#include <stdio.h>

extern char **environ;

int main(void)
{
    elastic__slurm_settings s;
    if (elastic__slurm_derive(environ, &s) != 0) {
        fprintf(stderr, "slurm_flags: %s\n", elastic_last_error());
        return 1;
    }
    if (!s.in_slurm || !s.has_endpoint) {
        fprintf(stderr, "slurm_flags: not in a Slurm job step\n");
        return 1;
    }
    printf("--rdzv-backend\nc10d\n--rdzv-endpoint\n%s:%d\n--rdzv-id\n%s\n", s.rdzv_host,
           s.rdzv_port, s.run_id);
    printf("--nnodes\n%d:%d\n--nproc-per-node\n%d\n", s.nnodes, s.nnodes, s.nproc_per_node);
    printf("--rdzv-conf\nis_host=%d\n", s.is_host ? 1 : 0);
    return 0;
}
