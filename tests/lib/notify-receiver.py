#!/usr/bin/env python3
# notify-receiver.py LOG PORTFILE: the notification receivers of the
# notify tests (t0140-t0142), one HTTP server on 127.0.0.1 standing for
# each service by path:
#
#   /generic/...  baton's own JSON (docs/api.md "Webhooks")
#   /slack/...    a Slack incoming webhook (text + Block Kit blocks)
#   /discord/...  a Discord webhook (content + embeds)
#   /ntfy/TOPIC   an ntfy topic (text body, Title/Priority/Tags/Click/
#                 Actions headers)
#
# Each POST is checked against the service's published shape and limits,
# strictly: an unknown top-level key, a missing one, a value over a limit
# is a failure. One JSON line per POST goes to LOG:
#   {"path", "format", "kind", "ok", "why", "approve", "reject", "run",
#    "text"}
# where approve/reject/run are the links found in the message (null
# when none) and text what a person reads. The receiver answers 200
# either way (a 4xx would only make baton retry); the test reads "ok".
import http.server
import json
import os
import re
import sys

log_path, port_path = sys.argv[1], sys.argv[2]


class Bad(Exception):
    pass


def need(cond, why):
    if not cond:
        raise Bad(why)


def is_str(v, maxlen, name, empty=False):
    need(isinstance(v, str), "%s is not a string" % name)
    need(empty or v != "", "%s is empty" % name)
    need(len(v) <= maxlen, "%s is %d characters, over %d" % (name, len(v), maxlen))


def is_url(v, name):
    is_str(v, 3000, name)
    need(re.match(r"^https?://[^\s]+$", v), "%s is not a URL: %r" % (name, v))


def check_generic(body, hdr, out):
    o = json.loads(body)
    need(isinstance(o, dict), "not an object")
    for k in ("kind", "seq", "ts", "run", "status", "reason", "target", "event"):
        need(k in o, "no %s" % k)
    need(o["kind"] == hdr.get("X-Baton-Event"), "kind differs from X-Baton-Event")
    links = o.get("links") or {}
    out["approve"], out["reject"], out["run"] = (
        links.get("approve"), links.get("reject"), links.get("run"))
    out["text"] = o.get("question") or o.get("reason")


# Slack Block Kit: https://api.slack.com/reference/block-kit
def check_slack(body, hdr, out):
    need(hdr.get("Content-Type", "").startswith("application/json"),
         "Content-Type is not JSON")
    o = json.loads(body)
    need(isinstance(o, dict), "not an object")
    need(set(o) <= {"text", "blocks"}, "unknown keys %s" % (set(o) - {"text", "blocks"}))
    is_str(o.get("text"), 40000, "text")
    blocks = o.get("blocks")
    need(isinstance(blocks, list) and 0 < len(blocks) <= 50, "blocks: 1 to 50")
    for b in blocks:
        t = b.get("type")
        if t == "header":
            need(set(b) == {"type", "text"}, "header keys %s" % set(b))
            need(b["text"].get("type") == "plain_text", "header text not plain_text")
            is_str(b["text"].get("text"), 150, "header text")
        elif t == "section":
            need(set(b) == {"type", "text"}, "section keys %s" % set(b))
            need(b["text"].get("type") in ("mrkdwn", "plain_text"), "section text type")
            is_str(b["text"].get("text"), 3000, "section text")
            out["text"] = b["text"]["text"]
        elif t == "actions":
            need(set(b) == {"type", "elements"}, "actions keys %s" % set(b))
            els = b["elements"]
            need(isinstance(els, list) and 0 < len(els) <= 25, "elements: 1 to 25")
            for e in els:
                need(e.get("type") == "button", "element is not a button")
                need(set(e) <= {"type", "text", "url", "action_id", "style", "value"},
                     "button keys %s" % set(e))
                need(e["text"].get("type") == "plain_text", "button text not plain_text")
                is_str(e["text"].get("text"), 75, "button text")
                is_url(e.get("url"), "button url")
                is_str(e.get("action_id"), 255, "action_id")
                need(e.get("style") in (None, "primary", "danger"), "style")
                key = {"baton-approve": "approve", "baton-reject": "reject",
                       "baton-run": "run"}.get(e["action_id"])
                need(key, "unknown action_id %s" % e["action_id"])
                out[key] = e["url"]
        else:
            raise Bad("unexpected block type %r" % t)


