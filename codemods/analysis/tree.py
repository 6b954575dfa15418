"""Small syntax-tree helpers shared by the analysis and the rules."""

from __future__ import annotations

import ast
import inspect
from bisect import bisect_left
import textwrap
from typing import Iterable, Iterator, Mapping

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node`` (itself included), in source order.

    Reads the child fields directly: ``node.children`` rebuilds the node to collect them,
    which made this helper a fifth of devmod's run time. Under a tree the index holds (see
    ``TreeIndex``), the answer is a slice of its one walk.
    """
    index = _INDEX
    found = index.subtree(node) if index is not None else None
    if found is None and type(node) is cst.Module:
        index = TreeIndex.of(node)
        found = index.order if index is not None else None
    return iter(found) if found is not None else _walk(node)


def nodes_of(node: cst.CSTNode, *kinds: type) -> list[cst.CSTNode]:
    """The nodes under ``node`` (itself included) that are instances of ``kinds``, in source
    order: ``[n for n in walk(node) if isinstance(n, kinds)]``, read from the index by type."""
    index = _INDEX
    found = index.of_kinds(node, kinds) if index is not None else None
    if found is None and type(node) is cst.Module:
        index = TreeIndex.of(node)
        found = index.of_kinds(node, kinds) if index is not None else None
    return found if found is not None else [n for n in _walk(node) if isinstance(n, kinds)]


class TreeIndex:
    """One walk of a module, kept while devmod works on that tree: every node in source order
    (pre-order, as ``walk`` yields them), where each node's subtree ends, and the positions of
    each node class. The rules' analyses ask for a whole-tree or a subtree walk, or for the
    nodes of a few classes, dozens of times per pass; each is a slice of this walk.

    Only one tree is held (the one asked last); ``forget`` drops it when a file is done, so a
    finished file's tree is never kept alive."""

    LIMIT = 400_000  # nodes: a larger tree (a generated file) is walked as before, not indexed

    def __init__(self, module: cst.Module, order: list, ends: list, starts: dict, kinds: dict) -> None:
        self.module, self.order, self.ends, self.starts, self.kinds = module, order, ends, starts, kinds

    @classmethod
    def of(cls, module: cst.Module) -> "TreeIndex | None":
        global _INDEX, _REFUSED
        if _INDEX is not None and _INDEX.module is module:
            return _INDEX
        _INDEX = None  # the tree it held is done with
        if _REFUSED is module:
            return None
        order: list[cst.CSTNode] = []
        ends: list[int] = []
        starts: dict[int, int] = {}
        kinds: dict[type, list[int]] = {}
        stack: list = [module]
        push, extend = stack.append, stack.extend
        while stack:
            node = stack.pop()
            if type(node) is int:  # the end marker of the subtree that starts at this position
                ends[node] = len(order)
                continue
            position = len(order)
            order.append(node)
            ends.append(0)
            starts[id(node)] = position  # a node shared by two places: either subtree is the same
            kind = type(node)
            found = kinds.get(kind)
            if found is None:
                kinds[kind] = [position]
            else:
                found.append(position)
            push(position)
            children = children_of(node)
            children.reverse()
            extend(children)
            if position > cls.LIMIT:
                _REFUSED = module
                return None
        _INDEX = cls(module, order, ends, starts, kinds)
        return _INDEX

    def subtree(self, node: cst.CSTNode) -> list[cst.CSTNode] | None:
        start = self.starts.get(id(node))
        if start is None or self.order[start] is not node:
            return None  # not a node of this tree
        return self.order[start:self.ends[start]]

    def of_kinds(self, node: cst.CSTNode, kinds: tuple[type, ...]) -> list[cst.CSTNode] | None:
        start = self.starts.get(id(node))
        if start is None or self.order[start] is not node:
            return None
        end = self.ends[start]
        lists = [positions for kind, positions in self.kinds.items() if issubclass(kind, kinds)]
        order = self.order
        if start == 0 and end == len(order):
            picked = lists[0] if len(lists) == 1 else sorted(p for positions in lists for p in positions)
        else:
            picked = sorted(p for positions in lists
                            for p in positions[bisect_left(positions, start):bisect_left(positions, end)])
        return [order[p] for p in picked]

    @staticmethod
    def forget() -> None:
        global _INDEX, _REFUSED
        _INDEX = _REFUSED = None


_INDEX: TreeIndex | None = None
_REFUSED: cst.Module | None = None  # the tree too large to index (held until ``forget``)


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        children = children_of(current)
        children.reverse()
        stack.extend(children)


