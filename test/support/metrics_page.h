/*
 * Reading an agent's /metrics in the tests: the endpoint the agent
 * announces on its stderr, and one sample of a scraped page.
 */
#ifndef TEST_METRICS_PAGE_H
#define TEST_METRICS_PAGE_H

#include <stddef.h>

/* HOST:PORT of the agent's "metrics on http://HOST:PORT/..." line in the
 * file `err_path` (its stderr), waiting up to timeout_ms; fails the test
 * when the line does not come. */
void metrics_endpoint_from(const char *err_path, int timeout_ms, char *out, size_t cap);

/* The value of the first sample of `name` whose label `label` is `value`
 * (value NULL: the first sample of `name`); -1 when there is none. A
 * malformed line fails the test. */
double metrics_sample(const char *page, const char *name, const char *label, const char *value);

#endif /* TEST_METRICS_PAGE_H */
