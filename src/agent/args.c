/*
 * elasticrun's command line, read the way torchrun reads it: dashes or
 * underscores, "--flag value" or "--flag=value", unique prefixes (argparse's
 * abbreviations), PET_<FLAG> environment fallbacks, then the program.
 */
#include "common/dir.h"
#include "agent/agent.h"
#include "agent/slurm.h"
#include "common/parse_int.h"
#include "common/names.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ARGS_MAX_NODES       100000
#define ARGS_MAX_NPROC       4096
#define ARGS_MAX_RESTARTS    1000000
/* The budget when recovery is asked for (--in-process-recovery, --memory-ckpt,
 * --warm-spares) and --max-restarts is not given: with torchrun's 0 the first
 * failure would end the job while a spare is parked and the step is in memory. */
#define ARGS_RECOVERY_RESTARTS 3
#define ARGS_RESTARTS_UNSET    (-1)
#define ARGS_MAX_WARM_SPARES 64
#define ARGS_MAX_SECONDS     (86400.0 * 30)
#define ARGS_MAX_STRING      4096

typedef int (*flag_apply_fn)(elastic_agent_opts *opts, const char *value);

typedef struct flag_spec {
    const char *name;    /* canonical spelling, underscores */
    char short_name;     /* 'r' for -r, or 0 */
    bool is_switch;      /* takes no value (store_true) */
    bool from_env;       /* PET_<NAME> is a fallback */
    flag_apply_fn apply; /* switches get "1" or "0" */
} flag_spec;

void agent__opts_defaults(elastic_agent_opts *opts)
{
    memset(opts, 0, sizeof *opts); /* padding too: opts_init copies bytes */
    opts->struct_size = sizeof *opts;
    opts->min_nodes = 1;
    opts->max_nodes = 1;
    opts->nproc_per_node = 1;
    opts->rdzv_backend = "static";
    opts->rdzv_endpoint = "";
    opts->run_id = "none";
    opts->rdzv_conf = "";
    opts->monitor_interval_ms = 5000;
    opts->role = "default";
    opts->master_addr = "127.0.0.1";
    opts->master_port = 29500;
    opts->redirects = "0";
    opts->tee = "0";
    opts->grace_period_ms = 5000;
    opts->metrics_port = -1;
    opts->user_probe_interval_ms = 10000;
    opts->abort_ack_timeout_ms = 5000;
    opts->straggler_quarantine_ms = 300000;
    opts->preferred_rank = -1;
    opts->health_checks = "auto";
    opts->health_check_interval_ms = 30000;
    opts->health_check_timeout_ms = 60000;
    opts->memory_ckpt_steps = 2;
    opts->memory_replicas = 1;
    opts->on_divergence = "stop";
    opts->max_infra_restarts = 20;
}

ELASTIC_EXTERN int elastic_agent_opts_init(elastic_agent_opts *opts, size_t struct_size)
{
    elastic_agent_opts defaults;
    agent__opts_defaults(&defaults);
    return ELASTIC__STRUCT_INIT(opts, struct_size, &defaults, "elastic_agent_opts");
}

/* ---- one function per flag ------------------------------------------------ */

static int bounded_string(const char *value, const char **out)
{
    if (strlen(value) >= ARGS_MAX_STRING)
        return elastic__fail(ELASTIC_EINVAL, "longer than %d bytes", ARGS_MAX_STRING - 1);
    *out = value;
    return 0;
}

static int set_nnodes(elastic_agent_opts *o, const char *value)
{
    int min, max;
    char first[32];
    const char *colon = strchr(value, ':');
    size_t first_len = colon ? (size_t)(colon - value) : strlen(value);
    if (first_len >= sizeof first)
        return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not N or MIN:MAX", value);
    memcpy(first, value, first_len);
    first[first_len] = '\0';
    if (elastic__parse_int(NULL, first, 1, ARGS_MAX_NODES, &min) != 0) goto bad;
    max = min;
    if (colon != NULL && elastic__parse_int(NULL, colon + 1, 1, ARGS_MAX_NODES, &max) != 0)
        goto bad;
    if (min > max) return elastic__fail(ELASTIC_EINVAL, "\"%s\": MIN is greater than MAX", value);
    o->min_nodes = min;
    o->max_nodes = max;
    return 0;
bad:
    return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not N or MIN:MAX with 1 <= MIN <= MAX <= %d",
                         value, ARGS_MAX_NODES);
}

