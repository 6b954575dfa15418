"""libcst's read-only traversals (visitors, metadata providers) without rebuilding the tree.

``CSTNode.visit`` builds a new copy of every node it passes, even for a ``CSTVisitor``, whose
result is the original node anyway; for the metadata the rules read (scopes, qualified names,
parents) that copying was most of the cost. ``install()`` gives ``CSTNode.visit`` a path for
visitors that calls the same callbacks in the same order (``on_visit``; per field
``on_visit_attribute``, the children, ``on_leave_attribute``; ``on_leave``) and returns the
node, building nothing. Transformers keep libcst's own traversal. A node class whose
``_visit_and_replace_children`` is not the plain "visit each field in order" shape keeps
libcst's traversal too, so nothing is guessed.

``parents`` computes what ``ParentNodeProvider`` computes (each child's parent) in one walk;
libcst's provider asks every node for ``.children``, which builds a copy of each node.

The scope visitor's ``on_leave`` asks every node ``isinstance(node, <18 node classes>)``; each
miss goes through ``ABCMeta.__instancecheck__`` (the node classes are ABCs), about a third of
the scope analysis. ``install()`` gives it the same answer from a per-class cache.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from types import MappingProxyType
from typing import Mapping

import libcst as cst
from libcst import CSTNode, CSTVisitor
from libcst._batched_visitor import _BatchedCSTVisitor
from libcst.metadata import ExpressionContext, scope_provider

from .analysis.tree import children_of

_HELPERS = frozenset({"visit_required", "visit_optional", "visit_sequence", "visit_sentinel",
                      "visit_body_sequence", "visit_iterable", "visit_body_iterable"})
_FIELDS: dict[type, tuple[str, ...] | None] = {}
_ORIGINAL_VISIT = CSTNode.visit


def visited_fields(cls: type) -> tuple[str, ...] | None:
    """The fields libcst's ``cls._visit_and_replace_children`` visits, in order, when it is exactly
    ``return cls(field=visit_<kind>(self, "field", self.field, visitor), other=self.other, ...)``;
    None for any other shape."""
    if cls not in _FIELDS:
        _FIELDS[cls] = _read_fields(cls)
    return _FIELDS[cls]


def _read_fields(cls: type) -> tuple[str, ...] | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls._visit_and_replace_children)))
    except (OSError, TypeError, SyntaxError):
        return None
    function = tree.body[0] if tree.body else None
    if not isinstance(function, ast.FunctionDef) or len(function.args.args) != 2:
        return None
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
        return None
    built = body[0].value
    if built.args or not isinstance(built.func, ast.Name) or built.func.id != cls.__name__:
        return None
    visitor = function.args.args[1].arg
    fields: list[str] = []
    for keyword in built.keywords:
        value = keyword.value
        if _is_self_attribute(value, keyword.arg):
            continue  # carried over unvisited (whitespace, operators' strings, ...)
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _HELPERS
                and len(value.args) == 4 and not value.keywords
                and isinstance(value.args[0], ast.Name) and value.args[0].id == "self"
                and isinstance(value.args[1], ast.Constant) and value.args[1].value == keyword.arg
                and _is_self_attribute(value.args[2], keyword.arg)
                and isinstance(value.args[3], ast.Name) and value.args[3].id == visitor):
            return None
        fields.append(keyword.arg)  # keyword arguments are evaluated in order: libcst's visit order
    return tuple(fields)


def _is_self_attribute(node: ast.AST, name: str | None) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.value, ast.Name)
            and node.value.id == "self")


def _visit(self: CSTNode, visitor):  # type: ignore[no-untyped-def]
    if not isinstance(visitor, CSTVisitor):
        return _ORIGINAL_VISIT(self, visitor)
    hooks = _attribute_hooks(visitor)
    if hooks is None:
        _visit_fields(self, visitor)
    else:  # every visitor of the metadata devmod resolves: per-field calls only where they do something
        _visit_nodes(self, visitor, visitor.on_visit, visitor.on_leave, hooks, {})
    return self


def _visit_fields(self: CSTNode, visitor: CSTVisitor) -> None:
    fields = _FIELDS.get(type(self), False)
    if fields is False:
        fields = visited_fields(type(self))
    if fields is None:
        _ORIGINAL_VISIT(self, visitor)
        return
    if visitor.on_visit(self):
        for name in fields:
            visitor.on_visit_attribute(self, name)
            value = getattr(self, name)
            if isinstance(value, CSTNode):
                value.visit(visitor)
            elif isinstance(value, (tuple, list)):
                for child in value:
                    child.visit(visitor)
            visitor.on_leave_attribute(self, name)  # also for None / MaybeSentinel, as libcst does
    visitor.on_leave(self)


def _visit_nodes(self: CSTNode, visitor: CSTVisitor, on_visit, on_leave,  # type: ignore[no-untyped-def]
                 hooks: frozenset[str], hooked: dict[type, frozenset[str]]) -> None:
    """``_visit_fields`` for a visitor whose ``on_visit_attribute``/``on_leave_attribute`` only call
    its ``visit_<Node>_<field>``/``leave_<Node>_<field>`` methods (``hooks``, their names): the same
    calls in the same order, without a call per field that finds no method and without an
    ``isinstance`` against libcst's abstract node class per value (most of a metadata resolution)."""
    kind = type(self)
    fields = _FIELDS.get(kind, False)
    if fields is False:
        fields = visited_fields(kind)
    if fields is None:
        _ORIGINAL_VISIT(self, visitor)
        return
    if on_visit(self):
        named = hooked.get(kind)
        if named is None:
            type_name = kind.__name__
            named = hooked[kind] = frozenset(
                name for name in fields
                if f"visit_{type_name}_{name}" in hooks or f"leave_{type_name}_{name}" in hooks)
        for name in fields:
            if named and name in named:
                visitor.on_visit_attribute(self, name)
            value = getattr(self, name)
            value_kind = type(value)
            if value_kind is tuple or value_kind is list:
                for child in value:
                    _visit_nodes(child, visitor, on_visit, on_leave, hooks, hooked)
            else:
                is_node = _IS_NODE.get(value_kind)
                if is_node is None:
                    is_node = _IS_NODE[value_kind] = issubclass(value_kind, CSTNode)
                if is_node:
                    _visit_nodes(value, visitor, on_visit, on_leave, hooks, hooked)
            if named and name in named:
                visitor.on_leave_attribute(self, name)
    on_leave(self)


