/*
 * timeutil: the process's clock offset (time_now_ms follows the
 * database's clock, time_host_ms stays the host's), and the ISO forms.
 */
#include "util/compat.h"

#include "test.h"
#include "util/timeutil.h"

TEST(offset_moves_now_and_not_the_host_clock)
{
	int64_t host, now, diff;

	ASSERT_EQ(time_offset_ms(), 0);
	host = time_host_ms();
	now = time_now_ms();
	ASSERT(now - host >= 0 && now - host < 1000);
	time_set_offset_ms(-600000); /* this host ten minutes ahead */
	ASSERT_EQ(time_offset_ms(), -600000);
	diff = time_now_ms() - time_host_ms();
	ASSERT(diff <= -599000 && diff >= -601000);
	time_set_offset_ms(0);
	diff = time_now_ms() - time_host_ms();
	ASSERT(diff >= 0 && diff < 1000);
}

TEST(iso_round_trip)
{
	char out[40];

	time_fmt_iso(1795000000123LL, out, sizeof(out));
	ASSERT_STREQ(out, "2026-11-18T11:06:40.123Z");
	ASSERT_EQ(time_parse_iso(out), 1795000000123LL);
	ASSERT_EQ(time_parse_iso("not a time"), 0);
}
