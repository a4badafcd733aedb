/* Tests of src/common/json.c: what the agent and elasticctl read back (error
 * files, event lines) parses, and malformed or hostile input is refused. */
#include "common/json.h"
#include "test.h"

TEST(json_reads_nested_objects_strings_and_numbers)
{
    const char *text = " {\"a\": {\"b\": \"x\\ny\\u00e9\\ud83d\\ude00\", \"n\": -12.5e1, \"t\": true, \"z\": null},"
                       " \"list\": [1, 2, {\"k\": \"v\"}], \"e\": {}, \"q\": []} ";
    json__doc *doc = NULL;
    ASSERT_OK(json__parse(text, strlen(text), &doc));
    const json__value *root = json__root(doc);
    const json__value *a = json__get(root, "a");
    ASSERT_STR_EQ(json__get_string(a, "b"), "x\ny\xc3\xa9\xf0\x9f\x98\x80");
    double n = 0;
    ASSERT(json__get_number(a, "n", &n));
    ASSERT(n == -125.0);
    ASSERT_EQ(json__get(a, "t")->type, JSON__BOOL);
    ASSERT_EQ(json__get(a, "z")->type, JSON__NULL);
    ASSERT(json__get_string(a, "n") == NULL);  /* not a string */
    ASSERT(!json__get_number(a, "b", &n));      /* not a number */
    ASSERT(json__get(root, "missing") == NULL);
    const json__value *list = json__get(root, "list");
    ASSERT_EQ(list->type, JSON__ARRAY);
    ASSERT_STR_EQ(json__get_string(list->first->next->next, "k"), "v");
    ASSERT(json__get(root, "e")->first == NULL);
    json__free(doc);
}

TEST(json_refuses_malformed_and_hostile_input)
{
    const char *bad[] = {"", "{", "{\"a\" 1}", "{\"a\":}", "[1,]", "{\"a\":1,}", "\"unterminated", "\"\\x\"",
                         "\"\\u12\"", "tru", "{\"a\":1} x", "\"a\x01\"", "01x", "[1 2]", NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        json__doc *doc = NULL;
        if (json__parse(bad[i], strlen(bad[i]), &doc) == 0) FAIL("accepted malformed input %d: %s", i, bad[i]);
        ASSERT(doc == NULL);
    }
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    json__doc *doc = NULL;
    ASSERT_ERR(json__parse(deep, sizeof deep, &doc), ELASTIC_EPROTO); /* nested past the depth limit */
    const char nul[] = "\"a\\u0000b\"";                                /* an escaped NUL cannot cut a string short */
    ASSERT_OK(json__parse(nul, strlen(nul), &doc));
    ASSERT_EQ(strlen(json__root(doc)->string), 5);
    json__free(doc);
}
