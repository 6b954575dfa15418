"""DM304 legacy-cuda: pre-0.4 CUDA idioms become plain tensors on the shared device.

Why: ``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``, the
``torch.cuda.FloatTensor(...)`` constructors and ``Variable(...)`` wrappers come from
PyTorch before 0.4. They pick a device through the tensor *type*, which crashes on
machines without CUDA when the flag is wrong, scatters the choice of device over the
file, and hides the dtype ("Input type (torch.FloatTensor) and weight type
(torch.cuda.FloatTensor) should be the same"). The modern spelling names dtype and
device explicitly:

- ``Tensor(n, 1).fill_(1.0)`` -> ``torch.ones(n, 1, device=device)`` (``fill_(0)`` ->
  ``torch.zeros``, other values -> ``torch.full((n, 1), v, ...)``), a bare
  ``Tensor(n, 1)`` -> ``torch.empty(...)``, ``Tensor([1, 2])`` / ``Tensor(np_array)`` ->
  ``torch.tensor(..., dtype=..., device=device)``; the same for
  ``torch.cuda.FloatTensor(...)`` used directly.
- ``x.type(Tensor)`` -> ``x.to(device, torch.float32)``; the dtype is exact for every
  type (``LongTensor`` -> ``torch.int64``, ``ByteTensor`` -> ``torch.uint8``, ...).
- The alias definition is removed once no use of it is left; uses that cannot be
  rewritten (``Tensor(n)`` with an unknown ``n`` may be a size or data,
  ``isinstance(x, Tensor)``) stay with the alias, and are reported only where the alias
  is CUDA alone: one that also names the CPU type (``... if cuda else torch.FloatTensor``,
  or a CPU default replaced under ``if use_cuda:``) follows the machine, which is correct.
- ``Variable(x)`` -> ``x`` and ``Variable(x, requires_grad=True)`` ->
  ``x.requires_grad_()``. ``Variable`` always returned a detached tensor, so where ``x``
  may carry a graph (anything but a fresh tensor or a DataLoader batch) the result is
  ``x.detach()``. ``volatile=`` has had no effect since 0.4 and is dropped; the import
  goes once nothing uses it; ``x = Variable(x)`` disappears. A wrapper that passes its
  caller's keywords on (``Variable(t, **kwargs)``) is left as it is.

Where no device is safe (a model's ``__init__``, Dataset code) nothing is rewritten and
the use is reported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Mapping

import libcst as cst
from libcst.metadata import Assignment, ParentNodeProvider, ScopeProvider

from ..analysis.candidates import FileFacts
from ..analysis.loops import loader_source
from ..analysis.modules import called_on_import, single_assigned_value
from ..analysis.guards import gpu_only
from ..analysis.names import dotted, keyword, keyword_arg, method_call, positional, qualified_names, \
    torch_module_alias
from ..analysis.roles import factory_name, is_loader_constructor
from ..analysis.tensors import bound_before
from ..analysis.scopes import scope_bindings
from ..analysis.tree import nodes_of, walk
from .base import Invalid, Rule, Valid

LEGACY_DTYPES = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
                 "BFloat16Tensor": "bfloat16", "LongTensor": "int64", "IntTensor": "int32",
                 "ShortTensor": "int16", "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool"}
VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# Methods that keep a fresh tensor fresh (no autograd history appears).
_FRESH_CHAIN = frozenset({"fill_", "zero_", "normal_", "uniform_", "float", "double", "half", "long", "int",
                          "bool", "byte", "to", "cuda", "cpu", "type", "view", "reshape", "unsqueeze", "squeeze",
                          "permute", "contiguous", "t", "transpose", "expand", "clone"})
_SIZE_ATTRIBUTES = frozenset({"shape"})
_LOADER_WORDS = ("loader",)


def legacy_dtype(metadata: Mapping, node: cst.CSTNode) -> tuple[str, bool] | None:
    """``("float32", True)`` for ``torch.cuda.FloatTensor``, ``("float32", False)`` for ``torch.FloatTensor``."""
    for name in qualified_names(metadata, node):
        parts = name.split(".")
        if parts[:2] == ["torch", "cuda"] and len(parts) == 3 and parts[2] in LEGACY_DTYPES:
            return LEGACY_DTYPES[parts[2]], True
        if parts[0] == "torch" and len(parts) == 2 and parts[1] in LEGACY_DTYPES:
            return LEGACY_DTYPES[parts[1]], False
    return None


def _string_dtype(node: cst.CSTNode) -> str | None:
    """``"torch.cuda.FloatTensor"`` as a string (``x.type("torch.cuda.FloatTensor")``)."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        if isinstance(value, str) and value.startswith("torch.cuda.") and value[11:] in LEGACY_DTYPES:
            return LEGACY_DTYPES[value[11:]]
    return None


