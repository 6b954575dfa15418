"""DM104 cuda-only-call: ``torch.cuda.synchronize()`` on a line of its own runs only where there is a GPU.

Why: a few ``torch.cuda`` calls fail on every machine without an NVIDIA GPU ("Torch not compiled
with CUDA enabled") even when the rest of the script follows a shared device that fell back to
the CPU: ``synchronize()`` in a timing or logging step, ``reset_peak_memory_stats()`` before a
memory report. They only wait for, or reset counters of, a GPU: where there is none there is
nothing to do. ``if torch.cuda.is_available():`` around the line keeps it on a GPU machine
(where it does exactly what it did) and skips it elsewhere.

- Only a statement that is the call alone (its value unused), in driver or library code alike:
  the guard changes nothing on a GPU, so it never moves a value.
- Left alone: a call already behind a GPU test (``if args.cuda:``, ``if device.type == "cuda":``,
  below ``if not torch.cuda.is_available(): return``), and one in a program that runs one process
  per GPU and calls ``torch.cuda.set_device`` (the code is GPU-only by design, as DM103 treats
  ``.cuda()`` there). Calls that return a value (``torch.cuda.get_device_name(0)``) are not
  touched: skipping them would change what the code computes.
- ``torch.cuda.set_device(0)`` with a constant GPU (Pyraformer, at import) is guarded too: on a GPU it
  does what it did, and without one there is no GPU to choose. ``set_device(args.gpu)`` and
  ``set_device(rank)`` are one process per GPU, left alone.
- Calls that already work without a GPU (``empty_cache()``, ``manual_seed()``,
  ``max_memory_allocated()``) are not touched either.
"""

from __future__ import annotations

import ast
from typing import Sequence

import libcst as cst

from ..analysis.candidates import FileFacts
from ..analysis.guards import gpu_only
from ..analysis.names import qualified_names
from .base import Invalid, Rule, Valid

# Statement calls that raise without CUDA and only wait for, or reset counters of, a GPU.
CUDA_ONLY = frozenset(f"torch.cuda.{name}" for name in (
    "synchronize", "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
    "reset_accumulated_memory_stats", "ipc_collect"))
SET_DEVICE = "torch.cuda.set_device"


class CudaOnlyCall(Rule):
    CODE = "DM104"
    NAME = "cuda-only-call"
    SUMMARY = "`torch.cuda.synchronize()` (and other GPU-only waits and resets) runs only where CUDA is available"
    ERROR = "AssertionError: Torch not compiled with CUDA enabled"
    TRIGGERS = ("synchronize", "reset_peak_memory_stats", "reset_max_memory", "reset_accumulated_memory_stats",
                "ipc_collect", "set_device")
    ORDER = 22

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        return any(isinstance(statement.value, ast.Call) and facts.qnames(statement.value.func) & CUDA_ONLY
                   or isinstance(statement.value, ast.Call) and SET_DEVICE in facts.qnames(statement.value.func)
                   and _a_constant_gpu(statement.value)
                   for statement in facts.nodes(ast.Expr))

    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        # The statements to put under the guard (their new nodes), held by identity: a bare set of
        # ids let a freed node's id be reused by another statement (a ``print(...)`` got guarded).
        self._guarded: dict[int, cst.SimpleStatementLine] = {}
        return True

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.BaseStatement:
        if len(original_node.body) != 1 or not isinstance(original_node.body[0], cst.Expr):
            return updated_node
        call = original_node.body[0].value
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return updated_node
        names = qualified_names(self.metadata, call.func)
        if not names & CUDA_ONLY and not (SET_DEVICE in names and _a_constant_gpu(call)):
            return updated_node
        if gpu_only(self.metadata, original_node) or self.devices.cuda_is_the_ranks(original_node):
            return updated_node
        marked = updated_node.with_changes()  # (a new node: the block above finds it by its identity)
        if self.fix(original_node, updated_node, marked,
                    f"`{call.func.attr.value}()` fails without CUDA; it now runs only where a GPU is available") \
                is not marked:
            return updated_node
        self._guarded[id(marked)] = marked
        return marked

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        if not any(self._guarded.get(id(s)) is s for s in updated_node.body):
            return updated_node
        return updated_node.with_changes(body=self._with_guards(updated_node.body))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not any(self._guarded.get(id(s)) is s for s in updated_node.body):
            return updated_node
        return updated_node.with_changes(body=self._with_guards(updated_node.body))

    def _with_guards(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """Each run of marked statements in a row under one ``if torch.cuda.is_available():``."""
        out: list[cst.BaseStatement] = []
        run: list[cst.SimpleStatementLine] = []
        for statement in [*body, None]:
            if statement is not None and self._guarded.get(id(statement)) is statement:
                run.append(statement)  # type: ignore[arg-type]
                continue
            if run:
                call = run[0].body[0].value  # type: ignore[attr-defined]
                # ``torch.cuda`` as the author spells it (``th.cuda``, ``cuda`` from ``from torch import cuda``)
                test = cst.Call(cst.Attribute(call.func.value, cst.Name("is_available")))
                out.append(cst.If(test=test, leading_lines=run[0].leading_lines,
                                  body=cst.IndentedBlock([run[0].with_changes(leading_lines=[]), *run[1:]])))
                run = []
            if statement is not None:
                out.append(statement)
        return out

    VALID = [
        # One process per GPU: the rank's GPU is set (here from an option), by design.
        Valid("import torch\n\ndef main(args):\n    torch.cuda.set_device(args.gpu)\n"),
        Valid("import torch\n\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n"),
        Valid("import torch\n\ndef step(device):\n    if device.type == 'cuda':\n        torch.cuda.synchronize()\n"),
        # Works without a GPU: nothing to guard.
        Valid("import torch\n\ntorch.cuda.empty_cache()\nprint(torch.cuda.max_memory_allocated())\n"),
        # One process per GPU, each on the GPU it set: GPU-only by design.
        Valid("import torch\nimport torch.distributed as dist\n\n"
              "def main(rank):\n    torch.cuda.set_device(rank)\n    dist.init_process_group('nccl')\n"
              "    torch.cuda.synchronize()\n"),
    ]
    INVALID = [
        Invalid(
            "import time\nimport torch\n\nstart = time.time()\ntorch.cuda.synchronize()  # wait for the kernels\n"
            "print(time.time() - start)\n",
            "import time\nimport torch\n\nstart = time.time()\nif torch.cuda.is_available():\n"
            "    torch.cuda.synchronize()  # wait for the kernels\nprint(time.time() - start)\n"),
        Invalid(
            "import torch\n\ndef report():\n    torch.cuda.reset_peak_memory_stats()\n    return 1\n",
            "import torch\n\ndef report():\n    if torch.cuda.is_available():\n"
            "        torch.cuda.reset_peak_memory_stats()\n    return 1\n"),
        Invalid("import torch\n\ntorch.cuda.set_device(0)\nx = torch.ones(2)\n",
                "import torch\n\nif torch.cuda.is_available():\n    torch.cuda.set_device(0)\nx = torch.ones(2)\n"),
    ]


def _a_constant_gpu(call: cst.Call | ast.Call) -> bool:
    """``set_device(0)``, ``set_device("cuda:1")``: one GPU the author names, not a process's rank."""
    args = call.args
    if len(args) != 1:
        return False
    value = args[0].value if isinstance(call, cst.Call) else args[0]
    if isinstance(call, cst.Call):
        return isinstance(value, (cst.Integer, cst.SimpleString)) and not args[0].keyword
    return isinstance(value, ast.Constant) and isinstance(value.value, (int, str)) and not call.keywords
