"""DM303 numpy-cpu: ``.numpy()`` on a torch tensor gets ``.cpu()`` before it.

Why: ``.numpy()`` on a GPU tensor raises "TypeError: can't convert cuda:0 device
type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
On a CPU tensor ``.cpu()`` returns the tensor itself, so the fix costs nothing there.

- ``x.detach().numpy()`` becomes ``x.detach().cpu().numpy()``.
- Nothing changes when ``.cpu()`` or ``.to("cpu")`` is already in the chain, or the value is a torch
  (or torchvision) function of CPU tensors (``make_grid(x.cpu())``) or arithmetic with one
  (``torch.sum((flow.cpu() - target) ** 2)``).
- Only receivers that are surely torch tensors (a tensor factory or tensor method
  chain, a name assigned from one, a model's output): ``.numpy()`` on other objects
  (pandas, TensorFlow) is left alone.
- A tensor handed to a matplotlib plot (``plt.imshow(img.detach())``, ``ax.plot(out[0])``) in a
  file that imports matplotlib and places something on a device gets ``.cpu()`` too: matplotlib
  converts it with NumPy, which fails the same way on a GPU tensor. Only surely-torch tensors
  that come from a model's output or were placed on a device (followed through assignments,
  loops, ``.append`` and the file's own functions), never a NumPy array or a CPU-made tensor.
"""

from __future__ import annotations

import ast
from typing import Iterator, Mapping

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from ..analysis.candidates import FileFacts, method_name
from ..analysis.groups import blocked_scopes, dominating_binding_above
from ..analysis.modules import called_on_import, single_assigned_value
from ..analysis.names import argument_for, keyword, method_call, positional, qualified_names
from ..analysis.roles import HOST_MAKERS, builds_model, is_model_callee, model_variables
from ..analysis.scopes import assigned_value, only_binding, scope_bindings
from ..analysis.tensors import is_surely_tensor, surely_tensor_variable, uses_of
from ..analysis.tree import ancestors, line_of, mentions_name, nodes_of
from .base import Invalid, Rule, Valid

# Methods that only a torch tensor has among objects offering ``.numpy()`` (TensorFlow
# tensors have none of them; NumPy arrays have no ``.numpy()`` at all).
_TORCH_ONLY_METHODS = frozenset({"detach", "detach_", "requires_grad_", "argmax", "softmax", "log_softmax",
                                 "sigmoid", "unsqueeze", "float", "double", "half", "long", "permute",
                                 "contiguous", "clamp"})
# Chains that keep a tensor a tensor without telling what it is.
_PASS_THROUGH_ATTRIBUTES = frozenset({"data", "grad", "T", "mT", "real", "imag"})
# Model methods that return the model itself.
_MODEL_CHAIN = frozenset({"to", "cuda", "cpu", "eval", "train", "float", "double", "half", "requires_grad_"})
_NOT_TENSOR_RESULTS = frozenset({"torch.load", "torch.save", "torch.is_tensor", "torch.numel", "torch.device",
                                 "torch.manual_seed", "torch.no_grad", "torch.get_default_dtype"})
_MAX_DEPTH = 6
_OTHER_NUMPY_LIBRARIES = ("tensorflow", "import jax", "from jax", "mxnet", "paddle", "cupy")
# matplotlib functions and Axes methods whose data arguments go through NumPy, and how many
# leading positional arguments are data (``plot(x, y)``, ``imshow(img)``).
_PLOT_DATA_ARGUMENTS = {"imshow": 1, "matshow": 1, "pcolormesh": 1, "plot": 2, "scatter": 2, "hist": 1,
                        "bar": 2, "semilogy": 2, "semilogx": 2, "loglog": 2, "contour": 3, "contourf": 3}


