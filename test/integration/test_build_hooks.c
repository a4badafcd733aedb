/*
 * The library that ships carries no test hook: the archive and the shared
 * library in ELASTIC_LIB_DIR (the build's lib/) have no symbol of one, hidden
 * or not, while the suite itself (linked with the tests' archive) has it.
 */
#include "ckpt/ckpt.h"
#include "test.h"

static const char *const hooks[] = { "ckpt__inject_fault" };

/* Counts the symbol table entries of `file` named `name` (nm lists hidden
 * symbols too: the libraries are built with -g and not stripped). */
static int symbol_count(const char *file, const char *name)
{
    char command[4200];
    snprintf(command, sizeof command, "nm -A '%s' 2>/dev/null", file);
    FILE *nm = popen(command, "r");
    if (nm == NULL) FAIL("cannot run nm");
    char line[1024];
    int count = 0, lines = 0;
    size_t name_len = strlen(name);
    while (fgets(line, sizeof line, nm) != NULL) {
        lines++;
        size_t len = strcspn(line, "\n");
        const char *tail = line + len - name_len;
        if (len >= name_len + 1 && tail[-1] == ' ' && strncmp(tail, name, name_len) == 0) count++;
    }
    int status = pclose(nm);
    if (status != 0 || lines == 0) FAIL("nm %s failed (status %d, %d lines)", file, status, lines);
    return count;
}

TEST_TIMEOUT(build_shipped_library_has_no_test_hooks, 60)
{
    if (system("command -v nm >/dev/null 2>&1") != 0) SKIP("nm (binutils) is not installed");
    const char *dir = getenv("ELASTIC_LIB_DIR");
    if (dir == NULL) FAIL("ELASTIC_LIB_DIR is not set (run the tests with make test)");
    const char *libs[] = { "libelastic.a", "libelastic.so.1" };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, libs[i]);
        /* a hidden function of the same file is there: nm sees hidden symbols */
        if (symbol_count(path, "ckpt__shard_name") == 0)
            FAIL("%s: nm does not list hidden symbols", path);
        for (size_t h = 0; h < sizeof hooks / sizeof hooks[0]; h++)
            if (symbol_count(path, hooks[h]) != 0)
                FAIL("%s ships the test hook %s", path, hooks[h]);
    }
    /* and the suite has it: the hook is built, only not shipped */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT(n > 0);
    self[n] = '\0';
    ASSERT(symbol_count(self, "ckpt__inject_fault") > 0);
    ckpt__inject_fault(CKPT_FAULT_WRITE, 0, 0); /* linked, so callable */
}
