"""Where the shared device can be bound: the one answer DM101 and every fix that writes it share.

DM101 defines the shared device after the imports, or after the last torch import above its
first use (a notebook imports as it goes: ``import torch`` in the first cell, ``from torch
import nn`` twenty cells later). When no place comes before a use (torch is imported only
below it, or the file's own definition is below it and cannot move up), DM101 defines nothing,
so no other rule may write a use of the device there either: ``Rule.fix`` asks
``device_unreachable`` and reports the fix instead of applying it.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Mapping

import libcst as cst
from libcst.metadata import GlobalScope, ParentNodeProvider, PositionProvider, ScopeProvider

from .devices import DeviceDefinition, movable
from .names import dotted
from .tree import ancestors, runs_later, top_level_statement, walk


class DevicePlaces:
    """Where a new definition of the shared device may go in one tree (computed once per tree)."""

    def __init__(self, module: cst.Module, torch_alias: str, text: str | None = None) -> None:
        """``text``: the file's source when known, to skip looking for GPU-list settings."""
        body = list(module.body)
        self.size = len(body)
        self._index = {id(stmt): index for index, stmt in enumerate(body)}
        self._lead = -1  # the leading docstring and imports
        for index, stmt in enumerate(body):
            if _is_import_like(stmt) or (index == 0 and _is_docstring(stmt)):
                self._lead = index
            else:
                break
        self._torch_imports = [index for index, stmt in enumerate(body) if _imports_torch(stmt)]
        self._binding = next((index for index, stmt in enumerate(body) if _binds(stmt, torch_alias)), None)
        # Without any ``import torch`` DM101 adds one with the definition: the alias is then bound.
        self._adds_import = not imports_torch_module(module)
        # ``os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu_id``: ``torch.cuda.is_available()`` fixes
        # the list of GPUs, so the definition must run after every such setting, and there is no
        # place for it when the file sets the list later as it runs (in a function).
        self._gpu_list_set: list[int] = []
        self._gpu_list_set_later = False
        if text is None or _GPU_LIST in text:
            for index, stmt in enumerate(body):
                if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    self._gpu_list_set_later = self._gpu_list_set_later or (
                        sets_gpu_list(stmt) and not _checks_for_a_gpu_first(stmt))
                elif sets_gpu_list(stmt):
                    self._gpu_list_set.append(index)

    def index(self, statement: cst.CSTNode | None) -> int | None:
        """The index of a top-level statement (None: not one of this tree's)."""
        return self._index.get(id(statement))

    def anchor(self, before: int) -> int | None:
        """Index of the top-level statement after which a new definition goes so that it runs
        before statement ``before`` (-1: the top of the file), or None when there is no such place.

        The place is the end of the leading docstring and imports, or the last torch import above
        ``before`` when that is later (not the file's last one: a notebook imports as it goes). The
        definition reads the torch alias: a statement up to the place must bind it."""
        below = bisect_left(self._torch_imports, before)
        anchor = max(min(self._lead, before - 1), self._torch_imports[below - 1] if below else -1)
        if not self._adds_import and (self._binding is None or self._binding > anchor):
            return None  # the alias is bound only below: the definition would fail with a NameError
        if self._gpu_list_set_later or any(index >= before for index in self._gpu_list_set):
            return None
        return max([anchor, *self._gpu_list_set])

    def why_not(self) -> str:
        """Why ``anchor`` found no place (it returned None)."""
        if self._gpu_list_set_later or self._gpu_list_set:
            return ("the file sets `CUDA_VISIBLE_DEVICES` after it, and checking for a GPU first would "
                    "ignore that choice")
        return "no module-level `import torch` comes before it"


_GPU_LIST = "CUDA_VISIBLE_DEVICES"


def sets_gpu_list(node: cst.CSTNode) -> bool:
    """Does ``node`` set ``CUDA_VISIBLE_DEVICES`` (``os.environ[...] = ``, ``.setdefault``,
    ``.update``, ``os.putenv``)? Reads (``os.environ.get``) do not count."""
    def named(value: cst.CSTNode) -> bool:
        return any(isinstance(n, cst.SimpleString) and _GPU_LIST in n.value for n in walk(value))
    for item in walk(node):
        if isinstance(item, (cst.Assign, cst.AugAssign)):
            targets = [t.target for t in item.targets] if isinstance(item, cst.Assign) else [item.target]
            if any(isinstance(t, cst.Subscript) and named(t) for t in targets):
                return True
        elif isinstance(item, cst.Call) and isinstance(item.func, cst.Attribute) \
                and item.func.attr.value in ("setdefault", "update", "putenv", "__setitem__") and named(item):
            return True
    return False


