/* The hang probe's decision: startup timeout before the first beat, hang
 * timeout after it, and a re-baseline for a survivor's new generation. */
#include "test.h"
#include "probe/probe.h"

#define MS 1000000ull

TEST(probe_hang_uses_startup_timeout_before_first_beat)
{
    probe__hang_state state;
    channel__hb_snapshot snap = { 0 };
    probe__hang_start(&state, &snap, 1000 * MS);
    uint64_t silent;
    bool started;
    ASSERT(!probe__hang_check(&state, &snap, 1000 * MS + 4000 * MS, 100 * MS, 5000 * MS, &silent,
                              &started));
    ASSERT(!started);
    ASSERT_EQ(silent, 4000 * MS);
    ASSERT(probe__hang_check(&state, &snap, 1000 * MS + 5001 * MS, 100 * MS, 5000 * MS, &silent,
                             &started));
}

TEST(probe_hang_uses_hang_timeout_after_first_beat)
{
    probe__hang_state state;
    channel__hb_snapshot snap = { 0 };
    probe__hang_start(&state, &snap, 1000 * MS);
    snap.beats = 3;
    snap.last_beat_ns = 1200 * MS;
    uint64_t silent;
    bool started;
    ASSERT(!probe__hang_check(&state, &snap, 1250 * MS, 100 * MS, 5000 * MS, &silent, &started));
    ASSERT(started);
    ASSERT_EQ(silent, 50 * MS);
    ASSERT(probe__hang_check(&state, &snap, 1301 * MS, 100 * MS, 5000 * MS, &silent, &started));
    ASSERT_EQ(silent, 101 * MS);
}

TEST(probe_hang_rebaselines_a_survivor)
{
    probe__hang_state state;
    channel__hb_snapshot snap = { .beats = 50, .last_beat_ns = 900 * MS };
    probe__hang_start(&state, &snap, 1000 * MS); /* new generation: old beats do not count */
    uint64_t silent;
    bool started;
    ASSERT(!probe__hang_check(&state, &snap, 1500 * MS, 100 * MS, 5000 * MS, &silent, &started));
    ASSERT(!started);
    ASSERT_EQ(silent, 500 * MS);
    snap.beats = 51;
    snap.last_beat_ns = 1600 * MS;
    ASSERT(!probe__hang_check(&state, &snap, 1650 * MS, 100 * MS, 5000 * MS, &silent, &started));
    ASSERT(started);
}

TEST(probe_hang_zero_timeout_disables)
{
    probe__hang_state state;
    channel__hb_snapshot snap = { 0 };
    probe__hang_start(&state, &snap, 0);
    uint64_t silent;
    bool started;
    ASSERT(!probe__hang_check(&state, &snap, 1000000 * MS, 0, 0, &silent, &started));
}
