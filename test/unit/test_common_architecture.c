/*
 * docs/ARCHITECTURE.md stays true where it can be checked against the code:
 * the "Who depends on whom" table against the `#include "module/..."` lines of
 * every C file and header of src/<module>/, and the picture of one node's threads against the
 * files that start a thread (pthread_create, uv_thread_create, uv_queue_work).
 * A failure names the file and line that disagree with the docs.
 */
#include "test.h"

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>

#define MAX_MODULES 32

typedef struct module {
    char name[32];
    bool has_row; /* the table has a row for it */
    int layer;
    char listed[MAX_MODULES][32]; /* the table's "includes" column, module names */
    int n_listed;
    /* what its files include: the first file:line for each other module */
    char uses_at[MAX_MODULES][320]; /* "src/" name "/" file ":" line: 32 + 256 + 16 */
    char header[MAX_MODULES][128];  /* what that line includes: "store/store.h" */
} module;

typedef struct architecture {
    module m[MAX_MODULES];
    int n;
} architecture;

static int module_index(const architecture *a, const char *name)
{
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->m[i].name, name) == 0) return i;
    return -1;
}

/* The modules: the directories of src/. */
static void find_modules(architecture *a)
{
    char src[4096];
    snprintf(src, sizeof src, "%s/src", test_source_dir());
    DIR *d = opendir(src);
    if (d == NULL) FAIL("cannot open %s", src);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", src, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        size_t len = strlen(e->d_name);
        ASSERT(a->n < MAX_MODULES && len < sizeof a->m[0].name);
        memcpy(a->m[a->n++].name, e->d_name, len + 1);
    }
    closedir(d);
    ASSERT(a->n > 5);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t len = strlen(s);
    while (len > 0 && isspace((unsigned char)s[len - 1])) s[--len] = '\0';
    return s;
}

/* One "includes" cell: "rdzv, store (its HMAC helpers), common" or "nothing of ours". */
static void parse_includes(module *m, char *cell, int doc_line)
{
    int depth = 0;
    char *item = cell;
    for (char *p = cell;; p++) {
        if (*p == '(') depth++;
        if (*p == ')') depth--;
        if ((*p == ',' && depth == 0) || *p == '\0') {
            bool end = *p == '\0';
            *p = '\0';
            char *word = trim(item);
            size_t len = 0;
            while (islower((unsigned char)word[len]) || word[len] == '_') len++;
            if (len > 0 && strncmp(word, "nothing", 7) != 0) {
                if (len >= sizeof m->listed[0] || m->n_listed >= MAX_MODULES)
                    FAIL("docs/ARCHITECTURE.md:%d: an unreadable includes cell", doc_line);
                snprintf(m->listed[m->n_listed++], sizeof m->listed[0], "%.*s", (int)len, word);
            }
            if (end) break;
            item = p + 1;
        }
    }
}

/* The table's rows: "| layer | module | includes | also uses through elastic.h |". */
static void read_table(architecture *a, char *doc)
{
    char *at = strstr(doc, "### Who depends on whom");
    if (at == NULL) FAIL("docs/ARCHITECTURE.md has no \"### Who depends on whom\" section");
    int doc_line = 1;
    for (char *p = doc; p < at; p++) doc_line += *p == '\n';
    bool in_table = false;
    int rows = 0;
    for (char *line = at; line != NULL && *line != '\0'; doc_line++) {
        char *next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        if (line[0] != '|') {
            if (in_table) break; /* the table ended */
            line = next;
            continue;
        }
        in_table = true;
        char *cells[5] = { 0 };
        int n = 0;
        for (char *c = strtok(line + 1, "|"); c != NULL && n < 5; c = strtok(NULL, "|"))
            cells[n++] = trim(c);
        ASSERT(n >= 3);
        if (!isdigit((unsigned char)cells[0][0])) { /* the header and its --- line */
            line = next;
            continue;
        }
        int i = module_index(a, cells[1]);
        if (i < 0)
            FAIL("docs/ARCHITECTURE.md:%d: the table has a row for \"%s\", which is no "
                 "directory of src/",
                 doc_line, cells[1]);
        if (a->m[i].has_row)
            FAIL("docs/ARCHITECTURE.md:%d: a second row for %s", doc_line, cells[1]);
        a->m[i].has_row = true;
        a->m[i].layer = atoi(cells[0]);
        parse_includes(&a->m[i], cells[2], doc_line);
        rows++;
        line = next;
    }
    ASSERT(rows > 5);
}

