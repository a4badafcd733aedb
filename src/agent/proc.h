/*
 * Worker processes (proc.c): resolving, spawning and signalling them.
 */
#ifndef ELASTIC_AGENT_PROC_H
#define ELASTIC_AGENT_PROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct agent_spawn {
    const char *path; /* resolved executable */
    const char *const *argv;
    const char *const *envp;
    const char *cwd; /* NULL: the agent's */
    int pass_fd;     /* > 0: given to the child as its fd 3 (prestart.c); 0: none */
} agent_spawn;

/* Finds `name` on PATH (or checks a path with a slash) before forking. */
int agent__resolve_program(const char *name, char *path, size_t path_size);
/* Starts a worker as the leader of a new process group that dies with the
 * agent. out_read/err_read (NULL: inherit) receive the read ends of pipes
 * connected to its stdout/stderr. */
int agent__proc_spawn(const agent_spawn *spec, pid_t *pid, int *out_read, int *err_read);
/* Signals every process in a worker's process group (ESRCH is fine). */
void agent__proc_signal_group(pid_t pgid, int signum);

#endif /* ELASTIC_AGENT_PROC_H */