/* GPUs as the NVIDIA driver shows them (/dev/nvidia0, /dev/nvidia1, ...). */
static int count_gpus(void)
{
    DIR *dev = elastic__opendir("/dev");
    if (dev == NULL) return 0;
    int gpus = 0;
    for (struct dirent *entry; (entry = readdir(dev)) != NULL;) {
        const char *suffix = entry->d_name + strlen("nvidia");
        if (strncmp(entry->d_name, "nvidia", 6) == 0 && *suffix != '\0' &&
            strspn(suffix, "0123456789") == strlen(suffix))
            gpus++;
    }
    closedir(dev);
    return gpus;
}

static int set_nproc(elastic_agent_opts *o, const char *value)
{
    long nproc;
    int gpus = -1;
    if (strcmp(value, "gpu") == 0 || strcmp(value, "auto") == 0) gpus = count_gpus();
    if (strcmp(value, "cpu") == 0 || (strcmp(value, "auto") == 0 && gpus == 0)) {
        nproc = sysconf(_SC_NPROCESSORS_ONLN);
    } else if (strcmp(value, "gpu") == 0 || strcmp(value, "auto") == 0) {
        if (gpus == 0) return elastic__fail(ELASTIC_EINVAL, "\"gpu\": no GPU found");
        nproc = gpus;
    } else {
        int count;
        if (elastic__parse_int(NULL, value, 1, ARGS_MAX_NPROC, &count) != 0)
            return elastic__fail(ELASTIC_EINVAL,
                                 "\"%s\" is not an integer in 1..%d, auto, cpu or gpu", value,
                                 ARGS_MAX_NPROC);
        nproc = count;
    }
    o->nproc_per_node = nproc < 1 ? 1 : nproc > ARGS_MAX_NPROC ? ARGS_MAX_NPROC : (int)nproc;
    return 0;
}

static int set_backend(elastic_agent_opts *o, const char *value)
{
    if (strcmp(value, "etcd") == 0) value = "etcd-v3"; /* one spelling from here on */
    if (strcmp(value, "c10d") != 0 && strcmp(value, "static") != 0 && strcmp(value, "etcd-v3") != 0)
        return elastic__fail(ELASTIC_EINVAL,
                             "\"%s\" is not supported (c10d, static, etcd-v3 or etcd)", value);
    o->rdzv_backend = value;
    return 0;
}

static int set_endpoint(elastic_agent_opts *o, const char *value)
{
    return bounded_string(value, &o->rdzv_endpoint);
}
static int set_role(elastic_agent_opts *o, const char *value)
{
    return bounded_string(value, &o->role);
}
static int set_log_dir(elastic_agent_opts *o, const char *value)
{
    return bounded_string(value, &o->log_dir);
}
static int set_local_addr(elastic_agent_opts *o, const char *value)
{
    return bounded_string(value, &o->local_addr);
}
static int set_master_addr(elastic_agent_opts *o, const char *value)
{
    return bounded_string(value, &o->master_addr);
}
static int set_event_log(elastic_agent_opts *o, const char *value)
{
    return bounded_string(value, &o->event_log);
}
static int set_error_file(elastic_agent_opts *o, const char *value)
{
    return bounded_string(value, &o->error_file);
}

static int set_run_id(elastic_agent_opts *o, const char *value)
{
    /* The run id names store keys and log directories: one rule everywhere. */
    if (elastic__check_run_id(value, "--rdzv-id") != 0) return ELASTIC_EINVAL;
    o->run_id = value;
    return 0;
}

static int set_rdzv_conf(elastic_agent_opts *o, const char *value)
{
    agent_rdzv_conf conf;
    int rc = agent__rdzv_conf_parse(value, &conf);
    if (rc == 0) o->rdzv_conf = value;
    return rc;
}

