"""DM205 device-index: ``x.get_device()`` where a device is expected becomes ``x.device``.

Why: ``Tensor.get_device()`` is the CUDA index of a tensor, and ``-1`` for a tensor on the
CPU. ``y.to(x.get_device())`` and ``torch.zeros(3, device=x.get_device())`` follow ``x`` on
a GPU and fail everywhere else with "Device index must not be negative". ``x.device`` is
the same device on a GPU (``cuda:N``) and ``cpu`` on the CPU.

- Fixed where the index is passed as a device: the first argument or ``device=`` of
  ``.to(...)``, ``device=`` of any call, the argument of ``torch.device(...)``; and a local
  name bound once to ``x.get_device()`` (``dev = g.get_device()``) whose every use is one
  of those places.
- Left alone: an index used as a number (``x.get_device() == 0``, ``torch.cuda.device(i)``,
  ``.cuda(i)``), code that runs only on a GPU (under ``if x.is_cuda:`` or a GPU switch,
  where the index is always valid), ``self.get_device()``, and files that define a
  ``get_device`` of their own (an object that may have no ``.device``).
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from ..analysis.candidates import FileFacts
from ..analysis.guards import gpu_only
from ..analysis.names import qualified_names
from ..analysis.tree import walk
from .base import Invalid, Rule, Valid


class DeviceIndex(Rule):
    CODE = "DM205"
    NAME = "device-index"
    SUMMARY = "`x.get_device()` passed as a device becomes `x.device` (the index is -1 on the CPU)"
    ERROR = "RuntimeError: Device index must not be negative"
    TRIGGERS = ("get_device(",)
    ORDER = 44

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "get_device"
               for n in facts.nodes(ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        return any(_index_call(n) and _may_be_a_device(facts.parent.get(n)) for n in facts.calls())

    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        # A ``get_device`` of the file's own: its objects may have no ``.device``.
        self._own_method = any(isinstance(n, cst.FunctionDef) and n.name.value == "get_device"
                               for n in walk(node))
        return True

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        receiver = _receiver(original_node)
        if receiver is None or self._own_method or gpu_only(self.metadata, original_node):
            return updated_node
        if not (self._device_position(original_node) or self._bound_for_devices(original_node)):
            return updated_node
        replacement = cst.Attribute(updated_node.func.value, cst.Name("device"))  # type: ignore[attr-defined]
        text = self.tree.code_for_node(receiver)
        return self.fix(original_node, updated_node, replacement,
                        f"`{text}.get_device()` is -1 on the CPU: pass `{text}.device`")

    def _device_position(self, node: cst.CSTNode) -> bool:
        """``node`` is passed where a device goes: ``.to(node)``, ``device=node``, ``torch.device(node)``."""
        arg = self.get_metadata(ParentNodeProvider, node, None)
        if not isinstance(arg, cst.Arg) or arg.value is not node or arg.star:
            return False
        call = self.get_metadata(ParentNodeProvider, arg, None)
        if not isinstance(call, cst.Call):
            return False
        if arg.keyword is not None:
            return arg.keyword.value == "device"
        first = next((a for a in call.args if a.keyword is None), None)
        if first is not arg:
            return False
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to":
            return True
        return "torch.device" in qualified_names(self.metadata, call.func) and len(call.args) == 1

    def _bound_for_devices(self, node: cst.Call) -> bool:
        """``dev = g.get_device()`` in a function, the only binding of ``dev`` there, and every
        read of ``dev`` a device position."""
        assign = self.get_metadata(ParentNodeProvider, node, None)
        if not (isinstance(assign, cst.Assign) and assign.value is node and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)):
            return False
        name = assign.targets[0].target.value
        scope = self.get_metadata(ScopeProvider, node, None)
        if scope is None or isinstance(scope, cst.metadata.GlobalScope) or len(scope.assignments[name]) != 1:
            return False
        reads = [access.node for access in scope.accesses[name]]
        return bool(reads) and all(self._device_position(read) for read in reads)

    VALID = [
        # An index used as a number, and CUDA-only code.
        Valid("import torch\n\ndef same(a, b):\n    return a.get_device() == b.get_device()\n"),
        Valid("import torch\n\ndef f(x, w):\n    if x.is_cuda:\n        w = w.to(x.get_device())\n    return x * w\n"),
        Valid("import torch\n\ndef f(x, w):\n    i = x.get_device()\n    with torch.cuda.device(i):\n"
              "        return w.to(i)\n"),
        # A get_device of the file's own.
        Valid("import torch\n\nclass Box:\n    def get_device(self):\n        return 'cpu'\n\n"
              "def f(box, t):\n    return t.to(box.get_device())\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\n\ndef forward(ins, n):\n    ids = torch.eye(n).to(ins.get_device())\n"
            "    pad = torch.zeros(n, device=ins.get_device())\n    return ins + ids + pad\n",
            "import torch\n\ndef forward(ins, n):\n    ids = torch.eye(n).to(ins.device)\n"
            "    pad = torch.zeros(n, device=ins.device)\n    return ins + ids + pad\n",
        ),
        Invalid(
            "import torch\n\ndef ratio(w, g):\n    dev = g.get_device()\n"
            "    return torch.where(g > 0, w / g, torch.tensor([1.0]).to(dev))\n",
            "import torch\n\ndef ratio(w, g):\n    dev = g.device\n"
            "    return torch.where(g > 0, w / g, torch.tensor([1.0]).to(dev))\n",
        ),
    ]


def _index_call(node: ast.AST) -> bool:
    """``<x>.get_device()`` with no argument, ``x`` not ``self``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get_device"
            and not node.args and not node.keywords
            and not (isinstance(node.func.value, ast.Name) and node.func.value.id in ("self", "cls")))


def _may_be_a_device(parent: ast.AST | None) -> bool:
    """Passed to a call (``.to(i)``, ``device=i``) or bound to a name."""
    return isinstance(parent, (ast.Call, ast.Assign)) or (isinstance(parent, ast.keyword) and parent.arg == "device")


def _receiver(node: cst.Call) -> cst.BaseExpression | None:
    """``x`` of ``x.get_device()`` (no arguments, ``x`` not ``self`` nor ``torch.cuda``)."""
    func = node.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "get_device" and not node.args):
        return None
    value = func.value
    if isinstance(value, cst.Name) and value.value in ("self", "cls"):
        return None
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "torch":
        return None  # ``torch.cuda.get_device()`` and the like: a module, not a tensor
    return value

