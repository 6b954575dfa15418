"""The few GitHub REST calls the bot makes, through githubkit (the ``review`` extra).

githubkit validates every request body against its models of GitHub's API before sending,
and retries through a decision function: here server errors (5xx) and connection failures
are retried with exponential backoff, a rate limit is waited out when the wait is short, and
anything else becomes a GitHubApiError whose message says what to do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

try:
    from githubkit import GitHub
    from githubkit.exception import GitHubException, RateLimitExceeded, RequestError, RequestFailed, \
        RequestTimeout
    from githubkit.retry import RetryOption
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("`devmod review` needs the GitHub client: pip install 'devmod[review]'") from exc

from .errors import GitHubApiError


@dataclass
class RetryPolicy:
    """How often and how long to retry; tests shrink ``backoff`` to keep them fast."""

    retries: int = 3
    backoff: float = 1.0  # seconds before the first retry, doubling; below 1 it also shortens rate-limit waits
    max_rate_limit_wait: float = 60.0

    def __call__(self, exc: GitHubException, count: int) -> RetryOption:
        if count >= self.retries:
            return RetryOption(False)
        if isinstance(exc, RateLimitExceeded):
            wait = exc.retry_after.total_seconds()
            if wait <= self.max_rate_limit_wait:
                return RetryOption(True, timedelta(seconds=max(wait, 0) * min(1.0, self.backoff)))
            return RetryOption(False)
        if isinstance(exc, RequestFailed) and exc.response.status_code >= 500:
            return RetryOption(True, timedelta(seconds=self.backoff * 2 ** count))
        if isinstance(exc, RequestError) and not isinstance(exc, RequestFailed):  # connection failed, timeout
            return RetryOption(True, timedelta(seconds=self.backoff * 2 ** count))
        return RetryOption(False)


class Client:
    """One repository on one GitHub (github.com or an Enterprise server's API URL)."""

    def __init__(self, token: str, api_url: str, owner: str, repo: str,
                 retry: RetryPolicy | None = None, timeout: float = 30.0) -> None:
        self.owner, self.repo = owner, repo
        self.retry = retry or RetryPolicy()
        self.github = GitHub(token, base_url=api_url.rstrip("/") + "/", auto_retry=self.retry, http_cache=False,
                             timeout=timeout, user_agent="devmod-review")
        self.requests = 0

    # -- pull request review ------------------------------------------------------------------
    def pull(self, number: int) -> dict:
        return self._call("read the pull request", self.github.rest.pulls.get, pull_number=number)

    def review_comments(self, number: int) -> list[dict]:
        return self._pages("list the review comments", self.github.rest.pulls.list_review_comments,
                           pull_number=number)

    def reviews(self, number: int) -> list[dict]:
        return self._pages("list the reviews", self.github.rest.pulls.list_reviews, pull_number=number)

    def create_review(self, number: int, body: dict) -> dict:
        return self._call("post the review", self.github.rest.pulls.create_review, pull_number=number, data=body)

    def delete_pending_review(self, number: int, review_id: int) -> None:
        self._call("delete a pending review", self.github.rest.pulls.delete_pending_review,
                   pull_number=number, review_id=review_id)

    # -- fix pull request ---------------------------------------------------------------------
    def create_blob(self, content_b64: str) -> str:
        return self._call("upload a file", self.github.rest.git.create_blob,
                          data={"content": content_b64, "encoding": "base64"})["sha"]

    def create_tree(self, base_tree: str, entries: list[dict]) -> str:
        return self._call("create the tree", self.github.rest.git.create_tree,
                          data={"base_tree": base_tree, "tree": entries})["sha"]

    def create_commit(self, message: str, tree: str, parent: str) -> str:
        return self._call("create the commit", self.github.rest.git.create_commit,
                          data={"message": message, "tree": tree, "parents": [parent]})["sha"]

    def set_branch(self, branch: str, sha: str) -> None:
        """Point ``branch`` at ``sha``, creating it or force-moving it."""
        try:
            self._call("create the branch", self.github.rest.git.create_ref,
                       data={"ref": f"refs/heads/{branch}", "sha": sha})
        except GitHubApiError as exc:
            if exc.status != 422:  # 422: the branch exists already
                raise
            self._call("update the branch", self.github.rest.git.update_ref, ref=f"heads/{branch}",
                       data={"sha": sha, "force": True})

    def open_pull_for(self, branch: str) -> dict | None:
        found = self._call("look for an open pull request", self.github.rest.pulls.list,
                           state="open", head=f"{self.owner}:{branch}")
        return found[0] if found else None

    def create_pull(self, title: str, head: str, base: str, body: str) -> dict:
        return self._call("open the pull request", self.github.rest.pulls.create,
                          data={"title": title, "head": head, "base": base, "body": body})

    def update_pull(self, number: int, title: str, body: str) -> dict:
        return self._call("update the pull request", self.github.rest.pulls.update, pull_number=number,
                          data={"title": title, "body": body})

    # -- plumbing -------------------------------------------------------------------------------
    def _pages(self, what: str, method: Callable, **kwargs: Any) -> list[dict]:
        items: list[dict] = []
        for page in range(1, 101):
            batch = self._call(what, method, per_page=100, page=page, **kwargs)
            items.extend(batch)
            if len(batch) < 100:
                break
        return items

    def _call(self, what: str, method: Callable, **kwargs: Any) -> Any:
        self.requests += 1
        try:
            response = method(self.owner, self.repo, **kwargs)
        except RateLimitExceeded as exc:
            reset = exc.response.headers.get("x-ratelimit-reset")
            when = time.strftime("%H:%M:%S UTC", time.gmtime(int(reset))) if reset and reset.isdigit() else \
                f"in {int(exc.retry_after.total_seconds())} s"
            raise GitHubApiError(f"could not {what}: GitHub's rate limit is exhausted until {when}; "
                                 "re-run the job then", exc.response.status_code) from None
        except RequestFailed as exc:
            raise GitHubApiError(_failure(what, exc), exc.response.status_code) from None
        except RequestTimeout:
            raise GitHubApiError(f"could not {what}: GitHub did not answer in time "
                                 f"({self.retry.retries} retries)") from None
        except RequestError as exc:
            raise GitHubApiError(f"could not {what}: cannot reach GitHub ({exc.exc}) after "
                                 f"{self.retry.retries} retries") from None
        return response.json() if response.content else {}


def _failure(what: str, exc: RequestFailed) -> str:
    status = exc.response.status_code
    try:
        data = exc.response.json()
        detail = data.get("message", "")
        errors = data.get("errors") or []
        if errors:
            detail += ": " + "; ".join(e if isinstance(e, str) else e.get("message") or str(e) for e in errors)
    except Exception:  # not JSON: an HTML error page from a proxy
        detail = exc.response.raw_response.text[:200]
    text = f"could not {what}: GitHub answered {status} ({detail.strip() or 'no detail'})"
    if status == 401:
        text += "; the token is invalid or expired"
    elif status == 403:
        text += ("; the token may not write to pull requests: give the workflow `permissions: "
                 "pull-requests: write` (a PR from a fork gets a read-only token)")
    elif status == 404:
        text += "; check --repo/--pr and that the token can see the repository"
    elif status >= 500:
        text += " after retries; GitHub may be having an outage"
    return text
