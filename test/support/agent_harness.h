/*
 * Helpers for the agent's integration tests: start bin/elasticrun (or
 * another program) with its output in files, wait for it with a deadline,
 * wait for lines in a report file, and look processes up in /proc.
 */
#ifndef ELASTIC_TEST_AGENT_HARNESS_H
#define ELASTIC_TEST_AGENT_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

/* Starts `program` with argv (NULL-terminated, argv[0] included) and the
 * extra environment entries (NULL-terminated "K=V", may be NULL); stdout and
 * stderr go to <tmpdir>/<name>.out and .err. */
pid_t agent_harness_spawn(const char *program, const char *const *argv,
                          const char *const *extra_env, const char *name);
/* waitpid with a deadline; true when it exited (status filled). */
bool agent_harness_wait_exit(pid_t pid, int timeout_ms, int *status);
/* elasticrun's exit code; fails the test when it is still running after
 * timeout_ms (then killed) or was killed by a signal. */
int agent_harness_exit_code(pid_t pid, int timeout_ms);
/* The demo trainer's recovery tests' kill: once generation 1's rank 1 started
 * (in the event log) and rank 0's console (<tmpdir>/<name>.out) has the line
 * of `step` ("step 40 ") with "(checkpoint)", SIGKILLs that rank 1. */
void agent_harness_kill_rank1_after_checkpoint(const char *events, const char *name,
                                               const char *step);
/* Waits until `path` has at least `count` lines containing every needle
 * (NULL-terminated). Returns the number found (fewer: the deadline passed). */
int agent_harness_wait_lines(const char *path, const char *const *needles, int count,
                             int timeout_ms);
/* The value of "key=" in a report line ("pid=123 ..." -> 123), or -1. */
long agent_harness_line_field(const char *line, const char *key);
/* The value of "key":<integer> in a JSON line (an event log's), or -1. */
long long agent_harness_json_int(const char *line, const char *key);
/* The n-th (0-based) line of `path` containing every needle, into out. */
bool agent_harness_nth_line(const char *path, const char *const *needles, int n, char *out,
                            size_t size);
/* The whole file, NUL-terminated (free()); NULL if absent. */
char *agent_harness_read_file(const char *path);
/* Whether a process exists and is not a zombie. */
bool agent_harness_process_alive(pid_t pid);
/* Waits until the process is gone (or a zombie); true when it is. */
bool agent_harness_wait_gone(pid_t pid, int timeout_ms);
/* Paths of built programs in buffers of their own (test_bin_path() and
 * test_helper_path() share one buffer, so one overwrites the other). */
const char *agent_harness_elasticrun(void);
const char *agent_harness_worker(void);
/* <tmpdir>/<name> into out. */
const char *agent_harness_path(char *out, size_t size, const char *name);

#endif
