#!/bin/bash
test_description='a plugin installed for the user (~/.config/baton/plugins/), its kind in a pipeline of the repository config, carried to merge_ready and to blocked; the kind reads its plugin template in any pipeline; disabling the plugin makes the pipeline invalid, saying why'
. "$(dirname "$0")/../lib/test-lib.sh"

EXAMPLE=$BATON_SRC_ROOT/examples/plugins/security-review

test_expect_success 'setup: the example plugin in the user folder, a config pipeline using its kind' '
	mkdir -p "$XDG_CONFIG_HOME/baton/plugins" &&
	cp -r "$EXAMPLE" "$XDG_CONFIG_HOME/baton/plugins/" &&
	make_repo repo &&
	baton_init_with_agent repo "plugins: {enabled: [security-review]}
pipelines:
  express:
    description: Vibestrate express with a security scan
    stages:
      - {name: execute, kind: execute}
      - {name: validate, kind: validate, on_fail: fix}
      - {name: scan, kind: security-review, status: scanning, timeout_seconds: 60}
      - {name: review, kind: review, on_changes: fix}
      - {name: verify, kind: verify}
      - {name: fix, kind: fix, side: true, next: validate}" &&
	(cd repo && "$BATON" plugin list --json) >list.json &&
	test_jq ".[0].id == \"security-review\" and .[0].status == \"enabled\" and (.[0].dir | test(\"/home/.config/baton/plugins/security-review$\"))" list.json
'

test_expect_success 'the config pipeline with the plugin kind runs to merge_ready' '
	cd repo &&
	"$BATON" pipeline show express >../show &&
	test_grep "scan *kind security-review *status scanning" ../show &&
	"$BATON" run --pipeline express "Add a flag" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	transitions "$id" | tr "\n" " " >../tr && echo >>../tr &&
	echo "created executing validating scanning reviewing verifying merge_ready " >../expect &&
	test_cmp ../expect ../tr &&
	test_jq ".outcome == \"pass\"" ".baton/runs/$id/scan.outcome.json" &&
	"$BATON" events "$id" --json | jq -r "select(.type == \"stage_started\" and .data.stage == \"scan\") | .data.kind" >../kind &&
	echo security-review >../expect && test_cmp ../expect ../kind &&
	# the prompt the command got is its plugin template, not the generic one
	cat .baton/runs/$id/calls/*-scan-security-review-*.prompt.md >../prompt &&
	test_grep "by the$" ../prompt &&
	test_grep "security-review plugin.s check.sh" ../prompt
'

test_expect_success 'a private key in the change blocks the run at the scan' '
	cd repo &&
	printf -- "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----\n" >id_key &&
	git add id_key && git commit -q -m key &&
	test_expect_code 3 "$BATON" run --pipeline express "Leak" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "stage scan (plugin security-review, kind security-review) said block" ../reason &&
	test_jq ".outcome == \"block\" and (.findings | length) == 1" ".baton/runs/$id/scan.outcome.json"
'

test_expect_success 'with the plugin not enabled, the pipeline is invalid and says why' '
	cd repo &&
	sed -i "s/^plugins: .*/plugins: {enabled: []}/" .baton/config.yaml &&
	test "$("$BATON" plugin list --json | jq -r ".[0].status")" = disabled &&
	test_expect_code 1 "$BATON" run --pipeline express "No scanner" 2>../err &&
	test_grep "config.yaml:[0-9]*:[0-9]*: pipelines.express.stages\[2\]: unknown stage kind .security-review." ../err
'

test_done