def _checks_for_a_gpu_first(function: cst.CSTNode) -> bool:
    """``use_gpu = torch.cuda.is_available()`` above the function's ``CUDA_VISIBLE_DEVICES``
    setting: the author's own check already fixes the list of GPUs, so one at import changes
    nothing (deep-person-reid's scripts)."""
    for item in walk(function):
        if isinstance(item, cst.Call) and (dotted(item.func) or "").endswith("cuda.is_available"):
            return True
        if sets_gpu_list(item) and isinstance(item, (cst.Assign, cst.AugAssign, cst.Call)):
            return False
    return False


def imports_torch_module(module: cst.CSTNode) -> bool:
    """Does the file say ``import torch`` (under any alias) anywhere?"""
    return any(isinstance(n, cst.Import) and any(dotted(a.name) == "torch" for a in n.names) for n in walk(module))


def device_uses(metadata: Mapping, name: str) -> tuple[list[cst.CSTNode], list[cst.CSTNode]]:
    """Loads of ``name`` that resolve to module level, in source order: the top-level statements
    that read it at import, and the names read only when a function runs."""
    immediate, deferred = [], []
    # In the order the scopes appear (a set would follow memory addresses: output must not).
    scopes = dict.fromkeys(s for s in metadata[ScopeProvider].values() if s is not None)
    for scope in scopes:
        accesses = [a for a in scope.accesses[name] if isinstance(a.node, cst.Name)]
        if not accesses or not all(isinstance(a.scope, GlobalScope) for a in scope[name]):
            continue  # none, or a parameter or local of the same name
        for access in _in_source_order(metadata, accesses):
            if runs_later(metadata, access.node):
                deferred.append(access.node)
            else:
                immediate.append(top_level_statement(metadata, access.node))
    return immediate, deferred


def _in_source_order(metadata: Mapping, accesses: list) -> list:
    # libcst keeps accesses in a set, whose order follows memory addresses: output must not.
    positions = metadata.get(PositionProvider, {})

    def key(access) -> tuple[int, int]:
        position = positions.get(access.node)
        return (position.start.line, position.start.column) if position else (0, 0)
    return sorted(accesses, key=key)


def device_unreachable(metadata: Mapping, places: DevicePlaces, module: cst.Module, node: cst.CSTNode,
                       name: str, definitions: list[DeviceDefinition], torch_alias: str,
                       first_use: int | None = None, star_names: frozenset[str] = frozenset()) -> str | None:
    """None when DM101 will have ``name`` bound where ``node`` runs; else why it will not.

    ``first_use``: the index of the first top-level statement that already reads ``name``
    (DM101 places the device for that one first: if it cannot, it defines nothing at all)."""
    before = places.size
    if not runs_later(metadata, node):
        found = places.index(top_level_statement(metadata, node))
        before = places.size if found is None else found
    if first_use is not None:
        before = min(before, first_use)
    own = [d for d in definitions if d.name == name]
    if not own and bound_at_module_level(metadata, module, name):
        return None  # the file's own variable of that name (``device = 0``): DM101 leaves it alone
    if not own and star_bound(module, name, star_names, before):
        return None  # a project module's ``device`` that ``from x import *`` brings: DM101 reuses it
    anchor = places.anchor(before)
    if not own:
        return None if anchor is not None else places.why_not()
    found = places.index(top_level_statement(metadata, own[0].statement))
    if found is not None and found < before:
        return None
    if _bound_earlier_in_an_enclosing_block(metadata, own[0].statement, node):
        return None  # ``device = ...`` earlier in the same main block, a level up or the same level
    if movable(own[0], module) and pure(own[0].assign.value, torch_alias) and anchor is not None:
        return None  # DM101 moves the definition up
    return "its definition comes later and cannot move up"


