/*
 * The GitHub REST client (src/forge/github.c, issue 19) against the forge
 * double tests/mock/forgedouble.py, started fresh for each test.
 */
#include "util/compat.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "forge/github.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/redact.h"
#include "util/xalloc.h"

/* A test races bare child processes against each other: banned.h keeps
 * fork and waitpid for spawn.c in baton itself, not here. */
#undef fork
#undef kill
#undef waitpid

#define TOKEN "ghp_unit_secret_0123456789"

static pid_t double_pid;
static char double_url[64];

static void
stop_double(void)
{
	if (double_pid > 0) {
		kill(double_pid, SIGTERM);
		waitpid(double_pid, NULL, 0);
		double_pid = 0;
	}
}

/*
 * Starts the double with token TOKEN and reads its base URL from its
 * stdout (the first line it prints, once it listens). The double dies
 * with the test (PR_SET_PDEATHSIG), also when an assertion _exits.
 */
static void
start_double(void)
{
	int fd[2];
	FILE *f;
	size_t n;

	ASSERT(pipe(fd) == 0);
	double_pid = fork();
	ASSERT(double_pid >= 0);
	if (double_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(fd[1], STDOUT_FILENO);
		close(fd[0]);
		close(fd[1]);
		execlp("python3", "python3", "tests/mock/forgedouble.py",
		       "--token", TOKEN, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	f = fdopen(fd[0], "r");
	ASSERT(f != NULL);
	ASSERT(fgets(double_url, sizeof(double_url), f) != NULL);
	fclose(f);
	n = strcspn(double_url, "\r\n");
	double_url[n] = '\0';
	ASSERT(!strncmp(double_url, "http://127.0.0.1:", 17));
}

/* A control request to the double (POST /_double/VERB). */
static void
control(struct gh_client *c, const char *verb, json_t *body)
{
	struct gh_response r;
	struct err e = ERR_INIT;
	char path[128];

	snprintf(path, sizeof(path), "%s/_double/%s", double_url, verb);
	ASSERT_OK(gh_request(c, "POST", path, body, &r, &e), &e);
	gh_response_release(&r);
	json_decref(body);
}

static void
client(struct gh_client *c, const char *token)
{
	struct err e = ERR_INIT;

	ASSERT_OK(gh_client_init(c, double_url, "acme/app", token,
				 "GITHUB_TOKEN", &e), &e);
}

static int
count_waits(void *arg, int64_t seconds, const char *why)
{
	int64_t *total = arg;

	(void)why;
	*total += seconds;
	return 0; /* the test does not sleep: the double has no clock */
}

static int
refuse_waits(void *arg, int64_t seconds, const char *why)
{
	(void)arg;
	(void)seconds;
	(void)why;
	return 1;
}

TEST(pagination_follows_link_over_250_issues_in_3_pages)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	json_t *all;
	int nm = 1, i;

	start_double();
	client(&c, TOKEN);
	for (i = 1; i <= 250; i++)
		control(&c, "issue", json_pack("{s:s, s:[s]}", "title", "t",
					       "labels", "baton"));
	control(&c, "issue", json_pack("{s:s, s:[s]}", "title", "other",
				       "labels", "other"));
	c.calls = 0;
	ASSERT_OK(gh_issues_with_label(&c, "baton", &all, &nm, &e), &e);
	ASSERT_EQ(nm, 0);
	ASSERT_EQ(json_array_size(all), 250);
	ASSERT_EQ(c.calls, 3);
	json_decref(all);
	gh_client_release(&c);
	stop_double();
}

TEST(second_listing_answers_304_with_no_new_data)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	json_t *all;
	int nm = 0;

	start_double();
	client(&c, TOKEN);
	control(&c, "issue", json_pack("{s:s, s:[s]}", "title", "a", "labels",
				       "baton"));
	ASSERT_OK(gh_issues_with_label(&c, "baton", &all, &nm, &e), &e);
	ASSERT_EQ(json_array_size(all), 1);
	json_decref(all);
	c.calls = 0;
	ASSERT_OK(gh_issues_with_label(&c, "baton", &all, &nm, &e), &e);
	ASSERT_EQ(nm, 1);
	ASSERT(all == NULL);
	ASSERT_EQ(c.calls, 1);
	ASSERT_EQ(c.not_modified, 1);
	/* a change is seen */
	control(&c, "issue", json_pack("{s:s, s:[s]}", "title", "b", "labels",
				       "baton"));
	ASSERT_OK(gh_issues_with_label(&c, "baton", &all, &nm, &e), &e);
	ASSERT_EQ(nm, 0);
	ASSERT_EQ(json_array_size(all), 2);
	json_decref(all);
	gh_client_release(&c);
	stop_double();
}