_IS_NODE: dict[type, bool] = {}
_CLASS_HOOKS: dict[type, frozenset[str] | None] = {}


def _attribute_hooks(visitor: CSTVisitor) -> frozenset[str] | None:
    """The names of the visitor's ``visit_<Node>_<field>``/``leave_<Node>_<field>`` methods (not
    libcst's empty stubs), when its per-field calls do nothing else; None when they may."""
    kind = type(visitor)
    if kind is _BatchedCSTVisitor:  # its per-field calls run the batched methods of those names
        return frozenset(name for name in visitor.visitor_methods if "_" in name.partition("_")[2])
    if kind not in _CLASS_HOOKS:
        plain = (kind.on_visit_attribute is CSTVisitor.on_visit_attribute
                 and kind.on_leave_attribute is CSTVisitor.on_leave_attribute)
        _CLASS_HOOKS[kind] = frozenset(
            name for name in dir(kind)
            if name.startswith(("visit_", "leave_")) and "_" in name.partition("_")[2]
            and getattr(kind, name) is not getattr(CSTVisitor, name, None)) if plain else None
    return _CLASS_HOOKS[kind]


_ORIGINAL_SCOPE_LEAVE = scope_provider.ScopeVisitor.on_leave
_LEAVE_NEXT = scope_provider.ScopeVisitor.__mro__[1].on_leave  # what its ``super().on_leave`` calls
_ASSIGNMENT_LIKE: dict[type, bool] = {}