static int set_int_field(int *field, const char *value, int min, int max)
{
    if (elastic__parse_int(NULL, value, min, max, field) != 0)
        return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not an integer in %d..%d", value, min, max);
    return 0;
}

static int set_max_restarts(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->max_restarts, v, 0, ARGS_MAX_RESTARTS);
}
static int set_node_rank(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->node_rank, v, 0, ARGS_MAX_NODES - 1);
}
static int set_master_port(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->master_port, v, 0, 65535);
}

static int set_seconds_field(int *field, const char *value, bool zero_ok)
{
    int ms;
    if (agent__parse_seconds_ms(value, ARGS_MAX_SECONDS, &ms) != 0 || (!zero_ok && ms == 0))
        return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not a number of seconds%s", value,
                             zero_ok ? "" : " above 0");
    *field = ms;
    return 0;
}

static int set_monitor(elastic_agent_opts *o, const char *v)
{
    return set_seconds_field(&o->monitor_interval_ms, v, false);
}
static int set_grace(elastic_agent_opts *o, const char *v)
{
    return set_seconds_field(&o->grace_period_ms, v, true);
}
static int set_hang(elastic_agent_opts *o, const char *v)
{
    return set_seconds_field(&o->hang_timeout_ms, v, true);
}
/* probes and in-process recovery (src/probe/, docs/PROBES.md) */
static int set_startup(elastic_agent_opts *o, const char *v)
{
    return set_seconds_field(&o->startup_timeout_ms, v, true);
}
static int set_metrics_port(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->metrics_port, v, 0, 65535);
}
static int set_metrics_host(elastic_agent_opts *o, const char *v)
{
    return bounded_string(v, &o->metrics_host);
}
static int set_straggler_window(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->straggler_window, v, 0, 1024);
}
static int set_straggler_rounds(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->straggler_rounds, v, 0, 100000);
}
static int set_user_probe(elastic_agent_opts *o, const char *v)
{
    return bounded_string(v, &o->user_probe);
}
static int set_user_probe_interval(elastic_agent_opts *o, const char *v)
{
    return set_seconds_field(&o->user_probe_interval_ms, v, false);
}
static int set_quarantine(elastic_agent_opts *o, const char *v)
{
    return set_seconds_field(&o->straggler_quarantine_ms, v, true);
}
/* node health checks (src/health/, docs/HEALTH.md) */
static int set_health_checks(elastic_agent_opts *o, const char *v)
{
    const char *why = "is not auto, off, or a comma-separated list of gpu and network";
    if (strcmp(v, "auto") != 0 && strcmp(v, "off") != 0) {
        char copy[64];
        if (*v == '\0' || strlen(v) >= sizeof copy)
            return elastic__fail(ELASTIC_EINVAL, "\"%.80s\" %s", v, why);
        snprintf(copy, sizeof copy, "%s", v);
        char *save = NULL;
        for (char *word = strtok_r(copy, ",", &save); word != NULL;
             word = strtok_r(NULL, ",", &save))
            if (strcmp(word, "gpu") != 0 && strcmp(word, "network") != 0)
                return elastic__fail(ELASTIC_EINVAL, "\"%s\" %s", v, why);
        if (v[strlen(v) - 1] == ',' || v[0] == ',' || strstr(v, ",,") != NULL)
            return elastic__fail(ELASTIC_EINVAL, "\"%s\" %s", v, why);
    }
    o->health_checks = v;
    return 0;
}
static int set_health_interval(elastic_agent_opts *o, const char *v)
{
    return set_seconds_field(&o->health_check_interval_ms, v, true);
}
static int set_health_cmd(elastic_agent_opts *o, const char *v)
{
    if (*v == '\0') return elastic__fail(ELASTIC_EINVAL, "an empty command");
    return bounded_string(v, &o->health_check_cmd);
}
static int set_health_timeout(elastic_agent_opts *o, const char *v)
{
    return set_seconds_field(&o->health_check_timeout_ms, v, false);
}
static int set_expected_gpus(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->expected_gpus, v, 0, 64);
}
static int set_health_temperature(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->health_temperature_max, v, 0, 150);
}
static int set_abort_ack(elastic_agent_opts *o, const char *v)
{
    return set_seconds_field(&o->abort_ack_timeout_ms, v, false);
}

