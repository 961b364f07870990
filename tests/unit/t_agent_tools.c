/*
 * Tests for agent/tools: each tool of baton's own agent on a scratch
 * worktree (reads with offsets and truncation, writes with parents, exact
 * edits found 0, 1 or 2 times, sorted listings, fixed-string search that
 * skips binaries and .git, commands with timeouts and stops), and every
 * way out of the worktree the tools must refuse: "..", absolute paths,
 * symlinks to /etc, dangling symlinks and .git.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/tools.h"
#include "test.h"
#include "util/buf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static char root[4096];

/* A fresh worktree "wt" in the test's directory; ctx points at it. */
static void
setup(struct tools_ctx *ctx)
{
	char path[4096];
	char *real;

	ASSERT(snprintf(path, sizeof(path), "%s/wt", test_tmpdir()) <
	       (int)sizeof(path));
	ASSERT(mkdir(path, 0755) == 0);
	real = realpath(path, NULL);
	ASSERT(real != NULL);
	ASSERT(snprintf(root, sizeof(root), "%s", real) < (int)sizeof(root));
	free(real);
	memset(ctx, 0, sizeof(*ctx));
	ctx->cwd = root;
	ctx->wake_fd = -1;
}

/* base/rel in one of four static buffers. */
static const char *
at(const char *base, const char *rel)
{
	static char path[4][4096];
	static int i;

	i = (i + 1) % 4;
	ASSERT(snprintf(path[i], sizeof(path[i]), "%s/%s", base, rel) <
	       (int)sizeof(path[i]));
	return path[i];
}

static void
put(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");

	ASSERT(f != NULL);
	ASSERT(fwrite(data, 1, len, f) == len);
	fclose(f);
}

static void
put_s(const char *path, const char *s)
{
	put(path, s, strlen(s));
}

static char *
slurp(const char *path)
{
	struct buf b = BUF_INIT;
	char chunk[4096];
	size_t n;
	FILE *f = fopen(path, "r");

	if (!f)
		return NULL;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_add(&b, chunk, n);
	fclose(f);
	return buf_detach(&b, NULL);
}

/* Calls tool name with args (JSON text); out is reset first. */
static int
call(const struct tools_ctx *ctx, const char *name, const char *args,
     struct buf *out)
{
	json_error_t je;
	json_t *j = json_loads(args, 0, &je);
	int rc;

	if (!j)
		test_fail(__FILE__, __LINE__, "bad args %s: %s", args, je.text);
	buf_reset(out);
	rc = tools_call(ctx, name, j, out);
	json_decref(j);
	return rc;
}

TEST(read_file_lines)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	put_s(at(root, "a.txt"), "one\ntwo\nthree\n");
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"a.txt\"}", &out), 0);
	ASSERT_STREQ(out.ptr, "one\ntwo\nthree\n");
	ASSERT_EQ(call(&ctx, "read_file",
		       "{\"path\":\"a.txt\",\"offset\":2,\"limit\":1}", &out),
		  0);
	ASSERT_STREQ(out.ptr, "two\n");
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"./a.txt\",\"offset\":3}",
		       &out),
		  0);
	ASSERT_STREQ(out.ptr, "three\n");
	ASSERT_EQ(
	    call(&ctx, "read_file", "{\"path\":\"a.txt\",\"offset\":5}", &out),
	    -1);
	ASSERT_CONTAINS(out.ptr, "has 3 lines");
	/* An absolute path inside the worktree is fine. */
	buf_reset(&out);
	{
		json_t *j = json_pack("{s:s}", "path", at(root, "a.txt"));

		ASSERT_EQ(tools_call(&ctx, "read_file", j, &out), 0);
		json_decref(j);
	}
	ASSERT_STREQ(out.ptr, "one\ntwo\nthree\n");
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"nope.txt\"}", &out), -1);
	ASSERT_STREQ(out.ptr, "'nope.txt' does not exist");
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\".\"}", &out), -1);
	ASSERT_CONTAINS(out.ptr, "is a directory");
	ASSERT_EQ(call(&ctx, "read_file", "{}", &out), -1);
	ASSERT_STREQ(out.ptr, "missing argument 'path'");
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":3}", &out), -1);
	ASSERT_STREQ(out.ptr, "argument 'path' must be a string");
	buf_release(&out);
}

