/*
 * Reading the Prometheus text format back, one line at a time: what
 * `elasticctl status` and the tests need from a scraped /metrics page.
 * Bounded: names and label text longer than the sample's fields are rejected.
 */
#include "common/common.h"
#include "common/prom.h"

#include <math.h>
#include <stdlib.h>

static bool name_char(char c, bool first)
{
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    return alpha || (!first && c >= '0' && c <= '9');
}

/* The label block ends at the first '}' outside a quoted value. */
static const char *labels_end(const char *p)
{
    bool quoted = false;
    for (; *p != '\0'; p++) {
        if (quoted && *p == '\\' && p[1] != '\0')
            p++;
        else if (*p == '"')
            quoted = !quoted;
        else if (!quoted && *p == '}')
            return p;
    }
    return NULL;
}

int elastic__prom_parse_line(const char *line, elastic__prom_sample *sample)
{
    memset(sample, 0, sizeof *sample);
    while (*line == ' ' || *line == '\t') line++;
    if (*line == '\0' || *line == '\n' || *line == '#') return 0;
    size_t n = 0;
    while (name_char(line[n], n == 0)) n++;
    if (n == 0 || n >= sizeof sample->name) return ELASTIC_EPROTO;
    memcpy(sample->name, line, n);
    const char *p = line + n;
    if (*p == '{') {
        const char *end = labels_end(p + 1);
        if (end == NULL || (size_t)(end - p - 1) >= sizeof sample->labels) return ELASTIC_EPROTO;
        memcpy(sample->labels, p + 1, (size_t)(end - p - 1));
        p = end + 1;
    }
    if (*p != ' ' && *p != '\t') return ELASTIC_EPROTO;
    char *value_end = NULL;
    sample->value = strtod(p, &value_end);
    if (value_end == p) return ELASTIC_EPROTO;
    while (*value_end == ' ' || *value_end == '\t') value_end++;
    /* an optional integer timestamp may follow */
    while (*value_end >= '0' && *value_end <= '9') value_end++;
    return *value_end == '\0' || *value_end == '\n' || *value_end == '\r' ? 1 : ELASTIC_EPROTO;
}

bool elastic__prom_label(const char *labels, const char *name, char *out, size_t size)
{
    size_t name_len = strlen(name);
    const char *p = labels;
    while (*p != '\0') {
        while (*p == ',' || *p == ' ') p++;
        const char *equals = strchr(p, '=');
        if (equals == NULL || equals[1] != '"') return false;
        bool match = (size_t)(equals - p) == name_len && strncmp(p, name, name_len) == 0;
        size_t o = 0;
        for (p = equals + 2; *p != '\0' && *p != '"'; p++) {
            char c = *p;
            if (c == '\\' && p[1] != '\0') c = *++p == 'n' ? '\n' : *p;
            if (match && o + 1 < size) out[o++] = c;
        }
        if (*p != '"') return false;
        p++;
        if (match) {
            if (size > 0) out[o] = '\0';
            return true;
        }
    }
    return false;
}