static int set_memory_ckpt(elastic_agent_opts *o, const char *v)
{
    o->memory_ckpt = strcmp(v, "1") == 0;
    return 0;
}
/* Bytes, with an optional binary suffix: 64G, 512M, 1T. */
static int set_memory_limit(elastic_agent_opts *o, const char *v)
{
    size_t len = strlen(v);
    uint64_t unit = 1, n;
    char last = len > 0 ? v[len - 1] : '\0';
    if (last == 'K' || last == 'k') unit = 1ull << 10;
    if (last == 'M' || last == 'm') unit = 1ull << 20;
    if (last == 'G' || last == 'g') unit = 1ull << 30;
    if (last == 'T' || last == 't') unit = 1ull << 40;
    if (len == 0 ||
        elastic__parse_u64_n(NULL, v, unit > 1 ? len - 1 : len, 1, (1ull << 50) / unit, &n) != 0 ||
        n * unit < (1ull << 20))
        return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not a size of at least 1M (e.g. 64G)", v);
    o->memory_ckpt_limit = n * unit;
    return 0;
}
static int set_memory_steps(elastic_agent_opts *o, const char *v)
{
    return elastic__parse_int("--memory-ckpt-steps", v, 2, 64, &o->memory_ckpt_steps);
}
static int set_memory_replicas(elastic_agent_opts *o, const char *v)
{
    return elastic__parse_int("--memory-replicas", v, 0, 16, &o->memory_replicas);
}
static int set_failure_domain(elastic_agent_opts *o, const char *v)
{
    size_t len = strlen(v);
    if (len == 0 || len > 64 ||
        strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != len)
        return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not 1..64 of [A-Za-z0-9._-]", v);
    o->failure_domain = v;
    return 0;
}
static int set_memory_disk_dir(elastic_agent_opts *o, const char *v)
{
    return bounded_string(v, &o->memory_disk_dir);
}
static int set_memory_disk_every(elastic_agent_opts *o, const char *v)
{
    return elastic__parse_int("--memory-disk-every", v, 0, 1000000000, &o->memory_disk_every);
}

static int set_start_method(elastic_agent_opts *o, const char *value)
{
    /* Accepted for compatibility: every worker is a fresh exec'd process. */
    if (strcmp(value, "spawn") != 0 && strcmp(value, "fork") != 0 &&
        strcmp(value, "forkserver") != 0)
        return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not spawn, fork or forkserver", value);
    return 0;
}

static int set_std(const char **field, const char *value)
{
    int mask;
    int rc = agent__std_parse(value, 0, &mask);
    if (rc == 0) *field = value;
    return rc;
}

static int set_redirects(elastic_agent_opts *o, const char *v)
{
    return set_std(&o->redirects, v);
}
static int set_tee(elastic_agent_opts *o, const char *v)
{
    return set_std(&o->tee, v);
}

static int switch_value(const char *value, int *field)
{
    int parsed; /* PET_<SWITCH> is read as bool(int(value)), like torch's check_env */
    if (elastic__parse_int(NULL, value, -1000000, 1000000, &parsed) != 0)
        return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not an integer", value);
    *field = parsed != 0;
    return 0;
}

static int set_standalone(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->standalone);
}
static int set_module(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->module);
}
static int set_max_infra_restarts(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->max_infra_restarts, v, 0, ARGS_MAX_RESTARTS);
}
static int set_torchrun_restarts(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->torchrun_restarts);
}
static int set_no_python(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->no_python);
}
static int set_run_path(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->run_path);
}
static int set_help(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->help);
}
static int set_version(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->version);
}
static int set_straggler_evict(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->straggler_evict);
}
static int set_in_process(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->in_process_recovery);
}
static int set_warm_spares(elastic_agent_opts *o, const char *v)
{
    return set_int_field(&o->warm_spares, v, 0, ARGS_MAX_WARM_SPARES);
}
static int set_no_prestart(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->no_prestart);
}
static int set_quiet(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->quiet);
}
static int set_on_divergence(elastic_agent_opts *o, const char *v)
{
    if (strcmp(v, "stop") != 0 && strcmp(v, "warn") != 0 && strcmp(v, "off") != 0)
        return elastic__fail(ELASTIC_EINVAL, "--on-divergence \"%.64s\": stop, warn or off", v);
    o->on_divergence = v;
    return 0;
}
static int set_slurm_drain(elastic_agent_opts *o, const char *v)
{
    return switch_value(v, &o->slurm_drain);
}

