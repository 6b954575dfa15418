"""DM404 dataparallel-order: a model not on the first GPU when it is wrapped is reported.

Why: ``nn.DataParallel`` replicates the module from ``device_ids[0]`` (``cuda:0`` by
default) and checks on every forward that all parameters and buffers are there:
"module must have its parameters and buffers on device cuda:0 (device_ids[0]) but
found one of them on device: cpu". ``DistributedDataParallel`` with ``device_ids``
checks when it is built ("DistributedDataParallel device_ids and output_device
arguments only work with single-device/multiple-device GPU modules or CPU modules,
but got device_ids [0], output_device None, and module parameters
{device(type='cpu')}"). The expert fix is to move the model to the first device
*before* wrapping: ``model.to(device)`` then ``nn.DataParallel(model)`` (or move the
wrapper itself: ``nn.DataParallel(model).to(device)``).

Reported, never rewritten: which GPU is "first" depends on ``device_ids``, ranks and
``CUDA_VISIBLE_DEVICES``, which devmod cannot see. Within one block (a function body
or module level), only these shapes:

- moved to a literal GPU that is not the first one: ``model.to("cuda:1")`` wrapped by
  ``nn.DataParallel(model)`` (first device ``cuda:0``), or ``.cuda(0)`` with
  ``device_ids=[1, 2]``;
- ``DistributedDataParallel(model, ...)`` with ``model`` moved only afterwards
  (``ddp = DDP(model, device_ids=[rank])`` then ``model.to(rank)``);
- ``nn.DataParallel`` given two or more literal ``device_ids`` of a model built in the
  same block and never moved. (``DistributedDataParallel`` of a model never moved is
  DM202's finding.)

Left alone (checked on a GPU: these run): a moved wrapper
(``nn.DataParallel(model).to(device)``, ``model = nn.DataParallel(model);
model.to(device)``); ``dp = nn.DataParallel(model)`` followed by ``model.to(device)``
(``Module.to`` moves in place, and DataParallel checks at forward time); one
``device_ids`` entry (DataParallel then moves the module itself); models moved before
wrapping; models that come from elsewhere (parameters, attributes).
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.candidates import FileFacts
from ..analysis.devices import is_torch_device_call
from ..analysis.names import dotted, keyword, method_call, positional
from ..analysis.roles import DATA_PARALLEL, DISTRIBUTED_DATA_PARALLEL, builds_model, places_itself, wrapper_kind
from ..analysis.tensors import chain_top
from ..analysis.tree import ancestors, walk
from .base import Invalid, Rule, Valid
from .optimizer_state_order import enclosing_scope, moves_of, not_a_device_move, own_nodes, runs_after

_WRAPPER_NAMES = {"dp": "nn.DataParallel", "ddp": "DistributedDataParallel"}


class DataParallelOrder(Rule):
    CODE = "DM404"
    NAME = "dataparallel-order"
    SUMMARY = "a model wrapped in `DataParallel` before it is on the first GPU is reported"
    SAFETY = "report"
    ERROR = ("RuntimeError: module must have its parameters and buffers on device cuda:0 (device_ids[0]) "
             "but found one of them on device: cpu")
    TRIGGERS = ("DataParallel",)
    ORDER = 70

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # ``nn.DataParallel(model, ...)`` / ``DistributedDataParallel(model, ...)`` of a plain name.
        for call in facts.calls_of(*DATA_PARALLEL, *DISTRIBUTED_DATA_PARALLEL):
            first = next((a for a in call.args if not isinstance(a, ast.Starred)), None)
            if isinstance(first, ast.Name):
                return True
        return False

    def visit_Call(self, node: cst.Call) -> None:
        kind = wrapper_kind(self.metadata, node)
        args = positional(node)
        if kind is None or not args or not isinstance(args[0].value, cst.Name):
            return
        model = args[0].value.value
        scope = enclosing_scope(self.metadata, node, self.tree)
        wrapper = self._wrapper_name(node)
        wrapper_moves = self._wrapper_moves(node, scope, wrapper)
        model_moves = [m for m in moves_of(scope, model) if not not_a_device_move(self.metadata, m)
                       and not _inside(m, node)]
        wrap_line = self.position(node)[0]
        before = [m for m in model_moves if self.position(m)[0] < wrap_line]
        label = _WRAPPER_NAMES[kind]
        first = self._first_device(node, kind)
        wrong = next((m for m in before + wrapper_moves if _literal_index(self.metadata, m) not in (None, first)),
                     None)
        if wrong is not None and first is not None:
            self.report(node, f"`{model}` is moved to cuda:{_literal_index(self.metadata, wrong)} but `{label}` "
                              f"expects it on cuda:{first} (device_ids[0]); move `{model}` to "
                              f"cuda:{first} before wrapping")
            return
        if before or wrapper_moves:
            return
        after = [m for m in model_moves if runs_after(self.metadata, m, node, scope)]
        if after and kind == "ddp":  # DataParallel checks at forward time: a later in-place move is in time
            self.report(node, f"`{model}` is moved only after `{label}` wrapped it (line "
                              f"{self.position(after[0])[0]}); move `{model}` to the first device before wrapping")
            return
        if kind == "dp" and self._several_device_ids(node) and not model_moves \
                and self._built_unplaced(scope, model, node):
            self.report(node, f"`{model}` is never moved but `{label}` is given device_ids: move `{model}` to "
                              "the first of them before wrapping (or call `.to(device)` on the wrapper)")

    # -- the wrapper -------------------------------------------------------------------------------
    def _wrapper_name(self, call: cst.Call) -> str | None:
        """``dp`` in ``dp = nn.DataParallel(model)`` (also through a ``.to(...)`` chain)."""
        top = chain_top(self.metadata, call)
        for parent in ancestors(self.metadata, top):
            if isinstance(parent, cst.Assign):
                if len(parent.targets) == 1 and parent.value is top:
                    return dotted(parent.targets[0].target)
                return None
            if not isinstance(parent, (cst.Call, cst.Attribute, cst.Arg)):
                return None
        return None

    def _wrapper_moves(self, call: cst.Call, scope: cst.CSTNode, wrapper: str | None) -> list[cst.Call]:
        """Moves of the wrapped result: ``nn.DataParallel(m).to(d)`` and ``dp.to(d)`` / ``dp = dp.cuda()``."""
        moves = [n for n in walk(chain_top(self.metadata, call)) if isinstance(n, cst.Call)
                 and method_call(n, "to", "cuda") and n.func.value is call]  # type: ignore[attr-defined]
        if wrapper is not None:
            moves += moves_of(scope, wrapper)
        return [m for m in moves if not not_a_device_move(self.metadata, m)]

    def _device_ids(self, call: cst.Call) -> cst.BaseExpression | None:
        arg = keyword(call, "device_ids")
        args = positional(call)
        if arg is None and len(args) >= 2:
            arg = args[1]
        if arg is None or (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
            return None
        return arg.value

    def _several_device_ids(self, call: cst.Call) -> bool:
        """``device_ids=[0, 1]``: with a single id DataParallel moves the module itself."""
        ids = self._device_ids(call)
        return isinstance(ids, (cst.List, cst.Tuple)) and len(ids.elements) >= 2

    def _first_device(self, call: cst.Call, kind: str) -> int | None:
        """``device_ids[0]`` when it is a literal; 0 for ``nn.DataParallel`` without device_ids."""
        ids = self._device_ids(call)
        if ids is None:
            return 0 if kind == "dp" else None
        if isinstance(ids, (cst.List, cst.Tuple)) and ids.elements:
            first = ids.elements[0].value
            if isinstance(first, cst.Integer):
                return int(first.value)
        return None

    def _built_unplaced(self, scope: cst.CSTNode, model: str, wrap: cst.Call) -> bool:
        """``model`` is built above the wrap in the same scope, by a model constructor that does
        not place it (no ``device=``), and bound nowhere else (but by the wrap itself)."""
        bindings = [n for n in own_nodes(scope) if isinstance(n, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For))
                    and any(isinstance(t, cst.Name) and t.value == model for t in _targets(n))
                    and not _inside(wrap, n)]
        if len(bindings) != 1 or not isinstance(bindings[0], cst.Assign):
            return False
        value = bindings[0].value
        return (self.position(bindings[0])[0] < self.position(wrap)[0] and isinstance(value, cst.Call)
                and builds_model(self.metadata, value, self.facts) and not places_itself(value))

    VALID = [
        # Moved before wrapping, or the wrapper moved.
        Valid("import torch\nimport torch.nn as nn\n\ndef build(device):\n    model = nn.Linear(4, 2)\n"
              "    model.to(device)\n    return nn.DataParallel(model)\n"),
        Valid("import torch\nimport torch.nn as nn\n\ndef build(device):\n    model = nn.Linear(4, 2)\n"
              "    model = nn.DataParallel(model)\n    model.to(device)\n    return model\n"),
        Valid("import torch\nimport torch.nn as nn\n\ndef build(device):\n    model = nn.Linear(4, 2)\n"
              "    dp = nn.DataParallel(model, device_ids=[0, 1]).to(device)\n    return dp\n"),
        # A model passed in: where it is, is the caller's business.
        Valid("import torch.nn as nn\n\ndef wrap(model):\n    return nn.DataParallel(model, device_ids=[0, 1])\n"),
        # The literal device agrees with device_ids.
        Valid("import torch.nn as nn\nmodel = nn.Linear(4, 2)\nmodel.to('cuda:1')\n"
              "model = nn.DataParallel(model, device_ids=[1, 2])\n"),
        # pytorch/examples (imagenet): wrap a part, move the whole model.
        Valid("import torch\nimport torchvision.models as models\nmodel = models.vgg16()\n"
              "model.features = torch.nn.DataParallel(model.features)\nmodel.cuda()\n"),
        # Moved in place after wrapping, before any forward; one device id.
        Valid("import torch\nimport torch.nn as nn\n\ndef build(device):\n    model = nn.Linear(4, 2)\n"
              "    dp = nn.DataParallel(model)\n    model.to(device)\n    return dp\n"),
        Valid("import torch.nn as nn\nmodel = nn.Linear(4, 2)\nmodel = nn.DataParallel(model, device_ids=[0])\n"),
    ]
    INVALID = [
        Invalid("import torch.nn as nn\nmodel = nn.Linear(4, 2).to('cuda:1')\nmodel = nn.DataParallel(model)\n"),
        Invalid("import torch.nn as nn\n\ndef build():\n    net = nn.Linear(4, 2)\n"
                "    return nn.DataParallel(net, device_ids=[0, 1])\n"),
        Invalid("import torch.nn as nn\nmodel = nn.Linear(4, 2)\nmodel = nn.DataParallel(model, device_ids=[0, 1])\n"),
        # DistributedDataParallel checks when it is built.
        Invalid("import torch.nn as nn\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n"
                "def worker(rank):\n    model = nn.Linear(4, 2)\n    ddp = DDP(model, device_ids=[rank])\n"
                "    model.to(rank)\n    return ddp\n"),
    ]


def _inside(node: cst.CSTNode, container: cst.CSTNode) -> bool:
    return any(n is node for n in walk(container))


def _targets(node: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(node, cst.Assign):
        return [n for t in node.targets for n in walk(t.target)]
    return list(walk(node.target))  # type: ignore[attr-defined]


def _literal_index(metadata, move: cst.Call) -> int | None:
    """The GPU index a move names literally: ``.to("cuda:1")``, ``.cuda(1)``,
    ``.to(torch.device("cuda", 1))``; None for anything else (``"cuda"``, a variable)."""
    args = positional(move)
    if not args:
        return None
    value = args[0].value
    if method_call(move, "cuda"):
        return int(value.value) if isinstance(value, cst.Integer) else None
    if is_torch_device_call(metadata, value):
        inner = positional(value)  # type: ignore[arg-type]
        if len(inner) == 2 and isinstance(inner[1].value, cst.Integer):
            return int(inner[1].value.value)
        value = inner[0].value if len(inner) == 1 else value
    if isinstance(value, cst.SimpleString):
        text = value.evaluated_value
        if isinstance(text, str) and text.startswith("cuda:") and text[5:].isdigit():
            return int(text[5:])
    return None