TEST(secondary_rate_limit_waits_retry_after_and_goes_on)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	json_t *issue;
	int64_t waited = 0;

	start_double();
	client(&c, TOKEN);
	control(&c, "issue", json_pack("{s:s}", "title", "a"));
	control(&c, "fail", json_pack("{s:s, s:i}", "kind", "secondary",
				      "retry_after", 7));
	c.wait = count_waits;
	c.wait_arg = &waited;
	ASSERT_OK(gh_issue_get(&c, 1, &issue, &e), &e);
	ASSERT_EQ(json_integer_value(json_object_get(issue, "number")), 1);
	ASSERT_EQ(waited, 7);
	ASSERT_EQ(c.waits, 1);
	json_decref(issue);
	gh_client_release(&c);
	stop_double();
}

TEST(primary_rate_limit_is_reported_with_its_reset)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	json_t *issue = NULL;

	start_double();
	client(&c, TOKEN);
	control(&c, "issue", json_pack("{s:s}", "title", "a"));
	control(&c, "fail", json_pack("{s:s}", "kind", "primary"));
	c.wait = refuse_waits;
	ASSERT_EQ(gh_issue_get(&c, 1, &issue, &e), BATON_EBUSY);
	ASSERT_CONTAINS(e.msg, "primary rate limit");
	ASSERT_CONTAINS(e.msg, "GET /repos/acme/app/issues/1: 403");
	ASSERT_EQ(c.rate_remaining, 0);
	ASSERT(c.rate_reset > (int64_t)time(NULL));
	gh_client_release(&c);
	stop_double();
}

TEST(a_422_names_the_endpoint_and_githubs_message)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	json_t *pr = NULL;

	start_double();
	client(&c, TOKEN);
	ASSERT_OK(gh_pull_create(&c, "t", "baton/r3-x", "main", "b", 0, &pr,
				 &e), &e);
	json_decref(pr);
	ASSERT_EQ(gh_pull_create(&c, "t", "baton/r3-x", "main", "b", 0, &pr,
				 &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "POST /repos/acme/app/pulls: 422 A pull "
			       "request already exists for acme:baton/r3-x");
	gh_client_release(&c);
	stop_double();
}

TEST(a_401_names_the_variable_never_the_token)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	json_t *issue = NULL;

	start_double();
	client(&c, "ghp_wrong_secret_987654");
	ASSERT_EQ(gh_issue_get(&c, 1, &issue, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "401 Bad credentials");
	ASSERT_CONTAINS(e.msg, "$GITHUB_TOKEN");
	ASSERT(!strstr(e.msg, "ghp_wrong_secret"));
	gh_client_release(&c);
	stop_double();
}