def children_of(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` without rebuilding ``node``."""
    fields = _CHILD_FIELDS.get(type(node))
    if fields is None:
        fields = _child_fields(type(node))
    if fields is False:
        return list(node.children)
    found: list[cst.CSTNode] = []
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            found.extend(value)
        else:
            # ``isinstance`` against libcst's abstract node class is slow: asked once per class
            is_node = _IS_NODE.get(kind)
            if is_node is None:
                is_node = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
            if is_node:
                found.append(value)
    return found


_IS_NODE: dict[type, bool] = {}


# Per node class: the fields libcst visits, in the order it visits them (source order), read
# once from the class's own _visit_and_replace_children; False when that cannot be read.
_CHILD_FIELDS: dict[type, tuple[str, ...] | bool] = {}
_VISIT_HELPERS = {"visit_required", "visit_optional", "visit_sequence", "visit_sentinel", "visit_body_sequence"}


def _child_fields(cls: type) -> tuple[str, ...] | bool:
    fields: tuple[str, ...] | bool = False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls._visit_and_replace_children)))
    except (OSError, TypeError, SyntaxError):
        tree = None
    if tree is not None:
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id.startswith("visit")]
        if all(c.func.id in _VISIT_HELPERS and len(c.args) >= 2 and isinstance(c.args[1], ast.Constant)
               for c in calls):
            ordered: list[str] = []
            for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
                if call.args[1].value not in ordered:
                    ordered.append(call.args[1].value)
            fields = tuple(ordered)
    _CHILD_FIELDS[cls] = fields
    return fields


def ancestors(metadata: Mapping, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    parents = metadata[ParentNodeProvider]
    current = parents.get(node)
    while current is not None:
        yield current
        current = parents.get(current)


def statement_of(metadata: Mapping, node: cst.CSTNode) -> cst.BaseStatement | None:
    """The innermost statement (simple line or compound) containing ``node``."""
    for parent in ancestors(metadata, node):
        if isinstance(parent, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return parent
    return None


def top_level_statement(metadata: Mapping, node: cst.CSTNode) -> cst.CSTNode | None:
    """The module-level statement containing ``node``."""
    previous = node
    for parent in ancestors(metadata, node):
        if isinstance(parent, cst.Module):
            return previous
        previous = parent
    return None


def runs_later(metadata: Mapping, node: cst.CSTNode) -> bool:
    """True inside a function or lambda body: the code runs when called, not at import."""
    child = node
    for parent in ancestors(metadata, node):
        if isinstance(parent, (cst.FunctionDef, cst.Lambda)) and child is parent.body:
            return True
        child = parent
    return False


def code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def line_of(metadata: Mapping, node: cst.CSTNode) -> int:
    """The line ``node`` starts on (0 when it has no position, e.g. a node a rule built)."""
    position = metadata.get(PositionProvider, {}).get(node)
    return position.start.line if position is not None else 0


def in_source_order(metadata: Mapping, nodes: Iterable[cst.CSTNode]) -> list[cst.CSTNode]:
    """``nodes`` sorted by where they start. libcst keeps bindings and accesses in sets, whose
    order follows memory addresses: anything that reaches output must not depend on it."""
    positions = metadata.get(PositionProvider, {})

    def start(node: cst.CSTNode) -> tuple[int, int]:
        position = positions.get(node)
        return (position.start.line, position.start.column) if position is not None else (0, 0)
    return sorted(nodes, key=start)


def mentions_name(node: cst.CSTNode, name: str) -> bool:
    """Does ``node`` read the variable ``name``? Keyword names (``device=``) and attribute
    names (``x.device``) are not the variable."""
    skipped = set()
    for child in walk(node):
        if isinstance(child, cst.Arg) and child.keyword is not None:
            skipped.add(id(child.keyword))
        elif isinstance(child, cst.Attribute):
            skipped.add(id(child.attr))
        elif isinstance(child, cst.Name) and child.value == name and id(child) not in skipped:
            return True
    return False


def to_call(value: cst.BaseExpression, device: cst.BaseExpression) -> cst.Call:
    """``value.to(device)``."""
    return cst.Call(cst.Attribute(value, cst.Name("to")), [cst.Arg(device)])


def chain_root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What a method chain starts from: ``sample`` of ``sample.unsqueeze(0).repeat(3, 1)``, ``x`` of
    ``x.data[0].float()`` (down calls of attributes, attributes and subscripts)."""
    node = expr
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return node
