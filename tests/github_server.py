"""A small stand-in for GitHub's REST API on 127.0.0.1, for the PR bot's tests.

It serves only the endpoints `devmod review` uses and checks every request body against
githubkit's own pydantic models of GitHub's API (strict: no coercion, no unknown keys), plus
the review-comment rules GitHub enforces (side RIGHT/LEFT, start_line before line, lines in
the diff when the test says which lines are). Faults (5xx, 422, 403, rate limits) are queued
by the tests.
"""

from __future__ import annotations

import json
import re
import threading
import warnings
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from githubkit_schemas.latest import models as gh
    from pydantic import BaseModel

REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
# (method, path regex, githubkit model of the request body, handler name)
ROUTES = [
    ("GET", REPO + r"/pulls/(?P<number>\d+)$", None, "get_pull"),
    ("GET", REPO + r"/pulls/(?P<number>\d+)/comments$", None, "list_comments"),
    ("GET", REPO + r"/pulls/(?P<number>\d+)/reviews$", None, "list_reviews"),
    ("POST", REPO + r"/pulls/(?P<number>\d+)/reviews$", gh.ReposOwnerRepoPullsPullNumberReviewsPostBody,
     "create_review"),
    ("DELETE", REPO + r"/pulls/(?P<number>\d+)/reviews/(?P<review>\d+)$", None, "delete_review"),
    ("POST", REPO + r"/git/blobs$", gh.ReposOwnerRepoGitBlobsPostBody, "create_blob"),
    ("POST", REPO + r"/git/trees$", gh.ReposOwnerRepoGitTreesPostBody, "create_tree"),
    ("POST", REPO + r"/git/commits$", gh.ReposOwnerRepoGitCommitsPostBody, "create_commit"),
    ("POST", REPO + r"/git/refs$", gh.ReposOwnerRepoGitRefsPostBody, "create_ref"),
    ("PATCH", REPO + r"/git/refs/(?P<ref>.+)$", gh.ReposOwnerRepoGitRefsRefPatchBody, "update_ref"),
    ("GET", REPO + r"/pulls$", None, "list_pulls"),
    ("POST", REPO + r"/pulls$", gh.ReposOwnerRepoPullsPostBody, "create_pull"),
    ("PATCH", REPO + r"/pulls/(?P<number>\d+)$", gh.ReposOwnerRepoPullsPullNumberPatchBody, "update_pull"),
]


def validate(model: type[BaseModel], data: Any) -> list[str]:
    """Problems with ``data`` as a ``model``: pydantic strict validation plus unknown keys."""
    problems = []
    try:
        model.model_validate(data, strict=True)
    except Exception as exc:  # pydantic.ValidationError: the message lists every field
        problems.append(str(exc))
    problems += _unknown_keys(model, data, model.__name__)
    return problems


def _unknown_keys(model: type[BaseModel], data: Any, where: str) -> list[str]:
    if not isinstance(data, dict):
        return []
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    problems = [f"{where}: unknown key {key!r}" for key in data if key not in fields]
    for key, value in data.items():
        if key not in fields:
            continue
        for sub in _models_in(fields[key].annotation):
            items = value if isinstance(value, list) else [value]
            for item in items:
                problems += _unknown_keys(sub, item, f"{where}.{key}")
    return problems


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]


@dataclass
class Fault:
    method: str
    path: str  # regex searched in the request path
    status: int
    times: int = 1
    headers: dict = field(default_factory=dict)
    body: dict = field(default_factory=lambda: {"message": "Server Error"})


