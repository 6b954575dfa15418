"""Errors of the GitHub side, importable without the optional client library."""

from __future__ import annotations


class GitHubApiError(Exception):
    """A request GitHub refused or never answered; ``status`` is 0 when there was no answer."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status