TEST(read_file_truncates)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT, big = BUF_INIT;
	int i;

	setup(&ctx);
	for (i = 1; i <= 30000; i++)
		buf_addf(&big, "line %05d\n", i); /* 11 bytes a line */
	put(at(root, "big.txt"), big.ptr, big.len);
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"big.txt\"}", &out), 0);
	ASSERT(out.len < 256 * 1024 + 200);
	ASSERT_CONTAINS(out.ptr, "line 00001\n");
	/* 262144 / 11 = 23831 whole lines */
	ASSERT_CONTAINS(out.ptr, "line 23831\n[truncated at 256 KiB: lines "
				 "1-23831 of 30000 shown; read on with "
				 "offset=23832]\n");
	ASSERT_EQ(call(&ctx, "read_file",
		       "{\"path\":\"big.txt\",\"offset\":29999}", &out),
		  0);
	ASSERT_STREQ(out.ptr, "line 29999\nline 30000\n");
	buf_release(&big);
	buf_release(&out);
}

TEST(read_file_binary)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	put(at(root, "bin"), "ab\0cd", 5);
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"bin\"}", &out), -1);
	ASSERT_STREQ(out.ptr, "'bin' is a binary file (5 bytes)");
	put(at(root, "empty"), "", 0);
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"empty\"}", &out), 0);
	ASSERT_STREQ(out.ptr, "(empty file)\n");
	buf_release(&out);
}

TEST(write_file_parents_and_mode)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;
	struct stat st;
	char *s;

	setup(&ctx);
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"d/e/f.txt\",\"content\":\"hi\\n\"}", &out),
		  0);
	ASSERT_STREQ(out.ptr, "wrote 3 bytes to d/e/f.txt (new file)\n");
	s = slurp(at(root, "d/e/f.txt"));
	ASSERT_STREQ(s, "hi\n");
	free(s);
	/* Replacing keeps the mode (a script stays executable). */
	ASSERT(chmod(at(root, "d/e/f.txt"), 0755) == 0);
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"d/e/f.txt\",\"content\":\"x\"}", &out),
		  0);
	ASSERT_STREQ(out.ptr, "wrote 1 bytes to d/e/f.txt\n");
	ASSERT(stat(at(root, "d/e/f.txt"), &st) == 0);
	ASSERT_EQ(st.st_mode & 0777, 0755);
	s = slurp(at(root, "d/e/f.txt"));
	ASSERT_STREQ(s, "x");
	free(s);
	ASSERT_EQ(call(&ctx, "write_file", "{\"path\":\"d\",\"content\":\"x\"}",
		       &out),
		  -1);
	ASSERT_STREQ(out.ptr, "'d' is a directory");
	ASSERT_EQ(call(&ctx, "write_file", "{\"path\":\"x\"}", &out), -1);
	ASSERT_STREQ(out.ptr, "missing argument 'content'");
	buf_release(&out);
}

