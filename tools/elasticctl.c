/*
 * elasticctl: the operator's tool. Thin: parse flags, call the library,
 * print. `elasticctl store serve` runs a standalone store; `elasticctl store
 * get|set|add|del|keys` inspect a job's store. New commands go in `commands`.
 * Bad usage prints one line and exits 2; a failed operation exits 1. Built
 * against the public API only (no -Isrc): what the library does not offer
 * lives in tools/elasticctl/.
 */
#include "elastic.h"
#include "elasticctl/ctl.h" /* status, timeline, summary: the tool's own code (tools/elasticctl/) */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_POSITIONAL 4

/* ---- flags --------------------------------------------------------------- */

typedef struct flag_spec {
    const char *name; /* without the leading "--" */
    const char **value;
} flag_spec;

typedef struct parsed_args {
    const char *positional[MAX_POSITIONAL];
    int count;
} parsed_args;

static int usage_error(const char *command, const char *fmt, const char *detail)
{
    fprintf(stderr, "elasticctl %s: ", command);
    fprintf(stderr, fmt, detail);
    fprintf(stderr, " (see elasticctl --help)\n");
    return 2;
}

/* Flags (--name value or --name=value) anywhere; the rest is positional. */
static int parse_args(const char *command, int argc, char **argv, flag_spec *flags,
                      parsed_args *out)
{
    out->count = 0;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (out->count == MAX_POSITIONAL)
                return usage_error(command, "unexpected argument \"%s\"", arg);
            out->positional[out->count++] = arg;
            continue;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        flag_spec *spec = NULL;
        for (flag_spec *f = flags; f->name != NULL; f++)
            if (strlen(f->name) == name_len && strncmp(f->name, name, name_len) == 0) spec = f;
        if (spec == NULL) return usage_error(command, "unknown flag \"%s\"", arg);
        if (eq != NULL)
            *spec->value = eq + 1;
        else if (i + 1 < argc)
            *spec->value = argv[++i];
        else
            return usage_error(command, "flag \"%s\" needs a value", arg);
    }
    return 0;
}

static bool parse_int(const char *text, long long min, long long max, long long *out)
{
    return ctl_parse_int(text, min, max, out) == 0;
}

/* --token-file goes through the library's one reading of token files (the
 * whole file less one trailing newline, at most ELASTIC_STORE_TOKEN_MAX). */
static void use_token_file(const char *path)
{
    if (path != NULL) setenv("ELASTIC_STORE_TOKEN_FILE", path, 1);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "elasticctl: %s: %s (%s)\n", what, elastic_strerror(rc), elastic_last_error());
    return 1;
}

/* ---- store serve ----------------------------------------------------------- */