static const flag_spec flags[] = {
    { "nnodes", 0, false, true, set_nnodes },
    { "nproc_per_node", 0, false, true, set_nproc },
    { "rdzv_backend", 0, false, true, set_backend },
    { "rdzv_endpoint", 0, false, true, set_endpoint },
    { "rdzv_id", 0, false, true, set_run_id },
    { "rdzv_conf", 0, false, true, set_rdzv_conf },
    { "standalone", 0, true, true, set_standalone },
    { "max_restarts", 0, false, true, set_max_restarts },
    { "monitor_interval", 0, false, true, set_monitor },
    { "start_method", 0, false, true, set_start_method },
    { "role", 0, false, true, set_role },
    { "module", 'm', true, true, set_module },
    { "no_python", 0, true, true, set_no_python },
    { "run_path", 0, true, true, set_run_path },
    { "log_dir", 0, false, true, set_log_dir },
    { "redirects", 'r', false, true, set_redirects },
    { "tee", 't', false, true, set_tee },
    { "local_addr", 0, false, true, set_local_addr },
    { "node_rank", 0, false, true, set_node_rank },
    { "master_addr", 0, false, true, set_master_addr },
    { "master_port", 0, false, true, set_master_port },
    { "grace_period", 0, false, true, set_grace },
    { "hang_timeout", 0, false, true, set_hang },
    { "startup_timeout", 0, false, true, set_startup },
    { "metrics_port", 0, false, true, set_metrics_port },
    { "metrics_host", 0, false, true, set_metrics_host },
    { "straggler_window", 0, false, true, set_straggler_window },
    { "straggler_rounds", 0, false, true, set_straggler_rounds },
    { "straggler_evict", 0, true, true, set_straggler_evict },
    { "straggler_quarantine", 0, false, true, set_quarantine },
    { "user_probe", 0, false, true, set_user_probe },
    { "user_probe_interval", 0, false, true, set_user_probe_interval },
    { "in_process_recovery", 0, true, true, set_in_process },
    { "abort_ack_timeout", 0, false, true, set_abort_ack },
    { "health_checks", 0, false, true, set_health_checks },
    { "health_check_interval", 0, false, true, set_health_interval },
    { "health_check_cmd", 0, false, true, set_health_cmd },
    { "health_check_timeout", 0, false, true, set_health_timeout },
    { "expected_gpus", 0, false, true, set_expected_gpus },
    { "health_temperature_max", 0, false, true, set_health_temperature },
    { "warm_spares", 0, false, true, set_warm_spares },
    { "event_log", 0, false, true, set_event_log },
    { "memory_ckpt", 0, true, true, set_memory_ckpt },
    { "memory_ckpt_limit", 0, false, true, set_memory_limit },
    { "memory_ckpt_steps", 0, false, true, set_memory_steps },
    { "memory_replicas", 0, false, true, set_memory_replicas },
    { "memory_disk_dir", 0, false, true, set_memory_disk_dir },
    { "memory_disk_every", 0, false, true, set_memory_disk_every },
    { "failure_domain", 0, false, true, set_failure_domain },
    { "on_divergence", 0, false, true, set_on_divergence },
    { "torchrun_restarts", 0, true, true, set_torchrun_restarts },
    { "max_infra_restarts", 0, false, true, set_max_infra_restarts },
    { "error_file", 0, false, true, set_error_file },
    { "no_prestart", 0, true, true, set_no_prestart },
    { "quiet", 'q', true, true, set_quiet },
    { "slurm_drain", 0, true, true, set_slurm_drain },
    { "help", 'h', true, false, set_help },
    { "version", 0, true, false, set_version },
};