TEST(edit_exactly_once)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;
	char *s;

	setup(&ctx);
	put_s(at(root, "x.c"), "int a = 1;\nint b = 2;\nint a2 = 1;\n");
	ASSERT_EQ(call(&ctx, "edit",
		       "{\"path\":\"x.c\",\"old\":\"b = 2\",\"new\":\"b = 3\"}",
		       &out),
		  0);
	ASSERT_STREQ(out.ptr, "replaced 1 occurrence in x.c\n");
	s = slurp(at(root, "x.c"));
	ASSERT_STREQ(s, "int a = 1;\nint b = 3;\nint a2 = 1;\n");
	free(s);

	ASSERT_EQ(call(&ctx, "edit",
		       "{\"path\":\"x.c\",\"old\":\"c = 1\",\"new\":\"\"}",
		       &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "old was not found in 'x.c'");
	ASSERT_EQ(call(&ctx, "edit",
		       "{\"path\":\"x.c\",\"old\":\" = 1;\",\"new\":\"\"}",
		       &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "old was found 2 times in 'x.c'");
	ASSERT_EQ(call(&ctx, "edit",
		       "{\"path\":\"x.c\",\"old\":\"\",\"new\":\"y\"}", &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "old is empty");
	s = slurp(at(root, "x.c"));
	ASSERT_STREQ(s, "int a = 1;\nint b = 3;\nint a2 = 1;\n");
	free(s);

	/* Deleting text: new is empty. */
	ASSERT_EQ(call(&ctx, "edit",
		       "{\"path\":\"x.c\",\"old\":\"int b = 3;\\n\","
		       "\"new\":\"\"}",
		       &out),
		  0);
	s = slurp(at(root, "x.c"));
	ASSERT_STREQ(s, "int a = 1;\nint a2 = 1;\n");
	free(s);
	ASSERT_EQ(call(&ctx, "edit",
		       "{\"path\":\"none.c\",\"old\":\"a\",\"new\":\"b\"}",
		       &out),
		  -1);
	ASSERT_STREQ(out.ptr, "'none.c' does not exist");
	buf_release(&out);
}

TEST(list_sorted)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	put_s(at(root, "c.txt"), "");
	put_s(at(root, "b.txt"), "");
	ASSERT(mkdir(at(root, "a"), 0755) == 0);
	ASSERT(mkdir(at(root, ".git"), 0755) == 0);
	put_s(at(root, ".gitignore"), "");
	put_s(at(root, "a/z"), "");
	ASSERT_EQ(call(&ctx, "list", "{}", &out), 0);
	ASSERT_STREQ(out.ptr, ".gitignore\na/\nb.txt\nc.txt\n");
	ASSERT_EQ(call(&ctx, "list", "{\"path\":\"a\"}", &out), 0);
	ASSERT_STREQ(out.ptr, "z\n");
	ASSERT_EQ(call(&ctx, "list", "{\"path\":\"b.txt\"}", &out), -1);
	ASSERT_STREQ(out.ptr, "'b.txt' is a file; use read_file");
	ASSERT_EQ(call(&ctx, "list", "{\"path\":\"nope\"}", &out), -1);
	ASSERT_STREQ(out.ptr, "'nope' does not exist");
	buf_release(&out);
}

TEST(list_caps)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;
	char name[64];
	int i;

	setup(&ctx);
	for (i = 0; i < 1005; i++) {
		snprintf(name, sizeof(name), "f%04d", i);
		put_s(at(root, name), "");
	}
	ASSERT_EQ(call(&ctx, "list", "{}", &out), 0);
	ASSERT_CONTAINS(out.ptr, "f0999\n[5 more entries not shown]\n");
	ASSERT(!strstr(out.ptr, "f1000"));
	buf_release(&out);
}

TEST(search_fixed_string)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	ASSERT(mkdir(at(root, "src"), 0755) == 0);
	ASSERT(mkdir(at(root, ".git"), 0755) == 0);
	put_s(at(root, "src/b.c"), "x\nfoo(a.b);\ny\nfoo(axb);\n");
	put_s(at(root, "a.txt"), "call foo(a.b) here\n");
	put(at(root, "src/bin.o"), "foo(a.b)\0\0", 10);
	put_s(at(root, ".git/HEAD"), "foo(a.b)\n");
	/* A symlink out of the worktree is not followed. */
	ASSERT(symlink("/etc", at(root, "etc")) == 0);
	/* The dot is not a regular expression. */
	ASSERT_EQ(call(&ctx, "search", "{\"pattern\":\"foo(a.b)\"}", &out), 0);
	ASSERT_STREQ(out.ptr, "a.txt:1: call foo(a.b) here\n"
			      "src/b.c:2: foo(a.b);\n");
	ASSERT_EQ(call(&ctx, "search",
		       "{\"pattern\":\"foo(\",\"path\":\"src/b.c\"}", &out),
		  0);
	ASSERT_STREQ(out.ptr, "src/b.c:2: foo(a.b);\nsrc/b.c:4: foo(axb);\n");
	ASSERT_EQ(call(&ctx, "search", "{\"pattern\":\"zzz\"}", &out), 0);
	ASSERT_STREQ(out.ptr, "no matches for 'zzz' in .\n");
	ASSERT_EQ(call(&ctx, "search", "{\"pattern\":\"\"}", &out), -1);
	ASSERT_EQ(call(&ctx, "search",
		       "{\"pattern\":\"root\",\"path\":\"/etc\"}", &out),
		  -1);
	ASSERT_STREQ(out.ptr, "'/etc' is outside the worktree");
	buf_release(&out);
}

