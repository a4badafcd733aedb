/* The one dlopen helper (common/dynlib.c) against real libraries of this
 * machine (libm): names tried in turn, symbols required or optional with
 * aliases, the override variable honoured alone, and each failure one line
 * naming the library or symbol, what was tried and dlerror's cause once. */
#include "test.h"
#include "common/dynlib.h"
#include "common/features.h"

#include <dlfcn.h>

#define VAR "ELASTIC_TEST_DYNLIB"

static int count_of(const char *text, const char *word)
{
    int n = 0;
    for (const char *p = strstr(text, word); p != NULL; p = strstr(p + 1, word)) n++;
    return n;
}

TEST(common_dynlib_loads_a_real_library_and_resolves_symbols)
{
    unsetenv(VAR);
    static const char *const names[] = { "libelastic-no-such.so.9", "libm.so.6", NULL };
    elastic__dynlib lib;
    char why[512] = "";
    ASSERT_OK(elastic__dynlib_open(&lib, VAR, names, RTLD_NOW | RTLD_LOCAL, why, sizeof why));
    ASSERT_STR_EQ(lib.name, "libm.so.6");
    double (*cos_fn)(double) = NULL, (*alias_fn)(double) = NULL;
    void (*optional_fn)(void) = (void (*)(void))1;
    const elastic__dynsym syms[] = {
        ELASTIC__DYNSYM(&cos_fn, true, "cos"),
        ELASTIC__DYNSYM(&alias_fn, true, "elastic_no_such_newer_name", "sqrt"),
        ELASTIC__DYNSYM(&optional_fn, false, "elastic_no_such_optional"),
    };
    ASSERT_OK(elastic__dynlib_bind(&lib, syms, 3, why, sizeof why));
    ASSERT(cos_fn != NULL && cos_fn(0.0) == 1.0);
    ASSERT(alias_fn != NULL && alias_fn(16.0) == 4.0);
    ASSERT(optional_fn == NULL);
}

TEST(common_dynlib_missing_required_symbol_is_named)
{
    unsetenv(VAR);
    static const char *const names[] = { "libm.so.6", NULL };
    elastic__dynlib lib;
    char why[512] = "";
    ASSERT_OK(elastic__dynlib_open(&lib, VAR, names, RTLD_NOW | RTLD_LOCAL, why, sizeof why));
    double (*cos_fn)(double) = NULL;
    void (*missing)(void) = NULL;
    const elastic__dynsym syms[] = {
        ELASTIC__DYNSYM(&cos_fn, true, "cos"),
        ELASTIC__DYNSYM(&missing, true, "elastic_no_such_required", "elastic_no_such_alias"),
    };
    ASSERT_EQ(elastic__dynlib_bind(&lib, syms, 2, why, sizeof why), -1);
    ASSERT_STR_EQ(why, "libm.so.6 lacks elastic_no_such_required");
}

TEST(common_dynlib_missing_library_lists_what_was_tried)
{
    unsetenv(VAR);
    static const char *const names[] = { "libelastic-no-such.so.9", "/nonexistent/libelastic-x.so",
                                         NULL };
    elastic__dynlib lib;
    char why[512] = "";
    ASSERT_EQ(elastic__dynlib_open(&lib, VAR, names, RTLD_NOW | RTLD_LOCAL, why, sizeof why), -1);
    ASSERT(lib.handle == NULL);
    ASSERT_STR_EQ(why, "tried libelastic-no-such.so.9, /nonexistent/libelastic-x.so: "
                       "cannot open shared object file: No such file or directory");
    ASSERT_EQ(count_of(why, "cannot open"), 1);
    ASSERT(strchr(why, '\n') == NULL);
}

TEST(common_dynlib_override_variable_is_honoured_alone)
{
    static const char *const names[] = { "libm.so.6", NULL };
    elastic__dynlib lib;
    char why[512] = "";
    setenv(VAR, "libz.so.1", 1);
    ASSERT_OK(elastic__dynlib_open(&lib, VAR, names, RTLD_NOW | RTLD_LOCAL, why, sizeof why));
    ASSERT_STR_EQ(lib.name, "libz.so.1");
    /* A wrong override is an error, not a reason to pick up libm from the list. */
    setenv(VAR, "/nonexistent/libelastic-override.so", 1);
    ASSERT_EQ(elastic__dynlib_open(&lib, VAR, names, RTLD_NOW | RTLD_LOCAL, why, sizeof why), -1);
    ASSERT_STR_EQ(why, VAR "=/nonexistent/libelastic-override.so: "
                           "cannot open shared object file: No such file or directory");
    setenv(VAR, "", 1); /* empty: as if unset */
    ASSERT_OK(elastic__dynlib_open(&lib, VAR, names, RTLD_NOW | RTLD_LOCAL, why, sizeof why));
    ASSERT_STR_EQ(lib.name, "libm.so.6");
    unsetenv(VAR);
}

TEST(common_dynlib_loadable_probes_without_keeping_the_library)
{
    static const char *const present[] = { "libelastic-no-such.so.9", "libm.so.6", NULL };
    static const char *const absent[] = { "libelastic-no-such.so.9", NULL };
    ASSERT(elastic__dynlib_loadable(present));
    ASSERT(!elastic__dynlib_loadable(absent));
}

static int probe_yes(void)
{
    return 1;
}

static int probe_no(void)
{
    return 0;
}

TEST(common_feature_probe_registered_by_a_module_answers)
{
    ASSERT_EQ(elastic_has_feature("common_test_probe"), 0);
    elastic__feature_register("common_test_probe", probe_yes);
    ASSERT_EQ(elastic_has_feature("common_test_probe"), 1);
    elastic__feature_register("common_test_probe", probe_no); /* replaces, not appends */
    ASSERT_EQ(elastic_has_feature("common_test_probe"), 0);
    ASSERT_EQ(elastic_has_feature("common_test_prob"), 0);
}
