/* Tests of src/slurm/hostlist.c: Slurm's hostlist grammar. The expected
 * expansions are what `scontrol show hostnames` (slurm-wlm 22.05) prints for
 * the same text; the refusals name the rule, keep the output untouched, and
 * bound what a typo can cost. */
#include "slurm/slurm.h"
#include "test.h"

#include <stdlib.h>

/* Expands `text` and compares with the space-separated `want`. */
static void expands(const char *text, const char *want)
{
    elastic__hostlist list = { NULL, 0 };
    if (elastic__hostlist_expand("nodes", text, 0, &list) != 0)
        FAIL("\"%s\" refused: %s", text, elastic_last_error());
    char got[4096] = "";
    size_t used = 0;
    for (size_t i = 0; i < list.count; i++)
        used +=
            (size_t)snprintf(got + used, sizeof got - used, "%s%s", i ? " " : "", list.names[i]);
    elastic__hostlist_free(&list);
    ASSERT_EQ(list.count, 0);
    if (strcmp(got, want) != 0) FAIL("\"%s\" expanded to \"%s\", want \"%s\"", text, got, want);
}

/* Refused with ELASTIC_EINVAL, *out untouched, and the detail has `word`. */
static void refuses(const char *text, size_t max_hosts, const char *word)
{
    char *marker = (char *)"untouched";
    elastic__hostlist list = { &marker, 77 };
    int rc = elastic__hostlist_expand("SLURM_JOB_NODELIST", text, max_hosts, &list);
    if (rc != ELASTIC_EINVAL) FAIL("\"%s\": expected EINVAL, got %s", text, elastic_err_name(rc));
    ASSERT(list.names == &marker && list.count == 77);
    const char *detail = elastic_last_error();
    if (strstr(detail, "SLURM_JOB_NODELIST") == NULL || strstr(detail, word) == NULL)
        FAIL("\"%s\": detail \"%s\" lacks the variable or \"%s\"", text, detail, word);
}

TEST(slurm_hostlist_expands_what_scontrol_expands)
{
    expands("node1", "node1");
    expands("gpu[01-04,07],cpu5", "gpu01 gpu02 gpu03 gpu04 gpu07 cpu5");
    expands("n[8-11]", "n8 n9 n10 n11");
    expands("n[008-011]", "n008 n009 n010 n011");
    expands("n[099-100]", "n099 n100");
    expands("n[00-3]", "n00 n01 n02 n03");
    expands("n[01-1]", "n01");
    expands("n[1-02]", "n1 n2");
    expands("a[1-2]b[3-4]", "a1b3 a1b4 a2b3 a2b4");
    expands("n[1-2][5-6]", "n15 n16 n25 n26");
    expands("n[5,1-2,5]", "n5 n1 n2 n5"); /* order and duplicates as written */
    expands("n[1-2],,m", "n1 n2 m");
    expands("a b\tc", "a b c");
    expands("[1-2]", "1 2");
    expands("x[1],y", "x1 y");
    expands("rack-1.a_b[3]", "rack-1.a_b3");
}

TEST(slurm_hostlist_accepts_text_after_a_bracket_group)
{
    /* Slurm 22.05's scontrol refuses these; newer Slurm writes such names
     * ("n[1-2]-ib"). Accepting them loses nothing: no other meaning exists. */
    expands("n[0-1]-ib", "n0-ib n1-ib");
    expands("r[1-2]n[01-02]x", "r1n01x r1n02x r2n01x r2n02x");
}

TEST(slurm_hostlist_refuses_malformed_lists_naming_the_rule)
{
    refuses("n[1-3", 0, "without its ']'");
    refuses("n1]", 0, "without its '['");
    refuses("n[]", 0, "empty bracket group");
    refuses("n[3-1]", 0, "backwards");
    refuses("n[-1]", 0, "not a number");
    refuses("n[a-b]", 0, "not a number");
    refuses("n[1,]", 0, "not a number");
    refuses("n[1x3]", 0, "not a number");
    refuses("n[1-2]]", 0, "without its '['");
    refuses("n[[1]]", 0, "nests");
    refuses("n[1]a[2]b[3]c[4]d[5]", 0, "more than 4 bracket groups");
    refuses("n[1234567890]", 0, "at most 9");
    refuses("no/de", 0, "not in a host name");
    refuses("nöde", 0, "not in a host name");
    refuses("", 0, "empty");
    refuses(" , ,", 0, "empty");
}

