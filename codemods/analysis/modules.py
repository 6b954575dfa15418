"""Facts about the ``nn.Module`` classes of one file: which attributes are assigned where,
what is registered, and the name ``torch.nn`` goes by.

Syntax only. Attribute questions are asked over a class *family* (the class plus the
classes of the same file it derives from or that derive from it), because a subclass
assigning ``self.mask = ...`` touches the same attribute.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping

import libcst as cst
from libcst.metadata import ScopeProvider
from libcst.metadata.scope_provider import ImportAssignment

from .names import dotted, positional
from .scopes import ClassFacts, Place, ScopeKind, assigned_value, scope_bindings
from .tree import ancestors, nodes_of, walk

_REGISTER_METHODS = frozenset({"register_buffer", "register_parameter", "add_module", "register_module"})


def _base_names(klass: cst.ClassDef) -> set[str]:
    return {(dotted(b.value) or "").rsplit(".", 1)[-1] for b in klass.bases}


def class_family(facts: ClassFacts, klass: cst.ClassDef) -> list[cst.ClassDef]:
    """``klass``, its in-file ancestors and its in-file descendants (transitively)."""
    family = {klass.name.value}
    changed = True
    while changed:
        changed = False
        for name, other in facts.classes.items():
            if name in family:
                continue
            related = _base_names(other) & family or any(
                name in _base_names(facts.classes[f]) for f in family if f in facts.classes)
            if related:
                family.add(name)
                changed = True
    found = [facts.classes[n] for n in sorted(family) if n in facts.classes]
    return found if klass in found else [klass, *found]


def _targets(node: cst.CSTNode) -> Iterable[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.Del)):
        return [node.target]
    if isinstance(node, cst.WithItem) and node.asname is not None:
        return [node.asname.name]
    return []


def attribute_assignments(classes: Iterable[cst.ClassDef], attribute: str) -> list[cst.CSTNode]:
    """Nodes that bind ``self.<attribute>`` (also in tuples, ``setattr(self, "a", ...)``, ``del``)."""
    wanted = f"self.{attribute}"
    found: list[cst.CSTNode] = []
    for klass in classes:
        for node in walk(klass):
            if any(dotted(n) == wanted for t in _targets(node) for n in walk(t)):
                found.append(node)
            elif isinstance(node, cst.Call) and dotted(node.func) in ("setattr", "delattr"):
                args = positional(node)
                if (len(args) >= 2 and dotted(args[0].value) == "self" and isinstance(args[1].value, cst.SimpleString)
                        and args[1].value.evaluated_value == attribute):
                    found.append(node)
    return found


def registered_names(classes: Iterable[cst.ClassDef]) -> set[str]:
    """Names passed to ``register_buffer`` / ``register_parameter`` / ``add_module`` as literals."""
    names: set[str] = set()
    for klass in classes:
        for node in walk(klass):
            if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in _REGISTER_METHODS and node.args
                    and isinstance(node.args[0].value, cst.SimpleString)):
                value = node.args[0].value.evaluated_value
                if isinstance(value, str):
                    names.add(value)
    return names


def class_level_names(classes: Iterable[cst.ClassDef]) -> set[str]:
    """Names a class body binds itself (methods, properties, class attributes): a buffer or
    sub-module of the same name raises ``KeyError: attribute '...' already exists``."""
    names: set[str] = set()
    for klass in classes:
        body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                names.add(stmt.name.value)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.AnnAssign) and small.value is None:
                        continue  # a bare annotation binds nothing
                    for target in _targets(small):
                        names.update(n.value for n in walk(target) if isinstance(n, cst.Name))
    return names


def attribute_uses(classes: Iterable[cst.ClassDef], attribute: str) -> Iterator[cst.Attribute]:
    """Every ``self.<attribute>`` expression in the family (loads and stores)."""
    for klass in classes:
        for node in walk(klass):
            if (isinstance(node, cst.Attribute) and node.attr.value == attribute
                    and isinstance(node.value, cst.Name) and node.value.value == "self"):
                yield node


def after_super_init(function: cst.FunctionDef, statement: cst.CSTNode) -> bool:
    """Does ``statement`` (somewhere in ``function``) surely run after ``super().__init__()``?

    Only a call at the top level of the body counts (one inside an ``if`` may not run),
    and it must come before the top-level statement holding ``statement``.
    """
    if not isinstance(function.body, cst.IndentedBlock):
        return False
    for stmt in function.body.body:
        if stmt is statement or any(n is statement for n in walk(stmt)):
            return False
        if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(small, cst.Expr) and _is_init_call(small.value) for small in stmt.body):
            return True
    return False


def _is_init_call(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "__init__")


def nn_alias(module: cst.Module, torch_alias: str | None) -> str:
    """How to spell ``torch.nn`` in this file: ``nn`` (``import torch.nn as nn`` /
    ``from torch import nn``, imported at module level), else ``<torch alias>.nn``."""
    for stmt in module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if dotted(alias.name) == "torch.nn" and alias.asname is not None:
                        return alias.asname.name.value  # type: ignore[union-attr]
            elif (isinstance(small, cst.ImportFrom) and small.module is not None
                  and dotted(small.module) == "torch" and not isinstance(small.names, cst.ImportStar)):
                for alias in small.names:
                    if dotted(alias.name) == "nn":
                        return alias.asname.name.value if alias.asname else "nn"  # type: ignore[union-attr]
    return f"{torch_alias or 'torch'}.nn"



def called_on_import(metadata: Mapping, func: cst.BaseExpression) -> bool:
    """``np.foo`` / ``torch.nn.functional.relu``: an attribute chain whose root name is an
    import, i.e. a module function rather than a method of some value. (Qualified names
    alone cannot tell: libcst names ``Tensor(3).fill_`` ``"Tensor.fill_"`` too.)"""
    node = func
    while isinstance(node, cst.Attribute):
        node = node.value
    if not isinstance(node, cst.Name) or node is func:
        return False
    scope = metadata[ScopeProvider].get(node)
    if scope is None:
        return False
    bindings = scope_bindings(scope, node.value)
    return bool(bindings) and all(isinstance(b, ImportAssignment) for b in bindings)


def single_assigned_value(metadata: Mapping, name: cst.Name) -> cst.BaseExpression | None:
    """The value of ``name = <value>`` when that is the name's only binding in its scope."""
    scope = metadata[ScopeProvider].get(name)
    if scope is None:
        return None
    bindings = scope_bindings(scope, name.value)
    if len(bindings) != 1 or bindings[0].scope is not scope:
        return None
    return assigned_value(metadata, bindings[0].node)


