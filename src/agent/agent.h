/*
 * Providers: one interface to start an agent on a prompt in a working
 * directory, record its output in the run folder, enforce a timeout, and
 * return how it ended, its final text, usage, cost and, when it failed,
 * why (DESIGN.md section 5, docs/agents.md).
 *
 * Adapters are registered in one table by provider type:
 *
 *   command      any program: prompt on stdin and in BATON_PROMPT_FILE,
 *                final text on stdout
 *   claude-code  claude -p --output-format stream-json   (cli.c)
 *   codex        codex exec --json                        (cli.c)
 *   gemini       gemini -p --output-format stream-json    (cli.c)
 *   qwen         qwen -p --output-format stream-json      (cli.c)
 *   opencode     opencode run --format json               (cli.c)
 *   acp          any agent speaking the Agent Client Protocol
 *                over its stdio (gemini --acp, qwen --acp,
 *                claude-code-acp)                         (acp.c)
 *   aider        aider --message, plain text              (cli.c)
 *   copilot      copilot --output-format json -p          (cli.c)
 *   pi           pi -p --mode json                        (cli.c)
 *   kilo         kilo run --format json (opencode's)      (cli.c)
 *   cline        cline --json                             (cli.c)
 *   continue     cn -p --format json                      (cli.c)
 *   amp          amp --execute --stream-json (claude's)   (cli.c)
 *   auggie       auggie --print --quiet, plain text       (cli.c)
 *   crush        crush run --quiet, plain text            (cli.c)
 *   openai       baton's own tool loop, Chat Completions  (http.c)
 *   anthropic    baton's own tool loop, Messages          (http.c)
 */
#ifndef BATON_AGENT_AGENT_H
#define BATON_AGENT_AGENT_H

#include <stdint.h>

#include "util/buf.h"
#include "util/spawn.h"

struct config_provider;
struct err;
struct fail_verdict;
struct json_t;
struct policy;
struct sandbox;
struct strvec;

/* How a call ended, as a process. */
enum agent_outcome {
	AGENT_OK,	/* exit 0 */
	AGENT_EXIT,	/* exited nonzero */
	AGENT_CRASHED,	/* killed by a signal it did not ask for */
	AGENT_TIMEOUT,	/* ran out of time; its group was killed */
	AGENT_STOPPED,	/* stopped on request (abort, signal) */
};

/*
 * Why a call failed, read from the exit status AND the agent's own
 * report (exit codes lie: qwen exits 0 after an API error). The engine
 * acts on the class: quota and unavailable wait and retry the stage,
 * auth and missing block the run with the fix in the message, timeout
 * and crash are tried again as their failure class allows
 * (agent_failure_class, core/failclass.h), the rest fail or block it.
 */
enum agent_failure {
	AGENT_FAIL_NONE,
	AGENT_FAIL_QUOTA,	/* rate limit or usage quota (HTTP 429);
				   reset_at_ms when the agent said when */
	AGENT_FAIL_UNAVAILABLE, /* the model API failed (5xx, overloaded)
				   after the agent's own retries */
	AGENT_FAIL_AUTH,	/* credentials missing or refused (401/403) */
	AGENT_FAIL_MISSING,	/* the program is not installed */
	AGENT_FAIL_TIMEOUT,	/* ran past timeout_seconds */
	AGENT_FAIL_CRASH,	/* died or exited nonzero, no known cause */
	AGENT_FAIL_BAD_OUTPUT,	/* ran, but said nothing baton can read */
	AGENT_FAIL_LIMIT,	/* hit max steps / max tokens / max turns */
	AGENT_FAIL_CONTEXT,	/* the prompt or conversation is larger than
				   the model's context window: compact and
				   try once more */
};

/*
 * 1 if text is a provider's "context window exceeded" error: OpenAI's
 * context_length_exceeded ("maximum context length"), Anthropic's
 * "prompt is too long", Gemini's "input token count ... exceeds the
 * maximum number of tokens", and the like of other providers and CLIs.
 */
int agent_context_overflow(const char *text);

