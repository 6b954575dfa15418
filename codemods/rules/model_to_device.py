"""DM202 model-to-device: a model built in training code gets ``.to(device)`` once.

Why: a model's parameters are created on the CPU. Feeding it a batch on the GPU
(or the other way round) fails with "Expected all tensors to be on the same
device" (or "Input type (torch.cuda.FloatTensor) and weight type
(torch.FloatTensor) should be the same"). Moving the model right where it is
built, before an optimizer is made from its parameters, is the expert fix.

- Models: nn.Module subclasses of the file, ``torch.nn`` layers and containers,
  ``torchvision.models.*``, ``timm.create_model``, ``*.from_pretrained``.
- A model later wrapped in ``nn.DataParallel`` / ``DistributedDataParallel`` is
  moved once, after wrapping.
- Loss modules built with a ``weight=`` / ``pos_weight=`` tensor move too: those
  tensors are buffers.
- Nothing is added where the model is already moved (``model.to(...)``,
  ``.cuda()``, ``device=`` in the constructor), inside nn.Module methods (sub-modules
  move with their parent) or in Dataset code.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider, ScopeProvider

from ..analysis.names import keyword, method_call, qualified_names
from ..analysis.roles import is_loss_constructor, is_model_constructor
from ..analysis.scopes import ScopeKind
from ..analysis.tree import walk
from .base import Invalid, Rule, Valid

WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                      "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.data_parallel.DataParallel"})
_MOVES = ("to", "cuda", "to_empty")
_LOSS_TENSOR_KEYWORDS = ("weight", "pos_weight")


class ModelToDevice(Rule):
    CODE = "DM202"
    NAME = "model-to-device"
    SUMMARY = "a model (or a loss with a weight tensor) built in training code gets `.to(device)` once"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    ORDER = 40

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if len(original_node.targets) != 1 or not isinstance(original_node.targets[0].target, cst.Name):
            return updated_node
        value = original_node.value
        if not isinstance(value, cst.Call) or not self._builds_model(value):
            return updated_node
        if self.devices.place(original_node).kind not in (ScopeKind.MODULE, ScopeKind.FUNCTION):
            return updated_node
        name = original_node.targets[0].target.value
        if self._already_placed(value) or self._moved_elsewhere(original_node, name):
            return updated_node
        device = self.device_for(original_node)
        if device is None:
            return updated_node
        moved = cst.Call(cst.Attribute(updated_node.value, cst.Name("to")), [cst.Arg(device)])
        return self.fix(original_node, updated_node, updated_node.with_changes(value=moved),
                        f"model `{name}` is never moved: `.to(device)` where it is built")

    def _builds_model(self, call: cst.Call) -> bool:
        if is_model_constructor(self.metadata, call, self.facts):
            return True
        if is_loss_constructor(self.metadata, call):
            return any(keyword(call, k) is not None for k in _LOSS_TENSOR_KEYWORDS)
        return False

    def _already_placed(self, call: cst.Call) -> bool:
        device = keyword(call, "device")
        return device is not None and not (isinstance(device.value, cst.Name) and device.value.value == "None")

    def _moved_elsewhere(self, assign: cst.Assign, name: str) -> bool:
        """A later ``name.to(...)``/``.cuda()``, or a wrapper that takes the model over.

        libcst's references are not flow-sensitive, so only uses after this
        assignment (by position) count.
        """
        scope = self.metadata[ScopeProvider].get(assign)
        if scope is None:
            return True
        end = self.get_metadata(PositionProvider, assign).end
        parents = self.metadata[ParentNodeProvider]
        for access in scope.accesses[name]:
            node = access.node
            start = self.get_metadata(PositionProvider, node).start
            if (start.line, start.column) < (end.line, end.column):
                continue
            parent = parents.get(node)
            if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _MOVES:
                return True
            if isinstance(parent, cst.Arg):
                call = parents.get(parent)
                if isinstance(call, cst.Call) and qualified_names(self.metadata, call.func) & WRAPPERS:
                    return True  # moved after wrapping (by this rule, on the wrapper)
        return False

    VALID = [
        Valid('import torch\nimport torch.nn as nn\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "model = nn.Linear(4, 2).to(device)\n"),
        Valid('import torch\nimport torch.nn as nn\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "model = nn.Linear(4, 2)\nmodel.to(device)\n"),
        Valid("import torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.fc = nn.Linear(4, 2)\n        head = nn.Linear(2, 2)\n        self.head = head\n"),
        Valid("import torch.nn as nn\ncriterion = nn.CrossEntropyLoss()\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
            "model = Net()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
            "import torch\nimport torch.nn as nn\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "class Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
            "model = Net().to(device)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\ndef main(device):\n    model = nn.Linear(3, 1)\n"
            "    model = nn.DataParallel(model)\n    w = torch.tensor([1.0, 2.0])\n"
            "    loss_fn = nn.CrossEntropyLoss(weight=w)\n    return model, loss_fn\n",
            "import torch\nfrom torch import nn\n\ndef main(device):\n    model = nn.Linear(3, 1)\n"
            "    model = nn.DataParallel(model).to(device)\n    w = torch.tensor([1.0, 2.0])\n"
            "    loss_fn = nn.CrossEntropyLoss(weight=w).to(device)\n    return model, loss_fn\n",
        ),
    ]
