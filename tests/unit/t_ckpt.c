/*
 * A run's checkpoints on the shared remote (workspace/ckpt.c): pushed by
 * id to the run's refs and fetched back, missing and unreachable told
 * apart, deleted; the run folder's files saved without following a link
 * or taking the host's own, and put back from a hostile commit only as
 * plain files with plain names, never over what is there.
 */
#include "util/compat.h"

#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#define RUN "r7-ckpt"

struct fixture {
	struct workspace ws;
	char *remote, *run_dir;
	char *head; /* the repository's one commit */
};

/* git ARGS in dir; stdout (trimmed) into out when not NULL. */
static void
git_in(const char *dir, struct buf *out, const char *const *args)
{
	const char *argv[32] = { "git", "-C", dir, "-c", "user.name=t", "-c",
				 "user.email=t@t" };
	struct err e = ERR_INIT;
	size_t n = 7, i;

	for (i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	ASSERT_OK(spawn_capture(argv, NULL, out, 1 << 20, 30000, &e), &e);
	if (out)
		buf_rtrim(out);
}

static void
write_file(const char *dir, const char *name, const char *text)
{
	char *path = xasprintf("%s/%s", dir, name);
	struct err e = ERR_INIT;

	ASSERT_OK(fs_write_atomic(path, text, strlen(text), &e), &e);
	free(path);
}

static void
setup(struct fixture *f)
{
	const char *top = test_tmpdir();
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	char *repo = xasprintf("%s/repo", top);

	memset(f, 0, sizeof(*f));
	f->remote = xasprintf("%s/remote.git", top);
	git_in(top, NULL, (const char *[]){ "init", "-q", repo, NULL });
	git_in(top, NULL, (const char *[]){ "init", "-q", "--bare", f->remote,
					    NULL });
	write_file(repo, "README", "hello\n");
	git_in(repo, NULL, (const char *[]){ "add", "README", NULL });
	git_in(repo, NULL, (const char *[]){ "commit", "-qm", "init", NULL });
	git_in(repo, &out, (const char *[]){ "rev-parse", "HEAD", NULL });
	f->head = buf_detach(&out, NULL);
	f->ws.repo = repo;
	f->ws.dir = xasprintf("%s/.baton", repo);
	f->ws.common = xasprintf("%s/.git", repo);
	f->run_dir = xasprintf("%s/runs/%s", f->ws.dir, RUN);
	ASSERT_OK(fs_mkdir_p(f->run_dir, 0755, &e), &e);
}

static void
teardown(struct fixture *f)
{
	workspace_release(&f->ws);
	free(f->remote);
	free(f->run_dir);
	free(f->head);
}

/* dir/name, in a buffer of its own until the next call. */
static const char *
in(const char *dir, const char *name)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

/* The names in commit's tree, one per line. */
static void
tree_names(struct fixture *f, const char *commit, struct buf *out)
{
	git_in(f->ws.repo, out, (const char *[]){ "ls-tree", "--name-only",
						  commit, NULL });
}

TEST(ckpt_push_fetch_forget)
{
	struct fixture f;
	struct err e = ERR_INIT;
	char *tip = NULL, *files = NULL, *saved = NULL;
	struct buf refs = BUF_INIT;

	setup(&f);
	/* nothing pushed yet: not found, which the takeover tells apart
	 * from a remote it cannot read */
	ASSERT_EQ(ckpt_fetch(&f.ws, f.remote, RUN, &tip, &files, &e),
		  BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "has no checkpoint of run 'r7-ckpt'");
	e = (struct err)ERR_INIT;
	ASSERT(ckpt_fetch(&f.ws, "/nonexistent/remote.git", RUN, &tip, &files,
			  &e) < 0);
	ASSERT(e.rc != BATON_ENOTFOUND);
	e = (struct err)ERR_INIT;

	write_file(f.run_dir, "plan.md", "# the plan\n");
	ASSERT_OK(ckpt_files_save(&f.ws, f.run_dir, RUN, &saved, &e), &e);
	ASSERT_OK(ckpt_push(&f.ws, f.remote, RUN, f.head, saved, NULL, &e),
		  &e);
	ASSERT_OK(ckpt_fetch(&f.ws, f.remote, RUN, &tip, &files, &e), &e);
	ASSERT_STREQ(tip, f.head);
	ASSERT_STREQ(files, saved);
	ASSERT(ckpt_contains(&f.ws, tip, f.head));
	ASSERT(!ckpt_contains(&f.ws, tip, saved)); /* unrelated */
	ASSERT(!ckpt_contains(&f.ws, tip, "HEAD")); /* ids only */

	ASSERT_OK(ckpt_forget(&f.ws, f.remote, RUN, &e), &e);
	git_in(f.remote, &refs, (const char *[]){ "for-each-ref",
						  "refs/baton/", NULL });
	ASSERT_EQ(refs.len, 0);
	git_in(f.ws.repo, &refs, (const char *[]){ "for-each-ref",
						   "refs/baton/", NULL });
	ASSERT_EQ(refs.len, 0);
	/* a second time: nothing there, no error */
	ASSERT_OK(ckpt_forget(&f.ws, f.remote, RUN, &e), &e);
	free(tip);
	free(files);
	free(saved);
	buf_release(&refs);
	teardown(&f);
}

TEST(ckpt_push_only_ids_to_run_refs)
{
	struct fixture f;
	struct err e = ERR_INIT;
	struct buf refs = BUF_INIT;

	setup(&f);
	/* a ref name, a refspec, a run id that climbs out of refs/baton/ */
	ASSERT_EQ(ckpt_push(&f.ws, f.remote, RUN, "HEAD", NULL, NULL, &e),
		  BATON_EINVAL);
	ASSERT_EQ(ckpt_push(&f.ws, f.remote, RUN, "+refs/heads/main", NULL,
			    NULL, &e),
		  BATON_EINVAL);
	ASSERT_EQ(ckpt_push(&f.ws, f.remote, "../../heads/main", f.head, NULL,
			    NULL, &e),
		  BATON_EINVAL);
	ASSERT_EQ(ckpt_push(&f.ws, f.remote, "r1:refs/heads/main", f.head,
			    NULL, NULL, &e),
		  BATON_EINVAL);
	/* a lease on something that is not an id */
	ASSERT_EQ(ckpt_push(&f.ws, f.remote, RUN, f.head, NULL, "main", &e),
		  BATON_EINVAL);
	git_in(f.remote, &refs, (const char *[]){ "for-each-ref", NULL });
	ASSERT_EQ(refs.len, 0);
	buf_release(&refs);
	teardown(&f);
}

/* The remote's checkpoint ref of RUN, or "" when it has none. */
static char *
remote_tip(struct fixture *f)
{
	struct err e = ERR_INIT;
	char *tip = NULL;

	ASSERT_OK(ckpt_remote_tip(&f->ws, f->remote, RUN, &tip, &e), &e);
	return tip ? tip : xstrdup("");
}

/* A second commit on top of the first, its id. */
static char *
next_commit(struct fixture *f, const char *text)
{
	struct buf out = BUF_INIT;

	write_file(f->ws.repo, "README", text);
	git_in(f->ws.repo, NULL, (const char *[]){ "commit", "-qam", text,
						   NULL });
	git_in(f->ws.repo, &out, (const char *[]){ "rev-parse", "HEAD",
						   NULL });
	return buf_detach(&out, NULL);
}

TEST(ckpt_push_holds_a_lease)
{
	struct fixture f;
	struct err e = ERR_INIT;
	char *second, *third, *tip;

	setup(&f);
	second = next_commit(&f, "two\n");
	third = next_commit(&f, "three\n");
	tip = remote_tip(&f);
	ASSERT_STREQ(tip, "");
	free(tip);
	/* expected there but none is: refused, nothing made */
	ASSERT(ckpt_push(&f.ws, f.remote, RUN, f.head, NULL, second, &e) < 0);
	ASSERT_CONTAINS(e.msg, "expected at");
	e = (struct err)ERR_INIT;
	tip = remote_tip(&f);
	ASSERT_STREQ(tip, "");
	free(tip);
	ASSERT_OK(ckpt_push(&f.ws, f.remote, RUN, second, NULL, NULL, &e), &e);
	/* none expected but one is (a second first push): refused */
	ASSERT(ckpt_push(&f.ws, f.remote, RUN, third, NULL, NULL, &e) < 0);
	e = (struct err)ERR_INIT;
	/* a stale driver, which last saw the first commit there, cannot
	 * move the ref back or on */
	ASSERT(ckpt_push(&f.ws, f.remote, RUN, f.head, NULL, f.head, &e) < 0);
	e = (struct err)ERR_INIT;
	ASSERT(ckpt_push(&f.ws, f.remote, RUN, third, NULL, f.head, &e) < 0);
	e = (struct err)ERR_INIT;
	tip = remote_tip(&f);
	ASSERT_STREQ(tip, second);
	free(tip);
	/* the driver that knows where it is moves it anywhere: back too
	 * (a rewound run's checkpoint is an ancestor) */
	ASSERT_OK(ckpt_push(&f.ws, f.remote, RUN, f.head, NULL, second, &e),
		  &e);
	tip = remote_tip(&f);
	ASSERT_STREQ(tip, f.head);
	free(tip);
	ASSERT_OK(ckpt_push(&f.ws, f.remote, RUN, third, NULL, f.head, &e),
		  &e);
	tip = remote_tip(&f);
	ASSERT_STREQ(tip, third);
	free(tip);
	free(second);
	free(third);
	teardown(&f);
}

TEST(ckpt_files_save_skips_links_dots_and_host_files)
{
	struct fixture f;
	struct err e = ERR_INIT;
	struct buf names = BUF_INIT;
	char *saved = NULL, *secret, *link, *sub;

	setup(&f);
	secret = xasprintf("%s/secret.txt", test_tmpdir());
	link = xasprintf("%s/stolen.md", f.run_dir);
	sub = xasprintf("%s/calls", f.run_dir);
	write_file(test_tmpdir(), "secret.txt", "TOPSECRET\n");
	write_file(f.run_dir, "plan.md", "# plan\n");
	write_file(f.run_dir, "review.md", "ok\n");
	write_file(f.run_dir, ".hidden", "x\n");
	write_file(f.run_dir, "lock", "");
	write_file(f.run_dir, "port", "7001\n");
	write_file(f.run_dir, "events.jsonl", "{}\n");
	write_file(f.run_dir, "branch.base", f.head);
	ASSERT(symlink(secret, link) == 0);
	ASSERT_OK(fs_mkdir_p(sub, 0755, &e), &e);
	write_file(sub, "1.prompt", "prompt\n");
	ASSERT_OK(ckpt_files_save(&f.ws, f.run_dir, RUN, &saved, &e), &e);
	tree_names(&f, saved, &names);
	ASSERT_STREQ(names.ptr, "plan.md\nreview.md");
	free(saved);
	free(secret);
	free(link);
	free(sub);
	buf_release(&names);
	teardown(&f);
}

TEST(ckpt_files_restore_takes_only_plain_files)
{
	struct fixture f;
	struct err e = ERR_INIT;
	struct buf blob = BUF_INIT, tree = BUF_INIT, commit = BUF_INIT,
		   text = BUF_INIT;
	char *lines, *path, *dir;
	size_t nr = 0;
	struct stat st;

	setup(&f);
	/* a hostile run-files commit: a link, an executable, a folder, the
	 * host's own lock, a file that is here already, and one to take */
	git_in(f.ws.repo, &blob, (const char *[]){ "hash-object", "-w",
						   "README", NULL });
	git_in(f.ws.repo, &tree, (const char *[]){ "rev-parse",
						   "HEAD^{tree}", NULL });
	lines = xasprintf("120000 blob %s\tplan.md\n"
			  "100755 blob %s\trun.sh\n"
			  "040000 tree %s\tcalls\n"
			  "100644 blob %s\tlock\n"
			  "100644 blob %s\t.profile\n"
			  "100644 blob %s\treview.md\n"
			  "100644 blob %s\tkept.md\n",
			  blob.ptr, blob.ptr, tree.ptr, blob.ptr, blob.ptr,
			  blob.ptr, blob.ptr);
	path = xasprintf("%s/mktree.in", test_tmpdir());
	ASSERT_OK(fs_write_atomic(path, lines, strlen(lines), &e), &e);
	buf_reset(&tree);
	{
		const char *argv[] = { "sh", "-c", "git mktree <\"$1\"", "sh",
				       path, NULL };

		ASSERT_OK(spawn_capture(argv, f.ws.repo, &tree, 1 << 20,
					30000, &e),
			  &e);
		buf_rtrim(&tree);
	}
	git_in(f.ws.repo, &commit, (const char *[]){ "commit-tree", "-m", "x",
						     tree.ptr, NULL });
	write_file(f.run_dir, "kept.md", "this host's own\n");
	dir = xasprintf("%s/fresh", test_tmpdir());
	ASSERT_OK(ckpt_files_restore(&f.ws, commit.ptr, f.run_dir, &nr, &e),
		  &e);
	ASSERT_EQ(nr, 1);
	ASSERT_OK(fs_read(in(f.run_dir, "review.md"), &text, 4096,
			  &e),
		  &e);
	ASSERT_STREQ(text.ptr, "hello\n");
	buf_reset(&text);
	ASSERT_OK(fs_read(in(f.run_dir, "kept.md"), &text, 4096, &e),
		  &e);
	ASSERT_STREQ(text.ptr, "this host's own\n");
	ASSERT(lstat(in(f.run_dir, "plan.md"), &st) < 0);
	ASSERT(lstat(in(f.run_dir, "run.sh"), &st) < 0);
	ASSERT(lstat(in(f.run_dir, "calls"), &st) < 0);
	ASSERT(lstat(in(f.run_dir, "lock"), &st) < 0);
	ASSERT(lstat(in(f.run_dir, ".profile"), &st) < 0);
	/* a run folder that is not there yet is made */
	ASSERT_OK(ckpt_files_restore(&f.ws, commit.ptr, dir, &nr, &e), &e);
	ASSERT_EQ(nr, 2);
	ASSERT_EQ(ckpt_files_restore(&f.ws, "HEAD", dir, &nr, &e),
		  BATON_EINVAL);
	free(lines);
	free(path);
	free(dir);
	buf_release(&blob);
	buf_release(&tree);
	buf_release(&commit);
	buf_release(&text);
	teardown(&f);
}
