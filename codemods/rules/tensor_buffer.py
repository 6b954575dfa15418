"""DM301 tensor-buffer: a tensor attribute set in ``nn.Module.__init__`` becomes a buffer.

Why: ``model.to(device)`` moves parameters and registered buffers, not plain tensor
attributes. ``self.mask = torch.tril(torch.ones(n, n))`` stays on the CPU while the
model moves, and ``forward`` fails with "Expected all tensors to be on the same
device". ``self.register_buffer("mask", ..., persistent=False)`` moves with the
model; non-persistent, so ``state_dict()`` keys do not change and old checkpoints
still load.

Only when the attribute is assigned once, in ``__init__``, after
``super().__init__()``, with a value that is surely a tensor (a factory call or a
tensor method chain on one). Left alone:

- attributes assigned anywhere else in the class or a class of the same file that
  derives from it or that it derives from (``self.cache = x.detach()`` in forward,
  ``setattr``, ``del``): a buffer only accepts tensors or None;
- ``nn.Parameter``s, names already registered (``register_buffer``,
  ``register_parameter``, ``add_module``) and names the class body defines itself
  (a property or class attribute of that name makes ``register_buffer`` raise);
- ``__init__`` of classes that are not ``nn.Module`` subclasses.

``device=`` in the factory (a parameter of ``__init__``) stays as written. Note that a
buffer also follows ``model.half()`` / ``model.double()``, as parameters do.
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.candidates import FileFacts, init_assignment, may_be_tensor
from ..analysis.modules import init_attribute, only_binding
from ..analysis.names import keyword_arg
from ..analysis.tensors import is_surely_tensor
from .base import Invalid, Rule, Valid


class TensorBuffer(Rule):
    CODE = "DM301"
    NAME = "tensor-buffer"
    SUMMARY = "a tensor attribute set once in `nn.Module.__init__` becomes a non-persistent buffer"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    TRIGGERS = ("self.",)
    ORDER = 25

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # ``self.x = <maybe a tensor>`` in the ``__init__`` of a class that may be a model.
        return any(init_assignment(facts, node) and may_be_tensor(facts, node.value)
                   for node in facts.nodes(ast.Assign))

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine):
        if len(original_node.body) != 1 or not isinstance(original_node.body[0], cst.Assign):
            return updated_node
        assign = original_node.body[0]
        place = self.devices.place(original_node)
        attribute = init_attribute(place, assign, original_node)
        if attribute is None or place.klass is None:
            return updated_node
        if not is_surely_tensor(self.metadata, assign.value) or not only_binding(self.facts, place.klass, attribute):
            return updated_node
        value = updated_node.body[0].value  # type: ignore[union-attr]
        call = cst.Call(
            cst.Attribute(cst.Name("self"), cst.Name("register_buffer")),
            [cst.Arg(cst.SimpleString(f'"{attribute}"')), cst.Arg(value), keyword_arg("persistent", cst.Name("False"))])
        call = call.with_changes(args=[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in call.args])
        replacement = updated_node.with_changes(body=[cst.Expr(call)])
        return self.fix(original_node, updated_node, replacement,
                        f"`self.{attribute}` is a plain tensor attribute: model.to(device) would not move it")

    VALID = [
        Valid("import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.w = nn.Parameter(torch.randn(3))\n"
              '        self.register_buffer("mask", torch.ones(3))\n'),
        Valid("import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.cache = torch.zeros(3)\n\n    def forward(self, x):\n"
              "        self.cache = x.detach()\n        return x\n"),
        Valid("import torch\n\nclass Plain:\n    def __init__(self):\n        self.table = torch.zeros(3)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.nn as nn\n\nclass Attn(nn.Module):\n    def __init__(self, n, device):\n"
            "        super().__init__()\n        self.mask = torch.tril(torch.ones(n, n))\n"
            "        self.cache = torch.randn(10, device=device)\n\n    def forward(self, x):\n"
            "        return x * self.mask + self.cache\n",
            "import torch\nimport torch.nn as nn\n\nclass Attn(nn.Module):\n    def __init__(self, n, device):\n"
            '        super().__init__()\n        self.register_buffer("mask", torch.tril(torch.ones(n, n)), persistent=False)\n'
            '        self.register_buffer("cache", torch.randn(10, device=device), persistent=False)\n\n'
            "    def forward(self, x):\n        return x * self.mask + self.cache\n",
        ),
    ]
