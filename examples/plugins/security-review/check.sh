#!/bin/sh
# check.sh: the security-review plugin's stage kind. baton runs it in the
# run's worktree (docs/pipelines.md, "Plugin kinds") and routes the run on
# the outcome it writes to $BATON_OUTCOME:
#   block    a private key is committed: a person must look
#   changes  lines that look like hard-coded secrets: the fix loop, with
#            one finding per line
#   pass     nothing found
set -u
out=${BATON_OUTCOME:?BATON_OUTCOME is not set: run by baton}

# json_str TEXT: TEXT as a JSON string.
json_str() {
	printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' |
		sed 's/\\/\\\\/g; s/"/\\"/g')"
}

# outcome OUTCOME SUMMARY FINDINGS-JSON
outcome() {
	printf '{"outcome": "%s", "summary": %s, "findings": [%s]}\n' \
		"$1" "$(json_str "$2")" "$3" >"$out.tmp" && mv "$out.tmp" "$out"
	echo "security-review: $1: $2"
}

git rev-parse --git-dir >/dev/null 2>&1 || {
	outcome fail "the worktree is not a git checkout" ""
	exit 0
}

keys=$(git grep -l -I -E -e '-----BEGIN ([A-Z]+ )?PRIVATE KEY-----' -- . 2>/dev/null | head -n 20)
if [ -n "$keys" ]; then
	findings=
	for f in $keys; do
		findings="$findings${findings:+, }$(json_str "$f: a private key")"
	done
	outcome block "private keys are committed: $(echo $keys)" "$findings"
	exit 0
fi

pattern='(AKIA[0-9A-Z]{16}|(password|passwd|secret|api_key|apikey|token)[[:space:]]*[:=][[:space:]]*["'"'"'][^"'"'"']{4,})'
hits=$(git grep -n -I -i -E -e "$pattern" -- . 2>/dev/null | head -n 20)
if [ -n "$hits" ]; then
	findings=
	n=0
	while IFS= read -r line; do
		loc=$(printf '%s' "$line" | cut -d: -f1-2)
		findings="$findings${findings:+, }$(json_str "$loc: looks like a hard-coded secret; read it from the environment instead")"
		n=$((n + 1))
	done <<HITS
$hits
HITS
	outcome changes "$n line(s) look like hard-coded secrets" "$findings"
	exit 0
fi
outcome pass "no committed secrets or private keys" ""
