/*
 * Tests for agent_watch (agent/watch.c): the readable text of a growing
 * agent stdout file, fed in pieces that cut lines in half, for each JSON
 * stream type (the streams the real CLIs printed, tests/fixtures/
 * agent-streams/) and for plain output.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include "agent/agent.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"

/* An absolute path to fixture file name (static buffer). */
static const char *
fixture(const char *name)
{
	static char path[PATH_MAX];
	const char *f = __FILE__, *slash = strrchr(f, '/');
	char rel[PATH_MAX];

	snprintf(rel, sizeof(rel), "%.*s/../fixtures/agent-streams/%s",
		 slash ? (int)(slash - f) : 1, slash ? f : ".", name);
	if (!realpath(rel, path))
		test_fail(__FILE__, __LINE__, "no fixture '%s'", rel);
	return path;
}

/* The watched file of this test. */
static const char *
out_file(void)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/call.stdout", test_tmpdir());
	return path;
}

/* Appends len bytes to path, as spawn does while the agent writes. */
static void
append(const char *path, const char *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	ASSERT(fd >= 0);
	ASSERT_EQ(fs_write_all(fd, p, len), 0);
	close(fd);
}

/*
 * Feeds fixture name.stdout to a watcher of type in pieces of step bytes
 * (so most pieces end mid-line), reading after each, then finishes; the
 * text read goes to out. Checks each read returns what it appended.
 */
static void
watch_fixture(const char *type, const char *name, size_t step, struct buf *out)
{
	struct buf all = BUF_INIT;
	struct err e = ERR_INIT;
	struct agent_watch *w;
	char file[256];
	size_t at, n, before;

	snprintf(file, sizeof(file), "%s.stdout", name);
	ASSERT_OK(fs_read(fixture(file), &all, 0, &e), &e);
	w = agent_watch_new(type, out_file());
	for (at = 0; at < all.len; at += n) {
		n = all.len - at < step ? all.len - at : step;
		append(out_file(), all.ptr + at, n);
		before = out->len;
		ASSERT_EQ(agent_watch_read(w, out), out->len - before);
	}
	before = out->len;
	ASSERT_EQ(agent_watch_finish(w, out), out->len - before);
	agent_watch_free(w);
	buf_release(&all);
}

TEST(watch_claude_text_and_tools)
{
	struct buf out = BUF_INIT;

	watch_fixture("claude-code", "claude-stream-json", 97, &out);
	ASSERT_STREQ(out.ptr, "I'll write the file.\n"
			      "[tool] Write: /srv/example/repo/hello.txt\n"
			      "MOCK_DONE: wrote hello.txt\n");
	buf_release(&out);
}

TEST(watch_claude_whole_file_at_once)
{
	struct buf out = BUF_INIT;

	watch_fixture("claude-code", "claude-stream-json", 1 << 20, &out);
	ASSERT_STREQ(out.ptr, "I'll write the file.\n"
			      "[tool] Write: /srv/example/repo/hello.txt\n"
			      "MOCK_DONE: wrote hello.txt\n");
	buf_release(&out);
}

TEST(watch_claude_error)
{
	struct buf out = BUF_INIT;

	watch_fixture("claude-code", "claude-error401", 50, &out);
	ASSERT_CONTAINS(out.ptr, "[error] ");
	ASSERT_CONTAINS(out.ptr, "401");
	buf_release(&out);
}

TEST(watch_qwen)
{
	struct buf out = BUF_INIT;

	watch_fixture("qwen", "qwen-stream-json", 61, &out);
	ASSERT_STREQ(out.ptr, "[tool] write_file: /srv/example/repo/hello.txt\n"
			      "MOCK_DONE: wrote hello.txt\n");
	buf_release(&out);
}

TEST(watch_codex)
{
	struct buf out = BUF_INIT;

	watch_fixture("codex", "codex-json", 33, &out);
	ASSERT_CONTAINS(out.ptr, "[warning] Model metadata for `mock-model`");
	ASSERT_CONTAINS(out.ptr, "\n[tool] shell: /bin/bash -lc \"printf");
	ASSERT_CONTAINS(out.ptr, "'hello from mockllm ' > 'hello.txt'\"\n"
				 "MOCK_DONE: wrote hello.txt\n");
	/* a command shows once, when it starts */
	ASSERT(!strstr(strstr(out.ptr, "[tool]") + 1, "[tool]"));
	buf_release(&out);
}