/* ---- lookup --------------------------------------------------------------- */

/* "--nproc-per" -> "nproc_per": dashes and underscores are the same. */
static void normalize(const char *name, size_t len, char *out, size_t out_size)
{
    size_t i = 0;
    for (; i < len && i + 1 < out_size; i++) out[i] = name[i] == '-' ? '_' : name[i];
    out[i] = '\0';
}

/* Exact name, else the one flag the text is a prefix of (argparse's rule). */
static const flag_spec *find_long(const char *name)
{
    const flag_spec *match = NULL;
    size_t len = strlen(name);
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(flags); i++) {
        if (strcmp(flags[i].name, name) == 0) return &flags[i];
        if (len > 0 && strncmp(flags[i].name, name, len) == 0) {
            if (match != NULL) return NULL;
            match = &flags[i];
        }
    }
    return match;
}

static const flag_spec *find_short(char letter)
{
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(flags); i++)
        if (flags[i].short_name == letter) return &flags[i];
    return NULL;
}

static void dashed(const char *name, char *out, size_t out_size)
{
    size_t i = 0;
    for (; name[i] != '\0' && i + 1 < out_size; i++) out[i] = name[i] == '_' ? '-' : name[i];
    out[i] = '\0';
}

/* Applies one value, prefixing a failure with where it came from. */
static int apply_flag(elastic_agent_opts *opts, const flag_spec *flag, const char *value,
                      const char *where)
{
    int rc = flag->apply(opts, value);
    if (rc == 0) return 0;
    char detail[512];
    snprintf(detail, sizeof detail, "%s", elastic_last_error());
    return elastic__fail(ELASTIC_EINVAL, "%s: %s", where, detail);
}

static const char *env_lookup(const char *const *envp, const char *name)
{
    size_t len = strlen(name);
    for (; envp != NULL && *envp != NULL; envp++)
        if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=') return *envp + len + 1;
    return NULL;
}

static int apply_environment(elastic_agent_opts *opts, const char *const *envp)
{
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(flags); i++) {
        if (!flags[i].from_env) continue;
        char env_name[64] = "PET_";
        for (size_t c = 0; flags[i].name[c] != '\0' && c + 5 < sizeof env_name; c++)
            env_name[4 + c] =
                (char)(flags[i].name[c] >= 'a' && flags[i].name[c] <= 'z' ? flags[i].name[c] - 32
                                                                          : flags[i].name[c]);
        const char *value = env_lookup(envp, env_name);
        if (value == NULL) continue;
        int rc = apply_flag(opts, &flags[i], value, env_name);
        if (rc != 0) return rc;
    }
    return 0;
}

/* "--name", "--name=value" or "--name value"; returns how many argv it used. */
static int parse_long(elastic_agent_opts *opts, int argc, const char *const *argv, int at)
{
    const char *text = argv[at] + 2;
    const char *equals = strchr(text, '=');
    char name[64];
    size_t name_len = equals ? (size_t)(equals - text) : strlen(text);
    if (name_len >= sizeof name)
        return elastic__fail(ELASTIC_EINVAL, "unknown flag %.80s", argv[at]);
    normalize(text, name_len, name, sizeof name);
    const flag_spec *flag = find_long(name);
    if (flag == NULL)
        return elastic__fail(ELASTIC_EINVAL, "unknown or ambiguous flag %.80s (see --help)",
                             argv[at]);
    char where[80] = "--";
    dashed(flag->name, where + 2, sizeof where - 2);
    if (flag->is_switch) {
        if (equals != NULL) return elastic__fail(ELASTIC_EINVAL, "%s takes no value", where);
        return apply_flag(opts, flag, "1", where) == 0 ? 1 : ELASTIC_EINVAL;
    }
    if (equals != NULL) return apply_flag(opts, flag, equals + 1, where) == 0 ? 1 : ELASTIC_EINVAL;
    if (at + 1 >= argc) return elastic__fail(ELASTIC_EINVAL, "%s needs a value", where);
    return apply_flag(opts, flag, argv[at + 1], where) == 0 ? 2 : ELASTIC_EINVAL;
}

