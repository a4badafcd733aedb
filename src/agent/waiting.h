/*
 * "waiting for nodes" lines while a rendezvous is slow (waiting.c).
 */
#ifndef ELASTIC_AGENT_WAITING_H
#define ELASTIC_AGENT_WAITING_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct agent_group;

/* The periodic look at a slow rendezvous. */
typedef struct agent_waiting {
    struct agent_group *group;
    uv_timer_t timer;
    uv_work_t work;
    bool in_flight;
    uint64_t last_generation; /* whose members should be back; 0: none */
    int joined;               /* results of the last look (-1: unknown) */
    int missing_count;
    char missing[512];
    uint64_t running_generation; /* the newest generation while it runs without us (0: none) */
    int running_nodes;
} agent_waiting;

int agent__waiting_init(struct agent_group *group);
void agent__waiting_start(struct agent_group *group);
void agent__waiting_stop(struct agent_group *group);
void agent__waiting_close(struct agent_group *group);

#endif /* ELASTIC_AGENT_WAITING_H */
