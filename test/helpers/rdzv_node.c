/*
 * A rendezvous node as its own process, for tests that kill or freeze a
 * node: rdzv_node <endpoint> <run_id> <min> <max> <keepalive_timeout_ms> <node_id>
 * joins, prints "formed <generation> <group_rank> <group_world_size>", then
 * waits (at most 60 s) for the generation to end and prints "ended <kind>".
 */
#include "elastic.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: rdzv_node endpoint run_id min max keepalive_timeout_ms node_id\n");
        return 2;
    }
    elastic_rdzv_opts o;
    elastic_rdzv_opts_init(&o, sizeof o);
    o.endpoint = argv[1];
    o.run_id = argv[2];
    o.min_nodes = atoi(argv[3]);
    o.max_nodes = atoi(argv[4]);
    o.keepalive_interval_ms = 100;
    o.keepalive_timeout_ms = atoi(argv[5]);
    o.last_call_timeout_ms = 60000; /* the tests form groups at max_nodes */
    o.node_id = argv[6];
    o.node_addr = "127.0.0.1";
    elastic_rdzv *rdzv = NULL;
    elastic_rdzv_result result = { .struct_size = sizeof result };
    int rc = elastic_rdzv_open(&o, &rdzv);
    if (rc == 0) rc = elastic_rdzv_next(rdzv, &result);
    if (rc != 0) {
        fprintf(stderr, "rdzv_node: %s (%s)\n", elastic_err_name(rc), elastic_last_error());
        elastic_rdzv_free(rdzv);
        return 1;
    }
    printf("formed %" PRIu64 " %d %d\n", result.generation, result.group_rank,
           result.group_world_size);
    fflush(stdout);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    rc = elastic_rdzv_watch(rdzv, 60000, &cause);
    if (rc == 0) printf("ended %d\n", cause.kind);
    elastic_rdzv_free(rdzv);
    return 0;
}