class NumpyCpu(Rule):
    CODE = "DM303"
    NAME = "numpy-cpu"
    SUMMARY = "`.numpy()` on a torch tensor gets `.cpu()` first"
    ERROR = "TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
    TRIGGERS = (".numpy()", "matplotlib")
    ORDER = 36

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # ``.numpy()`` whose own chain already goes to the CPU is left alone by the rule too.
        plots = "matplotlib" in facts.text
        return any((method_name(c) == "numpy" and not c.args and not c.keywords
                    and not _chain_on_cpu(c.func.value))  # type: ignore[attr-defined]
                   or (plots and method_name(c) in _PLOT_DATA_ARGUMENTS and c.args) for c in facts.calls())

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if isinstance(original_node.func, cst.Attribute) and original_node.func.attr.value in _PLOT_DATA_ARGUMENTS:
            return self._plotted(original_node, updated_node)
        if not method_call(original_node, "numpy") or original_node.args:
            return updated_node  # ``.numpy(force=True)`` copies to the CPU itself
        receiver = original_node.func.value  # type: ignore[union-attr]
        if _on_cpu_already(self.metadata, receiver) or self._fed_cpu_tensors(receiver) or not (
                self._is_torch_tensor(receiver) or self._only_torch_has_numpy()):
            return updated_node
        func = updated_node.func
        assert isinstance(func, cst.Attribute)
        cpu = cst.Call(cst.Attribute(func.value, cst.Name("cpu")))
        return self.fix(original_node, updated_node, updated_node.with_changes(func=func.with_changes(value=cpu)),
                        "`.numpy()` fails on a GPU tensor: copy it to the CPU first")

    def _plotted(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``ax.imshow(img.reshape(28, 28))`` -> ``ax.imshow(img.reshape(28, 28).cpu())`` for a
        surely-torch tensor not already on the CPU, in a file that imports matplotlib."""
        if "matplotlib" not in self.state.source or any(a.star for a in original.args) or not (
                mentions_name(self.tree, self.shared_name) or ".cuda(" in self.state.source):
            return updated  # a file that places nothing plots CPU tensors: nothing to copy
        scope = self.metadata[ScopeProvider].get(original)
        if any(scope is s for s in blocked_scopes(self.metadata, self.model_groups())):
            return updated  # beside a model whose group stays on the CPU (DM202): so does what it plots
        count = _PLOT_DATA_ARGUMENTS[original.func.attr.value]  # type: ignore[attr-defined]
        data = [i for i, a in enumerate(original.args[:count]) if a.keyword is None
                and not _made_host(a.value)  # ``img.data.numpy()``: an array (its ``.cpu()`` is the other fix's)
                and self._plotted_tensor(a.value) and self._from_a_model(a.value)
                and not _on_cpu_already(self.metadata, a.value)
                and not self._fed_cpu_tensors(a.value)]
        if not data:
            return updated
        args = [a.with_changes(value=_cpu_of(a.value)) if i in data else a for i, a in enumerate(updated.args)]
        return self.fix(original, updated, updated.with_changes(args=args),
                        "matplotlib converts a tensor with NumPy, which fails on a GPU tensor: copy it to the CPU first")

    def _plotted_tensor(self, value: cst.BaseExpression) -> bool:
        """Surely a torch tensor, also through arithmetic with numbers or other such tensors
        (``wave ** 2``; ``array * wave`` may be a NumPy array, so not that)."""
        if isinstance(value, cst.BinaryOperation):
            sides = (value.left, value.right)
            return any(self._plotted_tensor(v) for v in sides) \
                and all(isinstance(v, (cst.Integer, cst.Float)) or self._plotted_tensor(v) for v in sides)
        if isinstance(value, cst.UnaryOperation):
            return self._plotted_tensor(value.expression)
        return self._is_torch_tensor(value) or self._reaching_tensor(value)

    def _from_a_model(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """Does the plotted value come from a model's output (a model the rules move, so it may
        be on the GPU)? Followed through assignments, loops (``for ax, img in zip(axes,
        samples[-1])``), ``.append`` and the file's own function parameters to their callers.
        A tensor made or loaded on the CPU is plotted as it is: a ``.cpu()`` there is noise."""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(value, cst.BinaryOperation):
            return self._from_a_model(value.left, depth + 1) or self._from_a_model(value.right, depth + 1)
        if any(isinstance(link, cst.Call) and (keyword(link, "device") is not None or (
                isinstance(link.func, cst.Attribute) and link.func.attr.value in ("cuda", "to")))
               for link in _chain(value)):
            return True  # placed on a device right there (``wave.cuda()``, ``torch.ones(3, device=d)``)
        if any(self._sampled_by_a_model(link) for link in _chain(value)):
            return True
        root = _chain_root(value)
        if isinstance(root, cst.Call):
            if isinstance(root.func, cst.Name) and root.func.value in ("zip", "enumerate", "reversed", "list"):
                return any(self._from_a_model(a.value, depth + 1) for a in root.args)
            return self._surely_model(root.func, depth + 1) or is_model_callee(root.func, self._models())
        if not isinstance(root, cst.Name):
            return False
        parents = self.metadata[ParentNodeProvider]
        bindings = scope_bindings(self.metadata[ScopeProvider].get(root), root.value)
        names = [b.node for b in bindings if isinstance(b.node, (cst.Name, cst.Param))]
        reaching = dominating_binding_above(self.metadata, root, [n for n in names if isinstance(n, cst.Name)])
        for node in [reaching] if reaching is not None else names:
            if isinstance(node, cst.Param):
                if self._callers_give_a_model_output(node, depth):
                    return True
                continue
            holder = parents.get(node)
            while isinstance(holder, (cst.Element, cst.Tuple, cst.List)):
                holder = parents.get(holder)
            if isinstance(holder, cst.AssignTarget) and self._from_a_model(parents.get(holder).value, depth + 1):
                return True
            if isinstance(holder, cst.For) and self._from_a_model(holder.iter, depth + 1):
                return True
        for use in uses_of(self.metadata, root):
            method = parents.get(use)  # ``history.append(gen(z))``
            call = parents.get(method) if isinstance(method, cst.Attribute) and method.value is use else None
            if isinstance(call, cst.Call) and call.func is method and method.attr.value in ("append", "extend") \
                    and any(self._from_a_model(a.value, depth + 1) for a in call.args):
                return True
        return False

    def _sampled_by_a_model(self, node: cst.BaseExpression) -> bool:
        """``model.prior.sample((n,))``, ``model.sample(n)``: drawn by a model or by a distribution it
        holds (moved with it), so a tensor on the model's device."""
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in ("sample", "rsample")):
            return False
        base = node.func.value
        while isinstance(base, cst.Attribute):
            base = base.value
        return isinstance(base, cst.Name) and base.value in self._models()

    def _callers_give_a_model_output(self, param: cst.Param, depth: int) -> bool:
        """A parameter of the file's own function, given a model's output by some call of it."""
        function = self.metadata[ParentNodeProvider].get(self.metadata[ParentNodeProvider].get(param))
        if not isinstance(function, cst.FunctionDef) or param not in function.params.params:
            return False
        index = list(function.params.params).index(param)
        for call in nodes_of(self.tree, cst.Call):
            if isinstance(call.func, cst.Name) and call.func.value == function.name.value:
                given = argument_for(call, index, param.name.value)
                if given is not None and self._from_a_model(given, depth + 1):
                    return True
        return False

    def _models(self) -> set[str]:
        if not hasattr(self, "_model_names"):
            self._model_names = model_variables(self.metadata, self.tree, self.facts)
        return self._model_names

    def _reaching_tensor(self, value: cst.BaseExpression) -> bool:
        """``img = img.detach()`` then ``ax.imshow(img.reshape(28, 28))``: the one binding of
        ``img`` that surely reaches the use is a surely-torch tensor (the loop's own ``img``
        is rebound first)."""
        root = _chain_root(value)
        reached = _reaching_value(self.metadata, root) if isinstance(root, cst.Name) else None
        return reached is not None and self._is_torch_tensor(reached)

    def _fed_cpu_tensors(self, receiver: cst.BaseExpression) -> bool:
        """``def show(alphas): ... alphas[t].numpy()`` where every call of ``show`` in the file
        hands it a tensor made on the CPU (``alphas = torch.FloatTensor(rows)`` just above):
        nothing to copy, and no GPU tensor to warn about."""
        root, param = _chain_root(receiver), None
        for _ in range(_MAX_DEPTH):  # ``current = alphas[t, :]`` then ``current.numpy()``
            param = only_binding(self.metadata, root) if isinstance(root, cst.Name) else None
            value = assigned_value(self.metadata, param)
            if value is None:
                break
            root = _chain_root(value)
        if not isinstance(param, cst.Param):
            return False
        parents = self.metadata[ParentNodeProvider]
        function = parents.get(parents.get(param))
        index = next((i for i, p in enumerate(function.params.params) if p is param), None) \
            if isinstance(function, cst.FunctionDef) and parents.get(function) is self.tree else None
        if index is None:
            return False
        calls = [n for n in nodes_of(self.tree, cst.Call) if isinstance(n.func, cst.Name)
                 and n.func.value == function.name.value and only_binding(self.metadata, n.func) is function]
        return bool(calls) and all(self._cpu_made(argument_for(call, index, param.name.value), call) for call in calls)

    def _cpu_made(self, value: cst.BaseExpression | None, at: cst.CSTNode) -> bool:
        """A tensor surely on the CPU at ``at``: a legacy constructor or ``from_numpy`` not moved
        in its chain, or a variable whose last plain assignment above ``at`` is one (none in a loop)."""
        if isinstance(value, cst.Name):
            bindings = scope_bindings(self.metadata[ScopeProvider].get(value), value.value)
            if not bindings or any(isinstance(p, (cst.For, cst.While)) for b in bindings
                                   for p in ancestors(self.metadata, b.node)):
                return False
            above = [b.node for b in bindings if line_of(self.metadata, b.node) < line_of(self.metadata, at)]
            value = assigned_value(self.metadata, max(above, key=lambda n: line_of(self.metadata, n), default=None))
        return isinstance(value, cst.Call) and bool(qualified_names(self.metadata, value.func) & HOST_MAKERS)

    def _only_torch_has_numpy(self) -> bool:
        """In a file that places things on a device and imports no other array library with a
        ``.numpy()`` method (TensorFlow, JAX, MXNet, Paddle), every ``.numpy()`` is a torch
        tensor's: ``loss.data.numpy()`` of a moved model's loss gets ``.cpu()`` too."""
        if not hasattr(self, "_torch_only"):
            text = self.state.source
            self._torch_only = not any(lib in text for lib in _OTHER_NUMPY_LIBRARIES) and (
                mentions_name(self.tree, self.shared_name) or ".cuda(" in text or ".to(" in text)
        return self._torch_only

    def _is_torch_tensor(self, receiver: cst.BaseExpression, depth: int = 0) -> bool:
        """Surely a torch tensor: some link of the chain is only found on torch tensors, or
        the chain starts at a factory, a torch function, a torch model's output, or a
        variable bound to one of these (DataLoader batch elements included)."""
        if depth > _MAX_DEPTH:
            return False
        node = receiver
        while True:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and node.func.attr.value in ("numpy", "tolist", "item"):
                return False  # ``model(x).detach().numpy()`` left torch: a NumPy array or a number
            if is_surely_tensor(self.metadata, node):
                return True
            if isinstance(node, cst.Call) and self._torch_function(node):
                return True
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and not called_on_import(self.metadata, node.func):  # a method, not a module function
                if node.func.attr.value in _TORCH_ONLY_METHODS or self._sampled_by_a_model(node):
                    return True
                node = node.func.value
            elif isinstance(node, cst.Subscript):
                node = node.value
            elif isinstance(node, cst.Attribute) and node.attr.value in _PASS_THROUGH_ATTRIBUTES:
                node = node.value
            else:
                break
        if isinstance(node, cst.Call):
            return self._surely_model(node.func, depth + 1)
        if isinstance(node, cst.Name):
            if surely_tensor_variable(self.metadata, node):
                return True
            value = single_assigned_value(self.metadata, node)
            return value is not None and self._is_torch_tensor(value, depth + 1)
        return False

    def _torch_function(self, call: cst.Call) -> bool:
        """``torch.sigmoid(...)``, ``F.softmax(...)``: torch functions return tensors."""
        names = qualified_names(self.metadata, call.func) - _NOT_TENSOR_RESULTS
        return any((n.startswith("torch.") and n.count(".") == 1 and n[6:7].islower())
                   or n.startswith("torch.nn.functional.") for n in names)

    def _surely_model(self, node: cst.BaseExpression, depth: int) -> bool:
        """``Net()``, ``nn.Linear(...).to(device)``, or a variable bound once to one of them."""
        if depth > _MAX_DEPTH:
            return False
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in _MODEL_CHAIN:
            node = node.func.value
        if isinstance(node, cst.Call):
            return builds_model(self.metadata, node, self.facts)
        if isinstance(node, cst.Name):
            value = single_assigned_value(self.metadata, node)
            return value is not None and self._surely_model(value, depth + 1)
        return False

    VALID = [
        Valid("import torch\nx = torch.ones(3)\ny = x.detach().cpu().numpy()\nz = x.to('cpu').numpy()\n"),
        Valid("import torch\nimport pandas as pd\ndf = pd.DataFrame()\narr = df.to_numpy()\nv = df.values\n"),
        Valid("import torch\n\ndef f(frame):\n    return frame.numpy()\n"),
        Valid("import numpy as np\nimport matplotlib.pyplot as plt\nimport torch\nplt.imshow(np.ones((2, 2)).reshape(4, 1))\n"),
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
        Invalid(
            "import torch\nimport matplotlib.pyplot as plt\nwave = torch.linspace(-1, 1, 9).cuda()\nplt.plot(wave, wave ** 2)\n",
            "import torch\nimport matplotlib.pyplot as plt\nwave = torch.linspace(-1, 1, 9).cuda()\nplt.plot(wave.cpu(), (wave ** 2).cpu())\n",
        ),
    ]


