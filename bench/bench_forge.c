/*
 * bench_forge: what the GitHub client (src/forge/github.h) costs for the
 * listings a forge sync makes, against the forge double
 * (tests/mock/forgedouble.py) that bench_forge.sh filled.
 *
 *   bench_forge URL TOKEN [--label L] [--rounds R]
 *
 * For each listing (the open issues with label L, default "baton", and
 * the open pull requests) it makes:
 *
 *   cold  a client with no ETag: every page fetched (the "without
 *         ETags" figure, and the first sync's);
 *   warm  the same client again, nothing changed: the ETag of the first
 *         page makes it one conditional request answered 304;
 *
 * R times each (default 5), and prints per listing the items, the API
 * calls and 304s of a round and the median wall time of a round. Then
 * the ratio of the calls cold and warm. Figures are reported, never
 * asserted; it exits 1 only when a request fails.
 */
#include "util/compat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "forge/github.h"
#include "util/err.h"

struct round {
	size_t items;
	uint64_t calls, not_modified;
	double ms;
};

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One listing on c; the counters are the listing's alone. */
static void
list_once(struct gh_client *c, const char *what, const char *label,
	  struct round *r)
{
	struct err e = ERR_INIT;
	uint64_t calls = c->calls, nm = c->not_modified;
	json_t *out = NULL;
	int64_t t0 = mono_ns();
	int rc, unchanged = 0;

	if (strcmp(what, "issues") == 0)
		rc = gh_issues_with_label(c, label, &out, &unchanged, &e);
	else
		rc = gh_list(c, "/repos/acme/app/pulls?state=open", &out,
			     &unchanged, &e);
	if (rc < 0)
		fail("%s listing: %s", what, e.msg);
	r->ms = (double)(mono_ns() - t0) / 1e6;
	r->items = out ? json_array_size(out) : 0;
	r->calls = c->calls - calls;
	r->not_modified = c->not_modified - nm;
	json_decref(out);
}

static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void
bench_listing(const char *url, const char *token, const char *what,
	      const char *label, int rounds)
{
	double cold_ms[64], warm_ms[64];
	struct round cold = { 0 }, warm = { 0 };
	int i;

	for (i = 0; i < rounds; i++) {
		struct gh_client c;
		struct err e = ERR_INIT;

		if (gh_client_init(&c, url, "acme/app", token, "GITHUB_TOKEN",
				   &e) < 0)
			fail("%s", e.msg);
		list_once(&c, what, label, &cold);
		cold_ms[i] = cold.ms;
		list_once(&c, what, label, &warm);
		warm_ms[i] = warm.ms;
		gh_client_release(&c);
	}
	printf("%-7s without ETags: %5zu items, %3llu calls, %8.1f ms "
	       "(median of %d)\n", what, cold.items,
	       (unsigned long long)cold.calls, median(cold_ms, rounds),
	       rounds);
	printf("%-7s with ETags, unchanged: %llu call(s), %llu answered "
	       "304, %6.1f ms\n", what, (unsigned long long)warm.calls,
	       (unsigned long long)warm.not_modified,
	       median(warm_ms, rounds));
	printf("%s_calls_cold=%llu %s_calls_warm=%llu %s_304=%llu "
	       "%s_ms_cold=%.1f %s_ms_warm=%.1f\n", what,
	       (unsigned long long)cold.calls, what,
	       (unsigned long long)warm.calls, what,
	       (unsigned long long)warm.not_modified, what,
	       median(cold_ms, rounds), what, median(warm_ms, rounds));
	printf("%s: unchanged listing costs %.3f of a full one in calls "
	       "(%llu / %llu), %.1fx faster\n\n", what,
	       cold.calls ? (double)warm.calls / (double)cold.calls : 0,
	       (unsigned long long)warm.calls,
	       (unsigned long long)cold.calls,
	       median(warm_ms, rounds) > 0 ?
		       median(cold_ms, rounds) / median(warm_ms, rounds) : 0);
}

int
main(int argc, char **argv)
{
	const char *label = "baton";
	int rounds = 5, i;

	bench_name = "bench_forge";
	if (argc < 3)
		fail("usage: bench_forge URL TOKEN [--label L] [--rounds R]");
	for (i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--label") == 0 && i + 1 < argc)
			label = argv[++i];
		else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = (int)count_arg(argv[++i], "--rounds");
		else
			fail("unknown argument '%s'", argv[i]);
	}
	if (rounds > 64)
		rounds = 64;
	bench_listing(argv[1], argv[2], "issues", label, rounds);
	bench_listing(argv[1], argv[2], "pulls", label, rounds);
	return 0;
}