def init_attribute(place: Place, assign: cst.Assign, statement: cst.CSTNode) -> str | None:
    """``X`` for ``self.X = value`` in an nn.Module's ``__init__`` that surely runs after
    ``super().__init__()`` (``statement`` holds ``assign``); else None."""
    if len(assign.targets) != 1:
        return None
    target = dotted(assign.targets[0].target) or ""
    if not target.startswith("self.") or target.count(".") != 1:
        return None
    if place.kind is not ScopeKind.MODEL_METHOD or place.method_name != "__init__" \
            or place.klass is None or place.function is None:
        return None
    if not after_super_init(place.function, statement):
        return None
    return target.split(".", 1)[1]


def only_binding(facts: ClassFacts, klass: cst.ClassDef, attribute: str) -> bool:
    """``self.<attribute>`` is assigned once in the class family and is no buffer or class attribute."""
    family = class_family(facts, klass)
    return (len(attribute_assignments(family, attribute)) == 1
            and attribute not in registered_names(family) | class_level_names(family))


def registers_on_self(call: cst.Call) -> bool:
    """``setattr(self, name, m)``, ``self.add_module(name, m)``, ``self.register_module(name, m)``."""
    func = call.func
    if isinstance(func, cst.Name) and func.value == "setattr":
        return len(call.args) == 3 and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "self"
    return isinstance(func, cst.Attribute) and func.attr.value in ("add_module", "register_module") \
        and isinstance(func.value, cst.Name) and func.value.value == "self" and len(call.args) == 2


