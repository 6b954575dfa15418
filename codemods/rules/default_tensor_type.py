"""DM402 default-tensor-type: a global CUDA default for new tensors is reported.

Why: ``torch.set_default_tensor_type('torch.cuda.FloatTensor')`` (or
``torch.set_default_device("cuda")``) makes *every* tensor created afterwards a CUDA
tensor, including the ones PyTorch creates for you. With ``set_default_device`` a
shuffling ``DataLoader`` fails in its sampler with "Expected a 'cuda' device type for
generator but found 'cpu'" (checked on PyTorch 2.11; older releases failed the same
way with the tensor-type call). On a machine without a GPU the script stops at once
("type torch.cuda.FloatTensor not available. Torch not compiled with CUDA
enabled"), and ``set_default_tensor_type`` is deprecated since PyTorch 2.1. The
expert fix is explicit devices: one shared ``device``, ``.to(device)`` on the model
and the batch, ``device=`` where a tensor is created; then drop the global default.

Reported, never rewritten: removing the call changes where every tensor of the
program is created, which only the author can follow through.

- Reported: a CUDA type as a string (``'torch.cuda.FloatTensor'``) or as the class
  (``torch.cuda.HalfTensor``), a CUDA device literal given to
  ``torch.set_default_device`` (``"cuda"``, ``"cuda:1"``, ``torch.device("cuda")``),
  also as one branch of ``a if cond else b``.
- Behind the author's own test (``if torch.cuda.is_available():``, or ``'torch.cuda.FloatTensor'
  if torch.cuda.is_available() else ...``) the call never runs without a GPU: reported only
  when the file builds a ``DataLoader(..., shuffle=True)``, which then fails on the GPU.
- Left alone: CPU types (``torch.set_default_tensor_type(torch.DoubleTensor)``),
  ``torch.set_default_dtype``, and ``set_default_device`` with a variable, whose
  value devmod cannot see.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.candidates import FileFacts
from ..analysis.devices import is_torch_device_call
from ..analysis.guards import in_cuda_available_branch, is_cuda_available_call
from ..analysis.names import keyword, positional, qualified_names
from ..analysis.tree import nodes_of
from .base import Invalid, Rule, Valid

_SET_TYPE = "torch.set_default_tensor_type"
_SET_DEVICE = "torch.set_default_device"


class DefaultTensorType(Rule):
    CODE = "DM402"
    NAME = "default-tensor-type"
    SUMMARY = "a global CUDA default (`set_default_tensor_type('torch.cuda.FloatTensor')`) is reported"
    SAFETY = "report"
    ERROR = "RuntimeError: Expected a 'cuda' device type for generator but found 'cpu'"
    TRIGGERS = ("set_default_tensor_type", "set_default_device")
    ORDER = 70

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        return any(True for _ in facts.calls_of(_SET_TYPE, _SET_DEVICE))

    def visit_Call(self, node: cst.Call) -> None:
        names = qualified_names(self.metadata, node.func)
        if _SET_TYPE in names:
            argument = _first_argument(node, "t")
        elif _SET_DEVICE in names:
            argument = _first_argument(node, "device")
        else:
            return
        if argument is None or not any(self._is_cuda(branch) for branch in _branches(argument)):
            return
        if self._behind_a_gpu_test(node, argument):
            if self._shuffling_loader():
                self.report(node, "a global CUDA default makes the shuffling `DataLoader` of this file fail on a "
                                  "GPU (\"Expected a 'cuda' device type for generator\"); remove it and give "
                                  "tensors an explicit device (`.to(device)`, `device=device`)")
            return  # runs only on a GPU, where nothing here shuffles: it works on both machines
        if _SET_TYPE in names:
            what = "`torch.set_default_tensor_type(...)` with a CUDA type fails on machines without a GPU (and is " \
                   "deprecated)"
        else:
            what = "`torch.set_default_device(...)` with a CUDA device breaks shuffling DataLoaders and CPU-only " \
                   "machines"
        self.report(node, f"{what}; remove it and give tensors an explicit device (`.to(device)`, `device=device`)")

    def _behind_a_gpu_test(self, call: cst.Call, argument: cst.BaseExpression) -> bool:
        """Inside ``if torch.cuda.is_available():``, or every CUDA choice is the GPU side of
        ``... if torch.cuda.is_available() else ...``."""
        if in_cuda_available_branch(self.metadata, call):
            return True
        return isinstance(argument, cst.IfExp) and is_cuda_available_call(self.metadata, argument.test) \
            and not any(self._is_cuda(branch) for branch in _branches(argument.orelse))

    def _shuffling_loader(self) -> bool:
        """``DataLoader(..., shuffle=True)`` anywhere in the file."""
        for call in nodes_of(self.tree, cst.Call):
            shuffle = keyword(call, "shuffle")
            if shuffle is not None and isinstance(shuffle.value, cst.Name) and shuffle.value.value == "True" \
                    and any(n.endswith(".DataLoader") for n in qualified_names(self.metadata, call.func)):
                return True
        return False

    def _is_cuda(self, node: cst.BaseExpression) -> bool:
        """``'torch.cuda.FloatTensor'``, ``torch.cuda.FloatTensor``, ``"cuda:1"``, ``torch.device("cuda")``."""
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            return isinstance(value, str) and (value.startswith("torch.cuda.") or _cuda_device_string(value))
        if isinstance(node, cst.Attribute):
            return any(n.startswith("torch.cuda.") and n.endswith("Tensor") for n in qualified_names(self.metadata, node))
        if isinstance(node, cst.Call) and is_torch_device_call(self.metadata, node) and node.args:
            first = node.args[0].value
            return isinstance(first, cst.SimpleString) and _cuda_device_string(first.evaluated_value)
        return False

    VALID = [
        Valid('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "torch.set_default_dtype(torch.float64)\nx = torch.zeros(3, device=device)\n"),
        Valid("import torch\ntorch.set_default_tensor_type(torch.DoubleTensor)\n"
              "torch.set_default_tensor_type('torch.FloatTensor')\n"),
        # A variable: its value is the author's choice and not visible here.
        Valid("import torch\n\ndef setup(device):\n    torch.set_default_device(device)\n"),
        Valid('import torch\ntorch.set_default_device("cpu")\n'),
        # Behind the author's GPU test and with nothing that shuffles: works on both machines.
        Valid("import torch\n\nif torch.cuda.is_available():\n"
              "    torch.set_default_tensor_type('torch.cuda.FloatTensor')\nx = torch.ones(3)\n"),
        Valid("import torch\ntorch.set_default_tensor_type(\n"
              "    'torch.cuda.FloatTensor' if torch.cuda.is_available() else 'torch.FloatTensor')\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')\n"),
        Invalid("import torch\nfrom torch.utils.data import DataLoader\n\nif torch.cuda.is_available():\n"
                "    torch.set_default_tensor_type(torch.cuda.FloatTensor)\n"
                "loader = DataLoader(list(range(8)), batch_size=2, shuffle=True)\n"),
        Invalid('import torch\ntorch.set_default_device("cuda")\n'),
        Invalid('import torch as th\nth.set_default_device(th.device("cuda", 0))\n'),
    ]


def _first_argument(call: cst.Call, name: str) -> cst.BaseExpression | None:
    args = positional(call)
    if args:
        return args[0].value
    arg = keyword(call, name)
    return arg.value if arg is not None else None


def _branches(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``a if c else b`` -> both branches (also nested); anything else -> itself."""
    if isinstance(node, cst.IfExp):
        return _branches(node.body) + _branches(node.orelse)
    return [node]


def _cuda_device_string(value: object) -> bool:
    return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))
