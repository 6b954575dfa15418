"""DM201 factory-device: tensor factories in device code get ``device=``.

Why: ``torch.zeros``, ``torch.randn``, ``torch.arange`` and friends create CPU
tensors unless told otherwise. Combined with a model or batch on the GPU they fail
with "Expected all tensors to be on the same device". Creating the tensor on the
right device is also faster than creating it on the CPU and copying it
(``torch.zeros(...).to(device)`` folds into ``torch.zeros(..., device=device)``).

- In training code and at module level: ``device=device`` (the shared variable, or
  the function's ``device`` parameter).
- Inside an ``nn.Module`` method: the device of the input (``device=x.device``), an
  existing ``self.device``, else ``next(self.parameters()).device``; never the
  module-level global, which breaks DataParallel replicas and reuse of the module.
- Never in Dataset methods, collate functions or a model's ``__init__``: CPU
  tensors are right there (CUDA in forked DataLoader workers fails).
- Skipped: calls that already pass ``device=``, ``*_like`` and ``x.new_*`` (they
  follow their input), and tensors that only feed CPU-side work (a Dataset or
  DataLoader, samples iterated in a loop, ``.numpy()`` / ``.tolist()`` / ``.cpu()``).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import ParentNodeProvider

from ..analysis.devices import DEVICE_LIKE_NAMES, is_torch_device_call
from ..analysis.names import keyword, keyword_arg, positional
from ..analysis.roles import factory_name
from ..analysis.tensors import flows_only_to_cpu
from .base import Invalid, Rule, Valid


class FactoryDevice(Rule):
    CODE = "DM201"
    NAME = "factory-device"
    SUMMARY = "tensor factories (`torch.zeros`, `randn`, `arange`, ...) in device code get `device=`"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    ORDER = 30

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        folded = self._fold_to(original_node, updated_node)
        if folded is not None:
            return folded
        if not self._needs_device(original_node) or self._moved_by_to(original_node):
            return updated_node
        device = self.device_for(original_node)
        if device is None or flows_only_to_cpu(self.metadata, original_node):
            return updated_node
        return self.fix(original_node, updated_node, with_keyword(updated_node, "device", device),
                        f"`{factory_name(self.metadata, original_node)}` creates a CPU tensor here: add `device=`")

    def _needs_device(self, call: cst.Call) -> bool:
        return (factory_name(self.metadata, call) is not None and keyword(call, "device") is None
                and not any(a.star for a in call.args))

    def _moved_by_to(self, call: cst.Call) -> bool:
        """``torch.zeros(n).to(device)``: the fold below handles it in one step."""
        parents = self.metadata[ParentNodeProvider]
        attribute = parents.get(call)
        outer = parents.get(attribute) if isinstance(attribute, cst.Attribute) else None
        return (isinstance(attribute, cst.Attribute) and attribute.attr.value == "to"
                and isinstance(outer, cst.Call) and self._device_argument(outer) is not None)

    def _device_argument(self, to_call: cst.Call) -> cst.BaseExpression | None:
        """The device of ``.to(device)`` when that is its only argument."""
        args = positional(to_call)
        if len(to_call.args) != 1 or len(args) != 1:
            return None
        value = args[0].value
        if isinstance(value, cst.Name) and (value.value in DEVICE_LIKE_NAMES or value.value == self.shared_name):
            return value
        if isinstance(value, cst.Attribute) and value.attr.value == "device":
            return value
        if is_torch_device_call(self.metadata, value):
            return value
        return None

    def _fold_to(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        func = original.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "to" and isinstance(func.value, cst.Call)):
            return None
        device = self._device_argument(original)
        if device is None or not self._needs_device(func.value):
            return None
        inner = updated.func.value  # type: ignore[union-attr]
        return self.fix(original, updated, with_keyword(inner, "device", device),
                        "create the tensor on the device instead of copying it there")

    VALID = [
        Valid("import torch\nimport torch.nn as nn\n\nclass GPT(nn.Module):\n    def forward(self, idx):\n"
              "        t = idx.size(1)\n        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)\n"
              "        return idx + pos\n"),
        Valid("import torch\nfrom torch.utils.data import Dataset, TensorDataset\n\n"
              "class Pairs(Dataset):\n    def __getitem__(self, i):\n        return torch.tensor([i, i + 1])\n\n"
              "features = torch.randn(100, 3)\nlabels = torch.randint(0, 2, (100,))\n"
              "data = TensorDataset(features, labels)\n"),
        Valid("import torch\n\ndef f(x):\n    return torch.zeros_like(x) + x.new_zeros(3)\n"),
        Valid("import torch\nsamples = [torch.randn(1, 4) for _ in range(8)]\nfor s in samples:\n    print(s)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch as th\n\ndef step(model, device):\n    noise = th.randn(4, 8)\n"
            "    zeros = th.zeros(\n        4,\n        8,\n    ).to(device)\n    return model(noise + zeros)\n",
            "import torch as th\n\ndef step(model, device):\n    noise = th.randn(4, 8, device=device)\n"
            "    zeros = th.zeros(\n        4,\n        8,\n        device=device,\n    )\n    return model(noise + zeros)\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\n\nclass RNN(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.rnn = nn.GRU(4, 8)\n\n    def forward(self, x):\n"
            "        h0 = torch.zeros(1, x.size(1), 8)\n        return self.rnn(x, h0)\n\n"
            "    def init_hidden(self, batch_size):\n        return torch.zeros(1, batch_size, 8)\n",
            "import torch\nimport torch.nn as nn\n\nclass RNN(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.rnn = nn.GRU(4, 8)\n\n    def forward(self, x):\n"
            "        h0 = torch.zeros(1, x.size(1), 8, device=x.device)\n        return self.rnn(x, h0)\n\n"
            "    def init_hidden(self, batch_size):\n"
            "        return torch.zeros(1, batch_size, 8, device=next(self.parameters()).device)\n",
        ),
        Invalid(
            "import torch\nfrom torch import randn\nw = randn(20, 5)\nb = torch.tensor([1.0, 2.0])\n",
            'import torch\nfrom torch import randn\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "w = randn(20, 5, device=device)\nb = torch.tensor([1.0, 2.0], device=device)\n",
        ),
    ]


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Append ``name=value`` to a call, following its layout (one per line, trailing comma)."""
    args = list(call.args)
    new = keyword_arg(name, value)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    trailing = last.comma if isinstance(last.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
    separator = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else \
        cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if len(args) == 1 and isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        separator = cst.Comma(whitespace_after=call.whitespace_before_args)  # one argument per line
    args[-1] = last.with_changes(comma=separator)
    return call.with_changes(args=[*args, new.with_changes(comma=trailing)])
