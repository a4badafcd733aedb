/*
 * The rendezvous records' encodings: round trips, and corrupt or hostile
 * values rejected with ELASTIC_ECORRUPT (never a crash); member ordering.
 */
#include "rdzv/rdzv.h"
#include "test.h"

#include <stdlib.h>

static rdzv__record sample_record(int slot, const char *id, uint64_t prev_gen, int prev_rank)
{
    rdzv__record rec = { .slot = slot,
                         .local_world_size = 8,
                         .master_port = 29500,
                         .prev_generation = prev_gen,
                         .prev_rank = prev_rank,
                         .preferred_rank = -1 };
    snprintf(rec.node_id, sizeof rec.node_id, "%s", id);
    snprintf(rec.addr, sizeof rec.addr, "10.0.0.%d", slot);
    return rec;
}

TEST(rdzv_record_round_trips)
{
    rdzv__record rec = sample_record(3, "host-a-12-beef", 4, 2), back;
    char buf[RDZV__MAX_RECORD];
    size_t len = rdzv__record_encode(&rec, buf, sizeof buf);
    ASSERT(len > 0);
    ASSERT_OK(rdzv__record_decode(buf, len, &back));
    ASSERT_STR_EQ(back.node_id, "host-a-12-beef");
    ASSERT_STR_EQ(back.addr, "10.0.0.3");
    ASSERT_EQ(back.local_world_size, 8);
    ASSERT_EQ(back.master_port, 29500);
    ASSERT_EQ(back.prev_generation, 4);
    ASSERT_EQ(back.prev_rank, 2);
    ASSERT_EQ(back.preferred_rank, -1);
    rec.preferred_rank = 7;
    len = rdzv__record_encode(&rec, buf, sizeof buf);
    ASSERT_OK(rdzv__record_decode(buf, len, &back));
    ASSERT_EQ(back.preferred_rank, 7);
}

TEST(rdzv_corrupt_records_are_rejected)
{
    static const char *const bad[] = {
        "",                                             /* empty */
        "R2 8 29500 4 2 -1 id",                         /* a field missing */
        "R2 8 29500 4 2 -1 id addr extra",              /* one too many */
        "R1 8 29500 4 2 id addr",                       /* an older version */
        "R3 8 29500 4 2 -1 id addr",                    /* unknown version */
        "R2 0 29500 4 2 -1 id addr",                    /* no workers */
        "R2 5000 29500 4 2 -1 id addr",                 /* too many workers */
        "R2 8 70000 4 2 -1 id addr",                    /* port out of range */
        "R2 8 29500 -4 2 -1 id addr",                   /* negative generation */
        "R2 8 29500 4 2x -1 id addr",                   /* not a number */
        "R2 8 29500 4 99999999999999999999 -1 id addr", /* overflow */
        "R2 8  29500 4 2 -1 id addr",                   /* empty field */
        "R2 8 29500 4 2 -2 id addr",                    /* preferred rank below -1 */
    };
    rdzv__record rec;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_ERR(rdzv__record_decode(bad[i], strlen(bad[i]), &rec), ELASTIC_ECORRUPT);
    /* An embedded NUL and an oversized value. */
    ASSERT_ERR(rdzv__record_decode("R2 8 29500 4 2 -1 i\0d addr", 27, &rec), ELASTIC_ECORRUPT);
    char *huge = malloc(100000);
    memset(huge, 'a', 100000);
    ASSERT_ERR(rdzv__record_decode(huge, 100000, &rec), ELASTIC_ECORRUPT);
    free(huge);
    ASSERT(strstr(elastic_last_error(), "corrupt join record") != NULL);
}

