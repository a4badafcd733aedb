/*
 * Reading the Prometheus text format back, one line at a time (promparse.c):
 * what `elasticctl status` and the tests need from a scraped /metrics page.
 * Bounded and fuzzed; the agent's writer side lives in src/probe/metrics.c.
 */
#ifndef ELASTIC_COMMON_PROM_H
#define ELASTIC_COMMON_PROM_H

#include <stdbool.h>
#include <stddef.h>

typedef struct elastic__prom_sample {
    char name[128];
    char labels[512]; /* the raw text between the braces ("" when none) */
    double value;
} elastic__prom_sample;

/* Parses one line of the text format. 1: a sample; 0: a comment or blank; < 0: malformed. */
int elastic__prom_parse_line(const char *line, elastic__prom_sample *sample);
/* The value of a label in a sample's label text, copied to out; false if absent. */
bool elastic__prom_label(const char *labels, const char *name, char *out, size_t size);

#endif /* ELASTIC_COMMON_PROM_H */
