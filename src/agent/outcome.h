/*
 * The job's outcome, owed by the c10d store's host to every other node
 * (outcome.c). c10d's store lives in its host's agent: a node cut off or
 * frozen as the job ends learns how it ended (it succeeded: exit 0 as
 * left_out; it failed: the root cause) only if the host still serves when
 * it comes back.
 */
#ifndef ELASTIC_AGENT_OUTCOME_H
#define ELASTIC_AGENT_OUTCOME_H

#include "elastic.h"

#include <stdbool.h>
#include <stdint.h>

/* A node's mark "the outcome is owed to me": agent/<run_id>/owed/<node_id>
 * on a lease of its own connection, kept alive by the client's I/O thread. */
typedef struct agent_outcome_mark {
    elastic_store *store; /* its own connection (NULL: no mark) */
    char key[320];
} agent_outcome_mark;

/* Default outcome_timeout: how long the host keeps the outcome for a node
 * it no longer hears from (the mark's lease TTL). */
#define AGENT_OUTCOME_TIMEOUT_MS 30000

/* Sets the mark for node_id, ttl_ms after its last keep-alive. On failure the
 * node has no mark (the host will not wait for it); the caller warns. */
int agent__outcome_owe(const char *endpoint, const char *token, const char *run_id,
                       const char *node_id, int ttl_ms, agent_outcome_mark *mark);
/* The node knows the outcome (or needs it no more): its mark goes, within
 * a short deadline; then the connection closes. Safe on an unset mark. */
void agent__outcome_settled(agent_outcome_mark *mark);

/* The host: blocks until no node's mark is left (each goes when its node
 * settles, when its agent's connection closes, or outcome_timeout after its
 * last keep-alive), at most timeout_ms, or until *stop becomes nonzero.
 * 0 when none is left; ELASTIC_ETIMEDOUT with marks left; a store error. */
int agent__outcome_wait_settled(elastic_store *store, const char *run_id, int timeout_ms,
                                const int *stop);

#endif /* ELASTIC_AGENT_OUTCOME_H */
