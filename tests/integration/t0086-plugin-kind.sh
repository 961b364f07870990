#!/bin/bash
test_description='a plugin pipeline with a stage kind of its own, implemented by a command, carried to its terminal status: examples/plugins/security-review end to end (pass, block), and a scripted kind whose outcomes drive the fix loop, block and fail'
. "$(dirname "$0")/../lib/test-lib.sh"

EXAMPLE=$BATON_SRC_ROOT/examples/plugins/security-review

# A plugin "scripted" with the kind gatekeep: gate.sh plays the outcomes
# listed in $FAKE_STATE/gate.script, one line per call (the last repeats):
#   file:JSON    JSON written to $BATON_OUTCOME
#   stdout:JSON  JSON as the last line of stdout
#   none         no outcome at all
#   exit:N       exits N
# Each call leaves its BATON_* environment and working directory in
# $FAKE_STATE/gate.N.env and gate.N.pwd.
make_scripted() {
	local P=$1/.baton/plugins/scripted
	mkdir -p "$P" &&
		cat >"$P/plugin.yaml" <<-\EOF &&
		id: scripted
		api_version: 1
		kinds:
		  - {name: gatekeep, status: gatekeeping, command: [sh, gate.sh], timeout_seconds: 60}
		pipelines:
		  gated: gated.yaml
		  nofix: nofix.yaml
		EOF
		cat >"$P/gated.yaml" <<-\EOF &&
		description: execute, check, the gatekeeper, verify
		stages:
		  - {name: execute, kind: execute}
		  - {name: validate, kind: validate, on_fail: fix}
		  - {name: gatekeep, kind: gatekeep, on_changes: fix}
		  - {name: verify, kind: verify}
		  - {name: fix, kind: fix, side: true, next: validate}
		EOF
		cat >"$P/nofix.yaml" <<-\EOF &&
		stages: [execute, gatekeep]
		EOF
		cat >"$P/gate.sh" <<-\EOF
		st=$FAKE_STATE/gate
		n=$(cat "$st.n" 2>/dev/null || echo 0)
		n=$((n + 1))
		echo "$n" >"$st.n"
		line=$(sed -n "${n}p" "$st.script")
		[ -n "$line" ] || line=$(tail -n 1 "$st.script")
		env | grep "^BATON_" | sort >"$st.$n.env"
		pwd >"$st.$n.pwd"
		case $line in
		file:*) printf "%s\n" "${line#file:}" >"$BATON_OUTCOME" ;;
		stdout:*) echo "gate: some words first"; printf "%s\n" "${line#stdout:}" ;;
		none) echo "gate: nothing to say" ;;
		exit:*) echo "gate: failing" >&2; exit "${line#exit:}" ;;
		esac
		EOF
}

# script LINES...: the outcomes of the next gate calls, from call 1.
script() {
	rm -f "$FAKE_STATE"/gate.*
	printf "%s\n" "$@" >"$FAKE_STATE/gate.script"
}

test_expect_success 'setup: the example plugin installed and enabled, and a scripted one' '
	make_repo repo &&
	baton_init_with_agent repo "plugins: {enabled: [security-review, scripted]}" &&
	mkdir -p repo/.baton/plugins &&
	cp -r "$EXAMPLE" repo/.baton/plugins/ &&
	make_scripted repo &&
	(cd repo && "$BATON" plugin list --json) >list.json &&
	test_jq "[.[] | .status] == [\"enabled\", \"enabled\"]" list.json
'

test_expect_success 'security-review: a clean change passes the scan and reaches merge_ready' '
	cd repo &&
	"$BATON" run --pipeline secure "Add a feature" >../out 2>&1 &&
	id=$(newest_run) && echo "$id" >../id1 &&
	test "$(run_status "$id")" = merge_ready &&
	transitions "$id" | tr "\n" " " >../tr && echo >>../tr &&
	echo "created executing validating reviewing security_reviewing verifying merge_ready " >../expect &&
	test_cmp ../expect ../tr &&
	test_jq ".outcome == \"pass\"" ".baton/runs/$id/security-review.outcome.json" &&
	"$BATON" events "$id" --json | jq -c "select(.type == \"plugin_outcome\") | .data" >../ev &&
	test_jq ".plugin == \"security-review\" and .kind == \"security-review\" and .outcome == \"pass\"" ../ev &&
	"$BATON" show "$id" --json | jq -r "[.artifacts[] | select(.artifact == \"security-review.outcome.json\") | .decision] | join(\",\")" >../dec &&
	echo pass >../expect && test_cmp ../expect ../dec
'