# Discord: https://discord.com/developers/docs/resources/webhook#execute-webhook
def check_discord(body, hdr, out):
    need(hdr.get("Content-Type", "").startswith("application/json"),
         "Content-Type is not JSON")
    o = json.loads(body)
    need(isinstance(o, dict), "not an object")
    allowed = {"content", "embeds", "allowed_mentions", "username", "avatar_url", "tts"}
    need(set(o) <= allowed, "unknown keys %s" % (set(o) - allowed))
    need("content" in o or "embeds" in o, "neither content nor embeds")
    if "content" in o:
        is_str(o["content"], 2000, "content")
    need(o.get("allowed_mentions") == {"parse": []}, "allowed_mentions would mention")
    embeds = o.get("embeds", [])
    need(isinstance(embeds, list) and len(embeds) <= 10, "embeds: at most 10")
    total = 0
    for em in embeds:
        need(set(em) <= {"title", "description", "url", "color", "fields",
                         "timestamp", "footer"}, "embed keys %s" % set(em))
        if "title" in em:
            is_str(em["title"], 256, "embed title")
            total += len(em["title"])
        if "description" in em:
            is_str(em["description"], 4096, "embed description")
            total += len(em["description"])
            out["text"] = em["description"]
            for label, key in (("Approve", "approve"), ("Reject", "reject")):
                m = re.search(r"\[%s\]\((https?://[^)\s]+)\)" % label, em["description"])
                if m:
                    out[key] = m.group(1)
        if "url" in em:
            is_url(em["url"], "embed url")
            out["run"] = em["url"]
        if "color" in em:
            need(isinstance(em["color"], int) and 0 <= em["color"] <= 0xFFFFFF, "color")
        fields = em.get("fields", [])
        need(isinstance(fields, list) and len(fields) <= 25, "fields: at most 25")
        for f in fields:
            need(set(f) <= {"name", "value", "inline"}, "field keys %s" % set(f))
            is_str(f.get("name"), 256, "field name")
            is_str(f.get("value"), 1024, "field value")
            total += len(f["name"]) + len(f["value"])
    need(total <= 6000, "embeds total %d over 6000" % total)


# ntfy: https://docs.ntfy.sh/publish/
def check_ntfy(body, hdr, out):
    need(hdr.get("Content-Type", "").startswith("text/plain"), "Content-Type is not text/plain")
    text = body.decode("utf-8")
    need(text.strip() != "", "empty message")
    need(len(body) <= 4096, "message over 4096 bytes")
    out["text"] = text
    title = hdr.get("Title")
    need(title, "no Title")
    need(hdr.get("Priority") in ("1", "2", "3", "4", "5"), "Priority not 1-5")
    tags = hdr.get("Tags")
    need(tags and re.match(r"^[a-z0-9_]+(,[a-z0-9_]+)*$", tags), "Tags: %r" % tags)
    if hdr.get("Click"):
        is_url(hdr["Click"], "Click")
        out["run"] = hdr["Click"]
    acts = hdr.get("Actions")
    if acts:
        parts = [a.strip() for a in acts.split(";")]
        need(len(parts) <= 3, "over 3 actions")
        for a in parts:
            f = [x.strip() for x in a.split(",")]
            need(f[0] == "view", "action %r is not view" % f[0])
            need(len(f) >= 3, "action without label and url")
            is_url(f[2], "action url")
            for opt in f[3:]:
                need(opt in ("clear=true", "clear=false"), "action option %r" % opt)
            key = {"Approve": "approve", "Reject": "reject"}.get(f[1])
            need(key, "unknown action label %r" % f[1])
            out[key] = f[2]


checks = {"generic": check_generic, "slack": check_slack,
          "discord": check_discord, "ntfy": check_ntfy}


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        fmt = self.path.strip("/").split("/")[0]
        out = {"path": self.path, "format": fmt,
               "kind": self.headers.get("X-Baton-Event"), "ok": True,
               "why": None, "approve": None, "reject": None, "run": None,
               "text": None}
        try:
            need(fmt in checks, "no receiver at %s" % self.path)
            checks[fmt](body, self.headers, out)
        except (Bad, ValueError, KeyError, AttributeError, TypeError) as e:
            out["ok"] = False
            out["why"] = "%s: %s" % (type(e).__name__, e)
        with open(log_path, "a") as f:
            f.write(json.dumps(out) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
with open(port_path + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(port_path + ".tmp", port_path)
srv.serve_forever()
