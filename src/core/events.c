/*
 * The registry of event types: see events.h. One row per type, grouped
 * as docs/lifecycle.md lists them; `when` and `data` are markdown, as
 * the docs print them (a `|` inside a cell is written `\|`). A field
 * marked `?` is in the data only when it has a value.
 */
#include "util/compat.h"

#include "core/events.h"
#include "util/buf.h"
#include "util/err.h"

/* Each group's short name and the heading its table has in the docs. */
static const struct {
	const char *name, *title;
} groups[EVENT_G_NR] = {
	[EVENT_G_RUN] = { "run", "The run itself:" },
	[EVENT_G_AGENT] = { "agent", "Agent calls:" },
	[EVENT_G_STEER] = { "steer", "People and processes steering the run:" },
	[EVENT_G_BUGFIX] = { "bugfix", "The bug-fix pipeline "
				       "([pipelines.md](pipelines.md)):" },
	[EVENT_G_LOOP] = { "loop", "The loop pipeline:" },
	[EVENT_G_ASSIST] = { "assist", "The assist pipeline:" },
	[EVENT_G_RESEARCH] = { "research", "The research pipeline:" },
	[EVENT_G_TASK] = { "task", "A task in the queue "
				   "([runtime.md](runtime.md)); a task's "
				   "events carry `\"task\": N`:" },
	[EVENT_G_JUDGE] = { "judge", "The judge "
				     "([runtime.md](runtime.md#the-judge)):" },
	[EVENT_G_MERGE] = { "merge",
			    "The merge queue "
			    "([runtime.md](runtime.md#the-merge-queue)):" },
	[EVENT_G_FORGE] = { "forge", "The forge ([forge.md](forge.md)):" },
};

