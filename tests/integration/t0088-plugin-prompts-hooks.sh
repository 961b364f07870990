#!/bin/bash
test_description='what else a plugin provides: prompt templates used by the stages of its pipelines (the repository still wins), hooks checked, listed and run after those of the config (a plugin veto blocks), a broken plugin pipeline reported; a plugin pipeline resumed by another process after a gate'
. "$(dirname "$0")/../lib/test-lib.sh"

# mkplugin DIR ID YAML: a plugin folder DIR/ID with its manifest.
mkplugin() {
	mkdir -p "$1/$2" &&
		printf 'id: %s\napi_version: 1\n%s\n' "$2" "$3" >"$1/$2/plugin.yaml"
}

status_of() {
	"$BATON" plugin list --json | jq -r --arg id "$1" '.[] | select(.id == $id) | .status'
}

reason_of() {
	"$BATON" plugin list --json | jq -r --arg id "$1" '.[] | select(.id == $id) | .reason'
}

test_expect_success 'setup: a plugin with templates, hooks, a kind and a gated pipeline' '
	make_repo repo &&
	baton_init_with_agent repo "plugins: {enabled: [tpl, badhook, badpipe]}" &&
	P=repo/.baton/plugins &&
	mkplugin $P tpl "pipelines: {tpl-flow: flow.yaml}