def star_bound(module: cst.Module, name: str, star_names: frozenset[str], before: int) -> bool:
    """Does a top-level ``from x import *`` above statement ``before`` bring ``name`` from a
    project file (``star_names``, from the project index)? libcst's scopes cannot see it."""
    if name not in star_names:
        return False
    for stmt in list(module.body)[:before]:
        if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar)
                for small in stmt.body):
            return True
    return False


def bound_at_module_level(metadata: Mapping, module: cst.Module, name: str) -> bool:
    scope = metadata[ScopeProvider].get(module)
    return scope is not None and bool(scope.assignments[name])


def pure(value: cst.BaseExpression, torch_alias: str) -> bool:
    """Only literals and torch attributes: safe to evaluate earlier in the file."""
    attributes = {id(n.attr) for n in walk(value) if isinstance(n, cst.Attribute)}
    return all(n.value == torch_alias for n in walk(value)
               if isinstance(n, cst.Name) and id(n) not in attributes)


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.SimpleString))


def _is_import_like(stmt: cst.BaseStatement) -> bool:
    if isinstance(stmt, cst.SimpleStatementLine):
        return all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)
    if isinstance(stmt, cst.Try):
        return all(_is_import_like(s) for s in stmt.body.body)
    return False


def _top_level_imports(stmt: cst.BaseStatement):
    """The imports a statement runs at import time (inside if/try/with, not inside defs)."""
    for node in walk(stmt):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            yield node


def _imports_torch(stmt: cst.BaseStatement) -> bool:
    for node in _top_level_imports(stmt):
        if isinstance(node, cst.Import) and any((dotted(a.name) or "").split(".")[0] == "torch" for a in node.names):
            return True
        if isinstance(node, cst.ImportFrom) and node.module is not None and (
                (dotted(node.module) or "").split(".")[0] == "torch"):
            return True
    return False


def torch_bound_before(metadata: Mapping, statement: cst.CSTNode, alias: str) -> bool:
    """Is ``alias`` bound to torch when ``statement`` runs? At module level only a top-level import
    above it counts (a notebook's ``device = "cuda"`` cell before its ``import torch`` cell); code
    in a function or class runs later, after the file's imports."""
    parents = metadata[ParentNodeProvider]
    node = statement
    while not isinstance(parents.get(node), cst.Module):
        node = parents.get(node)
        if node is None or isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return True
    body = list(parents[node].body)
    return any(_binds(stmt, alias) for stmt in body[:body.index(node)])


def _binds(stmt: cst.BaseStatement, alias: str) -> bool:
    """Does the statement bind ``alias`` to the torch module (``import torch``, ``import torch as
    th``, ``import torch.nn``)?"""
    for node in _top_level_imports(stmt):
        for name in node.names if isinstance(node, cst.Import) else ():
            module = dotted(name.name) or ""
            if name.asname is not None:
                if module == "torch" and isinstance(name.asname.name, cst.Name) and name.asname.name.value == alias:
                    return True
            elif module.split(".")[0] == "torch" and alias == "torch":
                return True
    return False


def _bound_earlier_in_an_enclosing_block(metadata: Mapping, statement: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Is ``statement`` in a block that also holds ``node`` (directly or deeper), before it?"""
    parents = metadata[ParentNodeProvider]
    while isinstance(parents.get(statement), cst.SimpleStatementLine):
        statement = parents.get(statement)  # the line around an ``Assign``
    block = parents.get(statement)
    if not isinstance(block, (cst.IndentedBlock, cst.Module)) or block not in set(ancestors(metadata, node)):
        return False
    body = list(block.body)
    holder = next((a for a in [node, *ancestors(metadata, node)] if parents.get(a) is block), None)
    return holder is not None and statement in body and holder in body and body.index(statement) < body.index(holder)


def first_call_at_import(metadata: Mapping, module: cst.Module, deferred: list[cst.CSTNode]) -> int:
    """The index in ``module.body`` of the first top-level statement that calls, as the file
    runs, a top-level function reading the name (``print(evaluate(net))`` above ``device =
    ...``, with ``device`` read inside ``evaluate``); ``len(module.body)`` when there is none."""
    functions = {top.name.value for top in (top_level_statement(metadata, n) for n in deferred)
                 if isinstance(top, cst.FunctionDef)}
    for index, statement in enumerate(module.body if functions else ()):
        if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and any(
                isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in functions
                for n in walk(statement)):
            return index
    return len(module.body)
