/*
 * The failure classifier (failure_class.h): rules over the evidence, first
 * match wins, each one a line of failure__classify. Text is read line by
 * line within its own length, so a tail of any size costs one pass.
 */
#include "common/failure_class.h"

#include "common/json.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const class_names[FC_CLASSES] = {
    [FC_UNKNOWN] = "unknown",
    [FC_USER_CODE] = "user_code",
    [FC_OOM] = "oom",
    [FC_COMM] = "communication",
    [FC_HANG] = "hang",
    [FC_NODE_LOST] = "node_lost",
    [FC_HARDWARE] = "hardware",
    [FC_SDC] = "silent_corruption",
    [FC_STRAGGLER] = "straggler",
    [FC_OPERATOR] = "operator",
};

static const char *const class_labels[FC_CLASSES] = {
    [FC_UNKNOWN] = "unknown",
    [FC_USER_CODE] = "user code",
    [FC_OOM] = "OOM",
    [FC_COMM] = "NCCL/communication",
    [FC_HANG] = "hang",
    [FC_NODE_LOST] = "node lost",
    [FC_HARDWARE] = "hardware",
    [FC_SDC] = "hardware: silent corruption",
    [FC_STRAGGLER] = "straggler",
    [FC_OPERATOR] = "operator",
};

static const char *const source_names[FS_SOURCES] = {
    [FS_WORKER_EXIT] = "worker_exit", [FS_PROBE_HANG] = "probe_hang",
    [FS_PROBE_NCCL] = "probe_nccl",   [FS_PROBE_STRAGGLER] = "probe_straggler",
    [FS_PROBE_USER] = "probe_user",   [FS_HEALTH] = "health",
    [FS_NODE_LOST] = "node_lost",     [FS_FENCED] = "fenced",
    [FS_OPERATOR] = "operator",       [FS_REPLICA_DIVERGENCE] = "replica_divergence",
};

const char *failure__class_name(int cls)
{
    return cls >= 0 && cls < FC_CLASSES ? class_names[cls] : "unknown";
}

const char *failure__class_label(int cls)
{
    return cls >= 0 && cls < FC_CLASSES ? class_labels[cls] : "unknown";
}

int failure__class_of_name(const char *name)
{
    for (int i = 0; name != NULL && i < FC_CLASSES; i++)
        if (strcmp(name, class_names[i]) == 0) return i;
    return -1;
}

const char *failure__source_name(int source)
{
    return source >= 0 && source < FS_SOURCES ? source_names[source] : "unknown";
}

/* ---- the normalizer ---------------------------------------------------------------- */

static bool is_path_char(char c)
{
    return c != '\0' && !isspace((unsigned char)c) && c != '\'' && c != '"' && c != ',' &&
           c != ')' && c != ']' && c != '}' && c != ';';
}

