#!/usr/bin/env python3
# mcp-cases.py: an MCP client that speaks to `baton mcp` (newline-delimited
# JSON-RPC 2.0 on its stdin/stdout) case by case, for t0145.
#
#   mcp-cases.py CASE [ARG...]
#
# runs `$BATON mcp` in the current directory, plays CASE and exits 0 when
# every answer is what the protocol (and baton) should answer, else 1 with
# what was wrong. A case that needs a run takes its id as ARG.
import json
import os
import subprocess
import sys

BATON = os.environ["BATON"]
VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18"]
TOOLS = {"add_task", "list_tasks", "show_task", "list_runs", "show_run",
         "list_approvals", "decide", "pause_run", "resume_run", "abort_run",
         "steer_run", "run_diff", "run_report"}


def die(msg):
    sys.stderr.write("mcp-cases: %s\n" % msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        die(msg)


class Client:
    def __init__(self):
        self.p = subprocess.Popen([BATON, "mcp"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.n = 0

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def recv(self):
        line = self.p.stdout.readline()
        check(line, "baton mcp answered nothing (stderr: %r)" %
              self.p.stderr.read() if self.p.poll() is not None else
              "baton mcp answered nothing")
        check(line.endswith(b"\n"), "an answer not ending a line")
        try:
            return json.loads(line)
        except ValueError:
            die("not JSON on stdout: %r" % line[:200])

    def request(self, method, params=None):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        ans = self.recv()
        check(ans.get("jsonrpc") == "2.0", "no jsonrpc 2.0 in %r" % ans)
        check(ans.get("id") == self.n, "answer to id %r, not %d: %r" %
              (ans.get("id"), self.n, ans))
        return ans

    def result(self, method, params=None):
        ans = self.request(method, params)
        check("result" in ans, "%s: no result: %r" % (method, ans))
        return ans["result"]

    def error(self, method, params, code, words=None):
        ans = self.request(method, params)
        err = ans.get("error")
        check(err and err.get("code") == code,
              "%s %r: wanted error %d, got %r" % (method, params, code, ans))
        if words:
            check(words in err["message"], "%s: %r does not say %r" %
                  (method, err["message"], words))
        return err["message"]

    def init(self, version="2025-06-18"):
        r = self.result("initialize", {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "mcp-cases", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def call(self, name, args):
        return self.result("tools/call", {"name": name, "arguments": args})

    def ok(self, name, args):
        r = self.call(name, args)
        check(r.get("isError") is False, "%s %r failed: %r" %
              (name, args, r))
        check(r["content"][0]["type"] == "text", "no text content")
        return r

    def tool_error(self, name, args, words):
        r = self.call(name, args)
        check(r.get("isError") is True, "%s %r: wanted isError, got %r" %
              (name, args, r))
        text = r["content"][0]["text"]
        check(words in text, "%s: %r does not say %r" % (name, text, words))
        return text

    def close(self):
        self.p.stdin.close()
        rest = self.p.stdout.read()
        rc = self.p.wait(timeout=30)
        self.p.stderr.close()
        self.p.stdout.close()
        return rc, rest


def case_handshake():
    for v in VERSIONS:
        c = Client()
        r = c.init(v)
        check(r["protocolVersion"] == v, "asked %s, got %r" % (v, r))
        check(r["serverInfo"]["name"] == "baton", "serverInfo %r" % r)
        check("tools" in r["capabilities"] and
              "resources" in r["capabilities"], "capabilities %r" % r)
        check(c.result("ping") == {}, "ping is not {}")
        check(c.close() == (0, b""), "did not end quietly")
    c = Client()
    r = c.init("1999-01-01")
    check(r["protocolVersion"] == "2025-06-18",
          "an unknown version is answered with our newest, not %r" % r)
    c.error("initialize", {}, -32602, "protocolVersion")
    # notifications get no answer: the next line is the ping's
    c.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 9}})
    c.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
    check(c.result("ping") == {}, "ping after notifications")
    check(c.close() == (0, b""), "answered a notification")


def case_list():
    c = Client()
    c.init()
    tools = c.result("tools/list")["tools"]
    names = {t["name"] for t in tools}
    check(names == TOOLS, "tools/list names %r" % sorted(names))
    for t in tools:
        s = t["inputSchema"]
        check(s["type"] == "object" and "properties" in s,
              "%s: inputSchema %r" % (t["name"], s))
        check(t["description"], "%s: no description" % t["name"])
        for req in s.get("required", []):
            check(req in s["properties"], "%s: required %s undeclared" %
                  (t["name"], req))
    tpl = c.result("resources/templates/list")["resourceTemplates"]
    uris = {t["uriTemplate"] for t in tpl}
    check(uris == {"baton://runs/{id}", "baton://runs/{id}/report",
                   "baton://runs/{id}/diff"}, "templates %r" % uris)
    c.close()


def case_add_task():
    c = Client()
    c.init()
    r = c.ok("add_task", {"title": "Add CSV export",
                          "body": "Export the table as CSV.\n\tTabs and "
                                  "newlines are fine.",
                          "priority": 7, "area": "src",
                          "allow": ["src/**"], "verify": ["make test"]})
    t = r["structuredContent"]
    check(t["title"] == "Add CSV export" and t["status"] == "queued" and
          t["priority"] == 7, "task %r" % t)
    check(json.loads(r["content"][0]["text"])["id"] == t["id"],
          "the text is not the task")
    r2 = c.ok("add_task", {"title": "After the export",
                           "after": ["t%d" % t["id"]]})
    t2 = r2["structuredContent"]
    check(t2["depends_on"] == [t["id"]], "depends_on %r" % t2)
    lst = c.ok("list_tasks", {})["structuredContent"]["tasks"]
    check([x["id"] for x in lst][:2] == [t2["id"], t["id"]],
          "list_tasks newest first: %r" % [x["id"] for x in lst])
    lst = c.ok("list_tasks", {"status": "queued", "limit": 1})
    check(len(lst["structuredContent"]["tasks"]) == 1, "limit 1")
    c.tool_error("list_tasks", {"status": "nonsense"}, "nonsense")
    s = c.ok("show_task", {"task": "t%d" % t["id"]})["structuredContent"]
    check(s["body"].startswith("Export the table"), "show_task %r" % s)
    c.tool_error("show_task", {"task": "99999"}, "no such task")
    c.tool_error("add_task", {"title": "x", "pipeline": "nope"}, "nope")
    c.error("tools/call", {"name": "add_task",
                           "arguments": {"title": "x", "after": ["zz"]}},
            -32602, "'zz' is not a task id")
    print(t["id"])
    c.close()


def case_bad_params():
    c = Client()
    c.init()
    bad = [
        ({"name": "add_task", "arguments": {}}, 'needs "title"'),
        ({"name": "add_task", "arguments": {"title": 5}},
         '"title" must be a string, not a number'),
        ({"name": "add_task", "arguments": {"title": ""}}, "must not be"),
        ({"name": "add_task", "arguments": {"title": "x", "color": "red"}},
         'no argument "color"'),
        ({"name": "add_task", "arguments": {"title": "x", "priority": 5000}},
         "from -1000 to 1000"),
        ({"name": "add_task", "arguments": {"title": "x", "allow": "a"}},
         '"allow" must be an array'),
        ({"name": "add_task", "arguments": {"title": "x", "allow": [1]}},
         "must be a string"),
        ({"name": "add_task", "arguments": "title"},
         "arguments must be an object"),
        ({"name": "decide", "arguments": {"run": "r1", "decision": "maybe"}},
         "'maybe' is not one of approve"),
        ({"name": "steer_run", "arguments": {"run": "r1", "text": "x",
                                             "mode": "loud"}}, "loud"),
        ({"name": "list_runs", "arguments": {"limit": 0}}, "from 1 to 500"),
        ({"name": "no_such_tool", "arguments": {}}, "unknown tool"),
        ({"arguments": {}}, 'needs a "name"'),
    ]
    for params, words in bad:
        c.error("tools/call", params, -32602, words)
    c.error("tools/call", None, -32602)
    c.error("resources/read", {}, -32602, '"uri"')
    c.error("resources/read", {"uri": 7}, -32602)
    # params that are not an object
    c.error("tools/list", [1, 2], -32602, '"params" must be an object')
    # the server is still there
    check(c.result("ping") == {}, "ping after bad params")
    check(c.close()[0] == 0, "exit status")


def case_protocol_errors():
    c = Client()
    c.init()
    for raw, code, words in [
            (b"{not json", -32700, "parse error"),
            (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700, ""),
            (b"[]", -32600, "batches"),
            (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600,
             "batches"),
            (b'"hello"', -32600, "JSON object"),
            (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', -32600,
             '"id"'),
            (b'{"jsonrpc": "2.0", "id": {}, "method": "ping"}', -32600,
             '"id"'),
            (b'{"jsonrpc": "1.0", "id": 3, "method": "ping"}', -32600,
             '"jsonrpc"'),
            (b'{"jsonrpc": "2.0", "id": 4}', -32600, '"method"'),
            (b'{"jsonrpc": "2.0", "id": 5, "method": "ping", '
             b'"id": 6}', -32700, "duplicate"),
            (b'\xff\xfe{"a"}', -32700, ""),
            (b'{"jsonrpc": "2.0", "id": 8, "method": "p\\u0000ng"}', -32700,
             "")]:
        c.send_raw(raw + b"\n")
        a = c.recv()
        check(a.get("error", {}).get("code") == code,
              "%r: wanted %d, got %r" % (raw, code, a))
        check(words in a["error"]["message"], "%r: %r" % (raw, a))
    c.error("tools/nonsense", {}, -32601, "method not found")
    c.error("sampling/createMessage", {}, -32601)
    # a string id is answered with that id
    c.send({"jsonrpc": "2.0", "id": "abc", "method": "ping"})
    a = c.recv()
    check(a == {"jsonrpc": "2.0", "id": "abc", "result": {}}, "%r" % a)
    # a response from the client (to nothing asked) and blank lines: nothing
    c.send_raw(b'{"jsonrpc": "2.0", "id": 77, "result": {}}\n\n\r\n')
    check(c.result("ping") == {}, "ping at the end")
    check(c.close() == (0, b""), "something more was answered")


def case_huge_line():
    c = Client()
    c.init()
    huge = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + \
        b"a" * (3 * 1024 * 1024) + b'"}}\n'
    c.send_raw(huge)
    a = c.recv()
    check(a.get("error", {}).get("code") == -32700 and
          "longer than" in a["error"]["message"], "huge line: %r" % a)
    # just under the limit is read
    big = "b" * (900 * 1024)
    r = c.error("tools/call", {"name": "add_task",
                               "arguments": {"title": big}}, -32602,
                "longer than 4096")
    check(len(r) < 1000, "the error quotes the huge title")
    check(c.result("ping") == {}, "ping after the huge line")
    c.close()


def case_stdin_closed():
    # a call whose stdin ends right behind it is answered, then it ends
    c = Client()
    c.init()
    c.send_raw(b'{"jsonrpc": "2.0", "id": 50, "method": "tools/call", '
               b'"params": {"name": "list_runs", "arguments": {}}}\n')
    c.p.stdin.close()
    a = c.recv()
    check(a.get("id") == 50 and a["result"]["isError"] is False,
          "the last call: %r" % a)
    check(c.p.wait(timeout=30) == 0, "exit status")
    # a call cut off by the end of stdin: a parse error, exit 0
    c = Client()
    c.init()
    c.send_raw(b'{"jsonrpc": "2.0", "id": 51, "method": "tools/ca')
    c.p.stdin.close()
    a = c.recv()
    check(a.get("error", {}).get("code") == -32700, "cut call: %r" % a)
    check(c.p.wait(timeout=30) == 0, "exit status")
    # stdout gone: it ends, failing, and does not hang
    p = subprocess.Popen([BATON, "mcp"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    p.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n' * 3)
    p.stdin.flush()
    check(p.wait(timeout=30) == 1, "a closed stdout is not exit 1")
    check(b"cannot write" in p.stderr.read(), "no word on stderr")


def case_runs(done):
    c = Client()
    c.init()
    runs = c.ok("list_runs", {})["structuredContent"]["runs"]
    check(any(r["id"] == done for r in runs), "list_runs lacks %s" % done)
    only = c.ok("list_runs", {"status": "merge_ready"})
    check(all(r["status"] == "merge_ready"
              for r in only["structuredContent"]["runs"]), "status filter")
    c.tool_error("list_runs", {"status": "sleeping"}, "sleeping")
    r = c.ok("show_run", {"run": done})["structuredContent"]
    check(r["id"] == done and r["status"] == "merge_ready", "show_run %r" % r)
    check(r["resources"]["report"] == "baton://runs/%s/report" % done,
          "resources %r" % r.get("resources"))
    seq = done.split("-")[0]
    check(c.ok("show_run", {"run": seq})["structuredContent"]["id"] == done,
          "show_run by %s" % seq)
    diff = c.ok("run_diff", {"run": done})["content"][0]["text"]
    check(diff.startswith("diff --git"), "run_diff %r" % diff[:80])
    stat = c.ok("run_diff", {"run": done, "stat": True})["content"][0]["text"]
    check("changed" in stat, "run_diff stat %r" % stat)
    rep = c.ok("run_report", {"run": done})["content"][0]["text"]
    check(done in rep and "merge_ready" in rep, "run_report %r" % rep[:200])
    c.tool_error("show_run", {"run": "r999"}, "r999")
    c.tool_error("decide", {"run": done, "decision": "approve"}, done)
    res = c.result("resources/list")["resources"]
    uris = {x["uri"] for x in res}
    check("baton://runs/%s/report" % done in uris and
          "baton://runs/%s/diff" % done in uris, "resources/list %r" % uris)
    for tail, mime, words in [("/report", "text/markdown", "merge_ready"),
                              ("/diff", "text/x-diff", "diff --git"),
                              ("", "application/json", '"id": "%s"' % done)]:
        uri = "baton://runs/%s%s" % (done, tail)
        got = c.result("resources/read", {"uri": uri})["contents"]
        check(len(got) == 1 and got[0]["uri"] == uri and
              got[0]["mimeType"] == mime and words in got[0]["text"],
              "resources/read %s: %r" % (uri, got))
    c.error("resources/read", {"uri": "baton://runs/r999/report"}, -32002,
            "r999")
    c.close()


def case_gate(waiting):
    c = Client()
    c.init()
    a = c.ok("list_approvals", {})["structuredContent"]["approvals"]
    check([x["run"] for x in a] == [waiting] and
          a[0]["gate"] == "executing", "list_approvals %r" % a)
    # a report is not there until the run ends
    c.error("resources/read", {"uri": "baton://runs/%s/report" % waiting},
            -32002, "no report yet")
    r = c.ok("decide", {"run": waiting, "decision": "approve"})
    check(r["structuredContent"]["id"] == waiting, "decide %r" % r)
    c.tool_error("decide", {"run": waiting, "decision": "approve"}, waiting)
    c.close()


def case_control(run):
    c = Client()
    c.init()
    r = c.ok("steer_run", {"run": run, "text": "Keep the change small.\n"
                                              "\tAnd tidy."})
    check(r["structuredContent"]["mode"] == "followup", "steer %r" % r)
    r = c.ok("pause_run", {"run": run})["structuredContent"]
    check(r["status"] == "paused" or r["pause_requested"], "pause %r" % r)
    r = c.ok("resume_run", {"run": run})["structuredContent"]
    check(r["status"] == "waiting_for_approval", "resume %r" % r)
    r = c.ok("abort_run", {"run": run})["structuredContent"]
    check(r["status"] == "aborted", "abort %r" % r)
    c.tool_error("pause_run", {"run": run}, run)
    c.tool_error("steer_run", {"run": run, "text": "late"}, run)
    c.close()


def case_hostile(run):
    c = Client()
    c.init()
    for ref in ["../../etc/passwd", "r1/../../x", "/etc/passwd", ".baton",
                "r1\n", "a b", "-r1", "r1;rm -rf /", "..",
                "r1%2f..", "x" * 200, "\u202er1"]:
        for tool in ["show_run", "pause_run", "resume_run", "abort_run",
                     "run_diff", "run_report"]:
            if len(ref) > 128:
                c.error("tools/call", {"name": tool,
                                       "arguments": {"run": ref}}, -32602,
                        "longer than 128")
                continue
            c.error("tools/call", {"name": tool, "arguments": {"run": ref}},
                    -32602, "is not a run id")
        c.error("tools/call", {"name": "steer_run",
                               "arguments": {"run": ref, "text": "hi"}},
                -32602)
        c.error("tools/call", {"name": "decide",
                               "arguments": {"run": ref,
                                             "decision": "approve"}},
                -32602)
        c.error("tools/call", {"name": "show_task",
                               "arguments": {"task": ref[:32]}}, -32602)
    for text in ["a\x1b[2Jb", "bell\x07", "nul-less \x01", "del\x7f",
                 "cr\roverwrite", "\x1b]8;;http://evil\x07link"]:
        m = c.error("tools/call", {"name": "steer_run",
                                   "arguments": {"run": run, "text": text}},
                    -32602, "control character")
        check("\x1b" not in m and "\x07" not in m, "the message echoes it")
        c.error("tools/call", {"name": "add_task",
                               "arguments": {"title": text}}, -32602,
                "control character")
        c.error("tools/call", {"name": "decide",
                               "arguments": {"run": run,
                                             "decision": "request-changes",
                                             "guidance": text}}, -32602,
                "control character")
    for uri in ["file:///etc/passwd", "http://127.0.0.1/", "baton://tasks/1",
                "baton://runs/../../etc/passwd",
                "baton://runs/%s/../../../etc/passwd" % run,
                "baton://runs/%s/report/../diff" % run,
                "baton://runs/%s/secrets" % run, "baton://runs/",
                "baton://runs/%s/" % run, "BATON://runs/%s/report" % run,
                "baton:/runs/%s/report" % run, "baton://runs/a b/diff",
                "baton://runs/" + "y" * 300 + "/report", ""]:
        m = c.error("resources/read", {"uri": uri}, -32602,
                    "is not a baton resource")
        check(len(m) < 600, "the message is too long")
    c.close()


CASES = {n[5:]: f for n, f in list(globals().items())
         if n.startswith("case_")}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CASES:
        die("usage: mcp-cases.py %s [ARG]" % "|".join(sorted(CASES)))
    CASES[sys.argv[1]](*sys.argv[2:])