TEST(slurm_hostlist_refuses_huge_ranges_before_allocating)
{
    /* A typo of one digit must not allocate a billion names. */
    refuses("n[0-999999999]", 0, "more hosts than");
    refuses("a[0-999]b[0-999]", 0, "more hosts than");
    refuses("n[1-5]", 4, "more hosts than");
    refuses("a,b,c,d,e", 4, "more hosts than");
    elastic__hostlist list;
    ASSERT_OK(elastic__hostlist_expand("nodes", "n[1-4]", 4, &list));
    ASSERT_EQ(list.count, 4);
    elastic__hostlist_free(&list);
    ASSERT_OK(elastic__hostlist_expand("nodes", "n[00000-65535]", 0, &list));
    ASSERT_EQ(list.count, 65536);
    ASSERT_STR_EQ(list.names[65535], "n65535");
    ASSERT_STR_EQ(list.names[7], "n00007");
    elastic__hostlist_free(&list);
}

TEST(slurm_hostlist_bounds_name_length_and_text_length)
{
    char name[300];
    memset(name, 'a', 253);
    name[253] = '\0';
    expands(name, name);
    name[252] = '[';
    strcpy(name + 253, "10]"); /* 252 letters + 2 digits: 254 characters */
    ASSERT_ERR(elastic__hostlist_expand("nodes", name, 0, &(elastic__hostlist){ 0 }),
               ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "longer than 253") != NULL);
    size_t big = ELASTIC__HOSTLIST_MAX_TEXT + 2;
    char *text = malloc(big);
    ASSERT(text != NULL);
    memset(text, ',', big - 1);
    text[0] = 'n';
    text[big - 1] = '\0';
    refuses(text, 0, "longer than 65536");
    free(text);
}

static void tasks(const char *text, size_t index, int want_count, size_t want_nodes)
{
    int count = -1;
    size_t nodes = 0;
    if (elastic__slurm_tasks_per_node("SLURM_TASKS_PER_NODE", text, index, &count, &nodes) != 0)
        FAIL("\"%s\" [%zu] refused: %s", text, index, elastic_last_error());
    ASSERT_EQ(count, want_count);
    ASSERT_EQ(nodes, want_nodes);
}

static void tasks_refused(const char *text, size_t index)
{
    int count = -1;
    size_t nodes = 99;
    ASSERT_ERR(elastic__slurm_tasks_per_node("SLURM_TASKS_PER_NODE", text, index, &count, &nodes),
               ELASTIC_EINVAL);
    ASSERT(count == -1 && nodes == 99);
    ASSERT(strstr(elastic_last_error(), "SLURM_TASKS_PER_NODE") != NULL);
}

TEST(slurm_tasks_per_node_reads_the_repeat_syntax)
{
    tasks("2", 0, 2, 1);
    tasks("2(x3),1", 0, 2, 4);
    tasks("2(x3),1", 2, 2, 4);
    tasks("2(x3),1", 3, 1, 4);
    tasks("1(x4)", 3, 1, 4);
    tasks("8,4(x2)", 2, 4, 3);
    tasks_refused("2(x3),1", 4); /* no such node */
    tasks_refused("", 0);
    tasks_refused("0", 0);
    tasks_refused("2(3)", 0);
    tasks_refused("2(x3", 0);
    tasks_refused("2(x0)", 0);
    tasks_refused("2(x3)x", 0);
    tasks_refused("2,,1", 1);
    tasks_refused("-2", 0);
    tasks_refused("65536(x65536),1", 0); /* more nodes than any job */
}
