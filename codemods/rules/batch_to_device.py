"""DM203 batch-to-device: a loop over a DataLoader moves each batch to the device.

Why: a DataLoader yields CPU tensors (its workers must not touch CUDA and pinned
memory is CPU memory). A model on the GPU fed a CPU batch fails with "Expected all
tensors to be on the same device" (or "Input type (torch.FloatTensor) and weight
type (torch.cuda.FloatTensor) should be the same"). The expert fix is one line at
the top of the loop body.

- Loaders: names assigned from ``DataLoader(...)`` (any import alias), parameters
  named ``*loader*`` / ``dl`` / ``train_dl`` or annotated ``DataLoader``,
  ``train_loader = get_loader(...)``, a list of sample tensors
  (``[torch.randn(1, 10) for _ in range(n)]``), also through ``enumerate``,
  ``tqdm`` and ``iter``.
- ``for x, y in loader`` and ``for i, (x, y) in enumerate(loader)``:
  ``x, y = x.to(device), y.to(device)``;
- ``for batch in loader`` with a dict batch (``batch["x"]``, ``batch.items()``,
  ``model(**batch)``): ``batch = {k: v.to(device) for k, v in batch.items()}``;
  passed to a model as a tensor: ``batch = batch.to(device)``; unpacked in the body
  (``x, y = batch``, ``x = batch[0]``): the move goes right after the unpacking;
- ``non_blocking=True`` when the DataLoader has ``pin_memory=`` set;
- ``pack_padded_sequence`` lengths stay on the CPU, and so do loop variables named
  like file names or paths, and labels handed to a project helper that builds a CPU tensor
  from them (``one_hot(y)``; DM201 moves the helper's result);
- a batch handed to a NumPy function in the loop (``np.clip(noisy, 0, 1)``), directly or
  computed from it, cannot move: the loop is reported (NumPy reads a CUDA tensor as an array);
- nothing changes in a loop that feeds no model: no model or loss is called, and no model is
  handed to a call (``mean_std(loader)`` summarising data on the CPU, whose caller may
  then call ``.numpy()``); the batch has nothing on the device to meet there;
- nothing changes where a batch is already moved in the loop (``.to``, ``.cuda()``,
  a comprehension, a ``to_device(batch, device)`` helper, or a function of the project that
  moves the parameter it is handed, ``None if g is None else g.to(device)``), in Dataset, model or
  other class code, or where Accelerate/Fabric prepared the loader;
- other shapes (custom batch objects, nested or starred targets, batches used in
  ways devmod cannot see) are reported, not rewritten.
"""

from __future__ import annotations

import ast
import dataclasses

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from ..analysis.candidates import FileFacts, may_iterate_loader
from ..analysis.devices import DEVICE_LIKE_NAMES
from ..analysis.loops import Loader, batch_plan, find_loader
from ..analysis.names import argument_for, keyword_arg
from ..analysis.pinned import pinned_to_cpu
from ..analysis.groups import blocked_callee, models_fed
from ..analysis.roles import is_loss_callee, is_model_callee, is_model_method_call, model_variables, raw_weight_functions
from ..analysis.scopes import ScopeKind, scope_bindings
from ..analysis.tree import nodes_of, walk
from .base import Invalid, Rule, Valid



