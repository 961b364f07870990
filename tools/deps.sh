#!/bin/bash
# Installs the Debian (12, bookworm) packages baton needs to build, test
# and lint, with apt-get (through sudo when not root), then the agent CLIs
# the tests drive (tools/agents.sh, from the npm registry) and the forge
# tests' Prism and GitHub's OpenAPI description (tools/forge-tools.sh,
# pinned by its package-lock.json). What is already installed is left
# alone, so running it again is cheap. BATON_NO_AGENTS=1 skips the CLIs,
# BATON_NO_FORGE_TOOLS=1 Prism (their tests then say they skipped).
set -euo pipefail

PACKAGES=(
	build-essential pkg-config git
	libsqlite3-dev libyaml-dev libjansson-dev libcurl4-openssl-dev sqlite3
	libcivetweb-dev libmicrohttpd-dev libwslay-dev libssl-dev libpq-dev postgresql
	bubblewrap curl nodejs npm
	cppcheck clang-tidy clang-format
	jq time python3 faketime tmux openssl strace
	chromium
)

# node and npm may come from elsewhere (nodesource, nvm): keep those.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
	keep=()
	for p in "${PACKAGES[@]}"; do
		case "$p" in nodejs | npm) ;; *) keep+=("$p") ;; esac
	done
	PACKAGES=("${keep[@]}")
fi

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done
agents() {
	if [ "${BATON_NO_AGENTS:-0}" = 1 ]; then
		echo "deps: BATON_NO_AGENTS=1: not installing the agent CLIs"
	else
		"$(dirname "$0")/agents.sh"
	fi
	"$(dirname "$0")/forge-tools.sh"
}

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#PACKAGES[@]} packages are installed"
	agents
	exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1; then
	sudo=(sudo)
else
	echo "deps: not root and no sudo: cannot install ${missing[*]}" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y --no-install-recommends "${missing[@]}"
agents