static int store_serve(int argc, char **argv)
{
    const char *host = "127.0.0.1", *port_text = "0", *token_file = NULL;
    flag_spec flags[] = {
        { "host", &host }, { "port", &port_text }, { "token-file", &token_file }, { NULL, NULL }
    };
    parsed_args args;
    int rc = parse_args("store serve", argc, argv, flags, &args);
    if (rc != 0) return rc;
    long long port;
    if (args.count > 0)
        return usage_error("store serve", "unexpected argument \"%s\"", args.positional[0]);
    if (!parse_int(port_text, 0, 65535, &port))
        return usage_error("store serve", "--port \"%s\" is not 0..65535", port_text);
    use_token_file(token_file);

    /* Block the signals before the server thread starts so only sigwait sees them. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);

    elastic_store_server_opts opts;
    elastic_store_server_opts_init(&opts, sizeof opts);
    opts.host = host;
    opts.port = (int)port;
    elastic_store_server *server = NULL;
    int listening_port = 0;
    rc = elastic_store_server_start(&opts, &server);
    if (rc == 0) rc = elastic_store_server_get_port(server, &listening_port);
    if (rc != 0) {
        elastic_store_server_close(server);
        return fail("store serve", rc);
    }
    bool v6 = strchr(host, ':') != NULL;
    printf("listening on %s%s%s:%d\n", v6 ? "[" : "", host, v6 ? "]" : "", listening_port);
    fflush(stdout);
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    elastic_store_server_close(server);
    return 0;
}

/* ---- store client commands ---------------------------------------------- */

typedef int (*store_op_fn)(elastic_store *store, const parsed_args *args, int timeout_ms);

static int op_get(elastic_store *store, const parsed_args *args, int timeout_ms)
{
    void *value = NULL;
    size_t len = 0;
    int rc = timeout_ms > 0
                 ? elastic_store_get(store, args->positional[0], timeout_ms, &value, &len)
                 : elastic_store_try_get(store, args->positional[0], &value, &len);
    if (rc != 0) return fail("get", rc);
    fwrite(value, 1, len, stdout);
    putchar('\n');
    elastic_free(value);
    return 0;
}

static int op_set(elastic_store *store, const parsed_args *args, int timeout_ms)
{
    int rc = elastic_store_set(store, args->positional[0], args->positional[1],
                               strlen(args->positional[1]));
    return rc != 0 ? fail("set", rc) : 0;
}

static int op_add(elastic_store *store, const parsed_args *args, int timeout_ms)
{
    long long delta;
    if (!parse_int(args->positional[1], INT64_MIN, INT64_MAX, &delta))
        return usage_error("store add", "delta \"%s\" is not an integer", args->positional[1]);
    int64_t result = 0;
    int rc = elastic_store_add(store, args->positional[0], (int64_t)delta, &result);
    if (rc != 0) return fail("add", rc);
    printf("%" PRId64 "\n", result);
    return 0;
}

static int op_del(elastic_store *store, const parsed_args *args, int timeout_ms)
{
    int rc = elastic_store_delete(store, args->positional[0]);
    return rc != 0 ? fail("del", rc) : 0;
}

static int op_keys(elastic_store *store, const parsed_args *args, int timeout_ms)
{
    char **keys = NULL;
    size_t n = 0;
    int rc =
        elastic_store_keys(store, args->count > 0 ? args->positional[0] : "", 1000000, &keys, &n);
    if (rc != 0) return fail("keys", rc);
    for (size_t i = 0; i < n; i++) printf("%s\n", keys[i]);
    elastic_free(keys);
    return 0;
}

typedef struct store_command {
    const char *name;
    int min_args, max_args;
    const char *usage;
    store_op_fn fn;
} store_command;

static const store_command store_commands[] = {
    { "get", 1, 1, "KEY [--timeout MS]", op_get }, { "set", 2, 2, "KEY VALUE", op_set },
    { "add", 2, 2, "KEY DELTA", op_add },          { "del", 1, 1, "KEY", op_del },
    { "keys", 0, 1, "[PREFIX]", op_keys },
};

static int store_client(const store_command *cmd, int argc, char **argv)
{
    char name[32];
    snprintf(name, sizeof name, "store %s", cmd->name);
    const char *endpoint = NULL, *token_file = NULL, *timeout_text = "0";
    flag_spec flags[] = { { "endpoint", &endpoint },
                          { "token-file", &token_file },
                          { "timeout", &timeout_text },
                          { NULL, NULL } };
    parsed_args args;
    int rc = parse_args(name, argc, argv, flags, &args);
    if (rc != 0) return rc;
    if (endpoint == NULL) return usage_error(name, "%s", "needs --endpoint HOST:PORT");
    if (args.count < cmd->min_args || args.count > cmd->max_args)
        return usage_error(name, "usage: elasticctl store %s --endpoint HOST:PORT", cmd->usage);
    long long timeout_ms;
    if (!parse_int(timeout_text, 0, 86400000, &timeout_ms))
        return usage_error(name, "--timeout \"%s\" is not 0..86400000 ms", timeout_text);
    elastic_store_opts opts;
    elastic_store_opts_init(&opts, sizeof opts);
    opts.connect_timeout_ms = 5000;
    use_token_file(token_file);
    elastic_store *store = NULL;
    rc = elastic_store_connect(endpoint, &opts, &store);
    if (rc != 0) { /* the detail names the endpoint and the errno already */
        fprintf(stderr, "elasticctl: %s\n", elastic_last_error());
        return 1;
    }
    rc = cmd->fn(store, &args, (int)timeout_ms);
    fflush(stdout);
    elastic_store_close(store);
    return rc;
}

static int cmd_store(int argc, char **argv)
{
    if (argc < 1)
        return usage_error("store", "%s", "needs a subcommand: serve, get, set, add, del, keys");
    if (strcmp(argv[0], "serve") == 0) return store_serve(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof store_commands / sizeof store_commands[0]; i++)
        if (strcmp(argv[0], store_commands[i].name) == 0)
            return store_client(&store_commands[i], argc - 1, argv + 1);
    return usage_error("store", "unknown subcommand \"%s\"", argv[0]);
}

/* ---- status: an agent's metrics endpoint at a glance ----------------------- */

static int cmd_status(int argc, char **argv)
{
    const char *endpoint = NULL, *timeout_text = "5000";
    flag_spec flags[] = { { "endpoint", &endpoint }, { "timeout", &timeout_text }, { NULL, NULL } };
    parsed_args args;
    int rc = parse_args("status", argc, argv, flags, &args);
    if (rc != 0) return rc;
    long long timeout_ms;
    if (endpoint == NULL)
        return usage_error("status", "%s", "needs --endpoint H:P (an agent's --metrics-port)");
    if (args.count != 0)
        return usage_error("status", "unexpected argument \"%s\"", args.positional[0]);
    if (!parse_int(timeout_text, 1, 3600000, &timeout_ms))
        return usage_error("status", "bad --timeout \"%s\"", timeout_text);
    rc = ctl_status(endpoint, (int)timeout_ms, stdout);
    if (rc != 0)
        fprintf(stderr, "elasticctl: status: %s (%s)\n", elastic_strerror(rc), ctl_last_error());
    return rc == 0 ? 0 : 1;
}

/* ---- timeline and summary: a job's event logs, as a picture or as text ---- */

typedef struct event_logs {
    const char *paths[CTL_MAX_EVENT_LOGS];
    int count;
    const char *run_id;
} event_logs;

/* EVENTS.jsonl... [--run-id ID] [-o FILE] [--json]: files are positional, any number.
 * json NULL: no --json; output_required: -o must be given. */
static int read_args_json(const char *command, int argc, char **argv, bool want_output,
                          bool output_required, const char **output, bool *json, flag_spec *extra,
                          event_logs *logs)
{
    const char **paths = logs->paths;
    const char *run_id = NULL;
    int count = 0;
    *output = NULL;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const char **value =
            strcmp(arg, "--run-id") == 0                                              ? &run_id
            : want_output && (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) ? output
                                                                                      : NULL;
        for (flag_spec *f = extra; f != NULL && f->name != NULL && value == NULL; f++)
            if (strncmp(arg, "--", 2) == 0 && strcmp(arg + 2, f->name) == 0) value = f->value;
        if (json != NULL && strcmp(arg, "--json") == 0) {
            *json = true;
        } else if (value != NULL) {
            if (i + 1 >= argc) return usage_error(command, "flag \"%s\" needs a value", arg);
            *value = argv[++i];
        } else if (strncmp(arg, "-", 1) == 0 && arg[1] != '\0') {
            return usage_error(command, "unknown flag \"%s\"", arg);
        } else if (count == CTL_MAX_EVENT_LOGS) {
            return usage_error(command, "more than %s event logs", "256");
        } else {
            paths[count++] = arg;
        }
    }
    if (count == 0)
        return usage_error(command, "%s",
                           "needs EVENTS.jsonl (an elasticrun --event-log), one per node");
    if (want_output && output_required && *output == NULL)
        return usage_error(command, "%s", "needs -o FILE.svg");
    logs->count = count;
    logs->run_id = run_id;
    return 0;
}

