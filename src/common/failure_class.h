/*
 * What kind of failure this was, from what the agent saw (failure_class.c):
 * the failing worker's exit status or signal, its error file (torchrun's JSON:
 * the exception type, message and traceback), the tail of its stderr, the
 * probe or health check that ended it, OOM evidence, and whether a peer had
 * failed before it. One pure function: no I/O, no clock, so the agent (live)
 * and elasticctl (`explain`, over event logs) say the same thing, and every
 * rule has a unit test.
 *
 * The signature (class, exception type, innermost user frame, message with
 * numbers, addresses and paths taken out) is what the job-wide policy
 * (failure_policy.h) compares across ranks and generations to find a
 * deterministic bug.
 */
#ifndef ELASTIC_COMMON_FAILURE_CLASS_H
#define ELASTIC_COMMON_FAILURE_CLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum failure_class {
    FC_UNKNOWN,   /* nothing said more: a non-zero exit without an error, a stray signal */
    FC_USER_CODE, /* the training code raised or crashed (an exception, an error file) */
    FC_OOM,       /* the kernel's OOM killer, a CUDA or host OOM named by the worker */
    FC_COMM,      /* NCCL/communication: a collective failed, a watchdog fired */
    FC_HANG,      /* no progress: the hang or startup probe */
    FC_NODE_LOST, /* a node's lease ended, or this node was fenced out */
    FC_HARDWARE,  /* a fatal health finding: Xid, ECC, a GPU off the bus, a down port */
    FC_SDC,       /* hardware: silent corruption (replicas diverged) */
    FC_STRAGGLER, /* a persistent straggler was evicted */
    FC_OPERATOR,  /* a person or the scheduler stopped it: SIGTERM, SIGINT, scancel */
    FC_CLASSES
} failure_class;

/* What ended the generation here (the agent knows it; a log reader derives it
 * from the event's name and probe). */
typedef enum failure_source {
    FS_WORKER_EXIT,        /* a worker exited non-zero or by a signal */
    FS_PROBE_HANG,         /* probe "hang" or "startup" */
    FS_PROBE_NCCL,         /* probe "nccl_timeout" or "nccl_error": the worker's NCCL watchdog */
    FS_PROBE_STRAGGLER,    /* a straggler rank evicted */
    FS_PROBE_USER,         /* --user-probe, or another probe */
    FS_HEALTH,             /* a fatal node health check */
    FS_NODE_LOST,          /* a member's lease lapsed */
    FS_FENCED,             /* this node lost its lease */
    FS_OPERATOR,           /* the agent was asked to stop (a signal to elasticrun, scancel) */
    FS_REPLICA_DIVERGENCE, /* the replicas' fingerprints disagree (event replica_divergence) */
    FS_SOURCES
} failure_source;

/* Everything the classifier looks at; strings may be NULL (not known). */
typedef struct failure_evidence {
    int source;              /* failure_source */
    int exit_code;           /* -1: none (signalled, or not an exit) */
    int signal;              /* 0: none */
    const char *error_file;  /* the worker's error file (torchrun's JSON), or NULL */
    const char *stderr_tail; /* the last lines of its stderr, or NULL */
    const char *reason;      /* the agent's reason: a probe's, a health check's */
    bool
        oom_kill; /* the cgroup's oom_kill rose, or the kernel log named the pid (read with SIGKILL) */
    const char *health_finding; /* a fatal health finding on this node at the time (an Xid) */
    bool peer_failed_first;     /* another rank of this generation had failed before this one */
    int peer_rank;              /* that rank (-1: not known) */
    bool stopping;              /* the agent itself was stopping the workers (its own signal) */
} failure_evidence;

#define FAILURE_TYPE_MAX      96
#define FAILURE_FRAME_MAX     192
#define FAILURE_MESSAGE_MAX   192
#define FAILURE_SIGNATURE_MAX 512
#define FAILURE_EVIDENCE_MAX  256

typedef struct failure_verdict {
    int cls;                     /* failure_class */
    bool consequence;            /* it failed because another rank failed first: never the cause */
    char type[FAILURE_TYPE_MAX]; /* the exception's type ("ValueError"), "" none */
    char frame[FAILURE_FRAME_MAX];         /* innermost user frame, "file.py:41 in f", "" none */
    char message[FAILURE_MESSAGE_MAX];     /* the exception's message, normalized */
    char signature[FAILURE_SIGNATURE_MAX]; /* class|type|frame|message */
    uint64_t signature_hash;               /* FNV-1a of signature: short and comparable */
    char evidence[FAILURE_EVIDENCE_MAX];   /* what told, in words */
} failure_verdict;

/* Classifies one failure. Never fails: what cannot be read is "unknown". */
void failure__classify(const failure_evidence *e, failure_verdict *out);

/* A message with what changes from run to run taken out: hexadecimal
 * addresses -> <addr>, numbers -> <n>, paths -> <path>, runs of blanks -> one
 * space; at most size-1 bytes. Two messages of the same bug normalize alike. */
void failure__normalize(const char *message, char *out, size_t size);

/* Reads a Python traceback (stderr, or an error file's py_callstack): the
 * last exception's type and message, and the innermost frame that is the
 * user's (not the standard library's, site-packages' or the binding's).
 * false when the text holds no traceback's exception line. */
bool failure__read_traceback(const char *text, char *type, size_t type_size, char *message,
                             size_t message_size, char *frame, size_t frame_size);

const char *failure__class_name(int cls);     /* "user_code", "oom", ... */
const char *failure__class_label(int cls);    /* "user code", "OOM", ... (console, explain) */
int failure__class_of_name(const char *name); /* -1 when unknown */
const char *failure__source_name(int source);

#endif /* ELASTIC_COMMON_FAILURE_CLASS_H */