class BatchToDevice(Rule):
    CODE = "DM203"
    NAME = "batch-to-device"
    SUMMARY = "loops over a DataLoader move each batch to the device at the top of the body"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    ORDER = 45

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # A ``for`` loop outside methods over a name or a ``DataLoader(...)`` (maybe wrapped).
        return any(facts.place(loop)[0] in ("module", "function") and may_iterate_loader(facts, loop.iter)
                   for loop in facts.nodes(ast.For, ast.AsyncFor))

    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        # DM201 ran first: a function reading raw weights it placed on the device is a model too.
        self._model_names = model_variables(self.metadata, node, self.facts) | raw_weight_functions(node)
        # The file packs sequences somewhere (maybe in forward, behind `model(x, lengths)`).
        self._packs = any(n.value == "pack_padded_sequence" for n in nodes_of(node, cst.Name))
        return True

    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.For:
        loader = find_loader(self.metadata, original_node.iter, self.state.role.list_collators)
        if loader is None or loader.lists \
                or self.devices.place(original_node).kind not in (ScopeKind.MODULE, ScopeKind.FUNCTION):
            return updated_node  # (a batch of lists stays; a model fed it stays with it: DM202)
        device = self.device_for(original_node)
        if device is None or not self._feeds_model(original_node):
            return updated_node
        device_names = set(DEVICE_LIKE_NAMES) | {self.shared_name, *(n.value for n in walk(device) if isinstance(n, cst.Name))}
        plan = batch_plan(self.metadata, original_node, loader, self._is_model, device_names, self._packs,
                          self.state.role.param_movers)
        if isinstance(plan, str):
            self.report(original_node, f"batch not moved to the device: {plan}; move it by hand")
            return updated_node
        if plan is not None and not plan.dict_batch:
            plan = dataclasses.replace(plan, names=[n for n in plan.names if n not in self._host_helper_inputs(original_node)])
        if plan is None or not plan.names:
            return updated_node
        statement = _dict_move(plan.names[0], device, loader) if plan.dict_batch \
            else _move_names(plan.names, device, loader)
        body = list(updated_node.body.body)
        body.insert(plan.index, statement)
        replacement = updated_node.with_changes(body=updated_node.body.with_changes(body=body))
        return self.fix(original_node, updated_node, replacement,
                        f"batch from `{loader.label}` is never moved to the device")

    def _host_helper_inputs(self, loop: cst.For) -> set[str]:
        """Batch names handed to a project helper that builds a CPU tensor from them
        (``one_hot(y)`` with ``torch.LongTensor(label)`` inside): they stay, and DM201 moves
        the helper's result instead."""
        helpers = self.state.role.tensor_helpers
        return {a.value.value for n in walk(loop.body) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
                and n.func.value in helpers for a in n.args if isinstance(a.value, cst.Name)}

    def _feeds_model(self, loop: cst.For) -> bool:
        """Does the loop body call a model or a loss, or hand a model to a call? A function that
        takes a ``device`` parameter works on that device: its batches go there."""
        groups = self.model_groups()
        if any(isinstance(node, cst.Call) and blocked_callee(self.metadata, groups, node.func)
               for node in walk(loop.body)):
            return False  # a model whose group stays on the CPU (DM202 reports it): its batches stay too
        if any(isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and self._kept_on_cpu(node.func)
               for node in walk(loop.body)):
            return False  # ``model.to("cpu")  # on purpose``: its batches stay with it
        if self.devices.local_device(loop):
            return True
        if models_fed(self.metadata, self.tree, loop, groups):
            return True  # a model of the file handed in, also through the functions it is handed on to
        for node in walk(loop.body):
            if isinstance(node, cst.Call):
                if self._is_model(node.func) or is_loss_callee(node.func) \
                        or is_model_method_call(node.func, self._model_names):
                    return True  # ``net(x)``, ``criterion(out, y)``, ``net.apply_mlp(x, net.bot)``
                if any(self._is_model(arg.value) for arg in node.args):
                    return True
        return False

    def _kept_on_cpu(self, func: cst.Name) -> bool:
        """A model the author keeps on the CPU, or a parameter of the loop's function that a
        call in the file fills with one (``eval_model(model_0, loader)``)."""
        if pinned_to_cpu(self.metadata, func):
            return True
        bindings = scope_bindings(self.metadata[ScopeProvider].get(func), func.value)
        param = bindings[0].node if len(bindings) == 1 else None
        parents = self.metadata[ParentNodeProvider]
        function = parents.get(parents.get(param)) if isinstance(param, cst.Param) else None
        if not isinstance(function, cst.FunctionDef):
            return False
        index = next((i for i, p in enumerate(function.params.params) if p is param), None)
        for call in nodes_of(self.tree, cst.Call):
            if isinstance(call.func, cst.Name) and call.func.value == function.name.value:
                given = argument_for(call, index, func.value) if index is not None else None
                if isinstance(given, cst.Name) and pinned_to_cpu(self.metadata, given):
                    return True
        return False

    def _is_model(self, func: cst.BaseExpression) -> bool:
        return is_model_callee(func, self._model_names)

    VALID = [
        # Accelerate places the model and the prepared loader (``Accelerator(cpu=True)``, or one
        # GPU per rank): a shared ``cuda`` device in a helper would be the wrong one.
        Valid('''import torch
from accelerate import Accelerator

def evaluate(net, loader):
    for xb, yb in loader:
        print((net(xb).argmax(-1) == yb).sum().item())

def run(net, loader):
    acc = Accelerator(cpu=True)
    net, loader = acc.prepare(net, loader)
    evaluate(net, loader)
'''),
        # A loop that feeds no model: data statistics, and an endless generator whose batches
        # are moved where they are consumed.
        Valid('''import torch
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

def mean_of(loader):
    total = torch.zeros(3)
    for x, _ in loader:
        total += x.sum(0)
    return total

def cycle(loader):
    while True:
        for batch in loader:
            yield batch

if __name__ == "__main__":
    loader = DataLoader(data)
    print(mean_of(loader).numpy())
    batches = cycle(loader)
    model(next(batches).to(device))
'''),
        # already moved: a tuple assignment, a dict comprehension, a helper, inside the expression
        Valid('import torch\nfrom torch.utils.data import DataLoader\n'
              'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "loader = DataLoader(range(4))\nfor x, y in loader:\n    x, y = x.to(device), y.to(device)\n"),
        Valid('import torch\nfrom torch.utils.data import DataLoader\n'
              'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "def run(model, loader):\n    for batch in loader:\n"
              "        batch = {k: v.to(device) for k, v in batch.items()}\n        model(**batch)\n"),
        Valid("import torch\n\ndef evaluate(model, test_loader, device):\n    for images, labels in test_loader:\n"
              "        images = images.reshape(-1, 784).to(device)\n        out = model(images)\n"),
        Valid("import torch\n\ndef evaluate(model, loader, device):\n    for batch in loader:\n"
              "        batch = to_device(batch, device)\n        model(batch)\n"),
        # not a loader; data code; a loader that Accelerate prepared
        Valid("import torch\nfor x, y in zip([1], [2]):\n    print(x)\n"),
        Valid("import torch\nfrom torch.utils.data import DataLoader, Dataset\n\nclass Stats(Dataset):\n"
              "    def __init__(self, loader):\n        for x, y in loader:\n            self.n = x.size(0)\n"),
        Valid("import torch\nfrom torch.utils.data import DataLoader\nfrom accelerate import Accelerator\n"
              "accelerator = Accelerator()\nloader = DataLoader(data)\nmodel, loader = accelerator.prepare(model, loader)\n"
              "for x, y in loader:\n    model(x)\n"),
    ]
    INVALID = [
        # module-level script, aliased DataLoader, pinned memory, enumerate, a comment kept
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
        # everything in main(), tqdm around the loader, `import torch.utils.data as tud`
        Invalid(
            "import torch\nimport torch.utils.data as tud\nfrom tqdm import tqdm\n\ndef main():\n"
            "    train_loader = tud.DataLoader(dataset, batch_size=32, shuffle=True)\n"
            "    for epoch in range(10):\n        for inputs, targets in tqdm(train_loader):\n"
            "            loss = criterion(model(inputs), targets)\n\n"
            'if __name__ == "__main__":\n    main()\n',
            "import torch\nimport torch.utils.data as tud\nfrom tqdm import tqdm\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\ndef main():\n'
            "    train_loader = tud.DataLoader(dataset, batch_size=32, shuffle=True)\n"
            "    for epoch in range(10):\n        for inputs, targets in tqdm(train_loader):\n"
            "            inputs, targets = inputs.to(device), targets.to(device)\n"
            "            loss = criterion(model(inputs), targets)\n\n"
            'if __name__ == "__main__":\n    main()\n',
        ),
        # train(model, loader, optimizer, device): the `device` parameter; a dict batch
        Invalid(
            "import torch\n\ndef train(model, loader, optimizer, device):\n    for batch in loader:\n"
            '        loss = model(batch["x"], batch["y"])\n        loss.backward()\n',
            "import torch\n\ndef train(model, loader, optimizer, device):\n    for batch in loader:\n"
            "        batch = {k: v.to(device) for k, v in batch.items()}\n"
            '        loss = model(batch["x"], batch["y"])\n        loss.backward()\n',
        ),
        # a batch unpacked in the body: the move goes after the unpacking
        Invalid(
            "import torch\n\ndef evaluate(model, val_dl, dev):\n    for i, data in enumerate(val_dl, 0):\n"
            "        inputs, labels = data\n        model(inputs)\n",
            "import torch\n\ndef evaluate(model, val_dl, dev):\n    for i, data in enumerate(val_dl, 0):\n"
            "        inputs, labels = data\n        inputs, labels = inputs.to(dev), labels.to(dev)\n"
            "        model(inputs)\n",
        ),
        # a single-tensor batch fed to the model; a list of sample tensors
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(10, 1)\n"
            "dataset = [torch.randn(1, 10) for _ in range(100)]\nfor input_data in dataset:\n"
            "    output = model(input_data)\n",
            "import torch\nimport torch.nn as nn\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nmodel = nn.Linear(10, 1)\n'
            "dataset = [torch.randn(1, 10) for _ in range(100)]\nfor input_data in dataset:\n"
            "    input_data = input_data.to(device)\n    output = model(input_data)\n",
        ),
        # pack_padded_sequence lengths stay on the CPU
        Invalid(
            "import torch\nfrom torch.nn.utils.rnn import pack_padded_sequence\n\n"
            "def run(rnn, loader, device):\n    for seqs, lengths in loader:\n"
            "        packed = pack_padded_sequence(seqs, lengths, batch_first=True)\n        rnn(packed)\n",
            "import torch\nfrom torch.nn.utils.rnn import pack_padded_sequence\n\n"
            "def run(rnn, loader, device):\n    for seqs, lengths in loader:\n        seqs = seqs.to(device)\n"
            "        packed = pack_padded_sequence(seqs, lengths, batch_first=True)\n        rnn(packed)\n",
        ),
        # a custom batch object: reported
        Invalid(
            "import torch\n\ndef evaluate(model, loader, device):\n    for batch in loader:\n"
            "        model(batch.images)\n",
        ),
    ]


