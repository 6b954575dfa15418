"""Is ``--device-name`` (or ``device-name`` in pyproject) a name devmod may write?

Checked once up front (a Python identifier that is not a keyword, a builtin or None)
and again per file: a name the file already uses for an import, a function or a class
would make every fix point at the wrong object (``device=torch``), so that file is an
error instead.
"""

from __future__ import annotations

import ast
import builtins
import keyword


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the shared device variable, or None when it can."""
    if not name.isidentifier():
        return f"{name!r} is not a Python identifier"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"{name!r} is a Python keyword"
    if hasattr(builtins, name):
        return f"{name!r} is a Python builtin; a variable of that name would hide it"
    return None


def conflict_in_file(tree: ast.Module, name: str) -> tuple[str, int] | None:
    """(what, line) when the file binds ``name``, at module level, to an import, a function or a class
    (a method or a local of that name is not the global the fixes refer to)."""
    for node in _module_level(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or (alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.name)
                if bound == name:
                    return f"an import of {alias.name}", node.lineno
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return ("a class" if isinstance(node, ast.ClassDef) else "a function"), node.lineno
    return None


def _module_level(body: list[ast.stmt]):
    """Statements that run in the module's own scope: into if/try/with/loops, not into defs."""
    for node in body:
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(node, field, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                yield from _module_level(handler.body)