/* "-m", "-r3" or "-r 3". */
static int parse_short(elastic_agent_opts *opts, int argc, const char *const *argv, int at)
{
    const flag_spec *flag = find_short(argv[at][1]);
    if (flag == NULL)
        return elastic__fail(ELASTIC_EINVAL, "unknown flag %.80s (see --help)", argv[at]);
    char where[4] = { '-', flag->short_name, '\0', '\0' };
    const char *attached = argv[at] + 2;
    if (flag->is_switch) {
        if (*attached != '\0')
            return elastic__fail(ELASTIC_EINVAL, "unknown flag %.80s (see --help)", argv[at]);
        return apply_flag(opts, flag, "1", where) == 0 ? 1 : ELASTIC_EINVAL;
    }
    if (*attached != '\0')
        return apply_flag(opts, flag, attached[0] == '=' ? attached + 1 : attached, where) == 0
                   ? 1
                   : ELASTIC_EINVAL;
    if (at + 1 >= argc) return elastic__fail(ELASTIC_EINVAL, "%s needs a value", where);
    return apply_flag(opts, flag, argv[at + 1], where) == 0 ? 2 : ELASTIC_EINVAL;
}

/* --warm-spares replaces a failed rank with a parked process while the
 * survivors stay: that is in-process recovery. Without it every failure stops
 * and restarts the whole group, so a spare would stand in for one of N fresh
 * starts and save nothing the others do not wait for: refused, not ignored. */
int agent__check_warm_spares(const elastic_agent_opts *opts)
{
    if (opts->warm_spares < 0 || opts->warm_spares > ARGS_MAX_WARM_SPARES)
        return elastic__fail(ELASTIC_EINVAL, "--warm-spares %d: 0..%d", opts->warm_spares,
                             ARGS_MAX_WARM_SPARES);
    if (opts->warm_spares > 0 && !opts->in_process_recovery)
        return elastic__fail(
            ELASTIC_EINVAL,
            "--warm-spares needs --in-process-recovery: a spare replaces one failed "
            "rank while the others stay; a full restart starts every rank anew");
    return 0;
}

static int check_combination(const elastic_agent_opts *opts)
{
    if (opts->help || opts->version) return 0;
    if (opts->argc == 0)
        return elastic__fail(ELASTIC_EINVAL, "no training program given (see --help)");
    if (opts->module && opts->no_python)
        return elastic__fail(ELASTIC_EINVAL, "--module and --no-python cannot be used together");
    if (opts->memory_disk_every > 0 && opts->memory_disk_dir == NULL)
        return elastic__fail(ELASTIC_EINVAL, "--memory-disk-every needs --memory-disk-dir");
    if (opts->standalone && opts->max_nodes > 1)
        return elastic__fail(ELASTIC_EINVAL, "--standalone runs one node, but --nnodes allows %d",
                             opts->max_nodes);
    if (strcmp(opts->rdzv_backend, "static") == 0 && opts->min_nodes != opts->max_nodes &&
        !opts->standalone)
        return elastic__fail(ELASTIC_EINVAL,
                             "--rdzv-backend static needs a fixed --nnodes, not %d:%d",
                             opts->min_nodes, opts->max_nodes);
    if (strlen(opts->rdzv_endpoint) == 0 && strcmp(opts->rdzv_backend, "etcd-v3") == 0 &&
        !opts->standalone)
        return elastic__fail(
            ELASTIC_EINVAL,
            "--rdzv-backend etcd-v3 needs --rdzv-endpoint host:port[,host:port...]");
    if (strlen(opts->rdzv_endpoint) == 0 && strcmp(opts->rdzv_backend, "c10d") == 0 &&
        !opts->standalone && opts->max_nodes > 1)
        return elastic__fail(ELASTIC_EINVAL,
                             "--rdzv-backend c10d needs --rdzv-endpoint host[:port]");
    return agent__check_warm_spares(opts);
}

