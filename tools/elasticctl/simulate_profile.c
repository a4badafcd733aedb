/*
 * Recovery profiles as text: a "model" section (the job being trained, shared
 * by every profile: the comparison is between launchers on the same model)
 * and one "profile NAME" section per launcher, each line "KEY VALUE SOURCE...".
 * Every value needs its source (measured, assumption, target), printed beside
 * it; every key must be given, numbers are finite and bounded, lines bounded.
 */
#include "elasticctl/ctl.h"
#include "elasticctl/simulate.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 600

static const char *const param_names[SP_PARAMS] = {
    "step_s",
    "state_gb",
    "gpus_per_node",
    "rate_per_gpu_hour",
    "detect_software_s",
    "detect_gpu_s",
    "detect_host_s",
    "detect_hang_s",
    "stop_s",
    "rdzv_base_s",
    "rdzv_per_node_ms",
    "replace_s",
    "restart_s",
    "interpreter_s",
    "init_s",
    "restore_gbps",
    "save_gbps",
    "interval_s",
    "every_steps",
};

const char *sim__param_name(int param)
{
    return param >= 0 && param < SP_PARAMS ? param_names[param] : "?";
}

static bool is_model_param(int param)
{
    return param <= SP_RATE;
}

static int param_of(const char *name)
{
    for (int i = 0; i < SP_PARAMS; i++)
        if (strcmp(param_names[i], name) == 0) return i;
    return -1;
}

static int take(sim_profiles *out, sim_profile *section, char *line, const char *where)
{
    char *save = NULL, *key = strtok_r(line, " \t", &save), *value = strtok_r(NULL, " \t", &save);
    char *source = save;
    while (source != NULL && isspace((unsigned char)*source)) source++;
    if (key == NULL) return 0;
    if (strcmp(key, "profile") == 0 || strcmp(key, "model") == 0)
        return elastic__fail(ELASTIC_EINVAL, "%s: a section line is \"model\" or \"profile NAME\"",
                             where);
    int param = param_of(key);
    if (param < 0) return elastic__fail(ELASTIC_EINVAL, "%s: unknown key \"%s\"", where, key);
    if (section == NULL)
        return elastic__fail(ELASTIC_EINVAL, "%s: \"%s\" before any \"model\" or \"profile\" line",
                             where, key);
    if (section == &out->model && !is_model_param(param))
        return elastic__fail(ELASTIC_EINVAL, "%s: \"%s\" belongs in a profile, not the model",
                             where, key);
    char *end = NULL;
    double v = value != NULL ? strtod(value, &end) : NAN;
    if (value == NULL || end == value || *end != '\0' || !isfinite(v) || v < 0 || v > 1e9)
        return elastic__fail(ELASTIC_EINVAL, "%s: %s needs a number in [0, 1e9]", where, key);
    if (source == NULL || *source == '\0')
        return elastic__fail(ELASTIC_EINVAL, "%s: %s needs its source after the value", where, key);
    if (section->set[param]) return elastic__fail(ELASTIC_EINVAL, "%s: %s given twice", where, key);
    section->v[param] = v;
    section->set[param] = true;
    snprintf(section->source[param], sizeof section->source[param], "%s", source);
    return 0;
}

static int complete(const sim_profiles *all, const char *origin)
{
    for (int k = 0; k <= SP_RATE; k++)
        if (!all->model.set[k])
            return elastic__fail(ELASTIC_EINVAL, "%s: the model has no %s", origin, param_names[k]);
    if (all->model.v[SP_STEP_S] <= 0 || all->model.v[SP_GPUS_PER_NODE] < 1)
        return elastic__fail(ELASTIC_EINVAL, "%s: step_s and gpus_per_node must be positive",
                             origin);
    for (int i = 0; i < all->count; i++)
        for (int k = SP_RATE + 1; k < SP_PARAMS; k++)
            if (!all->p[i].set[k])
                return elastic__fail(ELASTIC_EINVAL, "%s: profile %s has no %s", origin,
                                     all->p[i].name, param_names[k]);
    if (all->count == 0) return elastic__fail(ELASTIC_EINVAL, "%s: no profile", origin);
    return 0;
}

int sim__profiles_parse(const char *text, const char *origin, sim_profiles *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model.name, sizeof out->model.name, "model");
    if (text == NULL) text = sim__default_profiles();
    sim_profile *section = NULL;
    int number = 0;
    for (const char *at = text; *at != '\0';) {
        const char *nl = strchr(at, '\n');
        size_t len = nl != NULL ? (size_t)(nl - at) : strlen(at);
        number++;
        char where[300];
        snprintf(where, sizeof where, "%.200s:%d", origin, number);
        if (len >= MAX_LINE)
            return elastic__fail(ELASTIC_ELIMIT, "%s: a line longer than %d bytes", where,
                                 MAX_LINE);
        char line[MAX_LINE];
        memcpy(line, at, len);
        line[len] = '\0';
        at += len + (nl != NULL);
        char *hash = strchr(line, '#');
        if (hash != NULL) *hash = '\0';
        while (len > 0 && isspace((unsigned char)line[len - 1])) line[--len] = '\0';
        char *start = line;
        while (isspace((unsigned char)*start)) start++;
        if (*start == '\0') continue;
        if (strcmp(start, "model") == 0) {
            section = &out->model;
            continue;
        }
        if (strncmp(start, "profile", 7) == 0 && isspace((unsigned char)start[7])) {
            char *name = start + 8;
            while (isspace((unsigned char)*name)) name++;
            if (*name == '\0' || strlen(name) >= sizeof out->p[0].name || strchr(name, ' '))
                return elastic__fail(ELASTIC_EINVAL, "%s: a profile needs a one-word name", where);
            for (int i = 0; i < out->count; i++)
                if (strcmp(out->p[i].name, name) == 0)
                    return elastic__fail(ELASTIC_EINVAL, "%s: profile %s given twice", where, name);
            if (out->count == SIM_MAX_PROFILES)
                return elastic__fail(ELASTIC_ELIMIT, "%s: more than %d profiles", where,
                                     SIM_MAX_PROFILES);
            section = &out->p[out->count++];
            snprintf(section->name, sizeof section->name, "%s", name);
            continue;
        }
        int rc = take(out, section, start, where);
        if (rc != 0) return rc;
    }
    return complete(out, origin);
}
