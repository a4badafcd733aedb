/*
 * The event journal's one list of event types (journal.c) against what
 * docs/OPERATIONS.md tells operators, both ways, and no event named
 * anywhere else in the agent.
 */
#include "agent/group.h"
#include "agent/journal.h"
#include "agent/journal_events.h"
#include "common/goodput.h"
#include "common/json.h"
#include "test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *agent_file_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    ASSERT(f != NULL);
    char *text = calloc(1, 1 << 20);
    ASSERT(text != NULL);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = '\0';
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
    char *doc = test_source_text("docs/OPERATIONS.md");
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
    char *doc = test_source_text("docs/OPERATIONS.md");
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

/* Every event is written by its typed constructor (journal_events.c): no
 * other file of the agent calls the line writer, so none knows an event's
 * fields or names one by a string of its own. */
TEST(agent_journal_names_events_in_one_place)
{
    char dir_path[4096];
    snprintf(dir_path, sizeof dir_path, "%s/src/agent", test_source_dir());
    DIR *dir = opendir(dir_path);
    ASSERT(dir != NULL);
    int files = 0;
    static const char *const writer[] = { "agent__event_begin(", "agent__event_int(",
                                          "agent__event_str(", "agent__event_emit_record(" };
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        size_t len = strlen(entry->d_name);
        if (len < 3 || strcmp(entry->d_name + len - 2, ".c") != 0) continue;
        if (strcmp(entry->d_name, "journal.c") == 0 || strcmp(entry->d_name, "journal_events.c") == 0)
            continue;
        char relative[512];
        snprintf(relative, sizeof relative, "src/agent/%s", entry->d_name);
        char *text = test_source_text(relative);
        files++;
        for (size_t w = 0; w < sizeof writer / sizeof *writer; w++) {
            const char *at = strstr(text, writer[w]);
            if (at != NULL) fprintf(stderr, "%s writes an event field by field: %.80s\n", relative, at);
            ASSERT(at == NULL);
        }
        free(text);
    }
    closedir(dir);
    ASSERT(files > 10);
}

/* The goodput accounting keeps, for each event it reads, the record the
 * constructor made; elasticctl reads the same lines back from the file.
 * Both must agree, record for record. */
TEST(agent_journal_goodput_records_are_the_lines_read_back)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/events.jsonl", test_tmpdir());
    agent_events *events = NULL;
    ASSERT_OK(agent__events_open(path, "run", "node-1", &events));
    agent__ev_agent_started(events, &(agent_ev_agent_started){ .nproc_per_node = 2, .store = "s" });
    agent__ev_generation_formed(events, &(agent_ev_generation_formed){ .generation = 1 });
    agent__ev_worker_started(events,
                             &(agent_ev_worker_started){ .worker = { .generation = 1, .pid = 7 } });
    agent__ev_steps_started(events, &(agent_ev_steps_started){
                                        .generation = 1, .step = 0, .first_step_ms = 5, .restore_ms = 2 });
    agent__ev_checkpoint(events, &(agent_ev_checkpoint){ .generation = 1, .step = 40, .saved_ms = 123 });
    agent__ev_probe_failed(events, &(agent_ev_probe){ .generation = 1, .probe = "hang", .reason = "r" });
    agent__ev_probe_failed(events, &(agent_ev_probe){ .generation = 1, .probe = "user", .reason = "r" });
    agent__ev_failure(events, &(agent_ev_failure){ .worker = { .generation = 1 }, .reason = "x" });
    agent__ev_generation_ended(events, &(agent_ev_generation_ended){
                                           .generation = 1, .cause = ELASTIC_RDZV_NODE_LOST,
                                           .by_node = "n", .reason = "lost" });
    agent__ev_fenced(events, &(agent_ev_fenced){ .generation = 1, .store = "s", .reason = "r" });
    agent__ev_straggler_evicted(events, &(agent_ev_stepped_aside){ .generation = 1, .straggler = "n",
                                                                  .replacement = "" });
    agent__ev_steps_ended(events, &(agent_ev_steps_ended){ .generation = 1, .last_step = 99,
                                                           .last_step_ms = 9, .step_us = 3,
                                                           .save_stall_ms = 1 });
    agent__ev_generation_stopped(events, &(agent_ev_generation_stopped){ .generation = 1 });
    agent__ev_job_end(events, &(agent_ev_job_end){ .status = "succeeded" });
    size_t kept = 0;
    const goodput_record *records = agent__events_records(events, &kept);
    ASSERT_EQ(kept, 13); /* every event above but worker_started */
    char *text = agent_file_text(path);
    size_t matched = 0;
    for (char *line = text, *next; *line != '\0'; line = next) {
        next = strchr(line, '\n');
        ASSERT(next != NULL);
        *next++ = '\0';
        goodput_record r;
        if (!goodput__record_of_line(line, strlen(line), &r)) continue;
        ASSERT(matched < kept);
        const goodput_record *k = &records[matched++];
        if (r.ts_ms != k->ts_ms || r.kind != k->kind || r.cause != k->cause ||
            r.generation != k->generation || r.a != k->a || r.b != k->b || r.c != k->c ||
            r.d != k->d)
            FAIL("record %zu differs from its line: %s", matched - 1, line);
    }
    ASSERT_EQ(matched, kept);
    free(text);
    agent__events_close(events);
}

/* The line writer is common's JSON writer: escaping as before, a long string
 * field cut at a whole character to the format's 2047 bytes, and a line over
 * its 4 KiB bound left without the fields that do not fit, still one valid
 * JSON object a reader takes back. */
TEST(agent_journal_lines_stay_valid_json_past_their_bounds)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/events.jsonl", test_tmpdir());
    agent_events *events = NULL;
    ASSERT_OK(agent__events_open(path, "run\"1", "node-1", &events));
    static char accents[3001], wide[2001];
    for (int i = 0; i < 1500; i++) memcpy(accents + 2 * i, "\xc3\xa9", 2);
    memset(wide, 'w', 2000);
    agent__ev_fenced(events,
                     &(agent_ev_fenced){ .generation = 1, .store = "a\"b\nc", .reason = accents });
    agent__ev_fenced(events, &(agent_ev_fenced){ .generation = 2, .store = wide, .reason = wide });
    char *text = agent_file_text(path);
    char *second = strchr(text, '\n');
    ASSERT(second != NULL);
    *second++ = '\0';
    ASSERT(strstr(text, "\"run_id\":\"run\\\"1\"") != NULL);
    ASSERT(strstr(text, "\"store\":\"a\\\"b\\nc\"") != NULL);
    const char *lines[] = { text, second };
    for (int i = 0; i < 2; i++) {
        char *end = strchr(lines[i], '\n');
        if (end != NULL) *end = '\0';
        ASSERT(strlen(lines[i]) < 4096);
        json_object *line = NULL;
        ASSERT_OK(json__parse(lines[i], strlen(lines[i]), &line));
        const char *reason = json__get_string(line, "reason");
        if (i == 0) ASSERT(reason != NULL && strlen(reason) == 2046); /* 1023 whole characters */
        if (i == 1) ASSERT(reason == NULL && json__get_string(line, "store") != NULL);
        json_object_put(line);
    }
    free(text);
    agent__events_close(events);
}
