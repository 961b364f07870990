#!/bin/bash
# Installs the test tools of the forge tests (issue 19) from the npm
# registry into .forge-tools/ (or $BATON_FORGE_TOOLS_DIR):
#
#   @stoplight/prism-cli  a validating proxy for an OpenAPI description;
#                         tests/lib/forge.sh puts `prism proxy --errors`
#                         between baton and the GitHub double
#   @octokit/openapi      GitHub's own OpenAPI description of its REST API
#                         (generated/api.github.com.json)
#
# Every version is pinned by tools/forge-tools/package-lock.json (with
# integrity hashes) and installed with `npm ci`: the registry is the only
# thing reached, and no package has an install script. Prism 5.14.2 is
# the newest 5.x whose `engines` fit node 20 (5.15 and later want node
# 24); its prism-core, prism-http and prism-http-server are pinned beside
# it because its caret ranges would otherwise pull their node-24 releases.
# Installed already with the same lock: nothing to do.
# BATON_NO_FORGE_TOOLS=1 skips it (the Prism tests then say they skipped).
set -euo pipefail

cd "$(dirname "$0")/.."
src=$PWD/tools/forge-tools
dir=${BATON_FORGE_TOOLS_DIR:-$PWD/.forge-tools}

if [ "${BATON_NO_FORGE_TOOLS:-0}" = 1 ]; then
	echo "forge-tools: BATON_NO_FORGE_TOOLS=1: not installing Prism"
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "forge-tools: npm not found: install Node.js 20 (or Debian's" \
		"nodejs and npm) to run the forge tests through Prism" >&2
	exit 1
fi
stamp="$dir/.installed"
want=$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
	[ -x "$dir/node_modules/.bin/prism" ]; then
	echo "forge-tools: Prism and GitHub's description installed in $dir"
	exit 0
fi
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
echo "forge-tools: installing $(jq -r '.dependencies | to_entries |
	map(.key + "@" + .value) | join(" ")' "$src/package.json") into $dir"
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
[ -x "$dir/node_modules/.bin/prism" ] || {
	echo "forge-tools: prism missing after install" >&2
	exit 1
}
[ -f "$dir/node_modules/@octokit/openapi/generated/api.github.com.json" ] || {
	echo "forge-tools: GitHub's description (api.github.com.json)" \
		"missing after install" >&2
	exit 1
}
"$dir/node_modules/.bin/prism" --version >/dev/null
printf '%s\n' "$want" >"$stamp"
echo "forge-tools: prism $("$dir/node_modules/.bin/prism" --version)" \
	"installed in $dir/node_modules/.bin"
