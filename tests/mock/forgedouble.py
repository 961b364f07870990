#!/usr/bin/env python3
"""forgedouble: a stateful stand-in for GitHub's REST v3 API (issue 19).

Listens on 127.0.0.1 (port 0 by default), prints its base URL on stdout
and, with --port-file, writes the port to a file through a rename.

State: one repository (--repo owner/name) with issues, comments, pulls,
commit statuses, check runs, reviews and review comments, in GitHub's
shapes. Lists page by `Link` (per_page, page); every GET answers with an
ETag and a matching If-None-Match gets a 304 with no body.

Besides GitHub's reads, tests edit issues as a person would, with
PATCH /repos/OWNER/NAME/issues/N {state, title, body, labels:[names]}.

Control (tests only): POST /_double/<verb> with a JSON body:
  issue        {title, body, labels:[..], state}      -> the issue
  status       {sha, state, context, description, target_url}
  check_run    {sha, name, status, conclusion, output:{title,summary}}
  review       {pull, state, body, user}
  review_comment {pull, path, line, body}
  fail         {kind: secondary|primary|unauthorized|unprocessable,
                count, retry_after, reset_in, message}
  GET /_double/requests -> [{method, path, status}, ...]
"""
import argparse
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

LOCK = threading.Lock()


class State:
    def __init__(self, repo, token):
        self.repo = repo
        self.token = token
        self.issues = {}       # number -> issue (pulls are issues too)
        self.pulls = {}        # number -> pull
        self.comments = []     # issue comments
        self.statuses = []     # commit statuses
        self.check_runs = []
        self.reviews = []
        self.review_comments = []
        self.next_number = 1
        self.next_id = 1000
        self.fails = []        # queued injected failures
        self.requests = []
        self.remaining = 5000

    def new_id(self):
        self.next_id += 1
        return self.next_id


S = None