TEST(the_log_is_kept_bounded_and_has_no_token)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	struct buf path = BUF_INIT, text = BUF_INIT;
	json_t *x = NULL;
	struct stat st;
	time_t now = time(NULL);
	struct tm tm;
	char day[16];
	int i;

	start_double();
	client(&c, TOKEN);
	c.log_dir = strdup(test_tmpdir());
	c.log_cap = 16384;
	/* a comment that echoes the token: the log must not keep it */
	control(&c, "issue", json_pack("{s:s}", "title", "a"));
	ASSERT_OK(gh_issue_comment(&c, 1, "leak " TOKEN, &x, &e), &e);
	json_decref(x);
	for (i = 0; i < 40; i++) {
		ASSERT_OK(gh_issue_get(&c, 1, &x, &e), &e);
		json_decref(x);
	}
	gmtime_r(&now, &tm);
	strftime(day, sizeof(day), "%Y-%m-%d", &tm);
	buf_addf(&path, "%s/log-%s.jsonl", test_tmpdir(), day);
	ASSERT_EQ(stat(path.ptr, &st), 0);
	ASSERT(st.st_size <= 16384 + 256);
	ASSERT_EQ(st.st_mode & 0777, 0600);
	ASSERT_OK(fs_read(path.ptr, &text, 1 << 20, &e), &e);
	ASSERT(!strstr(text.ptr, TOKEN));
	ASSERT_CONTAINS(text.ptr, "[redacted:GITHUB_TOKEN]");
	ASSERT_CONTAINS(text.ptr, "\"capped\":true");
	ASSERT_CONTAINS(text.ptr, "\"path\":\"/repos/acme/app/issues/1\"");
	buf_release(&path);
	buf_release(&text);
	gh_client_release(&c);
	stop_double();
}

static void
today(char *day, size_t n, int days_ago)
{
	time_t t = time(NULL) - (time_t)days_ago * 86400;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(day, n, "%Y-%m-%d", &tm);
}

TEST(a_link_planted_at_the_log_path_is_refused_not_followed)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	struct buf path = BUF_INIT, target = BUF_INIT, text = BUF_INIT;
	json_t *x = NULL;
	char day[16];

	start_double();
	client(&c, TOKEN);
	c.log_dir = xasprintf("%s/forge", test_tmpdir());
	ASSERT(mkdir(c.log_dir, 0700) == 0);
	today(day, sizeof(day), 0);
	buf_addf(&target, "%s/elsewhere", test_tmpdir());
	ASSERT_OK(fs_write_atomic(target.ptr, "mine\n", 5, &e), &e);
	buf_addf(&path, "%s/log-%s.jsonl", c.log_dir, day);
	ASSERT(symlink(target.ptr, path.ptr) == 0);
	control(&c, "issue", json_pack("{s:s}", "title", "a"));
	ASSERT_OK(gh_issue_get(&c, 1, &x, &e), &e);
	json_decref(x);
	ASSERT(c.log_error != NULL);
	ASSERT_CONTAINS(c.log_error, "symbolic link");
	ASSERT_OK(fs_read(target.ptr, &text, 1 << 20, &e), &e);
	ASSERT_STREQ(text.ptr, "mine\n");
	buf_release(&path);
	buf_release(&target);
	buf_release(&text);
	gh_client_release(&c);
	stop_double();
}

TEST(a_log_dir_that_is_a_link_is_refused)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	struct buf real = BUF_INIT;
	json_t *x = NULL;

	start_double();
	client(&c, TOKEN);
	buf_addf(&real, "%s/real", test_tmpdir());
	ASSERT(mkdir(real.ptr, 0700) == 0);
	c.log_dir = xasprintf("%s/forge", test_tmpdir());
	ASSERT(symlink(real.ptr, c.log_dir) == 0);
	control(&c, "issue", json_pack("{s:s}", "title", "a"));
	ASSERT_OK(gh_issue_get(&c, 1, &x, &e), &e);
	json_decref(x);
	ASSERT(c.log_error != NULL);
	ASSERT_CONTAINS(c.log_error, "forge log:");
	ASSERT(rmdir(real.ptr) == 0); /* nothing was written there */
	buf_release(&real);
	gh_client_release(&c);
	stop_double();
}

