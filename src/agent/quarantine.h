/*
 * A node's quarantine (quarantine.c): it stepped aside and sits out
 * --straggler-quarantine before it rejoins as a waiting node, looking every
 * second whether the job has been closed meanwhile. Private state:
 * agent_quarantine (its timer, its end, the look in flight).
 */
#ifndef ELASTIC_AGENT_QUARANTINE_H
#define ELASTIC_AGENT_QUARANTINE_H

#include <stdint.h>

struct agent_group;
typedef struct agent_quarantine agent_quarantine;

int agent__quarantine_init(struct agent_group *group);
/* The machine's QUARANTINE action: QUARANTINE_OVER after ms, or as soon as
 * a look finds the job closed (the node then learns its outcome). */
void agent__quarantine_start(struct agent_group *group, int64_t ms);
/* STOP_QUARANTINE_TIMER (SIGTERM while quarantined): no more looks. */
void agent__quarantine_stop(struct agent_group *group);
void agent__quarantine_close(struct agent_group *group);

#endif /* ELASTIC_AGENT_QUARANTINE_H */
