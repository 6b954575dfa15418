"""DM204 discarded-to: ``x.to(device)`` on a tensor, result thrown away, becomes ``x = x.to(device)``.

Why: ``Module.to()`` moves a model in place, so ``model.to(device)`` on a line of its
own is right. ``Tensor.to()`` (and ``.cpu()``, ``.cuda()``, ``.float()``, ...) returns
a new tensor and leaves ``x`` where it was: the line does nothing, and the next use
of ``x`` meets the model's weights with "Expected all tensors to be on the same
device" (or the wrong dtype).

- Fixed only when ``x`` surely is a tensor: every binding of the name in that scope
  is a tensor factory (``torch.zeros``), a tensor method chain on one, a conversion
  of ``x`` itself, or an element unpacked from a DataLoader batch
  (``for x, y in loader``).
- Left alone: models and anything unknown (parameters, attributes like
  ``self.buf``, names bound elsewhere), since for a module the line is right.
- Reported instead of fixed when ``x`` also feeds a Dataset, DataLoader or NumPy:
  moving it there may break that use, so the choice is the author's.
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.ast_walk import ast_nodes
from ..analysis.candidates import FileFacts, method_name
from ..analysis.tensors import TENSOR_METHODS, CONVERSION_METHODS, flows_only_to_cpu_name, surely_tensor_variable
from .base import Invalid, Rule, Valid


class DiscardedTo(Rule):
    CODE = "DM204"
    NAME = "discarded-to"
    SUMMARY = "`x.to(device)` on a tensor with its result thrown away becomes `x = x.to(device)`"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    TRIGGERS = (".to(", ".cpu(", ".cuda(", ".float(", ".double(", ".half(", ".bfloat16(", ".long(", ".int(",
                ".short(", ".bool(", ".byte(", ".char(")
    ORDER = 42

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # An expression statement ``x.to(...)`` / ``x.float().cuda()`` on a plain name.
        for statement in facts.nodes(ast.Expr):
            node = statement.value
            if method_name(node) not in CONVERSION_METHODS:
                continue
            while method_name(node) in CONVERSION_METHODS:
                node = node.func.value
            if isinstance(node, ast.Name) and _may_be_local_tensor(facts, statement, node.id):
                return True
        return False

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> cst.BaseSmallStatement:
        name = _converted_name(original_node.value)
        if name is None or not surely_tensor_variable(self.metadata, name):
            return updated_node
        method = original_node.value.func.attr.value  # type: ignore[attr-defined]
        if flows_only_to_cpu_name(self.metadata, name):
            self.report(original_node, f"`{name.value}.{method}(...)` returns a new tensor and its result is "
                                       f"thrown away; `{name.value}` also feeds CPU-side code (a Dataset, "
                                       "DataLoader or NumPy), so assign it by hand if it should move")
            return updated_node
        assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(name.value))], value=updated_node.value,
                            semicolon=updated_node.semicolon)
        return self.fix(original_node, updated_node, assign,
                        f"`Tensor.{method}()` returns a new tensor: assign it back to `{name.value}`")

    VALID = [
        # Modules move in place.
        Valid("import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.to('cpu')\n"),
        # Unknown names: a parameter, an attribute, a name bound in another scope.
        Valid("import torch\n\ndef prepare(x, net):\n    x.to('cpu')\n    net.float()\n"),
        Valid("import torch\nx = torch.zeros(3)\n\ndef move():\n    x.to('cpu')\n"),
        Valid("import torch\nx = torch.zeros(3)\nx = x.to('cpu')\ny = x.float()\n"),
        # Bound to something else too.
        Valid("import torch\n\ndef f(flag):\n    x = torch.zeros(3)\n    if flag:\n        x = make()\n"
              "    x.to('cpu')\n    return x\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\n\ndef train(model, device):\n    noise = torch.randn(4, 8).float()\n"
            "    noise.to(device)\n    return model(noise)\n",
            "import torch\n\ndef train(model, device):\n    noise = torch.randn(4, 8).float()\n"
            "    noise = noise.to(device)\n    return model(noise)\n",
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n\n"
            "def train(model, data, device):\n    loader = DataLoader(data, batch_size=8)\n"
            "    for i, (x, y) in enumerate(loader):\n        x.to(device); y.to(device, non_blocking=True)\n"
            "        y.long()\n        model(x, y)\n",
            "import torch\nfrom torch.utils.data import DataLoader\n\n"
            "def train(model, data, device):\n    loader = DataLoader(data, batch_size=8)\n"
            "    for i, (x, y) in enumerate(loader):\n        x = x.to(device); y = y.to(device, non_blocking=True)\n"
            "        y = y.long()\n        model(x, y)\n",
        ),
        Invalid(
            "import torch as th\nmask = th.tril(th.ones(4, 4))\nmask.cpu()\n",
            "import torch as th\nmask = th.tril(th.ones(4, 4))\nmask = mask.cpu()\n",
        ),
        # Also data for a Dataset: the author decides.
        Invalid("import torch\nfrom torch.utils.data import TensorDataset\nX = torch.randn(10, 3)\n"
                "X.to('cpu')\ndata = TensorDataset(X)\n"),
    ]


def _may_be_local_tensor(facts: FileFacts, statement: ast.Expr, name: str) -> bool:
    """``surely_tensor_variable`` says no when its innermost function binds ``name`` as a
    parameter, or binds it nowhere (a global, or a name of an enclosing function)."""
    function = next((p for p in facts.ancestors(statement)
                     if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))), None)
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return True  # module level or a class body: asked of libcst
    arguments = function.args
    if any(a.arg == name for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                   *filter(None, [arguments.vararg, arguments.kwarg])]):
        return False
    nodes = ast_nodes(function)  # (one walk for both questions; the ``ctx`` attribute stays on each Name)
    stores = [n for n in nodes if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    return bool(stores) and not any(isinstance(a, ast.Assign) and any(t is n for t in a.targets for n in stores)
                                    and _surely_no_tensor(facts, a.value) for a in nodes)


def _surely_no_tensor(facts: FileFacts, value: ast.AST) -> bool:
    """``model = cls.from_config(c)``, ``net = Net().float()``: a call chain in which no callee may be
    a torch function, which ``_makes_tensor`` / ``is_surely_tensor`` never take for a tensor."""
    chain = []
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in TENSOR_METHODS | CONVERSION_METHODS:
        chain.append(value)
        value = value.func.value
    if not isinstance(value, ast.Call):
        return False
    chain.append(value)
    return not any(n.startswith("torch.") for call in chain for n in facts.qnames(call.func))


def _converted_name(value: cst.BaseExpression) -> cst.Name | None:
    """``x`` in ``x.to(...)``, ``x.float().to(...)``: a conversion chain on a plain name."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in CONVERSION_METHODS):
        return None
    node: cst.BaseExpression = value
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value in CONVERSION_METHODS:
        node = node.func.value
    return node if isinstance(node, cst.Name) else None
