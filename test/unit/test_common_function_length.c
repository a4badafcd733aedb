/*
 * No function over 80 lines in the library, the tools or the benchmarks: a
 * long one is split at its numbered steps into named helpers. Reads the C
 * sources the way the code is laid out (clang-format: a definition's "{" and
 * "}" alone at column 0), counting a function from the first line of its
 * signature to its closing brace, as ctags does.
 */
#include "test.h"

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>

#define MAX_FUNCTION_LINES 80

static const char *const roots[] = { "src", "tools", "bench" };

typedef struct scan {
    int files, functions, too_long;
} scan;

/* A line that may be part of a definition's signature (not a comment, a
 * directive, a blank line or the end of a previous statement). */
static bool signature_line(const char *line, size_t len)
{
    if (len == 0 || line[0] == '#' || line[0] == '/' || line[0] == '}') return false;
    if (len >= 2 && line[0] == ' ' && line[1] == '*') return false;
    char last = line[len - 1];
    if (last == ';' || last == '}') return false;
    return !(len >= 2 && line[len - 2] == '*' && last == '/');
}

/* The function's name: the identifier before the first '(' of its signature. */
static void function_name(const char *signature, char *name, size_t cap)
{
    const char *paren = strchr(signature, '(');
    const char *end = paren != NULL ? paren : signature;
    const char *start = end;
    while (start > signature && (isalnum((unsigned char)start[-1]) || start[-1] == '_')) start--;
    snprintf(name, cap, "%.*s", (int)(end - start), start);
}

static void check_file(const char *relative, scan *s)
{
    char *text = test_source_text(relative);
    s->files++;
    /* Line starts, for walking back from a "{" to its signature. */
    size_t n_lines = 1;
    for (const char *p = text; *p != '\0'; p++) n_lines += *p == '\n';
    const char **lines = calloc(n_lines + 1, sizeof *lines);
    ASSERT(lines != NULL);
    size_t n = 0;
    for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        lines[n++] = p;
    lines[n] = text + strlen(text);
    for (size_t i = 1; i < n; i++) {
        if (strncmp(lines[i], "{\n", 2) != 0) continue;
        size_t first = i;
        while (first > 0 &&
               signature_line(lines[first - 1], (size_t)(lines[first] - lines[first - 1] - 1)))
            first--;
        if (first == i || memchr(lines[first], '(', (size_t)(lines[i] - lines[first])) == NULL)
            continue; /* an initializer or a type, not a function */
        size_t close = i + 1;
        while (close < n && lines[close][0] != '}') close++;
        char signature[512], name[128];
        snprintf(signature, sizeof signature, "%.*s", (int)(lines[i] - lines[first]), lines[first]);
        function_name(signature, name, sizeof name);
        size_t length = close - first + 1;
        s->functions++;
        if (length > MAX_FUNCTION_LINES) {
            fprintf(stderr, "%s:%zu: %s is %zu lines (at most %d)\n", relative, first + 1, name,
                    length, MAX_FUNCTION_LINES);
            s->too_long++;
        }
        i = close;
    }
    free(lines);
    free(text);
}

static void walk(const char *relative, scan *s)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_source_dir(), relative);
    DIR *dir = opendir(path);
    ASSERT(dir != NULL);
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        if (entry->d_name[0] == '.') continue;
        char child[1024];
        snprintf(child, sizeof child, "%s/%s", relative, entry->d_name);
        char full[4096 + 1024];
        snprintf(full, sizeof full, "%s/%s", test_source_dir(), child);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        size_t len = strlen(entry->d_name);
        if (S_ISDIR(st.st_mode))
            walk(child, s);
        else if (len > 2 && (strcmp(entry->d_name + len - 2, ".c") == 0 ||
                             strcmp(entry->d_name + len - 2, ".h") == 0))
            check_file(child, s);
    }
    closedir(dir);
}

TEST(common_no_function_over_80_lines)
{
    scan s = { 0 };
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) walk(roots[i], &s);
    fprintf(stderr, "# %d functions in %d files\n", s.functions, s.files);
    ASSERT(s.files > 100 && s.functions > 1000); /* the walk found the sources */
    ASSERT_EQ(s.too_long, 0);
}
