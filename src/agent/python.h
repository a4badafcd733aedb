/*
 * The workers' Python interpreter (python.c).
 */
#ifndef ELASTIC_AGENT_PYTHON_H
#define ELASTIC_AGENT_PYTHON_H

#include "agent/agent.h"

/* --python, else $PYTHON_EXEC, else "python3" (looked up on PATH). */
const char *agent__python_interpreter(const elastic_agent_opts *opts);
/* "/usr/bin/python3 (Python 3.11.2)", or why it is unknown. Runs it once. */
void agent__python_describe(const elastic_agent_opts *opts, char *out, size_t size);
/* elasticrun's start line on stderr: run id, workers, interpreter and version. */
void agent__python_start_line(const elastic_agent_opts *opts, const char *run_id);
/* A PYTHON_EXEC hint line when a worker's error text shows ModuleNotFoundError. */
bool agent__python_hint(const elastic_agent_opts *opts, const char *detail, char *out, size_t size);

#endif /* ELASTIC_AGENT_PYTHON_H */
