"""DM303 numpy-cpu: ``.numpy()`` on a torch tensor gets ``.cpu()`` before it.

Why: ``.numpy()`` on a GPU tensor raises "TypeError: can't convert cuda:0 device
type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
On a CPU tensor ``.cpu()`` returns the tensor itself, so the fix costs nothing there.

- ``x.detach().numpy()`` becomes ``x.detach().cpu().numpy()``.
- Nothing changes when ``.cpu()`` or ``.to("cpu")`` is already in the chain.
- Only receivers that are surely torch tensors (a tensor factory or tensor method
  chain, a name assigned from one, a model's output): ``.numpy()`` on other objects
  (pandas, TensorFlow) is left alone.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.names import method_call
from ..analysis.tensors import is_surely_tensor
from .base import Invalid, Rule, Valid

_TORCH_ONLY_METHODS = frozenset({"detach", "requires_grad_", "argmax", "softmax", "sigmoid", "squeeze",
                                 "unsqueeze"})


class NumpyCpu(Rule):
    CODE = "DM303"
    NAME = "numpy-cpu"
    SUMMARY = "`.numpy()` on a torch tensor gets `.cpu()` first"
    ERROR = "TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
    TRIGGERS = (".numpy()",)
    ORDER = 36

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not method_call(original_node, "numpy") or original_node.args:
            return updated_node
        receiver = original_node.func.value  # type: ignore[union-attr]
        if _on_cpu_already(receiver) or not self._is_torch_tensor(receiver):
            return updated_node
        func = updated_node.func
        assert isinstance(func, cst.Attribute)
        cpu = cst.Call(cst.Attribute(func.value, cst.Name("cpu")))
        return self.fix(original_node, updated_node, updated_node.with_changes(func=func.with_changes(value=cpu)),
                        "`.numpy()` fails on a GPU tensor: copy it to the CPU first")

    def _is_torch_tensor(self, receiver: cst.BaseExpression) -> bool:
        if is_surely_tensor(self.metadata, receiver):
            return True
        node = receiver
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value in _TORCH_ONLY_METHODS:
                return True
            node = node.func.value
        return False

    VALID = [
        Valid("import torch\nx = torch.ones(3)\ny = x.detach().cpu().numpy()\nz = x.to('cpu').numpy()\n"),
        Valid("import torch\nimport pandas as pd\ndf = pd.DataFrame()\narr = df.to_numpy()\nv = df.values\n"),
        Valid("import torch\n\ndef f(frame):\n    return frame.numpy()\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\n\ndef predict(model, x):\n    logits = model(x)\n"
            "    return logits.argmax(dim=1).numpy(), logits.detach().numpy()\n",
            "import torch\n\ndef predict(model, x):\n    logits = model(x)\n"
            "    return logits.argmax(dim=1).cpu().numpy(), logits.detach().cpu().numpy()\n",
        ),
        Invalid(
            "import torch\nnoise = torch.randn(4)\nvalues = noise.numpy()\n",
            "import torch\nnoise = torch.randn(4)\nvalues = noise.cpu().numpy()\n",
        ),
    ]


def _on_cpu_already(receiver: cst.BaseExpression) -> bool:
    node = receiver
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        attr = node.func.attr.value
        if attr == "cpu":
            return True
        if attr == "to" and node.args and isinstance(node.args[0].value, cst.SimpleString) and \
                node.args[0].value.evaluated_value == "cpu":
            return True
        node = node.func.value
    return False