/* `#include "other/..."` lines of every C file and header of src/<module>/. */
static void read_includes(architecture *a)
{
    for (int i = 0; i < a->n; i++) {
        char dir_path[4096];
        snprintf(dir_path, sizeof dir_path, "%s/src/%s", test_source_dir(), a->m[i].name);
        DIR *d = opendir(dir_path);
        if (d == NULL) FAIL("cannot open %s", dir_path);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t len = strlen(e->d_name);
            if (len < 3 || e->d_name[len - 2] != '.' ||
                (e->d_name[len - 1] != 'c' && e->d_name[len - 1] != 'h'))
                continue;
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", dir_path, e->d_name);
            FILE *f = fopen(path, "r");
            if (f == NULL) FAIL("cannot open %s", path);
            char line[1024];
            for (int line_no = 1; fgets(line, sizeof line, f) != NULL; line_no++) {
                char *p = line;
                while (*p == ' ' || *p == '\t') p++;
                if (*p++ != '#') continue;
                while (*p == ' ' || *p == '\t') p++;
                if (strncmp(p, "include", 7) != 0) continue;
                p += 7;
                while (*p == ' ' || *p == '\t') p++;
                if (*p++ != '"') continue;
                size_t n = strcspn(p, "/\"");
                if (p[n] != '/') continue; /* "elastic.h", a file of its own directory */
                char other[64];
                snprintf(other, sizeof other, "%.*s", (int)(n < 63 ? n : 63), p);
                int j = module_index(a, other);
                if (j < 0 || j == i || a->m[i].uses_at[j][0] != '\0') continue;
                char name[32]; /* not a's own: snprintf's source and target must not overlap */
                memcpy(name, a->m[i].name, sizeof name);
                snprintf(a->m[i].uses_at[j], sizeof a->m[i].uses_at[j], "src/%s/%s:%d", name,
                         e->d_name, line_no);
                snprintf(a->m[i].header[j], sizeof a->m[i].header[j], "%.*s",
                         (int)strcspn(p, "\"\n"), p);
            }
            fclose(f);
        }
        closedir(d);
    }
}

static bool listed(const module *m, const char *name)
{
    for (int k = 0; k < m->n_listed; k++)
        if (strcmp(m->listed[k], name) == 0) return true;
    return false;
}

