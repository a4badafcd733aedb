/* The one JSON writer (common/json_writer.c): nesting and commas, escaping
 * (quotes, backslash, control bytes, invalid UTF-8 as U+FFFD), numbers, and a
 * bound that leaves out whole members, keeps the text valid and reports it. */
#include "test.h"
#include "common/json.h"
#include "common/json_writer.h"

TEST(common_json_writer_nests_objects_and_arrays)
{
    char buf[256];
    elastic__jw w;
    elastic__jw_init(&w, buf, sizeof buf);
    elastic__jw_object_begin(&w);
    elastic__jw_key(&w, "n");
    elastic__jw_int(&w, -42);
    elastic__jw_key(&w, "u");
    elastic__jw_uint(&w, UINT64_MAX);
    elastic__jw_key(&w, "list");
    elastic__jw_array_begin(&w);
    elastic__jw_bool(&w, true);
    elastic__jw_bool(&w, false);
    elastic__jw_null(&w);
    elastic__jw_object_begin(&w);
    elastic__jw_object_end(&w);
    elastic__jw_array_end(&w);
    elastic__jw_key(&w, "d");
    elastic__jw_double(&w, 1.5, 3);
    elastic__jw_key(&w, "nan");
    elastic__jw_double(&w, 0.0 / 0.0, 3);
    elastic__jw_key(&w, "g");
    elastic__jw_array_begin(&w);
    elastic__jw_double_g(&w, 1.9733e-05, 6);
    elastic__jw_double_g(&w, 2.0, 6);
    elastic__jw_double_g(&w, 1.0 / 0.0, 6);
    elastic__jw_array_end(&w);
    elastic__jw_key(&w, "s");
    elastic__jw_string(&w, NULL);
    elastic__jw_object_end(&w);
    size_t len = 0;
    ASSERT_OK(elastic__jw_finish(&w, &len));
    ASSERT_STR_EQ(buf, "{\"n\":-42,\"u\":18446744073709551615,\"list\":[true,false,null,{}],"
                       "\"d\":1.500,\"nan\":null,\"g\":[1.9733e-05,2,null],\"s\":null}");
    ASSERT_EQ(len, strlen(buf));
}

TEST(common_json_writer_escapes_strings)
{
    char buf[256];
    elastic__jw w;
    elastic__jw_init(&w, buf, sizeof buf);
    elastic__jw_string(&w, "q\"b\\n\nt\tc\x01\x1f\x7f"
                           "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    ASSERT_OK(elastic__jw_finish(&w, NULL));
    ASSERT_STR_EQ(buf, "\"q\\\"b\\\\n\\nt\\tc\\u0001\\u001f\\u007f"
                       "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
}

TEST(common_json_writer_replaces_invalid_utf8)
{
    /* stray continuation, overlong '/', surrogate, past U+10FFFF, cut short */
    static const char *const bad[] = { "a\x80z", "a\xc0\xafz", "a\xed\xa0\x80z",
                                       "a\xf4\x90\x80\x80z", "a\xe2\x82" };
    static const char *const want[] = { "\"a\\ufffdz\"", "\"a\\ufffd\\ufffdz\"",
                                        "\"a\\ufffd\\ufffd\\ufffdz\"",
                                        "\"a\\ufffd\\ufffd\\ufffd\\ufffdz\"",
                                        "\"a\\ufffd\\ufffd\"" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[64];
        elastic__jw w;
        elastic__jw_init(&w, buf, sizeof buf);
        elastic__jw_string(&w, bad[i]);
        ASSERT_OK(elastic__jw_finish(&w, NULL));
        ASSERT_STR_EQ(buf, want[i]);
        json_object *parsed = NULL; /* a strict reader takes it back */
        ASSERT_OK(json__parse(buf, strlen(buf), &parsed));
        json_object_put(parsed);
    }
}

TEST(common_json_writer_overflow_leaves_out_whole_members_and_reports)
{
    char buf[24];
    elastic__jw w;
    elastic__jw_init(&w, buf, sizeof buf);
    elastic__jw_object_begin(&w);
    elastic__jw_key(&w, "a");
    elastic__jw_int(&w, 1);
    elastic__jw_key(&w, "long");
    elastic__jw_string(&w, "0123456789abcdef");
    elastic__jw_key(&w, "b");
    elastic__jw_int(&w, 2);
    elastic__jw_object_end(&w);
    size_t len = 0;
    ASSERT_ERR(elastic__jw_finish(&w, &len), ELASTIC_ELIMIT);
    ASSERT(strstr(elastic_last_error(), "23-byte bound") != NULL);
    /* The member that did not fit is gone whole; a later one that fits stays. */
    ASSERT_STR_EQ(buf, "{\"a\":1,\"b\":2}");
    ASSERT_EQ(len, strlen(buf));
}

TEST(common_json_writer_always_closes_within_the_bound)
{
    for (size_t cap = 1; cap < 40; cap++) {
        char buf[40];
        elastic__jw w;
        elastic__jw_init(&w, buf, cap);
        elastic__jw_array_begin(&w);
        for (int i = 0; i < 5; i++) {
            elastic__jw_object_begin(&w);
            elastic__jw_key(&w, "k");
            elastic__jw_string(&w, "v\n");
            elastic__jw_object_end(&w);
        }
        elastic__jw_array_end(&w);
        int rc = elastic__jw_finish(&w, NULL);
        ASSERT(strlen(buf) < cap);
        if (rc == 0) {
            ASSERT_STR_EQ(buf,
                          "[{\"k\":\"v\\n\"},{\"k\":\"v\\n\"},{\"k\":\"v\\n\"},{\"k\":\"v\\n\"},"
                          "{\"k\":\"v\\n\"}]");
        } else {
            ASSERT_EQ(rc, ELASTIC_ELIMIT);
            if (cap > 2 && buf[0] != '\0' && buf[strlen(buf) - 1] != ']')
                FAIL("cap %zu: not closed: %s", cap, buf);
        }
    }
}

TEST(common_json_escape_fails_rather_than_cutting)
{
    char out[8];
    ASSERT_OK(elastic__json_escape("a\"b", out, sizeof out));
    ASSERT_STR_EQ(out, "a\\\"b");
    ASSERT_ERR(elastic__json_escape("\n\n\n\n", out, sizeof out), ELASTIC_ELIMIT);
    ASSERT_STR_EQ(out, "");
}
