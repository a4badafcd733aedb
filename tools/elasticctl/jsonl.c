/*
 * The event-log line reader (jsonl.h): one buffer of TIMELINE_MAX_LINE, a
 * longer line refused with its number.
 */
#include "elasticctl/ctl.h"
#include "elasticctl/jsonl.h"
#include "elasticctl/timeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ctl__jsonl_each(const char *path, int (*take)(void *user, const char *line, size_t len),
                    void *user)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return elastic__fail(errno == ENOENT ? ELASTIC_ENOTFOUND : ELASTIC_EIO, "%s: %s", path,
                             strerror(errno));
    char *line = malloc(TIMELINE_MAX_LINE + 1);
    int rc = line == NULL ? elastic__fail(ELASTIC_ENOMEM, "out of memory") : 0;
    for (long number = 1; rc == 0 && fgets(line, TIMELINE_MAX_LINE + 1, f) != NULL; number++) {
        size_t len = strlen(line);
        if (len == TIMELINE_MAX_LINE && line[len - 1] != '\n') {
            rc = elastic__fail(ELASTIC_ELIMIT, "%s:%ld: a line longer than %d bytes", path, number,
                               TIMELINE_MAX_LINE);
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0) continue;
        rc = take(user, line, len);
        if (rc != 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", ctl_last_error());
            rc = elastic__fail(rc, "%s:%ld: %s", path, number, why);
        }
    }
    if (rc == 0 && ferror(f)) rc = elastic__fail(ELASTIC_EIO, "%s: read error", path);
    free(line);
    fclose(f);
    return rc;
}
