#!/usr/bin/env python3
"""OpenViber's message sequences replayed against a live `baton serve`.

protoreplay.py PORT TOKEN SCENARIO [ARG...]

A WebSocket client of the standard library only: it opens
/api/v1/ws?access_token=TOKEN on 127.0.0.1:PORT, sends the messages of
SCENARIO in OpenViber's envelope ({"type", "id", "timestamp",
"payload"}) and asserts baton's answers, in order. The scenarios are the
five "sequences_to_test" of
../shared/conformance/openviber/protocol-messages.json (docs/api.md,
"OpenViber's protocol, point by point"), the adversarial cases and the
injection modes:

  completed               task:submit, task:started, task:progress*,
                          task:completed
  stopped FILE            task:submit, task:started, task:stop,
                          task:stopped (FILE: the file the fake agent
                          waits for, never made here)
  already-running KEY     task:submit (KEY), task:submit (KEY) while it
                          runs: already_running with the first task
  rejected                task:submit, approval:requested,
                          approval:response approved=false,
                          approval:decided (the run blocked)
  timeout MS              approval:requested with timeout_ms MS, no
                          answer: approval:timeout (approval_timeout),
                          approval:decided (the run blocked)
  health                  connection:welcome, health:ping/pong,
                          health:status
  malformed               envelopes that are not: protocol_error each,
                          the socket stays usable
  mismatch KEY            KEY again with another payload:
                          idempotency_mismatch, no task made
  oversize BYTES          a message over the limit: closed with 1009
  message MODE TEXT       a new task, once its agent works,
                          task:message TEXT with injection_mode MODE;
                          prints "run RUN task ID" for the caller

Prints one line per step it checked; exit status 0 when every check
held, 1 with "FAIL: why" and the messages seen when one did not.
"""
import base64
import json
import os
import socket
import struct
import sys
import time
import uuid
import urllib.request


class Closed(Exception):
    def __init__(self, code):
        super().__init__("closed by the server with %s" % code)
        self.code = code


class Fail(Exception):
    pass


class WS:
    def __init__(self, port, token, query=""):
        self.port, self.token = port, token
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        path = "/api/v1/ws?access_token=%s%s" % (token, query)
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n"
                           % (path, port, key)).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise Fail("the server closed the handshake")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ")[1])
        self.seen = []

    def send_raw(self, data, opcode=1):
        n = len(data)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(hdr + mask + body)

    def send(self, type_, payload=None, **top):
        """Sends type_ in OpenViber's envelope; returns its id."""
        mid = str(uuid.uuid4())
        msg = {"type": type_, "id": mid,
               "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z",
                                          time.gmtime())}
        if payload is not None:
            msg["payload"] = payload
        msg.update(top)
        self.send_raw(json.dumps(msg).encode())
        return mid

    def _read(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.time()
            if left <= 0:
                raise socket.timeout()
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed("EOF")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, deadline):
        """The next text message as JSON (pings answered)."""
        while True:
            b0, b1 = self._read(2, deadline)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack("!H", self._read(2, deadline))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8, deadline))[0]
            data = self._read(n, deadline)
            op = b0 & 0x0f
            if op == 9:
                self.send_raw(data, 10)
            elif op == 8:
                raise Closed(struct.unpack("!H", data[:2])[0]
                             if len(data) >= 2 else None)
            elif op == 1:
                m = json.loads(data)
                self.seen.append(m)
                return m

    def until(self, pred, what, timeout=60):
        """Messages until one that pred takes; that one."""
        deadline = time.time() + timeout
        try:
            while True:
                m = self.recv(deadline)
                if pred(m):
                    return m
        except socket.timeout:
            raise Fail("no %s within %d s" % (what, timeout))

    def answer(self, mid, timeout=30):
        return self.until(lambda m: m.get("id") == mid,
                          "answer to %s" % mid, timeout)


