/*
 * The build knobs: `make ELASTIC_AGENT=0 ELASTIC_ETCD=0 lib` builds, into its
 * own directory, a libelastic without the agent, the etcd client and what only
 * they need, and a trainer that only saves checkpoints (test/knobs/ckpt_only.c)
 * links it, shared and static, with the Makefile's smaller library list, and
 * runs. Neither the library nor the program needs libuv, libcurl or json-c,
 * nor any library deps/debian.txt gives only to the parts left out; the whole
 * library, built by make test, still does, so the check can fail.
 */
#include "test.h"

#include <stdbool.h>
#include <sys/wait.h>

/* Runs a shell command, its stdout and stderr into out (NUL-terminated, cut
 * at cap); returns its exit status (-1 when it did not exit). */
static int run(const char *command, char *out, size_t cap)
{
    FILE *p = popen(command, "r");
    if (p == NULL) FAIL("cannot run %s", command);
    size_t len = 0, got;
    while (len + 1 < cap && (got = fread(out + len, 1, cap - 1 - len, p)) > 0) len += got;
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {
    }
    out[len] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The value of "key=value" among the lines of text ("" when absent). */
static void field(const char *text, const char *key, char *value, size_t cap)
{
    size_t key_len = strlen(key);
    value[0] = '\0';
    for (const char *line = text; *line != '\0'; line += strcspn(line, "\n"), line += *line == '\n')
        if (strncmp(line, key, key_len) == 0 && line[key_len] == '=') {
            snprintf(value, cap, "%.*s", (int)strcspn(line + key_len + 1, "\n"),
                     line + key_len + 1);
            return;
        }
}

/* Whether `file`'s dynamic section (readelf -d) or, for a program, what the
 * loader resolves (ldd) names lib<name>.so. */
static bool needs(const char *file, const char *name, bool transitive)
{
    char command[8192], out[1 << 16];
    snprintf(command, sizeof command, "%s '%s' 2>&1", transitive ? "ldd" : "readelf -d", file);
    int rc = run(command, out, sizeof out);
    if (rc != 0) FAIL("%s failed (%d): %s", command, rc, out);
    if (!transitive && strstr(out, "(NEEDED)") == NULL) FAIL("%s lists no NEEDED entry", command);
    char soname[128];
    snprintf(soname, sizeof soname, "lib%s.so", name);
    return strstr(out, soname) != NULL;
}

/* "-lzstd -luv" -> each name after -l, through fn. */
static void each_lib(const char *flags, void (*fn)(const char *name, void *user), void *user)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", flags);
    for (char *save = NULL, *word = strtok_r(copy, " ", &save); word != NULL;
         word = strtok_r(NULL, " ", &save))
        if (strncmp(word, "-l", 2) == 0) fn(word + 2, user);
}

typedef struct built {
    char lib_so[4600];
    char programs[2][4600];
} built;

static void not_needed(const char *name, void *user)
{
    const built *b = user;
    if (needs(b->lib_so, name, false)) FAIL("%s still needs lib%s", b->lib_so, name);
    for (int i = 0; i < 2; i++)
        if (needs(b->programs[i], name, true)) FAIL("%s still loads lib%s", b->programs[i], name);
}

TEST_TIMEOUT(build_without_agent_and_etcd_links_a_trainer_without_libuv_libcurl_json_c, 600)
{
    if (system("command -v readelf >/dev/null 2>&1 && command -v ldd >/dev/null 2>&1") != 0)
        SKIP("readelf or ldd is not installed (binutils, libc-bin)");
    const char *src = test_source_dir();
    const char *lib_dir = getenv("ELASTIC_LIB_DIR");
    if (src == NULL || lib_dir == NULL)
        FAIL("ELASTIC_SOURCE_DIR/ELASTIC_LIB_DIR not set (make test)");
    const char *tmp = test_tmpdir();
    /* the suite's own make (its variables, jobserver, sanitizer variant) stays out:
     * the library is the release one, as a trainer would link it */
    char knobs[8192];
    snprintf(knobs, sizeof knobs,
             "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C '%s' VARIANT=release "
             "ELASTIC_AGENT=0 ELASTIC_ETCD=0 "
             "OUT='%s/build' LIB_OUT='%s/lib'",
             src, tmp, tmp);
    static char out[1 << 18];
    char command[16384];
    snprintf(command, sizeof command, "%s print-build 2>&1", knobs);
    ASSERT_EQ(run(command, out, sizeof out), 0);
    char left_out[256], libs[1024], dropped[1024];
    field(out, "left_out", left_out, sizeof left_out);
    field(out, "libs", libs, sizeof libs);
    field(out, "dropped_libs", dropped, sizeof dropped);
    if (strcmp(left_out, "agent etcd") != 0) FAIL("the knobs left out \"%s\"", left_out);
    static const char *const gone[] = { "-luv", "-ljson-c" };
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        if (strstr(libs, gone[i]) != NULL || strstr(dropped, gone[i]) == NULL)
            FAIL("%s is still on the link line (%s; dropped: %s)", gone[i], libs, dropped);
    /* libcurl is never linked: the etcd client loads it on first use (src/etcd/curl_loader.c) */
    if (strstr(libs, "-lcurl") != NULL) FAIL("-lcurl is on the link line (%s)", libs);

    /* -O0: this checks what is compiled in and linked, not the code */
    snprintf(command, sizeof command, "%s OPT=-O0 -j2 lib 2>&1", knobs);
    if (run(command, out, sizeof out) != 0) FAIL("%s failed:\n%s", command, out);

    built b;
    snprintf(b.lib_so, sizeof b.lib_so, "%s/lib/libelastic.so.1", tmp);
    snprintf(b.programs[0], sizeof b.programs[0], "%s/ckpt_only_shared", tmp);
    snprintf(b.programs[1], sizeof b.programs[1], "%s/ckpt_only_static", tmp);
    snprintf(command, sizeof command,
             "cc -std=c99 -Wall -Wextra -Werror -I'%s/include' -o '%s' '%s/test/knobs/ckpt_only.c' "
             "-L'%s/lib' -Wl,-rpath,'%s/lib' -lelastic 2>&1",
             src, b.programs[0], src, tmp, tmp);
    if (run(command, out, sizeof out) != 0) FAIL("linking against the shared library:\n%s", out);
    snprintf(command, sizeof command,
             "cc -std=c99 -Wall -Wextra -Werror -I'%s/include' -o '%s' '%s/test/knobs/ckpt_only.c' "
             "'%s/lib/libelastic.a' %s 2>&1",
             src, b.programs[1], src, tmp, libs);
    if (run(command, out, sizeof out) != 0)
        FAIL("linking the static library with only \"%s\":\n%s", libs, out);

    for (int i = 0; i < 2; i++) {
        snprintf(command, sizeof command, "mkdir -p '%s/ckpt%d' && '%s' '%s/ckpt%d' 2>&1", tmp, i,
                 b.programs[i], tmp, i);
        if (run(command, out, sizeof out) != 0 || strcmp(out, "ok\n") != 0)
            FAIL("%s:\n%s", b.programs[i], out);
    }

    not_needed("uv", &b);
    not_needed("curl", &b);
    not_needed("json-c", &b);
    each_lib(dropped, not_needed, &b);
    /* the whole library does need them: the checks above can fail */
    char whole[4600];
    snprintf(whole, sizeof whole, "%s/libelastic.so.1", lib_dir);
    ASSERT(needs(whole, "uv", false));
    ASSERT(needs(whole, "json-c", false));
    /* ... but not libcurl, even whole: only an etcd client opened at run time loads it */
    ASSERT(!needs(whole, "curl", false));
}