static int events_failed(const char *command, int rc)
{
    if (rc != 0) fprintf(stderr, "elasticctl %s: %s\n", command, ctl_last_error());
    return rc == 0 ? 0 : 1;
}

static int read_args(const char *command, int argc, char **argv, bool want_output,
                     const char **output, event_logs *logs)
{
    return read_args_json(command, argc, argv, want_output, true, output, NULL, NULL, logs);
}

static int cmd_goodput(int argc, char **argv)
{
    event_logs logs;
    ctl_goodput_opts o = { .json = false };
    flag_spec extra[] = { { "profile-out", &o.profile_path },
                          { "trace-out", &o.trace_path },
                          { NULL, NULL } };
    int rc = read_args_json("goodput", argc, argv, true, false, &o.svg_path, &o.json, extra, &logs);
    if (rc != 0) return rc;
    return events_failed("goodput", ctl_goodput(logs.paths, logs.count, logs.run_id, &o, stdout));
}

static int cmd_timeline(int argc, char **argv)
{
    event_logs logs;
    const char *output = NULL;
    int rc = read_args("timeline", argc, argv, true, &output, &logs);
    if (rc != 0) return rc;
    return events_failed("timeline", ctl_timeline(logs.paths, logs.count, logs.run_id, output));
}

static int cmd_summary(int argc, char **argv)
{
    event_logs logs;
    const char *unused = NULL;
    int rc = read_args("summary", argc, argv, false, &unused, &logs);
    if (rc != 0) return rc;
    return events_failed("summary", ctl_summary(logs.paths, logs.count, logs.run_id, stdout));
}

