/*
 * The agent's group keeps state, generation, workers and queues: at most 40
 * fields (issue 34, item 2); what a helper needs lives in that helper's own
 * struct. Reads src/agent/group.h as written (clang-format layout): the body of
 * `typedef struct agent_group {` up to its closing `} agent_group;`, comments
 * removed, counting one field per declarator: `uint64_t a, b;` is two, an
 * array or a named sub-struct is one. An anonymous struct or union inside it
 * fails the test: fields are grouped into named structs a file owns, not
 * hidden in a bag.
 *
 * The call header (calls.h) holds what every call kind shares, nothing more.
 * And the machine's memory (agent_machine, the fields its decisions read) is
 * written by machine.c alone: no other agent file assigns a field of it.
 */
#include "test.h"

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>

#define MAX_GROUP_FIELDS 40

/* Blanks out comments in place (their newlines kept). */
static void strip_comments(char *text)
{
    for (char *p = text; *p != '\0'; p++) {
        if (p[0] == '/' && p[1] == '*') {
            char *end = strstr(p + 2, "*/");
            char *stop = end != NULL ? end + 2 : p + strlen(p);
            for (; p < stop; p++)
                if (*p != '\n') *p = ' ';
            p--;
        } else if (p[0] == '/' && p[1] == '/') {
            for (; *p != '\0' && *p != '\n'; p++) *p = ' ';
            if (*p == '\0') break;
        }
    }
}

typedef struct field_count {
    int fields;
    int nested; /* struct/union bodies inside the struct */
} field_count;

/* Counts the declarators between `body` (just after the struct's "{") and its
 * closing brace. */
static field_count count_fields(const char *body)
{
    field_count c = { 0, 0 };
    int braces = 0, parens = 0;
    bool pending = false; /* a declarator has begun since the last ';' or ',' */
    for (const char *p = body; *p != '\0'; p++) {
        if (*p == '{') {
            braces++;
            c.nested++;
        } else if (*p == '}') {
            if (braces == 0) break;
            braces--;
        } else if (*p == '(' || *p == '[') {
            parens++;
        } else if (*p == ')' || *p == ']') {
            parens--;
        } else if (braces == 0 && parens == 0 && (*p == ';' || *p == ',')) {
            if (pending) c.fields++;
            pending = false;
        } else if (!isspace((unsigned char)*p)) {
            pending = true;
        }
    }
    return c;
}

TEST(agent_group_at_most_40_fields)
{
    char *text = test_source_text("src/agent/group.h");
    ASSERT(text != NULL);
    strip_comments(text);
    const char *start = strstr(text, "typedef struct agent_group {");
    ASSERT(start != NULL);
    ASSERT(strstr(start, "} agent_group;") != NULL);
    field_count c = count_fields(strchr(start, '{') + 1);
    fprintf(stderr, "# struct agent_group: %d fields (at most %d)\n", c.fields, MAX_GROUP_FIELDS);
    ASSERT(c.fields > 10); /* the parse found the struct's fields */
    ASSERT(c.fields <= MAX_GROUP_FIELDS);
    ASSERT_EQ(c.nested, 0);
    free(text);
}

/* Calls are typed (issue 34): each kind is its own struct; the header they
 * share is link, kind, type (run and done) and status (rc, error), nothing
 * tagged for one kind. */
TEST(agent_call_header_is_link_kind_type_and_status)
{
    char *text = test_source_text("src/agent/calls.h");
    ASSERT(text != NULL);
    strip_comments(text);
    const char *start = strstr(text, "struct agent_call {");
    ASSERT(start != NULL);
    field_count c = count_fields(strchr(start, '{') + 1);
    ASSERT_EQ(c.fields, 5);
    ASSERT_EQ(c.nested, 0);
    free(text);
}

/* A counting check of the parser itself, on a struct of known size. */
TEST(agent_group_field_count_reads_declarators)
{
    char text[] = "typedef struct x {\n"
                  "    int a, b; /* two, ; and , inside a comment */\n"
                  "    char name[300]; // one\n"
                  "    void (*fn)(int, int);\n"
                  "    struct other *o;\n"
                  "    agent_machine m;\n"
                  "} x;\n";
    strip_comments(text);
    field_count c = count_fields(strchr(text, '{') + 1);
    ASSERT_EQ(c.fields, 6);
    ASSERT_EQ(c.nested, 0);
    char bag[] = "typedef struct y { int a; struct { int b, c; } hidden; } y;";
    c = count_fields(strchr(bag, '{') + 1);
    ASSERT_EQ(c.nested, 1);
}

/* Whether `p` (just after "m.") names a field that is then assigned:
 * `m.x = `, `m.x += `, `m.x++`, `m.x--` (not `==`). */
static bool assigns_field(const char *p)
{
    while (isalnum((unsigned char)*p) || *p == '_') p++;
    while (*p == ' ') p++;
    if ((p[0] == '+' && p[1] == '+') || (p[0] == '-' && p[1] == '-')) return true;
    if (p[0] != '\0' && strchr("+-*/|&^", p[0]) != NULL && p[1] == '=') return true;
    return p[0] == '=' && p[1] != '=';
}

/* Whether the line holding `at` calls agent__machine_ before it. */
static bool calls_machine(const char *text, const char *at)
{
    const char *line = at;
    while (line > text && line[-1] != '\n') line--;
    const char *call = strstr(line, "agent__machine_");
    return call != NULL && call < at;
}

TEST(agent_machine_memory_written_by_machine_only)
{
    char dir_path[4096];
    snprintf(dir_path, sizeof dir_path, "%s/src/agent", test_source_dir());
    DIR *dir = opendir(dir_path);
    ASSERT(dir != NULL);
    int files = 0, writes = 0;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        size_t len = strlen(entry->d_name);
        if (len < 3 || strcmp(entry->d_name + len - 2, ".c") != 0) continue;
        if (strcmp(entry->d_name, "machine.c") == 0) continue;
        char relative[512];
        snprintf(relative, sizeof relative, "src/agent/%s", entry->d_name);
        char *text = test_source_text(relative);
        ASSERT(text != NULL);
        strip_comments(text);
        files++;
        /* The group's machine is `group->m` (or `.m` of a group by value):
         * a field of it assigned, or the machine itself handed to anything
         * but agent__machine_*(). */
        for (const char *p = text + 1; *p != '\0'; p++) {
            if (p[0] != 'm' || (p[-1] != '>' && p[-1] != '.')) continue;
            bool written = p[1] == '.' && assigns_field(p + 2);
            bool handed = !written && !isalnum((unsigned char)p[1]) && p[1] != '_' &&
                          p[1] != '.' && !calls_machine(text, p);
            if (!written && !handed) continue;
            int line = 1;
            for (const char *q = text; q < p; q++) line += *q == '\n';
            fprintf(stderr, "%s:%d: %s the machine's memory\n", relative, line,
                    written ? "writes" : "hands out");
            writes++;
        }
        free(text);
    }
    closedir(dir);
    ASSERT(files > 20); /* the walk found the agent's sources */
    ASSERT_EQ(writes, 0);
}