def _args(device: cst.BaseExpression, loader: Loader) -> list[cst.Arg]:
    extra = [keyword_arg("non_blocking", cst.Name("True"))] if loader.pins_memory else []
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in (cst.Arg(device), *extra)]


def _move(name: str, device: cst.BaseExpression, loader: Loader) -> cst.Call:
    return cst.Call(cst.Attribute(cst.Name(name), cst.Name("to")), _args(device, loader))


def _move_names(names: list[str], device: cst.BaseExpression, loader: Loader) -> cst.SimpleStatementLine:
    if len(names) == 1:
        return _assign(names, _move(names[0], device, loader))
    moves = cst.Tuple([cst.Element(_move(n, device, loader)) for n in names], lpar=[], rpar=[])
    return _assign(names, moves)


def _dict_move(name: str, device: cst.BaseExpression, loader: Loader) -> cst.SimpleStatementLine:
    """``batch = {k: v.to(device) for k, v in batch.items()}``"""
    comp = cst.parse_expression(f"{{k: v.to() for k, v in {name}.items()}}")
    assert isinstance(comp, cst.DictComp) and isinstance(comp.value, cst.Call)
    comp = comp.with_changes(value=comp.value.with_changes(args=_args(device, loader)))
    return _assign([name], comp)


def _assign(names: list[str], value: cst.BaseExpression) -> cst.SimpleStatementLine:
    target = cst.Name(names[0]) if len(names) == 1 else cst.Tuple(
        [cst.Element(cst.Name(n)) for n in names], lpar=[], rpar=[])
    return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], value)])