void failure__normalize(const char *message, char *out, size_t size)
{
    if (size == 0) return;
    size_t used = 0;
    const char *p = message != NULL ? message : "";
#define PUT_TEXT(text)                                                  \
    do {                                                                \
        const char *put_ = (text);                                      \
        while (*put_ != '\0' && used + 1 < size) out[used++] = *put_++; \
    } while (0)
    while (*p != '\0' && used + 1 < size) {
        unsigned char c = (unsigned char)*p;
        bool word_start = p == message || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        if (isspace(c)) { /* one blank for any run: tabs, newlines, wrapped lines */
            while (isspace((unsigned char)*p)) p++;
            if (used > 0 && *p != '\0') out[used++] = ' ';
        } else if (word_start && c == '0' && (p[1] == 'x' || p[1] == 'X') &&
                   isxdigit((unsigned char)p[2])) {
            p += 2;
            while (isxdigit((unsigned char)*p)) p++;
            PUT_TEXT("<addr>");
        } else if ((c == '/' || (c == '~' && p[1] == '/')) &&
                   (p == message || isspace((unsigned char)p[-1]) || p[-1] == '\'' ||
                    p[-1] == '"' || p[-1] == '(' || p[-1] == '=' || p[-1] == ':')) {
            while (is_path_char(*p)) p++; /* a path: the job's directories differ per run */
            PUT_TEXT("<path>");
        } else if (isdigit(c) && word_start) {
            /* a number, with its decimals, exponent and a unit glued to it
             * ("37", "1.5e-3", "2GiB" stays "<n>GiB": the unit says what it was) */
            while (isdigit((unsigned char)*p) || *p == '.' ||
                   ((*p == 'e' || *p == 'E') &&
                    (isdigit((unsigned char)p[1]) ||
                     ((p[1] == '-' || p[1] == '+') && isdigit((unsigned char)p[2])))))
                p += (*p == 'e' || *p == 'E') && (p[1] == '-' || p[1] == '+') ? 2 : 1;
            if (used > 0 && out[used - 1] == '-') used--; /* -3 is a number too */
            PUT_TEXT("<n>");
        } else if (isxdigit(c) && word_start) {
            /* a hex id with digits in it (a uuid's part, a hash): 8 or more hex digits */
            const char *q = p;
            bool digit = false;
            while (isxdigit((unsigned char)*q)) digit |= isdigit((unsigned char)*q++);
            if (q - p >= 8 && digit && !(isalnum((unsigned char)*q) || *q == '_')) {
                p = q;
                PUT_TEXT("<hex>");
            } else {
                while (p < q && used + 1 < size) out[used++] = *p++;
                while ((isalnum((unsigned char)*p) || *p == '_') && used + 1 < size)
                    out[used++] = *p++;
            }
        } else if (isalpha(c) || c == '_') {
            /* a word: digits inside it (rank3, cuda:0's device) stay its own */
            while ((isalnum((unsigned char)*p) || *p == '_') && used + 1 < size) out[used++] = *p++;
        } else {
            out[used++] = *p++;
        }
    }
#undef PUT_TEXT
    while (used > 0 && out[used - 1] == ' ') used--;
    out[used] = '\0';
}

/* ---- Python tracebacks ----------------------------------------------------------- */

/* Frames of the interpreter, the packages and this library's binding are not
 * where the user's bug is. */
static bool library_path(const char *path, size_t len)
{
    static const char *const marks[] = {
        "/site-packages/",           "/dist-packages/", "/lib/python3", "<frozen",
        "/bindings/python/elastic/", "/torch/",         "<string>"
    };
    char copy[512];
    snprintf(copy, sizeof copy, "%.*s", (int)(len < sizeof copy ? len : sizeof copy - 1), path);
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (strstr(copy, marks[i]) != NULL) return true;
    return false;
}

/* `  File "/x/trainer.py", line 41, in check_batch` -> "trainer.py:41 in check_batch". */
static bool read_frame(const char *line, size_t len, char *frame, size_t size, bool *library)
{
    const char *end = line + len;
    while (line < end && *line == ' ') line++;
    if ((size_t)(end - line) < 7 || strncmp(line, "File \"", 6) != 0) return false;
    const char *path = line + 6;
    const char *close = memchr(path, '"', (size_t)(end - path));
    if (close == NULL) return false;
    const char *base = path;
    for (const char *q = path; q < close; q++)
        if (*q == '/') base = q + 1;
    long number = 0;
    const char *rest = close + 1;
    const char *at = NULL;
    for (const char *q = rest; q + 6 <= end; q++)
        if (strncmp(q, "line ", 5) == 0) {
            at = q + 5;
            break;
        }
    while (at != NULL && at < end && isdigit((unsigned char)*at) && number < 100000000)
        number = number * 10 + (*at++ - '0');
    const char *in = NULL;
    for (const char *q = rest; q + 4 <= end; q++)
        if (strncmp(q, ", in ", 5) == 0) {
            in = q + 5;
            break;
        }
    int fn_len = in != NULL ? (int)(end - in) : 0;
    while (fn_len > 0 && isspace((unsigned char)in[fn_len - 1])) fn_len--;
    snprintf(frame, size, "%.*s:%ld%s%.*s", (int)(close - base), base, number,
             in != NULL ? " in " : "", fn_len > 96 ? 96 : fn_len, in != NULL ? in : "");
    *library = library_path(path, (size_t)(close - path));
    return true;
}

