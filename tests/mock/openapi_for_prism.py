#!/usr/bin/env python3
"""openapi_for_prism: GitHub's OpenAPI description, made checkable by Prism.

Usage: openapi_for_prism.py IN.json OUT.json

GitHub's description (@octokit/openapi, OpenAPI 3.0.3) marks some schemas
`nullable: true` without a `type` (beside a oneOf, anyOf or allOf, or
alone). Prism compiles each schema with Ajv, which refuses such a schema
("nullable" cannot be used without "type"); Prism then drops the check
without a word and lets any response through. This rewrites only those
schemas, into what they mean:

  {nullable: true, oneOf: [...]}  ->  {anyOf: [{oneOf: [...]}, {type: null}]}
  {nullable: true}                ->  {}   (any value, null included)

Nothing else changes. OUT is written through a rename.
"""
import json
import os
import sys
import tempfile

COMBINERS = ("oneOf", "anyOf", "allOf")
KEEP = ("description", "title", "readOnly", "writeOnly", "deprecated")


def fix(o, counts):
    if isinstance(o, list):
        return [fix(v, counts) for v in o]
    if not isinstance(o, dict):
        return o
    o = {k: fix(v, counts) for k, v in o.items()}
    if o.get("nullable") is True and "type" not in o and "$ref" not in o:
        del o["nullable"]
        if any(k in o for k in COMBINERS):
            inner = {k: v for k, v in o.items() if k not in KEEP}
            outer = {k: v for k, v in o.items() if k in KEEP}
            outer["anyOf"] = [inner, {"type": "null"}]
            o = outer
            counts["wrapped"] += 1
        else:
            counts["dropped"] += 1
    return o


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: openapi_for_prism.py IN.json OUT.json")
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    counts = {"wrapped": 0, "dropped": 0}
    doc = fix(doc, counts)
    # a temporary name of its own: two tests may make OUT at once
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(
        sys.argv[2])), prefix=".openapi-")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    os.chmod(tmp, 0o644)
    os.rename(tmp, sys.argv[2])
    print("openapi_for_prism: %d nullable schemas wrapped in anyOf, "
          "%d bare ones dropped" % (counts["wrapped"], counts["dropped"]))


if __name__ == "__main__":
    main()
