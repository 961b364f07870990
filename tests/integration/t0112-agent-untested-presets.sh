#!/bin/bash
test_description='the new CLI types: baton init writes a provider for each one on PATH, doctor knows how to install each, and the Amp, Auggie and Crush presets (no real run possible here) drive a stand-in with the documented command line'
. "$(dirname "$0")/../lib/test-lib.sh"

# A PATH with git and a shell but no agent CLI.
mkdir -p bare/bin &&
	for t in git sh env cat rm; do ln -s "$(command -v $t)" bare/bin/$t; done
BARE=$TRASH_DIRECTORY/bare/bin

# program type install-package
cat >clis <<EOF
copilot copilot @github/copilot
pi pi @mariozechner/pi-coding-agent
kilo kilo @kilocode/cli
cline cline cline
cn continue @continuedev/cli
amp amp @sourcegraph/amp
auggie auggie @augmentcode/auggie
crush crush @charmland/crush
EOF

test_expect_success 'doctor: each is known, with how to install it' '
	mkdir outside && cd outside &&
	test_expect_code 1 env PATH="$BARE" "$BATON" doctor >../none.out 2>&1 &&
	while read -r prog type pkg; do
		test_grep "^  $type  *$prog  *not installed (npm install -g $pkg)" ../none.out ||
		return 1
	done <../clis
'

test_expect_success 'init: a provider for each one found on PATH' '
	mkdir -p found &&
	while read -r prog type pkg; do
		printf "#!/bin/sh\\necho 1.0.0\\n" >found/$prog &&
		chmod +x found/$prog || return 1
	done <clis &&
	make_repo init &&
	(cd init && PATH="$TRASH_DIRECTORY/found:$BARE" "$BATON" init >/dev/null) &&
	while read -r prog type pkg; do
		test_grep "^  $prog: {type: $type}   # found $TRASH_DIRECTORY/found/$prog" init/.baton/config.yaml ||
		return 1
	done <clis &&
	cd init && "$BATON" config validate >../init.config 2>&1
'

# Stand-ins: each checks the command line baton gives its CLI, then does
# the stage as the scripted agent would (the prompt on its stdin).
mkdir -p stand-in
cat >stand-in/amp <<EOF
#!/bin/bash
# amp --stream-json --execute=PROMPT; an isolated home's settings file
# allows every tool; Claude Code's stream-json out
[ "\$1" = --stream-json ] || { echo "amp: bad argv: \$*" >&2; exit 2; }
case \${@: -1} in --execute=*) ;; *) echo "amp: no --execute=" >&2; exit 2 ;; esac
grep -q '"amp.dangerouslyAllowAll": true' "\$AMP_SETTINGS_FILE" || exit 3
[ "\$AMP_API_KEY" = sk-amp ] || { echo "401 Unauthorized" >&2; exit 1; }
p=\${@: -1}
out=\$(printf '%s' "\${p#--execute=}" | "$FAKE_AGENT") || exit
jq -cn --arg r "\$out" '{type: "system", subtype: "init", session_id: "T-amp-1"},
	{type: "result", subtype: "success", is_error: false, result: \$r,
	 session_id: "T-amp-1", num_turns: 1,
	 usage: {input_tokens: 7, output_tokens: 3}}'
EOF
cat >stand-in/auggie <<EOF
#!/bin/bash
# auggie --print --quiet [--augment-cache-dir DIR] --instruction=PROMPT; plain text out
[ "\$1 \$2" = "--print --quiet" ] || { echo "auggie: bad argv: \$*" >&2; exit 2; }
[ "\$3" = --augment-cache-dir ] || exit 2
case \${@: -1} in --instruction=*) ;; *) echo "auggie: no --instruction=" >&2; exit 2 ;; esac
[ "\$AUGMENT_SESSION_AUTH" = '{"accessToken":"t"}' ] || exit 4
p=\${@: -1}
printf '%s' "\${p#--instruction=}" | "$FAKE_AGENT"
EOF
cat >stand-in/crush <<EOF
#!/bin/bash
# crush run --quiet --yolo [--data-dir DIR] -- PROMPT; plain text out
[ "\$1 \$2 \$3" = "run --quiet --yolo" ] || { echo "crush: bad argv: \$*" >&2; exit 2; }
[ "\$4" = --data-dir ] || exit 2
[ "\${@: -2:1}" = -- ] || { echo "crush: no --" >&2; exit 2; }
printf '%s' "\${@: -1}" | "$FAKE_AGENT"
EOF
chmod +x stand-in/*

while read -r type key; do
	export type key
	test_expect_success "$type: the preset drives the stand-in to merge_ready" '
		make_repo $type &&
		baton_init_with_agent $type "providers:
  cli: {type: $type, command: [\"$TRASH_DIRECTORY/stand-in/$type\"], api_key_env: THE_KEY, isolated: true}
roles: {default: cli}" &&
		cd $type &&
		THE_KEY=$key test_expect_code 0 "$BATON" run "Add a feature" >../$type.out 2>&1 &&
		test_grep merge_ready ../$type.out &&
		"$BATON" show --json "$(newest_run)" >../$type.json &&
		test_jq "[.calls[] | select(.type == \"$type\" and .failure == \"none\")] | length >= 4" ../$type.json
	'
done <<EOF
amp sk-amp
auggie {"accessToken":"t"}
crush unused
EOF

test_expect_success 'amp: the usage comes from its stream (a Claude Code result line)' '
	test_jq "[.calls[] | select(.tokens_in == 7 and .tokens_out == 3)] | length >= 4" amp.json
'

test_expect_success 'amp, auggie, crush: a base_url is refused, naming the provider and why' '
	for type in amp auggie crush; do
		make_repo url-$type &&
		baton_init_with_agent url-$type "providers:
  cli: {type: $type, command: [\"$TRASH_DIRECTORY/stand-in/$type\"], base_url: \"http://127.0.0.1:9/v1\"}
roles: {default: cli}" &&
		(cd url-$type && "$BATON" run "Add a feature" >../url-$type.out 2>&1 || :) &&
		test_grep "provider .cli. ($type): base_url is not supported" url-$type.out ||
		return 1
	done
'

test_done