/* `ValueError: bad batch` or `torch.OutOfMemoryError: ...` or `KeyboardInterrupt`:
 * a type name at the line's start, then ":" or the line's end. */
static bool read_exception_line(const char *line, size_t len, char *type, size_t type_size,
                                char *message, size_t message_size)
{
    size_t i = 0;
    if (len == 0 || !(isalpha((unsigned char)line[0]) || line[0] == '_')) return false;
    while (i < len && (isalnum((unsigned char)line[i]) || line[i] == '_' || line[i] == '.')) i++;
    if (i < len && line[i] != ':') return false;
    if (i == len && (i < 5 || strchr("rnt", line[i - 1]) == NULL))
        return false; /* ...Error, ...Exception, ...Interrupt, ...Exit */
    snprintf(type, type_size, "%.*s", (int)i, line);
    const char *m = i < len ? line + i + 1 : line + len;
    while (m < line + len && *m == ' ') m++;
    snprintf(message, message_size, "%.*s", (int)(line + len - m), m);
    return true;
}

bool failure__read_traceback(const char *text, char *type, size_t type_size, char *message,
                             size_t message_size, char *frame, size_t frame_size)
{
    type[0] = message[0] = frame[0] = '\0';
    if (text == NULL) return false;
    char user[FAILURE_FRAME_MAX] = "", innermost[FAILURE_FRAME_MAX] = "";
    char found_user[FAILURE_FRAME_MAX] = "", found_innermost[FAILURE_FRAME_MAX] = "";
    bool in_traceback = false, found = false;
    for (const char *line = text; *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        if (len > 0 && line[len - 1] == '\r') len--;
        char candidate[FAILURE_FRAME_MAX];
        bool library = false;
        if (len >= 34 && strncmp(line, "Traceback (most recent call last):", 34) == 0) {
            in_traceback = true; /* a new one (a chained exception): its frames count */
            user[0] = innermost[0] = '\0';
        } else if (in_traceback && read_frame(line, len, candidate, sizeof candidate, &library)) {
            snprintf(innermost, sizeof innermost, "%s", candidate);
            if (!library) snprintf(user, sizeof user, "%s", candidate);
        } else if (in_traceback && innermost[0] != '\0' &&
                   read_exception_line(line, len, type, type_size, message, message_size)) {
            found = true; /* the last traceback's exception wins */
            snprintf(found_user, sizeof found_user, "%s", user);
            snprintf(found_innermost, sizeof found_innermost, "%s", innermost);
            in_traceback = false;
        }
        if (nl == NULL) break;
        line = nl + 1;
    }
    if (!found) {
        type[0] = message[0] = '\0';
        return false;
    }
    snprintf(frame, frame_size, "%s", found_user[0] != '\0' ? found_user : found_innermost);
    return true;
}

/* ---- the rules ------------------------------------------------------------------- */

static bool contains_ci(const char *text, const char *what)
{
    return text != NULL && strcasestr(text, what) != NULL;
}

static bool says_oom(const char *type, const char *text)
{
    size_t tl = strlen(type);
    if ((tl >= 16 && strcmp(type + tl - 16, "OutOfMemoryError") == 0) ||
        strcmp(type, "MemoryError") == 0)
        return true;
    return contains_ci(text, "out of memory") || contains_ci(text, "std::bad_alloc") ||
           contains_ci(text, "Cannot allocate memory");
}

/* A collective or the job's transport failed: what NCCL, gloo and c10d say. */
static bool says_comm(const char *type, const char *text)
{
    static const char *const types[] = { "DistBackendError", "DistNetworkError", "DistStoreError",
                                         "NCCLError" };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strstr(type, types[i]) != NULL) return true;
    static const char *const marks[] = {
        "NCCL error",
        "ncclSystemError",
        "ncclRemoteError",
        "ncclInternalError",
        "ncclUnhandledCudaError",
        "Watchdog caught collective operation timeout",
        "ProcessGroupNCCL",
        "ProcessGroupGloo",
        "Connection reset by peer",
        "Connection closed by peer",
        "NCCL communicator was aborted",
        "Gloo connectFullMesh failed",
    };
    for (size_t i = 0; text != NULL && i < sizeof marks / sizeof marks[0]; i++)
        if (strstr(text, marks[i]) != NULL) return true;
    return false;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    default: return NULL;
    }
}

