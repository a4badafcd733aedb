/*
 * summary.c: the root cause of a failed job, the error file, and the
 * failure's detail shared through the store.
 */
#ifndef ELASTIC_AGENT_SUMMARY_H
#define ELASTIC_AGENT_SUMMARY_H

#include "agent/group.h"

/* A worker's own words about its failure, into failure->detail: its error
 * file when it wrote one, else the tail of its stderr. The one reader, for
 * the summary, the console's failure line and the words of a stopped worker. */
void agent__failure_words(agent_worker *worker, agent_failure *failure);
/* Records the first local failure in memory (never blocks); share() posts its
 * detail to the job store off the loop. */
void agent__failure_record(agent_group *group, agent_worker *worker,
                           const elastic_rdzv_cause *cause);
void agent__failure_share(agent_group *group, const elastic_rdzv_cause *cause);
/* A SUMMARY call with its inputs copied from the group (loop thread): the
 * failed rendezvous `next` (NULL: none) brings the error that ends the job
 * and why the job was closed. Back, its text is the group's summary. */
agent_call *agent__summary_call(const agent_group *group, const agent_next_call *next);

#endif /* ELASTIC_AGENT_SUMMARY_H */
