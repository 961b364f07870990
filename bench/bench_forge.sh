#!/bin/sh
#
# bench/bench_forge.sh: what a forge sync costs in GitHub API calls and
# time (issue 19), against the GitHub double (tests/mock/forgedouble.py,
# no Prism) holding BENCH_FORGE_ISSUES labelled issues (default 1000)
# and BENCH_FORGE_PULLS open pull requests (default 100):
#
#   1. the client alone (bench_forge): the issue and pull request
#      listings without ETags (every page) and with them when nothing
#      changed (one conditional request, a 304), calls and wall time;
#   2. `baton forge sync` in a repository whose forge is the double: the
#      first sync (imports every issue as a task), a second with nothing
#      changed, and one more with the double ignoring conditional
#      requests (no ETag, no 304: the cost without ETags). The calls are
#      the double's own count of the API requests it answered.
#
# Issue 19 asks that an unchanged sync cost at most one conditional
# request per listing: the figures say what it costs and the ratio.
#
# Environment: BATON_BIN, BENCH_FORGE (build/bench/bench_forge),
# BENCH_FORGE_ISSUES, BENCH_FORGE_PULLS, BENCH_FORGE_ROUNDS (5),
# BENCH_TMPDIR. Needs python3, curl and jq.

set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
BATON_BIN=${BATON_BIN:-$root/baton}
BENCH_FORGE=${BENCH_FORGE:-$root/build/bench/bench_forge}
ISSUES=${BENCH_FORGE_ISSUES:-1000}
PULLS=${BENCH_FORGE_PULLS:-100}
ROUNDS=${BENCH_FORGE_ROUNDS:-5}
TOKEN=ghp_bench_forge_0123456789abcdef
tmp=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/baton-bench-forge.XXXXXX")
dpid=
cleanup() {
	[ -z "$dpid" ] || kill "$dpid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

for t in python3 curl jq; do
	command -v "$t" >/dev/null 2>&1 || { echo "bench_forge.sh: needs $t" >&2; exit 1; }
done
[ -x "$BENCH_FORGE" ] || { echo "bench_forge.sh: no $BENCH_FORGE (make bench-bins)" >&2; exit 1; }

# The double, its URL from its first line (a FIFO: no polling).
mkfifo "$tmp/double.fifo"
python3 "$root/tests/mock/forgedouble.py" --token "$TOKEN" \
	>"$tmp/double.fifo" 2>"$tmp/double.err" &
dpid=$!
exec 3<"$tmp/double.fifo"
read -r URL <&3 || { cat "$tmp/double.err" >&2; exit 1; }

ctl() { # VERB JSON
	curl -sf -X POST -H 'Content-Type: application/json' --data "$2" \
		"$URL/_double/$1" >/dev/null
}
api_calls() { # the API requests the double answered so far
	curl -sf "$URL/_double/requests" |
		jq '[.[] | select(.path | startswith("/_double") | not)] | length'
}
statuses() { # FROM: the statuses of the API requests after the FROM first
	curl -sf "$URL/_double/requests" |
		jq -r --argjson n "$1" '[.[] | select(.path | startswith("/_double") | not)][$n:]
			| group_by(.status) | map("\(length) x \(.[0].status)") | join(", ")'
}
ms_since() { # T0 in ns
	echo $((($(date +%s%N) - $1) / 1000000))
}

ctl issue "{\"title\": \"Bench issue\", \"body\": \"Do the thing.\", \"labels\": [\"baton\"], \"count\": $ISSUES}"
i=1
while [ "$i" -le "$PULLS" ]; do
	curl -sf -X POST -H "Authorization: Bearer $TOKEN" \
		-H 'Content-Type: application/json' \
		--data "{\"title\": \"PR $i\", \"head\": \"baton/bench-$i\", \"base\": \"main\", \"body\": \"b\"}" \
		"$URL/repos/acme/app/pulls" >/dev/null
	i=$((i + 1))
done
echo "double: $ISSUES labelled issues, $PULLS open pull requests, 100 a page"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

echo "-- the client alone (bench_forge, $ROUNDS rounds) --"
"$BENCH_FORGE" "$URL" "$TOKEN" --rounds "$ROUNDS"

echo "-- baton forge sync --"
git init -q "$tmp/repo"
cd "$tmp/repo"
git -c user.name=bench -c user.email=bench@localhost commit -q \
	--allow-empty -m init
"$BATON_BIN" init >/dev/null
cat >>.baton/config.yaml <<EOF
forge:
  type: github
  repo: acme/app
  token_env: GITHUB_TOKEN
  api_url: $URL
  intake: {label: baton}
  poll_seconds: 0
EOF
export GITHUB_TOKEN=$TOKEN

sync() { # NAME: one sync, its calls, statuses and time
	n0=$(api_calls)
	t0=$(date +%s%N)
	"$BATON_BIN" forge sync >"$tmp/$1.out" 2>&1 ||
		{ cat "$tmp/$1.out" >&2; exit 1; }
	ms=$(ms_since "$t0")
	n=$(($(api_calls) - n0))
	echo "$1: $n API calls ($(statuses "$n0")), $ms ms; $(tr '\n' ' ' <"$tmp/$1.out" | cut -c1-120)"
	echo "sync_${1}_calls=$n sync_${1}_ms=$ms"
	eval "calls_$1=$n"
}

sync first
sync unchanged
ctl config '{"etags": false}'
sync no_etags
ctl config '{"etags": true}'
# what the client logged of those syncs (docs/operations.md)
log=$(ls .baton/forge/log-*.jsonl 2>/dev/null | head -n 1)
[ -z "$log" ] || echo "request log: $(wc -l <"$log") lines, $(wc -c <"$log") bytes for the three syncs"
# A sync lists the labelled issues (one listing); the pull requests'
# listing comes with the pull request side of the sync.
listings=1
awk -v u="$calls_unchanged" -v f="$calls_no_etags" -v l="$listings" 'BEGIN {
	printf "unchanged sync: %d call(s) for %d listing(s): %.2f conditional " \
	       "request(s) per listing (issue 19: at most 1)\n", u, l, u / l
	printf "unchanged sync with ETags / without: %d / %d calls = %.3f\n",
	       u, f, f ? u / f : 0
}'