TEST(search_caps_matches)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT, data = BUF_INIT;
	int i;

	setup(&ctx);
	for (i = 0; i < 300; i++)
		buf_adds(&data, "hit\n");
	put(at(root, "many"), data.ptr, data.len);
	ASSERT_EQ(call(&ctx, "search", "{\"pattern\":\"hit\"}", &out), 0);
	ASSERT_CONTAINS(out.ptr, "many:200: hit\n[stopped at 200 matches");
	ASSERT(!strstr(out.ptr, "many:201:"));
	buf_release(&data);
	buf_release(&out);
}

TEST(run_command)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT, want = BUF_INIT;

	setup(&ctx);
	ASSERT_EQ(call(&ctx, "run",
		       "{\"argv\":[\"sh\",\"-c\",\"echo out; echo err >&2; "
		       "exit 3\"]}",
		       &out),
		  -1);
	ASSERT_STREQ(out.ptr, "exit 3\nout\nerr\n");
	ASSERT_EQ(call(&ctx, "run", "{\"argv\":[\"pwd\"]}", &out), 0);
	buf_addf(&want, "exit 0\n%s\n", root);
	ASSERT_STREQ(out.ptr, want.ptr);
	ASSERT_EQ(
	    call(&ctx, "run", "{\"argv\":[\"no-such-program-xyz\"]}", &out),
	    -1);
	ASSERT_CONTAINS(out.ptr, "no-such-program-xyz");
	ASSERT_EQ(call(&ctx, "run", "{\"argv\":[]}", &out), -1);
	ASSERT_CONTAINS(out.ptr, "non-empty array");
	ASSERT_EQ(call(&ctx, "run", "{\"argv\":[\"true\", 1]}", &out), -1);
	ASSERT_STREQ(out.ptr, "argv[1] is not a string");
	buf_release(&want);
	buf_release(&out);
}

TEST(run_output_tail)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	ASSERT_EQ(call(&ctx, "run",
		       "{\"argv\":[\"sh\",\"-c\",\"head -c 100000 /dev/zero "
		       "| tr '\\\\0' a; echo; echo END\"]}",
		       &out),
		  0);
	ASSERT_CONTAINS(out.ptr,
			"exit 0\n[output: the last 32768 of 100005 bytes]\n");
	ASSERT_CONTAINS(out.ptr, "a\nEND\n");
	ASSERT(out.len < 33 * 1024);
	buf_release(&out);
}

TEST(run_timeout)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;
	int64_t t0;

	setup(&ctx);
	t0 = time_mono_ms();
	ASSERT_EQ(call(&ctx, "run",
		       "{\"argv\":[\"sleep\",\"30\"],\"timeout_seconds\":1}",
		       &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "(timed out after 1 s)");
	ASSERT(time_mono_ms() - t0 < 10000);
	/* The call's deadline caps the default timeout. */
	ctx.deadline_ms = time_mono_ms() + 1000;
	t0 = time_mono_ms();
	ASSERT_EQ(call(&ctx, "run", "{\"argv\":[\"sleep\",\"30\"]}", &out), -1);
	ASSERT_CONTAINS(out.ptr, "timed out");
	ASSERT(time_mono_ms() - t0 < 10000);
	ctx.deadline_ms = time_mono_ms() - 1;
	ASSERT_EQ(call(&ctx, "run", "{\"argv\":[\"true\"]}", &out), -1);
	ASSERT_STREQ(out.ptr, "no time is left to run 'true'");
	buf_release(&out);
}

static int
stop_on_wake(void *arg, enum spawn_event ev, pid_t pid)
{
	(void)pid;
	(void)arg;
	return ev == SPAWN_EV_WAKE;
}

TEST(run_stopped_by_wake_fd)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;
	int p[2];
	int64_t t0;

	setup(&ctx);
	ASSERT(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	ASSERT(write(p[1], "x", 1) == 1);
	ctx.wake_fd = p[0];
	ctx.on_event = stop_on_wake;
	t0 = time_mono_ms();
	ASSERT_EQ(call(&ctx, "run", "{\"argv\":[\"sleep\",\"30\"]}", &out), -1);
	ASSERT_STREQ(out.ptr, "'sleep' was stopped");
	ASSERT(time_mono_ms() - t0 < 10000);
	close(p[0]);
	close(p[1]);
	buf_release(&out);
}