def _made_host(value: cst.BaseExpression) -> bool:
    """``t.numpy()``, ``t.numpy()[0]``, ``t.tolist()``, ``t.item()``: a NumPy array or Python data, no tensor."""
    return any(isinstance(link, cst.Call) and isinstance(link.func, cst.Attribute)
               and link.func.attr.value in ("numpy", "tolist", "item") for link in _chain(value))


def _on_cpu_already(metadata: Mapping, receiver: cst.BaseExpression, depth: int = 0) -> bool:
    """``.cpu()`` or ``.to("cpu")`` somewhere in the chain (or in the value of a variable
    bound once, ``y = x.cpu()``, or in an operand of arithmetic)."""
    node = receiver
    for node in _chain(receiver):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and (node.func.attr.value == "cpu" or (node.func.attr.value == "to" and _to_cpu(node))):
            return True
        if isinstance(node, cst.Call) and _of_cpu_tensors(metadata, node, depth):
            return True
    if isinstance(node, cst.Name) and depth < _MAX_DEPTH:
        value = single_assigned_value(metadata, node) or _reaching_value(metadata, node)
        return value is not None and _on_cpu_already(metadata, value, depth + 1)
    if isinstance(node, cst.BinaryOperation) and depth < _MAX_DEPTH:
        # ``(flow[0].cpu() - flow_gt) ** 2``: arithmetic with a CPU tensor gives one (a GPU operand would
        # fail there); at worst a needed ``.cpu()`` is not added, and the code stays as written
        return any(_on_cpu_already(metadata, side, depth + 1) for side in (node.left, node.right))
    return False


