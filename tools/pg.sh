#!/bin/bash
# A throwaway PostgreSQL cluster for tests and benchmarks, in a folder of
# its own, listening on 127.0.0.1 (a free port) and on a unix socket in
# that folder. Nothing outside the folder is touched.
#
#   tools/pg.sh start DIR        initdb + start; prints the admin URL
#   tools/pg.sh stop DIR         fast shutdown (the folder is kept)
#   tools/pg.sh restart DIR      stop and start again on the same port
#   tools/pg.sh kill DIR         SIGKILL the postmaster (a crash)
#   tools/pg.sh createdb DIR N   a fresh database N; prints its URL
#   tools/pg.sh url DIR          the admin URL of a running cluster
#
# The port is taken below the kernel's ephemeral range, where no outgoing
# connection holds one (a port that is the local end of another program's
# connection looks free to a probe, yet the server cannot bind it); PG_PORT
# names the first to try. A port taken in the meantime is given up for
# another.
#
# As root the server runs as the postgres user (initdb refuses root).
set -euo pipefail

bin="${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
	echo "pg.sh: no PostgreSQL server found (apt-get install postgresql)" >&2
	exit 1
fi

asuser=()
if [ "$(id -u)" = 0 ]; then
	asuser=(runuser -u postgres --)
fi

usage() {
	sed -n '2,13p' "$0" >&2
	exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
cd "$dir" # the server's user may not reach the caller's folder

# A port nothing listens on, below the ephemeral range (10000 and up).
free_port() {
	local lo p span
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null ||
		lo=32768
	span=$((lo - 10000))
	[ "$span" -ge 1000 ] || { echo "pg.sh: ephemeral ports start at $lo" \
		"(ip_local_port_range): no room below them" >&2; exit 1; }
	for _ in $(seq 1 200); do
		p=$((10000 + (RANDOM * 32768 + RANDOM) % span))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "pg.sh: no free port found" >&2
	exit 1
}

url() {
	echo "postgres://postgres@127.0.0.1:$(cat "$dir/port")/${1:-postgres}"
}

# The server starts with an empty environment: it must not carry the
# caller's (a test script's cleanup finds its processes by theirs).
pg_start() {
	env -i PATH="$PATH" LC_ALL=C "${asuser[@]}" "$bin/pg_ctl" \
		-D "$dir/data" -l "$dir/server.log" -w -t 60 start \
		>/dev/null 2>"$dir/pg_ctl.err"
}

# Why the server did not start, on stderr.
start_failed() {
	echo "pg.sh: the server did not start: $(cat "$dir/pg_ctl.err")" >&2
	echo "pg.sh: the end of its log ($dir/server.log):" >&2
	tail -n 20 "$dir/server.log" >&2
	exit 1
}

case "$cmd" in
start)
	rm -rf "$dir/data"
	[ "$(id -u)" = 0 ] && chown postgres: "$dir"
	"${asuser[@]}" "$bin/initdb" -D "$dir/data" -U postgres \
		--auth=trust -E UTF8 --no-sync >"$dir/initdb.log"
	cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
include 'port.conf'
unix_socket_directories = '$dir'
max_connections = 400
shared_buffers = 256MB
fsync = on
synchronous_commit = on
CONF
	port=${PG_PORT:-$(free_port)}
	for try in 1 2 3 4 5; do
		echo "$port" >"$dir/port"
		echo "port = $port" >"$dir/data/port.conf"
		[ "$(id -u)" = 0 ] && chown postgres: "$dir/data/port.conf"
		rm -f "$dir/server.log"
		pg_start && break
		[ "$try" != 5 ] && grep -q 'could not bind' "$dir/server.log" ||
			start_failed
		echo "pg.sh: port $port is taken; trying another" >&2
		port=$(free_port)
	done
	url
	;;
stop)
	"${asuser[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	;;
restart)
	"${asuser[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	pg_start || start_failed
	;;
kill)
	kill -KILL "$(head -1 "$dir/data/postmaster.pid")"
	;;
createdb)
	[ $# -ge 3 ] || usage
	"$bin/psql" -q -X -v ON_ERROR_STOP=1 "$(url)" \
		-c "CREATE DATABASE \"$3\"" >/dev/null
	url "$3"
	;;
url)
	url
	;;
*)
	usage
	;;
esac