TEST(watch_codex_file_change)
{
	struct buf out = BUF_INIT;

	watch_fixture("codex", "codex-apply-patch", 40, &out);
	ASSERT_STREQ(out.ptr, "[edit] add /srv/example/repo/hello.txt\n"
			      "MOCK_DONE: wrote hello.txt\n");
	buf_release(&out);
}

TEST(watch_gemini)
{
	struct buf out = BUF_INIT;

	watch_fixture("gemini", "gemini-stream-json", 29, &out);
	ASSERT_STREQ(out.ptr, "[tool] write_file: hello.txt\n"
			      "MOCK_DONE: wrote hello.txt\n");
	buf_release(&out);
}

TEST(watch_gemini_error)
{
	struct buf out = BUF_INIT;

	watch_fixture("gemini", "gemini-error500", 64, &out);
	ASSERT_CONTAINS(out.ptr, "[error] ");
	buf_release(&out);
}

TEST(watch_opencode)
{
	struct buf out = BUF_INIT;

	watch_fixture("opencode", "opencode-json", 101, &out);
	ASSERT_STREQ(out.ptr, "[tool] write: /srv/example/repo/hello.txt\n"
			      "MOCK_DONE: wrote hello.txt\n");
	buf_release(&out);
}

/* A JSON line cut in half yields nothing until its end arrives. */
TEST(watch_json_partial_line_waits)
{
	static const char line[] =
	    "{\"type\":\"assistant\",\"message\":{\"content\":"
	    "[{\"type\":\"text\",\"text\":\"half and half\"}]}}\n";
	struct agent_watch *w = agent_watch_new("claude-code", out_file());
	struct buf out = BUF_INIT;

	ASSERT_EQ(agent_watch_read(w, &out), 0); /* no file yet */
	append(out_file(), line, 30);
	ASSERT_EQ(agent_watch_read(w, &out), 0);
	ASSERT_EQ(out.len, 0);
	append(out_file(), line + 30, sizeof(line) - 1 - 30);
	ASSERT_EQ(agent_watch_read(w, &out), strlen("half and half\n"));
	ASSERT_STREQ(out.ptr, "half and half\n");
	ASSERT_EQ(agent_watch_read(w, &out), 0);
	/* a last line without its newline is read at the finish */
	append(out_file(), line, sizeof(line) - 2);
	ASSERT_EQ(agent_watch_read(w, &out), 0);
	ASSERT_EQ(agent_watch_finish(w, &out), strlen("half and half\n"));
	ASSERT_STREQ(out.ptr, "half and half\nhalf and half\n");
	agent_watch_free(w);
	buf_release(&out);
}

/* Lines that are not JSON objects show nothing (a CLI's stray output). */
TEST(watch_json_skips_noise)
{
	struct agent_watch *w = agent_watch_new("gemini", out_file());
	struct buf out = BUF_INIT;

	append(out_file(), "Loaded cached credentials.\n[1,2]\n{bad\n", 38);
	ASSERT_EQ(agent_watch_read(w, &out), 0);
	agent_watch_free(w);
	buf_release(&out);
}

/* Plain output goes out a whole line at a time. */
TEST(watch_plain_lines)
{
	struct agent_watch *w = agent_watch_new("command", out_file());
	struct buf out = BUF_INIT;

	append(out_file(), "hello\nwor", 9);
	ASSERT_EQ(agent_watch_read(w, &out), 6);
	ASSERT_STREQ(out.ptr, "hello\n");
	append(out_file(), "ld\nand mo", 9);
	ASSERT_EQ(agent_watch_read(w, &out), 6);
	ASSERT_STREQ(out.ptr, "hello\nworld\n");
	append(out_file(), "re", 2);
	ASSERT_EQ(agent_watch_read(w, &out), 0);
	ASSERT_EQ(agent_watch_finish(w, &out), 8);
	ASSERT_STREQ(out.ptr, "hello\nworld\nand more");
	agent_watch_free(w);
	buf_release(&out);
}

/* aider and the HTTP agents' transcripts read as plain text too. */
TEST(watch_plain_types)
{
	static const char *const types[] = { "aider", "openai", "anthropic",
					     "no-such-type" };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		struct agent_watch *w;
		struct buf out = BUF_INIT;

		unlink(out_file());
		w = agent_watch_new(types[i], out_file());
		append(out_file(), "step 1: run make: exit 0\n", 25);
		ASSERT_EQ(agent_watch_read(w, &out), 25);
		ASSERT_STREQ(out.ptr, "step 1: run make: exit 0\n");
		agent_watch_free(w);
		buf_release(&out);
	}
}

