"""DM405 cuda-index-cpu-tensor: GPU indices into a tensor that stays on the CPU are reported.

Why: a lookup table built once on the CPU, typically a diffusion noise schedule

    betas = torch.linspace(1e-4, 0.02, 1000)
    alphas_cumprod = torch.cumprod(1 - betas, dim=0)
    ...
    t = torch.randint(0, 1000, (batch_size,), device=device)
    a = alphas_cumprod[t]

fails on a GPU with "indices should be either on cpu or on the same device as the
indexed tensor (cpu)". (CPU indices into a GPU tensor work; this direction does
not.) The same happens with ``self.betas = torch.linspace(...)`` in ``__init__``: a
plain attribute does not follow ``model.to(device)``. The expert fix is to make the
table a buffer (``self.register_buffer("betas", ..., persistent=False)``, which
DM301 does for nn.Module attributes) or to create it on the device
(``torch.linspace(..., device=device)``).

Reported, never rewritten: which of the two fixes fits depends on who owns the
table. Only the clearly visible cases:

- the table is a name bound once (module level or the same function) or a
  ``self.<name>`` assigned once, in ``__init__``, never registered, from an
  expression that surely stays on the CPU: a tensor factory without ``device=``,
  arithmetic and ``torch.*`` functions of such tables and numbers, slices of them;
- the index surely is on a device: a factory with ``device=``, ``.to(device)``,
  ``.cuda()``, or a name bound only to such values in its own scope.

Left alone: buffers, tables created with ``device=`` or moved, indices that are
parameters or attributes (unknown), and files that set a default device.

Also reported: ``table[k - 1].to(t.device)`` where the index is computed from ``t`` (score_sde's
``discretize``): the author moves the result to ``t``'s device, so ``t`` is expected off the CPU,
and the lookup fails before the move; ``table.to(t.device)[k - 1]`` works on any device.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from ..analysis.candidates import FileFacts, method_name
from ..analysis.devices import is_torch_device_call
from ..analysis.modules import attribute_assignments, class_family, registered_names
from ..analysis.names import dotted, keyword, method_call, positional, qualified_names
from ..analysis.roles import factory_name
from ..analysis.tensors import is_dtype
from ..analysis.scopes import scope_bindings
from ..analysis.tree import ancestors, code_of, nodes_of
from .base import Invalid, Rule, Valid

# Tensor methods that keep a tensor where it is.
_SAME_DEVICE_METHODS = frozenset({
    "float", "double", "half", "long", "int", "bool", "clone", "detach", "view", "reshape", "unsqueeze",
    "squeeze", "flatten", "flip", "contiguous", "cumprod", "cumsum", "sqrt", "rsqrt", "log", "exp", "pow",
    "clamp", "clip", "sigmoid", "cos", "sin", "abs", "neg", "reciprocal", "expand", "repeat", "t",
})
_CPU_ONLY_SOURCES = frozenset({"torch.from_numpy"})
_DATA_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray"})
# Something in the file changes where factories put tensors: "without device=" means nothing.
_DEFAULT_DEVICE_CALLS = ("set_default_device", "set_default_tensor_type", "with torch.device(")
_MAX_DEPTH = 8


class CudaIndexCpuTensor(Rule):
    CODE = "DM405"
    NAME = "cuda-index-cpu-tensor"
    SUMMARY = "a CPU lookup table indexed with GPU indices (noise schedules) is reported"
    SAFETY = "report"
    ERROR = "RuntimeError: indices should be either on cpu or on the same device as the indexed tensor (cpu)"
    TRIGGERS = ("device", ".cuda(")
    ORDER = 70

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # ``table[index]`` with an index that may be on a device (a ``.to``/``.cuda`` call, a
        # call with ``device=``, or a name assigned one) and a table that may be on the CPU.
        for node in facts.nodes(ast.Subscript):
            if isinstance(node.slice, ast.Slice) or not _may_be_cpu_table(node.value):
                continue
            if _may_be_on_device(facts, node.slice, 0, set()):
                return True
        for call in facts.nodes(ast.Call):  # ``table[i].to(t.device)``: moved after the lookup
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "to" and isinstance(func.value, ast.Subscript) \
                    and call.args and isinstance(call.args[0], ast.Attribute) and call.args[0].attr == "device" \
                    and _may_be_cpu_table(func.value.value):
                return True
        return False

    def visit_Module(self, node: cst.Module) -> bool:
        self._default_device = any(call in self.module_text(node) for call in _DEFAULT_DEVICE_CALLS)
        return super().visit_Module(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self._default_device or len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return
        index = node.slice[0].slice.value
        owner = None if self._on_device(index, 0) else self._moved_to_the_index_device(node, index)
        if (owner is None and not self._on_device(index, 0)) or not self._on_cpu(node.value, 0):
            return
        table, idx = code_of(node.value), code_of(index)
        if owner is not None:
            self.report(node, f"`{table}` is on the CPU but the index `{idx}` comes from `{owner}`, whose device the "
                              f"result is moved to: with `{owner}` on a GPU the lookup fails before the move; move "
                              f"the table first (`{table}.to({owner}.device)[{idx}]`)")
            return
        where = ("register it as a buffer (`self.register_buffer(...)`) or create it with `device=`"
                 if self._in_model(node) else "create it on the device (`device=`) or move it with `.to(device)`")
        self.report(node, f"`{table}` is on the CPU but the index `{idx}` is on the device: indexing fails on a "
                          f"GPU; {where}")

    def _moved_to_the_index_device(self, subscript: cst.Subscript, index: cst.BaseExpression) -> str | None:
        """``table[k - 1].to(t.device)`` where ``k`` is computed from ``t`` (score_sde's
        ``discretize``): the author expects ``t`` off the CPU, and its indices with it. The name ``t``."""
        parents = self.metadata[ParentNodeProvider]
        attribute = parents.get(subscript)
        call = parents.get(attribute)
        if not (isinstance(attribute, cst.Attribute) and attribute.value is subscript and attribute.attr.value == "to"
                and isinstance(call, cst.Call) and call.func is attribute and call.args):
            return None
        target = call.args[0].value
        if not (isinstance(target, cst.Attribute) and target.attr.value == "device" and isinstance(target.value, cst.Name)):
            return None
        owner = target.value.value
        if owner in {n.value for n in nodes_of(index, cst.Name)}:
            return owner
        for name in nodes_of(index, cst.Name):
            values = self._bound_values(name, same_scope=True)
            if values and all(owner in {n.value for n in nodes_of(v, cst.Name)} for v in values):
                return owner  # ``k = (t * (n - 1)).long()``
        return None

    def _in_model(self, node: cst.CSTNode) -> bool:
        klass = next((p for p in ancestors(self.metadata, node) if isinstance(p, cst.ClassDef)), None)
        return klass is not None and klass.name.value in self.facts.model_classes

    # -- the index: surely on a device -------------------------------------------------------------
    def _on_device(self, expr: cst.BaseExpression, depth: int) -> bool:
        if depth > _MAX_DEPTH:
            return False
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and not self._torch_function(expr) \
                and expr.func.attr.value in _SAME_DEVICE_METHODS:
            expr = expr.func.value  # ``t.long().view(-1)``: methods that keep a tensor where it is
        if isinstance(expr, cst.Call):
            if method_call(expr, "cuda"):
                return True
            if method_call(expr, "to"):
                return _device_argument(self.metadata, expr)
            if factory_name(self.metadata, expr):
                arg = keyword(expr, "device")
                return arg is not None and not _is_cpu(self.metadata, arg.value)
            return False
        if isinstance(expr, cst.Name):
            values = self._bound_values(expr, same_scope=True)
            return bool(values) and all(self._on_device(v, depth + 1) for v in values)
        return False

    # -- the table: surely on the CPU --------------------------------------------------------------
    def _on_cpu(self, expr: cst.BaseExpression, depth: int) -> bool:
        if depth > _MAX_DEPTH:
            return False
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and not self._torch_function(expr) \
                and expr.func.attr.value in _SAME_DEVICE_METHODS | {"to"}:
            if method_call(expr, "to") and (_device_argument(self.metadata, expr) or not expr.args):
                return False
            return self._on_cpu(expr.func.value, depth + 1) and self._literal_arguments(expr)
        if isinstance(expr, cst.Call):
            return self._cpu_call(expr, depth)
        if isinstance(expr, cst.BinaryOperation):
            return self._cpu_or_number(expr.left, depth) and self._cpu_or_number(expr.right, depth) \
                and not (_number(expr.left) and _number(expr.right))
        if isinstance(expr, cst.UnaryOperation):
            return self._on_cpu(expr.expression, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._on_cpu(expr.value, depth + 1) and all(_literal_slice(e) for e in expr.slice)
        if isinstance(expr, cst.Name):
            values = self._bound_values(expr, same_scope=False)
            return len(values) == 1 and self._on_cpu(values[0], depth + 1)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            value = self._init_attribute(expr)
            return value is not None and self._on_cpu(value, depth + 1)
        return False

    def _cpu_call(self, call: cst.Call, depth: int) -> bool:
        names = qualified_names(self.metadata, call.func)
        if names & _CPU_ONLY_SOURCES:
            return True
        factory = factory_name(self.metadata, call)
        if factory is not None:
            if any(keyword(call, k) is not None for k in ("device", "out")) or any(a.star for a in call.args):
                return False
            if factory in _DATA_FACTORIES:
                args = positional(call)
                return len(args) == 1 and _literal_data(args[0].value)
            return True
        if not any(n.startswith("torch.") for n in names) or any(a.star for a in call.args):
            return False
        # A torch function of CPU tables and numbers: ``torch.cumprod(alphas, 0)``, ``F.pad(a, (1, 0))``.
        tensors = [a.value for a in positional(call) if not _literal(a.value)]
        return bool(tensors) and all(self._on_cpu(t, depth + 1) for t in tensors) \
            and all(_literal(a.value) for a in call.args if a.keyword is not None)

    def _torch_function(self, call: cst.Call) -> bool:
        """``torch.cumprod(x)`` rather than the method ``x.cumprod()``."""
        return any(n.startswith("torch.") for n in qualified_names(self.metadata, call.func))

    def _cpu_or_number(self, expr: cst.BaseExpression, depth: int) -> bool:
        return _number(expr) or self._on_cpu(expr, depth + 1)

    def _literal_arguments(self, call: cst.Call) -> bool:
        return all(_literal(a.value) or is_dtype(self.metadata, a.value) for a in call.args)

    # -- what a name or attribute holds ------------------------------------------------------------
    def _bound_values(self, name: cst.Name, same_scope: bool) -> list[cst.BaseExpression]:
        """The values of every binding of ``name`` ([] if any binding is not ``name = value``)."""
        scope = self.metadata[ScopeProvider].get(name)
        if scope is None:
            return []
        bindings = scope_bindings(scope, name.value)
        if not bindings or (same_scope and any(b.scope is not scope for b in bindings)):
            return []
        values = []
        parents = self.metadata[ParentNodeProvider]
        for binding in bindings:
            target = parents.get(binding.node) if isinstance(binding.node, cst.Name) else None
            assign = parents.get(target) if isinstance(target, cst.AssignTarget) else None
            if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                return []
            values.append(assign.value)
        return values

    def _init_attribute(self, attribute: cst.Attribute) -> cst.BaseExpression | None:
        """The value of ``self.<name> = value`` when that is the only binding in the class family,
        sits directly in ``__init__``, is not registered, and nothing else in the file assigns it."""
        klass = next((p for p in ancestors(self.metadata, attribute) if isinstance(p, cst.ClassDef)), None)
        if klass is None or _moves_itself(klass):
            return None
        name = attribute.attr.value
        family = class_family(self.facts, klass)
        assigned = attribute_assignments(family, name)
        if len(assigned) != 1 or not isinstance(assigned[0], cst.Assign) or name in registered_names(family):
            return None
        assign = assigned[0]
        if len(assign.targets) != 1 or dotted(assign.targets[0].target) != f"self.{name}":
            return None
        function = next((p for p in ancestors(self.metadata, assign) if isinstance(p, cst.FunctionDef)), None)
        if function is None or function.name.value != "__init__" or self._assigned_elsewhere(name, assign):
            return None
        return assign.value

    def _assigned_elsewhere(self, name: str, own: cst.Assign) -> bool:
        """``model.betas = ...`` anywhere in the file (``self.betas`` in the family is counted apart)."""
        for node in _all_assign_targets(self.tree):
            if node is not own and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == name
                                       and dotted(t.target.value) != "self" for t in node.targets):
                return True
        return False

    VALID = [
        # Tables on the device, or buffers.
        Valid("import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
              "betas = torch.linspace(1e-4, 0.02, 1000, device=device)\n"
              "t = torch.randint(0, 1000, (8,), device=device)\nb = betas[t]\n"),
        Valid("import torch\nimport torch.nn as nn\n\nclass Diffusion(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.register_buffer('betas', torch.linspace(1e-4, 0.02, 1000))\n\n"
              "    def forward(self, x):\n        t = torch.randint(0, 1000, (x.shape[0],), device=x.device)\n"
              "        return self.betas[t]\n"),
        # CPU indices into any tensor are fine; an index of unknown placement is left alone.
        Valid("import torch\ndevice = 'cuda'\nbetas = torch.linspace(1e-4, 0.02, 1000)\n"
              "t = torch.randint(0, 1000, (8,))\nb = betas[t]\n\ndef q(t):\n    return betas[t]\n"),
        # The table is moved (a second binding).
        Valid("import torch\n\ndef f(device):\n    betas = torch.linspace(1e-4, 0.02, 10)\n"
              "    betas = betas.to(device)\n    t = torch.randint(0, 10, (4,), device=device)\n    return betas[t]\n"),
    ]
    INVALID = [
        # Looked up, then moved to the device of the value the index comes from.
        Invalid("import torch\n\nclass Schedule:\n    def __init__(self, n):\n        self.n = n\n"
                "        self.levels = torch.linspace(0.01, 1.0, n)\n\n    def step(self, x, t):\n"
                "        k = (t * (self.n - 1)).long()\n        prev = self.levels[k - 1].to(t.device)\n"
                "        return x * prev[:, None]\n"),
        Invalid("import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "betas = torch.linspace(1e-4, 0.02, 1000)\nalphas_cumprod = torch.cumprod(1.0 - betas, dim=0)\n\n"
                "def noisy(x0, noise):\n    t = torch.randint(0, 1000, (x0.shape[0],), device=device)\n"
                "    a = alphas_cumprod[t].view(-1, 1)\n    return a.sqrt() * x0 + (1 - a).sqrt() * noise\n"),
        Invalid("import torch\nimport torch.nn as nn\n\nclass Diffusion(nn.Module):\n"
                "    def __init__(self, steps=1000):\n        super().__init__()\n"
                "        self.betas = torch.linspace(1e-4, 0.02, steps)\n        self.alphas = 1.0 - self.betas\n\n"
                "    def forward(self, x):\n        t = torch.randint(0, 1000, (x.shape[0],)).to(x.device)\n"
                "        return self.alphas[t]\n"),
    ]


def _device_argument(metadata, call: cst.Call) -> bool:
    """``x.to(device)`` / ``x.to(device=d)``: a device that is not a literal CPU (not a dtype)."""
    arg = keyword(call, "device")
    args = positional(call)
    value = arg.value if arg is not None else args[0].value if args else None
    if value is None or is_dtype(metadata, value) or _is_cpu(metadata, value):
        return False
    return not isinstance(value, cst.Float)


def _is_cpu(metadata, value: cst.BaseExpression) -> bool:
    if is_torch_device_call(metadata, value) and value.args:  # type: ignore[attr-defined]
        value = value.args[0].value  # type: ignore[attr-defined]
    return isinstance(value, cst.SimpleString) and value.evaluated_value == "cpu"


def _number(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation):
        return _number(expr.expression)
    return isinstance(expr, (cst.Integer, cst.Float))


def _literal(expr: cst.BaseExpression) -> bool:
    """Numbers, strings, True/False/None, tuples of them: never a tensor."""
    if _number(expr) or isinstance(expr, cst.SimpleString):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in ("True", "False", "None")
    if isinstance(expr, (cst.Tuple, cst.List)):
        return all(_literal(e.value) for e in expr.elements)
    return False


def _literal_data(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.List, cst.Tuple)) and _literal(expr) or _number(expr)


def _literal_slice(element: cst.SubscriptElement) -> bool:
    part = element.slice
    if isinstance(part, cst.Index):
        return _literal(part.value)
    return all(p is None or _literal(p) for p in (part.lower, part.upper, part.step))


def _moves_itself(klass: cst.ClassDef) -> bool:
    """A class that defines ``to`` / ``cuda`` / ``_apply`` may move its attributes itself."""
    body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ()
    return any(isinstance(s, cst.FunctionDef) and s.name.value in ("to", "cuda", "_apply") for s in body)


def _all_assign_targets(module: cst.Module):
    return iter(nodes_of(module, cst.Assign))


def _may_be_on_device(facts: FileFacts, expr: ast.AST, depth: int, seen: set[str]) -> bool:
    """A superset of ``_on_device`` on the ``ast`` tree."""
    if depth > _MAX_DEPTH:
        return False
    while isinstance(expr, ast.Call):
        method = method_name(expr)
        if method == "cuda" or "device" in {k.arg for k in expr.keywords} or (method == "to" and expr.args):
            return True  # (``.to(dtype=...)`` alone keeps a tensor where it is)
        if method == "to":
            return False
        if method not in _SAME_DEVICE_METHODS:
            return False
        expr = expr.func.value  # type: ignore[attr-defined]
    if isinstance(expr, ast.Name) and expr.id not in seen and not facts.parameter_here(expr):
        seen.add(expr.id)
        return any(_may_be_on_device(facts, value, depth + 1, seen) for value in facts.values_read_by(expr))
    return False


def _may_be_cpu_table(expr: ast.AST) -> bool:
    """What ``_on_cpu`` may accept: calls, arithmetic, subscripts, names and ``self.<attribute>``."""
    if isinstance(expr, ast.Attribute):
        return isinstance(expr.value, ast.Name) and expr.value.id == "self"
    return isinstance(expr, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Name))