TEST(rdzv_assignment_round_trips_and_rejects_nonsense)
{
    rdzv__assignment a = { .outcome = RDZV__ASSIGNED,
                           .generation = 7,
                           .group_rank = 1,
                           .group_world_size = 3,
                           .rank_base = 8,
                           .local_world_size = 8,
                           .world_size = 24,
                           .restart_count = 2,
                           .master_port = 4000,
                           .next_slot = 5,
                           .incarnation = 1764600000123ull },
                     b;
    snprintf(a.master_addr, sizeof a.master_addr, "node0");
    snprintf(a.next_node_id, sizeof a.next_node_id, "n2");
    char buf[RDZV__MAX_RECORD];
    size_t len = rdzv__assignment_encode(&a, buf, sizeof buf);
    ASSERT_OK(rdzv__assignment_decode(buf, len, &b));
    ASSERT_EQ(b.outcome, RDZV__ASSIGNED);
    ASSERT_EQ(b.generation, 7);
    ASSERT_EQ(b.rank_base, 8);
    ASSERT_EQ(b.next_slot, 5);
    ASSERT_STR_EQ(b.master_addr, "node0");
    ASSERT(b.incarnation == 1764600000123ull);
    /* An older sealer's assignment has no incarnation: 0, the node reads it. */
    const char *a1 = "A1 7 1 3 8 8 24 2 4000 5 node0 n2";
    ASSERT_OK(rdzv__assignment_decode(a1, strlen(a1), &b));
    ASSERT(b.generation == 7 && b.incarnation == 0);
    const char *bad_incarnation = "A2 7 1 3 8 8 24 2 4000 5 node0 n2 -1";
    ASSERT_ERR(rdzv__assignment_decode(bad_incarnation, strlen(bad_incarnation), &b),
               ELASTIC_ECORRUPT);
    /* The longest assignment still fits one record. */
    a.generation = INT64_MAX, a.group_rank = RDZV__MAX_NODES - 2,
    a.group_world_size = RDZV__MAX_NODES - 1, a.rank_base = 0, a.local_world_size = 1,
    a.world_size = INT32_MAX, a.restart_count = INT32_MAX, a.master_port = 65535,
    a.next_slot = INT32_MAX, a.incarnation = INT64_MAX;
    memset(a.master_addr, 'a', sizeof a.master_addr - 1);
    memset(a.next_node_id, 'n', sizeof a.next_node_id - 1);
    len = rdzv__assignment_encode(&a, buf, sizeof buf);
    ASSERT(len > 0);
    ASSERT_OK(rdzv__assignment_decode(buf, len, &b));
    ASSERT(b.incarnation == (uint64_t)INT64_MAX && b.generation == (uint64_t)INT64_MAX);
    ASSERT_OK(rdzv__assignment_decode("X", 1, &b));
    ASSERT_EQ(b.outcome, RDZV__EXCLUDED);
    ASSERT_OK(rdzv__assignment_decode("C", 1, &b));
    ASSERT_EQ(b.outcome, RDZV__CLOSED);
    /* A rank outside the group, a base beyond the world. */
    const char *rank_outside = "A1 7 3 3 0 8 24 0 4000 5 node0 n2";
    const char *base_beyond = "A1 7 1 3 20 8 24 0 4000 5 node0 n2";
    ASSERT_ERR(rdzv__assignment_decode(rank_outside, strlen(rank_outside), &b), ELASTIC_ECORRUPT);
    ASSERT_ERR(rdzv__assignment_decode(base_beyond, strlen(base_beyond), &b), ELASTIC_ECORRUPT);
    ASSERT_ERR(rdzv__assignment_decode("Y", 1, &b), ELASTIC_ECORRUPT);
}

TEST(rdzv_cause_round_trips_with_spaces_in_the_reason)
{
    elastic_rdzv_cause c = { .kind = ELASTIC_RDZV_FAILURE,
                             .generation = 3,
                             .rank = 5,
                             .exit_code = 137,
                             .signal = 9,
                             .time_ms = 1700000000000ull },
                       d;
    snprintf(c.node_id, sizeof c.node_id, "node-1");
    snprintf(c.reason, sizeof c.reason, "worker 5 killed\nby signal 9");
    char buf[RDZV__MAX_RECORD + 256];
    size_t len = rdzv__cause_encode(&c, buf, sizeof buf);
    ASSERT_OK(rdzv__cause_decode(buf, len, &d));
    ASSERT_EQ(d.kind, ELASTIC_RDZV_FAILURE);
    ASSERT_EQ(d.exit_code, 137);
    ASSERT_EQ(d.signal, 9);
    ASSERT_EQ(d.time_ms, 1700000000000ull);
    ASSERT_STR_EQ(d.node_id, "node-1");
    ASSERT_STR_EQ(d.reason, "worker 5 killed by signal 9"); /* newline flattened */
    const char *bad_kind = "C1 9 3 5 137 9 0 node-1 why";
    ASSERT_ERR(rdzv__cause_decode(bad_kind, strlen(bad_kind), &d), ELASTIC_ECORRUPT);
}

TEST(rdzv_generation_record_round_trips_and_bounds_its_member_count)
{
    rdzv__record members[2] = { sample_record(2, "b", 1, 0), sample_record(1, "a", 0, -1) };
    rdzv__info info = { .formed = true,
                        .generation = 2,
                        .group_world_size = 2,
                        .sealed_count = 3,
                        .restart_count = 1 },
               back;
    char *blob = NULL;
    size_t len = 0;
    ASSERT_OK(rdzv__info_encode(&info, members, &blob, &len));
    rdzv__record *decoded = NULL;
    ASSERT_OK(rdzv__info_decode(blob, len, &back, &decoded));
    ASSERT_EQ(back.group_world_size, 2);
    ASSERT_EQ(back.sealed_count, 3);
    ASSERT_EQ(decoded[0].slot, 2);
    ASSERT_STR_EQ(decoded[1].node_id, "a");
    free(decoded);
    /* Claims more members than it holds; trailing garbage; a void round with members. */
    const char *short_blob = "I1 1 2 5 3 0\n2 8 29500 1 0 -1 b 10.0.0.2\n";
    ASSERT_ERR(rdzv__info_decode(short_blob, strlen(short_blob), &back, &decoded),
               ELASTIC_ECORRUPT);
    char *tail = malloc(len + 8);
    memcpy(tail, blob, len);
    memcpy(tail + len, "junk", 4);
    ASSERT_ERR(rdzv__info_decode(tail, len + 4, &back, &decoded), ELASTIC_ECORRUPT);
    const char *void_with_size = "I1 0 2 2 3 0\n";
    ASSERT_ERR(rdzv__info_decode(void_with_size, strlen(void_with_size), &back, NULL),
               ELASTIC_ECORRUPT);
    const char *too_many = "I1 1 2 999999 3 0\n";
    ASSERT_ERR(rdzv__info_decode(too_many, strlen(too_many), &back, &decoded), ELASTIC_ECORRUPT);
    free(tail);
    free(blob);
}