/* What the file held before the watcher started is an earlier call's. */
TEST(watch_starts_at_the_end)
{
	struct agent_watch *w;
	struct buf out = BUF_INIT;

	append(out_file(), "earlier call\n", 13);
	w = agent_watch_new("command", out_file());
	append(out_file(), "this call\n", 10);
	ASSERT_EQ(agent_watch_read(w, &out), 10);
	ASSERT_STREQ(out.ptr, "this call\n");
	agent_watch_free(w);
	buf_release(&out);
}

/* A line that never ends still goes out once it is long. */
TEST(watch_plain_long_line)
{
	struct agent_watch *w = agent_watch_new("command", out_file());
	struct buf out = BUF_INIT;
	char big[5000];

	memset(big, 'x', sizeof(big));
	append(out_file(), big, sizeof(big));
	ASSERT_EQ(agent_watch_read(w, &out), sizeof(big));
	agent_watch_free(w);
	buf_release(&out);
}

/* A capped buffer keeps what fits; the file is still read through. */
TEST(watch_capped_out)
{
	struct agent_watch *w = agent_watch_new("command", out_file());
	struct buf out;

	buf_init(&out, 10);
	append(out_file(), "0123456789abcdef\nmore\n", 22);
	ASSERT_EQ(agent_watch_read(w, &out), 10);
	ASSERT_STREQ(out.ptr, "0123456789");
	buf_release(&out);
	out = (struct buf)BUF_INIT;
	append(out_file(), "next\n", 5);
	ASSERT_EQ(agent_watch_read(w, &out), 5);
	ASSERT_STREQ(out.ptr, "next\n");
	agent_watch_free(w);
	buf_release(&out);
}

/*
 * A cut-off call's transcript for a summary: the readable account from
 * the file's start (not its end, as a watch starts), its session noted
 * on the way; only the end is kept when long, from a line start.
 */
TEST(transcript_tail_and_session)
{
	struct buf all = BUF_INIT, out = BUF_INIT;
	struct err e = ERR_INIT;
	struct agent_watch *w;
	char line[64], fresh[PATH_MAX], missing[PATH_MAX];
	int i;

	snprintf(fresh, sizeof(fresh), "%s/new.stdout", test_tmpdir());
	snprintf(missing, sizeof(missing), "%s/missing", test_tmpdir());
	ASSERT_OK(fs_read(fixture("claude-stream-json.stdout"), &all, 0, &e),
		  &e);
	append(out_file(), all.ptr, all.len);
	agent_transcript_tail("claude-code", out_file(), 4096, &out);
	ASSERT_STREQ(out.ptr, "I'll write the file.\n"
			      "[tool] Write: /srv/example/repo/hello.txt\n"
			      "MOCK_DONE: wrote hello.txt\n");
	buf_reset(&out);
	/* 30 bytes keep the last whole line only */
	agent_transcript_tail("claude-code", out_file(), 30, &out);
	ASSERT_STREQ(out.ptr, "MOCK_DONE: wrote hello.txt\n");
	buf_reset(&out);
	/* a watch names the session once it has read a line with it */
	w = agent_watch_new("claude-code", fresh);
	ASSERT_STREQ(agent_watch_session(w), "");
	append(fresh, all.ptr, all.len);
	agent_watch_read(w, &out);
	ASSERT(strlen(agent_watch_session(w)) > 8);
	agent_watch_free(w);
	buf_reset(&out);
	/* plain output: its last lines, however long the file */
	fs_unlink(out_file(), NULL);
	for (i = 0; i < 5000; i++) {
		snprintf(line, sizeof(line), "line %d\n", i);
		append(out_file(), line, strlen(line));
	}
	agent_transcript_tail("command", out_file(), 20, &out);
	ASSERT_STREQ(out.ptr, "line 4998\nline 4999\n");
	buf_reset(&out);
	agent_transcript_tail("command", missing, 20, &out);
	ASSERT_EQ(out.len, 0);
	ASSERT_STREQ(agent_watch_session(NULL), "");
	buf_release(&out);
	buf_release(&all);
}

TEST(watch_free_null)
{
	agent_watch_free(NULL);
}
