/*
 * The suite's names stay navigable: every test's name starts with its module
 * (so `make test TEST_FILTER=common` runs the common tests), no two tests share
 * a name (each file's TEST() is static, so the linker would not notice), and
 * the runner's --list and exact-name selection say what would run. Asked of
 * this very binary (/proc/self/exe), so a new test is checked the day it lands.
 */
#include "test.h"

#include <stdbool.h>
#include <sys/wait.h>

/* The source modules (src/<module>/, tools' elasticctl as ctl), then the
 * suites that span them: the ABI, the language bindings, the build, and the
 * multi-host network-namespace runs. */
static const char *const prefixes[] = { "agent_", "channel_", "ckpt_",   "common_", "ctl_",
                                        "health_", "nccl_",   "probe_",  "rdzv_",   "store_",
                                        "worker_", "slurm_",  "abi_",    "build_",  "bindings_",
                                        "netns_",  "etcd_",   NULL };

#define MAX_TESTS 2000

typedef struct listing {
    char *names[MAX_TESTS];
    int n;
} listing;

/* Runs this binary with `args` (then --list) and keeps the names it prints. */
static int list_tests(const char *args, listing *out)
{
    /* popen's shell would find itself at /proc/self/exe: resolve the link here. */
    char self[4096], command[4700];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT(n > 0);
    self[n] = '\0';
    snprintf(command, sizeof command, "'%s' %s --list 2>/dev/null", self, args);
    FILE *p = popen(command, "r");
    ASSERT(p != NULL);
    out->n = 0;
    char line[512];
    while (fgets(line, sizeof line, p) != NULL) {
        ASSERT(out->n < MAX_TESTS);
        line[strcspn(line, "\n")] = '\0';
        out->names[out->n] = strdup(line);
        ASSERT(out->names[out->n] != NULL);
        out->n++;
    }
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void listing_free(listing *l)
{
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    l->n = 0;
}

static bool has_module_prefix(const char *name)
{
    for (int i = 0; prefixes[i] != NULL; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0 && name[strlen(prefixes[i])])
            return true;
    return false;
}

TEST(build_every_test_name_starts_with_its_module_and_is_unique)
{
    static listing all;
    ASSERT_EQ(list_tests("", &all), 0);
    ASSERT(all.n > 1);
    bool listed_self = false;
    for (int i = 0; i < all.n; i++) {
        if (!has_module_prefix(all.names[i]))
            FAIL("test \"%s\" does not start with a module (agent_, store_, ... see %s)",
                 all.names[i], __FILE__);
        for (int j = 0; j < i; j++)
            if (strcmp(all.names[i], all.names[j]) == 0)
                FAIL("two tests are named \"%s\"", all.names[i]);
        if (strcmp(all.names[i], "build_every_test_name_starts_with_its_module_and_is_unique") == 0)
            listed_self = true;
    }
    ASSERT(listed_self);
    listing_free(&all);
}

TEST(build_runner_selects_by_substring_and_exact_name)
{
    static listing all, some, one, both;
    ASSERT_EQ(list_tests("", &all), 0);

    /* A substring selects exactly the names that contain it, in order. */
    ASSERT_EQ(list_tests("common_", &some), 0);
    int expected = 0;
    for (int i = 0; i < all.n; i++)
        if (strstr(all.names[i], "common_") != NULL) {
            ASSERT(expected < some.n);
            ASSERT_STR_EQ(some.names[expected], all.names[i]);
            expected++;
        }
    ASSERT_EQ(some.n, expected);
    ASSERT(expected > 0);

    /* An exact name selects that test alone; several may be given. */
    ASSERT_EQ(list_tests("=build_runner_selects_by_substring_and_exact_name", &one), 0);
    ASSERT_EQ(one.n, 1);
    ASSERT_STR_EQ(one.names[0], "build_runner_selects_by_substring_and_exact_name");
    ASSERT_EQ(list_tests("--exact build_every_test_name_starts_with_its_module_and_is_unique "
                         "=build_runner_selects_by_substring_and_exact_name",
                         &both),
              0);
    ASSERT_EQ(both.n, 2);

    /* A name no test has, or an unknown option, is an error, not "0 tests ran". */
    listing none;
    ASSERT_EQ(list_tests("=no_such_test", &none), 2);
    ASSERT_EQ(none.n, 0);
    ASSERT_EQ(list_tests("--no-such-option", &none), 2);
    ASSERT_EQ(none.n, 0);
    listing_free(&all), listing_free(&some), listing_free(&one), listing_free(&both);
}
