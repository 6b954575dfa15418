"""DM403 optimizer-state-order: optimizer state loaded before the model moves is reported.

Why: ``optimizer.load_state_dict(state)`` puts each state tensor (Adam's
``exp_avg``, SGD's momentum buffers) on the device of the parameter it belongs to
*at load time*. Resuming with

    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(checkpoint["optimizer"])
    model.to(device)

moves the parameters afterwards but leaves the state on the CPU, and the first
``optimizer.step()`` fails with "Expected all tensors to be on the same device".
The expert fix is to move the model first (``model.to(device)`` right after it is
built), then build the optimizer and load its state.

Reported, not rewritten: moving a statement across others can change what runs
between them, which only the author can judge.

- Only within one block (a function body or module level), in source order: the
  optimizer is a name assigned from ``torch.optim.<Optimizer>(model.parameters(), ...)``,
  the model is the base of that argument, and the move (``model.to(...)``,
  ``model.cuda()``, ``model = model.to(...)``) comes after the load in the same block
  (also inside a later ``if``), not in another branch.
- Also where the model is moved later by a function of the project it is handed to
  (``train(model, optimizer)`` whose ``train`` does ``model = model.cuda()``), as the project index
  records the parameters each function moves.
- Left alone: state the author moves after loading it (a loop over ``optimizer.state.values()``
  that moves its tensors), models moved anywhere before the load (also ``Net().to(device)`` where
  built), ``.to("cpu")`` and dtype-only ``.to(...)``, and optimizers devmod cannot trace
  to ``model.parameters()``.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.candidates import FileFacts, method_name
from ..analysis.loops import moved_by_callees
from ..analysis.names import dotted, keyword, method_call, positional, qualified_names
from ..analysis.tensors import is_dtype
from ..analysis.tree import ancestors, children_of, walk
from .base import Invalid, Rule, Valid

_MOVES = ("to", "cuda")
_NOT_OPTIMIZERS = ("torch.optim.lr_scheduler", "torch.optim.swa_utils")


class OptimizerStateOrder(Rule):
    CODE = "DM403"
    NAME = "optimizer-state-order"
    SUMMARY = "`optimizer.load_state_dict(...)` before the model is moved is reported: move the model first"
    SAFETY = "report"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    TRIGGERS = ("load_state_dict",)
    ORDER = 70

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # ``opt.load_state_dict(...)`` and an optimizer built from ``torch.optim``.
        return any(method_name(c) == "load_state_dict" for c in facts.calls()) \
            and facts.any_call_named(lambda name: name.startswith("torch.optim."))

    def visit_Call(self, node: cst.Call) -> None:
        if not method_call(node, "load_state_dict"):
            return
        optimizer = dotted(node.func.value)  # type: ignore[attr-defined]
        if optimizer is None:
            return
        scope = enclosing_scope(self.metadata, node, self.tree)
        load_line = self.position(node)[0]
        model = self._model_of(scope, optimizer, load_line)
        if model is None:
            return
        moves = [m for m in moves_of(scope, model) if not not_a_device_move(self.metadata, m)]
        if any(self.position(m)[0] <= load_line for m in moves):
            return  # already on its device when the state is loaded
        if _state_moved_by_hand(scope, optimizer):
            return  # ``for state in optimizer.state.values(): ... state[k] = v.to(device)`` (ffjord)
        later = [m for m in moves if runs_after(self.metadata, m, node, scope)]
        if later:
            line = self.position(later[0])[0]
            self.report(node, f"`{optimizer}.load_state_dict(...)` runs before `{model}` is moved (line {line}): "
                              f"the optimizer state stays on the CPU; move `{model}` to the device before "
                              "loading the optimizer state")
            return
        mover = next((c for c in self._handed_to_a_mover(scope, model) if runs_after(self.metadata, c, node, scope)),
                     None)
        if mover is not None:
            self.report(node, f"`{optimizer}.load_state_dict(...)` runs before `{dotted(mover.func)}` (line "
                              f"{self.position(mover)[0]}) moves `{model}`: the optimizer state stays on the CPU; "
                              f"move `{model}` to the device before loading the optimizer state")

    def _handed_to_a_mover(self, scope: cst.CSTNode, model: str) -> list[cst.Call]:
        """``fit(net, opt)`` where ``fit`` (of the project, the file's own included) moves the
        parameter ``net`` fills (``net = net.cuda()``): tacotron's ``train``, the 29th run."""
        return [call for call, arg in moved_by_callees(own_nodes(scope), self.state.role.param_movers)
                if dotted(arg) == model]

    def _model_of(self, scope: cst.CSTNode, optimizer: str, before_line: int) -> str | None:
        """``model`` for the last ``optimizer = torch.optim.X(model.parameters(), ...)`` above the load."""
        found: str | None = None
        for node in own_nodes(scope):
            if not isinstance(node, cst.Assign) or self.position(node)[0] >= before_line:
                continue
            if not any(dotted(t.target) == optimizer for t in node.targets):
                continue
            found = self._parameters_owner(node.value)  # a later assignment replaces an earlier one
        return found

    def _parameters_owner(self, value: cst.BaseExpression) -> str | None:
        if not isinstance(value, cst.Call):
            return None
        names = qualified_names(self.metadata, value.func)
        if not any(n.startswith("torch.optim.") and not n.startswith(_NOT_OPTIMIZERS)
                   and n.rsplit(".", 1)[-1][:1].isupper() for n in names):
            return None
        args = positional(value)
        params = args[0] if args else keyword(value, "params")
        if params is None or not method_call(params.value, "parameters"):
            return None
        return dotted(params.value.func.value)  # type: ignore[attr-defined]

    VALID = [
        # The expert order: move, build the optimizer, load its state.
        Valid("import torch\nimport torch.nn as nn\n\ndef resume(path, device):\n"
              "    model = nn.Linear(4, 2)\n    model.to(device)\n"
              "    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
              "    checkpoint = torch.load(path, map_location=device)\n"
              "    model.load_state_dict(checkpoint['model'])\n"
              "    optimizer.load_state_dict(checkpoint['optimizer'])\n    return model, optimizer\n"),
        Valid("import torch\nimport torch.nn as nn\n\ndef resume(state, device):\n"
              "    model = nn.Linear(4, 2).to(device)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "    opt.load_state_dict(state)\n    model.to(device)\n"),
        # The move is in the other branch, or goes to the CPU.
        Valid("import torch\nimport torch.nn as nn\n\ndef f(state, device, resume):\n"
              "    model = nn.Linear(4, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "    if resume:\n        opt.load_state_dict(state)\n    else:\n        model.to(device)\n"
              "    model.to('cpu')\n"),
        # A scheduler is not an optimizer.
        Valid("import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2)\n"
              "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "sched = torch.optim.lr_scheduler.StepLR(opt, 10)\nsched.load_state_dict({})\n"),
    ]
    INVALID = [
        Invalid("import torch\nimport torch.nn as nn\n\ndef resume(path, device):\n"
                "    model = nn.Linear(4, 2)\n    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
                "    checkpoint = torch.load(path, map_location='cpu')\n"
                "    model.load_state_dict(checkpoint['model'])\n"
                "    optimizer.load_state_dict(checkpoint['optimizer'])\n"
                "    model.to(device)\n    return model, optimizer\n"),
        # Module level, the load inside an `if`, the move after it.
        Invalid("import torch\nimport torch.optim as optim\nfrom torch import nn\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "net = nn.Linear(4, 2)\noptimizer = optim.SGD(params=net.parameters(), lr=0.1)\n"
                "if resume:\n    optimizer.load_state_dict(torch.load('opt.pt', map_location='cpu'))\n"
                "net = net.to(device)\n"),
    ]


def _state_moved_by_hand(scope: cst.CSTNode, optimizer: str) -> bool:
    """A loop over ``<optimizer>.state.values()`` (or ``.items()``) whose body moves or converts what
    it reads: the author puts the state on the device after loading it."""
    for node in walk(scope):
        if isinstance(node, cst.For) and isinstance(node.iter, cst.Call) \
                and dotted(node.iter.func) in (f"{optimizer}.state.values", f"{optimizer}.state.items") \
                and any(isinstance(n, cst.Call) and (method_call(n, *_MOVES) or isinstance(n.func, cst.Name))
                        for n in walk(node.body)):
            return True
    return False


def own_nodes(scope: cst.CSTNode):
    """Nodes of ``scope``'s own code: nested functions, lambdas and classes are not entered."""
    stack = list(reversed(children_of(scope.body if isinstance(scope, cst.FunctionDef) else scope)))
    while stack:
        current = stack.pop()
        yield current
        if not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(reversed(children_of(current)))


def moves_of(scope: cst.CSTNode, model: str) -> list[cst.Call]:
    """``model.to(...)``, ``model.cuda()`` and ``model = <...>.to(...)`` in the scope's own code.

    Moving ``model`` also moves ``model.fc``: a prefix of the optimized name counts.
    """
    found: list[cst.Call] = []
    for node in own_nodes(scope):
        if isinstance(node, cst.Call) and method_call(node, *_MOVES):
            receiver = dotted(node.func.value)  # type: ignore[attr-defined]
            if receiver is not None and (model == receiver or model.startswith(receiver + ".")):
                found.append(node)
        elif isinstance(node, cst.Assign) and any(dotted(t.target) == model for t in node.targets):
            found.extend(n for n in walk(node.value) if isinstance(n, cst.Call) and method_call(n, *_MOVES)
                         and not isinstance(n.func.value, cst.Name))  # type: ignore[attr-defined]
    return found


# -- block-order helpers (also used by DM404) -------------------------------------------------------
def enclosing_scope(metadata, node: cst.CSTNode, module: cst.Module) -> cst.CSTNode:
    """The innermost function around ``node``, else the module."""
    for parent in ancestors(metadata, node):
        if isinstance(parent, (cst.FunctionDef, cst.Module)):
            return parent
    return module


def runs_after(metadata, later: cst.CSTNode, earlier: cst.CSTNode, scope: cst.CSTNode) -> bool:
    """Is ``later`` in a statement that follows ``earlier``'s statement (or a statement around
    it) in the same block of ``scope``? Another branch of the same ``if`` does not count."""
    blocks: dict[int, int] = {}  # id(block) -> index of the statement holding ``earlier``
    for statement, block in _statements_in_blocks(metadata, earlier, scope):
        blocks[id(block)] = block.body.index(statement)
    for statement, block in _statements_in_blocks(metadata, later, scope):
        if id(block) in blocks:
            return block.body.index(statement) > blocks[id(block)]
    return False


def _statements_in_blocks(metadata, node: cst.CSTNode, scope: cst.CSTNode):
    """(statement, block) pairs around ``node``, innermost first, up to ``scope``."""
    child = node
    for parent in ancestors(metadata, node):
        if isinstance(parent, (cst.IndentedBlock, cst.Module)) and isinstance(child, cst.BaseStatement):
            yield child, parent
        if parent is scope:
            return
        child = parent


def not_a_device_move(metadata, move: cst.Call) -> bool:
    """``.to("cpu")``, ``.to(torch.float16)``, ``.to(dtype=...)``: not a move to the device."""
    if not method_call(move, "to"):
        return False
    args = positional(move)
    if not args:
        return keyword(move, "device") is None
    first = args[0].value
    if isinstance(first, cst.SimpleString) and first.evaluated_value == "cpu":
        return True
    return is_dtype(metadata, first)