TEST(the_log_dir_is_made_0700_and_old_days_are_pruned)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	char old[16], kept[16], *p_old, *p_kept, *p_other;
	json_t *x = NULL;
	struct stat st;

	start_double();
	client(&c, TOKEN);
	c.log_dir = xasprintf("%s/new/forge", test_tmpdir());
	c.log_keep_days = 7;
	ASSERT_OK(fs_mkdir_p(c.log_dir, 0700, &e), &e);
	today(old, sizeof(old), 7);  /* the 8th day back: goes */
	today(kept, sizeof(kept), 6); /* the 7th: stays */
	p_old = xasprintf("%s/log-%s.jsonl", c.log_dir, old);
	p_kept = xasprintf("%s/log-%s.jsonl", c.log_dir, kept);
	p_other = xasprintf("%s/notes.txt", c.log_dir);
	ASSERT_OK(fs_write_atomic(p_old, "{}\n", 3, &e), &e);
	ASSERT_OK(fs_write_atomic(p_kept, "{}\n", 3, &e), &e);
	ASSERT_OK(fs_write_atomic(p_other, "x\n", 2, &e), &e);
	control(&c, "issue", json_pack("{s:s}", "title", "a"));
	ASSERT_OK(gh_issue_get(&c, 1, &x, &e), &e);
	json_decref(x);
	ASSERT(c.log_error == NULL);
	ASSERT(!fs_exists(p_old));
	ASSERT(fs_exists(p_kept));
	ASSERT(fs_exists(p_other));
	ASSERT_EQ(stat(c.log_dir, &st), 0);
	ASSERT_EQ(st.st_mode & 0777, 0700);
	free(p_old);
	free(p_kept);
	free(p_other);
	gh_client_release(&c);
	stop_double();
}

TEST(the_log_redacts_the_secrets_redact_knows_too)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	struct buf path = BUF_INIT, text = BUF_INIT;
	char var[] = "DEPLOY_KEY=dk_live_9f8e7d6c5b4a";
	char *envp[] = { var, NULL };
	json_t *x = NULL;
	char day[16];

	redact_init(envp, NULL);
	start_double();
	client(&c, TOKEN);
	c.log_dir = strdup(test_tmpdir());
	control(&c, "issue", json_pack("{s:s}", "title", "a"));
	/* in a body, and in a URL (a query GitHub would ignore) */
	ASSERT_OK(gh_issue_comment(&c, 1, "key dk_live_9f8e7d6c5b4a", &x, &e),
		  &e);
	json_decref(x);
	ASSERT_EQ(gh_issue_get(&c, 999, &x, &e), BATON_EINVAL);
	{
		struct gh_response r;

		ASSERT_OK(gh_request(&c, "GET", "/repos/acme/app/issues/1?"
				     "k=dk_live_9f8e7d6c5b4a&t=" TOKEN, NULL,
				     &r, &e), &e);
		gh_response_release(&r);
	}
	today(day, sizeof(day), 0);
	buf_addf(&path, "%s/log-%s.jsonl", test_tmpdir(), day);
	ASSERT_OK(fs_read(path.ptr, &text, 1 << 22, &e), &e);
	ASSERT(!strstr(text.ptr, "dk_live_9f8e7d6c5b4a"));
	ASSERT(!strstr(text.ptr, TOKEN));
	ASSERT_CONTAINS(text.ptr, "[redacted:DEPLOY_KEY]");
	ASSERT_CONTAINS(text.ptr, "k=[redacted:DEPLOY_KEY]&t=[redacted:"
				  "GITHUB_TOKEN]");
	ASSERT_CONTAINS(text.ptr, "\"authorization\":\"Bearer [redacted:"
				  "GITHUB_TOKEN]\"");
	redact_reset();
	buf_release(&path);
	buf_release(&text);
	gh_client_release(&c);
	stop_double();
}

/*
 * Where the wrappers below talk: FORGE_URL when set (t0075 sets it to
 * Prism in front of a double it started, FORGE_DOUBLE_URL, with the token
 * FORGE_TOKEN), else a double of our own.
 */