def now_iso():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def user(login):
    return {"login": login, "id": 1, "type": "User"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    # --- plumbing --------------------------------------------------------
    def base(self):
        return "http://%s:%d" % self.server.server_address[:2]

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n == 0:
            return None
        try:
            return json.loads(self.rfile.read(n))
        except ValueError:
            return "invalid"

    def send(self, status, obj=None, headers=None):
        body = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("X-RateLimit-Limit", "5000")
        self.send_header("X-RateLimit-Remaining", str(max(S.remaining, 0)))
        self.send_header("X-RateLimit-Reset", str(int(time.time()) + 3600))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
        S.requests.append({"method": self.command, "path": self.path,
                           "status": status})

    def error(self, status, message, errors=None, headers=None):
        obj = {"message": message,
               "documentation_url": "https://docs.github.com/rest"}
        if errors:
            obj["errors"] = errors
        self.send(status, obj, headers)

    def send_list(self, items, query):
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = max(int(query.get("page", ["1"])[0]), 1)
        chunk = items[(page - 1) * per_page: page * per_page]
        headers = {}
        last = max((len(items) + per_page - 1) // per_page, 1)
        path = urlsplit(self.path).path

        def page_url(n):
            # as GitHub does: the request's own query, its page replaced
            q = {k: v for k, v in query.items() if k != "page"}
            q["page"] = [str(n)]
            return "%s%s?%s" % (self.base(), path, urlencode(q, doseq=True))
        links = []
        if page < last:
            links.append('<%s>; rel="next"' % page_url(page + 1))
            links.append('<%s>; rel="last"' % page_url(last))
        if links:
            headers["Link"] = ", ".join(links)
        self.send_etagged(chunk, headers)

    def send_etagged(self, obj, headers=None):
        tag = '"%s"' % hashlib.sha1(
            json.dumps(obj, sort_keys=True).encode()).hexdigest()
        headers = dict(headers or {})
        headers["ETag"] = tag
        if self.headers.get("If-None-Match") == tag:
            # a 304 does not count against the primary rate limit
            S.remaining += 1
            self.send(304, None, headers)
            return
        self.send(200, obj, headers)

    def injected_failure(self):
        if not S.fails:
            return False
        f = S.fails[0]
        f["count"] -= 1
        if f["count"] <= 0:
            S.fails.pop(0)
        kind = f["kind"]
        if kind == "secondary":
            self.error(403, f.get("message",
                       "You have exceeded a secondary rate limit."),
                       headers={"Retry-After": str(f.get("retry_after", 1))})
        elif kind == "primary":
            S.remaining = 0
            self.send(403, {"message": "API rate limit exceeded"},
                      {"X-RateLimit-Remaining": "0"})
            S.remaining = 5000
        elif kind == "unauthorized":
            self.error(401, "Bad credentials")
        else:
            self.error(422, "Validation Failed",
                       [{"message": f.get("message", "invalid")}])
        return True

    # --- dispatch --------------------------------------------------------
    def handle_any(self):
        with LOCK:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            parts = [p for p in url.path.split("/") if p]
            body = self.read_body()
            if parts[:1] == ["_double"]:
                return self.control(parts[1:], body)
            S.remaining -= 1
            if S.token and self.headers.get("Authorization") != \
                    "Bearer " + S.token:
                return self.error(401, "Bad credentials")
            if self.injected_failure():
                return None
            if parts[:1] != ["repos"] or "/".join(parts[1:3]) != S.repo:
                return self.error(404, "Not Found")
            return self.route(parts[3:], query, body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = handle_any

    def route(self, p, q, body):
        m = self.command
        if p == ["issues"] and m == "GET":
            want = set(filter(None, q.get("labels", [""])[0].split(",")))
            state = q.get("state", ["open"])[0]
            items = [i for _, i in sorted(S.issues.items())
                     if (state == "all" or i["state"] == state)
                     and want <= {lb["name"] for lb in i["labels"]}]
            return self.send_list(items, q)
        if len(p) == 2 and p[0] == "issues" and m == "GET":
            i = S.issues.get(int(p[1]))
            return self.send_etagged(i) if i else self.error(404, "Not Found")
        if len(p) == 2 and p[0] == "issues" and m == "PATCH":
            # as a person edits an issue: state, title, body, and labels
            # (names, replacing the issue's)
            i = S.issues.get(int(p[1]))
            if not i:
                return self.error(404, "Not Found")
            if not isinstance(body, dict):
                return self.error(400, "Problems parsing JSON")
            if body.get("state") not in (None, "open", "closed"):
                return self.error(422, "Validation Failed", [{
                    "resource": "Issue", "field": "state",
                    "code": "invalid"}])
            for k in ("state", "title", "body"):
                if k in body:
                    i[k] = body[k]
            if "labels" in body:
                i["labels"] = [{"name": x} for x in body["labels"]]
            i["updated_at"] = now_iso()
            return self.send(200, i)
        if len(p) == 3 and p[0] == "issues" and p[2] == "comments":
            n = int(p[1])
            if n not in S.issues:
                return self.error(404, "Not Found")
            if m == "GET":
                return self.send_list([c for c in S.comments
                                       if c["issue"] == n], q)
            c = {"id": S.new_id(), "issue": n, "body": body["body"],
                 "user": user("baton"), "created_at": now_iso(),
                 "html_url": "%s/%s/issues/%d#c" % (self.base(), S.repo, n)}
            S.comments.append(c)
            return self.send(201, c)
        if len(p) == 3 and p[0] == "issues" and p[2] == "labels" \
                and m == "POST":
            i = S.issues.get(int(p[1]))
            if not i:
                return self.error(404, "Not Found")
            for name in body.get("labels", []):
                if name not in [lb["name"] for lb in i["labels"]]:
                    i["labels"].append({"name": name})
            return self.send(200, i["labels"])
        if p == ["pulls"] and m == "GET":
            head = q.get("head", [""])[0]
            state = q.get("state", ["open"])[0]
            items = [x for _, x in sorted(S.pulls.items())
                     if (state == "all" or x["state"] == state)
                     and (not head or head ==
                          S.repo.split("/")[0] + ":" + x["head"]["ref"])]
            return self.send_list(items, q)
        if p == ["pulls"] and m == "POST":
            return self.create_pull(body)
        if len(p) == 2 and p[0] == "pulls" and m == "GET":
            x = S.pulls.get(int(p[1]))
            return self.send_etagged(x) if x else self.error(404, "Not Found")
        if len(p) == 3 and p[0] == "pulls" and p[2] == "merge" and m == "PUT":
            x = S.pulls.get(int(p[1]))
            if not x:
                return self.error(404, "Not Found")
            if x["merged"] or x["state"] != "open":
                return self.error(405, "Pull Request is not mergeable")
            x.update(merged=True, state="closed", merged_at=now_iso())
            S.issues[x["number"]]["state"] = "closed"
            return self.send(200, {"sha": x["head"]["sha"], "merged": True,
                                   "message": "Pull Request successfully merged"})
        if len(p) == 3 and p[0] == "pulls" and p[2] in ("reviews", "comments"):
            n = int(p[1])
            src = S.reviews if p[2] == "reviews" else S.review_comments
            return self.send_list([r for r in src if r["pull"] == n], q)
        if len(p) == 3 and p[0] == "commits" and p[2] == "statuses":
            return self.send_list([s for s in S.statuses
                                   if s["sha"] == p[1]], q)
        if len(p) == 3 and p[0] == "commits" and p[2] == "status":
            sts = [s for s in S.statuses if s["sha"] == p[1]]
            states = {s["state"] for s in sts}
            combined = ("failure" if states & {"failure", "error"} else
                        "pending" if "pending" in states or not sts
                        else "success")
            return self.send_etagged({"state": combined, "sha": p[1],
                                      "total_count": len(sts),
                                      "statuses": sts})
        if len(p) == 3 and p[0] == "commits" and p[2] == "check-runs":
            runs = [r for r in S.check_runs if r["head_sha"] == p[1]]
            return self.send_etagged({"total_count": len(runs),
                                      "check_runs": runs})
        return self.error(404, "Not Found")

    def create_pull(self, body):
        if not isinstance(body, dict) or "head" not in body \
                or "base" not in body:
            return self.error(422, "Validation Failed",
                              [{"message": "head and base are required"}])
        owner = S.repo.split("/")[0]
        for x in S.pulls.values():
            if x["state"] == "open" and x["head"]["ref"] == body["head"]:
                return self.error(422, "Validation Failed", [{
                    "message": "A pull request already exists for %s:%s."
                    % (owner, body["head"])}])
        n = S.next_number
        S.next_number += 1
        sha = hashlib.sha1(body["head"].encode()).hexdigest()
        x = {"id": S.new_id(), "number": n, "state": "open",
             "title": body.get("title", ""), "body": body.get("body"),
             "draft": bool(body.get("draft")), "user": user("baton"),
             "labels": [], "merged": False, "mergeable": True,
             "html_url": "%s/%s/pull/%d" % (self.base(), S.repo, n),
             "head": {"ref": body["head"], "sha": sha,
                      "label": owner + ":" + body["head"]},
             "base": {"ref": body["base"], "sha": "0" * 40},
             "created_at": now_iso(), "updated_at": now_iso()}
        S.pulls[n] = x
        S.issues[n] = {"id": x["id"], "number": n, "title": x["title"],
                       "body": x["body"], "state": "open", "labels": [],
                       "user": x["user"], "html_url": x["html_url"],
                       "pull_request": {"url": x["html_url"]}}
        return self.send(201, x)

    # --- control ---------------------------------------------------------
    def control(self, p, b):
        if p == ["requests"]:
            return self.send(200, S.requests)
        verb = p[0] if p else ""
        if verb == "issue":
            n = S.next_number
            S.next_number += 1
            i = {"id": S.new_id(), "number": n, "title": b.get("title", ""),
                 "body": b.get("body"), "state": b.get("state", "open"),
                 "labels": [{"name": x} for x in b.get("labels", [])],
                 "user": user(b.get("user", "octocat")),
                 "html_url": "%s/%s/issues/%d" % (self.base(), S.repo, n),
                 "created_at": now_iso(), "updated_at": now_iso()}
            S.issues[n] = i
            return self.send(201, i)
        if verb == "status":
            b.setdefault("id", S.new_id())
            S.statuses.append(b)
            return self.send(201, b)
        if verb == "check_run":
            r = {"id": S.new_id(), "head_sha": b["sha"], "name": b["name"],
                 "status": b.get("status", "completed"),
                 "conclusion": b.get("conclusion"),
                 "output": b.get("output", {"title": None, "summary": None})}
            S.check_runs.append(r)
            return self.send(201, r)
        if verb == "review":
            r = {"id": S.new_id(), "pull": b["pull"], "state": b["state"],
                 "body": b.get("body", ""),
                 "user": user(b.get("user", "reviewer"))}
            S.reviews.append(r)
            return self.send(201, r)
        if verb == "review_comment":
            r = {"id": S.new_id(), "pull": b["pull"], "path": b["path"],
                 "line": b.get("line"), "body": b["body"],
                 "user": user(b.get("user", "reviewer"))}
            S.review_comments.append(r)
            return self.send(201, r)
        if verb == "fail":
            b.setdefault("count", 1)
            S.fails.append(b)
            return self.send(201, b)
        return self.error(404, "no such control verb: " + verb)


def main():
    global S
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--repo", default="acme/app")
    ap.add_argument("--token", default=os.environ.get("FORGEDOUBLE_TOKEN"),
                    help="the token requests must carry (default: any)")
    a = ap.parse_args()
    S = State(a.repo, a.token)
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    port = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, a.port_file)
    print("http://127.0.0.1:%d" % port, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