def _reaching_value(metadata: Mapping, name: cst.Name) -> cst.BaseExpression | None:
    """``img = make_grid(img.cpu())`` above ``img.numpy()`` in a function whose parameter is ``img``:
    the value of the assignment that surely reaches the use."""
    bindings = scope_bindings(metadata[ScopeProvider].get(name), name.value)
    reaching = dominating_binding_above(metadata, name, [b.node for b in bindings if isinstance(b.node, cst.Name)])
    return assigned_value(metadata, reaching) if reaching is not None else None


def _of_cpu_tensors(metadata: Mapping, call: cst.Call, depth: int) -> bool:
    """``make_grid(x.cpu().data)``, ``torch.sigmoid(x.cpu())``: a torch (or torchvision) function
    whose every positional argument is on the CPU gives a CPU tensor."""
    positional_args = [a for a in call.args if a.keyword is None]
    if not positional_args or depth >= _MAX_DEPTH or any(a.star for a in call.args) \
            or any(a.keyword is not None and a.keyword.value == "device" for a in call.args):
        return False
    if not any(n.startswith(("torch.", "torchvision.")) and ".cuda" not in n for n in qualified_names(metadata, call.func)):
        return False
    return all(_on_cpu_already(metadata, a.value, depth + 1) for a in positional_args)


