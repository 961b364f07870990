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
  issue        {title, body, labels:[..], state, count} -> the (last) issue;
               count N makes N, titled "TITLE 1".."TITLE N"
  status       {sha, state, context, description, target_url}
  check_run    {sha, name, status, conclusion, output:{title,summary}}
  review       {pull, state, body, user}
  review_comment {pull, path, line, body}
  pull         {number, mergeable, mergeable_state}: as GitHub recomputes
               a pull (a push to its head makes it clean again)
  protect      {message}: merges are refused 405 with message, as a branch
               protection refuses them ({}: lifted)
  fail         {kind: secondary|primary|unauthorized|unprocessable,
                count, retry_after, reset_in, message}
  config       {public_url, etags}: public_url is the base URL clients
               reach the double by (a proxy in front of it, such as Prism
               in tests/lib/forge.sh); the API URLs in bodies and Link
               headers use it. etags false: no ETag and never a 304, as a
               server that ignores conditional requests (benchmarks)
  corrupt      {count, field}: the next count API answers lose field (by
               default the first of id, total_count, sha present), at the
               top or in each item of a list: what no GitHub would answer,
               so that a test can show its validator catches it
  GET /_double/requests -> [{method, path, status}, ...]

Bodies have the fields GitHub's OpenAPI description (@octokit/openapi,
api.github.com.json) requires, with its types: tests/integration/t0075
runs the client through Prism against that description. What the double
keeps for itself (which pull a review belongs to, a status's sha) stays
in its state and out of the API's answers.

With --remote PATH (a bare repository: the remote the double fronts) a
pull request's head must be a branch there, and its head.sha is the
branch's commit, as it is now (a later push moves it, as on GitHub).
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
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
        self.public_url = None  # None: the double's own address
        self.corrupt = []       # queued {count, field}
        self.remote = None      # a bare repository, or None
        self.protected = None   # a branch protection's refusal message
        self.labels = {}        # name -> label object
        self.etags = True       # False: no ETag, no 304 (control config)

    def new_id(self):
        self.next_id += 1
        return self.next_id


S = None


def now_iso():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


WEB = "https://github.com"
DOCS = "https://docs.github.com/rest"
# the fields the double keeps for itself, never in an answer
PRIVATE = ("pull", "issue", "sha")


def user(login, api="https://api.github.com"):
    """A simple-user (GitHub's shape), its id stable per login."""
    uid = int(hashlib.sha1(login.encode()).hexdigest()[:6], 16)
    u = api + "/users/" + login
    return {"login": login, "id": uid, "node_id": "U_%d" % uid,
            "avatar_url": "https://avatars.githubusercontent.com/u/%d" % uid,
            "gravatar_id": "", "url": u, "html_url": WEB + "/" + login,
            "followers_url": u + "/followers",
            "following_url": u + "/following{/other_user}",
            "gists_url": u + "/gists{/gist_id}",
            "starred_url": u + "/starred{/owner}{/repo}",
            "subscriptions_url": u + "/subscriptions",
            "organizations_url": u + "/orgs", "repos_url": u + "/repos",
            "events_url": u + "/events{/privacy}",
            "received_events_url": u + "/received_events",
            "type": "User", "site_admin": False}


def public(obj):
    """obj without the double's own fields (PRIVATE)."""
    if isinstance(obj, list):
        return [public(x) for x in obj]
    if isinstance(obj, dict):
        return {k: v for k, v in obj.items() if k not in PRIVATE}
    return obj


def spoil(obj, field):
    """obj less field (see the control verb corrupt)."""
    def one(o):
        if not isinstance(o, dict):
            return o
        o = dict(o)
        for k in ([field] if field else ["id", "total_count", "sha"]):
            if k in o:
                del o[k]
                break
        return o
    return [one(x) for x in obj] if isinstance(obj, list) else one(obj)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    # --- plumbing --------------------------------------------------------
    def base(self):
        """The base URL of the API as clients reach it."""
        if S.public_url:
            return S.public_url
        return "http://%s:%d" % self.server.server_address[:2]

    def repo_api(self):
        return "%s/repos/%s" % (self.base(), S.repo)

    def label(self, name):
        lb = S.labels.get(name)
        if not lb:
            lid = S.new_id()
            lb = {"id": lid, "node_id": "LA_%d" % lid,
                  "url": "%s/labels/%s" % (self.repo_api(), name),
                  "name": name, "description": None, "color": "ededed",
                  "default": False}
            S.labels[name] = lb
        return lb

    def repository(self):
        """The repository (GitHub's full shape, also a minimal-repository)."""
        owner, name = S.repo.split("/")
        a = self.repo_api()
        r = {"id": 4242, "node_id": "R_4242", "name": name,
             "full_name": S.repo, "owner": user(owner, self.base()),
             "private": False, "html_url": WEB + "/" + S.repo,
             "description": None, "fork": False, "url": a,
             "created_at": "2020-01-01T00:00:00Z",
             "updated_at": "2020-01-01T00:00:00Z",
             "pushed_at": "2020-01-01T00:00:00Z",
             "git_url": "git://github.com/%s.git" % S.repo,
             "ssh_url": "git@github.com:%s.git" % S.repo,
             "clone_url": WEB + "/%s.git" % S.repo,
             "svn_url": WEB + "/" + S.repo, "homepage": None,
             "language": None, "size": 0, "default_branch": "main",
             "forks": 0, "forks_count": 0, "stargazers_count": 0,
             "watchers": 0, "watchers_count": 0, "open_issues": 0,
             "open_issues_count": 0, "has_issues": True,
             "has_projects": True, "has_wiki": True, "has_pages": False,
             "has_downloads": True, "archived": False, "disabled": False,
             "mirror_url": None, "license": None}
        for k, v in (("archive", "/{archive_format}{/ref}"),
                     ("assignees", "/assignees{/user}"),
                     ("blobs", "/git/blobs{/sha}"),
                     ("branches", "/branches{/branch}"),
                     ("collaborators", "/collaborators{/collaborator}"),
                     ("comments", "/comments{/number}"),
                     ("commits", "/commits{/sha}"),
                     ("compare", "/compare/{base}...{head}"),
                     ("contents", "/contents/{+path}"),
                     ("contributors", "/contributors"),
                     ("deployments", "/deployments"),
                     ("downloads", "/downloads"), ("events", "/events"),
                     ("forks", "/forks"),
                     ("git_commits", "/git/commits{/sha}"),
                     ("git_refs", "/git/refs{/sha}"),
                     ("git_tags", "/git/tags{/sha}"), ("hooks", "/hooks"),
                     ("issue_comment", "/issues/comments{/number}"),
                     ("issue_events", "/issues/events{/number}"),
                     ("issues", "/issues{/number}"), ("keys", "/keys{/key_id}"),
                     ("labels", "/labels{/name}"), ("languages", "/languages"),
                     ("merges", "/merges"),
                     ("milestones", "/milestones{/number}"),
                     ("notifications",
                      "/notifications{?since,all,participating}"),
                     ("pulls", "/pulls{/number}"),
                     ("releases", "/releases{/id}"),
                     ("stargazers", "/stargazers"),
                     ("statuses", "/statuses/{sha}"),
                     ("subscribers", "/subscribers"),
                     ("subscription", "/subscription"), ("tags", "/tags"),
                     ("teams", "/teams"), ("trees", "/git/trees{/sha}")):
            r[k + "_url"] = a + v
        return r

    def issue_fields(self, n, title, text, state, labels, login):
        """An issue as GitHub answers it (the issue schema)."""
        a = "%s/issues/%d" % (self.repo_api(), n)
        return {"id": S.new_id(), "node_id": "I_%d" % n, "number": n,
                "url": a, "repository_url": self.repo_api(),
                "labels_url": a + "/labels{/name}",
                "comments_url": a + "/comments", "events_url": a + "/events",
                "html_url": "%s/%s/issues/%d" % (WEB, S.repo, n),
                "title": title, "body": text, "state": state,
                "state_reason": None, "locked": False,
                "labels": [self.label(x) for x in labels],
                "user": user(login, self.base()), "assignee": None,
                "assignees": [], "milestone": None, "comments": 0,
                "author_association": "OWNER",
                "created_at": now_iso(), "updated_at": now_iso(),
                "closed_at": None}

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
        if obj is not None and S.corrupt and \
                not self.path.startswith("/_double/"):
            c = S.corrupt[0]
            c["count"] -= 1
            if c["count"] <= 0:
                S.corrupt.pop(0)
            body = json.dumps(spoil(obj, c.get("field"))).encode()
        self.send_response(status)
        if status != 304:
            # a 304 has no body, and names no type of one (as GitHub's)
            self.send_header("Content-Type",
                             "application/json; charset=utf-8")
        self.send_header("X-RateLimit-Limit", "5000")
        self.send_header("X-RateLimit-Remaining", str(max(S.remaining, 0)))
        self.send_header("X-RateLimit-Reset", str(int(time.time()) + 3600))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
        S.requests.append({"method": self.command, "path": self.path,
                           "status": status})

    def error(self, status, message, errors=None, headers=None):
        obj = {"message": message, "documentation_url": DOCS}
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
        self.send_etagged(public(chunk), headers)

    def send_etagged(self, obj, headers=None):
        if not S.etags:
            # as a server that ignores conditional requests (benchmarks)
            return self.send(200, obj, headers)
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
            self.send(403, {"message": "API rate limit exceeded",
                            "documentation_url": DOCS},
                      {"X-RateLimit-Remaining": "0"})
            S.remaining = 5000
        elif kind == "unauthorized":
            self.error(401, "Bad credentials")
        else:
            self.error(422, "Validation Failed",
                       [{"resource": "Issue", "code": "custom",
                         "message": f.get("message", "invalid")}])
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
            if "state" in body:
                closed = body["state"] == "closed"
                i["closed_at"] = now_iso() if closed else None
                i["state_reason"] = "completed" if closed else None
            if "labels" in body:
                i["labels"] = [self.label(x) for x in body["labels"]]
            i["updated_at"] = now_iso()
            return self.send(200, i)
        if len(p) == 3 and p[0] == "issues" and p[2] == "comments":
            n = int(p[1])
            if n not in S.issues:
                return self.error(404, "Not Found")
            if m == "GET":
                return self.send_list([c for c in S.comments
                                       if c["issue"] == n], q)
            if not isinstance(body, dict) or \
                    not isinstance(body.get("body"), str):
                return self.error(422, "Invalid request.\n\n"
                                  "\"body\" wasn't supplied.")
            cid = S.new_id()
            c = {"id": cid, "node_id": "IC_%d" % cid, "issue": n,
                 "body": body["body"], "user": user("baton", self.base()),
                 "url": "%s/issues/comments/%d" % (self.repo_api(), cid),
                 "issue_url": "%s/issues/%d" % (self.repo_api(), n),
                 "html_url": "%s/%s/issues/%d#issuecomment-%d"
                 % (WEB, S.repo, n, cid),
                 "author_association": "OWNER",
                 "created_at": now_iso(), "updated_at": now_iso()}
            S.comments.append(c)
            S.issues[n]["comments"] += 1
            return self.send(201, public(c))
        if len(p) == 3 and p[0] == "issues" and p[2] == "labels" \
                and m == "POST":
            i = S.issues.get(int(p[1]))
            if not i:
                return self.error(404, "Not Found")
            for name in body.get("labels", []):
                if name not in [lb["name"] for lb in i["labels"]]:
                    i["labels"].append(self.label(name))
            return self.send(200, i["labels"])
        if p == ["pulls"] and m == "GET":
            head = q.get("head", [""])[0]
            state = q.get("state", ["open"])[0]
            items = [x for _, x in sorted(S.pulls.items())
                     if (state == "all" or x["state"] == state)
                     and (not head or head ==
                          S.repo.split("/")[0] + ":" + x["head"]["ref"])]
            for x in items:
                self.refresh_head(x)
            return self.send_list(items, q)
        if p == ["pulls"] and m == "POST":
            return self.create_pull(body)
        if len(p) == 2 and p[0] == "pulls" and m == "GET":
            x = S.pulls.get(int(p[1]))
            if x:
                self.refresh_head(x)
            return self.send_etagged(x) if x else self.error(404, "Not Found")
        if len(p) == 2 and p[0] == "pulls" and m == "PATCH":
            # as a person edits a pull request: its title, body, state
            x = S.pulls.get(int(p[1]))
            if not x:
                return self.error(404, "Not Found")
            if not isinstance(body, dict) or \
                    body.get("state") not in (None, "open", "closed"):
                return self.error(422, "Validation Failed", [{
                    "resource": "PullRequest", "field": "state",
                    "code": "invalid"}])
            if x["merged"] and body.get("state") == "open":
                return self.error(422, "Validation Failed", [{
                    "resource": "PullRequest", "field": "state",
                    "code": "invalid"}])
            for k in ("state", "title", "body"):
                if k in body:
                    x[k] = body[k]
            closed = x["state"] == "closed"
            x["closed_at"] = now_iso() if closed else None
            x["updated_at"] = now_iso()
            i = S.issues[x["number"]]
            i.update(state=x["state"], closed_at=x["closed_at"],
                     state_reason="not_planned" if closed else None)
            self.refresh_head(x)
            return self.send(200, x)
        if len(p) == 3 and p[0] == "pulls" and p[2] == "merge" and m == "PUT":
            x = S.pulls.get(int(p[1]))
            if not x:
                return self.error(404, "Not Found")
            if x["merged"] or x["state"] != "open":
                return self.error(405, "Pull Request is not mergeable")
            if S.protected:
                return self.error(405, S.protected)
            self.refresh_head(x)
            if x["mergeable"] is False:
                return self.error(405, "Pull Request is not mergeable")
            method = (body or {}).get("merge_method", "merge")
            if method not in ("merge", "squash", "rebase"):
                return self.error(422, "Validation Failed", [{
                    "resource": "PullRequest", "field": "merge_method",
                    "code": "invalid"}])
            sha = self.land(x, method)
            if sha is None:
                return self.error(405, "Pull Request is not mergeable")
            x.update(merged=True, state="closed", merged_at=now_iso(),
                     closed_at=now_iso(), updated_at=now_iso(),
                     merge_commit_sha=sha,
                     merged_by=user("baton", self.base()),
                     mergeable=None, mergeable_state="unknown")
            i = S.issues[x["number"]]
            i.update(state="closed", closed_at=now_iso(),
                     state_reason="completed")
            # as GitHub does: "Closes #N" in the body closes issue N
            for n in re.findall(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|"
                                r"resolve[sd]?) #(\d+)", x["body"] or ""):
                j = S.issues.get(int(n))
                if j and j["state"] == "open":
                    j.update(state="closed", closed_at=now_iso(),
                             state_reason="completed")
            return self.send(200, {"sha": sha, "merged": True,
                                   "message": "Pull Request successfully merged"})
        if len(p) == 3 and p[0] == "pulls" and p[2] in ("reviews", "comments"):
            n = int(p[1])
            src = S.reviews if p[2] == "reviews" else S.review_comments
            return self.send_list([r for r in src if r["pull"] == n], q)
        if len(p) == 3 and p[0] == "commits" and p[2] == "statuses":
            return self.send_list([s for s in S.statuses
                                   if s["sha"] == p[1]], q)
        if len(p) == 3 and p[0] == "commits" and p[2] == "status":
            # GitHub's combined status: the latest status per context
            # (S.statuses is newest first: the first of a context wins)
            latest = {}
            for st in S.statuses:
                if st["sha"] == p[1]:
                    latest.setdefault(st["context"], st)
            sts = list(latest.values())
            states = {st["state"] for st in sts}
            combined = ("failure" if states & {"failure", "error"} else
                        "pending" if "pending" in states or not sts
                        else "success")
            simple = [{k: v for k, v in public(st).items()
                       if k != "creator"} for st in sts]
            return self.send_etagged({
                "state": combined, "sha": p[1], "total_count": len(sts),
                "statuses": simple, "repository": self.repository(),
                "commit_url": "%s/commits/%s" % (self.repo_api(), p[1]),
                "url": "%s/commits/%s/status" % (self.repo_api(), p[1])})
        if len(p) == 3 and p[0] == "commits" and p[2] == "check-runs":
            runs = [r for r in S.check_runs if r["head_sha"] == p[1]]
            return self.send_etagged({"total_count": len(runs),
                                      "check_runs": runs})
        return self.error(404, "Not Found")

    def remote_sha(self, branch):
        """The commit of branch on --remote, or None."""
        if not S.remote:
            return None
        r = subprocess.run(["git", "--git-dir", S.remote, "rev-parse",
                            "--verify", "--quiet",
                            "refs/heads/%s^{commit}" % branch],
                           capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    def land(self, x, method):
        """Merges the pull in --remote (its base branch moves) and gives
        the new base commit; None when it conflicts. Without --remote
        the head stands for the merge."""
        if not S.remote:
            return x["head"]["sha"]

        def git(*args):
            r = subprocess.run(["git", "--git-dir", S.remote] + list(args),
                               capture_output=True, text=True,
                               env=dict(os.environ, GIT_AUTHOR_NAME="GitHub",
                                        GIT_AUTHOR_EMAIL="noreply@github.com",
                                        GIT_COMMITTER_NAME="GitHub",
                                        GIT_COMMITTER_EMAIL="noreply@github.com"))
            return r.stdout.strip() if r.returncode == 0 else None
        base_ref = "refs/heads/" + x["base"]["ref"]
        base, head = git("rev-parse", base_ref), x["head"]["sha"]
        tree = base and git("merge-tree", "--write-tree", base, head)
        if not tree:
            return None
        msg = "%s (#%d)" % (x["title"], x["number"])
        parents = ["-p", base] if method != "merge" else \
            ["-p", base, "-p", head]
        commit = git("commit-tree", tree.split()[0], *parents, "-m", msg)
        if not commit or git("update-ref", base_ref, commit, base) is None:
            return None
        x["base"]["sha"] = commit
        return commit

    def refresh_head(self, x):
        """A push to the head branch moves the pull's head.sha."""
        sha = self.remote_sha(x["head"]["ref"])
        if sha and sha != x["head"]["sha"]:
            x["head"]["sha"] = sha
            # GitHub computes mergeability afresh for a new head
            x["mergeable"], x["mergeable_state"] = True, "clean"
            x["updated_at"] = now_iso()

    def create_pull(self, body):
        if not isinstance(body, dict) or "head" not in body \
                or "base" not in body:
            return self.error(422, "Validation Failed", [{
                "resource": "PullRequest", "code": "missing_field",
                "field": "head" if not isinstance(body, dict) or
                "head" not in body else "base",
                "message": "head and base are required"}])
        owner = S.repo.split("/")[0]
        head = body["head"].split(":", 1)[-1]
        for x in S.pulls.values():
            if x["state"] == "open" and x["head"]["ref"] == head:
                return self.error(422, "Validation Failed", [{
                    "resource": "PullRequest", "code": "custom",
                    "message": "A pull request already exists for %s:%s."
                    % (owner, head)}])
        sha = hashlib.sha1(head.encode()).hexdigest()
        base_sha = "0" * 40
        if S.remote:
            sha = self.remote_sha(head)
            base_sha = self.remote_sha(body["base"])
            for field, v in (("head", sha), ("base", base_sha)):
                if not v:
                    return self.error(422, "Validation Failed", [{
                        "resource": "PullRequest", "field": field,
                        "code": "invalid"}])
        n = S.next_number
        S.next_number += 1
        a = self.repo_api()
        pa = "%s/pulls/%d" % (a, n)
        ia = "%s/issues/%d" % (a, n)
        html = "%s/%s/pull/%d" % (WEB, S.repo, n)
        me = user("baton", self.base())
        repo = self.repository()

        def ref(name, commit):
            return {"label": owner + ":" + name, "ref": name, "sha": commit,
                    "user": user(owner, self.base()), "repo": repo}
        x = {"id": S.new_id(), "node_id": "PR_%d" % n, "number": n,
             "url": pa, "html_url": html, "diff_url": html + ".diff",
             "patch_url": html + ".patch", "issue_url": ia,
             "commits_url": pa + "/commits",
             "review_comments_url": pa + "/comments",
             "review_comment_url": a + "/pulls/comments{/number}",
             "comments_url": ia + "/comments",
             "statuses_url": "%s/statuses/%s" % (a, sha),
             "state": "open", "locked": False,
             "title": body.get("title", ""), "body": body.get("body"),
             "draft": bool(body.get("draft")), "user": me,
             "labels": [], "milestone": None, "assignee": None,
             "assignees": [], "requested_reviewers": [],
             "requested_teams": [], "author_association": "OWNER",
             "auto_merge": None, "active_lock_reason": None,
             "merged": False, "mergeable": True, "rebaseable": True,
             "mergeable_state": "clean", "merged_by": None,
             "merge_commit_sha": None, "merged_at": None,
             "closed_at": None, "comments": 0, "review_comments": 0,
             "maintainer_can_modify": False, "commits": 1, "additions": 0,
             "deletions": 0, "changed_files": 0,
             "head": ref(head, sha), "base": ref(body["base"], base_sha),
             "_links": {k: {"href": v} for k, v in (
                 ("self", pa), ("html", html), ("issue", ia),
                 ("comments", ia + "/comments"),
                 ("review_comments", pa + "/comments"),
                 ("review_comment", a + "/pulls/comments{/number}"),
                 ("commits", pa + "/commits"),
                 ("statuses", "%s/statuses/%s" % (a, sha)))},
             "created_at": now_iso(), "updated_at": now_iso()}
        S.pulls[n] = x
        i = self.issue_fields(n, x["title"], x["body"], "open", [], "baton")
        i["id"] = x["id"]
        i["pull_request"] = {"url": pa, "html_url": html,
                             "diff_url": x["diff_url"],
                             "patch_url": x["patch_url"], "merged_at": None}
        S.issues[n] = i
        return self.send(201, x)

    # --- control ---------------------------------------------------------
    def control(self, p, b):
        if p == ["requests"]:
            return self.send(200, S.requests)
        verb = p[0] if p else ""
        b = b if isinstance(b, dict) else {}
        if verb == "issue":
            # count N (benchmarks): N issues at once, titled "TITLE k"
            count = int(b.get("count", 1))
            for k in range(1, count + 1):
                n = S.next_number
                S.next_number += 1
                title = b.get("title", "")
                if "count" in b:
                    title = "%s %d" % (title, k)
                i = self.issue_fields(n, title, b.get("body"),
                                      b.get("state", "open"),
                                      b.get("labels", []),
                                      b.get("user", "octocat"))
                if i["state"] == "closed":
                    i["closed_at"] = now_iso()
                S.issues[n] = i
            return self.send(201, i)
        if verb == "status":
            sid = b.get("id") or S.new_id()
            st = dict(b)
            st.update({
                "id": sid, "node_id": "SC_%d" % sid,
                "url": "%s/statuses/%s" % (self.repo_api(), b["sha"]),
                "avatar_url": None, "state": b.get("state", "pending"),
                "description": b.get("description"),
                "target_url": b.get("target_url"),
                "context": b.get("context", "default"),
                "created_at": now_iso(), "updated_at": now_iso(),
                "creator": user(b.get("user", "ci"), self.base())})
            # GitHub lists a commit's statuses newest first
            S.statuses.insert(0, st)
            return self.send(201, st)
        if verb == "check_run":
            rid = S.new_id()
            out = b.get("output") or {}
            status = b.get("status", "completed")
            r = {"id": rid, "node_id": "CR_%d" % rid, "head_sha": b["sha"],
                 "name": b["name"], "external_id": None,
                 "url": "%s/check-runs/%d" % (self.repo_api(), rid),
                 "html_url": "%s/%s/runs/%d" % (WEB, S.repo, rid),
                 "details_url": b.get("details_url"),
                 "status": status,
                 "conclusion": b.get("conclusion"),
                 "started_at": now_iso(),
                 "completed_at": now_iso() if status == "completed"
                 else None,
                 "output": {"title": out.get("title"),
                            "summary": out.get("summary"),
                            "text": out.get("text"),
                            "annotations_count": 0,
                            "annotations_url": "%s/check-runs/%d/annotations"
                            % (self.repo_api(), rid)},
                 "check_suite": {"id": rid + 1},
                 "app": None, "pull_requests": []}
            S.check_runs.append(r)
            return self.send(201, r)
        if verb == "review":
            rid = S.new_id()
            pa = "%s/pulls/%d" % (self.repo_api(), b["pull"])
            html = "%s/%s/pull/%d#pullrequestreview-%d" % (
                WEB, S.repo, b["pull"], rid)
            x = S.pulls.get(b["pull"])
            r = {"id": rid, "node_id": "PRR_%d" % rid, "pull": b["pull"],
                 "state": b["state"], "body": b.get("body", ""),
                 "user": user(b.get("user", "reviewer"), self.base()),
                 "commit_id": x["head"]["sha"] if x else None,
                 "html_url": html, "pull_request_url": pa,
                 "author_association": "COLLABORATOR",
                 "submitted_at": now_iso(),
                 "_links": {"html": {"href": html},
                            "pull_request": {"href": pa}}}
            S.reviews.append(r)
            return self.send(201, r)
        if verb == "review_comment":
            cid = S.new_id()
            pa = "%s/pulls/%d" % (self.repo_api(), b["pull"])
            url = "%s/pulls/comments/%d" % (self.repo_api(), cid)
            html = "%s/%s/pull/%d#discussion_r%d" % (
                WEB, S.repo, b["pull"], cid)
            x = S.pulls.get(b["pull"])
            sha = x["head"]["sha"] if x else "0" * 40
            r = {"id": cid, "node_id": "PRRC_%d" % cid, "pull": b["pull"],
                 "path": b["path"], "line": b.get("line"),
                 "original_line": b.get("line"), "side": "RIGHT",
                 "body": b["body"], "url": url,
                 "pull_request_review_id": b.get("review"),
                 "diff_hunk": b.get("diff_hunk", "@@ -1 +1 @@"),
                 "commit_id": sha, "original_commit_id": sha,
                 "user": user(b.get("user", "reviewer"), self.base()),
                 "created_at": now_iso(), "updated_at": now_iso(),
                 "html_url": html, "pull_request_url": pa,
                 "author_association": "COLLABORATOR",
                 "_links": {"self": {"href": url}, "html": {"href": html},
                            "pull_request": {"href": pa}}}
            S.review_comments.append(r)
            return self.send(201, r)
        if verb == "protect":
            S.protected = b.get("message")
            return self.send(200, {"message": S.protected})
        if verb == "pull":
            # as GitHub recomputes a pull: mergeable, mergeable_state
            x = S.pulls.get(b.get("number"))
            if not x:
                return self.error(404, "Not Found")
            for k in ("mergeable", "mergeable_state"):
                if k in b:
                    x[k] = b[k]
            return self.send(200, x)
        if verb == "fail":
            b.setdefault("count", 1)
            S.fails.append(b)
            return self.send(201, b)
        if verb == "config":
            if "public_url" in b:
                S.public_url = (b["public_url"] or "").rstrip("/") or None
            if "etags" in b:
                S.etags = bool(b["etags"])
            return self.send(200, {"public_url": S.public_url,
                                   "etags": S.etags})
        if verb == "corrupt":
            b.setdefault("count", 1)
            S.corrupt.append(b)
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
    ap.add_argument("--remote", help="the bare repository the double fronts")
    a = ap.parse_args()
    S = State(a.repo, a.token)
    if a.remote:
        S.remote = os.path.abspath(a.remote)
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
