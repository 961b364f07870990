#!/bin/sh
# cli.sh: a tiny command line tool, the sample project of baton's demo.
#
#   ./cli.sh --help        print the usage
#   ./cli.sh greet NAME    greet NAME

usage() {
	echo "usage: cli.sh [--help] | greet NAME"
}

case "${1:-}" in
--help | -h)
	usage
	;;
greet)
	if [ -z "${2:-}" ]; then
		usage >&2
		exit 2
	fi
	echo "Hello, $2!"
	;;
*)
	usage >&2
	exit 2
	;;
esac
