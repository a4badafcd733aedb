/*
 * Node health checks in the agent (health.c; the checks are src/health/).
 */
#ifndef ELASTIC_AGENT_HEALTH_H
#define ELASTIC_AGENT_HEALTH_H

#include "agent/group.h"

typedef struct agent_health agent_health;

/* What a report the loop took means for the group (group.c decides). */
typedef struct agent_health_news {
    bool gate_done; /* the round a join waited for is here */
    bool fatal;     /* this round's worst verdict is fatal */
    char reason[300]; /* the first fatal finding, for people ("GPU 5 (GPU-…, 0000…): Xid 79: …") */
} agent_health_news;

/* Starts the checks' thread unless --health-checks off; its first round runs at once. */
int agent__health_start(agent_group *group);
void agent__health_stop(agent_group *group);
/* Before joining: may this node join? The first join takes the first round
 * (run since the start); a later one a round started after this call. */
agent_health_gate agent__health_gate(agent_group *group, char *reason, size_t size);
/* AGENT_GROUP_HEALTH on the loop: takes the newest report, writes the
 * health_check events of what changed, the console line of what is fatal,
 * the /metrics lines. false when there was none (an older post). */
bool agent__health_take(agent_group *group, agent_health_news *news);
/* RUNNING with a fatal verdict: step aside for a waiting spare (an EVICT
 * call marked health); once at a time. */
void agent__health_step_aside(agent_group *group, const char *reason);
/* The health inventory's GPU `index` ("GPU 3 (GPU-…, 0000:…)") into out; false
 * when the checks have not seen it (off, no NVML, no round yet). */
bool agent__health_gpu(const agent_group *group, int index, char *out, size_t size);
/* The last fatal reason (for a drain hook: the Slurm integration reads it). "" when none. */
const char *agent__health_reason(const agent_group *group);

#endif /* ELASTIC_AGENT_HEALTH_H */