static const char *
forge_target(char *token, size_t n)
{
	const char *url = getenv("FORGE_URL"), *dbl = getenv("FORGE_DOUBLE_URL");
	const char *tok = getenv("FORGE_TOKEN");

	if (url && *url && dbl && *dbl && tok && *tok) {
		snprintf(double_url, sizeof(double_url), "%s", dbl);
		snprintf(token, n, "%s", tok);
		return url;
	}
	start_double();
	snprintf(token, n, "%s", TOKEN);
	return double_url;
}

/* Each wrapper of github.h once, in the order a sync and a run use them. */
static void
exercise_every_wrapper(struct gh_client *c, const char *head)
{
	struct err e = ERR_INIT;
	const char *labels[] = { "area:src", "priority:2", NULL };
	json_t *x = NULL, *pr = NULL;
	const char *sha;
	char ref[128];
	long n, issue;
	int nm = 1;

	control(c, "issue", json_pack("{s:s, s:s, s:[s]}", "title", "one",
				      "body", "the first", "labels", "baton"));
	ASSERT_OK(gh_issues_with_label(c, "baton", &x, &nm, &e), &e);
	ASSERT_EQ(nm, 0);
	ASSERT(json_array_size(x) >= 1);
	issue = json_integer_value(json_object_get(
		json_array_get(x, json_array_size(x) - 1), "number"));
	ASSERT(issue > 0);
	json_decref(x);
	/* unchanged: one conditional request, answered 304 */
	ASSERT_OK(gh_issues_with_label(c, "baton", &x, &nm, &e), &e);
	ASSERT_EQ(nm, 1);
	ASSERT(x == NULL);
	ASSERT_OK(gh_issue_get(c, issue, &x, &e), &e);
	ASSERT_STREQ(json_string_value(json_object_get(x, "title")), "one");
	json_decref(x);
	ASSERT_OK(gh_issue_comment(c, issue, "baton started a run", &x, &e),
		  &e);
	ASSERT_STREQ(json_string_value(json_object_get(x, "body")),
		     "baton started a run");
	json_decref(x);
	ASSERT_OK(gh_labels_add(c, issue, labels, &e), &e);

	ASSERT_OK(gh_pull_create(c, "Add a flag", head, "main",
				 "Closes #1", 0, &pr, &e), &e);
	n = (long)json_integer_value(json_object_get(pr, "number"));
	sha = json_string_value(json_object_get(json_object_get(pr, "head"),
						"sha"));
	ASSERT(n > 0 && sha);
	snprintf(ref, sizeof(ref), "%s", sha);
	json_decref(pr);
	ASSERT_OK(gh_pull_get(c, n, &x, &e), &e);
	ASSERT_EQ(json_integer_value(json_object_get(x, "number")), n);
	json_decref(x);
	ASSERT_OK(gh_pulls_for_head(c, head, &x, &e), &e);
	ASSERT_EQ(json_array_size(x), 1);
	json_decref(x);

	control(c, "review", json_pack("{s:I, s:s, s:s}", "pull",
				       (json_int_t)n, "state",
				       "CHANGES_REQUESTED", "body", "fix it"));
	control(c, "review_comment",
		json_pack("{s:I, s:s, s:i, s:s}", "pull", (json_int_t)n,
			  "path", "cli.sh", "line", 3, "body", "quote this"));
	ASSERT_OK(gh_pull_reviews(c, n, &x, &e), &e);
	ASSERT_STREQ(json_string_value(json_object_get(json_array_get(x, 0),
						       "state")),
		     "CHANGES_REQUESTED");
	json_decref(x);
	ASSERT_OK(gh_pull_review_comments(c, n, &x, &e), &e);
	ASSERT_STREQ(json_string_value(json_object_get(json_array_get(x, 0),
						       "path")), "cli.sh");
	json_decref(x);

	control(c, "status", json_pack("{s:s, s:s, s:s, s:s, s:s}", "sha", ref,
				       "state", "failure", "context", "ci/test",
				       "description", "2 tests failed",
				       "target_url", "https://ci.example/1"));
	control(c, "check_run",
		json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s}}", "sha", ref,
			  "name", "build", "status", "completed",
			  "conclusion", "failure", "output", "title",
			  "build failed", "summary", "make: *** [all] Error 2"));
	ASSERT_OK(gh_statuses(c, ref, &x, &e), &e);
	ASSERT_EQ(json_array_size(x), 1);
	json_decref(x);
	ASSERT_OK(gh_combined_status(c, ref, &x, &e), &e);
	ASSERT_STREQ(json_string_value(json_object_get(x, "state")),
		     "failure");
	json_decref(x);
	ASSERT_OK(gh_check_runs(c, ref, &x, &e), &e);
	ASSERT_EQ(json_integer_value(json_object_get(x, "total_count")), 1);
	json_decref(x);

	ASSERT_OK(gh_pull_merge(c, n, "squash", &x, &e), &e);
	ASSERT(json_is_true(json_object_get(x, "merged")));
	json_decref(x);
}

