"""DM103 cuda-call: ``x.cuda()`` becomes ``x.to(device)``.

Why: ``.cuda()`` crashes on every machine without an NVIDIA GPU ("Torch not compiled
with CUDA enabled" / "Found no NVIDIA driver") and hard-codes one device into code
that should follow a single shared ``torch.device``. ``.to(device)`` works on both.

- ``non_blocking=`` is kept; ``.cuda(i)`` / ``.cuda(args.gpu)`` carry a rank index
  and are reported, not rewritten, except under the user's own test of that index
  (``if args.gpu is not None:``), which already keeps a CPU run on the CPU.
  ``.cuda(x.device)`` / ``.cuda(current_device)`` name a device and become
  ``.to(x.device)`` / ``.to(current_device)``.
- Inside an ``nn.Module`` method the device follows the input (``x.device``); in a
  Dataset or collate function nothing is moved (reported instead). In a file other
  project files import, a helper follows its tensor input too, and one without any is
  reported: the shared device belongs to driver code.
- An object's own ``cuda()`` is not ``Tensor.cuda()``: a ``.cuda()`` inside a method named
  ``cuda`` (which moves the object's parts when its caller asks) and ``x.cuda()`` on an instance
  of a class that defines one (itself or through a project base; it has no ``.to()``) stay.
- A class (or function) that runs work on CUDA streams (``torch.cuda.Stream()``, a prefetching
  loader), and code in a loop over ``torch.cuda.device_count()`` or under ``with torch.cuda.device(i):``
  (a buffer per GPU), are GPU-only by design: their ``.cuda()`` stays, unreported.
- In a file that takes its device from the user's settings, a ``.cuda()`` under the user's own
  switch (``if args.cuda:``, ``if not args.use_cpu:``, the ``else`` of ``if args.use_cpu:``)
  already follows it and stays, unreported; one outside any switch is reported.
- A guard that exists only to call ``.cuda()`` (``if torch.cuda.is_available():
  model = model.cuda()``) collapses into the unconditional ``.to(device)``, which
  already falls back to the CPU. So does ``a if torch.cuda.is_available() else b``
  once both branches are the same expression on the shared device.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from ..analysis.candidates import FileFacts, method_name
from ..analysis.guards import gpu_only, gpu_only_by_design, is_cuda_available_call
from ..analysis.roles import holds_no_tensors
from ..analysis.scopes import assigned_value, only_assigned_value, scope_bindings
from ..analysis.tree import ancestors, code_of, mentions_name, nodes_of, walk
from ..analysis.names import dotted, method_call, qualified_names
from ..analysis.tensors import in_signature
from .base import Invalid, Rule, Valid


class CudaCall(Rule):
    CODE = "DM103"
    NAME = "cuda-call"
    SUMMARY = "`.cuda()` becomes `.to(device)`; guards that only exist for it collapse"
    ERROR = "AssertionError: Torch not compiled with CUDA enabled"
    TRIGGERS = (".cuda(", "cuda.is_available()")
    ORDER = 20

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # A ``.cuda(...)`` call, or a conditional expression whose branches are the same code
        # (the other rules have pointed both at the shared device).
        return any(ast.dump(n.body) == ast.dump(n.orelse) for n in facts.nodes(ast.IfExp)) \
            or any(method_name(c) == "cuda" for c in facts.calls())
    REPLACES_CUDA = True

    def visit_Module(self, node: cst.Module) -> bool:
        self._set_devices: set[str] | None = None  # the arguments of the file's ``torch.cuda.set_device`` calls
        return super().visit_Module(node)

    def _set_device_to(self, index: cst.BaseExpression) -> bool:
        """``torch.cuda.set_device(args.gpu)`` in the file: the script already chose that GPU
        per process (moco-v3's main_lincls), so ``.cuda(args.gpu)`` is its own correct code."""
        if self._set_devices is None:
            self._set_devices = {code_of(n.args[0].value) for n in nodes_of(self.tree, cst.Call)
                                 if n.args and "torch.cuda.set_device" in qualified_names(self.metadata, n.func)}
        return code_of(index) in self._set_devices

    def _callers_index(self, index: cst.BaseExpression) -> bool:
        """``def copy_to(obj, dev): return obj.cuda(dev)``: the GPU is the caller's to choose
        (a DataParallel scatter hands in its device ids), as a ``device`` parameter would be."""
        if not isinstance(index, cst.Name):
            return False
        bindings = scope_bindings(self.metadata[ScopeProvider].get(index), index.value)
        return len(bindings) == 1 and isinstance(bindings[0].node, cst.Param)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not method_call(original_node, "cuda") or self._is_torch_cuda_module(original_node):
            return updated_node
        if self._inside_own_cuda_method(original_node) or self._plain_object(original_node):
            return updated_node  # the class's own ``cuda()``: asked for by its caller, and no ``.to()`` to call
        if gpu_only_by_design(self.metadata, original_node):
            return updated_node  # a CUDA-stream prefetcher, a buffer per GPU: right as written
        args = list(updated_node.args)
        if any(a.keyword is None for a in args):
            if self._names_a_device(original_node.args[0]):
                # ``.cuda(x.device)`` / ``.cuda(current_device)``: the same place, spelled ``.to``,
                # which also works where that device is the CPU
                func = updated_node.func
                assert isinstance(func, cst.Attribute)
                return self.fix(original_node, updated_node, updated_node.with_changes(
                    func=func.with_changes(attr=cst.Name("to"))), "`.cuda(<device>)` -> `.to(<device>)`")
            # ``if args.gpu is not None: x.cuda(args.gpu)``: the user's own switch on that very index
            # already keeps the CPU run on the CPU, as ``if args.gpu: x.cuda()`` does; correct code.
            if not (self._gated_on(original_node, original_node.args[0]) or gpu_only(self.metadata, original_node)
                    or self._set_device_to(original_node.args[0].value)
                    or self._callers_index(original_node.args[0].value)
                    or self.devices.cuda_is_the_ranks(original_node)  # (vicreg: ``.cuda(gpu)`` after the rank's setup)
                    or self.state.role.gpu_only_program):  # (library code of a program that stops without CUDA)
                self.report(original_node, "`.cuda(index)` puts this on that GPU whatever the run (a CPU-only run fails "
                                           "here); use the device the program chose (per rank, or by its own switch) "
                                           "with `.to(device)`")
            return updated_node
        if any(a.keyword is not None and a.keyword.value not in ("non_blocking", "memory_format") for a in args):
            return updated_node
        device = self.device_for(original_node)
        if device is not None and in_signature(self.metadata, original_node) and not (
                isinstance(device, cst.Name) and device.value == self.shared_name):
            # ``def shade(frames, offset=torch.Tensor(...).cuda())``: a default runs when the function is
            # defined, before any parameter exists; only the module's own device could go there
            self.report(original_node, "`.cuda()` not rewritten: it is in a parameter default, which runs when "
                                       "the function is defined, before its inputs exist; default to None and "
                                       "make the tensor on the input's device in the body")
            return updated_node
        if device is not None and gpu_only(self.metadata, original_node) and self.devices.in_library_code(original_node):
            return updated_node  # ``if a.is_cuda: a = a.cuda()`` in library code: correct, and no global device there
        if device is None:
            # ``if self.gpu_mode: x.cuda()`` is correct code, and so is ``.cuda()`` after ``set_device``
            if not gpu_only(self.metadata, original_node) and not self.devices.cuda_is_the_ranks(original_node) \
                    and not self._moves_nothing(original_node) and not self.state.role.gpu_only_program:
                self.report(original_node, "`.cuda()` not rewritten: " + self.devices.why_no_device(original_node))
            return updated_node
        func = updated_node.func
        assert isinstance(func, cst.Attribute)
        new_args = [cst.Arg(device)] + [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]
        new_args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in new_args]
        replacement = updated_node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=new_args)
        return self.fix(original_node, updated_node, replacement, "`.cuda()` -> `.to(device)`")

    def _inside_own_cuda_method(self, call: cst.Call) -> bool:
        """``def cuda(self): self.crit.cuda()``: a class's own ``cuda()`` that forwards the move to
        its parts runs only when its caller asks for CUDA (as ``Tensor.cuda()`` does)."""
        function = next((a for a in ancestors(self.metadata, call) if isinstance(a, cst.FunctionDef)), None)
        return function is not None and function.name.value == "cuda"

    def _plain_object(self, call: cst.Call) -> bool:
        """``meter.cuda()`` with ``meter = Meter()``, an instance of a project class that is no
        ``nn.Module`` and has a ``cuda()`` of its own (it has no ``.to()``)."""
        func = call.func
        assert isinstance(func, cst.Attribute)
        if not isinstance(func.value, cst.Name):
            return False
        classes = self.state.role.cuda_method_classes  # (the file's own classes too: the index reads them)
        if func.value.value == "self":  # ``self.cuda(*items)`` in a method of such a class (edge-connect)
            klass = next((a for a in ancestors(self.metadata, call) if isinstance(a, cst.ClassDef)), None)
            return klass is not None and klass.name.value in classes
        bindings = scope_bindings(self.metadata[ScopeProvider].get(func.value), func.value.value)
        built = [assigned_value(self.metadata, b.node) for b in bindings]
        return bool(built) and all(isinstance(b, cst.Call) and (dotted(b.func) or "") in classes for b in built)

    def _moves_nothing(self, call: cst.Call) -> bool:
        """``nn.NLLLoss().cuda()``, ``crit = nn.LogSoftmax(dim=1); crit.cuda()``: a module with no
        parameter or buffer, so the call moves nothing and runs on every machine."""
        func = call.func
        assert isinstance(func, cst.Attribute)
        built = func.value
        if isinstance(built, cst.Name):
            built = only_assigned_value(self.metadata, built)
        return isinstance(built, cst.Call) and holds_no_tensors(self.metadata, built)

    def _names_a_device(self, arg: cst.Arg) -> bool:
        """``x.device``, or a name bound once to one / a parameter called ``*device``."""
        value = arg.value
        if arg.keyword is not None:
            return False
        if isinstance(value, cst.Attribute) and value.attr.value == "device":
            return True
        if not isinstance(value, cst.Name):
            return False
        bindings = scope_bindings(self.metadata[ScopeProvider].get(value), value.value)
        if len(bindings) != 1:
            return False
        target = bindings[0].node
        parent = self.metadata[ParentNodeProvider].get(target)
        if isinstance(target, cst.Param) or isinstance(parent, cst.Param):
            return value.value.endswith("device")
        assign = self.metadata[ParentNodeProvider].get(parent) if isinstance(parent, cst.AssignTarget) else None
        return isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Attribute) \
            and assign.value.attr.value == "device"

    def _gated_on(self, call: cst.Call, arg: cst.Arg) -> bool:
        """Inside ``if``/``while``/``... if ... else ...`` whose test checks the index itself
        (``args.gpu is not None``, ``args.gpu >= 0``, ``args.gpu``)."""
        if arg.keyword is not None or not isinstance(arg.value, (cst.Name, cst.Attribute)):
            return False
        index = code_of(arg.value)
        for parent in ancestors(self.metadata, call):
            if isinstance(parent, (cst.If, cst.IfExp, cst.While)) and any(
                    isinstance(node, (cst.Name, cst.Attribute)) and code_of(node) == index
                    for node in walk(parent.test)):
                return True
        return False

    def _is_torch_cuda_module(self, call: cst.Call) -> bool:
        """``torch.cuda(...)`` is not a method call on a tensor."""
        func = call.func
        return isinstance(func, cst.Attribute) and "torch" in qualified_names(self.metadata, func.value)

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        """``a.to(device) if torch.cuda.is_available() else a.to(device)``: once the other rules
        have pointed both branches at the shared device, the choice is gone."""
        if not self._is_cuda_available_test(original_node.test):
            return updated_node
        if code_of(original_node.body) != code_of(original_node.orelse) or not mentions_name(
                original_node.body, self.shared_name):
            return updated_node
        return self.fix(original_node, updated_node, updated_node.body,
                        "both branches of the CUDA check are now the same: keep one")

    def leave_If(self, original_node: cst.If, updated_node: cst.If):
        if updated_node.orelse is not None or not self._is_cuda_available_test(original_node.test):
            return updated_node
        if not _mentions_cuda_call(original_node.body) or not _only_moves(updated_node.body.body):
            return updated_node
        if self.state.suppressions.suppresses(self.CODE, self.position(original_node)[0]):
            return updated_node
        body = list(updated_node.body.body)
        # The comments beside the `if` and below its body stay, above the collapsed statements.
        block = updated_node.body
        carried = [cst.EmptyLine(comment=block.header.comment)] if block.header.comment else []
        carried += [line for line in block.footer if line.comment]
        body[0] = body[0].with_changes(leading_lines=(*updated_node.leading_lines, *carried, *body[0].leading_lines))
        return self.fix(original_node, updated_node, cst.FlattenSentinel(body),
                        "guard that only moved to CUDA collapses into `.to(device)`")

    def _is_cuda_available_test(self, test: cst.BaseExpression) -> bool:
        """``torch.cuda.is_available()``, or a flag assigned once from it (``cuda = ...``)."""
        if isinstance(test, cst.Name):
            scope = self.metadata[ScopeProvider].get(test)
            assignments = scope_bindings(scope, test.value)
            if len(assignments) != 1:
                return False
            target = assignments[0].node
            assign = self.metadata[ParentNodeProvider].get(self.metadata[ParentNodeProvider].get(target))
            if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                return False
            test = assign.value
            if (isinstance(test, cst.IfExp) and isinstance(test.body, cst.Name) and test.body.value == "True"
                    and isinstance(test.orelse, cst.Name) and test.orelse.value == "False"):
                test = test.test
        return is_cuda_available_call(self.metadata, test)

    VALID = [
        Valid('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "x = torch.ones(3).to(device)\n"),
        Valid("import torch\ntorch.cuda.manual_seed(0)\nn = torch.cuda.device_count()\n"),
        # A bare ``.cuda()`` below ``set_device``: the GPU this process chose (a per-rank DDP set-up).
        Valid("import torch\n\ndef setup(rank, net):\n    dev = torch.device('cuda:0')\n"
              "    torch.cuda.set_device(rank)\n    net.cuda()\n    return net, dev\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nx = torch.ones(2).cuda(non_blocking=True)\n",
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "model = torch.nn.Linear(2, 2).to(device)\nx = torch.ones(2).to(device, non_blocking=True)\n",
        ),
        Invalid(
            "import torch\nmodel = torch.nn.Linear(2, 2)\nif torch.cuda.is_available():\n    model = model.cuda()\n",
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "model = torch.nn.Linear(2, 2)\nmodel = model.to(device)\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
            "        mask = torch.ones(3).cuda()\n        return x * mask\n",
            "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
            "        mask = torch.ones(3).to(x.device)\n        return x * mask\n",
        ),
        Invalid(
            "import torch\ncuda = True if torch.cuda.is_available() else False\nnet = torch.nn.Linear(2, 2)\n"
            "if cuda:\n    net.cuda()\n",
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "cuda = True if torch.cuda.is_available() else False\nnet = torch.nn.Linear(2, 2)\nnet.to(device)\n",
        ),
        Invalid("import torch\nx = torch.ones(3).cuda(1)\n"),
        # A module with no parameter or buffer moves nothing: not reported where the device is the
        # user's (the weighted loss is).
        Invalid("import argparse\nimport torch\nimport torch.nn as nn\n\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--device', default='cpu')\nargs = parser.parse_args()\n"
                "crit = nn.NLLLoss()\ncrit.cuda()\nsoft = nn.LogSoftmax(dim=1).cuda()\n"
                "weighted = nn.NLLLoss(torch.ones(3)).cuda()\n"),
        # a device taken from an input or a parameter: kept, spelled ``.to``
        Invalid("import torch\n\ndef shift(x, table, current_device):\n    where = x.device\n"
                "    return x + table.cuda(where), table.cuda(current_device)\n",
                "import torch\n\ndef shift(x, table, current_device):\n    where = x.device\n"
                "    return x + table.to(where), table.to(current_device)\n"),
        # torch is imported inside the function only: DM101 cannot define the device, so the
        # `.cuda()` is reported, not turned into a NameError.
        Invalid("import numpy as np\n\ndef main():\n    import torch\n    return torch.ones(2).cuda()\n"),
    ]


def _mentions_cuda_call(block: cst.BaseSuite) -> bool:
    return any(isinstance(n, cst.Call) and method_call(n, "cuda") for n in walk(block))


def _only_moves(body) -> bool:
    """Every statement is ``x = x.to(...)`` or ``x.to(...)``: nothing else depends on the guard."""
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            value = small.value if isinstance(small, (cst.Assign, cst.Expr)) else None
            if not (isinstance(value, cst.Call) and method_call(value, "to")):
                return False
            if any(isinstance(n, cst.Call) for n in walk(value.func.value)):  # type: ignore[attr-defined]
                return False  # ``nn.DataParallel(model).to(device)``: the wrapping needs the guard too
    return True

