"""Does a use of a model run it on data, or only build, fill or read it?

A converter (AdaIN's ``torch_to_pytorch.py``) builds layers, hands them to helpers that copy
weights into them (``dst.weight.data.copy_(src.weight)``) and add them to a container
(``seq.add_module(name, layer)``), then saves the ``state_dict``: nothing runs, so nothing
needs the device, and a state dict saved from the GPU would load only where one is.
"""

from __future__ import annotations

from typing import Mapping

import libcst as cst
from libcst.metadata import ParentNodeProvider

from .names import dotted
from .scopes import only_assigned_value, only_binding
from .tree import walk

# A module's methods that build or fill it, or read its weights: calling them runs no data through it.
SETUP_METHODS = frozenset({"add_module", "append", "extend", "insert", "copy_", "load_state_dict", "state_dict",
                           "register_buffer", "register_parameter", "apply", "children", "modules",
                           "named_children", "named_modules", "parameters", "named_parameters", "zero_", "fill_",
                           "size", "dim"})
# Builtins that read no data of their argument.
READS_NOTHING = frozenset({"type", "hasattr", "isinstance", "len", "print", "str", "repr", "id"})
_MAX_DEPTH = 3  # functions followed from the model to where it is used


def runs_a_parameter(function: cst.FunctionDef) -> bool:
    """Does ``function`` call one of its parameters (``model(x)``, ``model.forward(x)``), where a
    model it is handed would run? ``fill_from(src, dst)`` copying weights runs nothing."""
    params = _parameter_names(function)
    for node in walk(function.body):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if isinstance(func, cst.Name) and func.value in params:
            return True
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in params \
                and func.attr.value not in SETUP_METHODS:
            return True
    return False


def may_run(metadata: Mapping, use: cst.Name, depth: int = 0) -> bool:
    """May this read of a model run it on data? Not when it only reads or fills its weights, adds it
    to a container, or hands it to a function of the file that does no more with it."""
    parents = metadata[ParentNodeProvider]
    top: cst.CSTNode = use
    last: str | None = None
    while isinstance(parents.get(top), cst.Attribute) and parents[top].value is top:
        top = parents[top]
        last = top.attr.value  # type: ignore[attr-defined]
    holder = parents.get(top)
    if isinstance(holder, cst.Call) and holder.func is top:
        return last is None or last not in SETUP_METHODS  # ``model(x)``, ``model.encoder(x)``
    if top is not use:
        return False  # ``dst.weight`` read or handed on: its weights, not a run
    if isinstance(holder, cst.Arg) and not holder.star:
        call = parents.get(holder)
        if not isinstance(call, cst.Call):
            return True
        func = call.func
        if isinstance(func, cst.Name) and func.value in READS_NOTHING:
            return False
        if isinstance(func, cst.Attribute) and _adds_a_part(metadata, func):
            return False  # ``seq.add_module(name, layer)``: a part of another module
        function = _own_function(metadata, func)
        param = _parameter_for(function, call, holder) if function is not None else None
        if param is None or depth >= _MAX_DEPTH:
            return True
        return _parameter_runs(metadata, function, param, depth + 1)  # type: ignore[arg-type]
    return True


def _adds_a_part(metadata: Mapping, method: cst.Attribute) -> bool:
    """``seq.add_module(name, m)``, or ``layers.append(m)`` on an ``nn.ModuleList`` (a Python
    list's ``append`` keeps a model that may then run on its own)."""
    if method.attr.value in ("add_module", "register_module"):
        return True
    if method.attr.value not in ("append", "extend", "insert") or not isinstance(method.value, cst.Name):
        return False
    built = only_assigned_value(metadata, method.value)
    name = (dotted(built.func) or "") if isinstance(built, cst.Call) else ""
    return name.rsplit(".", 1)[-1] in ("ModuleList", "Sequential", "ModuleDict")


def handed_to_run_nothing(metadata: Mapping, use: cst.Name) -> bool:
    """``fill_from(item, layer)`` of a function of the file that never runs that parameter."""
    parents = metadata[ParentNodeProvider]
    holder = parents.get(use)
    return isinstance(holder, cst.Arg) and isinstance(parents.get(holder), cst.Call) \
        and _own_function(metadata, parents[holder].func) is not None and not may_run(metadata, use)


def _parameter_runs(metadata: Mapping, function: cst.FunctionDef, name: str, depth: int) -> bool:
    parents = metadata[ParentNodeProvider]
    for node in walk(function.body):
        if not (isinstance(node, cst.Name) and node.value == name):
            continue
        holder = parents.get(node)
        if isinstance(holder, (cst.Param, cst.AssignTarget)) or isinstance(holder, cst.Attribute) \
                and holder.attr is node or isinstance(holder, cst.Arg) and holder.keyword is node:
            continue
        if isinstance(holder, cst.For) and holder.iter is node:
            # ``for layer in layers:``: each one is used as the loop says
            if not isinstance(holder.target, cst.Name) \
                    or _parameter_runs(metadata, function, holder.target.value, depth):
                return True
            continue
        if isinstance(holder, cst.For) and holder.target is node:
            continue
        if may_run(metadata, node, depth):
            return True
    return False


def _own_function(metadata: Mapping, func: cst.BaseExpression) -> cst.FunctionDef | None:
    if not isinstance(func, cst.Name):
        return None
    binding = only_binding(metadata, func)
    binding = metadata[ParentNodeProvider].get(binding) if isinstance(binding, cst.Name) else binding
    return binding if isinstance(binding, cst.FunctionDef) else None


def _parameter_for(function: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> str | None:
    """The parameter of ``function`` that ``arg`` of ``call`` fills (a ``*rest`` too)."""
    if arg.keyword is not None:
        return arg.keyword.value if arg.keyword.value in _parameter_names(function) else None
    index = [a for a in call.args if a.keyword is None and not a.star].index(arg)
    params = [*function.params.posonly_params, *function.params.params]
    if index < len(params):
        return params[index].name.value
    star = function.params.star_arg
    return star.name.value if isinstance(star, cst.Param) else None


def _parameter_names(function: cst.FunctionDef) -> set[str]:
    params = function.params
    found = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    if isinstance(params.star_arg, cst.Param):
        found.add(params.star_arg.name.value)
    return found
