#!/bin/bash
test_description='plugins: discovery in .baton/plugins/ and ~/.config/baton/plugins/, api_version, ordering by requires, incompatible and broken manifests reported while the rest works, plugins.enabled, plugin list and GET /api/v1/plugins'
. "$(dirname "$0")/../lib/test-lib.sh"

# mkplugin DIR ID [YAML]: a plugin folder DIR/ID with a manifest of id ID,
# api_version 1 and YAML after it.
mkplugin() {
	mkdir -p "$1/$2" &&
		printf 'id: %s\napi_version: 1\n%s\n' "$2" "${3:-}" >"$1/$2/plugin.yaml"
}

# status_of ID: the plugin's status in `plugin list --json`.
status_of() {
	"$BATON" plugin list --json | jq -r --arg id "$1" '.[] | select(.id == $id) | .status'
}

reason_of() {
	"$BATON" plugin list --json | jq -r --arg id "$1" '.[] | select(.id == $id) | .reason'
}

test_expect_success 'setup: a repository with plugins of every kind of trouble' '
	make_repo repo &&
	baton_init_with_agent repo "plugins:
  enabled: [base, extra, top, future, broken, loop-a, loop-b, needs-off, off-dep, clash, kindclash, ghost, mine]" &&
	P=repo/.baton/plugins &&
	mkplugin $P base "description: the base of the others
kinds:
  - {name: gatekeep, command: [sh, gate.sh]}" &&
	printf "echo {\\\"outcome\\\": \\\"pass\\\"}\n" >$P/base/gate.sh &&
	mkplugin $P extra "requires: [base]
pipelines: {gated: gated.yaml}" &&
	printf "stages:\n  - execute\n  - gatekeep\n  - verify\n" >$P/extra/gated.yaml &&
	mkplugin $P top "requires: [extra, base]" &&
	mkdir -p $P/future &&
	printf "id: future\napi_version: 2\nwhatever: {new: key}\n" >$P/future/plugin.yaml &&
	mkplugin $P broken "kinds: [{name: x, command: [sh, x.sh], colour: red}]" &&
	mkplugin $P loop-a "requires: [loop-b]" &&
	mkplugin $P loop-b "requires: [loop-a]" &&
	mkplugin $P needs-off "requires: [off-dep]" &&
	mkplugin $P off-dep "requires: [nowhere]" &&
	mkplugin $P clash "pipelines: {feature: f.yaml}" &&
	printf "stages: [execute]\n" >$P/clash/f.yaml &&
	mkplugin $P kindclash "kinds: [{name: gatekeep, command: [sh, -c, true]}]" &&
	mkplugin $P idle "description: installed, not enabled" &&
	mkdir -p "$XDG_CONFIG_HOME/baton/plugins" &&
	mkplugin "$XDG_CONFIG_HOME/baton/plugins" mine "description: the user plugin" &&
	mkplugin "$XDG_CONFIG_HOME/baton/plugins" base "description: the user copy, hidden by the repository"
'

test_expect_success 'plugin list --json: load order follows requires' '
	cd repo &&
	"$BATON" plugin list --json >../list.json &&
	jq -r ".[].id" ../list.json >../order &&
	# base before extra before top, whatever their names sort to
	test "$(grep -n "^base$" ../order | cut -d: -f1)" -lt "$(grep -n "^extra$" ../order | cut -d: -f1)" &&
	test "$(grep -n "^extra$" ../order | cut -d: -f1)" -lt "$(grep -n "^top$" ../order | cut -d: -f1)" &&
	test "$(status_of base)" = enabled &&
	test "$(status_of extra)" = enabled &&
	test "$(status_of top)" = enabled
'

