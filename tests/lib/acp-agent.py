#!/usr/bin/env python3
# A scripted ACP agent for the tests (t0108, t0109): it speaks the Agent
# Client Protocol over its stdio as an agent does (initialize,
# session/new, session/prompt, session/cancel) and, during a prompt turn,
# makes the requests its script names of the client (baton), so that a
# test can make baton answer what no real agent would ask on cue: reads
# and writes outside the worktree, through planted symlinks, terminals
# outside it, permissions for edits anywhere.
#
# The script (ACP_SCRIPT, a JSON file) is like the mock model server's:
#
#   {"rules": [{"match": "You are the implementer",
#               "steps": [STEP...], "text": "final text",
#               "usage": {"inputTokens": 10, "outputTokens": 2}}]}
#
# The first rule whose match occurs in the prompt (and whose "kind", if
# it has one, is $BATON_STAGE_KIND) runs (no match: "OK").
# Steps, in order:
#   {"request": METHOD, "params": {...}}  a request to baton; its answer
#                                         is logged; sessionId is added
#   {"symlink": [TARGET, NAME]}           plants a symlink (NAME relative
#                                         to the cwd)
#   {"unlink": NAME}                      removes it again
#   {"artifact": TEXT}                    writes TEXT to $BATON_ARTIFACT
#   {"mkdir": NAME}                       a directory in the cwd
#   {"text": "..."}                       an agent_message_chunk
#   {"tool_call": {...}}                  a tool_call session/update
#   {"grandchild": true}                  starts `sleep 300` in its group
#                                         and logs its pid
#   {"wait_cancel": SECONDS}              waits for session/cancel; with
#                                         "ignore": true it then goes on
#                                         waiting (a stuck agent)
# "{cwd}" in any string is the session's cwd.
#
# The session's start is set by the environment: ACP_VERSION (the
# protocolVersion it answers, 1), ACP_LOAD=1 (it offers loadSession; a
# session/load of an id starting "bad" fails, another replays a user and
# an agent message of the old session), ACP_MODELS (JSON: the models
# session/new offers; session/set_model then answers {}), ACP_NEW_ERROR
# ("CODE:MESSAGE": session/new fails so), ACP_STOP (the stopReason of
# every turn, end_turn), ACP_EXIT=prompt (it exits 1 on session/prompt). Every line it reads and
# every answer and event it sees goes to ACP_LOG (one JSON object per
# line: {"event": ..., ...}).
import json
import os
import subprocess
import sys
import time

LOG = os.environ.get("ACP_LOG")
SCRIPT = os.environ.get("ACP_SCRIPT")


def log(**kw):
    if not LOG:
        return
    kw["t"] = time.time()
    with open(LOG, "a") as f:
        f.write(json.dumps(kw) + "\n")


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


pending = []  # lines read while waiting for something else


def read_msg(timeout=None):
    if pending:
        return pending.pop(0)
    line = sys.stdin.readline()
    if not line:
        log(event="eof")
        sys.exit(0)
    msg = json.loads(line)
    if msg.get("method") == "session/cancel":
        log(event="cancel", params=msg.get("params"))
    return msg


def subst(v, cwd):
    if isinstance(v, str):
        return v.replace("{cwd}", cwd)
    if isinstance(v, list):
        return [subst(x, cwd) for x in v]
    if isinstance(v, dict):
        return {k: subst(x, cwd) for k, x in v.items()}
    return v


next_id = [100]
cancelled = [False]


def call(method, params):
    next_id[0] += 1
    rid = next_id[0]
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    while True:
        msg = read_msg()
        if msg.get("id") == rid and "method" not in msg:
            log(event="answer", method=method, params=params,
                result=msg.get("result"), error=msg.get("error"))
            return msg
        if msg.get("method") == "session/cancel":
            cancelled[0] = True
            continue
        pending.append(msg)


def update(sid, up):
    send({"jsonrpc": "2.0", "method": "session/update",
          "params": {"sessionId": sid, "update": up}})