static const struct event_type types[] = {
	/* ---- the run itself ---- */
	{ "transition", EVENT_G_RUN, "the status changed",
	  "none for most transitions; `{\"gate\": STAGE}` into "
	  "`waiting_for_approval`; `{\"decision\": \"approve\" \\| \"reject\" "
	  "\\| \"request-changes\" \\| \"revise\" \\| \"defer\", \"gate\": "
	  "STATUS, \"guidance\"?, \"option\"?}` out of it (the decision's one spelling, "
	  "[Gates](#gates)); `{\"resume_to\": STATUS}` into `paused`; "
	  "`{\"reason\": ...}` into `blocked`, `failed`, `aborted`; "
	  "`{\"stage\", \"cause\"}` into `interrupted`; "
	  "`{\"checkpoint\": COMMIT}` out of it. The first event of a run is "
	  "a transition with `from` null and `to` `created`." },
	{ "worktree", EVENT_G_RUN, "the run's worktree was created",
	  "`{\"path\", \"branch\", \"base\", \"port\"}`; `port` is the "
	  "worktree's own TCP port (`BATON_PORT`, "
	  "[config.md](config.md#hooks))" },
	{ "worktree_remade", EVENT_G_RUN,
	  "recovery found the worktree lost (git no longer knows it, or its "
	  "files are gone) and made it again at the last checkpoint; its "
	  "`worktree_setup` hooks run again before the next stage",
	  "`{\"path\", \"commit\"}`" },
	{ "worktree_removed", EVENT_G_RUN,
	  "`baton clean` removed the worktree of an ended run and released "
	  "its port",
	  "`{\"path\"?, \"port\", \"branch\"?}`" },
	{ "run_cleaned", EVENT_G_RUN,
	  "`baton clean` removed what an ended run left: its worktree, "
	  "branch or run folder (the record stays)",
	  "`{\"worktree\", \"branch\"?, \"folder\"}`" },
	{ "hook", EVENT_G_RUN,
	  "a lifecycle hook command ran ([config.md](config.md#hooks))",
	  "`{\"point\", \"index\", \"command\", \"stage\"?, \"exit\", "
	  "\"timed_out\", \"passed\", \"duration_ms\", \"artifact\", "
	  "\"output_tail\"}`; `artifact` is its whole output, in the run "
	  "folder; a failing `worktree_setup` or `before_stage` command "
	  "blocks the run, naming it in the reason" },
	{ "sandbox", EVENT_G_RUN, "each time a driver takes the run",
	  "`{\"on\", \"mode\", \"why\", \"advisory\"?}`: whether agents and "
	  "checks run in the sandbox (`execution.sandbox`), and why; "
	  "`advisory` says what that means when it is off "
	  "([security.md](security.md))" },
	{ "stage_started", EVENT_G_RUN,
	  "a stage's work began (phase `running`)",
	  "`{\"stage\", \"kind\", \"attempt\", \"review_loops\"}`; a member "
	  "of a parallel group writes `{\"stage\", \"kind\", \"version\", "
	  "\"file\", \"group\"}`" },
	{ "stage_skipped", EVENT_G_RUN,
	  "a person chose to go on without a stage whose agent is not "
	  "installed",
	  "`{\"stage\", \"why\"}`" },
	{ "checkpoint", EVENT_G_RUN, "after a stage that edits code",
	  "`{\"stage\", \"commit\", \"changed\", \"pushed\"?}`; with "
	  "`repo.url`, `pushed` says whether the commit reached the shared "
	  "remote as `refs/baton/checkpoints/RUN` before this record "
	  "([operations.md](operations.md#a-run-survives-its-host))" },
	{ "run_taken_over", EVENT_G_RUN,
	  "the run's host died and another host's worker took the run over "
	  "from its last pushed checkpoint, to go on at its stage",
	  "`{\"from\", \"to\", \"holder\", \"checkpoint\", \"pushed\", "
	  "\"stage\", \"status\", \"files\"}`: the worktrees it left and "
	  "now has, the worker, the checkpoint on record and the pushed "
	  "one (which contains it), the number of run-folder files put "
	  "back" },
	{ "run_takeover_failed", EVENT_G_RUN,
	  "the run's host died and the run could not be taken over (no "
	  "checkpoint pushed yet, the remote out of reach, the checkpoint "
	  "on record not in the pushed one): it is aborted and its task "
	  "starts afresh",
	  "`{\"from\", \"holder\", \"reason\", \"checkpoint\"}`" },
	{ "validation", EVENT_G_RUN, "a validate stage finished",
	  "`{\"stage\", \"passed\", \"commands\"}` (the number of commands; "
	  "validation.json lists the ones `when_changed` skipped, "
	  "[config.md](config.md#conditional-checks))" },
	{ "panel_verdict", EVENT_G_RUN,
	  "an arbiter merged its panel's reviews into one verdict "
	  "([pipelines.md](pipelines.md#vibestrates-flows))",
	  "`{\"stage\", \"decision\", \"reviewers\", \"findings\", \"open\"}`" },
	{ "reviews", EVENT_G_RUN, "the reviews of a review stage are in",
	  "`{\"stage\", \"decision\", \"by\"}`: the worst decision and each "
	  "reviewer's" },
	{ "plugin_outcome", EVENT_G_RUN,
	  "a stage of a plugin kind left its outcome "
	  "([pipelines.md](pipelines.md#plugin-kinds))",
	  "`{\"stage\", \"plugin\", \"kind\", \"outcome\": \"pass\" \\| "
	  "\"changes\" \\| \"block\" \\| \"fail\", \"summary\"?, "
	  "\"findings\"}`; `findings` is how many" },
	{ "question", EVENT_G_RUN,
	  "the run asks a person (before its `waiting_for_approval`)",
	  "`{\"stage\", \"kind\", \"question\", \"options\", ...}`; `kind` is "
	  "what is asked (`consolidation`, `clarification`, `escalation`, "
	  "`feedback`, `agent_missing`, `restart`, `blocker`, `needs` ...), "
	  "with what that kind adds; a question that stands for an end adds "
	  "its `outcome` and `why`, one whose answers go different ways its "
	  "`routes` `{option: status}`" },
	{ "escalation_timeout", EVENT_G_RUN,
	  "no one answered an escalation in time, so its default applies",
	  "`{\"stage\"?, \"default\", \"timeout_seconds\"?, \"applied\"}`" },
	{ "approval_timeout", EVENT_G_RUN,
	  "no one decided a gate within `policies.approval_timeout_seconds`, "
	  "so it is rejected",
	  "`{\"gate\", \"timeout_seconds\"}`" },
	{ "report", EVENT_G_RUN,
	  "a run report, on the cadence of config `reports`",
	  "`{\"n\", \"kind\", \"elapsed_ms\", \"status\", \"stage\", "
	  "\"changed\", \"blockers\", \"next\", \"budget\", \"evidence\", "
	  "\"file\"}`; see [Reports](#reports)" },

	/* ---- agent calls ---- */
	{ "agent_started", EVENT_G_AGENT, "an agent process started",
	  "`{\"provider\", \"call\", \"pid\", \"stage\", \"type\", "
	  "\"part\", \"role\"?}`; `part` is the file a bug-fix or plugin "
	  "call writes, else null" },
	{ "agent_session", EVENT_G_AGENT,
	  "a running agent named its session (or thread) id, which a later "
	  "call of the stage can continue ([Session resume](#session-resume))",
	  "`{\"stage\", \"provider\", \"type\", \"call\", \"session\", "
	  "\"part\", \"role\"?}`" },
	{ "agent_resumed", EVENT_G_AGENT,
	  "a call continues an earlier call of its stage: natively in its "
	  "session, or afresh with a summary of the cut-off call "
	  "([Session resume](#session-resume))",
	  "`{\"stage\", \"provider\", \"type\", \"path\": \"native\" \\| "
	  "\"summary\", \"from_call\", \"cut_off\", \"session\"?, "
	  "\"how\"?, \"part\"?}`" },
	{ "session_refused", EVENT_G_AGENT,
	  "the session id an agent reported is not a plain token: it is "
	  "never passed to an agent",
	  "`{\"stage\", \"provider\", \"call\", \"reason\"}`" },
	{ "agent_output", EVENT_G_AGENT,
	  "an agent (or a validate stage's checks) printed something, about "
	  "once a second while it runs",
	  "`{\"stage\", \"call\", \"provider\", \"text\", \"cut\"?}`; see "
	  "[Live output](#live-output)" },
	{ "agent_exited", EVENT_G_AGENT, "the agent ended",
	  "`{\"call\", \"provider\", \"type\", \"outcome\": \"ok\" \\| "
	  "\"exit\" \\| \"crashed\" \\| \"timeout\" \\| \"stopped\", "
	  "\"failure\", \"exit_code\", \"duration_ms\", \"output_bytes\", "
	  "\"tokens_in\", \"tokens_out\", \"steps\", \"stage\", \"role\"?, \"part\"?, "
	  "\"model\"?, \"cost_usd\"?, \"session\"?, \"message\"?, "
	  "\"http_status\"?}`; "
	  "`failure` classifies a failed call: `none`, `quota`, "
	  "`unavailable`, `auth`, `missing`, `timeout`, `crash`, "
	  "`bad_output`, `limit`, `context`" },
	{ "context_compacted", EVENT_G_AGENT,
	  "the model's context window was too small: the prompt's largest "
	  "sections were cut (`prompt_sections`), or baton's HTTP agent "
	  "dropped older tool results (`tool_results`), to try once more",
	  "`{\"stage\", \"provider\", \"how\", \"before\", \"after\", "
	  "\"target\"?}` (sizes in bytes)" },
	{ "memory_written", EVENT_G_RUN,
	  "the run's outcome was written to the repository's memory",
	  "`{\"id\", \"bytes\"}`" },
	{ "quota_wait", EVENT_G_AGENT,
	  "the agent hit a quota or an outage, and the stage waits before it "
	  "tries again",
	  "`{\"stage\", \"provider\", \"failure\", \"message\", \"until\", "
	  "\"wait_ms\", \"attempt\", \"of\"}`" },
	{ "agent_retry", EVENT_G_AGENT,
	  "a call failed and is tried again, as its failure class allows "
	  "(`execution.retry_limits`); the next prompt says what failed",
	  "`{\"stage\", \"provider\", \"class\", \"reason\", "
	  "\"signature\", \"try\", \"of\"}`; see "
	  "[agents.md](agents.md#failure-classes-and-retries)" },
	{ "contract_error", EVENT_G_AGENT,
	  "an agent's output broke its contract",
	  "`{\"stage\", \"error\", \"retry\"}`; `retry` is true when one more "
	  "try follows" },
	{ "contract_warning", EVENT_G_AGENT,
	  "a verdict file was broken but a `DECISION:` / `VERIFICATION:` "
	  "line was accepted, or an artifact the agent wrote could not be "
	  "taken",
	  "`{\"stage\", \"error\"}` or `{\"file\", \"error\"}`" },
	{ "policy_violation", EVENT_G_AGENT,
	  "a stage broke a policy: the run blocks",
	  "`{\"stage\", \"policy\": \"allowed_paths\", \"paths\"}` for edits "
	  "outside `policies.allowed_paths`, `\"policy\": "
	  "\"baton_config\"` for edits of `.baton/`, `\"policy\": "
	  "\"read_only\"` for any change in a read-only run, `{\"stage\": "
	  "\"history\", \"policy\": \"history\", \"paths\", \"since\"}` for "
	  "a blocked path in any commit since the fork point "
	  "([above](#the-history-is-held-to-the-block-policies)); `{\"stage\", "
	  "\"policy\": \"integrity\", \"breaches\", \"paths\"}` when the "
	  "agent went "
	  "outside its worktree ([security.md](security.md))" },
	{ "permission_refused", EVENT_G_AGENT,
	  "an ACP agent asked to do what the policy does not allow (or to "
	  "reach outside its worktree), and baton said no; the agent goes on",
	  "`{\"stage\", \"call\", \"provider\", \"tool\", \"kind\", "
	  "\"path\", \"reason\"}`: `kind` is the ACP tool kind (`edit`, "
	  "`execute`, `read`, `fetch`...), `path` the file, command or host "
	  "([agents.md](agents.md))" },

	/* ---- people and processes steering the run ---- */
	{ "pause_requested", EVENT_G_STEER, "`baton pause`", "none" },
	{ "pause_cancelled", EVENT_G_STEER,
	  "`baton resume` before the pause took effect", "none" },
	{ "abort_requested", EVENT_G_STEER, "`baton abort`", "none" },
	{ "superseded", EVENT_G_STEER,
	  "a worker took over the run's task after its lease ran out, while "
	  "the old driver still ran: the old driver is asked to abort",
	  "`{\"cause\": \"lease taken over\"}`" },
	{ "steer", EVENT_G_STEER,
	  "`baton steer`, or a gate decision with guidance "
	  "(`request-changes`, `revise`, `approve --guidance`)",
	  "`{\"text\", \"mode\"?}`: `mode` `steer` (now) or `collect` (for "
	  "the task's next run); none is a follow-up for the next stage" },
	{ "steer_applied", EVENT_G_STEER,
	  "the agent was stopped to take guidance to steer now "
	  "(`baton steer --now`), and its call is made again with it",
	  "`{\"stage\", \"upto\"}`: the seq of the last guidance taken" },
	{ "rewound", EVENT_G_STEER,
	  "`baton resume --from STAGE`: the run re-entered an earlier stage "
	  "with its worktree at that stage's checkpoint (a terminal run: a "
	  "new run, `run`, took it up)",
	  "`{\"stage\", \"status\", \"from_status\", \"checkpoint\", "
	  "\"kept\", \"run\"?}`" },
	{ "rewound_from", EVENT_G_STEER,
	  "a new run made by rewinding a terminal one (`run`)",
	  "`{\"stage\", \"status\", \"from_status\", \"checkpoint\", "
	  "\"kept\", \"run\"}`" },
	{ "budget_action", EVENT_G_STEER,
	  "a budget line was reached and its action taken (stop, pause, "
	  "downgrade, reduce_effort)",
	  "`{\"line\", \"action\", \"reason\", \"role\"?, \"to\"?, "
	  "\"effort\"?}`" },
	{ "unattended_stop", EVENT_G_STEER,
	  "an unattended run met a gate, a question without a default or a "
	  "pause-on-limit, and stopped blocked instead of waiting",
	  "`{\"cause\", \"stage\"?, \"question\"?}`" },
	{ "config_drift", EVENT_G_STEER,
	  "the config changed under a resumed run",
	  "`{\"choice\": \"snapshot\" \\| \"fresh\", \"changes\", \"run\"?}`: "
	  "the run kept its own config, or a fresh run (`run`) took its "
	  "place" },
	{ "config_adopted", EVENT_G_STEER,
	  "a run took the new config (`baton resume --current`)",
	  "`{\"changes\", \"from\", \"to\"}`: the changed keys and both "
	  "config hashes" },

	/* ---- the bug-fix pipeline ---- */
	{ "rca", EVENT_G_BUGFIX, "a root-cause analysis is in",
	  "`{\"stage\", \"version\", \"file\", \"root_file\"?, "
	  "\"category\"?, \"label\"?}`" },
	{ "consolidated", EVENT_G_BUGFIX, "the analyses became one fix plan",
	  "`{\"agreed\", \"choice\", \"steps\", \"sources\"?}`; `choice` is "
	  "`merge` when they agreed, else the analysis chosen or `all`" },
	{ "verdict", EVENT_G_BUGFIX,
	  "a review or verification of the bug-fix pipeline is in",
	  "`{\"stage\", \"version\", \"status\", \"file\", \"findings\", "
	  "\"summary\"?}`" },
	{ "group_started", EVENT_G_BUGFIX, "a parallel group of stages began",
	  "`{\"group\", \"stages\"}`" },
	{ "review_done", EVENT_G_BUGFIX,
	  "one member of a parallel group finished",
	  "`{\"stage\", \"file\", \"status\", \"started_ms\", "
	  "\"ended_ms\"}`" },
	{ "group_done", EVENT_G_BUGFIX, "every member of the group finished",
	  "`{\"group\", \"verdicts\"}`: each member's status" },
	{ "step_done", EVENT_G_BUGFIX,
	  "a phased implementation finished a step",
	  "`{\"stage\", \"step\", \"of\"}`" },
	{ "batch_review", EVENT_G_BUGFIX,
	  "a review of a batch of phased steps is in",
	  "`{\"stage\", \"first\", \"last\", \"round\", \"verdicts\"}`" },

	/* ---- the loop pipeline ---- */
	{ "intent_locked", EVENT_G_LOOP,
	  "the run's intent was written and hashed, before the first step",
	  "`{\"file\", \"hash\"}`" },
	{ "step_planned", EVENT_G_LOOP, "the planner chose the next step",
	  "`{\"stage\", \"iteration\", \"done\", \"step\"?, \"effects\"?}`" },
	{ "observed", EVENT_G_LOOP,
	  "baton observed the step's effects, when no receipt was due",
	  "the observation" },
	{ "evaluated", EVENT_G_LOOP, "the evaluator judged the round",
	  "`{\"stage\", \"iteration\", \"status\", \"summary\"?}`" },
	{ "receipt", EVENT_G_LOOP, "a receipt joined the run's chain",
	  "the sealed receipt ([receipts](pipelines.md))" },

	/* ---- the assist pipeline ---- */
	{ "intake", EVENT_G_ASSIST, "the request was taken in",
	  "`{\"stage\", \"intake\": {\"origin\", \"mode\", \"priority\", "
	  "\"priority_label\", \"scope\"}}`" },

	/* ---- the research pipeline ---- */
	{ "claims", EVENT_G_RESEARCH, "the planner's claims are in",
	  "`{\"stage\", \"file\", \"count\", \"claims\"}`: the claim ids" },
	{ "collect_started", EVENT_G_RESEARCH,
	  "a round of evidence collection began",
	  "`{\"stage\", \"round\", \"claims\", \"at_once\"}`" },
	{ "claim_started", EVENT_G_RESEARCH, "a researcher began on a claim",
	  "`{\"stage\", \"claim\", \"round\", \"started_ms\"}`" },
	{ "claim_collected", EVENT_G_RESEARCH, "a claim's evidence is in",
	  "`{\"stage\", \"claim\", \"round\", \"started_ms\", \"ended_ms\", "
	  "\"verdict\", \"confidence\", \"evidence\", \"file\"}`" },
	{ "evidence_merged", EVENT_G_RESEARCH,
	  "every claim of the round was collected (or one failed)",
	  "`{\"stage\", \"round\", \"claims\", \"failed\"?}`" },
	{ "challenge", EVENT_G_RESEARCH,
	  "the challenges to the evidence are in",
	  "`{\"stage\", \"file\", \"count\", \"high\"}`" },
	{ "report_written", EVENT_G_RESEARCH, "the report was composed",
	  "`{\"stage\", \"file\", \"bytes\"}`" },
	{ "quality_gate", EVENT_G_RESEARCH,
	  "the deterministic quality gate weighed the claims before the judge",
	  "`{\"stage\", \"profile\", \"round\", \"pass\", \"reasons\", "
	  "\"insufficient\", \"challenge\", \"verifiable_ratio\", "
	  "\"report_confidence\"}`" },
	{ "judgement", EVENT_G_RESEARCH, "the judge judged the report",
	  "`{\"stage\", \"file\", \"round\", \"verdict\": \"pass\" \\| "
	  "\"rework\", \"weak\", \"reasons\"?}`" },

	/* ---- a task in the queue ---- */
	{ "schedule_fired", EVENT_G_TASK,
	  "`baton serve` made a schedule's task for its slot (once per slot "
	  "across serves and hosts)",
	  "`{\"schedule\", \"slot\", \"task\", \"title\", \"missed\"}`: "
	  "`missed` for a slot caught up after serve was down" },
	{ "schedule_failed", EVENT_G_TASK,
	  "a schedule's task could not be made for its slot (an unknown "
	  "pipeline, a title too long); the slot is not tried again",
	  "`{\"schedule\", \"slot\", \"error\"}`" },
	{ "task_added", EVENT_G_TASK,
	  "a task was added: `baton task add`, the API, a judge's rework, a "
	  "merge conflict's task, an issue taken in by the forge",
	  "`{\"title\", \"area\"?, \"priority\", \"depends_on\", "
	  "\"origin\"?}`; an issue's adds `\"issue\"`; a merge conflict's is "
	  "`{\"origin\": \"conflict\", \"parent\", \"merge_item\", \"run\", "
	  "\"files\"}`" },
	{ "task_claimed", EVENT_G_TASK, "a worker took the task's lease",
	  "`{\"worker\", \"token\", \"attempt\"}`" },
	{ "task_run", EVENT_G_TASK, "the task got a new run",
	  "`{\"run\", \"fresh_of\"?}`: `fresh_of` is the run it replaced, "
	  "after `baton resume --fresh`" },
	{ "task_settled", EVENT_G_TASK,
	  "the task's run stopped and the task took its status from it",
	  "`{\"run\", \"status\", \"block_reason\"?, \"reason\"?}`; a retry "
	  "adds `\"failures\", \"not_before\"`" },
	{ "task_released", EVENT_G_TASK,
	  "a serve worker that stopped gave back the task its last settle "
	  "had claimed, before it started it: queued again, the attempt not "
	  "spent",
	  "`{\"worker\", \"reason\"}`" },
	{ "lease_expired", EVENT_G_TASK,
	  "the sweep requeued a running task whose lease ran out",
	  "`{\"worker\"?, \"reason\"}`" },
	{ "worker_gone", EVENT_G_TASK,
	  "the sweep requeued a running task whose worker's process is gone "
	  "(same host)",
	  "`{\"worker\"?, \"reason\"}`" },
	{ "quota_reset", EVENT_G_TASK,
	  "the sweep requeued a task that waited for a rate limit to reset",
	  "`{\"worker\"?, \"reason\"}`" },
	{ "task_resumed", EVENT_G_TASK,
	  "the sweep requeued a task blocked at a gate or a pause whose run "
	  "moved on (or whose question timed out)",
	  "`{\"worker\"?, \"reason\"}`" },
	{ "task_blocked", EVENT_G_TASK,
	  "a dependency of the task failed or was cancelled",
	  "`{\"dependency\", \"reason\"}`" },
	{ "task_cancelled", EVENT_G_TASK,
	  "`baton task cancel` or the API; the forge, for a closed issue or "
	  "PR",
	  "none; `{\"actor\"}` through the API with a named token; by the "
	  "forge `{\"reason\", \"issue\"}` or `{\"reason\", \"pr\"}`" },
	{ "task_retried", EVENT_G_TASK,
	  "`baton task retry` or the API queued a failed, cancelled or "
	  "blocked task again",
	  "none; `{\"actor\"}` through the API with a named token" },
	{ "task_linked", EVENT_G_TASK,
	  "a task made of a GitHub issue has its link recorded and is queued "
	  "(out of `blocked(issue_linking)`)",
	  "`{\"issue\", \"repo\"}`" },
	{ "task_done", EVENT_G_TASK,
	  "a task blocked for rework is done through its rework task; by the "
	  "forge: its PR merged, or a fix round pushed to its parent's PR",
	  "none; by the forge `{\"reason\", \"pr\"}`" },

	/* ---- the judge ---- */
	{ "judge_claimed", EVENT_G_JUDGE, "a judge took a finished task",
	  "`{\"judge\", \"judgement_version\", \"run\"?}`" },
	{ "judge_started", EVENT_G_JUDGE, "the judge's agent started",
	  "`{\"judge\", \"pid\", \"judgement_version\"}`" },
	{ "judged", EVENT_G_JUDGE, "the judge decided",
	  "`{\"run\", \"decision\", \"judgement_version\", \"judge\", "
	  "\"rework\"}`: `rework` is the rework task's id (0: none)" },
	{ "judge_failed", EVENT_G_JUDGE,
	  "the judge could not decide: the claim is given back with a "
	  "cooldown",
	  "`{\"reason\"}`" },
	{ "judge_gone", EVENT_G_JUDGE,
	  "the sweep took back the claim of a judge whose worker's process "
	  "is gone (same host)",
	  "`{\"judge\"?, \"pid\", \"reason\"}`: `pid` is the agent group "
	  "killed (0: none)" },
	{ "judge_expired", EVENT_G_JUDGE,
	  "the sweep took back a judge's claim that outlived the judge's "
	  "timeout plus `runtime.lease_seconds`",
	  "`{\"judge\"?, \"pid\", \"reason\"}`, as `judge_gone`" },

	/* ---- the merge queue ---- */
	{ "merge_queued", EVENT_G_MERGE,
	  "a run's branch joined the merge queue, or a failed item was asked "
	  "to merge again",
	  "`{\"branch\", \"base\"?}`; again: `{\"base\"?, \"requeued\", "
	  "\"item\", \"branch\", \"attempts\"}`" },
	{ "merge_claimed", EVENT_G_MERGE, "a worker took the item to land it",
	  "`{\"item\", \"worker\"}`" },
	{ "merge_retry", EVENT_G_MERGE,
	  "a landing did not happen and the item waits to try again",
	  "`{\"cause\": \"conflict\" \\| \"raced\" \\| \"error\", ...}` and "
	  "`{\"item\", \"branch\", \"attempts\"}`: a conflict adds "
	  "`\"files\", \"retries\", \"delay_ms\", \"base\"`; a race `\"base\", "
	  "\"tried\", \"delay_ms\"`; an error `\"error\", \"delay_ms\"`" },
	{ "merge_landed", EVENT_G_MERGE, "the run's branch landed on the base",
	  "`{\"commit\", \"base\", \"base_commit\", \"already\", \"item\", "
	  "\"branch\", \"attempts\"}`" },
	{ "merge_failed", EVENT_G_MERGE, "the item failed for good",
	  "`{\"cause\": \"conflict\" \\| \"checks\" \\| \"error\", ...}` and "
	  "`{\"item\", \"branch\", \"attempts\"}`: a conflict adds "
	  "`\"files\", \"task\", \"base\", \"reason\"`; failed checks "
	  "`\"base\", \"tried\", \"summary\"`; an error `\"reason\"`" },
	{ "base_push_failed", EVENT_G_MERGE,
	  "the merge queue landed the run but could not push the base branch "
	  "to `repo_url`",
	  "`{\"base\", \"reason\"}`" },

	/* ---- the forge ---- */
	{ "forge_asked", EVENT_G_FORGE,
	  "a task's pull request waits for a person "
	  "([forge.md](forge.md#reactions-ci-and-review-come-back-as-work))",
	  "`{\"question\", \"pr\"}`" },
	{ "forge_answered", EVENT_G_FORGE,
	  "a person approved a forge question (`baton approvals approve "
	  "tN`)",
	  "`{\"answer\": \"approve\", \"pr\"}`" },
	{ "forge_merge_refused", EVENT_G_FORGE,
	  "GitHub refused to merge a task's pull request",
	  "`{\"reason\", \"pr\"}`" },
	{ "forge_webhook", EVENT_G_FORGE,
	  "serve took a GitHub webhook delivery "
	  "([api.md](api.md#forge-webhooks-in))",
	  "`{\"delivery\", \"event\", \"action\"?, \"outcome\": \"sync\" \\| "
	  "\"pong\" \\| \"ignored\"}`" },
};