def builds_parts_when_run(klass: cst.ClassDef) -> bool:
    """A method other than ``__init__`` registers sub-modules (``setattr(self, "mlp_0", mlp)``):
    the model gets parts when it first runs, so a ``.to(device)`` before that misses them."""
    body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ()
    return any(isinstance(node, cst.Call) and registers_on_self(node)
               for method in body if isinstance(method, cst.FunctionDef) and method.name.value != "__init__"
               for node in walk(method))


def ignored_argument(metadata: Mapping, facts: ClassFacts, klass: cst.ClassDef, parameter: str, depth: int = 0) -> bool:
    """Is ``klass(..., parameter=value)``'s value never used? ``__init__`` only keeps it as
    ``self.device`` (or hands it on to another class of the file that ignores it), and every
    method reading ``self.device`` sets it first (``self.device = x.device`` at the top of
    ``forward``) or runs only after a method that did. A CUDA device given there places nothing."""
    init = next((s for s in klass.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    if init is None or depth > 3 or parameter not in {p.name.value for p in init.params.params}:
        return False
    parents = metadata[cst.metadata.ParentNodeProvider]
    kept: set[str] = set()
    for name in nodes_of(init.body, cst.Name):
        if name.value != parameter:
            continue
        holder = parents.get(name)
        if isinstance(holder, cst.Attribute) and holder.attr is name or isinstance(holder, cst.Arg) and holder.keyword is name:
            continue  # ``x.device``, ``f(device=...)``: not the variable
        target = holder.targets[0].target if isinstance(holder, cst.Assign) and len(holder.targets) == 1 else None
        call = parents.get(holder) if isinstance(holder, cst.Arg) else None
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            kept.add(target.attr.value)
        elif isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in facts.classes \
                and holder.keyword is not None and ignored_argument(
                    metadata, facts, facts.classes[call.func.value], holder.keyword.value, depth + 1):
            continue
        else:
            return False
    return all(_set_before_read(metadata, facts, klass, attribute) for attribute in kept)


def _set_before_read(metadata: Mapping, facts: ClassFacts, klass: cst.ClassDef, attribute: str) -> bool:
    family = class_family(facts, klass)
    if len(family) != 1:
        return False  # a subclass may read it anywhere
    methods = [s for s in klass.body.body if isinstance(s, cst.FunctionDef)]
    wanted = f"self.{attribute}"

    def setter_index(method: cst.FunctionDef) -> int | None:
        """The top-level statement of ``method`` that sets ``self.<attribute>`` from other values."""
        for index, statement in enumerate(method.body.body):
            smalls = statement.body if isinstance(statement, cst.SimpleStatementLine) else ()
            for small in smalls:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                        and dotted(small.targets[0].target) == wanted \
                        and not any(dotted(n) == wanted for n in nodes_of(small.value, cst.Attribute)):
                    return index
        return None

    def statement_index(method: cst.FunctionDef, node: cst.CSTNode) -> int:
        top = node
        for parent in ancestors(metadata, node):
            if parent is method.body:
                return list(method.body.body).index(top)
            top = parent
        return -1

    for use in attribute_uses(family, attribute):
        if isinstance(metadata[cst.metadata.ParentNodeProvider].get(use), cst.AssignTarget):
            continue
        method = next((a for a in ancestors(metadata, use) if isinstance(a, cst.FunctionDef)), None)
        if method is None or method.name.value == "__init__" or method not in methods:
            return False
        first = setter_index(method)
        if first is not None:
            if statement_index(method, use) <= first:
                return False
            continue
        # only called by methods of the class after they set it (``forward`` -> ``conv_trans_conv``)
        calls = [c for c in nodes_of(klass, cst.Call) if dotted(c.func) == f"self.{method.name.value}"]
        for call in calls:
            caller = next((a for a in ancestors(metadata, call) if isinstance(a, cst.FunctionDef)), None)
            first = setter_index(caller) if caller is not None else None
            if first is None or statement_index(caller, call) <= first:
                return False
        if not calls:
            return False
    return True

