/*
 * Small value parsers shared by the command line and --rdzv-conf (integers
 * are common/parse_int.h's): seconds, torch's booleans, torchrun's Std (--redirects/--tee)
 * and the "key=value,..." rendezvous configuration.
 */
#include "agent/agent.h"
#include "common/parse_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#define CONF_MAX_TEXT 4096

int agent__parse_seconds_ms(const char *text, double max_seconds, int *ms)
{
    if (text == NULL || *text == '\0') return ELASTIC_EINVAL;
    if (!isdigit((unsigned char)text[0]) && text[0] != '.') return ELASTIC_EINVAL;
    errno = 0;
    char *end = NULL;
    double seconds = strtod(text, &end);
    if (errno != 0 || *end != '\0' || !isfinite(seconds) || seconds < 0 || seconds > max_seconds)
        return ELASTIC_EINVAL;
    *ms = (int)llround(seconds * 1000.0);
    return 0;
}

int agent__parse_bool(const char *text, int *value)
{
    static const char *const truthy[] = { "1", "true", "t", "yes", "y" };
    static const char *const falsy[] = { "0", "false", "f", "no", "n" };
    if (text == NULL) return ELASTIC_EINVAL;
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(truthy); i++) {
        if (strcasecmp(text, truthy[i]) == 0) return *value = 1, 0;
        if (strcasecmp(text, falsy[i]) == 0) return *value = 0, 0;
    }
    return ELASTIC_EINVAL;
}

/* ---- Std: "3" or "0:1,1:2" ------------------------------------------------ */

int agent__std_parse(const char *text, int local_rank, int *mask)
{
    if (text == NULL || *text == '\0')
        return elastic__fail(ELASTIC_EINVAL, "empty value (expected 0-3 or local_rank:std,...)");
    if (strlen(text) >= CONF_MAX_TEXT) return elastic__fail(ELASTIC_EINVAL, "value too long");
    if (strchr(text, ':') == NULL) {
        if (elastic__parse_int(NULL, text, 0, 3, mask) != 0)
            return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not 0, 1, 2 or 3", text);
        return 0;
    }
    char copy[CONF_MAX_TEXT];
    snprintf(copy, sizeof copy, "%s", text);
    *mask = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        int rank, std;
        if (colon == NULL)
            return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not local_rank:std", item);
        *colon = '\0';
        if (elastic__parse_int(NULL, item, 0, 1 << 20, &rank) != 0 ||
            elastic__parse_int(NULL, colon + 1, 0, 3, &std) != 0)
            return elastic__fail(ELASTIC_EINVAL, "\"%s:%s\" is not local_rank:std with std 0-3",
                                 item, colon + 1);
        if (rank == local_rank) *mask = std;
    }
    return 0;
}

/* ---- --rdzv-conf ---------------------------------------------------------- */

static char *trim(char *text)
{
    while (isspace((unsigned char)*text)) text++;
    size_t len = strlen(text);
    while (len > 0 && isspace((unsigned char)text[len - 1])) text[--len] = '\0';
    return text;
}

static int conf_seconds(const char *key, const char *value, int *ms)
{
    if (agent__parse_seconds_ms(value, 86400.0 * 30, ms) != 0)
        return elastic__fail(ELASTIC_EINVAL, "%s: \"%s\" is not a number of seconds", key, value);
    return 0;
}

