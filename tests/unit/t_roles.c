/*
 * The route table carries the role each route needs (server_int.h,
 * struct route): this walks every route of it, so none is forgotten.
 * A route without a role needs admin (fail closed) but is refused here;
 * one that proves its requests itself (ROUTE_F_SIGNED) is public;
 * every POST decides, steers or configures, so needs at least operator;
 * whatever touches tokens needs admin; a public route must say so
 * (ROLE_PUBLIC) on purpose. The HTTP side, each role against each
 * route, is in tests/integration/t0150-roles.sh.
 */
#include "util/compat.h"

#include "server/server.h"
#include "server/server_int.h"
#include "test.h"

TEST(every_route_has_a_role)
{
	size_t i;

	ASSERT(api_nr_routes > 20);
	for (i = 0; i < api_nr_routes; i++) {
		const struct route *r = &api_routes[i];

		if (r->role == ROLE_UNSET)
			test_fail(__FILE__, __LINE__, "%s %s has no role",
				  r->method, r->pattern);
		ASSERT(r->role <= ROLE_ADMIN);
	}
}

TEST(signed_routes_are_public_and_writes_need_operator)
{
	size_t i;

	for (i = 0; i < api_nr_routes; i++) {
		const struct route *r = &api_routes[i];

		if (r->flags & ROUTE_F_SIGNED)
			ASSERT_EQ(r->role, ROLE_PUBLIC);
		if (r->role == ROLE_PUBLIC)
			continue;
		if (!strcmp(r->method, "POST") && r->role < ROLE_OPERATOR)
			test_fail(__FILE__, __LINE__,
				  "POST %s changes things but needs only %s",
				  r->pattern, api_role_name(r->role));
		if (strstr(r->pattern, "/tokens") && r->role != ROLE_ADMIN)
			test_fail(__FILE__, __LINE__, "%s %s is not admin",
				  r->method, r->pattern);
	}
}

TEST(the_live_stream_is_read_only)
{
	size_t i;
	int seen = 0;

	for (i = 0; i < api_nr_routes; i++)
		if (api_routes[i].flags & ROUTE_F_QUERY_TOKEN) {
			ASSERT_EQ(api_routes[i].role, ROLE_VIEWER);
			seen++;
		}
	ASSERT_EQ(seen, 3); /* the live stream (SSE, WebSocket), a chat reply */
}