def _cpu_of(value: cst.BaseExpression) -> cst.Call:
    """``value.cpu()``, with parentheses around an operation (``(grid ** 2).cpu()``)."""
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Attribute(value, cst.Name("cpu")))


def _chain(node: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """``alphas[t, :].detach()``, ``alphas[t, :]``, ``alphas``: each link down to the root."""
    while True:
        yield node
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Attribute) and node.attr.value in _PASS_THROUGH_ATTRIBUTES:
            node = node.value
        else:
            return


def _chain_root(node: cst.BaseExpression) -> cst.BaseExpression:
    """``alphas[t, :].detach()`` -> ``alphas``."""
    for node in _chain(node):
        pass
    return node


def _chain_on_cpu(node: ast.AST) -> bool:
    """``_on_cpu_already`` on CPython's ``ast``, the chain part only (a variable's value is
    left to the rule): ``x.detach().cpu()``, ``y.to("cpu")[0]``, ``z.to(device="cpu").data``."""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "cpu" or (node.func.attr == "to" and _ast_to_cpu(node)):
                return True
            node = node.func.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Attribute) and node.attr in _PASS_THROUGH_ATTRIBUTES:
            node = node.value
        else:
            return False


def _ast_to_cpu(call: ast.Call) -> bool:
    """``_to_cpu`` on CPython's ``ast``."""
    device = next((k.value for k in call.keywords if k.arg == "device"), None)
    args = [a for a in call.args if not isinstance(a, ast.Starred)]
    value = device if device is not None else (args[0] if args else None)
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
        value = value.args[0]  # torch.device("cpu")
    # A plain ``"cpu"`` literal only (5 characters): ``"c" "pu"`` is one constant here but not to libcst.
    return isinstance(value, ast.Constant) and value.value == "cpu" and value.lineno == value.end_lineno \
        and value.end_col_offset - value.col_offset == 5  # type: ignore[operator]


def _to_cpu(call: cst.Call) -> bool:
    """``.to("cpu")``, ``.to(device="cpu")``, ``.to(torch.device("cpu"))``."""
    args = positional(call)
    device = keyword(call, "device")
    value = device.value if device is not None else (args[0].value if args else None)
    if isinstance(value, cst.Call) and len(value.args) == 1:
        value = value.args[0].value  # torch.device("cpu")
    return isinstance(value, cst.SimpleString) and value.evaluated_value == "cpu"