test_expect_success 'security-review: a committed private key blocks the run, the reason says why' '
	cd repo &&
	printf -- "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n" >deploy.pem &&
	git add deploy.pem && git commit -q -m "a key" &&
	test_expect_code 3 "$BATON" run --pipeline secure "Ship it" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "stage security-review (plugin security-review, kind security-review) said block" ../reason &&
	test_grep "deploy.pem" ../reason &&
	git rm -q deploy.pem && git commit -q -m "no key"
'

test_expect_success 'security-review: a hard-coded secret asks for changes: the fix loop runs, then the budget blocks' '
	cd repo &&
	echo "api_key = \"abcd1234efgh\"" >settings.py &&
	git add settings.py && git commit -q -m "a secret" &&
	test_expect_code 3 "$BATON" run --pipeline secure "Keep the secret" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	transition_pairs "$id" | grep -c "^security_reviewing -> fixing$" >../n &&
	echo 2 >../two && test_cmp ../two ../n &&
	test_grep "settings.py:1: looks like a hard-coded secret" "$FAKE_STATE/$id.fix.1.prompt" &&
	git rm -q settings.py && git commit -q -m "no secret"
'

test_expect_success 'scripted: changes, then pass: one fix round with the findings, then merge_ready' '
	cd repo &&
	script "file:{\"outcome\": \"changes\", \"summary\": \"two things\", \"findings\": [\"first thing\", {\"message\": \"second thing\", \"file\": \"cli.sh\", \"line\": 3}]}" \
		"stdout:{\"outcome\": \"pass\", \"summary\": \"fine now\"}" &&
	"$BATON" run --pipeline gated "Gate it" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	transitions "$id" | tr "\n" " " >../tr && echo >>../tr &&
	echo "created executing validating gatekeeping fixing validating gatekeeping verifying merge_ready " >../expect &&
	test_cmp ../expect ../tr &&
	test "$(run_field "$id" review_loops)" = 1 &&
	test_grep "first thing" "$FAKE_STATE/$id.fix.1.prompt" &&
	test_grep "second thing (cli.sh:3)" "$FAKE_STATE/$id.fix.1.prompt" &&
	test_jq ".outcome == \"pass\" and .summary == \"fine now\"" ".baton/runs/$id/gatekeep.outcome.json" &&
	test_path_is_missing ".baton/runs/$id/plugin-findings.md"
'

test_expect_success 'scripted: the command ran in the worktree with the command agent environment' '
	cd repo &&
	id=$(newest_run) &&
	wt=$(run_field "$id" worktree) &&
	echo "$wt" >../expect && test_cmp ../expect "$FAKE_STATE/gate.1.pwd" &&
	env=$FAKE_STATE/gate.1.env &&
	test_grep "^BATON_RUN_ID=$id$" $env &&
	test_grep "^BATON_STAGE=gatekeeping$" $env &&
	test_grep "^BATON_STAGE_KIND=gatekeep$" $env &&
	test_grep "^BATON_PLUGIN=scripted$" $env &&
	test_grep "^BATON_PLUGIN_DIR=.*/.baton/plugins/scripted$" $env &&
	test_grep "^BATON_OUTCOME=.*/.baton/runs/$id/out/.*/gatekeep.outcome.json$" $env &&
	test_grep "^BATON_WORKTREE=$wt$" $env
'

test_expect_success 'scripted: block and fail end the run blocked and failed' '
	cd repo &&
	script "file:{\"outcome\": \"block\", \"summary\": \"needs a person\"}" &&
	test_expect_code 3 "$BATON" run --pipeline gated "Block it" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason && test_grep "said block: needs a person" ../reason &&
	script "file:{\"outcome\": \"fail\", \"summary\": \"cannot be done\"}" &&
	test_expect_code 3 "$BATON" run --pipeline gated "Fail it" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = failed &&
	run_field "$id" reason >../reason && test_grep "said fail: cannot be done" ../reason
'

test_expect_success 'scripted: changes from a stage without on_changes block, saying so' '
	cd repo &&
	script "file:{\"outcome\": \"changes\", \"summary\": \"please change\"}" &&
	test_expect_code 3 "$BATON" run --pipeline nofix "No fix stage" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "asks for changes and has no on_changes stage" ../reason
'

test_expect_success 'a plugin pipeline run through the queue (baton task add, serve) ends the same way' '
	cd repo &&
	script "file:{\"outcome\": \"pass\"}" &&
	printf "runtime: {judge: false}\n" >>.baton/config.yaml &&
	"$BATON" task add "Queued gate" --pipeline gated >../task.out &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../serve.err &&
	"$BATON" task list --json >../list.json &&
	test_jq "all(.[]; .status == \"done\")" ../list.json &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	"$BATON" events "$id" --json | jq -r "select(.type == \"plugin_outcome\") | .data.outcome" >../o &&
	echo pass >../expect && test_cmp ../expect ../o
'

test_done