@dataclass
class _Alias:
    """A name bound only to legacy tensor types of one dtype, in one scope."""

    dtype: str
    definitions: list[cst.Assign]
    pending: set[cst.Name] = field(default_factory=set)  # uses not (yet) rewritten


class LegacyCuda(Rule):
    CODE = "DM304"
    NAME = "legacy-cuda"
    SUMMARY = "`torch.cuda.FloatTensor` aliases/constructors and `Variable(...)` become tensors on the shared device"
    ERROR = "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"
    TRIGGERS = ("Tensor", "Variable")
    ORDER = 15

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # Every fix and report needs a CUDA tensor type (``torch.cuda.FloatTensor``, also as a
        # string in ``.type(...)``) or ``torch.autograd.Variable``.
        if "cuda" not in facts.text and "Variable" not in facts.text:
            return False
        wanted = VARIABLE | {f"torch.cuda.{kind}" for kind in LEGACY_DTYPES}
        if any((node.attr in LEGACY_DTYPES or node.attr == "Variable") and facts.qnames(node) & wanted
               for node in facts.nodes(ast.Attribute)):
            return True
        if any(facts.qnames(node) & wanted for node in facts.nodes(ast.Name)):
            return True
        return any(isinstance(node.value, str) and node.value.startswith("torch.cuda.")
                   for node in facts.nodes(ast.Constant))
    REPLACES_CUDA = True

    # -- planning -------------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        self._aliases: dict[str, _Alias] = {}          # keyed by id of the defining scope + name
        self._alias_of_use: dict[cst.Name, _Alias] = {}
        self._alias_of_def: dict[cst.Assign, _Alias] = {}
        self._alias_nodes: set[cst.CSTNode] = set()    # nodes inside alias definitions
        self._variable_refs: dict[cst.ImportAlias, set[cst.Name]] = {}
        self._variable_import_of_use: dict[cst.Name, cst.ImportAlias] = {}
        self._has_torch = torch_module_alias(node) is not None
        text = self.module_text(node)
        self._default_dtype_changed = "set_default_dtype" in text or "set_default_tensor_type" in text
        self._plan_aliases(node)
        self._plan_variable_imports(node)
        return True

    def _plan_aliases(self, module: cst.Module) -> None:
        scopes = self.metadata[ScopeProvider]
        for node in nodes_of(module, cst.Assign):
            if not (len(node.targets) == 1
                    and isinstance(node.targets[0].target, cst.Name)):
                continue
            typed = self._alias_dtype(node.value)
            name = node.targets[0].target.value
            scope = scopes.get(node)
            if typed is None or scope is None:
                continue
            key = f"{id(scope)}:{name}"
            if key in self._aliases:
                continue
            bindings = [b for b in scope.assignments[name] if isinstance(b, Assignment)]
            assigns = [self._assign_of(b.node) for b in bindings]
            found = [self._alias_dtype(a.value) if a is not None else None for a in assigns]
            if any(f is None or f[0] != typed[0] for f in found) or not any(f[1] for f in found if f):
                continue  # also bound to something else, or never to a CUDA type: not our alias
            dtype = typed[0]
            alias = _Alias(dtype, [a for a in assigns if a is not None])
            for binding in bindings:
                for ref in binding.references:
                    if isinstance(ref.node, cst.Name):
                        alias.pending.add(ref.node)
                        self._alias_of_use[ref.node] = alias
            self._aliases[key] = alias
            for assign in alias.definitions:
                self._alias_of_def[assign] = alias
                self._alias_nodes.update(walk(assign))

    def _alias_dtype(self, value: cst.BaseExpression) -> tuple[str, bool] | None:
        """``torch.cuda.X``, ``torch.X`` or ``torch.cuda.X if flag else torch.X`` (either order):
        X's dtype, and whether a CUDA type is among them."""
        branches = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
        if any(isinstance(b, cst.Call) for b in branches):
            return None  # ``block = torch.cuda.FloatTensor(n)``: a tensor, not the type (ProxylessNAS)
        found = [legacy_dtype(self.metadata, b) for b in branches]
        if any(f is None for f in found):
            return None
        dtypes = {f[0] for f in found if f}
        return (dtypes.pop(), any(f[1] for f in found if f)) if len(dtypes) == 1 else None

    def _assign_of(self, target: cst.CSTNode) -> cst.Assign | None:
        parents = self.metadata[ParentNodeProvider]
        parent = parents.get(target)
        assign = parents.get(parent) if parent is not None else None
        if isinstance(parent, cst.AssignTarget) and isinstance(assign, cst.Assign) and len(assign.targets) == 1:
            return assign
        return None

    def _plan_variable_imports(self, module: cst.Module) -> None:
        scopes = self.metadata[ScopeProvider]
        for node in nodes_of(module, cst.ImportFrom):
            if isinstance(node.names, cst.ImportStar):
                continue
            if dotted(node.module or cst.Name("_")) not in ("torch.autograd", "torch.autograd.variable"):
                continue
            for alias in node.names:
                if dotted(alias.name) != "Variable":
                    continue
                bound = alias.asname.name.value if alias.asname else "Variable"  # type: ignore[union-attr]
                scope = scopes.get(node)
                if scope is None:
                    continue
                refs = {r.node for b in scope.assignments[bound] if getattr(b, "node", None) is node or b.node is alias
                        for r in b.references if isinstance(r.node, cst.Name)}
                self._variable_refs[alias] = refs
                for ref in refs:
                    self._variable_import_of_use[ref] = alias

    # -- rewriting calls ----------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if qualified_names(self.metadata, original_node.func) & VARIABLE:
            return self._unwrap_variable(original_node, updated_node)
        if method_call(original_node, "fill_", "zero_"):
            inner = original_node.func.value  # type: ignore[union-attr]
            shape = self._shape(inner) if isinstance(inner, cst.Call) and self._constructor_dtype(inner) else None
            if isinstance(inner, cst.Call) and shape is not None and shape[0] == "sizes" \
                    and self._fold_value(original_node):
                return self._rewrite_constructor(inner, updated_node.func.value, original_node, updated_node)
        if method_call(original_node, "type") and len(original_node.args) == 1 and original_node.args[0].keyword is None:
            return self._rewrite_type(original_node, updated_node)
        if self._constructor_dtype(original_node) and not self._folded_by_parent(original_node):
            return self._rewrite_constructor(original_node, updated_node, None, None)
        return updated_node

    def _constructor_dtype(self, call: cst.Call) -> str | None:
        """The dtype of ``Tensor(...)`` (an alias) or ``torch.cuda.FloatTensor(...)``."""
        if isinstance(call.func, cst.Name) and call.func in self._alias_of_use:
            return self._alias_of_use[call.func].dtype
        found = legacy_dtype(self.metadata, call.func)
        return found[0] if found and found[1] else None

    def _folded_by_parent(self, call: cst.Call) -> bool:
        parents = self.metadata[ParentNodeProvider]
        attribute = parents.get(call)
        outer = parents.get(attribute) if isinstance(attribute, cst.Attribute) else None
        return (isinstance(outer, cst.Call) and outer.func is attribute and method_call(outer, "fill_", "zero_")
                and self._fold_value(outer) is not None and self._shape(call) is not None
                and self._shape(call)[0] == "sizes")

    @staticmethod
    def _fold_value(call: cst.Call) -> str | None:
        """"zeros" / "ones" / "full" for ``.zero_()`` / ``.fill_(v)`` with one plain value."""
        if method_call(call, "zero_"):
            return "zeros" if not call.args else None
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return None
        value = call.args[0].value
        if isinstance(value, (cst.Integer, cst.Float)):
            number = float(value.evaluated_value)
            return "zeros" if number == 0 else "ones" if number == 1 else "full"
        return "full"

    def _shape(self, call: cst.Call) -> tuple[str, list[cst.Arg]] | None:
        """("sizes", args) for ``T(n, 1)`` / ``T(x.size())``, ("data", args) for ``T([1, 2])`` /
        ``T(np_array)``; None where the legacy constructor's overload is unclear."""
        args = list(call.args)
        if not args or any(a.keyword is not None or a.star == "**" for a in args):
            return None
        if any(a.star == "*" for a in args):
            return ("sizes", args) if len(args) == 1 else None
        if len(args) >= 2:
            data_like = (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp, cst.SimpleString)
            return None if any(isinstance(a.value, data_like) for a in args) else ("sizes", args)
        value = args[0].value
        if isinstance(value, cst.Integer) or self._is_size(value):
            return "sizes", args
        if isinstance(value, cst.Name):
            value = single_assigned_value(self.metadata, value) or value  # ``labels = np.array(...)``
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)) or self._numpy_array(value):
            return "data", args
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("tuple", "list"):
            return "data", args  # a sequence is always data (sizes are integers or a torch.Size)
        return None

    def _is_size(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Attribute) and value.attr.value in _SIZE_ATTRIBUTES:
            return True
        if isinstance(value, cst.Call) and method_call(value, "size") and not value.args:
            return True
        return isinstance(value, cst.Call) and "torch.Size" in qualified_names(self.metadata, value.func)

    def _numpy_array(self, value: cst.BaseExpression) -> bool:
        """``np.random.normal(...)``, ``np.array(...)``: NumPy calls that return arrays (not scalar types)."""
        if not isinstance(value, cst.Call):
            return False
        names = qualified_names(self.metadata, value.func)
        return any(n.startswith("numpy.") and not n.rsplit(".", 1)[-1].startswith(("int", "uint", "float", "bool",
                                                                                  "complex"))
                   for n in names)

    def _device(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        device = self.device_for(node)
        if isinstance(device, cst.Name) and not bound_before(self.metadata, node, device.value):
            return None
        return device

    def _dtype_expression(self, dtype: str) -> cst.Attribute:
        return cst.Attribute(cst.Name(self.torch_alias), cst.Name(dtype))

    def _rewrite_constructor(self, call: cst.Call, updated_call: cst.BaseExpression, fill: cst.Call | None,
                             updated_fill: cst.Call | None) -> cst.BaseExpression:
        """``Tensor(n, 1)[.fill_(v)]`` -> ``torch.empty/ones/zeros/full/tensor(..., device=device)``."""
        node = fill or call
        updated = updated_fill or updated_call
        dtype = self._constructor_dtype(call)
        shape = self._shape(call)
        assert dtype is not None
        if shape is None or (fill is not None and shape[0] != "sizes"):
            if gpu_only(self.metadata, node):
                return updated  # ``if x.is_cuda: torch.cuda.FloatTensor(mean)``: correct where it runs
            self.report(node, "legacy CUDA tensor constructor not rewritten: cannot tell whether its argument "
                              "is a size or data; write torch.empty(size, ...) or torch.tensor(data, ...) with "
                              "device=")
            return updated
        device = self._device(call)
        if device is None and gpu_only(self.metadata, node):
            return updated  # ``reserve_gpu_memory(gpu_index, mb)``: GPU-only by design, correct where it runs
        if device is None or not self._has_torch:
            self.report(node, "legacy CUDA tensor constructor not rewritten: "
                        + (self.devices.why_no_device(call) if device is None else "torch is not imported"))
            return updated
        assert isinstance(updated_call, cst.Call)
        kind, _ = shape
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated_call.args]
        fill_kind = self._fold_value(fill) if fill is not None else None
        if kind == "data":
            factory, values, with_dtype = "tensor", args, True
        elif fill_kind == "full":
            assert updated_fill is not None
            value = updated_fill.args[0].value
            values = [cst.Arg(self._size_tuple(args)), cst.Arg(value)]
            factory = "full"
            with_dtype = dtype != "float32" or not _float_literal(value) or self._default_dtype_changed
        else:
            factory = fill_kind or "empty"
            values = args
            with_dtype = dtype != "float32" or self._default_dtype_changed
        new_args = list(values)
        if with_dtype:
            new_args.append(keyword_arg("dtype", self._dtype_expression(dtype)))
        new_args.append(keyword_arg("device", device))
        new_args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in new_args]
        replacement = cst.Call(cst.Attribute(cst.Name(self.torch_alias), cst.Name(factory)), new_args)
        replacement = replacement.with_changes(lpar=updated.lpar, rpar=updated.rpar)  # type: ignore[union-attr]
        result = self.fix(node, updated, replacement,
                          f"legacy CUDA tensor constructor -> `{self.torch_alias}.{factory}(..., device=)`")
        if result is replacement:
            self._used(call.func)
        return result

    @staticmethod
    def _size_tuple(args: list[cst.Arg]) -> cst.BaseExpression:
        """The ``size`` argument of ``torch.full``: ``x.size()`` as is, else a tuple."""
        if len(args) == 1 and not args[0].star and not isinstance(args[0].value, cst.Integer):
            return args[0].value
        elements: list[cst.BaseElement] = []
        for arg in args:
            elements.append(cst.StarredElement(arg.value) if arg.star == "*" else cst.Element(arg.value))
        if len(elements) == 1:
            elements[0] = elements[0].with_changes(comma=cst.Comma())
        return cst.Tuple(elements)

    def _rewrite_type(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``x.type(Tensor)`` / ``x.type(torch.cuda.LongTensor)`` -> ``x.to(device, torch.int64)``."""
        argument = original.args[0].value
        if isinstance(argument, cst.Name) and argument in self._alias_of_use:
            dtype: str | None = self._alias_of_use[argument].dtype
        else:
            found = legacy_dtype(self.metadata, argument)
            dtype = found[0] if found and found[1] else _string_dtype(argument)
        if dtype is None:
            return updated
        device = self._device(original)
        if device is None and isinstance(argument, cst.Name) and argument in self._alias_of_use and all(
                gpu_only(self.metadata, d) for d in self._alias_of_use[argument].definitions
                if (legacy_dtype(self.metadata, d.value) or (None, False))[1]):
            return updated  # ``if cuda: dtype = torch.cuda.FloatTensor``: the caller's switch decides
        if device is None or not self._has_torch:
            self.report(original, "`.type(<CUDA tensor type>)` not rewritten: "
                        + (self.devices.why_no_device(original) if device is None else "torch is not imported"))
            return updated
        func = updated.func
        assert isinstance(func, cst.Attribute)
        replacement = updated.with_changes(
            func=func.with_changes(attr=cst.Name("to")),
            args=[cst.Arg(device, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                  cst.Arg(self._dtype_expression(dtype))])
        result = self.fix(original, updated, replacement, f"`.type(<tensor type>)` -> `.to(device, torch.{dtype})`")
        if result is replacement:
            self._used(argument)
        return result

    def _used(self, node: cst.CSTNode) -> None:
        """A use of an alias was rewritten: one fewer reason to keep its definition."""
        if isinstance(node, cst.Name) and node in self._alias_of_use:
            self._alias_of_use[node].pending.discard(node)

    # -- Variable -------------------------------------------------------------------------------
    def _unwrap_variable(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        args = positional(original)
        extra = [a for a in original.args if a.keyword is not None and a.keyword.value not in
                 ("requires_grad", "volatile")]
        if original.args and all(a.star for a in original.args) or any(a.star == "**" for a in original.args):
            # ``Variable(*args, **kwargs)``, ``Variable(t, **opts)`` in a pass-through wrapper: whatever it
            # gets (``requires_grad=True`` from a caller), as is
            return updated
        if len(args) != 1 or args[0].star or extra or len(original.args) - len(args) > 2:
            self.report(original, "`Variable(...)` with these arguments is not rewritten; a tensor is used as is "
                                  "since PyTorch 0.4")
            return updated
        index = original.args.index(args[0])
        inner = updated.args[index].value
        fresh = self._fresh(args[0].value)
        requires = keyword(original, "requires_grad")
        requires_value = requires.value if requires is not None else None
        result: cst.BaseExpression = inner if fresh else _method(inner, "detach")
        wants_grad = requires_value is not None and not (
            isinstance(requires_value, cst.Name) and requires_value.value == "False")
        if wants_grad:
            updated_requires = keyword(updated, "requires_grad")
            assert updated_requires is not None
            flag = [] if isinstance(requires_value, cst.Name) and requires_value.value == "True" \
                else [cst.Arg(updated_requires.value)]
            result = _method(result, "requires_grad_", flag)
        if result is inner:
            result = self._parenthesized_for_parent(original, inner)
        result = result.with_changes(lpar=[*updated.lpar, *result.lpar], rpar=[*result.rpar, *updated.rpar])
        steps = ([] if fresh else ["`.detach()` (a new leaf, as `Variable` made)"]) + (
            ["`.requires_grad_()`"] if wants_grad else [])
        message = ("`Variable(...)` is gone since PyTorch 0.4: " + " then ".join(steps) if steps
                   else "`Variable(...)` is a no-op wrapper since PyTorch 0.4: use the tensor")
        fixed = self.fix(original, updated, result, message)
        if fixed is result:
            alias = self._variable_import_of_use.get(original.func)  # type: ignore[arg-type]
            if alias is not None:
                self._variable_refs[alias].discard(original.func)  # type: ignore[arg-type]
        return fixed

    def _parenthesized_for_parent(self, original: cst.Call, inner: cst.BaseExpression) -> cst.BaseExpression:
        parent = self.metadata[ParentNodeProvider].get(original)
        needs_atom = isinstance(parent, (cst.Attribute, cst.Subscript)) or (
            isinstance(parent, cst.Call) and parent.func is original)
        return _atom(inner) if needs_atom else inner

    def _fresh(self, expr: cst.BaseExpression) -> bool:
        """Surely without autograd history: ``Variable(x)`` (which detached) may become ``x``."""
        node = expr
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in _FRESH_CHAIN and not called_on_import(self.metadata, node.func):
            node = node.func.value
        if isinstance(node, cst.Attribute) and node.attr.value == "data":
            return True
        if isinstance(node, cst.Call):
            if qualified_names(self.metadata, node.func) & VARIABLE:
                return True  # it detached already
            if self._constructor_dtype(node) or legacy_dtype(self.metadata, node.func):
                return True
            if "torch.from_numpy" in qualified_names(self.metadata, node.func):
                return True
            return factory_name(self.metadata, node) is not None and keyword(node, "requires_grad") is None
        if isinstance(node, cst.Name):
            return self._batch_variable(node)
        return False

    def _batch_variable(self, name: cst.Name) -> bool:
        """Bound only by ``for <.., name, ..> in <DataLoader>`` and re-wrappings of itself
        (``name = Variable(name.cuda())``): a batch from the loader has no history."""
        scope = self.metadata[ScopeProvider].get(name)
        if scope is None:
            return False
        bindings = scope_bindings(scope, name.value)
        if not bindings or any(b.scope is not scope for b in bindings):
            return False
        loops = 0
        for binding in bindings:
            target = getattr(binding, "node", None)
            loop = self._loop_of_target(target)
            if loop is not None:
                if not self._iterates_loader(loop.iter):
                    return False
                loops += 1
                continue
            assign = self._assign_of(target) if target is not None else None
            if assign is None or not self._rewraps(assign.value, name.value):
                return False
        return loops > 0

    def _loop_of_target(self, target: cst.CSTNode | None) -> cst.For | None:
        parents = self.metadata[ParentNodeProvider]
        node = target
        if node is None:
            return None
        while True:
            parent = parents.get(node)
            if isinstance(parent, (cst.Element, cst.Tuple, cst.List)):
                node = parent
                continue
            return parent if isinstance(parent, cst.For) and parent.target is node else None

    def _iterates_loader(self, iterable: cst.BaseExpression) -> bool:
        source, enumerated = loader_source(self.metadata, iterable)
        if isinstance(source, cst.Call):
            return is_loader_constructor(self.metadata, source)
        if not isinstance(source, cst.Name):
            return False
        scope = self.metadata[ScopeProvider].get(source)
        bindings = scope_bindings(scope, source.value)
        if len(bindings) == 1:
            assign = self._assign_of(getattr(bindings[0], "node", None))
            if assign is not None:
                return isinstance(assign.value, cst.Call) and is_loader_constructor(self.metadata, assign.value)
        return source.value.lower().endswith(_LOADER_WORDS)

    def _rewraps(self, value: cst.BaseExpression, variable: str) -> bool:
        """``Variable(x.cuda())``, ``x.type(Tensor)``, ``x.to(device)``: the variable itself, converted."""
        node = value
        while True:
            if isinstance(node, cst.Call) and qualified_names(self.metadata, node.func) & VARIABLE and node.args:
                node = node.args[0].value
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and node.func.attr.value in _FRESH_CHAIN:
                node = node.func.value
            else:
                break
        return isinstance(node, cst.Name) and node.value == variable and node is not value

    # -- removing what is left unused -------------------------------------------------------------
    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock):
        return self._drop_statements(original_node, updated_node)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self._drop_statements(original_node, updated_node)

    def _drop_statements(self, original, updated):
        kept: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        changed = False
        for old, new in zip(original.body, updated.body):
            plan = self._droppable(old, new)
            if plan is not None:
                reason, replacement = plan
                token = replacement or cst.SimpleStatementLine([cst.Pass()])
                if self.fix(old, new, token, reason) is token:
                    changed = True
                    if replacement is not None:
                        new = replacement
                    else:
                        carried.extend(_detached_comments(new.leading_lines))
                        continue
            if carried:
                own = list(new.leading_lines)
                if own and own[0].comment is None:
                    while carried and carried[-1].comment is None:
                        carried.pop()  # no doubled blank lines
                new = new.with_changes(leading_lines=[*carried, *own])
                carried = []
            kept.append(new)
        if not changed:
            return updated
        if not kept:
            kept = [cst.SimpleStatementLine([cst.Pass()], leading_lines=carried)]
        return updated.with_changes(body=kept)

    def _droppable(self, old: cst.BaseStatement, new: cst.BaseStatement
                   ) -> tuple[str, cst.SimpleStatementLine | None] | None:
        """Why ``old`` can go now (and what replaces it, None: nothing), or None to keep it."""
        if self.state.role.imported and any(old is stmt for stmt in self.tree.body):
            return None  # another file may take the name from here (``from model import *``)
        if isinstance(old, cst.If):
            return ("legacy tensor type alias no longer used", None) if self._alias_only_if(old) else None
        if not (isinstance(old, cst.SimpleStatementLine) and len(old.body) == 1) or _trailing_comment(old):
            return None
        small = old.body[0]
        if isinstance(small, cst.Assign) and small in self._alias_of_def:
            alias = self._alias_of_def[small]
            if not alias.pending and self._had_uses(alias):
                return "legacy tensor type alias no longer used", None
        if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call) \
                and qualified_names(self.metadata, small.value.func) & VARIABLE and _self_assignment(new):
            return "`x = Variable(x)` is a no-op once `Variable` is gone", None
        if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            unused = [a for a in small.names if a in self._variable_refs and not self._variable_refs[a]
                      and self._variable_had_uses(a)]
            if not unused:
                return None
            if len(unused) == len(small.names):
                return "`Variable` import no longer used", None
            statement = new
            assert isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.ImportFrom)
            names = [n for o, n in zip(small.names, statement.body[0].names) if o not in unused]
            names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return ("`Variable` import no longer used",
                    statement.with_changes(body=[statement.body[0].with_changes(names=names)]))
        return None

    def _had_uses(self, alias: _Alias) -> bool:
        return any(u for u, a in self._alias_of_use.items() if a is alias)

    def _variable_had_uses(self, alias: cst.ImportAlias) -> bool:
        return any(a is alias for a in self._variable_import_of_use.values())

    def _alias_only_if(self, node: cst.If) -> bool:
        """``if cuda: T = torch.cuda.X`` / ``else: T = torch.X`` with every alias unused now."""
        blocks = [node.body]
        if isinstance(node.orelse, cst.Else):
            blocks.append(node.orelse.body)
        elif node.orelse is not None:
            return False
        for block in blocks:
            for stmt in block.body:
                if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                        and stmt.body[0] in self._alias_of_def):
                    return False
                alias = self._alias_of_def[stmt.body[0]]  # type: ignore[index]
                if alias.pending or not self._had_uses(alias):
                    return False
        return True

    # -- anything else mentioning a CUDA tensor type ---------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        found = legacy_dtype(self.metadata, node)
        if found is None or not found[1] or node in self._alias_nodes:
            return
        parents = self.metadata[ParentNodeProvider]
        parent = parents.get(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            return  # a constructor: leave_Call
        while isinstance(parent, cst.Element) and isinstance(parents.get(parent), cst.Tuple) \
                and isinstance(parents.get(parents.get(parent)), cst.Arg):
            parent = parents.get(parents.get(parent))  # ``isinstance(x, (torch.LongTensor, torch.cuda.LongTensor))``
        if isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if isinstance(call, cst.Call) and (method_call(call, "type") or "set_default_tensor_type" in (
                    dotted(call.func) or "")):
                return  # the global default type is another rule's finding
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) \
                    and call.func.value in ("isinstance", "issubclass") and parent is not call.args[0]:
                return  # ``isinstance(x.data, torch.cuda.FloatTensor)``: a test that places nothing
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            return  # ``torch.cuda.HalfTensor in buckets``, ``t.type() == ...``: compared, never built
        if gpu_only(self.metadata, node):
            return  # ``torch.cuda.FloatTensor if self.use_gpu() else torch.FloatTensor`` (SPADE): the author's choice
        self.report(node, "a CUDA tensor type used here is not rewritten; use a dtype and device= instead")

    def visit_Name(self, node: cst.Name) -> None:
        alias = self._alias_of_use.get(node)
        if alias is None:
            return
        parents = self.metadata[ParentNodeProvider]
        parent = parents.get(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            return
        if isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if isinstance(call, cst.Call) and method_call(call, "type"):
                return
        if _has_a_cpu_choice(alias):
            return  # ``cast = torch.FloatTensor; if on_gpu: cast = torch.cuda.FloatTensor``: the author's switch
        self.report(node, "this use of a legacy CUDA tensor type alias is not rewritten; the alias stays")

    VALID = [
        Valid('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "valid = torch.ones(4, 1, device=device)\nx = torch.randn(4).to(device, torch.float32)\n"),
        Valid("import torch\nfrom torch import Tensor\n\ndef f(x: Tensor) -> Tensor:\n"
              "    return torch.FloatTensor([1.0]) + x\n"),
        # a wrapper passing on its caller's keywords (``requires_grad=True``) keeps them
        Valid("import torch\nfrom torch.autograd import Variable\n\ndef variable(t, **kwargs):\n"
              "    return Variable(t, **kwargs)\n"),
    ]
    INVALID = [
        Invalid(
            "import numpy as np\nimport torch\nfrom torch.autograd import Variable\n\n"
            "cuda = True if torch.cuda.is_available() else False\n"
            "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n\n"
            "def train(dataloader, generator):\n"
            "    for i, (imgs, _) in enumerate(dataloader):\n"
            "        valid = Variable(Tensor(imgs.size(0), 1).fill_(1.0), requires_grad=False)\n"
            "        fake = Variable(Tensor(imgs.size(0), 1).fill_(0.0), requires_grad=False)\n"
            "        soft = Tensor(imgs.size(0), 1).fill_(0.9)\n"
            "        real_imgs = Variable(imgs.type(Tensor))\n"
            "        z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], 100))))\n"
            "        yield generator(z), real_imgs, valid, fake, soft\n",
            "import numpy as np\nimport torch\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "cuda = True if torch.cuda.is_available() else False\n\n"
            "def train(dataloader, generator):\n"
            "    for i, (imgs, _) in enumerate(dataloader):\n"
            "        valid = torch.ones(imgs.size(0), 1, device=device)\n"
            "        fake = torch.zeros(imgs.size(0), 1, device=device)\n"
            "        soft = torch.full((imgs.size(0), 1), 0.9, device=device)\n"
            "        real_imgs = imgs.to(device, torch.float32)\n"
            "        z = torch.tensor(np.random.normal(0, 1, (imgs.shape[0], 100)), dtype=torch.float32, device=device)\n"
            "        yield generator(z), real_imgs, valid, fake, soft\n",
        ),
        Invalid(
            "import torch\nfrom torch.autograd import Variable, grad\n\n"
            "def step(model, x, labels, device):\n"
            "    w = Variable(torch.randn(3, 4), requires_grad=True)\n"
            "    h = Variable(model(x))\n"
            "    y = labels.type(torch.cuda.LongTensor)\n"
            "    idx = torch.cuda.LongTensor([0, 2])\n"
            "    return grad(h.sum(), w), y, idx\n",
            "import torch\nfrom torch.autograd import grad\n\n"
            "def step(model, x, labels, device):\n"
            "    w = torch.randn(3, 4).requires_grad_()\n"
            "    h = model(x).detach()\n"
            "    y = labels.to(device, torch.int64)\n"
            "    idx = torch.tensor([0, 2], dtype=torch.int64, device=device)\n"
            "    return grad(h.sum(), w), y, idx\n",
        ),
        Invalid(
            "import torch\nfrom torch.autograd import Variable\n\n"
            "LongTensor = torch.cuda.LongTensor if torch.cuda.is_available() else torch.LongTensor\n\n"
            "def run(loader, model):\n    for images, labels in loader:\n"
            "        images = Variable(images)\n        labels = Variable(labels.type(LongTensor))\n"
            "        model(images, labels, LongTensor(labels.numel()))\n",
            "import torch\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "LongTensor = torch.cuda.LongTensor if torch.cuda.is_available() else torch.LongTensor\n\n"
            "def run(loader, model):\n    for images, labels in loader:\n"
            "        labels = labels.to(device, torch.int64)\n"
            "        model(images, labels, LongTensor(labels.numel()))\n",
        ),
    ]


def _has_a_cpu_choice(alias: _Alias) -> bool:
    """A definition of the alias names the CPU type too (``torch.cuda.FloatTensor if cuda else
    torch.FloatTensor``, or a CPU default replaced under ``if on_gpu:``): it follows the machine."""
    cpu_types = {f"torch.{name}" for name in LEGACY_DTYPES}
    return any(dotted(n) in cpu_types for d in alias.definitions for n in walk(d.value)
               if isinstance(n, cst.Attribute))


def _method(receiver: cst.BaseExpression, name: str, args: list[cst.Arg] | None = None) -> cst.Call:
    return cst.Call(cst.Attribute(_atom(receiver), cst.Name(name)), args or [])


def _atom(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` as a receiver: parenthesized unless it already binds tightly."""
    if expr.lpar or isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.List, cst.Dict,
                                      cst.ListComp)):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _self_assignment(statement: cst.BaseStatement) -> bool:
    """``x = x``"""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    small = statement.body[0]
    return (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
            and isinstance(small.value, cst.Name) and small.value.value == small.targets[0].target.value
            and not small.value.lpar)


def _trailing_comment(statement: cst.BaseStatement) -> bool:
    if isinstance(statement, cst.SimpleStatementLine):
        return statement.trailing_whitespace.comment is not None
    return False


def _detached_comments(lines) -> list[cst.EmptyLine]:
    """The leading lines kept when their statement goes: every comment (no comment is ever
    lost; a notebook's cell marker is one) and the blank lines above the last of them."""
    lines = list(lines)
    last_comment = max((i for i, line in enumerate(lines) if line.comment is not None), default=-1)
    last_blank = max((i for i, line in enumerate(lines) if line.comment is None), default=-1)
    return lines[:max(last_comment, last_blank) + 1]


def _float_literal(value: cst.BaseExpression) -> bool:
    """``0.9`` / ``-1.5``: ``torch.full`` infers the default float dtype from it."""
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, (cst.Minus, cst.Plus)):
        value = value.expression
    return isinstance(value, cst.Float)
