"""DataLoader loops: which ``for`` loops iterate batches, and what each batch looks like."""

from __future__ import annotations

import enum
from typing import Mapping

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from .names import dotted, keyword, qualified_names
from .roles import factory_name, is_loader_constructor
from .tree import walk

_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "tqdm.tqdm", "tqdm.auto.tqdm"})
_LOADER_PARAM_NAMES = frozenset({"dl", "train_dl", "val_dl", "valid_dl", "test_dl", "dataloader"})


class BatchShape(enum.Enum):
    TENSOR = "tensor"   # used as a tensor: batch = batch.to(device)
    DICT = "dict"       # batch["x"], batch.items(): a dict comprehension
    SEQUENCE = "sequence"  # batch[0], x, y = batch: a list comprehension
    UNKNOWN = "unknown"  # attributes (custom objects) or nothing to go on


def loader_source(metadata: Mapping, iterable: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """Strip ``enumerate(...)``/``tqdm(...)``; the flag says whether ``enumerate`` was one."""
    enumerated = False
    while isinstance(iterable, cst.Call) and iterable.args and (
            dotted(iterable.func) in _WRAPPERS or qualified_names(metadata, iterable.func) & {"tqdm.tqdm"}):
        enumerated = enumerated or dotted(iterable.func) == "enumerate"
        iterable = iterable.args[0].value
    return iterable, enumerated


def loader_call(metadata: Mapping, name: cst.Name) -> cst.Call | None | bool:
    """The ``DataLoader(...)`` call a name was assigned from; True for a loader parameter or
    a list of sample tensors; None when the name is not a loader."""
    scope = metadata[ScopeProvider].get(name)
    if scope is None:
        return None
    for assignment in scope[name.value]:
        node = getattr(assignment, "node", None)
        parent = metadata[ParentNodeProvider].get(node) if node is not None else None
        if isinstance(node, cst.Param):
            if _loader_param(node):
                return True
            continue
        grand = metadata[ParentNodeProvider].get(parent) if parent is not None else None
        if isinstance(parent, cst.AssignTarget) and isinstance(grand, cst.Assign):
            value = grand.value
            if isinstance(value, cst.Call) and is_loader_constructor(metadata, value):
                return value
            if isinstance(value, cst.ListComp) and factory_name(metadata, _innermost_call(value.elt)):
                return True
    return None


def _innermost_call(node: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Call):
        node = node.func.value
    return node


def _loader_param(param: cst.Param) -> bool:
    name = param.name.value
    annotation = dotted(param.annotation.annotation) if param.annotation else None
    return ("loader" in name.lower() or name in _LOADER_PARAM_NAMES
            or bool(annotation and annotation.endswith("DataLoader")))


def pins_memory(call: cst.Call | None | bool) -> bool:
    if not isinstance(call, cst.Call):
        return False
    arg = keyword(call, "pin_memory")
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "True"


def batch_shape(name: str, body: cst.CSTNode) -> BatchShape:
    """How the loop body uses a batch variable named ``name``."""
    shapes: set[BatchShape] = set()
    for node in walk(body):
        if isinstance(node, cst.Subscript) and _is(node.value, name):
            index = node.slice[0].slice if len(node.slice) == 1 else None
            value = index.value if isinstance(index, cst.Index) else None
            shapes.add(BatchShape.DICT if isinstance(value, cst.SimpleString) else BatchShape.SEQUENCE)
        elif isinstance(node, cst.Attribute) and _is(node.value, name):
            attr = node.attr.value
            if attr in ("items", "keys", "values", "get"):
                shapes.add(BatchShape.DICT)
            elif attr not in ("to", "cuda", "size", "shape", "dim", "float", "long"):
                shapes.add(BatchShape.UNKNOWN)
            else:
                shapes.add(BatchShape.TENSOR)
        elif isinstance(node, cst.Assign) and _is(node.value, name) and isinstance(
                node.targets[0].target, (cst.Tuple, cst.List)):
            shapes.add(BatchShape.SEQUENCE)
        elif isinstance(node, cst.Arg) and _is(node.value, name):
            shapes.add(BatchShape.TENSOR)
    if len(shapes) == 1:
        return shapes.pop()
    return BatchShape.UNKNOWN


def _is(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def moved_in(body: cst.CSTNode, names: set[str]) -> bool:
    """Is any of ``names`` already moved in the body (``x.to(...)``, ``x.cuda()``, ``batch[0].to``)?"""
    for node in walk(body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in (
                "to", "cuda"):
            if any(isinstance(n, cst.Name) and n.value in names for n in walk(node.func.value)):
                return True
        if isinstance(node, cst.DictComp) and any(
                isinstance(n, cst.Name) and n.value in names for n in walk(node.for_in.iter)):
            return True
    return False


def cpu_only_lengths(metadata: Mapping, body: cst.CSTNode) -> set[str]:
    """Names passed as ``lengths`` to ``pack_padded_sequence``: they must stay on the CPU."""
    found: set[str] = set()
    for node in walk(body):
        if isinstance(node, cst.Call) and any(
                q.endswith("pack_padded_sequence") for q in qualified_names(metadata, node.func) | {
                    dotted(node.func) or ""}):
            args = [a for a in node.args if a.keyword is None]
            lengths = keyword(node, "lengths") or (args[1] if len(args) > 1 else None)
            if lengths is not None and isinstance(lengths.value, cst.Name):
                found.add(lengths.value.value)
    return found
