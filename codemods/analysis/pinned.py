"""Models the author keeps on the CPU on purpose: their inputs stay there with them."""

from __future__ import annotations

from typing import Mapping

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from .devices import always_cpu
from .names import keyword, qualified_names
from .scopes import scope_bindings
from .tensors import uses_of
from .tree import code_of, walk


def pinned_to_cpu(metadata: Mapping, name: cst.Name) -> bool:
    """``net = Net(device="cpu")``, ``Net().cpu()``, a checkpoint loaded with
    ``map_location="cpu"``, or ``net.to("cpu")`` as a statement of its own: the author put the
    model on the CPU on purpose (and never moves it off), so its inputs stay there with it."""
    bindings = scope_bindings(metadata[ScopeProvider].get(name), name.value)
    if len(bindings) != 1 or not isinstance(bindings[0].node, cst.Name):
        return False
    parents = metadata[ParentNodeProvider]
    holder = parents.get(bindings[0].node)
    if isinstance(holder, cst.Element):  # ``policy, stats = torch.load(..., map_location="cpu")``
        holder = parents.get(parents.get(holder))
    assign = parents.get(holder)
    if not isinstance(assign, cst.Assign) or not isinstance(assign.value, cst.Call):
        return False
    pinned = False
    for node in walk(assign.value):
        if isinstance(node, cst.Call) and _places_on_cpu(metadata, node):
            pinned = True
    uses = uses_of(metadata, name)
    for use in uses:  # ``model_0.to("cpu")  # keep it on the CPU``
        method = parents.get(use)
        call = parents.get(method) if isinstance(method, cst.Attribute) and method.value is use else None
        if isinstance(call, cst.Call) and call.func is method and isinstance(parents.get(call), cst.Expr) \
                and _places_on_cpu(metadata, call):
            pinned = True
    return pinned and not any(moves_itself_somewhere(metadata, use) for use in uses)


def _places_on_cpu(metadata: Mapping, node: cst.Call) -> bool:
    method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
    device = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "device"]
    if method == "to" and node.args and always_cpu(node.args[0].value):
        device = [node.args[0].value]
    if "torch.load" in qualified_names(metadata, node.func):  # a checkpoint loaded onto the CPU
        device = [a.value for a in [keyword(node, "map_location")] if a is not None]
    return method == "cpu" or bool(device and always_cpu(device[0]))


def moves_off_the_cpu(method: str, call: cst.CSTNode) -> bool:
    """``.cuda()`` or ``.to(<not the CPU>)``."""
    if method == "cuda":
        return True
    if method != "to" or not isinstance(call, cst.Call) or not call.args:
        return False
    return "cpu" not in code_of(call.args[0].value)


def moves_itself_somewhere(metadata: Mapping, use: cst.Name) -> bool:
    """``net.to(device)`` / ``net.cuda()`` as a use of ``net``."""
    parents = metadata[ParentNodeProvider]
    parent = parents.get(use)
    return isinstance(parent, cst.Attribute) and parent.value is use \
        and moves_off_the_cpu(parent.attr.value, parents.get(parent))