class FakeGitHub:
    def __init__(self, token: str = "test-token", prefix: str = "") -> None:
        self.token, self.prefix = token, prefix
        self.requests: list[tuple[str, str, Any]] = []  # method, path, parsed body
        self.invalid: list[str] = []  # every body or rule violation seen
        self.faults: list[Fault] = []
        self.reviews: list[dict] = []
        self.comments: list[dict] = []
        self.pulls: dict[int, dict] = {}
        self.blobs: dict[str, bytes] = {}
        self.trees: dict[str, list] = {}
        self.commits: dict[str, dict] = {}
        self.refs: dict[str, str] = {}
        self.diff_lines: dict[str, set[int]] | None = None  # path -> lines GitHub accepts comments on
        self.refuse_lines: set[tuple[str, int]] = set()  # (path, line): 422 although in the diff
        self._ids = 100
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.prefix}"

    def start(self) -> "FakeGitHub":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def posted_reviews(self) -> list[dict]:
        """Bodies of the POST .../reviews requests that created a submitted review."""
        return [r["request"] for r in self.reviews if r["state"] != "PENDING"]

    # -- handlers -------------------------------------------------------------------------------
    def get_pull(self, m, body, query):
        pull = self.pulls.get(int(m["number"]))
        return (200, pull) if pull else (404, {"message": "Not Found"})

    def list_comments(self, m, body, query):
        mine = [c for c in self.comments if c["pull"] == int(m["number"])]
        return 200, _page(mine, query)

    def list_reviews(self, m, body, query):
        mine = [{k: v for k, v in r.items() if k != "request"} for r in self.reviews
                if r["pull"] == int(m["number"])]
        return 200, _page(mine, query)

    def create_review(self, m, body, query):
        number = int(m["number"])
        if number not in self.pulls:
            return 404, {"message": "Not Found"}
        for comment in body.get("comments", []):
            problem = self._comment_problem(comment)
            if problem:
                return 422, {"message": "Unprocessable Entity", "errors": [problem]}
        if "event" not in body and any(r["state"] == "PENDING" for r in self.reviews if r["pull"] == number):
            return 422, {"message": "Unprocessable Entity", "errors": ["User can only have one pending review per pull request"]}
        review_id = self.next_id()
        state = {"COMMENT": "COMMENTED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "APPROVE": "APPROVED"}.get(
            body.get("event"), "PENDING")
        review = {"id": review_id, "pull": number, "state": state, "body": body.get("body", ""),
                  "commit_id": body.get("commit_id"), "request": body,
                  "html_url": f"https://github.test/{m['owner']}/{m['repo']}/pull/{number}#pullrequestreview-{review_id}"}
        self.reviews.append(review)
        for comment in body.get("comments", []):
            self.comments.append({"id": self.next_id(), "pull": number, "pull_request_review_id": review_id,
                                  **comment})
        return 200, {k: v for k, v in review.items() if k != "request"}

    def _comment_problem(self, comment: dict) -> str | None:
        for key in ("side", "start_side"):
            if key in comment and comment[key] not in ("LEFT", "RIGHT"):
                self.invalid.append(f"comment {key} {comment[key]!r}")
        if "start_line" in comment and not comment["start_line"] < comment["line"]:
            self.invalid.append(f"start_line {comment['start_line']} not before line {comment['line']}")
        lines = range(comment.get("start_line", comment["line"]), comment["line"] + 1)
        if any((comment["path"], line) in self.refuse_lines for line in lines):
            return "Line could not be resolved"
        if self.diff_lines is not None:
            allowed = self.diff_lines.get(comment["path"], set())
            if not all(line in allowed for line in lines):
                return "pull_request_review_thread.line must be part of the diff"
        return None

    def delete_review(self, m, body, query):
        review_id = int(m["review"])
        found = [r for r in self.reviews if r["id"] == review_id]
        if not found or found[0]["state"] != "PENDING":
            return 422, {"message": "Can not delete a non-pending pull request review"}
        self.reviews.remove(found[0])
        self.comments = [c for c in self.comments if c["pull_request_review_id"] != review_id]
        return 200, {"id": review_id}

    def create_blob(self, m, body, query):
        import base64
        import hashlib
        data = base64.b64decode(body["content"])
        sha = hashlib.sha1(data).hexdigest()
        self.blobs[sha] = data
        return 201, {"sha": sha, "url": ""}

    def create_tree(self, m, body, query):
        sha = f"{self.next_id():040x}"
        self.trees[sha] = body["tree"]
        return 201, {"sha": sha}

    def create_commit(self, m, body, query):
        sha = f"{self.next_id():040x}"
        self.commits[sha] = body
        return 201, {"sha": sha}

    def create_ref(self, m, body, query):
        if body["ref"] in self.refs:
            return 422, {"message": "Reference already exists"}
        self.refs[body["ref"]] = body["sha"]
        return 201, {"ref": body["ref"], "object": {"sha": body["sha"]}}

    def update_ref(self, m, body, query):
        ref = "refs/" + m["ref"]
        if ref not in self.refs:
            return 422, {"message": "Reference does not exist"}
        self.refs[ref] = body["sha"]
        return 200, {"ref": ref, "object": {"sha": body["sha"]}}

    def list_pulls(self, m, body, query):
        head = query.get("head", "")
        branch = head.split(":", 1)[-1]
        found = [p for p in self.pulls.values() if p.get("head", {}).get("ref") == branch and p.get("state") == "open"]
        return 200, found

    def create_pull(self, m, body, query):
        number = max(self.pulls, default=0) + 1
        self.pulls[number] = {"number": number, "state": "open", "title": body["title"], "body": body.get("body"),
                              "head": {"ref": body["head"]}, "base": {"ref": body["base"]},
                              "html_url": f"https://github.test/{m['owner']}/{m['repo']}/pull/{number}"}
        return 201, self.pulls[number]

    def update_pull(self, m, body, query):
        pull = self.pulls[int(m["number"])]
        pull.update({k: body[k] for k in ("title", "body") if k in body})
        return 200, pull

    # -- HTTP -----------------------------------------------------------------------------------
    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _serve(self, method: str) -> None:
                from urllib.parse import parse_qsl, urlsplit
                parts = urlsplit(self.path)
                path, query = parts.path, dict(parse_qsl(parts.query))
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with fake._lock:
                    fake.requests.append((method, path, body))
                    status, payload, headers = fake._dispatch(method, path, body, query, self.headers)
                data = json.dumps(payload).encode() if payload is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def do_PATCH(self):
                self._serve("PATCH")

            def do_DELETE(self):
                self._serve("DELETE")

        return Handler

    def _dispatch(self, method, path, body, query, headers):
        auth = headers.get("Authorization", "")
        if auth not in (f"token {self.token}", f"Bearer {self.token}"):
            return 401, {"message": "Bad credentials"}, {}
        if not path.startswith(self.prefix + "/"):
            return 404, {"message": "Not Found"}, {}
        path = path[len(self.prefix):]
        for fault in self.faults:
            if fault.method == method and re.search(fault.path, path) and fault.times > 0:
                fault.times -= 1
                return fault.status, fault.body, fault.headers
        for route_method, pattern, model, name in ROUTES:
            match = re.match(pattern, path)
            if route_method != method or not match:
                continue
            if model is not None:
                problems = validate(model, body)
                if problems:
                    self.invalid.extend(f"{method} {path}: {p}" for p in problems)
                    return 422, {"message": "Invalid request", "errors": problems}, {}
            status, payload = getattr(self, name)(match.groupdict(), body, query)
            return status, payload, {}
        self.invalid.append(f"unexpected request {method} {path}")
        return 404, {"message": "Not Found"}, {}


def _page(items: list, query: dict) -> list:
    per_page, page = int(query.get("per_page", 30)), int(query.get("page", 1))
    return items[(page - 1) * per_page:page * per_page]
