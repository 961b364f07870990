#!/bin/bash
test_description='WebSocket framing (RFC 6455): fragments are reassembled, protocol errors close with 1002'
. "$(dirname "$0")/../lib/test-lib.sh"

# ws.py PORT TOKEN CASE: a raw-socket client (masking and fragmenting by
# hand, which no library client gets wrong on purpose). It sends CASE's
# frames, then prints what comes back, one line per frame, until an ack,
# a close or 5 s of silence: "ack OK STATUS", "close CODE", "pong DATA",
# "silence" or "eof".
cat >"$TRASH_DIRECTORY/ws.py" <<'PY'
import base64, json, os, socket, struct, sys

port, token, case = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /api/v1/ws?access_token=%s HTTP/1.1\r\n"
           "Host: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
           "Sec-WebSocket-Version: 13\r\n\r\n" % (token, port, key)).encode())
head = b""
while b"\r\n\r\n" not in head:
    c = s.recv(1)
    if not c:
        sys.exit("no handshake")
    head += c
if b" 101 " not in head.split(b"\r\n")[0]:
    sys.exit("handshake refused: %r" % head)

def frame(opcode, payload, fin=True, mask=True):
    b0 = (0x80 if fin else 0) | opcode
    m = 0x80 if mask else 0
    n = len(payload)
    if n < 126:
        hdr = struct.pack("!BB", b0, m | n)
    elif n < 65536:
        hdr = struct.pack("!BBH", b0, m | 126, n)
    else:
        hdr = struct.pack("!BBQ", b0, m | 127, n)
    if not mask:
        return hdr + payload
    k = os.urandom(4)
    return hdr + k + bytes(c ^ k[i % 4] for i, c in enumerate(payload))

def exact(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b

cmd = json.dumps({"type": "task:stop", "task": 4242, "id": "c1"}).encode()
a, b, c = cmd[:7], cmd[7:20], cmd[20:]
T, CONT, PING = 1, 0, 9
frames = {
    "whole": [frame(T, cmd)],
    "fragments": [frame(T, a, fin=False), frame(CONT, b, fin=False),
                  frame(CONT, c)],
    "ping-between": [frame(T, a, fin=False), frame(PING, b"hi"),
                     frame(CONT, b + c)],
    "unmasked": [frame(T, cmd, mask=False)],
    "lone-continuation": [frame(CONT, cmd)],
    "text-inside-fragments": [frame(T, a, fin=False), frame(T, cmd)],
    "fragmented-ping": [frame(PING, b"x", fin=False)],
    "too-big": [frame(T, b"[" + b" " * 60000, fin=False)] +
               [frame(CONT, b" " * 60000, fin=False)] * 20 +
               [frame(CONT, b"]")],
}[case]
for f in frames:
    s.sendall(f)
s.settimeout(5)
try:
    while True:
        h = exact(2)
        if h is None:
            print("eof")
            break
        op, n = h[0] & 0xF, h[1] & 0x7F
        if n == 126:
            n = struct.unpack("!H", exact(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", exact(8))[0]
        data = exact(n) if n else b""
        if op == 8:
            print("close %d" % struct.unpack("!H", data[:2])[0]
                  if len(data) >= 2 else "close")
            break
        if op == 10:
            print("pong %s" % data.decode())
        elif op == 1:
            m = json.loads(data)
            if m.get("type") == "ack":
                print("ack %s %s %s" % (m.get("id"), m.get("ok"),
                                        m.get("status")))
                break
except socket.timeout:
    print("silence")
PY

test_expect_success 'setup: serve with HTTP' '
	make_repo a &&
	baton_init_with_agent a "runtime: {judge: false}" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	echo "$HTTP_PORT" >../port
'

# ws CASE: the client's answer for CASE, in ws-CASE.out
ws() {
	python3 "$TRASH_DIRECTORY/ws.py" "$(cat "$TRASH_DIRECTORY/port")" \
		"$(cat "$TRASH_DIRECTORY/a/.baton/token")" "$1" \
		>"$TRASH_DIRECTORY/ws-$1.out"
}

test_expect_success 'a whole masked message is a command (404: no such task)' '
	ws whole &&
	echo "ack c1 False 404" >expect &&
	test_cmp expect ws-whole.out
'

test_expect_success 'fragments are put together before the message is read' '
	ws fragments &&
	echo "ack c1 False 404" >expect &&
	test_cmp expect ws-fragments.out
'

test_expect_success 'a ping between fragments is answered, the message still whole' '
	ws ping-between &&
	printf "pong hi\nack c1 False 404\n" >expect &&
	test_cmp expect ws-ping-between.out
'

test_expect_success 'protocol errors close the connection with 1002' '
	for c in lone-continuation text-inside-fragments fragmented-ping \
		unmasked; do
		ws $c &&
		echo "close 1002" >expect &&
		test_cmp expect ws-$c.out || return 1
	done
'

test_expect_success 'a fragmented message over server.max_body_kb closes with 1009' '
	ws too-big &&
	echo "close 1009" >expect &&
	test_cmp expect ws-too-big.out
'

test_done