prompts: {execute: execute.md, verify: verify.md}
kinds: [{name: stamp, command: [sh, stamp.sh]}]
hooks:
  worktree_setup: [\"echo \$BATON_HOOK >>$FAKE_STATE/plugin-hooks\"]
  before_merge: [\"make lint\", \"make test\"]" &&
	printf "stages:\n  - execute\n  - {kind: stamp, gate: true}\n  - verify\n" >$P/tpl/flow.yaml &&
	printf "PLUGIN EXECUTE TEMPLATE for {{task}} in {{worktree}}\n" >$P/tpl/execute.md &&
	printf "PLUGIN VERIFY TEMPLATE\n\nWrite {{out_dir}}/verification.json\n" >$P/tpl/verify.md &&
	echo "echo '"'"'{\"outcome\": \"pass\", \"summary\": \"stamped\"}'"'"'" >$P/tpl/stamp.sh &&
	mkplugin $P badhook "hooks: {after_merge: [\"true\"]}" &&
	mkplugin $P badpipe "pipelines: {broken: b.yaml}" &&
	printf "stages:\n  - {kind: execute, on_changes: nowhere}\n" >$P/badpipe/b.yaml
'

test_expect_success 'hooks are listed; an unknown hook point is the plugin error' '
	cd repo &&
	"$BATON" plugin list --json >../list.json &&
	test_jq "[.[] | select(.id == \"tpl\") | .provides.hooks.before_merge[]] == [\"make lint\", \"make test\"]" ../list.json &&
	test_jq "[.[] | select(.id == \"tpl\") | .provides.hooks.worktree_setup[]] == [\"echo \$BATON_HOOK >>$FAKE_STATE/plugin-hooks\"]" ../list.json &&
	test_jq "[.[] | select(.id == \"tpl\") | .provides.prompts[]] == [\"execute\", \"verify\"]" ../list.json &&
	"$BATON" plugin list >../human &&
	test_grep "hook       before_merge: make lint, make test" ../human &&
	test "$(status_of badhook)" = error &&
	reason_of badhook >../r &&
	test_grep "plugin.yaml:[0-9]*:[0-9]*: unknown key .hooks.after_merge." ../r &&
	test_grep "worktree_setup, before_stage, after_stage, before_merge, on_terminal, worktree_teardown" ../r
'

test_expect_success 'a broken plugin pipeline makes its plugin an error with the pipeline message' '
	cd repo &&
	test "$(status_of badpipe)" = error &&
	reason_of badpipe >../r &&
	test_grep "badpipe/b.yaml:2:[0-9]*: pipelines.broken.stages\[0\] (execute).on_changes: no stage named .nowhere." ../r &&
	test_expect_code 1 "$BATON" run --pipeline broken "x" 2>../err &&
	test_grep "unknown pipeline .broken." ../err
'

test_expect_success 'the stages of a plugin pipeline read the plugin templates; a gate on the plugin kind; another process resumes' '
	cd repo &&
	bg_start ../run1 "$BATON" run --pipeline tpl-flow "Stamp it" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) && echo "$id" >../id &&
	wait_for_status "$id" waiting_for_approval &&
	kill -TERM "$(cat ../run1.pid)" &&
	rc=$(bg_wait ../run1) &&
	"$BATON" approvals approve "$id" >/dev/null &&
	test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test_grep "PLUGIN EXECUTE TEMPLATE for Stamp it in " "$FAKE_STATE/$id.execute.1.prompt" &&
	test_grep "PLUGIN VERIFY TEMPLATE" "$FAKE_STATE/$id.verify.1.prompt" &&
	test_jq ".summary == \"stamped\"" ".baton/runs/$id/stamp.outcome.json" &&
	# the worktree_setup hook of the plugin ran, once, as a hook of the run
	test_line_count = 1 "$FAKE_STATE/plugin-hooks" &&
	test_grep -x worktree_setup "$FAKE_STATE/plugin-hooks" &&
	"$BATON" events "$id" --json >../ev1 &&
	jq -s -e "[.[] | select(.type == \"hook\" and .data.point == \"worktree_setup\")] | length == 1" ../ev1
'

test_expect_success 'the repository template wins over the plugin one; other pipelines keep the built-in' '
	cd repo &&
	mkdir -p .baton/prompts &&
	printf "REPOSITORY VERIFY TEMPLATE\n\nWrite {{out_dir}}/verification.json\n" >.baton/prompts/verify.md &&
	bg_start ../run2 "$BATON" run --pipeline tpl-flow "Stamp again" &&
	wait_for "test \"\$(newest_run)\" != \"$(cat ../id)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals approve "$id" >/dev/null &&
	rc=$(bg_wait ../run2) && test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	test_grep "REPOSITORY VERIFY TEMPLATE" "$FAKE_STATE/$id.verify.1.prompt" &&
	rm .baton/prompts/verify.md &&
	"$BATON" run "A feature run" >../out 2>&1 &&
	id=$(newest_run) &&
	test_grep ! "PLUGIN EXECUTE TEMPLATE" "$FAKE_STATE/$id.execute.1.prompt"
'

test_expect_success 'GET /api/v1/pipelines names the plugin of a plugin pipeline' '
	cd repo &&
	serve_http srv &&
	api_expect 200 GET /api/v1/pipelines >../pipes.json &&
	test_jq "[.pipelines[] | select(.name == \"tpl-flow\") | .plugin] == [\"tpl\"]" ../pipes.json &&
	test_jq "[.pipelines[] | select(.name == \"tpl-flow\") | .stages[1].kind] == [\"stamp\"]" ../pipes.json &&
	test_jq "[.pipelines[] | select(.name == \"feature\") | .plugin] == [null]" ../pipes.json
'

test_expect_success 'a plugin before_stage hook that fails blocks the run, naming it' '
	cd repo &&
	mkplugin .baton/plugins veto "hooks: {before_stage: [\"if [ \\\"\$BATON_STAGE\\\" = verifying ]; then echo the plugin says no; exit 4; fi\"]}" &&
	cp .baton/config.yaml ../config.keep &&
	sed -i "s/enabled: \[tpl, badhook, badpipe\]/enabled: [tpl, badhook, badpipe, veto]/" .baton/config.yaml &&
	test "$(status_of veto)" = enabled &&
	test_expect_code 3 "$BATON" run "Vetoed by a plugin" >../veto.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "hook before_stage\[0\] .*exited 4: the plugin says no" ../reason &&
	cp ../config.keep .baton/config.yaml
'

test_done