test_expect_success 'the repository copy of a plugin hides the user copy; a user plugin loads' '
	cd repo &&
	test "$("$BATON" plugin list --json | jq "[.[] | select(.id == \"base\")] | length")" = 1 &&
	"$BATON" plugin list --json | jq -r ".[] | select(.id == \"base\") | .description" >../desc &&
	echo "the base of the others" >../expect && test_cmp ../expect ../desc &&
	test "$(status_of mine)" = enabled
'

test_expect_success 'api_version 2 is incompatible, skipped, with the reason' '
	cd repo &&
	test "$(status_of future)" = incompatible &&
	reason_of future >../r && test_grep "api_version 2" ../r && test_grep "speaks 1" ../r
'

test_expect_success 'a broken manifest is an error naming file:line:col and the key' '
	cd repo &&
	test "$(status_of broken)" = error &&
	"$BATON" plugin list --json | jq -e ".[] | select(.id == \"broken\") | .provides.kinds == []" &&
	reason_of broken >../r &&
	test_grep "broken/plugin.yaml:[0-9]*:[0-9]*: " ../r &&
	test_grep "colour" ../r
'

test_expect_success 'a requires cycle is an error of each plugin on it' '
	cd repo &&
	test "$(status_of loop-a)" = error &&
	test "$(status_of loop-b)" = error &&
	reason_of loop-a >../r && test_grep "requires cycle: loop-a -> loop-b -> loop-a" ../r
'

test_expect_success 'a missing requirement is an error, and so is whatever requires it' '
	cd repo &&
	reason_of off-dep >../r && test_grep "requires .nowhere., which is not installed" ../r &&
	test "$(status_of needs-off)" = error &&
	reason_of needs-off >../r && test_grep "requires .off-dep., which is in error" ../r
'

test_expect_success 'a pipeline named like a built-in, a kind another plugin has: errors' '
	cd repo &&
	test "$(status_of clash)" = error &&
	reason_of clash >../r && test_grep "clashes with the built-in" ../r &&
	test "$(status_of kindclash)" = error &&
	reason_of kindclash >../r && test_grep "kind .gatekeep. is also provided by plugin .base." ../r
'

test_expect_success 'enabled but not installed: an error; installed but not enabled: disabled' '
	cd repo &&
	test "$(status_of ghost)" = error &&
	reason_of ghost >../r && test_grep "not installed" ../r &&
	test "$(status_of idle)" = disabled
'

test_expect_success 'the rest works: the plugin pipeline with the plugin kind is listed and valid' '
	cd repo &&
	"$BATON" pipeline list >../pl &&
	test_grep "^gated  *plugin" ../pl &&
	"$BATON" pipeline show gated >../show &&
	test_grep "pipeline gated (plugin extra)" ../show &&
	test_grep "gatekeep *kind gatekeep *status gatekeep" ../show &&
	"$BATON" pipeline validate gated &&
	"$BATON" config validate
'

test_expect_success 'plugin list (human): status, reason and what each provides' '
	cd repo &&
	"$BATON" plugin list >../human &&
	test_grep "^base  *enabled" ../human &&
	test_grep "kind       gatekeep, status gatekeep" ../human &&
	test_grep "pipeline   gated (gated.yaml)" ../human &&
	test_grep "^future  *incompatible" ../human &&
	test_grep "reason     api_version 2" ../human
'

test_expect_success 'a plugin kind is unknown to pipelines while its plugin is not enabled' '
	make_repo off &&
	baton_init_with_agent off "pipelines:
  mine:
    stages: [execute, gatekeep]" &&
	mkdir -p off/.baton/plugins && cp -r repo/.baton/plugins/base off/.baton/plugins/ &&
	cd off &&
	test_expect_code 1 "$BATON" pipeline validate mine 2>../err &&
	test_grep "unknown stage kind .gatekeep." ../err &&
	printf "plugins: {enabled: [base]}\n" >>.baton/config.yaml &&
	"$BATON" pipeline validate mine
'

test_expect_success 'a plugin pipeline may not use the kind of a plugin it does not require' '
	make_repo norequire &&
	baton_init_with_agent norequire "plugins: {enabled: [base, user]}" &&
	P=norequire/.baton/plugins &&
	mkdir -p $P && cp -r repo/.baton/plugins/base $P/ &&
	mkplugin $P user "pipelines: {borrow: b.yaml}" &&
	printf "stages: [execute, gatekeep]\n" >$P/user/b.yaml &&
	cd norequire &&
	test "$(status_of user)" = error &&
	reason_of user >../r && test_grep "uses kind .gatekeep. of plugin .base., which it does not require" ../r
'

test_expect_success 'plugins: in the config: an unknown key or a bad id names file:line:col' '
	make_repo badcfg &&
	baton_init_with_agent badcfg "plugins: {enable: [base]}" &&
	cd badcfg &&
	test_expect_code 1 "$BATON" plugin list 2>../err &&
	test_grep "config.yaml:[0-9]*:[0-9]*: unknown key .plugins.enable." ../err &&
	printf "plugins: {enabled: [\"Not Ok\"]}\n" >.baton/config.yaml &&
	test_expect_code 1 "$BATON" plugin list 2>../err &&
	test_grep "config.yaml:1:[0-9]*: plugins.enabled: expected plugin ids" ../err
'

test_expect_success 'a kind whose command names a missing file of the plugin folder is an error' '
	make_repo nofile &&
	baton_init_with_agent nofile "plugins: {enabled: [p]}" &&
	mkplugin nofile/.baton/plugins p "kinds: [{name: k, command: [./run.sh]}]" &&
	cd nofile &&
	test "$(status_of p)" = error &&
	reason_of p >../r && test_grep "plugin.yaml:[0-9]*:[0-9]*: kinds\[0\].command\[0\]: .\./run\.sh. is not a file in the plugin folder" ../r
'

test_expect_success 'GET /api/v1/plugins lists the same, with status and what each provides' '
	cd repo &&
	serve_http srv &&
	api_expect 200 GET /api/v1/plugins >../api.json &&
	jq -r ".plugins[] | \"\(.id) \(.status)\"" ../api.json | sort >../api &&
	"$BATON" plugin list --json | jq -r ".[] | \"\(.id) \(.status)\"" | sort >../cli &&
	test_cmp ../cli ../api &&
	test_jq "[.plugins[] | select(.id == \"extra\") | .provides.pipelines[]] == [\"gated\"]" ../api.json &&
	test_jq "[.plugins[] | select(.id == \"base\") | .provides.kinds[].name] == [\"gatekeep\"]" ../api.json
'

test_done