def run_turn(rid, sid, cwd, prompt):
    rules = []
    if SCRIPT:
        with open(SCRIPT) as f:
            rules = json.load(f).get("rules", [])
    kind = os.environ.get("BATON_STAGE_KIND")
    rule = next((r for r in rules if r.get("match", "") in prompt and
                 r.get("kind", kind) == kind), None)
    text, usage = "OK", None
    if rule:
        text = rule.get("text", "OK")
        usage = rule.get("usage")
        for step in subst(rule.get("steps", []), cwd):
            if "request" in step:
                params = dict(step.get("params", {}))
                params["sessionId"] = sid
                call(step["request"], params)
            elif "symlink" in step:
                target, name = step["symlink"]
                os.symlink(target, os.path.join(cwd, name))
            elif "artifact" in step:
                with open(os.environ["BATON_ARTIFACT"], "w") as f:
                    f.write(step["artifact"])
            elif "unlink" in step:
                os.unlink(os.path.join(cwd, step["unlink"]))
            elif "mkdir" in step:
                os.makedirs(os.path.join(cwd, step["mkdir"]), exist_ok=True)
            elif "text" in step:
                update(sid, {"sessionUpdate": "agent_message_chunk",
                             "content": {"type": "text", "text": step["text"]}})
            elif "tool_call" in step:
                up = {"sessionUpdate": "tool_call"}
                up.update(step["tool_call"])
                update(sid, up)
            elif "grandchild" in step:
                p = subprocess.Popen(["sleep", "300"])
                log(event="grandchild", pid=p.pid, agent=os.getpid())
            elif "wait_cancel" in step:
                log(event="waiting", pid=os.getpid())
                end = time.time() + step["wait_cancel"]
                while not cancelled[0] and time.time() < end:
                    msg = read_msg()
                    if msg.get("method") == "session/cancel":
                        cancelled[0] = True
                if cancelled[0] and step.get("ignore"):
                    log(event="ignoring")
                    while True:
                        read_msg()
                if cancelled[0]:
                    # logged first: baton kills the group once the
                    # answer is in, which may be before a later write
                    log(event="answered_cancelled")
                    send({"jsonrpc": "2.0", "id": rid,
                          "result": {"stopReason": "cancelled"}})
                    return
    update(sid, {"sessionUpdate": "agent_message_chunk",
                 "content": {"type": "text", "text": text}})
    result = {"stopReason": os.environ.get("ACP_STOP", "end_turn")}
    if usage:
        result["usage"] = dict(usage, totalTokens=sum(usage.values()))
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def main():
    sid, cwd = None, None
    while True:
        msg = read_msg()
        method, rid = msg.get("method"), msg.get("id")
        log(event="got", method=method)
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": int(os.environ.get("ACP_VERSION", "1")),
                "agentCapabilities": {
                    "loadSession": os.environ.get("ACP_LOAD") == "1"},
                "agentInfo": {"name": "acp-agent.py", "version": "1"}}})
        elif method == "session/new" and os.environ.get("ACP_NEW_ERROR"):
            code, text = os.environ["ACP_NEW_ERROR"].split(":", 1)
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": int(code), "message": text}})
        elif method == "session/new":
            cwd = msg["params"]["cwd"]
            sid = "sess-%d" % os.getpid()
            log(event="session", cwd=cwd, id=sid)
            result = {"sessionId": sid}
            if os.environ.get("ACP_MODELS"):
                result["models"] = json.loads(os.environ["ACP_MODELS"])
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "session/load":
            old = msg["params"]["sessionId"]
            log(event="load", id=old, cwd=msg["params"]["cwd"])
            if old.startswith("bad"):
                send({"jsonrpc": "2.0", "id": rid,
                      "error": {"code": -32002, "message": "no such session"}})
                continue
            sid, cwd = old, msg["params"]["cwd"]
            update(sid, {"sessionUpdate": "user_message_chunk",
                         "content": {"type": "text", "text": "old prompt"}})
            update(sid, {"sessionUpdate": "agent_message_chunk",
                         "content": {"type": "text", "text": "old answer"}})
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "session/set_model":
            log(event="set_model", model=msg["params"]["modelId"])
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "session/prompt" and os.environ.get("ACP_EXIT") == "prompt":
            log(event="exit")
            sys.exit(1)
        elif method == "session/prompt":
            prompt = "".join(b.get("text", "")
                             for b in msg["params"]["prompt"])
            run_turn(rid, sid, cwd, prompt)
        elif rid is not None and method:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32601, "message": "no " + method}})


main()