def api(port, token, method, path, body=None, headers=None):
    req = urllib.request.Request(
        "http://127.0.0.1:%d%s" % (port, path), method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers=dict({"Authorization": "Bearer " + token,
                      "Content-Type": "application/json"},
                     **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def check(cond, why):
    if not cond:
        raise Fail(why)


def say(text):
    print("ok:", text, flush=True)


def task_total(port, token):
    st, body = api(port, token, "GET", "/api/v1/tasks")
    check(st == 200, "GET /api/v1/tasks: %s" % st)
    return sum(body["counts"].values())


def submit(ws, title, key=None, **extra):
    payload = {"goal": title, "messages": []}
    if key:
        payload["idempotency_key"] = key
    payload.update(extra)
    mid = ws.send("task:submit", payload)
    ack = ws.answer(mid)
    return ack


def mine(task):
    return lambda m: m.get("task_id") == task


def of_task(ws, task, types, what, timeout=90):
    """The next message of task whose type is in types."""
    return ws.until(lambda m: m.get("task_id") == task and
                    m.get("type") in types, what, timeout)


def protocol_types(ws, task):
    """The OpenViber types of task's messages seen so far, in order."""
    return [m["type"] for m in ws.seen
            if m.get("task_id") == task and m.get("type") != "event"]


# ---- the five sequences ---------------------------------------------------

def s_completed(ws, port, token):
    ack = submit(ws, "Sequence one")
    check(ack["type"] == "ack" and ack["ok"], "submit refused: %s" % ack)
    task = ack["result"]["id"]
    say("task:submit acked with task %d" % task)
    of_task(ws, task, ("task:completed",), "task:completed", 120)
    types = protocol_types(ws, task)
    check("task:started" in types, "no task:started: %s" % types)
    started = types.index("task:started")
    before = types[:started]
    # the run is made (status created) before its first stage: one
    # task:progress may come first (docs/api.md, the comparison)
    check(all(t == "task:progress" for t in before) and len(before) <= 1,
          "before task:started: %s" % before)
    between = [t for t in types[started + 1:types.index("task:completed")]
               if t != "task:delta"]  # the agent's output as it comes
    check(between and all(t == "task:progress" for t in between),
          "between started and completed: %s" % between)
    check(not any(t in ("task:error", "task:stopped") for t in types),
          "an error or stop: %s" % types)
    say("task:started, task:progress x%d, task:completed" % len(between))


def s_stopped(ws, port, token, wait_file):
    ack = submit(ws, "Sequence two")
    check(ack["ok"], "submit refused: %s" % ack)
    task = ack["result"]["id"]
    of_task(ws, task, ("task:started",), "task:started")
    say("task:started")
    # OpenViber's task:stop names the task_id
    mid = ws.send("task:stop", {"task_id": task, "reason": "enough"})
    ans = ws.answer(mid)
    check(ans["ok"], "task:stop refused: %s" % ans)
    say("task:stop acked")
    m = of_task(ws, task, ("task:stopped", "task:completed", "task:error"),
                "task:stopped")
    check(m["type"] == "task:stopped", "got %s" % m["type"])
    check(not os.path.exists(wait_file), "the agent was let go")
    say("task:stopped")


def s_already_running(ws, port, token, key):
    before = task_total(port, token)
    ack = submit(ws, "Sequence three", key)
    check(ack["ok"] and ack["status"] == 201, "first submit: %s" % ack)
    task = ack["result"]["id"]
    of_task(ws, task, ("task:started",), "task:started")
    say("first submission is task %d, running" % task)
    again = submit(ws, "Sequence three", key)
    check(not again["ok"], "the repeat was taken: %s" % again)
    err = again["error"]
    check(err["code"] == "already_running", "code %s" % err["code"])
    check(err["task"]["id"] == task and err["idempotency_key"] == key,
          "the first task is not named: %s" % err)
    check(task_total(port, token) == before + 1, "a second task was made")
    say("repeat: already_running with task %d, no second task" % task)
    # over HTTP too, the key in the Idempotency-Key header
    st, body = api(port, token, "POST", "/api/v1/tasks",
                   {"title": "Sequence three", "messages": []},
                   {"Idempotency-Key": key})
    check(st == 409 and body["error"]["code"] == "already_running" and
          body["error"]["task"]["id"] == task, "HTTP: %s %s" % (st, body))
    check(task_total(port, token) == before + 1, "a second task was made")
    say("HTTP Idempotency-Key: 409 already_running, the same task")


def s_rejected(ws, port, token):
    ack = submit(ws, "Sequence four")
    check(ack["ok"], "submit refused: %s" % ack)
    task = ack["result"]["id"]
    req = of_task(ws, task, ("approval:requested", "task:completed",
                             "task:error"), "approval:requested")
    check(req["type"] == "approval:requested", "got %s" % req["type"])
    check(req["approval_id"] == req["run"], "approval_id: %s" % req)
    say("approval:requested at gate %s" % req["gate"])
    mid = ws.send("approval:response",
                  {"approval_id": req["approval_id"], "approved": False,
                   "reason": "not this way"})
    ans = ws.answer(mid)
    check(ans["ok"], "approval:response refused: %s" % ans)
    say("approval:response approved=false acked")
    dec = of_task(ws, task, ("approval:decided",), "approval:decided")
    check(dec["approved"] is False and dec["decision"] == "reject",
          "decided: %s" % dec)
    # the decision is the run's move to blocked: one event, one message
    check(dec["status"] == "blocked" and dec["run"] == req["run"],
          "the run is not blocked: %s" % dec)
    types = [m["type"] for m in ws.seen if m.get("run") == req["run"] and
             m["type"].startswith(("approval:", "task:error",
                                   "task:completed"))]
    check(types == ["approval:requested", "approval:decided"],
          "order: %s" % types)
    say("approval:decided approved=false: the run is blocked")


def s_timeout(ws, port, token, ms):
    ack = submit(ws, "Sequence five")
    check(ack["ok"], "submit refused: %s" % ack)
    task = ack["result"]["id"]
    req = of_task(ws, task, ("approval:requested",), "approval:requested")
    check(req.get("timeout_ms") == int(ms), "timeout_ms: %s" % req)
    t0 = time.time()
    say("approval:requested with timeout_ms %s" % ms)
    tmo = of_task(ws, task, ("approval:timeout", "approval:decided"),
                  "approval:timeout", 60)
    check(tmo["type"] == "approval:timeout" and
          tmo["code"] == "approval_timeout", "got %s" % tmo)
    check(time.time() - t0 >= int(ms) / 1000.0 - 0.5, "too early")
    dec = of_task(ws, task, ("approval:decided",), "approval:decided")
    check(dec["approved"] is False and dec["status"] == "blocked" and
          dec["run"] == req["run"], "decided: %s" % dec)
    types = [m["type"] for m in ws.seen if m.get("run") == req["run"] and
             m["type"].startswith(("approval:", "task:"))]
    check(types[-3:] == ["approval:requested", "approval:timeout",
                         "approval:decided"], "order: %s" % types)
    say("no answer: approval:timeout (approval_timeout), then "
        "approval:decided approved=false: the run is blocked")


# ---- the rest of the protocol ---------------------------------------------

def s_health(ws, port, token):
    check(ws.seen and ws.seen[0]["type"] == "connection:welcome",
          "no connection:welcome first: %s" % ws.seen[:1])
    w = ws.seen[0]
    check(w["protocol_version"] == 1 and "approval" in w["capabilities"],
          "welcome: %s" % w)
    say("connection:welcome")
    mid = ws.send("health:ping",
                  {"client_time": time.strftime("%Y-%m-%dT%H:%M:%S.000Z",
                                                time.gmtime())})
    pong = ws.answer(mid)
    check(pong["type"] == "health:pong" and pong["server_time"] and
          isinstance(pong["latency_ms"], int), "pong: %s" % pong)
    say("health:ping -> health:pong")
    mid = ws.send("health:status")
    st = ws.answer(mid)
    check(st["type"] == "health:status" and
          st["status"] in ("idle", "running") and
          st["health"]["status"] == "ok" and "queued" in st["counts"],
          "status: %s" % st)
    mid = ws.send("status:viber")
    check(ws.answer(mid)["type"] == "health:status", "status:viber")
    say("health:status (and status:viber)")


def s_malformed(ws, port, token):
    bad = [b"not json", b"[1, 2]", b'{"id": "x"}', b'{"type": 7}',
           b'{"type": "health:ping", "payload": [1]}',
           b'{"type": "health:ping", "timestamp": "yesterday"}',
           b'{"type": "health:ping", "id": {"a": 1}}']
    for raw in bad:
        ws.send_raw(raw)
        m = ws.until(lambda m: m["type"] == "ack", "an answer", 10)
        check(m["ok"] is False and m["error"]["code"] == "protocol_error"
              and m.get("status") == 400, "%r: %s" % (raw, m))
    say("%d malformed envelopes: protocol_error each" % len(bad))
    mid = ws.send("task:fly", {})
    m = ws.answer(mid)
    check(m["error"]["code"] == "bad_request" and m.get("status") == 400
          and "'task:fly' is no command" in m["error"]["message"],
          "unknown type: %s" % m)
    mid = ws.send("health:ping", {"client_time": 1})
    check(ws.answer(mid)["type"] == "health:pong", "socket unusable")
    say("the socket still answers")


def s_mismatch(ws, port, token, key):
    before = task_total(port, token)
    ack = submit(ws, "Mismatch, first", key)
    check(ack["ok"], "first submit: %s" % ack)
    task = ack["result"]["id"]
    again = submit(ws, "Mismatch, another payload", key)
    check(not again["ok"] and
          again["error"]["code"] == "idempotency_mismatch" and
          again["error"]["task_id"] == task, "ws: %s" % again)
    st, body = api(port, token, "POST", "/api/v1/tasks",
                   {"title": "Mismatch, a third"}, {"Idempotency-Key": key})
    check(st == 422 and body["error"]["code"] == "idempotency_mismatch",
          "HTTP: %s %s" % (st, body))
    check(task_total(port, token) == before + 1, "a second task was made")
    say("another payload under key %s: idempotency_mismatch, no task" % key)


def s_oversize(ws, port, token, size):
    before = task_total(port, token)
    big = json.dumps({"type": "task:submit", "id": "big",
                      "payload": {"goal": "x" * int(size)}}).encode()
    ws.send_raw(big)
    try:
        m = ws.until(lambda m: m.get("id") == "big", "close", 10)
        raise Fail("answered instead of closed: %s" % m)
    except Closed as c:
        check(c.code == 1009, "closed with %s" % c.code)
    check(task_total(port, token) == before, "a task was made")
    say("a %d-byte message: closed with 1009, no task" % len(big))


def s_message(ws, port, token, mode, text):
    ack = submit(ws, "Injection %s" % mode)
    check(ack["ok"], "submit refused: %s" % ack)
    task = ack["result"]["id"]
    m = of_task(ws, task, ("task:started",), "task:started")
    run = m["run"]
    # the execute stage's agent (the one the fake agent holds) is working
    ws.until(lambda m: m.get("run") == run and m["type"] == "event" and
             m["event"]["type"] == "agent_started" and
             "-execute-" in m["event"]["data"]["call"],
             "agent_started of execute")
    # and has begun its wait (the fake agent counts its calls as it
    # starts: one stopped before it counted would not count)
    time.sleep(2)
    mid = ws.send("task:message", {"task_id": task, "message": text,
                                   "injection_mode": mode})
    ans = ws.answer(mid)
    check(ans["ok"] and ans["result"]["mode"] == mode, "ack: %s" % ans)
    print("run", run, "task", task, flush=True)
    say("task:message %s acked" % mode)


SCENARIOS = {
    "completed": s_completed, "stopped": s_stopped,
    "already-running": s_already_running, "rejected": s_rejected,
    "timeout": s_timeout, "health": s_health, "malformed": s_malformed,
    "mismatch": s_mismatch, "oversize": s_oversize, "message": s_message,
}


def main():
    port, token, name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    ws = WS(port, token)
    if ws.status != 101:
        print("FAIL: the handshake was answered %d" % ws.status)
        return 1
    try:
        ws.until(lambda m: m["type"] == "connection:welcome", "welcome",
                 10)
        SCENARIOS[name](ws, port, token, *sys.argv[4:])
    except (Fail, Closed, KeyError, TypeError, ValueError) as e:
        print("FAIL: %s: %s" % (type(e).__name__, e))
        for m in ws.seen[-40:]:
            print("  seen:", json.dumps(m)[:300])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
