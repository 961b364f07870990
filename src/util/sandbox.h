/*
 * The bubblewrap sandbox (execution.sandbox: auto, bwrap or none). The
 * agent and everything it starts are untrusted (DESIGN.md section 6): a
 * sandboxed child sees the system read-only, a private /dev, /proc and
 * /tmp, a fresh empty $HOME and an empty repository top (so neither the
 * user's home nor the main checkout nor .baton/ with its store, token
 * and other runs), and on top of that only what its caller binds: the
 * worktree, its git directory, a per-call output folder, a private home,
 * a CLI's own login. It lives in a pid namespace of its own and dies with
 * baton's child, so nothing it starts outlives the call; when no_net is
 * set (validation) it has no network either.
 *
 * The caller lays the mounts in order: a later mount covers an earlier
 * one, so hide a folder before binding what is kept inside it.
 */
#ifndef BATON_UTIL_SANDBOX_H
#define BATON_UTIL_SANDBOX_H

#include "util/strvec.h"

struct buf;

struct sandbox {
	int on;
	int no_net;
	struct strvec mounts; /* bwrap's mount arguments, in order */
};

#define SANDBOX_INIT { 0, 0, STRVEC_INIT }

/* Fills sb (on or off; no_net: no network). Release it after. */
void sandbox_init(struct sandbox *sb, int on, int no_net);
void sandbox_release(struct sandbox *sb);
/* dst becomes a copy of src (NULL: off), to add mounts to. */
void sandbox_copy(struct sandbox *dst, const struct sandbox *src);

/*
 * Mounts, each skipped when sb is off or the path does not exist (a
 * missing source would stop bwrap): hide lays an empty tmpfs over a
 * folder (never over "/"), ro binds a path read-only, rw read-write.
 */
void sandbox_hide(struct sandbox *sb, const char *path);
void sandbox_ro(struct sandbox *sb, const char *path);
void sandbox_rw(struct sandbox *sb, const char *path);

/*
 * The hiding every sandboxed child gets: $HOME (keeping readable the
 * folders of PATH that lie under it, where a user's tools live) and the
 * repository top repo (the main checkout and its .baton/). First come
 * the folders of $BATON_SANDBOX_RW (colon-separated, absolute), which
 * the user wants writable in every sandbox (a shared cache, a test
 * harness's state); $HOME and repo are hidden even inside them.
 */
void sandbox_hide_user(struct sandbox *sb, const char *repo);

/*
 * A worktree's git: the repository's git directory common (REPO/.git)
 * read-only (objects and refs, for the child's own git log and diff),
 * then gitdir (the worktree's admin folder) read-write, but only when it
 * really is one, common/worktrees/<id>: git finds it through the
 * worktree's .git file, which an agent can rewrite. Either may be NULL.
 */
void sandbox_git(struct sandbox *sb, const char *common, const char *gitdir);

/*
 * Keeps the program at path (absolute; else nothing) readable: one
 * installed under $HOME (its real path there) with its folder, or the
 * npm package it belongs to (the nearest folder above it with a
 * package.json); one elsewhere (a script under /tmp, in a repository)
 * as the file alone, since its folder may be one the sandbox hides.
 */
void sandbox_program(struct sandbox *sb, const char *path);

/*
 * Appends to out the argv that runs argv inside sb: "bwrap ... -- argv"
 * when sb is on, argv unchanged otherwise (sb may be NULL).
 */
void sandbox_wrap(const struct sandbox *sb, const struct strvec *argv,
		  struct strvec *out);

/*
 * bwrap exits 128+N when the program it ran was killed by signal N: the
 * signal for such an exit status of a child run in sb (on), else 0.
 */
int sandbox_signal(const struct sandbox *sb, int status);

/*
 * 1 when bwrap is on PATH and can make a sandbox here with the flags
 * baton uses (user and pid namespaces, a private network). Probed once
 * per process. When it cannot, why (may be NULL) gets the reason.
 */
int sandbox_available(struct buf *why);

/*
 * Whether execution.sandbox (setting) puts children in the sandbox:
 * "bwrap" always (bwrap then fails if it cannot), "none" never, "auto"
 * (and NULL) when sandbox_available(). why (may be NULL) gets one line
 * saying why, for doctor and the run's events.
 */
int sandbox_mode(const char *setting, struct buf *why);

#endif
