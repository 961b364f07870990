/*
 * Chat intake (issue 23, docs/chat.md): a conversation with the planner
 * role turns what a person wants into queued tasks. The phases:
 *
 *   greeting ──first message──▶ requirement_gathering ──plan ready──▶
 *   plan_proposal ──start(mode)──▶ execution ──tasks queued──▶ monitoring
 *        ▲                                         (reports each task's
 *        └─ plan_proposal: a new message asks again   progress)
 *
 * The planner's answer ends with CHAT_MARKER when its plan is complete:
 * the marker, alone on the last line, outside any fenced block, and a
 * valid plan (plan.h) in the answer. The saved message has the marker
 * cut; a mode_selection message follows. Anything else (a marker in the
 * middle, or inside a code block) is plain text.
 *
 * Each function takes the conversation's id and works on x->store; the
 * same calls serve `baton chat` on a local store and serve's API.
 */
#ifndef BATON_SCHED_CHAT_H
#define BATON_SCHED_CHAT_H

#include <stddef.h>
#include <stdint.h>

struct err;
struct sched_ctx;

#define CHAT_MARKER "---PLAN_READY---"
/* A person's message is at most this many bytes. */
#define CHAT_MAX_MESSAGE (16 * 1024)

#define CHAT_GREETING	"greeting"
#define CHAT_GATHERING	"requirement_gathering"
#define CHAT_PROPOSAL	"plan_proposal"
#define CHAT_EXECUTION	"execution"
#define CHAT_MONITORING "monitoring"

/* The modes of start-execution, their labels and what they mean. */
struct chat_mode {
	const char *name;  /* "direct", "local", "github" */
	const char *label; /* "Direct" */
	const char *about; /* "run without the judge" */
};
extern const struct chat_mode chat_modes[];
extern const size_t chat_nr_modes;

/* The mode called name, or NULL. */
const struct chat_mode *chat_mode_find(const char *name);

/*
 * Whether text is a complete plan's answer: it ends with CHAT_MARKER
 * alone on its last line (white space after it is fine), outside every
 * ``` fenced block. Returns 1 with *cut the length of the text before
 * the marker, white space trimmed; 0 otherwise.
 */
int chat_plan_ready(const char *text, size_t *cut);

/* A new conversation with the greeting; its id in *id. */
int chat_new(struct sched_ctx *x, int64_t *id, struct err *e);

/*
 * Records the person's message text in conversation id: BATON_EINVAL
 * when it is empty or over CHAT_MAX_MESSAGE, BATON_ENOTFOUND for no such
 * conversation, BATON_EBADSTATE when its tasks are queued already (a
 * conversation in execution or monitoring takes no more requirements).
 */
int chat_say(struct sched_ctx *x, int64_t id, const char *text, struct err *e);

/* Called with each piece of the planner's reply as it is known. */
typedef void chat_chunk_fn(void *arg, const char *text, size_t len);

/*
 * The planner's answer to the conversation so far: asks the planner
 * role (sched_call_role, in the repository, read-only), records its
 * answer, and moves the phase: plan_proposal with a mode_selection
 * message when the plan is ready, else requirement_gathering. The
 * answer goes to chunk (may be NULL) before it is recorded. A failed
 * call is recorded as an error message and returned.
 */
int chat_reply(struct sched_ctx *x, int64_t id, chat_chunk_fn *chunk, void *arg,
	       struct err *e);

/*
 * Starts the proposed plan in mode (chat_modes): only from
 * plan_proposal, once (BATON_ECONFLICT for a second start, whoever won
 * the first); BATON_EINVAL for an unknown mode or github without a
 * forge. Runs the start-up preflight (may be NULL), records the plan
 * (store_plan_add, source "chat/<id>"), queues its tasks as `baton plan`
 * does (origin "chat", or "chat-direct": no judge), and moves to
 * execution, then monitoring. *nr (may be NULL) gets how many tasks.
 */
struct buf;
/*
 * The start-up preflight, which lives above this layer (forge_startup):
 * appends what it found to note, one sentence; a non-zero return (with
 * e filled) stops the start before anything is queued.
 */
typedef int chat_preflight_fn(void *arg, struct buf *note, struct err *e);

int chat_start(struct sched_ctx *x, int64_t id, const char *mode,
	       chat_preflight_fn *preflight, void *arg, size_t *nr,
	       struct err *e);

/*
 * In monitoring: a progress message for each task whose status changed
 * since the last report, and one when all of them are finished. *said
 * (may be NULL) gets how many messages were added.
 */
int chat_progress(struct sched_ctx *x, int64_t id, int *said, struct err *e);

#endif