static int conf_apply(agent_rdzv_conf *conf, const char *key, const char *value)
{
    if (strcmp(key, "join_timeout") == 0) return conf_seconds(key, value, &conf->join_timeout_ms);
    if (strcmp(key, "last_call_timeout") == 0)
        return conf_seconds(key, value, &conf->last_call_timeout_ms);
    if (strcmp(key, "close_timeout") == 0) return conf_seconds(key, value, &conf->close_timeout_ms);
    if (strcmp(key, "outcome_timeout") == 0)
        return conf_seconds(key, value, &conf->outcome_timeout_ms);
    if (strcmp(key, "read_timeout") == 0) return conf_seconds(key, value, &conf->read_timeout_ms);
    if (strcmp(key, "keep_alive_interval") == 0)
        return conf_seconds(key, value, &conf->keep_alive_interval_ms);
    if (strcmp(key, "keep_alive_max_attempt") == 0) {
        if (elastic__parse_int(NULL, value, 1, 1000, &conf->keep_alive_max_attempt) != 0)
            return elastic__fail(ELASTIC_EINVAL, "%s: \"%s\" is not an integer in 1..1000", key,
                                 value);
        return 0;
    }
    struct {
        const char *name;
        char *field;
        size_t size;
    } strings[] = { { "cacert", conf->cacert, sizeof conf->cacert },
                    { "cert", conf->cert, sizeof conf->cert },
                    { "key", conf->key, sizeof conf->key },
                    { "user", conf->user, sizeof conf->user },
                    { "password_file", conf->password_file, sizeof conf->password_file },
                    { "etcd_prefix", conf->etcd_prefix, sizeof conf->etcd_prefix } };
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(strings); i++) {
        if (strcmp(key, strings[i].name) != 0) continue;
        if (strlen(value) >= strings[i].size)
            return elastic__fail(ELASTIC_EINVAL, "%s: longer than %zu bytes", key,
                                 strings[i].size - 1);
        snprintf(strings[i].field, strings[i].size, "%s", value);
        return 0;
    }
    if (strcmp(key, "password") == 0) /* visible in ps and shell history */
        return elastic__fail(ELASTIC_EINVAL,
                             "password: give password_file=PATH or ELASTIC_ETCD_PASSWORD instead");
    if (strcmp(key, "is_host") == 0) {
        if (agent__parse_bool(value, &conf->is_host) != 0)
            return elastic__fail(ELASTIC_EINVAL, "is_host: \"%s\" is not a boolean", value);
        return 0;
    }
    if (strcmp(key, "require_token") == 0) {
        if (agent__parse_bool(value, &conf->require_token) != 0)
            return elastic__fail(ELASTIC_EINVAL, "require_token: \"%s\" is not a boolean", value);
        return 0;
    }
    if (strcmp(key, "token_file") == 0 || strcmp(key, "store_bind_addr") == 0) {
        bool file = key[0] == 't';
        char *dst = file ? conf->token_file : conf->store_bind_addr;
        size_t cap = file ? sizeof conf->token_file : sizeof conf->store_bind_addr;
        if (strlen(value) >= cap)
            return elastic__fail(ELASTIC_EINVAL, "%s: longer than %zu bytes", key, cap - 1);
        memcpy(dst, value, strlen(value) + 1);
        return 0;
    }
    ELASTIC_LOG_I("agent", "--rdzv-conf: key \"%s\" is not used by elasticrun", key);
    return 0;
}

int agent__rdzv_conf_parse(const char *text, agent_rdzv_conf *conf)
{
    *conf = (agent_rdzv_conf){ .join_timeout_ms = -1,
                               .last_call_timeout_ms = -1,
                               .close_timeout_ms = -1,
                               .outcome_timeout_ms = -1,
                               .read_timeout_ms = -1,
                               .keep_alive_interval_ms = -1,
                               .keep_alive_max_attempt = -1,
                               .is_host = -1,
                               .require_token = -1 };
    if (text == NULL || *text == '\0') return 0;
    if (strlen(text) >= CONF_MAX_TEXT)
        return elastic__fail(ELASTIC_EINVAL, "longer than %d bytes", CONF_MAX_TEXT - 1);
    char copy[CONF_MAX_TEXT];
    snprintf(copy, sizeof copy, "%s", text);
    char *rest = copy;
    for (char *item = strsep(&rest, ","); item != NULL; item = strsep(&rest, ",")) {
        char *equals = strchr(item, '=');
        if (equals == NULL)
            return elastic__fail(ELASTIC_EINVAL, "\"%s\" is not key=value", trim(item));
        *equals = '\0';
        char *key = trim(item), *value = trim(equals + 1);
        if (*key == '\0') return elastic__fail(ELASTIC_EINVAL, "an option has no key");
        if (*value == '\0') return elastic__fail(ELASTIC_EINVAL, "option \"%s\" has no value", key);
        int rc = conf_apply(conf, key, value);
        if (rc != 0) return rc;
    }
    return 0;
}
