/* Tests of src/common/parse_int.c: the one decimal grammar. Boundaries of
 * each variant, what is refused (signs, spaces, junk, overflow), and the one
 * error line naming the field and the value. */
#include "common/common.h"
#include "common/parse_int.h"
#include "test.h"

#include <limits.h>

TEST(common_parse_int_accepts_bounds_and_refuses_one_past)
{
    int v = -7;
    ASSERT_OK(elastic__parse_int("n", "0", 0, 10, &v));
    ASSERT_EQ(v, 0);
    ASSERT_OK(elastic__parse_int("n", "10", 0, 10, &v));
    ASSERT_EQ(v, 10);
    ASSERT_ERR(elastic__parse_int("n", "11", 0, 10, &v), ELASTIC_EINVAL);
    ASSERT_EQ(v, 10); /* untouched on failure */
    ASSERT_ERR(elastic__parse_int("n", "-1", 0, 10, &v), ELASTIC_EINVAL);
    ASSERT_OK(elastic__parse_int("n", "-5", -5, 5, &v));
    ASSERT_EQ(v, -5);
    ASSERT_OK(elastic__parse_int("n", "2147483647", INT_MIN, INT_MAX, &v));
    ASSERT_EQ(v, INT_MAX);
    ASSERT_ERR(elastic__parse_int("n", "2147483648", INT_MIN, INT_MAX, &v), ELASTIC_EINVAL);
    ASSERT_OK(elastic__parse_int("n", "-2147483648", INT_MIN, INT_MAX, &v));
    ASSERT_EQ(v, INT_MIN);
    ASSERT_OK(elastic__parse_int("n", "007", 0, 10, &v)); /* leading zeros are still decimal */
    ASSERT_EQ(v, 7);
}

TEST(common_parse_int_refuses_signs_spaces_and_junk)
{
    static const char *const bad[] = { "",    "+1",    " 1",  "1 ", "1\n", "\t1", "0x10", "1e3",
                                       "1.0", "1,000", "--1", "-",  "- 1", "one", "1a",   "１" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = 42;
        if (elastic__parse_i64(NULL, bad[i], INT64_MIN, INT64_MAX, &v) != ELASTIC_EINVAL || v != 42)
            FAIL("\"%s\" was accepted", bad[i]);
        uint64_t u = 42;
        if (elastic__parse_u64(NULL, bad[i], 0, UINT64_MAX, &u) != ELASTIC_EINVAL || u != 42)
            FAIL("\"%s\" was accepted as unsigned", bad[i]);
    }
    int v = 0;
    ASSERT_ERR(elastic__parse_int("n", NULL, 0, 1, &v), ELASTIC_EINVAL);
}

TEST(common_parse_int_minus_zero_is_zero_when_signed_only)
{
    int64_t v = 5;
    ASSERT_OK(elastic__parse_i64("n", "-0", 0, 10, &v));
    ASSERT_EQ(v, 0);
    uint64_t u = 5;
    ASSERT_ERR(elastic__parse_u64("n", "-0", 0, 10, &u), ELASTIC_EINVAL); /* no sign at all */
    ASSERT_ERR(elastic__parse_u64("n", "-1", 0, UINT64_MAX, &u), ELASTIC_EINVAL);
}

TEST(common_parse_int_detects_overflow_at_every_width)
{
    int64_t v = 0;
    ASSERT_OK(elastic__parse_i64("n", "9223372036854775807", INT64_MIN, INT64_MAX, &v));
    ASSERT(v == INT64_MAX);
    ASSERT_OK(elastic__parse_i64("n", "-9223372036854775808", INT64_MIN, INT64_MAX, &v));
    ASSERT(v == INT64_MIN);
    ASSERT_ERR(elastic__parse_i64("n", "9223372036854775808", INT64_MIN, INT64_MAX, &v),
               ELASTIC_EINVAL);
    ASSERT_ERR(elastic__parse_i64("n", "-9223372036854775809", INT64_MIN, INT64_MAX, &v),
               ELASTIC_EINVAL);
    uint64_t u = 0;
    ASSERT_OK(elastic__parse_u64("n", "18446744073709551615", 0, UINT64_MAX, &u));
    ASSERT(u == UINT64_MAX);
    ASSERT_ERR(elastic__parse_u64("n", "18446744073709551616", 0, UINT64_MAX, &u), ELASTIC_EINVAL);
    ASSERT_ERR(elastic__parse_u64("n", "99999999999999999999999999", 0, UINT64_MAX, &u),
               ELASTIC_EINVAL);
    ASSERT_ERR(elastic__parse_u64("n", "00000000000000000000000000000000000001", 0, 0, &u),
               ELASTIC_EINVAL);
    ASSERT_OK(elastic__parse_u64("n", "00000000000000000000000000000000000001", 0, 1, &u));
    ASSERT(u == 1);
}

TEST(common_parse_int_counted_text_stops_at_its_length)
{
    int64_t v = 0;
    ASSERT_OK(elastic__parse_i64_n("n", "12345", 3, 0, 1000, &v));
    ASSERT_EQ(v, 123);
    ASSERT_ERR(elastic__parse_i64_n("n",
                                    "1\0"
                                    "2",
                                    3, 0, 1000, &v),
               ELASTIC_EINVAL);                                                  /* embedded NUL */
    ASSERT_ERR(elastic__parse_i64_n("n", "12", 0, 0, 1000, &v), ELASTIC_EINVAL); /* empty */
    uint64_t u = 0;
    ASSERT_OK(elastic__parse_u64_n("n", "77x", 2, 0, 100, &u));
    ASSERT(u == 77);
}

TEST(common_parse_int_error_names_the_field_the_value_and_the_bounds)
{
    elastic__clear_error();
    int v;
    ASSERT_ERR(elastic__parse_int("--nproc-per-node", "4x", 1, 1024, &v), ELASTIC_EINVAL);
    ASSERT_STR_EQ(elastic_last_error(),
                  "--nproc-per-node: \"4x\" is not a whole number in [1, 1024]");
    char lng[200];
    memset(lng, '9', sizeof lng - 1);
    lng[sizeof lng - 1] = '\0';
    uint64_t u;
    ASSERT_ERR(elastic__parse_u64("RANK", lng, 0, 7, &u), ELASTIC_EINVAL);
    ASSERT(strlen(elastic_last_error()) < 100); /* a long value is quoted in part */
    ASSERT(strstr(elastic_last_error(), "RANK: \"9999") != NULL);
    ASSERT(strstr(elastic_last_error(), "...\" is not a whole number in [0, 7]") != NULL);
    elastic__clear_error();
    ASSERT_ERR(elastic__parse_int(NULL, "x", 0, 1, &v), ELASTIC_EINVAL); /* quiet */
    ASSERT_STR_EQ(elastic_last_error(), "");
}