TEST(rdzv_survivors_keep_their_order_and_newcomers_follow)
{
    /* Generation 5 had ranks 0..2 = c, a, b; b is gone; d, e are new; f is
     * a member of an older generation (counts as new). */
    rdzv__record recs[5] = {
        sample_record(1, "d", 0, -1), sample_record(2, "a", 5, 1),  sample_record(3, "f", 3, 0),
        sample_record(4, "c", 5, 0),  sample_record(5, "e", 0, -1),
    };
    size_t admitted = rdzv__order_members(recs, 5, 5, 4);
    ASSERT_EQ(admitted, 4);
    ASSERT_STR_EQ(recs[0].node_id, "c");
    ASSERT_STR_EQ(recs[1].node_id, "a");
    ASSERT_STR_EQ(recs[2].node_id, "d");
    ASSERT_STR_EQ(recs[3].node_id, "f");
    ASSERT_STR_EQ(recs[4].node_id, "e"); /* beyond max_nodes: stays a spare */
    rdzv__assignment out[4];
    recs[1].local_world_size = 2;
    rdzv__assign_all(recs, 4, 6, 0, out);
    ASSERT_EQ(out[0].rank_base, 0);
    ASSERT_EQ(out[1].rank_base, 8);
    ASSERT_EQ(out[2].rank_base, 10);
    ASSERT_EQ(out[3].world_size, 26);
    ASSERT_EQ(out[3].next_slot, recs[0].slot); /* the ring closes */
    ASSERT_STR_EQ(out[2].master_addr, recs[0].addr);
}

TEST(rdzv_newcomers_take_their_preferred_ranks)
{
    /* A first generation under Slurm: each node prefers its SLURM_PROCID,
     * whatever order they arrived in; one without a preference comes last;
     * a survivor still keeps its place before every newcomer. */
    rdzv__record recs[4] = { sample_record(1, "p2", 0, -1), sample_record(2, "none", 0, -1),
                             sample_record(3, "p0", 0, -1), sample_record(4, "p1", 0, -1) };
    recs[0].preferred_rank = 2;
    recs[2].preferred_rank = 0;
    recs[3].preferred_rank = 1;
    ASSERT_EQ(rdzv__order_members(recs, 4, 0, 4), 4);
    ASSERT_STR_EQ(recs[0].node_id, "p0");
    ASSERT_STR_EQ(recs[1].node_id, "p1");
    ASSERT_STR_EQ(recs[2].node_id, "p2");
    ASSERT_STR_EQ(recs[3].node_id, "none");
    rdzv__record later[3] = { sample_record(1, "spare", 0, -1), sample_record(2, "old1", 3, 1),
                              sample_record(3, "old0", 3, 0) };
    later[0].preferred_rank = 0;
    ASSERT_EQ(rdzv__order_members(later, 3, 3, 3), 3);
    ASSERT_STR_EQ(later[0].node_id, "old0");
    ASSERT_STR_EQ(later[1].node_id, "old1");
    ASSERT_STR_EQ(later[2].node_id, "spare");
}

/* A member's node id reaches file names, metrics and scontrol: one that
 * could not be a host name (a host list expression would drain every node
 * it names) is refused when a node asks to join with it, and a record that
 * carries one (written into the store by anyone else) is no member. */
TEST(rdzv_a_node_id_that_could_not_be_a_host_name_is_refused)
{
    const char *bad[] = { "gpu[001-512],login01-1", "a,b", "-node", ".node", "node;x", NULL };
    for (int i = 0; bad[i] != NULL; i++) {
        rdzv__record rec = sample_record(1, bad[i], 0, -1);
        char buf[RDZV__MAX_RECORD];
        size_t len = rdzv__record_encode(&rec, buf, sizeof buf);
        ASSERT(len > 0);
        rdzv__record back;
        ASSERT_EQ(rdzv__record_decode(buf, len, &back), ELASTIC_ECORRUPT);
        elastic_rdzv_opts o;
        elastic_rdzv_opts_init(&o, sizeof o);
        o.run_id = "names";
        o.node_id = bad[i];
        elastic_rdzv *r = NULL;
        ASSERT_EQ(elastic_rdzv_open(&o, &r), ELASTIC_EINVAL);
        ASSERT(strstr(elastic_last_error(), "could not be a host name") != NULL);
        ASSERT(r == NULL);
    }
    rdzv__record ok = sample_record(1, "gpu001.cluster_a-4242-0badcafe", 0, -1), back;
    char buf[RDZV__MAX_RECORD];
    size_t len = rdzv__record_encode(&ok, buf, sizeof buf);
    ASSERT_OK(rdzv__record_decode(buf, len, &back));
}
