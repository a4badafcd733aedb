/*
 * A local worker's failure classified, decided job-wide and said
 * (failure_say.c): the failure_classified event, its class on the failure's
 * console line, the policy's stop line, the /metrics counters. Private state:
 * agent_failures (the counters, the stop line, the history of a job with no
 * store).
 */
#ifndef ELASTIC_AGENT_FAILURE_SAY_H
#define ELASTIC_AGENT_FAILURE_SAY_H

#include "agent/group.h"
#include "common/text.h"

typedef struct agent_failures agent_failures;

/* On the loop, right after the failure is recorded (its error file and
 * stderr are read here, bounded): the CLASSIFY call that decides it
 * job-wide, to post after the END call (NULL: out of memory, said). The
 * failure's console line is said once the decision is back (a restart's once
 * the generation's stop has settled), ending with its class and error
 * ("...; restarting (9 of 10 restarts left); user code: ValueError at
 * trainer.py:42 in check_batch: bad batch at step <n>"). */
agent_call *agent__failure_say(agent_group *group, agent_worker *worker,
                               const elastic_rdzv_cause *cause);
/* Whether a worker's own words (its error file, else its stderr's tail)
 * show an error it raised itself: the training code's (an exception's
 * traceback, an error file), not a signal's or a failed collective's. */
bool agent__failure_raised(agent_worker *worker);
/* The same for a worker that failed by itself while the generation stopped
 * for an earlier failure: no END of its own, so it spends no restart (the
 * decision says so); said in the log, its class in the event. */
agent_call *agent__failure_say_late(agent_group *group, agent_worker *worker,
                                    const elastic_rdzv_cause *cause);
/* On the loop, the CLASSIFY call back: the failure_classified event (its
 * decision and rule), the counters, and for a deterministic bug the line
 * naming the cause, the frame and the generations (the job's summary, said
 * once as elasticrun exits). true: stop the job. */
bool agent__failure_decided(agent_group *group, agent_call *call);
/* A "restarting" failure line held by agent__failure_decided, said once the
 * machine has left STOPPING (the runner calls it after each step): the line
 * says what followed, not what the first rank's failure alone would have. */
void agent__failure_say_pending(agent_group *group);
/* The CLOSE_JOB call: the job's "closed" cause names the bug, so the other
 * nodes exit as this one does and say why (their summary reads it). */
agent_call *agent__failure_close_call(agent_group *group);
/* Whether a job's closing cause is a deterministic bug's (CLOSE_JOB's). */
bool agent__failure_closed_for_bug(const elastic_rdzv_cause *cause);
/* Whether the CLASSIFY call back quarantines this node (the policy's rule
 * node_quarantine: it steps aside, and gives up under Slurm). */
bool agent__failure_quarantined(const agent_call *call);
/* That quarantine in words (the drain's reason, the summary); "" none. */
const char *agent__failure_quarantine_why(const agent_group *group);
/* The deterministic stop's line (the deciding node's summary); "" none. */
const char *agent__failure_stop_line(const agent_group *group);
/* elastic_failures_total{class}, elastic_failure_decisions_total{decision}. */
void agent__failure_render_metrics(agent_group *group, elastic__text *out);
void agent__failures_free(agent_group *group);

#endif /* ELASTIC_AGENT_FAILURE_SAY_H */