TEST(common_architecture_dependency_table_matches_includes)
{
    static architecture a;
    find_modules(&a);
    char *doc = test_source_text("docs/ARCHITECTURE.md");
    read_table(&a, doc);
    read_includes(&a);
    int wrong = 0;
    for (int i = 0; i < a.n; i++) {
        const module *m = &a.m[i];
        if (!m->has_row) {
            fprintf(stderr, "src/%s/ has no row in docs/ARCHITECTURE.md's table\n", m->name);
            wrong++;
            continue;
        }
        for (int j = 0; j < a.n; j++) {
            const module *o = &a.m[j];
            if (m->uses_at[j][0] != '\0' && !listed(m, o->name)) {
                fprintf(stderr,
                        "%s includes \"%s\", but docs/ARCHITECTURE.md's table does not "
                        "list %s among %s's includes\n",
                        m->uses_at[j], m->header[j], o->name, m->name);
                wrong++;
            }
            if (m->uses_at[j][0] != '\0' && o->has_row && o->layer >= m->layer) {
                fprintf(stderr,
                        "%s includes \"%s\" (%s: layer %d) from %s (layer %d): the table "
                        "says a module includes only lower layers\n",
                        m->uses_at[j], m->header[j], o->name, o->layer, m->name, m->layer);
                wrong++;
            }
        }
        for (int k = 0; k < m->n_listed; k++) {
            int j = module_index(&a, m->listed[k]);
            if (j < 0 || j == i) {
                fprintf(stderr,
                        "docs/ARCHITECTURE.md's table lists \"%s\" among %s's includes: "
                        "no other module is named so\n",
                        m->listed[k], m->name);
                wrong++;
            } else if (m->uses_at[j][0] == '\0') {
                fprintf(stderr,
                        "docs/ARCHITECTURE.md's table lists %s among %s's includes, but no "
                        "file of src/%s/ includes \"%s/...\"\n",
                        m->listed[k], m->name, m->name, m->listed[k]);
                wrong++;
            }
        }
    }
    free(doc);
    if (wrong > 0) FAIL("%d disagreement(s) between the dependency table and the includes", wrong);
}

/* The files of src/ that start a thread ("src/agent/calls.c"). */
static int thread_starters(char files[][64], int max)
{
    static const char *const starts[] = { "pthread_create(", "uv_thread_create(", "uv_queue_work(",
                                          NULL };
    static architecture a;
    memset(&a, 0, sizeof a);
    find_modules(&a);
    int n = 0;
    for (int i = 0; i < a.n; i++) {
        char dir_path[4096];
        snprintf(dir_path, sizeof dir_path, "%s/src/%s", test_source_dir(), a.m[i].name);
        DIR *d = opendir(dir_path);
        ASSERT(d != NULL);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t len = strlen(e->d_name);
            if (len < 3 || strcmp(e->d_name + len - 2, ".c") != 0) continue;
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", dir_path, e->d_name);
            FILE *f = fopen(path, "r");
            ASSERT(f != NULL);
            char line[1024];
            bool starts_one = false;
            while (!starts_one && fgets(line, sizeof line, f) != NULL) {
                const char *code = line;
                while (*code == ' ' || *code == '\t') code++;
                if (code[0] == '*' || (code[0] == '/' && (code[1] == '*' || code[1] == '/')))
                    continue; /* a comment that names the call */
                for (int k = 0; starts[k] != NULL; k++)
                    if (strstr(code, starts[k]) != NULL) starts_one = true;
            }
            fclose(f);
            if (!starts_one) continue;
            ASSERT(n < max);
            if (snprintf(files[n++], 64, "src/%s/%s", a.m[i].name, e->d_name) >= 64)
                FAIL("src/%s/%s: a path longer than this test keeps", a.m[i].name, e->d_name);
        }
        closedir(d);
    }
    return n;
}

TEST(common_architecture_thread_picture_names_every_file_that_starts_a_thread)
{
    char *doc = test_source_text("docs/ARCHITECTURE.md");
    char *at = strstr(doc, "one node is these processes and threads");
    if (at == NULL) FAIL("docs/ARCHITECTURE.md has no picture of one node's threads");
    char *begin = strstr(at, "```");
    ASSERT(begin != NULL);
    char *end = strstr(begin + 3, "```");
    ASSERT(end != NULL);
    *end = '\0';
    static char files[256][64];
    int n = thread_starters(files, 256), missing = 0;
    ASSERT(n > 5);
    for (int i = 0; i < n; i++) {
        if (strstr(begin, files[i]) == NULL) {
            fprintf(stderr,
                    "%s starts a thread, but docs/ARCHITECTURE.md's picture of a node's "
                    "threads does not name it (as %s)\n",
                    files[i], files[i]);
            missing++;
        }
    }
    free(doc);
    if (missing > 0) FAIL("%d file(s) that start a thread are missing from the picture", missing);
}