/* The error file's exception: its traceback when it carries one, else its
 * message read as "Type: text" (a C trainer's), else the message alone. */
static bool read_error_file(const char *json, failure_verdict *v, char *raw, size_t raw_size)
{
    json_object *root = NULL;
    if (json == NULL || json__parse(json, strlen(json), &root) != 0) return false;
    json_object *message = json__get(root, "message");
    const char *text = json__get_string(root, "message");
    if (text == NULL) text = json__get_string(message, "message");
    const char *stack = json__get_string(json__get(message, "extraInfo"), "py_callstack");
    bool ok = text != NULL || stack != NULL;
    if (stack != NULL && failure__read_traceback(stack, v->type, sizeof v->type, raw, raw_size,
                                                 v->frame, sizeof v->frame)) {
        /* the traceback says it all */
    } else if (text != NULL) {
        size_t len = strcspn(text, "\n");
        if (!read_exception_line(text, len, v->type, sizeof v->type, raw, raw_size)) {
            v->type[0] = '\0';
            snprintf(raw, raw_size, "%.*s", (int)len, text);
        }
    }
    json_object_put(root);
    return ok;
}

static void sign(failure_verdict *v)
{
    snprintf(v->signature, sizeof v->signature, "%s|%s|%s|%s", failure__class_name(v->cls), v->type,
             v->frame, v->message);
    uint64_t h = 1469598103934665603ull; /* FNV-1a, 64 bits */
    for (const char *p = v->signature; *p != '\0'; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    v->signature_hash = h;
}

static void say(failure_verdict *v, const char *fmt, const char *a, const char *b)
{
    snprintf(v->evidence, sizeof v->evidence, fmt, a != NULL ? a : "", b != NULL ? b : "");
}

/* The probe and health sources: what ended it says the class. */
static bool classify_source(const failure_evidence *e, failure_verdict *v)
{
    const char *reason = e->reason != NULL ? e->reason : "";
    switch (e->source) {
    case FS_OPERATOR:
        v->cls = FC_OPERATOR;
        say(v, "stop requested: %s%s", reason, NULL);
        return true;
    case FS_NODE_LOST:
        v->cls = FC_NODE_LOST;
        say(v, "node lost: %s%s", reason, NULL);
        return true;
    case FS_FENCED:
        v->cls = FC_NODE_LOST;
        say(v, "fenced out (lost its lease): %s%s", reason, NULL);
        return true;
    case FS_HEALTH:
        v->cls = FC_HARDWARE;
        say(v, "health check: %s%s", reason, NULL);
        return true;
    case FS_REPLICA_DIVERGENCE:
        v->cls = FC_SDC;
        say(v, "replicas diverged: %s%s", reason, NULL);
        return true;
    case FS_PROBE_STRAGGLER:
        v->cls = FC_STRAGGLER;
        say(v, "straggler: %s%s", reason, NULL);
        return true;
    case FS_PROBE_HANG:
        v->cls = FC_HANG;
        v->consequence = e->peer_failed_first; /* waiting on a dead peer's collective */
        say(v, "hang probe: %s%s", reason, NULL);
        return true;
    case FS_PROBE_NCCL:
        v->cls = FC_COMM;
        v->consequence = e->peer_failed_first;
        say(v, "NCCL watchdog: %s%s", reason, NULL);
        return true;
    case FS_PROBE_USER:
        v->cls = FC_UNKNOWN;
        say(v, "probe: %s%s", reason, NULL);
        return true;
    default: return false;
    }
}

void failure__classify(const failure_evidence *e, failure_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->cls = FC_UNKNOWN;
    if (classify_source(e, v)) {
        failure__normalize(e->reason, v->message, sizeof v->message);
        sign(v);
        return;
    }
    /* A worker's exit: its own words first (error file, then stderr's traceback). */
    char raw[1024] = "";
    bool error_file = read_error_file(e->error_file, v, raw, sizeof raw);
    bool traceback =
        !error_file && failure__read_traceback(e->stderr_tail, v->type, sizeof v->type, raw,
                                               sizeof raw, v->frame, sizeof v->frame);
    failure__normalize(raw, v->message, sizeof v->message);
    const char *sig = signal_name(e->signal);
    char what[FAILURE_TYPE_MAX + FAILURE_FRAME_MAX + 8];
    snprintf(what, sizeof what, "%s%s%s", v->type[0] != '\0' ? v->type : "an error",
             v->frame[0] != '\0' ? " at " : "", v->frame);
    /* Where the words came from; a stderr without a traceback is still read for marks. */
    const char *text = error_file || traceback ? raw : e->stderr_tail;
    /* The OOM killer sends SIGKILL (a shell between says 137); a count that
     * rose while the worker died otherwise was some other process's. */
    if (e->oom_kill && (e->signal == SIGKILL || e->exit_code == 128 + SIGKILL)) {
        v->cls = FC_OOM;
        say(v, "the kernel's OOM killer ended it%s%s", sig != NULL ? " (" : "",
            sig != NULL ? sig : "");
        if (sig != NULL) strncat(v->evidence, ")", sizeof v->evidence - strlen(v->evidence) - 1);
        snprintf(v->type, sizeof v->type, "%s", "oom_kill");
    } else if (e->health_finding != NULL && *e->health_finding != '\0') {
        v->cls = FC_HARDWARE; /* a CUDA error in the user's frame is the GPU's, not the code's */
        say(v, "a fatal health finding at the time: %s%s", e->health_finding, NULL);
    } else if (says_oom(v->type, text)) {
        v->cls = FC_OOM;
        say(v, "%s says out of memory%s", error_file ? "its error file" : "its stderr", NULL);
    } else if (says_comm(v->type, text)) {
        v->cls = FC_COMM;
        v->consequence = e->peer_failed_first;
        say(v, "%s names a failed collective or connection%s",
            error_file ? "its error file" : "its stderr", NULL);
    } else if (v->type[0] != '\0' && strcmp(v->type, "KeyboardInterrupt") == 0) {
        v->cls = FC_OPERATOR;
        say(v, "interrupted (KeyboardInterrupt)%s%s", NULL, NULL);
    } else if (error_file || traceback) {
        v->cls = FC_USER_CODE;
        say(v, traceback ? "stderr's traceback: %s%s" : "its error file: %s%s", what, NULL);
    } else if (e->signal == SIGTERM || e->signal == SIGINT || e->signal == SIGHUP) {
        v->cls = FC_OPERATOR; /* sent from outside (scancel signals every task), not by the agent */
        say(v, "killed by %s from outside the agent%s", sig, NULL);
        snprintf(v->type, sizeof v->type, "%s", sig);
    } else if (e->signal == SIGSEGV || e->signal == SIGABRT || e->signal == SIGFPE ||
               e->signal == SIGILL) {
        v->cls = FC_USER_CODE; /* a native crash: the same step twice is a bug like any other */
        say(v, "crashed with %s%s", sig, NULL);
        snprintf(v->type, sizeof v->type, "%s", sig);
    } else if (e->signal != 0) {
        char name[16];
        snprintf(name, sizeof name, "signal %d", e->signal);
        snprintf(v->type, sizeof v->type, "%s", sig != NULL ? sig : name);
        say(v,
            e->signal == SIGKILL ? "killed by %s, and no OOM kill was recorded: someone sent it%s"
                                 : "killed by %s%s",
            v->type, NULL);
    } else {
        char code[32];
        snprintf(code, sizeof code, "%d", e->exit_code);
        say(v, "exited with code %s; no error file or traceback was read%s", code, NULL);
        snprintf(v->type, sizeof v->type, "exit %s", code);
    }
    /* A rank whose collective broke under it is the dead peer's consequence. */
    if (e->peer_failed_first && v->cls == FC_UNKNOWN) v->consequence = true;
    sign(v);
}