/* ---- simulate: ETTR at scale, by launcher profile ------------------------ */

static int cmd_simulate(int argc, char **argv)
{
    const char *gpus_text = "1024,16384,100000", *days_text = "30", *seeds_text = "20",
               *seed_text = "1", *profile = NULL, *trace = NULL, *only = NULL,
               *restarts_text = "10";
    bool json = false;
    for (int i = 0; i < argc; i++) /* --json takes no value: strip it before the flag parser */
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
            for (int j = i; j + 1 < argc; j++) argv[j] = argv[j + 1];
            argc--, i--;
        }
    flag_spec flags[] = { { "gpus", &gpus_text },
                          { "days", &days_text },
                          { "seeds", &seeds_text },
                          { "seed", &seed_text },
                          { "profile", &profile },
                          { "trace", &trace },
                          { "only", &only },
                          { "max-restarts", &restarts_text },
                          { NULL, NULL } };
    parsed_args args;
    int rc = parse_args("simulate", argc, argv, flags, &args);
    if (rc != 0) return rc;
    if (args.count != 0)
        return usage_error("simulate", "unexpected argument \"%s\"", args.positional[0]);
    ctl_simulate_opts o = {
        .profile_path = profile, .trace_path = trace, .only = only, .json = json
    };
    long long v;
    char list[256];
    if (strlen(gpus_text) >= sizeof list)
        return usage_error("simulate", "bad --gpus \"%s\"", gpus_text);
    strcpy(list, gpus_text);
    for (char *save = NULL, *item = strtok_r(list, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        if (o.gpu_count == CTL_SIM_MAX_SCALES || !parse_int(item, 1, 10000000, &v))
            return usage_error("simulate", "bad --gpus \"%s\" (up to 8 counts, 1 to 10000000)",
                               gpus_text);
        o.gpus[o.gpu_count++] = (double)v;
    }
    if (o.gpu_count == 0) return usage_error("simulate", "bad --gpus \"%s\"", gpus_text);
    if (!parse_int(days_text, 1, 3650, &v))
        return usage_error("simulate", "bad --days \"%s\"", days_text);
    o.days = (double)v;
    if (!parse_int(seeds_text, 1, 1000, &v))
        return usage_error("simulate", "bad --seeds \"%s\"", seeds_text);
    o.seeds = (int)v;
    if (!parse_int(seed_text, 0, INT64_MAX, &v))
        return usage_error("simulate", "bad --seed \"%s\"", seed_text);
    o.seed = (unsigned long long)v;
    if (!parse_int(restarts_text, 1, 1000, &v))
        return usage_error("simulate", "bad --max-restarts \"%s\" (1 to 1000)", restarts_text);
    o.bug_restarts = (int)v;
    rc = ctl_simulate(&o, stdout);
    if (rc != 0) fprintf(stderr, "elasticctl simulate: %s\n", ctl_last_error());
    return rc == 0 ? 0 : 1;
}

