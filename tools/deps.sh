#!/bin/bash
# Installs the Debian (12, bookworm) packages baton needs to build, test
# and lint, with apt-get (through sudo when not root). Packages already
# installed are left alone, so running it again is cheap.
set -euo pipefail

PACKAGES=(
	build-essential pkg-config git
	libsqlite3-dev libyaml-dev libjansson-dev sqlite3
	cppcheck clang-tidy clang-format
	jq time
)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#PACKAGES[@]} packages are installed"
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
