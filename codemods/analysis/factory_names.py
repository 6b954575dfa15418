"""The tensor factories' qualified names, without libcst: the project index reads them on a
warm run, which must not pay for importing libcst."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def tensor_factories() -> frozenset[str]:
    """Qualified names of the tensor factories listed in data/tensor_factories.txt."""
    from importlib import resources  # late: a warm run never asks, and this import is not free
    text = resources.files("codemods").joinpath("data/tensor_factories.txt").read_text("utf-8")
    names = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return frozenset(f"torch.{n}" for n in names if n)
