"""Where a tensor goes: does it meet device code, or only CPU-side data code?"""

from __future__ import annotations

from typing import Mapping

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from .names import dotted, qualified_names
from .roles import factory_name
from .tree import walk

_CPU_CONSUMERS_SUFFIXES = ("Dataset", "DataLoader", "random_split", "Sampler")
_CPU_METHODS = frozenset({"numpy", "tolist", "item", "cpu"})
_TENSOR_METHODS = frozenset({"float", "double", "long", "int", "half", "bool", "detach", "clone", "view",
                             "reshape", "unsqueeze", "squeeze", "permute", "t", "contiguous", "to",
                             "fill_", "normal_", "uniform_", "zero_", "requires_grad_", "expand"})


def chain_top(metadata: Mapping, node: cst.CSTNode) -> cst.CSTNode:
    """The outermost expression of a method chain starting at ``node`` (``f(...).float().t()``)."""
    parents = metadata[ParentNodeProvider]
    current = node
    while True:
        parent = parents.get(current)
        if isinstance(parent, cst.Attribute) and parent.value is current:
            call = parents.get(parent)
            if isinstance(call, cst.Call) and call.func is parent and parent.attr.value in _TENSOR_METHODS:
                current = call
                continue
        return current


def assigned_name(metadata: Mapping, node: cst.CSTNode) -> cst.Name | None:
    """The Name a value is assigned to (``x = <node>``, also through a method chain or a
    list comprehension around it), else None."""
    parents = metadata[ParentNodeProvider]
    current = chain_top(metadata, node)
    parent = parents.get(current)
    if isinstance(parent, (cst.ListComp, cst.GeneratorExp)) and parent.elt is current:
        current, parent = parent, parents.get(parent)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target
    return None


def flows_only_to_cpu(metadata: Mapping, call: cst.Call) -> bool:
    """A factory whose tensor is data for a Dataset/DataLoader, iterated as samples, or
    turned into NumPy/Python values: it belongs on the CPU."""
    top = chain_top(metadata, call)
    if _consumed_on_cpu(metadata, top):
        return True
    name = assigned_name(metadata, call)
    if name is None:
        return False
    scope = metadata[ScopeProvider].get(name)
    if scope is None:
        return False
    uses = [a.node for a in scope.accesses[name.value] if isinstance(a.node, cst.Name)]
    return bool(uses) and any(_consumed_on_cpu(metadata, use) for use in uses)


def _consumed_on_cpu(metadata: Mapping, node: cst.CSTNode) -> bool:
    parents = metadata[ParentNodeProvider]
    parent = parents.get(node)
    if isinstance(parent, cst.Arg):
        call = parents.get(parent)
        if isinstance(call, cst.Call):
            names = qualified_names(metadata, call.func) | {dotted(call.func) or ""}
            return any(n.endswith(_CPU_CONSUMERS_SUFFIXES) for n in names)
    if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _CPU_METHODS:
        return True
    if isinstance(parent, cst.For) and parent.iter is node:
        return True
    return False


def is_surely_tensor(metadata: Mapping, expr: cst.BaseExpression) -> bool:
    """A factory call, a tensor method chain on one, or a name assigned from either."""
    node = expr
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value in _TENSOR_METHODS:
        node = node.func.value
    if factory_name(metadata, node):
        return True
    if isinstance(node, cst.Call) and _torch_function_of_tensor(metadata, node):
        return True
    if isinstance(node, cst.Name):
        scope = metadata[ScopeProvider].get(node)
        if scope is None:
            return False
        assignments = list(scope[node.value])
        if len(assignments) != 1:
            return False
        target = assignments[0].node
        parent = metadata[ParentNodeProvider].get(target)
        assign = metadata[ParentNodeProvider].get(parent) if parent is not None else None
        if isinstance(parent, cst.AssignTarget) and isinstance(assign, cst.Assign) and assign.value is not expr:
            return not any(n is expr for n in walk(assign.value)) and is_surely_tensor(metadata, assign.value)
    return False


def _torch_function_of_tensor(metadata: Mapping, call: cst.Call) -> bool:
    """``torch.tril(t)``, ``torch.cat([a, b])``: a torch function applied to a tensor."""
    names = qualified_names(metadata, call.func)
    if not any(n.startswith("torch.") and n.count(".") == 1 and n[6:7].islower() for n in names):
        return False
    return any(is_surely_tensor(metadata, a.value) for a in call.args if a.keyword is None)
