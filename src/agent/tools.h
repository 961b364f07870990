/*
 * The tools of baton's own agent (http.c): what the model may do to the
 * run's worktree. Every path a tool touches is confined to the worktree:
 *
 *   read_file {path, offset?, limit?}   lines of a text file (256 KiB cap)
 *   write_file {path, content}          create or replace, parents too
 *   edit {path, old, new}               replace the one occurrence of old
 *   list {path?}                        a directory, sorted, dirs with '/'
 *   search {pattern, path?}             fixed string, "file:line: text"
 *   run {argv, timeout_seconds?}        a command in the worktree, through
 *                                       spawn and the sandbox
 *
 * A relative path is relative to the worktree; an absolute one must lie
 * inside it. A path whose ".." leaves the worktree, a symlink (the file
 * or any existing parent) that resolves outside it, a dangling symlink,
 * and anything under .git are refused with a message naming the path.
 * The model sees every refusal as the tool's result and can go on.
 */
#ifndef BATON_AGENT_TOOLS_H
#define BATON_AGENT_TOOLS_H

#include <jansson.h>
#include <stdint.h>

#include "util/spawn.h"

struct buf;
struct sandbox;
struct strvec;

struct tools_ctx {
	const char *cwd;	       /* the worktree root, realpath'd */
	const struct sandbox *sandbox; /* run: NULL or off: no sandbox */
	const struct strvec *env;      /* run: "K=V" added, or NULL */
	int wake_fd, tick_ms;	       /* run: passed to spawn_run */
	spawn_event_cb *on_event;
	void *arg;
	int64_t deadline_ms; /* time_mono_ms() by which run must end; 0: none */
};

/*
 * Runs tool name with args (a JSON object, borrowed; NULL is taken as
 * {}) and appends what the model should see to out. Returns 0 when the
 * tool did its work, -1 when it failed: a bad argument, a refused path, a
 * missing file, a command that exited nonzero or timed out. out then
 * holds the reason. An unknown name is -1 with the list of tools.
 */
int tools_call(const struct tools_ctx *ctx, const char *name, json_t *args,
	       struct buf *out);

/*
 * The confinement every tool applies to a path, for other clients of the
 * worktree (the ACP provider's fs and terminal methods): path as an agent
 * wrote it (relative to ctx->cwd, or absolute) into res, the real
 * absolute path it names, or -1 with the reason appended to out: empty,
 * outside the worktree (directly, by "..", or through a symlink), a
 * dangling symlink, under .git, or in baton's own .baton/. The parts of
 * res that do not exist yet hold no symlink; open it with O_NOFOLLOW.
 */
int tools_resolve(const struct tools_ctx *ctx, const char *path,
		  struct buf *res, struct buf *out);

/*
 * The tool definitions in a wire's shape, as a new JSON array (caller
 * decrefs): anthropic nonzero gives Messages API tools ({name,
 * description, input_schema}), zero gives Chat Completions tools
 * ({type: function, function: {name, description, parameters}}).
 */
json_t *tools_schema(int anthropic);

/*
 * Appends a one-line account of a call for a human transcript, such as
 * "edit src/x.c: replaced 1 occurrence" or "run make test: exit 2". rc
 * and out are what tools_call returned and wrote.
 */
void tools_describe(const char *name, json_t *args, int rc,
		    const struct buf *out, struct buf *line);

#endif