# 3. Open pull requests that baton follows: BENCH_FORGE_PULLS issues are
# carried to a PR each (a one-stage pipeline, an agent that appends a
# line), behind a second double that fronts a bare remote; then syncs
# with nothing changed, with and without ETags. Each open PR is four
# reads a round (the PR, its combined status, its check runs, its
# reviews), each kept with its ETag (forge__get_kept).
echo
echo "-- $PULLS tasks with open pull requests (baton forge sync) --"
exec 3<&-
kill "$dpid" 2>/dev/null || true
wait "$dpid" 2>/dev/null || true
dpid=
git init -q -b main "$tmp/prs"
cd "$tmp/prs"
git -c user.name=bench -c user.email=bench@localhost commit -q \
	--allow-empty -m init
git clone -q --bare . "$tmp/remote.git"
git remote add origin "$tmp/remote.git"
rm -f "$tmp/double.fifo"
mkfifo "$tmp/double.fifo"
python3 "$root/tests/mock/forgedouble.py" --token "$TOKEN" \
	--remote "$tmp/remote.git" >"$tmp/double.fifo" 2>"$tmp/double2.err" &
dpid=$!
exec 3<"$tmp/double.fifo"
read -r URL <&3 || { cat "$tmp/double2.err" >&2; exit 1; }
ctl issue "{\"title\": \"Bench PR\", \"body\": \"Append a line.\", \"labels\": [\"baton\"], \"count\": $PULLS}"
"$BATON_BIN" init >/dev/null
cat >"$tmp/agent" <<'EOF'
#!/bin/sh
echo "$BATON_RUN_ID" >>"$BATON_WORKTREE/work.txt"
echo done
EOF
chmod +x "$tmp/agent"
cat >.baton/config.yaml <<EOF
providers:
  instant: {type: command, command: ["$tmp/agent"]}
roles: {default: instant}
pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {judge: false}
forge:
  type: github
  repo: acme/app
  token_env: GITHUB_TOKEN
  api_url: $URL
  remote: origin
  intake: {label: baton}
  poll_seconds: 0
EOF
sync import
t0=$(date +%s%N)
"$BATON_BIN" serve --workers 2 --exit-when-idle >"$tmp/serve.out" 2>&1 ||
	{ tail -n 20 "$tmp/serve.out" >&2; exit 1; }
echo "serve: $PULLS runs to merge_ready in $(ms_since "$t0") ms"
sync open_prs
sync prs_first_read
sync prs_unchanged
ctl config '{"etags": false}'
sync prs_no_etags
ctl config '{"etags": true}'
awk -v u="$calls_prs_unchanged" -v f="$calls_prs_no_etags" -v p="$PULLS" 'BEGIN {
	printf "unchanged sync over %d open PRs: %d calls, all conditional " \
	       "(%.2f per PR, and one for the issue listing)\n", p, u, (u - 1) / p
	printf "with ETags / without: %d conditional / %d full requests\n", u, f
}'
