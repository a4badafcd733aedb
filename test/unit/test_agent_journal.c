/*
 * The event journal's one list of event types (journal.c) against what
 * docs/OPERATIONS.md tells operators, both ways, and no event named
 * anywhere else in the agent.
 */
#include "agent/group.h"
#include "agent/journal.h"
#include "test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole source or doc file, NUL-terminated (fails the test when unreadable). */
static char *read_source(const char *relative)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_source_dir(), relative);
    FILE *f = fopen(path, "rb");
    ASSERT(f != NULL);
    ASSERT_EQ(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ASSERT(size >= 0 && size < 8 * 1024 * 1024);
    rewind(f);
    char *text = malloc((size_t)size + 1);
    ASSERT(text != NULL);
    ASSERT_EQ(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    fclose(f);
    return text;
}

/* The "| event | fields |" table of the event log section: its rows' names. */
static int doc_event_names(const char *doc, char names[][64], int max)
{
    const char *table = strstr(doc, "| event | fields |");
    ASSERT(table != NULL);
    const char *line = strchr(table, '\n');
    ASSERT(line != NULL);
    line = strchr(line + 1, '\n'); /* past |---|---| */
    ASSERT(line != NULL);
    int n = 0;
    for (line++; strncmp(line, "| `", 3) == 0; line = strchr(line, '\n') + 1) {
        const char *start = line + 3;
        const char *end = strchr(start, '`');
        ASSERT(end != NULL && end - start < 64 && n < max);
        memcpy(names[n], start, (size_t)(end - start));
        names[n][end - start] = '\0';
        n++;
        if (strchr(line, '\n') == NULL) break;
    }
    return n;
}

TEST(agent_journal_docs_list_every_event_type)
{
    char *doc = read_source("docs/OPERATIONS.md");
    char names[64][64];
    int n = doc_event_names(doc, names, 64);
    ASSERT_EQ(n, (int)AGENT_EVENT_TYPE_COUNT); /* nothing documented that is never written */
    for (int type = 0; type < AGENT_EVENT_TYPE_COUNT; type++) {
        const char *name = agent__event_name((agent_event_type)type);
        ASSERT(name != NULL && name[0] != '\0');
        bool found = false;
        for (int i = 0; i < n && !found; i++) found = strcmp(names[i], name) == 0;
        if (!found) fprintf(stderr, "event %s is missing from docs/OPERATIONS.md\n", name);
        ASSERT(found);
    }
    ASSERT(agent__event_name(AGENT_EVENT_TYPE_COUNT) == NULL);
    free(doc);
}

TEST(agent_journal_docs_list_every_job_end_status)
{
    char *doc = read_source("docs/OPERATIONS.md");
    const char *row = strstr(doc, "| `job_end` |");
    ASSERT(row != NULL);
    const char *eol = strchr(row, '\n');
    ASSERT(eol != NULL);
    for (int s = AGENT_END_SUCCEEDED; s <= AGENT_END_LEFT_OUT; s++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "`%s`", agent__end_status_name((agent_end_status)s));
        const char *at = strstr(row, quoted);
        if (at == NULL || at > eol) fprintf(stderr, "job_end status %s undocumented\n", quoted);
        ASSERT(at != NULL && at < eol);
    }
    free(doc);
}

/* Every event type is begun through the journal's enum: no file of the
 * agent names one by a string of its own. */
TEST(agent_journal_names_events_in_one_place)
{
    char dir_path[4096];
    snprintf(dir_path, sizeof dir_path, "%s/src/agent", test_source_dir());
    DIR *dir = opendir(dir_path);
    ASSERT(dir != NULL);
    int files = 0;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        size_t len = strlen(entry->d_name);
        if (len < 3 || strcmp(entry->d_name + len - 2, ".c") != 0) continue;
        char relative[512];
        snprintf(relative, sizeof relative, "src/agent/%s", entry->d_name);
        char *text = read_source(relative);
        files++;
        for (const char *at = text; (at = strstr(at, "agent__event_begin(")) != NULL; at++) {
            const char *close = strchr(at, ')');
            const char *quote = strchr(at, '"');
            if (quote != NULL && close != NULL && quote < close)
                fprintf(stderr, "%s names an event by string: %.80s\n", relative, at);
            ASSERT(quote == NULL || close == NULL || quote > close);
        }
        free(text);
    }
    closedir(dir);
    ASSERT(files > 10);
}