const struct event_type *
event_type_find(const char *name)
{
	size_t i;

	if (!name)
		return NULL;
	for (i = 0; i < ARRAY_SIZE(types); i++)
		if (!strcmp(types[i].name, name))
			return &types[i];
	return NULL;
}

const struct event_type *
event_type_at(size_t i)
{
	return i < ARRAY_SIZE(types) ? &types[i] : NULL;
}

int
event_type_check(const char *name, struct err *e)
{
	if (!name)
		return err_set(e, BATON_EINVAL, "event has no type");
	if (!event_type_find(name))
		return err_set(e, BATON_EINVAL,
			       "event type '%s' is not in the registry "
			       "(src/core/events.c)",
			       name);
	return 0;
}

const char *
event_group_name(enum event_group g)
{
	if ((unsigned)g >= EVENT_G_NR)
		BUG("event group %d", (int)g);
	return groups[g].name;
}

const char *
event_group_title(enum event_group g)
{
	if ((unsigned)g >= EVENT_G_NR)
		BUG("event group %d", (int)g);
	return groups[g].title;
}

/*
 * The registry as the docs' tables. Rows are listed group by group in
 * table order; a group's rows need not be adjacent in the table.
 */
void
event_types_markdown(struct buf *out)
{
	int g;
	size_t i;

	for (g = 0; g < EVENT_G_NR; g++) {
		if (g)
			buf_addch(out, '\n');
		buf_addf(out, "%s\n\n", groups[g].title);
		buf_adds(out,
			 "| type | written when | `data` |\n|---|---|---|\n");
		for (i = 0; i < ARRAY_SIZE(types); i++)
			if ((int)types[i].group == g)
				buf_addf(out, "| `%s` | %s | %s |\n",
					 types[i].name, types[i].when,
					 types[i].data);
	}
}