struct agent_request {
	const struct config_provider *provider;
	const char *cwd;	  /* the run's worktree */
	const char *prompt;	  /* the full prompt text */
	const char *prompt_file;  /* where the prompt was saved */
	const struct strvec *env; /* BATON_* variables for the agent */
	const char *out_path;	  /* raw stdout (or the HTTP transcript) */
	const char *err_path;	  /* raw stderr */
	/*
	 * A directory the agent may own: a CLI with a private home keeps
	 * its config there; baton's own agent records every HTTP request
	 * and response there (NNN-request.json, NNN-response.json). Created
	 * on demand. NULL: none.
	 */
	const char *home;
	const char *resume_session; /* an earlier call's session id to continue, or NULL */
	const struct sandbox *sandbox; /* NULL or off: no sandbox */
	int wake_fd, tick_ms;	  /* see spawn_opts */
	spawn_event_cb *on_event;
	void *arg;
	/*
	 * What an agent that asks before it acts (ACP's
	 * session/request_permission, and its fs and terminal requests) may
	 * do. policy: a loop run's envelope (core/policy.h), every effect
	 * held to policy_check; NULL: the other pipelines' rule, writes
	 * within allowed_paths (NULL or empty: anywhere in the worktree),
	 * commands and fetches granted (the sandbox holds them). Either way
	 * a path outside the worktree (directly, by "..", through a
	 * symlink), under .git or under .baton is refused.
	 */
	const struct policy *policy;
	const struct strvec *allowed_paths;
};

struct agent_result {
	enum agent_outcome outcome;
	enum agent_failure failure;
	int status;	      /* exit code or 128+signal */
	int signal;	      /* the signal that killed it, or 0 */
	int http_status;      /* API status the agent reported failing, or 0 */
	int64_t reset_at_ms;  /* quota: when it resets (epoch ms); 0: unknown */
	char session_id[128]; /* the agent's session/thread id, or "" */
	struct buf text;      /* the agent's final text (bounded) */
	struct buf message;   /* on failure: what went wrong, one line */
	struct buf err_tail;  /* end of stderr, for messages */
	uint64_t out_bytes;
	int64_t duration_ms;
	int64_t tokens_in, tokens_out;
	double cost_usd;      /* reported by the agent, else from pricing */
	int cost_known;	      /* cost_usd came from the agent or pricing */
	int steps;	      /* turns / tool-loop steps, when known */
	/* baton's HTTP agent dropped older tool results to fit the context
	   window: the conversation's bytes before and after; 0: it did not */
	int64_t compacted_before, compacted_after;
	/*
	 * ACP: what the agent asked for and was refused, a JSON array of
	 * {"tool", "kind", "path", "reason"} (path: the file, command or
	 * host), or NULL; agent_result_release frees it.
	 */
	struct json_t *refused;
};

#define AGENT_RESULT_INIT                                                      \
	{ .text = BUF_INIT, .message = BUF_INIT, .err_tail = BUF_INIT }

/*
 * Runs the provider on the request. Returns 0 when the call was made
 * (read r->outcome and r->failure; a program that is not installed is
 * r->failure == AGENT_FAIL_MISSING, not an error), or a negative code when
 * baton itself could not do its part (unknown type, a disk error). r is
 * always filled and must be released.
 */
int agent_run(const struct agent_request *req, struct agent_result *r,
	      struct err *e);
void agent_result_release(struct agent_result *r);
const char *agent_outcome_name(enum agent_outcome o);
const char *agent_failure_name(enum agent_failure f);

/*
 * Fills r->failure (and message, reset_at_ms) from what the adapter
 * already read: outcome, http_status, message and err_tail. Adapters call
 * it last; it keeps a class an adapter set itself.
 */
void agent_classify(struct agent_result *r);

/*
 * Reads a quota reset time out of an error message: "try again in 2
 * hours 5 minutes", "retry after 30 seconds", "resets at
 * 2026-11-21T15:00:00Z", "Claude AI usage limit reached|1735689600".
 * Returns epoch ms, or 0 when the text names none. now_ms anchors
 * relative times.
 */
int64_t agent_parse_reset(const char *text, int64_t now_ms);

/* The longest a quota or an outage is waited for before trying again. */
#define AGENT_MAX_WAIT_MS (24LL * 3600 * 1000)

/*
 * When to try again after a quota or an outage: at the reset the agent
 * named (reset_at_ms, when still ahead), exactly, without jitter; else
 * after backoff_seconds doubled n times (at most 64 times), plus
 * jitter_pct percent of a tenth of it. Never later than
 * AGENT_MAX_WAIT_MS from now. Epoch ms.
 */
int64_t agent_retry_at(int64_t reset_at_ms, int64_t now_ms, int backoff_seconds,
		       int n, int jitter_pct);

