"""Which pull request to review: from the GitHub Actions environment, overridden by flags.

In a workflow GitHub sets GITHUB_EVENT_PATH (the event's JSON, with the PR number and its base
and head commits), GITHUB_REPOSITORY (owner/name), GITHUB_API_URL (an Enterprise server's API
on GHES) and, when the workflow passes it, GITHUB_TOKEN. Outside Actions the flags say the same.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Mapping

DEFAULT_API_URL = "https://api.github.com"


class EventError(Exception):
    """The pull request cannot be identified; the message says which input is missing."""


@dataclass
class Target:
    api_url: str
    owner: str
    repo: str
    token: str | None
    number: int | None = None
    base: str | None = None  # commit (or ref) the PR merges into
    head: str | None = None  # the PR's head commit
    base_ref: str | None = None  # branch name of the base, for the fix PR

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"


def read_target(env: Mapping[str, str], repo: str | None = None, pr: int | None = None,
                base: str | None = None, head: str | None = None) -> Target:
    event = _read_event(env.get("GITHUB_EVENT_PATH"))
    pull = event.get("pull_request") or {}
    full_name = repo or env.get("GITHUB_REPOSITORY") or (event.get("repository") or {}).get("full_name")
    if not full_name or full_name.count("/") != 1 or not all(full_name.split("/")):
        raise EventError("which repository? pass --repo OWNER/NAME (in GitHub Actions GITHUB_REPOSITORY says it)")
    owner, name = full_name.split("/")
    number = pr if pr is not None else pull.get("number") or event.get("number")
    target = Target(api_url=(env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"), owner=owner, repo=name,
                    token=env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or None,
                    number=int(number) if number is not None else None,
                    base=base or (pull.get("base") or {}).get("sha"),
                    head=head or (pull.get("head") or {}).get("sha"),
                    base_ref=(pull.get("base") or {}).get("ref") or env.get("GITHUB_BASE_REF")
                    or env.get("GITHUB_REF_NAME") or None)
    return target


def _read_event(path: str | None) -> dict:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise EventError(f"cannot read the event file GITHUB_EVENT_PATH={path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise EventError(f"the event file {path} is not JSON ({exc.msg}, line {exc.lineno})") from exc
    return data if isinstance(data, dict) else {}


def environment() -> Mapping[str, str]:
    return os.environ
