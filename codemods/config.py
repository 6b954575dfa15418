"""Settings for a run: command-line flags over ``[tool.devmod]`` in pyproject.toml."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from typing import Any, Iterable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEVICE_STYLES = ("cuda", "cuda-mps", "accelerator")
_KEYS = {"select", "ignore", "exclude", "unsafe-fixes", "device-name", "device-style"}


class ConfigError(Exception):
    """A user mistake in flags or pyproject.toml; reported without a traceback (exit 2)."""


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()  # globs relative to the folder of `source` (or names)
    unsafe_fixes: bool = False
    device_name: str = "device"
    device_style: str = "cuda"
    source: str | None = None  # the pyproject.toml the settings came from

    def enabled(self, code: str) -> bool:
        """A code runs when selected (no select: all) and not ignored by a more specific prefix."""
        def best(prefixes: Iterable[str]) -> int:
            return max((len(p) for p in prefixes if code.startswith(p)), default=-1)
        selected = best(self.select) if self.select else 0
        ignored = best(self.ignore)
        return selected >= 0 and (ignored < 0 or selected > ignored)

    def with_overrides(self, **overrides: Any) -> "Config":
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def find_pyproject(paths: Iterable[str]) -> str | None:
    """The nearest pyproject.toml with a [tool.devmod] table, walking up from the paths."""
    for start in list(paths) or ["."]:
        folder = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or ".")
        while True:
            candidate = os.path.join(folder, "pyproject.toml")
            if os.path.isfile(candidate) and _has_devmod_table(candidate):
                return candidate
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return None


def _has_devmod_table(path: str) -> bool:
    try:
        return "devmod" in _read_toml(path).get("tool", {})
    except ConfigError:
        return True  # let load_config report the broken file rather than silently skip it


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc


def load_config(path: str | None, known_codes: Iterable[str]) -> Config:
    """Read ``[tool.devmod]`` from ``path`` (None: defaults) and validate it."""
    if path is None:
        return Config()
    table = _read_toml(path).get("tool", {}).get("devmod", {})
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [tool.devmod]: {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(_KEYS))})")
    config = Config(
        select=tuple(_codes(table.get("select", []), "select", path, known_codes)),
        ignore=tuple(_codes(table.get("ignore", []), "ignore", path, known_codes)),
        exclude=tuple(_strings(table.get("exclude", []), "exclude", path)),
        unsafe_fixes=_bool(table.get("unsafe-fixes", False), "unsafe-fixes", path),
        device_name=_identifier(table.get("device-name", "device"), f"{path}: device-name"),
        device_style=_style(table.get("device-style", "cuda"), f"{path}: device-style"),
        source=path,
    )
    return config


def _strings(value: Any, key: str, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.devmod] {key} must be a list of strings")
    return value


def _codes(value: Any, key: str, path: str, known_codes: Iterable[str]) -> list[str]:
    return validate_codes(_strings(value, key, path), known_codes, f"{path}: [tool.devmod] {key}")


def _bool(value: Any, key: str, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: [tool.devmod] {key} must be true or false")
    return value


def validate_codes(codes: Iterable[str], known_codes: Iterable[str], where: str) -> list[str]:
    """Codes and prefixes (``DM1``, ``DM104``, ``ALL``) must name at least one rule."""
    known = list(known_codes)
    result = []
    for raw in codes:
        code = raw.strip().upper()
        if code == "ALL":
            code = "DM"
        if not code or not any(k.startswith(code) for k in known):
            raise ConfigError(f"{where}: unknown rule code {raw!r} (see `devmod rules`)")
        result.append(code)
    return result


def _identifier(value: Any, where: str) -> str:
    from .device_name import name_problem

    if not isinstance(value, str) or not value.isidentifier():
        raise ConfigError(f"{where}: must be a Python identifier, got {value!r}")
    if problem := name_problem(value):
        raise ConfigError(f"{where}: {problem}")
    return value


def _style(value: Any, where: str) -> str:
    if value not in DEVICE_STYLES:
        raise ConfigError(f"{where}: must be one of {', '.join(DEVICE_STYLES)}, got {value!r}")
    return value
