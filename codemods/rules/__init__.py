"""The rule catalogue: every module in this package holds one rule (a ``Rule`` subclass).

Rules are discovered, not listed, so adding a rule is adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from .base import Finding, Invalid, Rule, Valid

__all__ = ["Finding", "Invalid", "Rule", "Valid", "all_rules", "rule_by_code"]


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule, in the order the engine runs them within a pass."""
    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, Rule) and value is not Rule
                    and value.__module__ == module.__name__ and getattr(value, "CODE", None)):
                found.append(value)
    codes = [r.CODE for r in found]
    duplicates = {c for c in codes if codes.count(c) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate rule codes: {sorted(duplicates)}")
    return tuple(sorted(found, key=lambda r: (r.ORDER, r.CODE)))


def rule_by_code(code: str) -> type[Rule] | None:
    return next((r for r in all_rules() if r.CODE == code.upper()), None)