/* ---- top level ----------------------------------------------------------- */

static int cmd_version(int argc, char **argv)
{
    printf("elasticctl %s\n", elastic_version_string());
    return 0;
}

static int cmd_explain(int argc, char **argv)
{
    event_logs logs;
    const char *unused = NULL;
    int rc = read_args("explain", argc, argv, false, &unused, &logs);
    if (rc != 0) return rc;
    return events_failed("explain", ctl_explain(logs.paths, logs.count, logs.run_id, stdout));
}

static const char usage_text[] =
    "usage: elasticctl COMMAND ...\n"
    "  store serve [--host H] [--port P] [--token-file F]   run a store; prints \"listening on "
    "H:P\"\n"
    "  store get KEY [--timeout MS] --endpoint H:P [--token-file F]\n"
    "  store set KEY VALUE --endpoint H:P [--token-file F]\n"
    "  store add KEY DELTA --endpoint H:P [--token-file F]\n"
    "  store del KEY --endpoint H:P [--token-file F]\n"
    "  store keys [PREFIX] --endpoint H:P [--token-file F]\n"
    "  status --endpoint H:P [--timeout MS]   a job at a glance from an agent's --metrics-port\n"
    "  timeline EVENTS.jsonl... -o FILE.svg [--run-id ID]   a job's history as a picture (one log "
    "per node)\n"
    "  summary EVENTS.jsonl... [--run-id ID]   the same as text\n"
    "  explain EVENTS.jsonl... [--run-id ID]   per failure: its class, the rule that fired, what\n"
    "        was decided and what to look at\n"
    "  goodput EVENTS.jsonl... [--run-id ID] [--json] [-o FILE.svg] [--profile-out F] [--trace-out "
    "F]\n"
    "        where the job's time went: lost per failure and bucket, ETTR (and, for simulate, the\n"
    "        run's measured recovery profile and its failures as a trace)\n"
    "  simulate [--gpus N,...] [--days D] [--seeds S] [--seed X] [--profile F] [--only NAME]\n"
    "        [--trace F] [--max-restarts N] [--json]   ETTR at scale by launcher profile (or one\n"
    "        trace's run), and a deterministic bug's GPU-hours under torchrun's counting\n"
    "  version\n"
    "Without --token-file the token comes from ELASTIC_STORE_TOKEN, if set.\n";

static int cmd_help(int argc, char **argv)
{
    fputs(usage_text, stdout);
    return 0;
}

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
} command;

static const command commands[] = {
    { "store", cmd_store },     { "status", cmd_status },   { "timeline", cmd_timeline },
    { "summary", cmd_summary }, { "goodput", cmd_goodput }, { "simulate", cmd_simulate },
    { "explain", cmd_explain }, { "version", cmd_version }, { "--version", cmd_version },
    { "help", cmd_help },       { "--help", cmd_help },     { "-h", cmd_help },
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "elasticctl: unknown command \"%s\" (see elasticctl --help)\n", argv[1]);
    return 2;
}
