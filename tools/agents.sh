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
set -euo pipefail

cd "$(dirname "$0")/.."
dir=${BATON_AGENTS_DIR:-$PWD/.agents}
PACKAGES=(
	@anthropic-ai/claude-code@2.1.197
	@openai/codex@0.169.0
	@google/gemini-cli@0.61.0
	@qwen-code/qwen-code@0.15.10
	opencode-ai@1.18.33
	playwright-core@1.65.1
	@octokit/webhooks-examples@7.6.1
	@zed-industries/claude-code-acp@0.16.2
)

if ! command -v npm >/dev/null 2>&1; then
	echo "agents: npm not found: install Node.js 20 (or Debian's nodejs" \
		"and npm) to run the agent CLI tests" >&2
	exit 1
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
for b in claude codex gemini qwen opencode claude-code-acp; do
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