TEST(escape_dotdot)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	put_s(at(test_tmpdir(), "outside.txt"), "secret\n");
	ASSERT(mkdir(at(root, "sub"), 0755) == 0);
	ASSERT_EQ(
	    call(&ctx, "read_file", "{\"path\":\"../outside.txt\"}", &out), -1);
	ASSERT_STREQ(out.ptr, "'../outside.txt' is outside the worktree");
	ASSERT_EQ(call(&ctx, "read_file",
		       "{\"path\":\"sub/../../outside.txt\"}", &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "is outside the worktree");
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"new/../../x.txt\",\"content\":\"x\"}",
		       &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "is outside the worktree");
	ASSERT_EQ(access(at(test_tmpdir(), "x.txt"), F_OK), -1);
	ASSERT_EQ(call(&ctx, "list", "{\"path\":\"..\"}", &out), -1);
	ASSERT_STREQ(out.ptr, "'..' is outside the worktree");
	/* ".." that stays inside is fine. */
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"sub/../in.txt\",\"content\":\"x\"}", &out),
		  0);
	ASSERT_EQ(access(at(root, "in.txt"), F_OK), 0);
	buf_release(&out);
}

TEST(escape_absolute)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"/etc/passwd\"}", &out),
		  -1);
	ASSERT_STREQ(out.ptr, "'/etc/passwd' is outside the worktree");
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"/tmp/baton-escape\",\"content\":\"x\"}",
		       &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "is outside the worktree");
	ASSERT_EQ(call(&ctx, "list", "{\"path\":\"/\"}", &out), -1);
	ASSERT_STREQ(out.ptr, "'/' is outside the worktree");
	buf_release(&out);
}

TEST(escape_symlink)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	ASSERT(symlink("/etc", at(root, "etc")) == 0);
	ASSERT(symlink("/etc/passwd", at(root, "pw")) == 0);
	ASSERT(symlink(at(test_tmpdir(), "nothere"), at(root, "dangling")) ==
	       0);
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"etc/passwd\"}", &out),
		  -1);
	ASSERT_STREQ(out.ptr, "'etc/passwd' is outside the worktree (a "
			      "symlink leads to '/etc/passwd')");
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"pw\"}", &out), -1);
	ASSERT_CONTAINS(out.ptr, "'pw' is outside the worktree");
	ASSERT_EQ(call(&ctx, "list", "{\"path\":\"etc\"}", &out), -1);
	ASSERT_CONTAINS(out.ptr, "outside the worktree");
	ASSERT_EQ(call(&ctx, "edit",
		       "{\"path\":\"pw\",\"old\":\"root\",\"new\":\"x\"}",
		       &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "outside the worktree");
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"etc/baton-new\",\"content\":\"x\"}", &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "outside the worktree");
	/* Writing through a dangling link would create its target. */
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"dangling\",\"content\":\"x\"}", &out),
		  -1);
	ASSERT_STREQ(out.ptr, "'dangling' goes through a symlink to a path "
			      "that does not exist");
	ASSERT_EQ(access(at(test_tmpdir(), "nothere"), F_OK), -1);
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"dangling/x\",\"content\":\"x\"}", &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "symlink");
	/* A link that stays inside is followed. */
	put_s(at(root, "real.txt"), "inside\n");
	ASSERT(symlink("real.txt", at(root, "link.txt")) == 0);
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"link.txt\"}", &out), 0);
	ASSERT_STREQ(out.ptr, "inside\n");
	buf_release(&out);
}

TEST(escape_git)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	ASSERT(mkdir(at(root, ".git"), 0755) == 0);
	put_s(at(root, ".git/config"), "[core]\n");
	ASSERT(symlink(".git/config", at(root, "cfg")) == 0);
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\".git/config\"}", &out),
		  -1);
	ASSERT_STREQ(out.ptr,
		     "'.git/config' is under .git, which the tools may not "
		     "touch");
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\".git/hooks/pre-commit\",\"content\":\"x\"}",
		       &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "is under .git");
	ASSERT_EQ(access(at(root, ".git/hooks"), F_OK), -1);
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\"cfg\"}", &out), -1);
	ASSERT_CONTAINS(out.ptr, "is under .git");
	ASSERT_EQ(call(&ctx, "list", "{\"path\":\"a/../.git\"}", &out), -1);
	ASSERT_CONTAINS(out.ptr, "is under .git");
	ASSERT_EQ(call(&ctx, "search",
		       "{\"pattern\":\"core\",\"path\":\".git\"}", &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "is under .git");
	/* A worktree's .git is a file; it is refused the same way. */
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"sub/.git\",\"content\":\"x\"}", &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "is under .git");
	buf_release(&out);
}

