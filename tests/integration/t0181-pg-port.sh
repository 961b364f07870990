#!/bin/bash
test_description='tools/pg.sh, the throwaway cluster of the PostgreSQL pass: a port that looks free to a probe but is the local end of a live connection (bind fails) is given up for another, not a failed start; ports are taken below the ephemeral range'
. "$(dirname "$0")/../lib/test-lib.sh"

PG=$TEST_DIRECTORY/../tools/pg.sh
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 ||
   ! command -v python3 >/dev/null; then
	say "skipped: no PostgreSQL server or python3 (tools/deps.sh)"
	test_done
fi

# As root the server runs as postgres, which must reach the cluster's folder:
# outside the trash directory, as tests/run.sh does it.
CLUSTER=$(mktemp -d "${TMPDIR:-/tmp}/baton-pg.XXXXXX")
cleanup() {
	"$PG" stop "$CLUSTER" >/dev/null 2>&1
	rm -rf "$CLUSTER"
}
trap cleanup EXIT

# A connection on 127.0.0.1 whose client end holds an ephemeral port: a
# listener nobody else knows, and one client connected to it, both kept
# open until the file "release" appears. The client's port goes to
# holder.port.
cat >holder.py <<'PY'
import os, socket, sys, time
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
cli = socket.socket()
cli.connect(srv.getsockname())
conn, _ = srv.accept()
with open("holder.port.tmp", "w") as f:
    f.write("%d\n" % cli.getsockname()[1])
os.rename("holder.port.tmp", "holder.port")
while not os.path.exists("release"):
    time.sleep(0.05)
PY

test_expect_success 'a port held by a live connection looks free to a probe' '
	bg_start holder python3 holder.py &&
	wait_for "test -s holder.port" 10 &&
	held=$(cat holder.port) &&
	! (exec 3<>"/dev/tcp/127.0.0.1/$held") 2>/dev/null
'

test_expect_success 'start: the held port is given up for another, and the server answers there' '
	held=$(cat holder.port) &&
	PG_PORT=$held "$PG" start "$CLUSTER" >url 2>err &&
	test_grep "port $held is taken; trying another" err &&
	port=$(cat "$CLUSTER/port") &&
	test "$port" != "$held" &&
	test_grep "127.0.0.1:$port/postgres" url &&
	psql -X -At "$(cat url)" -c "SHOW port" >shown &&
	echo "$port" >expect &&
	test_cmp expect shown
'

test_expect_success 'restart keeps the port' '
	port=$(cat "$CLUSTER/port") &&
	"$PG" restart "$CLUSTER" &&
	psql -X -At "$("$PG" url "$CLUSTER")" -c "SHOW port" >shown &&
	echo "$port" >expect &&
	test_cmp expect shown
'

test_expect_success 'a port of its own choosing lies below the ephemeral range' '
	"$PG" stop "$CLUSTER" &&
	"$PG" start "$CLUSTER" >url &&
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range &&
	port=$(cat "$CLUSTER/port") &&
	test "$port" -ge 10000 && test "$port" -lt "$lo"
'

test_expect_success 'a start that fails for another reason says why' '
	"$PG" stop "$CLUSTER" &&
	test_expect_code 1 env PG_PORT=none "$PG" start "$CLUSTER" 2>err &&
	test_grep "the server did not start" err &&
	test_grep "invalid value for parameter \"port\": \"none\"" err &&
	test_grep ! "trying another" err
'

test_expect_success 'so does a restart' '
	"$PG" start "$CLUSTER" >/dev/null &&
	echo "port = none" >"$CLUSTER/data/port.conf" &&
	test_expect_code 1 "$PG" restart "$CLUSTER" 2>err &&
	test_grep "the end of its log" err &&
	test_grep "invalid value for parameter" err
'

touch release
test_done