TEST(every_wrapper_against_forge_url_or_the_double)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	char token[128];
	const char *url = forge_target(token, sizeof(token));

	ASSERT_OK(gh_client_init(&c, url, "acme/app", token, "GITHUB_TOKEN",
				 &e), &e);
	exercise_every_wrapper(&c, "baton/r1-every-wrapper");
	gh_client_release(&c);
	stop_double();
}

/*
 * GitHub's error answers, as the double gives them, through FORGE_URL
 * when set (Prism checks them against the statuses the description
 * lists for each endpoint): a 422 with its errors, a 404, and a 403
 * secondary rate limit waited out.
 */
TEST(error_answers_against_forge_url_or_the_double)
{
	struct gh_client c;
	struct err e = ERR_INIT;
	char token[128];
	const char *url = forge_target(token, sizeof(token));
	json_t *x = NULL;
	int64_t waited = 0;
	char head[64];
	long n;

	ASSERT_OK(gh_client_init(&c, url, "acme/app", token, "GITHUB_TOKEN",
				 &e), &e);
	snprintf(head, sizeof(head), "baton/r%ld-twice", (long)getpid());
	ASSERT_OK(gh_pull_create(&c, "t", head, "main", "b", 0, &x, &e), &e);
	n = (long)json_integer_value(json_object_get(x, "number"));
	json_decref(x);
	ASSERT_EQ(gh_pull_create(&c, "t", head, "main", "b", 0, &x, &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "POST /repos/acme/app/pulls: 422 A pull "
			       "request already exists for acme:");
	ASSERT_EQ(gh_issue_get(&c, 99999, &x, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "GET /repos/acme/app/issues/99999: 404 Not "
			       "Found");
	control(&c, "fail", json_pack("{s:s, s:i}", "kind", "secondary",
				      "retry_after", 3));
	c.wait = count_waits;
	c.wait_arg = &waited;
	ASSERT_OK(gh_pull_get(&c, n, &x, &e), &e);
	json_decref(x);
	ASSERT_EQ(waited, 3);
	gh_client_release(&c);
	stop_double();
}

/*
 * The corrupt_answer_fails_* tests run only through Prism (t0075 sets
 * FORGE_PRISM): the double is told to drop a required field from its
 * next answer (POST /_double/corrupt), and the wrapper must then fail
 * with Prism's 500, which shows that Prism checks that answer at all.
 */
struct fixture {
	long issue, pull;
	char sha[64], head[64];
};

static int
through_prism(void)
{
	const char *p = getenv("FORGE_PRISM");

	if (p && *p && getenv("FORGE_URL"))
		return 1;
	printf("    (no FORGE_PRISM: nothing checks the answers; "
	       "t0075 runs this)\n");
	return 0;
}

static void
fixture(struct gh_client *c, struct fixture *f)
{
	struct err e = ERR_INIT;
	char token[128];
	const char *url = forge_target(token, sizeof(token));
	json_t *x;

	ASSERT_OK(gh_client_init(c, url, "acme/app", token, "GITHUB_TOKEN",
				 &e), &e);
	snprintf(f->head, sizeof(f->head), "baton/r%ld-corrupt",
		 (long)getpid());
	control(c, "issue", json_pack("{s:s, s:[s]}", "title", "c", "labels",
				      "baton"));
	ASSERT_OK(gh_pull_create(c, "c", f->head, "main", "b", 0, &x, &e),
		  &e);
	f->pull = (long)json_integer_value(json_object_get(x, "number"));
	f->issue = f->pull;
	snprintf(f->sha, sizeof(f->sha), "%s",
		 json_string_value(json_object_get(json_object_get(x, "head"),
						   "sha")));
	json_decref(x);
	control(c, "review", json_pack("{s:I, s:s}", "pull",
				       (json_int_t)f->pull, "state",
				       "APPROVED"));
	control(c, "review_comment",
		json_pack("{s:I, s:s, s:i, s:s}", "pull", (json_int_t)f->pull,
			  "path", "a.c", "line", 1, "body", "b"));
	control(c, "status", json_pack("{s:s, s:s, s:s}", "sha", f->sha,
				       "state", "success", "context", "ci"));
	control(c, "check_run", json_pack("{s:s, s:s, s:s}", "sha", f->sha,
					  "name", "build", "conclusion",
					  "success"));
	control(c, "corrupt", json_pack("{s:i}", "count", 1));
}

static void
expect_violation(struct gh_client *c, int rc, struct err *e)
{
	ASSERT(rc < 0);
	/* Prism's problem+json, its first violation in the message */
	ASSERT_CONTAINS(e->msg, ": 500 Response body");
	ASSERT_CONTAINS(e->msg, "required property");
	gh_client_release(c);
}

#define CORRUPT_TEST(name, call)                                              \
	TEST(corrupt_answer_fails_##name)                                     \
	{                                                                     \
		struct gh_client c;                                           \
		struct fixture f;                                             \
		struct err e = ERR_INIT;                                      \
		json_t *x = NULL;                                             \
		int nm = 0;                                                   \
		const char *labels[] = { "area:x", NULL };                    \
		(void)nm;                                                     \
		(void)labels;                                                 \
		if (!through_prism())                                         \
			return;                                               \
		fixture(&c, &f);                                              \
		expect_violation(&c, (call), &e);                             \
		json_decref(x);                                               \
	}

CORRUPT_TEST(issues_with_label, gh_issues_with_label(&c, "baton", &x, &nm, &e))
CORRUPT_TEST(issue_get, gh_issue_get(&c, f.issue, &x, &e))
CORRUPT_TEST(issue_comment, gh_issue_comment(&c, f.issue, "hi", &x, &e))
CORRUPT_TEST(labels_add, gh_labels_add(&c, f.issue, labels, &e))
CORRUPT_TEST(pull_create, gh_pull_create(&c, "t", "baton/corrupt-create",
					 "main", "b", 0, &x, &e))
CORRUPT_TEST(pull_get, gh_pull_get(&c, f.pull, &x, &e))
CORRUPT_TEST(pulls_for_head, gh_pulls_for_head(&c, f.head, &x, &e))
CORRUPT_TEST(pull_merge, gh_pull_merge(&c, f.pull, "merge", &x, &e))
CORRUPT_TEST(pull_reviews, gh_pull_reviews(&c, f.pull, &x, &e))
CORRUPT_TEST(pull_review_comments, gh_pull_review_comments(&c, f.pull, &x,
							   &e))
CORRUPT_TEST(statuses, gh_statuses(&c, f.sha, &x, &e))
CORRUPT_TEST(combined_status, gh_combined_status(&c, f.sha, &x, &e))
CORRUPT_TEST(check_runs, gh_check_runs(&c, f.sha, &x, &e))
