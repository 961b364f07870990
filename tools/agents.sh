#!/bin/bash
# Installs the coding-agent CLIs the test suite drives against the mock
# model server, from the npm registry, into .agents/ (or $BATON_AGENTS_DIR).
# Versions are pinned: the newest whose `engines` fit node 20, the ones
# ../shared/research/agent-clis.md verified. Already installed: nothing
# to do. The binaries end up in .agents/node_modules/.bin/.
#
# The same step installs playwright-core, the browser driver of the
# dashboard tests (tests/browser/, t0025, bench/dashboard_10k.sh): the
# library only, never a browser download; it drives Debian's chromium
# (tools/deps.sh). It lands in .agents/node_modules/playwright-core.
#
# And @octokit/webhooks-examples, GitHub's example webhook payloads
# (data only), which t0070 signs and POSTs to serve's forge webhook.
#
# tools/agents.sh --latest installs the newest release of each agent CLI
# (the newest whose engines fit this node) into .agents-latest/ (or
# $BATON_AGENTS_DIR) instead, one package at a time so that one broken
# release does not stop the others; `make test-agents-latest` runs the
# agent tests against them (docs/agents.md, "Versions"; not under /tmp,
# which the sandbox hides from the agent calls). The pins below
# are the versions the tests passed with; keep src/agent/versions.c in
# step with them (`baton doctor` warns about a newer CLI than those).
set -euo pipefail

cd "$(dirname "$0")/.."
latest=0
if [ "${1:-}" = --latest ]; then
	latest=1
	shift
fi
if [ $# -gt 0 ]; then
	echo "usage: tools/agents.sh [--latest]" >&2
	exit 2
fi
if [ $latest = 1 ]; then
	dir=${BATON_AGENTS_DIR:-$PWD/.agents-latest}
else
	dir=${BATON_AGENTS_DIR:-$PWD/.agents}
fi
PACKAGES=(
	@anthropic-ai/claude-code@2.1.197
	@openai/codex@0.169.0
	@google/gemini-cli@0.61.0
	@qwen-code/qwen-code@0.15.10
	opencode-ai@1.18.33
	@github/copilot@1.0.102
	@mariozechner/pi-coding-agent@0.73.1
	@kilocode/cli@7.7.7
	cline@3.0.65
	@continuedev/cli@1.5.47
	playwright-core@1.65.1
	@octokit/webhooks-examples@7.6.1
	@zed-industries/claude-code-acp@0.16.2
)
# The programs the agent CLIs above install, in .bin/.
BINS=(claude codex gemini qwen opencode copilot pi kilo cline cn claude-code-acp)

if ! command -v npm >/dev/null 2>&1; then
	echo "agents: npm not found: install Node.js 20 (or Debian's nodejs" \
		"and npm) to run the agent CLI tests" >&2
	exit 1
fi
if [ $latest = 1 ]; then
	# The agent CLIs only (the test libraries stay pinned), unversioned:
	# npm picks the newest release whose engines fit this node.
	# --save: each install keeps the ones before it (a --no-save install
	# prunes what package.json does not name).
	mkdir -p "$dir"
	[ -f "$dir/package.json" ] || echo '{"private": true}' >"$dir/package.json"
	bad=""
	for p in "${PACKAGES[@]}"; do
		name=${p%@*}
		case $name in playwright-core | @octokit/*) continue ;; esac
		echo "agents: installing the newest $name into $dir"
		npm install --prefix "$dir" --no-audit --no-fund --save \
			--loglevel=error "$name" || bad="$bad $name"
	done
	for b in "${BINS[@]}"; do
		[ -x "$dir/node_modules/.bin/$b" ] || bad="$bad ($b missing)"
	done
	(cd "$dir" && npm ls --depth=0 2>/dev/null) || true
	if [ -n "$bad" ]; then
		echo "agents: these did not install:$bad" >&2
		exit 1
	fi
	echo "agents: newest CLIs in $dir/node_modules/.bin"
	exit 0
fi

stamp="$dir/.installed"
want="${PACKAGES[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "agents: ${#PACKAGES[@]} CLIs installed in $dir"
	exit 0
fi
mkdir -p "$dir"
echo "agents: installing ${PACKAGES[*]} into $dir"
npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
	"${PACKAGES[@]}"
for b in "${BINS[@]}"; do
	[ -x "$dir/node_modules/.bin/$b" ] || {
		echo "agents: $b missing after install" >&2
		exit 1
	}
done
[ -f "$dir/node_modules/playwright-core/package.json" ] || {
	echo "agents: playwright-core missing after install" >&2
	exit 1
}
[ -f "$dir/node_modules/@octokit/webhooks-examples/api.github.com/index.json" ] || {
	echo "agents: @octokit/webhooks-examples missing after install" >&2
	exit 1
}
printf '%s\n' "$want" >"$stamp"
echo "agents: installed in $dir/node_modules/.bin"
