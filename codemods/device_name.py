"""Is ``--device-name`` (or ``device-name`` in pyproject) a name devmod may write?

Checked once up front (a Python identifier that is not a keyword, a builtin or None)
and again per file: a name the file already uses for an import, a function or a class,
or for a variable that does not hold a device (``x = torch.zeros(3)``, ``for batch in
...``), would make every fix point at the wrong object (``device=torch``, ``device=x``),
so that file is an error instead. A variable that may hold a device (``gpu = 0``,
``gpu = torch.device(...)``, ``gpu = args.gpu_device``) is the file's own device and is
reused, as are the names the rules read as devices whatever they hold (``device``, ``dev``).
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
    (a method of that name is not the global the fixes refer to), or anywhere but a class body
    to a variable that is not a device."""
    for node in _module_level(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or (alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.name)
                if bound == name:
                    return f"an import of {alias.name}", node.lineno
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return ("a class" if isinstance(node, ast.ClassDef) else "a function"), node.lineno
    return _variable_conflict(tree, name)


def _variable_conflict(tree: ast.Module, name: str) -> tuple[str, int] | None:
    """A variable named ``name`` bound to something that is not a device: every fix would pass it."""
    from .analysis.devices import DEVICE_LIKE_NAMES  # late: it imports libcst, which the CLI loads only to transform
    if name in DEVICE_LIKE_NAMES:  # the rules read these as the file's device, whatever they hold
        return None
    in_class_body = {id(stmt) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for stmt in node.body}
    for node in ast.walk(tree):
        if id(node) in in_class_body:  # a class attribute is not what a bare name refers to
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) \
                    and node.value is not None and not _may_be_device(node.value):
                return "a variable that is not a device", node.lineno
            if any(name in _names(t) for t in targets if not isinstance(t, ast.Name)):
                return "a variable that is not a device", node.lineno  # unpacked: ``x, gpu = ...``
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)) and name in _names(node.target):
            return "a variable that is not a device", node.lineno
        elif isinstance(node, (ast.With, ast.AsyncWith)) and any(
                item.optional_vars is not None and name in _names(item.optional_vars) for item in node.items):
            return "a variable that is not a device", node.lineno
        elif isinstance(node, ast.NamedExpr) and node.target.id == name and not _may_be_device(node.value):
            return "a variable that is not a device", node.lineno
    return None


def _names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _may_be_device(value: ast.expr) -> bool:
    """Could ``value`` be a device? A constant (``"cuda"``, ``0``, ``None``), a name or subscript
    devmod cannot see into, a call or attribute that names a device or an accelerator."""
    if isinstance(value, (ast.Constant, ast.Name, ast.Subscript)):
        return True
    if isinstance(value, ast.IfExp):
        return _may_be_device(value.body) or _may_be_device(value.orelse)
    if isinstance(value, ast.Call):
        value = value.func
    if isinstance(value, (ast.Attribute, ast.Name)):
        last = (value.attr if isinstance(value, ast.Attribute) else value.id).lower()
        return any(word in last for word in ("device", "accelerator", "gpu"))
    return False


def _module_level(body: list[ast.stmt]):
    """Statements that run in the module's own scope: into if/try/with/loops, not into defs."""
    for node in body:
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(node, field, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                yield from _module_level(handler.body)
