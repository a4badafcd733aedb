/*
 * The test runner's interface: TEST(name) registers a test; each runs in its
 * own forked process (and process group) with a timeout. Assertions print
 * where and why, then end the test process. Name tests after behaviour:
 * TEST(store_wait_times_out).
 *
 * Tests run side by side (run_tests -j N, `make test TEST_JOBS=N`), so a test
 * must not depend on the machine being otherwise idle or on anything global
 * it does not own:
 *   - ports: listen on port 0 and ask (test_server_port), never a fixed port;
 *   - files: under test_tmpdir() (fresh for each test), never a fixed path
 *     under /tmp or /dev/shm (a name from getpid() where it must be global);
 *   - names the kernel keeps (network namespaces, iptables chains, cgroups):
 *     carry the test process's pid, as test/netns/netns.sh and
 *     etcd_fixture.h's chains do, and are removed by the test;
 *   - deadlines are bounds on waiting for events, not durations.
 * A test that cannot share the machine (a timing assertion a busy neighbour
 * breaks, a cluster on fixed resources, something global it changes) says so
 * with TEST_ALONE(name, seconds): the runner runs it with nothing else of its
 * own running. Loosening a deadline so a test passes beside others is not the
 * fix; TEST_ALONE is, with a comment saying why.
 */
#ifndef ELASTIC_TEST_H
#define ELASTIC_TEST_H

#include "elastic.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct test_case {
    const char *name;
    void (*fn)(void);
    int timeout_s;
    int alone; /* 1: runs with no other test of this runner running (TEST_ALONE) */
    struct test_case *next;
} test_case;

void test__register(test_case *tc);
_Noreturn void test__fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
_Noreturn void test__skip(const char *reason);

#define TEST__DEFINE(name, seconds, alone)                                                   \
    static void test_fn_##name(void);                                                        \
    static test_case test_case_##name = { #name, test_fn_##name, (seconds), (alone), NULL }; \
    __attribute__((constructor)) static void test_register_##name(void)                      \
    {                                                                                        \
        test__register(&test_case_##name);                                                   \
    }                                                                                        \
    static void test_fn_##name(void)

/* A test with its own timeout (seconds, scaled by ELASTIC_TEST_TIMEOUT_SCALE). */
#define TEST_TIMEOUT(name, seconds) TEST__DEFINE(name, seconds, 0)
/* A test that must run with no other test beside it (see the top of this file). */
#define TEST_ALONE(name, seconds) TEST__DEFINE(name, seconds, 1)

#define TEST(name) TEST_TIMEOUT(name, 30)

#define SKIP(reason) test__skip(reason)
#define FAIL(...)    test__fail(__FILE__, __LINE__, __VA_ARGS__)

#define ASSERT(cond)                                      \
    do {                                                  \
        if (!(cond)) FAIL("assertion failed: %s", #cond); \
    } while (0)

#define ASSERT_EQ(a, b)                                               \
    do {                                                              \
        long long a_ = (long long)(a), b_ = (long long)(b);           \
        if (a_ != b_) FAIL("%s == %s: %lld != %lld", #a, #b, a_, b_); \
    } while (0)

#define ASSERT_NE(a, b)                                        \
    do {                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);    \
        if (a_ == b_) FAIL("%s != %s: both %lld", #a, #b, a_); \
    } while (0)

#define ASSERT_LT(a, b)                                                \
    do {                                                               \
        long long a_ = (long long)(a), b_ = (long long)(b);            \
        if (!(a_ < b_)) FAIL("%s < %s: %lld >= %lld", #a, #b, a_, b_); \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                                     \
    do {                                                                                        \
        const char *a_ = (a), *b_ = (b);                                                        \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                                    \
            FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
    } while (0)

#define ASSERT_MEM_EQ(a, b, len)                                            \
    do {                                                                    \
        if (memcmp((a), (b), (len)) != 0) FAIL("%s and %s differ", #a, #b); \
    } while (0)

/* ASSERT_OK(elastic_call(...)): 0, or fails naming the code and its detail. */
#define ASSERT_OK(expr)                                                                        \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        if (rc_ != 0) FAIL("%s: %s (%s)", #expr, elastic_err_name(rc_), elastic_last_error()); \
    } while (0)

#define ASSERT_ERR(expr, code)                                                  \
    do {                                                                        \
        int rc_ = (expr);                                                       \
        if (rc_ != (code))                                                      \
            FAIL("%s: expected %s, got %s (%s)", #expr, elastic_err_name(code), \
                 elastic_err_name(rc_), elastic_last_error());                  \
    } while (0)

/* A fresh directory for this test, removed by the runner afterwards. */
const char *test_tmpdir(void);
/* Paths of built programs: test_bin_path("elasticrun"), test_helper_path("crashy"). */
const char *test_bin_path(const char *name);
const char *test_helper_path(const char *name);
const char *test_example_path(const char *name);
const char *test_source_dir(void);
/* A whole file of the source tree ("docs/ARCHITECTURE.md"), NUL-terminated,
 * for the tests that read the code and the docs; fails the test when it
 * cannot be read or passes 8 MiB. Free it. */
char *test_source_text(const char *relative);
/* Multiplies a timeout for slow variants (valgrind, sanitizers). */
int test_scaled_ms(int ms);

/* The port a test's store server listens on (the test fails if it cannot say). */
static inline int test_server_port(const elastic_store_server *server)
{
    int port = 0;
    ASSERT_OK(elastic_store_server_get_port(server, &port));
    return port;
}

#endif /* ELASTIC_TEST_H */
