/*
 * The `elasticctl status` table from a scraped /metrics page and the /healthz
 * answer (status.c). A header of its own because it speaks the library's
 * internal text buffer, which tools/elasticctl.c (public API only) never
 * sees; the test suite links status.c to check the table.
 */
#ifndef ELASTICCTL_STATUS_H
#define ELASTICCTL_STATUS_H

#include "common/text.h"

/* Appends the job at a glance to out; ELASTIC_EPROTO for a malformed page. */
int ctl_status_format(const char *metrics, int health_status, const char *health_body,
                      elastic__text *out);

#endif /* ELASTICCTL_STATUS_H */
