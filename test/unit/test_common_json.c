/* Tests of src/common/json.c: what the agent and elasticctl read back (error
 * files, event lines) parses, and malformed or hostile input is refused. */
#include "common/json.h"
#include "test.h"

TEST(common_json_reads_nested_objects_strings_and_numbers)
{
    const char *text =
        " {\"a\": {\"b\": \"x\\ny\\u00e9\\ud83d\\ude00\", \"n\": -125, \"d\": 3.0e1, \"f\": 2.5,"
        " \"t\": true, \"z\": null}, \"list\": [1, 2, {\"k\": \"v\"}], \"e\": {}, \"q\": []} ";
    json_object *root = NULL;
    ASSERT_OK(json__parse(text, strlen(text), &root));
    json_object *a = json__get(root, "a");
    ASSERT_STR_EQ(json__get_string(a, "b"), "x\ny\xc3\xa9\xf0\x9f\x98\x80");
    int64_t n = 0;
    ASSERT(json__get_int(a, "n", -1000, 1000, &n));
    ASSERT_EQ(n, -125);
    ASSERT(!json__get_int(a, "n", 0, 1000, &n)); /* below the range asked */
    ASSERT(json__get_int(a, "d", 0, 100, &n));   /* an integral double counts */
    ASSERT_EQ(n, 30);
    ASSERT(!json__get_int(a, "f", 0, 100, &n)); /* 2.5 is not an integer */
    ASSERT(!json__get_int(a, "t", 0, 100, &n)); /* a bool is not a number */
    ASSERT(json__get_string(a, "n") == NULL);   /* not a string */
    ASSERT(json__get(root, "missing") == NULL);
    ASSERT(json__get(json__get(root, "list"), "k") == NULL); /* an array has no members */
    ASSERT(json_object_is_type(json__get(root, "e"), json_type_object));
    json_object_put(root);
}

TEST(common_json_refuses_malformed_and_hostile_input)
{
    const char *bad[] = { "",
                          "{",
                          "{\"a\" 1}",
                          "{\"a\":}",
                          "[1,]",
                          "{\"a\":1,}",
                          "\"unterminated",
                          "\"\\x\"",
                          "\"\\u12\"",
                          "tru",
                          "{\"a\":1} x",
                          "\"a\x01\"",
                          "01x",
                          "[1 2]",
                          "NaN",
                          "[1] [2]",
                          NULL };
    for (int i = 0; bad[i] != NULL; i++) {
        json_object *root = NULL;
        if (json__parse(bad[i], strlen(bad[i]), &root) == 0)
            FAIL("accepted malformed input %d: %s", i, bad[i]);
        ASSERT(root == NULL);
    }
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    json_object *root = NULL;
    ASSERT_ERR(json__parse(deep, sizeof deep, &root),
               ELASTIC_EPROTO);                       /* nested past the depth limit */
    const char with_nul[] = "{\"a\": 1}\0{\"b\": 2}"; /* a raw NUL inside the text */
    ASSERT_ERR(json__parse(with_nul, sizeof with_nul - 1, &root), ELASTIC_EPROTO);
    const char nul[] =
        "{\"node\": \"a\\u0000b\"}"; /* an escaped NUL cannot make "a\0b" read as "a" */
    ASSERT_OK(json__parse(nul, strlen(nul), &root));
    ASSERT(json__get_string(root, "node") == NULL);
    json_object_put(root);
    int64_t n;
    const char huge[] =
        "{\"n\": 99999999999999999999999}"; /* past 64 bits: out of any range asked */
    ASSERT_OK(json__parse(huge, strlen(huge), &root));
    ASSERT(!json__get_int(root, "n", 0, INT64_MAX / 2, &n));
    json_object_put(root);
}