def _scope_on_leave(self, original_node: CSTNode) -> None:
    """``ScopeVisitor.on_leave``, with its ``isinstance`` answered once per node class."""
    self.provider.set_metadata(original_node, self.scope)
    cls = original_node.__class__
    counts = _ASSIGNMENT_LIKE.get(cls)
    if counts is None:
        counts = _ASSIGNMENT_LIKE[cls] = issubclass(cls, scope_provider._ASSIGNMENT_LIKE_NODES)
    if counts:
        self.scope._assignment_count += 1
    _LEAVE_NEXT(self, original_node)


def install() -> None:
    """Route visitors (never transformers) through the non-copying traversal; idempotent."""
    CSTNode.visit = _visit  # type: ignore[method-assign]
    scope_provider.ScopeVisitor.on_leave = _scope_on_leave  # type: ignore[method-assign]


def parents(module: cst.Module) -> Mapping[CSTNode, CSTNode]:
    """Each node's parent, as ``ParentNodeProvider`` gives it (the module has none)."""
    found: dict[CSTNode, CSTNode] = {}
    stack: list[CSTNode] = [module]
    while stack:
        node = stack.pop()
        children = children_of(node)
        for child in children:
            found[child] = node
        stack.extend(children)
    return MappingProxyType(found)


_LOAD, _STORE, _DEL = ExpressionContext.LOAD, ExpressionContext.STORE, ExpressionContext.DEL


def expression_contexts(module: cst.Module) -> Mapping[CSTNode, ExpressionContext]:
    """What ``ExpressionContextProvider`` computes (the scope analysis reads it), in one walk
    over the original nodes: each rule of its visitor, with the same fields left out (a class's
    or function's type parameters, an attribute's name)."""
    found: dict[CSTNode, ExpressionContext] = {}
    stack: list[tuple[CSTNode, ExpressionContext]] = [(module, _LOAD)]
    push = stack.append
    while stack:
        node, context = stack.pop()
        kind = node.__class__
        if kind is cst.Name:
            found[node] = context
        elif kind is cst.Attribute:
            found[node] = context
            push((node.value, _LOAD))
        elif kind is cst.Subscript:
            found[node] = context
            push((node.value, _LOAD))
            stack.extend((element, _LOAD) for element in node.slice)
        elif kind is cst.Assign:
            stack.extend((target, _STORE) for target in node.targets)
            push((node.value, context))
        elif kind is cst.AnnAssign or kind is cst.AugAssign or kind is cst.NamedExpr:
            push((node.target, _STORE))
            stack.extend((part, context) for part in (getattr(node, "annotation", None), node.value) if part)
        elif kind is cst.AsName:
            push((node.name, _STORE))
        elif kind is cst.CompFor:
            push((node.target, _STORE))
            stack.extend((part, context) for part in (node.iter, *node.ifs, node.inner_for_in) if part)
        elif kind is cst.For:
            push((node.target, _STORE))
            stack.extend((part, context) for part in (node.iter, node.body, node.orelse) if part)
        elif kind is cst.Del:
            push((node.target, _DEL))
        elif kind is cst.ClassDef:
            push((node.name, _STORE))
            stack.extend((part, context) for part in (node.body, *node.bases, *node.keywords, *node.decorators))
        elif kind is cst.FunctionDef:
            push((node.name, _STORE))
            stack.extend((part, context) for part in (node.params, node.body, *node.decorators, node.returns) if part)
        elif kind is cst.Param:
            push((node.name, _STORE))
            stack.extend((part, context) for part in (node.annotation, node.default) if part)
        else:
            if kind is cst.Tuple or kind is cst.List or kind is cst.StarredElement:
                found[node] = context
            stack.extend((child, context) for child in children_of(node))
    return MappingProxyType(found)


def uninstall() -> None:
    """libcst's own traversal for every visitor again (tests compare the two)."""
    CSTNode.visit = _ORIGINAL_VISIT  # type: ignore[method-assign]
    scope_provider.ScopeVisitor.on_leave = _ORIGINAL_SCOPE_LEAVE  # type: ignore[method-assign]
