"""Model classes that, once moved to the GPU, would compute with a CPU tensor of their own making.

Read with ``ast`` for the project index, so that a file which builds and moves a model of a class
defined in another file knows what that class does after construction (graphsage's aggregator,
imported by its driver: its ``forward`` takes lists of ids and builds ``torch.zeros(...)`` and
``torch.LongTensor(ids)``; in library code devmod gives those no device, so the model must stay
with its data). The per-file rules ask the same question of a file's own classes with libcst
(``groups._unplaceable_inside``); this is its reading for other files, and it errs towards
"placeable": a parameter that may be a tensor gives the method a device to follow.
"""

from __future__ import annotations

import ast
from functools import lru_cache

from .ast_walk import ast_dotted, ast_nodes
from .tensor_names import COUNT_NAME, NON_TENSOR_PARAMS, TORCH_ONLY_ATTRIBUTES

_TORCH_ONLY = TORCH_ONLY_ATTRIBUTES | {"size"}  # ``c.size(0)`` too
_MOVES = frozenset({"to", "cuda"})


def tensors_it_cannot_place(klass: ast.ClassDef, makers: frozenset[str], nodes: list[ast.AST]) -> dict[str, int]:
    """Method -> the line of a tensor that it (or a method of ``self`` it calls) makes with ``makers``
    (factories, ``torch.LongTensor(ids)``) with no device, after construction, in a method with no
    tensor input to take one from, where the tensor meets others (an operand, a receiver, an
    argument of a part). ``nodes``: the class's nodes, walked once by the caller. Empty for almost
    every class."""
    tails = _tails(makers)  # ``zeros``, ``LongTensor``: a cheap test before the dotted name
    calls = [c for c in nodes if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
             and c.func.attr in tails and ast_dotted(c.func) in makers
             and not any(k.arg in ("device", "out") for k in c.keywords)]
    methods = {f.name: f for f in klass.body if isinstance(f, ast.FunctionDef)}
    if not calls or _device_of_its_own(nodes, methods):
        return {}
    building = _construction_methods(methods)
    found: dict[str, int] = {}
    for name, method in methods.items():
        inside = [c for c in calls if method.lineno <= c.lineno <= (method.end_lineno or method.lineno)]
        if not inside or name in building or not method.args.args or method.args.args[0].arg != "self":
            continue
        method_nodes = ast_nodes(method)
        if _may_take_a_device(method, method_nodes):
            continue
        moved = {id(n) for call in method_nodes if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                 and call.func.attr in _MOVES for n in ast_nodes(call.func.value)}
        line = next((c.lineno for c in inside if id(c) not in moved and _meets_others(c, method_nodes)), None)
        if line is not None:
            found[name] = line
    grown = bool(found)
    while grown:  # ``forward`` that calls ``self.aggregate(ids)``, which makes the tensor
        grown = False
        for name, method in methods.items():
            if name in found or name in building:
                continue
            line = next((found[n.func.attr] for n in ast_nodes(method) if isinstance(n, ast.Call)
                         and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                         and n.func.value.id == "self" and n.func.attr in found), None)
            if line is not None:
                found[name], grown = line, True
    return found


@lru_cache(maxsize=4)
def _tails(makers: frozenset[str]) -> frozenset[str]:
    return frozenset(name.rsplit(".", 1)[-1] for name in makers)


def _device_of_its_own(nodes: list[ast.AST], methods: dict[str, ast.FunctionDef]) -> bool:
    """``self.device`` set, or a registered buffer: devmod takes the device from there."""
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and node.attr == "device" and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer":
            return True
    return "device" in methods


def _construction_methods(methods: dict[str, ast.FunctionDef]) -> set[str]:
    """``__init__`` and the methods it calls on ``self``, transitively."""
    found, todo = set(), ["__init__"]
    while todo:
        name = todo.pop()
        if name in found or name not in methods:
            continue
        found.add(name)
        todo += [n.func.attr for n in ast_nodes(methods[name]) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                 and n.func.value.id == "self"]
    return found


def _may_take_a_device(method: ast.FunctionDef, nodes: list[ast.AST]) -> bool:
    """Has the method an input that may be a tensor: annotated so, forward's first input (unless
    it is a container, a count or a name for configuration), read with a torch-only attribute, or
    handed to one of the model's own parts or to a ``torch.*_like`` function?"""
    args = method.args
    params = [a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")]
    # ``first_samples=None``: on the default path there is no tensor to ask (as the rules read it)
    names = {a.arg for a in params} - _defaulting_to_none(args)
    if any(a.annotation is not None and ast_dotted(a.annotation).rsplit(".", 1)[-1] == "Tensor" for a in params):
        return True
    if method.name == "forward" and params:
        first = params[0].arg
        if first not in NON_TENSOR_PARAMS and not COUNT_NAME.search(first) and not _container(first, nodes):
            return True
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names \
                and node.attr in _TORCH_ONLY:
            return True
        if isinstance(node, ast.Call) and node.args and _root(node.args[0]) in names and (
                isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self" or ast_dotted(node.func).endswith("_like")):
            return True
    return False


def _defaulting_to_none(args: ast.arguments) -> set[str]:
    positional = [*args.posonlyargs, *args.args]
    pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults),
             *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)]
    return {a.arg for a, d in pairs if isinstance(d, ast.Constant) and d.value is None}


def _container(name: str, nodes: list[ast.AST]) -> bool:
    """Items hashed into a set (``{ids[k]}``), read by string key or mapping method, or unpacked."""
    for node in nodes:
        if isinstance(node, ast.Set) or isinstance(node, ast.Call) and ast_dotted(node.func) in ("set", "frozenset"):
            items = node.elts if isinstance(node, ast.Set) else [
                e for a in node.args for e in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
            if any(isinstance(i, ast.Subscript) and _root(i) == name for i in items):
                return True
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return True
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name \
                and node.attr in ("items", "keys", "values", "get"):
            return True
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name \
                and any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets):
            return True
    return False


def _root(node: ast.AST) -> str:
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _meets_others(call: ast.Call, nodes: list[ast.AST]) -> bool:
    """The tensor (or the name it is bound to) is an operand, the receiver of a method given
    arguments (``weights.mm(rows)``), or handed to one of the model's parts (``self.table(ids)``)."""
    bound = {t.id for n in nodes if isinstance(n, ast.Assign) and _made_by(n.value, call)
             for t in n.targets if isinstance(t, ast.Name)}

    def it(node: ast.AST) -> bool:
        return node is call or isinstance(node, ast.Name) and node.id in bound
    for node in nodes:
        if isinstance(node, ast.BinOp) and (it(node.left) or it(node.right)):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if it(node.func.value) and (node.args or node.keywords) and node.func.attr not in _MOVES:
                return True
            if isinstance(node.func.value, ast.Name) and node.func.value.id == "self" and any(map(it, node.args)):
                return True
    return False


def _made_by(value: ast.AST, call: ast.Call) -> bool:
    """``value`` is ``call`` or a method chain on it (``torch.FloatTensor(1, n).zero_()``), also
    wrapped in ``Variable``."""
    while value is not call and isinstance(value, ast.Call):
        if isinstance(value.func, ast.Attribute):
            value = value.func.value
        elif ast_dotted(value.func).endswith("Variable") and len(value.args) == 1:
            value = value.args[0]  # ``Variable(torch.FloatTensor(1, n).zero_())``
        else:
            break
    return value is call
