"""DM203 batch-to-device: a loop over a DataLoader moves each batch to the device.

Why: a DataLoader yields CPU tensors (its workers must not touch CUDA and pinned
memory is CPU memory). A model on the GPU fed a CPU batch fails with "Expected all
tensors to be on the same device" (or "Input type (torch.FloatTensor) and weight
type (torch.cuda.FloatTensor) should be the same"). The expert fix is one line at
the top of the loop body.

- ``for x, y in loader`` and ``for i, (x, y) in enumerate(loader)``:
  ``x, y = x.to(device), y.to(device)``;
- ``for batch in loader`` with a dict batch: ``batch = {k: v.to(device) for k, v in batch.items()}``;
  with a single tensor: ``batch = batch.to(device)``; unpacked first thing in the body
  (``x, y = batch``): the move goes right after the unpacking;
- ``non_blocking=True`` when the DataLoader has ``pin_memory=True``;
- ``pack_padded_sequence`` lengths stay on the CPU; batches already moved are left
  alone; other shapes (custom batch objects, nested structures) are reported.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.loops import (BatchShape, batch_shape, cpu_only_lengths, loader_call, loader_source,
                              moved_in, pins_memory)
from ..analysis.names import keyword_arg
from .base import Invalid, Rule, Valid


class BatchToDevice(Rule):
    CODE = "DM203"
    NAME = "batch-to-device"
    SUMMARY = "loops over a DataLoader move each batch to the device at the top of the body"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    ORDER = 45

    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.For:
        source, enumerated = loader_source(self.metadata, original_node.iter)
        if not isinstance(source, cst.Name):
            return updated_node
        loader = loader_call(self.metadata, source)
        if loader is None:
            return updated_node
        device = self.device_for(original_node)
        if device is None or not isinstance(updated_node.body, cst.IndentedBlock):
            return updated_node
        target = original_node.target
        if enumerated and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
            target = target.elements[1].value
        names = _names(target)
        if names is None:
            self.report(original_node, "batch shape not recognised (nested or starred); move it to the device by hand")
            return updated_node
        if moved_in(original_node.body, set(names)):
            return updated_node
        body = list(updated_node.body.body)
        extra = [keyword_arg("non_blocking", cst.Name("True"))] if pins_memory(loader) else []
        insert_at = 0
        if len(names) == 1 and isinstance(target, cst.Name):
            shape = batch_shape(names[0], original_node.body)
            statement, insert_at, names = self._single(names[0], shape, body, device, extra)
            if statement is None:
                self.report(original_node, f"`{names[0]}` is not a tensor, tuple or dict batch devmod can see; "
                                           "move it to the device by hand")
                return updated_node
        else:
            names = [n for n in names if n not in cpu_only_lengths(self.metadata, original_node.body)]
            if not names:
                return updated_node
            statement = _move_names(names, device, extra)
        if moved_in(original_node.body, set(names)):
            return updated_node
        body.insert(insert_at, statement)
        replacement = updated_node.with_changes(body=updated_node.body.with_changes(body=body))
        return self.fix(original_node, updated_node, replacement,
                        f"batch from `{source.value}` is never moved to the device")

    def _single(self, name: str, shape: BatchShape, body: list, device, extra):
        if shape is BatchShape.DICT:
            comp = cst.parse_expression(f"{{k: v.to(__D__) for k, v in {name}.items()}}")
            comp = comp.visit(_Device(device, extra))
            return _assign([name], comp), 0, [name]
        if shape is BatchShape.TENSOR:
            return _move_names([name], device, extra), 0, [name]
        if shape is BatchShape.SEQUENCE and body and _unpacks(body[0], name):
            unpacked = _names(body[0].body[0].targets[0].target)
            if unpacked:
                return _move_names(unpacked, device, extra), 1, unpacked
        return None, 0, [name]

    VALID = [
        Valid('import torch\nfrom torch.utils.data import DataLoader\n'
              'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "loader = DataLoader(range(4))\nfor x, y in loader:\n    x, y = x.to(device), y.to(device)\n"),
        Valid("import torch\nfor x, y in zip([1], [2]):\n    print(x)\n"),
        Valid('import torch\nfrom torch.utils.data import DataLoader\n'
              'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "def run(model, loader):\n    for batch in loader:\n"
              "        batch = {k: v.to(device) for k, v in batch.items()}\n        model(**batch)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader as DL\n\n"
            "loader = DL(data, batch_size=4, pin_memory=True)\nfor i, (x, y) in enumerate(loader):\n"
            "    # forward\n    out = model(x)\n",
            "import torch\nfrom torch.utils.data import DataLoader as DL\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "loader = DL(data, batch_size=4, pin_memory=True)\nfor i, (x, y) in enumerate(loader):\n"
            "    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
            "    # forward\n    out = model(x)\n",
        ),
        Invalid(
            "import torch\n\ndef train(model, train_loader, device):\n    for batch in train_loader:\n"
            '        loss = model(batch["x"], batch["y"])\n',
            "import torch\n\ndef train(model, train_loader, device):\n    for batch in train_loader:\n"
            "        batch = {k: v.to(device) for k, v in batch.items()}\n"
            '        loss = model(batch["x"], batch["y"])\n',
        ),
        Invalid(
            "import torch\n\ndef evaluate(model, loader, device):\n    for batch in loader:\n"
            "        inputs, labels = batch\n        model(inputs)\n",
            "import torch\n\ndef evaluate(model, loader, device):\n    for batch in loader:\n"
            "        inputs, labels = batch\n        inputs, labels = inputs.to(device), labels.to(device)\n"
            "        model(inputs)\n",
        ),
        Invalid(
            "import torch\n\ndef evaluate(model, loader, device):\n    for batch in loader:\n"
            "        model(batch.images)\n",
        ),
    ]


class _Device(cst.CSTTransformer):
    """Fills the ``__D__`` placeholder of a parsed template with the device (and extra args)."""

    def __init__(self, device: cst.BaseExpression, extra: list[cst.Arg]) -> None:
        super().__init__()
        self.device, self.extra = device, extra

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if updated_node.args and isinstance(updated_node.args[0].value, cst.Name) and \
                updated_node.args[0].value.value == "__D__":
            return updated_node.with_changes(args=_args(self.device, self.extra))
        return updated_node


def _args(device: cst.BaseExpression, extra: list[cst.Arg]) -> list[cst.Arg]:
    args = [cst.Arg(device), *extra]
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]


def _move(name: str, device, extra) -> cst.Call:
    return cst.Call(cst.Attribute(cst.Name(name), cst.Name("to")), _args(device, extra))


def _move_names(names: list[str], device, extra) -> cst.SimpleStatementLine:
    if len(names) == 1:
        return _assign(names, _move(names[0], device, extra))
    return _assign(names, cst.Tuple([cst.Element(_move(n, device, extra)) for n in names], lpar=[], rpar=[]))


def _assign(names: list[str], value: cst.BaseExpression) -> cst.SimpleStatementLine:
    target = cst.Name(names[0]) if len(names) == 1 else cst.Tuple(
        [cst.Element(cst.Name(n)) for n in names], lpar=[], rpar=[])
    return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], value)])


def _names(target: cst.BaseExpression) -> list[str] | None:
    """Plain names of a loop target (``x`` or ``x, y``); None for nested or starred targets."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        if all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements):
            return [e.value.value for e in target.elements]  # type: ignore[union-attr]
    return None


def _unpacks(statement: cst.CSTNode, name: str) -> bool:
    """``a, b = name`` as a statement."""
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Assign) and len(statement.body[0].targets) == 1
            and isinstance(statement.body[0].targets[0].target, (cst.Tuple, cst.List))
            and isinstance(statement.body[0].value, cst.Name) and statement.body[0].value.value == name)