/*
 * The failure class of a failed call (core/failclass.h), for how often
 * it is tried again: quota, outage and timeout are flaky; auth and
 * missing are setup and not retryable; the rest is read from the
 * message, else the end of stderr (a permission prompt, a model loop,
 * "no changes were made" ...). Always fills *out.
 */
void agent_failure_class(const struct agent_result *r,
			 struct fail_verdict *out);

/*
 * Turns a CLI's captured stdout (the whole stream) into r: final text,
 * session id, usage, cost, reported errors. type is the provider type.
 * For tests and for `baton doctor`; adapters use it after the call.
 */
void agent_parse_stream(const char *type, const char *out, size_t len,
			struct agent_result *r);

/*
 * Watching a call's output while it runs: an incremental reader of the
 * growing stdout file (req.out_path) that yields readable text. For the
 * JSON-stream CLIs (claude-code, codex, gemini, qwen, opencode, copilot,
 * pi, kilo, cline, continue, amp) that is
 * the assistant's text and a short line per tool call ("[tool] Bash:
 * ls"), read with the same parsers agent_run uses; only complete lines
 * are read, a partial last line waits. For the plain types (command,
 * aider) and the HTTP agents (openai, anthropic, whose transcript gets a
 * line per tool step as it runs) it is the bytes themselves, a line at a
 * time: a partial line waits until it ends or grows past 4 KiB.
 *
 * agent_watch_new starts at the file's current end (an earlier call's
 * output is not this one's; a missing file is empty) and never fails.
 * agent_watch_read appends to out what the file gained since the last
 * call and returns the number of bytes appended; when out is capped
 * (buf_init with a max) the text past the cap is dropped, though the
 * whole file is still read. agent_watch_finish does the same once the
 * call has ended, then also takes the partial last line. Read errors
 * read as "nothing new". agent_watch_free accepts NULL.
 */
struct agent_watch;
struct agent_watch *agent_watch_new(const char *type, const char *path);
size_t agent_watch_read(struct agent_watch *w, struct buf *out);
size_t agent_watch_finish(struct agent_watch *w, struct buf *out);
void agent_watch_free(struct agent_watch *w);

/* What baton knows about an agent type, for doctor and messages. */
struct agent_info {
	const char *type;
	const char *program;	  /* default program name, or NULL (HTTP) */
	const char *install_hint; /* how to install it */
	const char *auth_hint;	  /* what to set when auth fails */
	int is_cli;
	/*
	 * The adapter continues req->resume_session natively (claude
	 * --resume, codex exec resume, ...): the engine then keeps the
	 * worktree of a cut-off call and sends no transcript summary.
	 */
	int resumes;
};

/*
 * Whether id may be handed to an agent as a session to resume. A session
 * id comes from the agent's own output, which is untrusted: it goes on a
 * command line, so only 1 to AGENT_SESSION_MAX bytes of [A-Za-z0-9._:-]
 * starting with a letter or a digit pass (never a flag, a path, a
 * shell metacharacter or a line break).
 */
#define AGENT_SESSION_MAX 127
int agent_session_id_ok(const char *id);

/*
 * The session id a watched call has reported so far (a JSON-stream CLI
 * names it early: claude's init, codex's thread.started), or "" when it
 * has not or its type has no stream. Borrowed until agent_watch_free.
 */
const char *agent_watch_session(const struct agent_watch *w);

/*
 * The readable account of a finished call's output file (as
 * agent_watch shows it: text and a line per tool call for the JSON
 * streams, the bytes for the rest), appended to out; when longer than
 * max bytes, only its end is kept, from a line start. For the summary a
 * fresh call gets of a cut-off one. A missing file appends nothing.
 */
void agent_transcript_tail(const char *type, const char *path, size_t max,
			   struct buf *out);

/*
 * The absolute path of program: itself when it holds a '/', else the
 * first executable match on PATH. NULL when there is none. Caller frees.
 */
char *agent_which(const char *program);

/* The program provider p runs (its command's, else its type's), or NULL
 * when it runs none (an HTTP agent). */
const char *agent_program(const struct config_provider *p);

/* The adapter table (agent_int.h has the entry type). */
int agent_type_known(const char *type);
const struct agent_info *agent_info(const char *type);
/* The known types in table order; *n is set to their number. */
const struct agent_info *const *agent_infos(size_t *n);

#endif