extern char **environ;

static int parse_flags(int argc, const char *const *argv, const char *const *envp,
                       elastic_agent_opts *opts);

/* --max-restarts unset (no flag, no PET_MAX_RESTARTS, no Slurm default) takes
 * the caller's value, or ARGS_RECOVERY_RESTARTS where the caller left the
 * default 0 and asked for recovery. An explicit 0 stays 0. */
static void default_restarts(elastic_agent_opts *opts, int caller)
{
    if (opts->max_restarts != ARGS_RESTARTS_UNSET) return;
    bool recovery = opts->in_process_recovery || opts->memory_ckpt || opts->warm_spares > 0;
    opts->max_restarts = caller == 0 && recovery ? ARGS_RECOVERY_RESTARTS : caller;
}

static int parse_into(int argc, const char *const *argv, const char *const *envp,
                      elastic_agent_opts *opts)
{
    int caller_restarts = opts->max_restarts;
    opts->max_restarts = ARGS_RESTARTS_UNSET; /* set_max_restarts never sets a negative */
    int rc = parse_flags(argc, argv, envp, opts);
    default_restarts(opts, caller_restarts);
    return rc != 0 ? rc : check_combination(opts);
}

static int parse_flags(int argc, const char *const *argv, const char *const *envp,
                       elastic_agent_opts *opts)
{
    /* Slurm's job step first: PET_* and the flags override what it gives. */
    int rc = agent__slurm_defaults(opts, envp != NULL ? envp : (const char *const *)environ);
    if (rc != 0) return rc;
    rc = apply_environment(opts, envp != NULL ? envp : (const char *const *)environ);
    if (rc != 0) return rc;
    int at = 1;
    while (at < argc) {
        const char *arg = argv[at];
        if (arg == NULL) return elastic__fail(ELASTIC_EINVAL, "argv[%d] is NULL", at);
        if (strcmp(arg, "--") == 0) {
            at++;
            break;
        }
        if (arg[0] != '-' || arg[1] == '\0') break; /* the training program */
        int used =
            arg[1] == '-' ? parse_long(opts, argc, argv, at) : parse_short(opts, argc, argv, at);
        if (used < 0) return used;
        at += used;
    }
    opts->argc = argc - at;
    opts->argv = opts->argc > 0 ? argv + at : NULL;
    for (int i = 0; i < opts->argc; i++)
        if (opts->argv[i] == NULL || strlen(opts->argv[i]) >= 65536)
            return elastic__fail(ELASTIC_EINVAL,
                                 "program argument %d is missing or longer than 64 KiB", i);
    agent__slurm_after_flags(opts);
    return 0;
}

/* Parses into a full struct, then hands back only the caller's part; a flag
 * that set a field the caller's (older) struct lacks would be lost: refuse. */
ELASTIC_EXTERN int elastic_agent_parse_args(int argc, const char *const *argv,
                                            const char *const *envp, elastic_agent_opts *opts)
{
    elastic__clear_error();
    if (opts == NULL || argc < 0 || (argc > 0 && argv == NULL))
        return elastic__fail(ELASTIC_EINVAL,
                             "elastic_agent_parse_args: NULL opts, or argv NULL with argc > 0");
    elastic_agent_opts full, before;
    agent__opts_defaults(&full);
    int rc = ELASTIC__STRUCT_READ(&full, opts, "elastic_agent_opts");
    if (rc != 0) return rc;
    memcpy(&before, &full, sizeof full);
    rc = parse_into(argc, argv, envp, &full);
    size_t known = opts->struct_size < sizeof full ? opts->struct_size : sizeof full;
    if (rc == 0 && memcmp((char *)&full + known, (char *)&before + known, sizeof full - known) != 0)
        return elastic__fail(
            ELASTIC_EINVAL,
            "a flag sets an option this program's elastic_agent_opts (%zu of %zu bytes) lacks: "
            "it was built against an older libelastic",
            opts->struct_size, sizeof full);
    if (rc == 0) rc = ELASTIC__STRUCT_WRITE(opts, &full, "elastic_agent_opts");
    return rc;
}