TEST(escape_baton)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;

	setup(&ctx);
	/* a worktree's own .baton/ (committed config) is the project's */
	ASSERT(mkdir(at(root, ".baton"), 0755) == 0);
	put_s(at(root, ".baton/config.yaml"), "roles: {}\n");
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\".baton/config.yaml\"}",
		       &out),
		  0);
	/* the repository's, with the token (a planner works there), is not */
	put_s(at(root, ".baton/token"), "secret\n");
	ASSERT_EQ(call(&ctx, "read_file", "{\"path\":\".baton/token\"}", &out),
		  -1);
	ASSERT_STREQ(out.ptr, "'.baton/token' is in baton's own folder "
			      ".baton/, which the tools may not touch");
	ASSERT_EQ(call(&ctx, "write_file",
		       "{\"path\":\"a/../.baton/config.yaml\",\"content\":\"x\"}",
		       &out),
		  -1);
	ASSERT_CONTAINS(out.ptr, "baton's own folder");
	ASSERT_EQ(call(&ctx, "list", "{\"path\":\".baton\"}", &out), -1);
	ASSERT_CONTAINS(out.ptr, "baton's own folder");
	buf_release(&out);
}

TEST(unknown_tool_and_args)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT;
	json_t *arr;

	setup(&ctx);
	ASSERT_EQ(call(&ctx, "delete", "{}", &out), -1);
	ASSERT_STREQ(out.ptr, "unknown tool 'delete'; the tools are "
			      "read_file, write_file, edit, list, search, "
			      "run");
	buf_reset(&out);
	arr = json_array();
	ASSERT_EQ(tools_call(&ctx, "list", arr, &out), -1);
	ASSERT_STREQ(out.ptr, "the arguments of list must be a JSON object");
	json_decref(arr);
	buf_reset(&out);
	ASSERT_EQ(tools_call(&ctx, "list", NULL, &out), 0);
	buf_release(&out);
}

TEST(schema_shapes)
{
	json_t *o = tools_schema(0), *a = tools_schema(1), *t;

	ASSERT_EQ(json_array_size(o), 6);
	ASSERT_EQ(json_array_size(a), 6);
	t = json_array_get(o, 5);
	ASSERT_STREQ(json_string_value(json_object_get(t, "type")), "function");
	t = json_object_get(t, "function");
	ASSERT_STREQ(json_string_value(json_object_get(t, "name")), "run");
	ASSERT(json_is_object(json_object_get(t, "parameters")));
	ASSERT(json_string_value(json_object_get(t, "description")) != NULL);
	t = json_array_get(a, 0);
	ASSERT_STREQ(json_string_value(json_object_get(t, "name")),
		     "read_file");
	ASSERT_STREQ(json_string_value(json_object_get(
			 json_object_get(t, "input_schema"), "type")),
		     "object");
	json_decref(o);
	json_decref(a);
}

TEST(describe_lines)
{
	struct tools_ctx ctx;
	struct buf out = BUF_INIT, line = BUF_INIT;
	json_t *args;
	int rc;

	setup(&ctx);
	put_s(at(root, "x.c"), "a\n");
	args = json_loads("{\"path\":\"x.c\",\"old\":\"a\",\"new\":\"b\"}", 0,
			  NULL);
	rc = tools_call(&ctx, "edit", args, &out);
	tools_describe("edit", args, rc, &out, &line);
	ASSERT_STREQ(line.ptr, "edit x.c: replaced 1 occurrence in x.c");
	json_decref(args);
	buf_reset(&out);
	buf_reset(&line);
	args = json_loads("{\"argv\":[\"sh\",\"-c\",\"exit 2\"]}", 0, NULL);
	rc = tools_call(&ctx, "run", args, &out);
	tools_describe("run", args, rc, &out, &line);
	ASSERT_STREQ(line.ptr, "run sh -c exit 2: failed: exit 2");
	json_decref(args);
	buf_release(&line);
	buf_release(&out);
}
