"""DM401 layer-in-forward: a layer with weights built inside ``forward()`` is reported.

Why: ``nn.Linear(128, 10)(x)`` inside ``forward`` creates fresh, random weights on
the CPU on every call. With the model on the GPU the call fails with "Input type
(torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same"
(or "Expected all tensors to be on the same device"); on the CPU it runs, but the
layer is never trained: the optimizer was built from ``model.parameters()`` before
it existed, and the next call replaces it anyway. The expert fix is to build the
layer once in ``__init__`` (``self.fc = nn.Linear(128, 10)``) and call ``self.fc(x)``
in ``forward``; then ``model.to(device)``, the optimizer and ``state_dict()`` all see it.

Reported, never rewritten: moving a layer to ``__init__`` needs its sizes there
and changes ``state_dict()`` keys.

- Looked at: ``forward`` of an ``nn.Module`` subclass of the file and the methods
  it calls through ``self.<method>(...)`` (also nested functions there).
- Reported: ``torch.nn`` layers that hold weights or buffers (``nn.Linear``,
  ``nn.Conv2d``, ``nn.BatchNorm1d``, ``nn.LSTM``, ...), nn.Module classes of the file
  that build such layers, ``torchvision.models.*`` and ``timm.create_model``.
- Left alone: functional calls (``F.relu``, ``F.linear(x, self.weight)``),
  parameter-free modules (``nn.ReLU()(x)``, ``nn.MaxPool2d(2)``, ``nn.Flatten()``,
  ``nn.Dropout``), containers, losses, layers built in ``__init__`` and in helpers
  ``__init__`` calls (``self._make_layer(...)``), lazy initialisation
  (``if self.fc is None: self.fc = nn.Linear(...)``), and a layer kept in a cache on the
  input's device (``self.cache[d] = nn.Linear(d, d).to(hidden)``).
"""

from __future__ import annotations

import ast
import re

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from ..analysis.ast_walk import ast_nodes
from ..analysis.candidates import FileFacts
from ..analysis.modules import registers_on_self
from ..analysis.names import dotted, keyword, last_part, qualified_names
from ..analysis.roles import (MODEL_FACTORY_PREFIXES, PARAMETER_FREE, is_loss_constructor,
                              is_torch_nn_class, layer_has_state)
from ..analysis.scopes import scope_bindings
from ..analysis.tree import ancestors, code_of, walk
from .base import Invalid, Rule, Valid

# The call graph from forward is followed at most this deep.
_MAX_DEPTH = 10


class LayerInForward(Rule):
    CODE = "DM401"
    NAME = "layer-in-forward"
    SUMMARY = "a layer with weights built inside `forward()` is reported: build it once in `__init__`"
    SAFETY = "report"
    ERROR = "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same"
    TRIGGERS = ("forward",)
    ORDER = 70

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # A call that may build a layer with weights, in a method other than ``__init__`` of a
        # class that may be a model.
        for call in facts.calls():
            if not isinstance(call.func, (ast.Name, ast.Attribute)):
                continue
            names = facts.qnames(call.func)
            layers = {n.rsplit(".", 1)[-1] for n in names if n.startswith("torch.nn.") and n.count(".") == 2}
            if not (any(n[:1].isupper() and not PARAMETER_FREE.fullmatch(n) for n in layers)
                    or any(n.startswith(MODEL_FACTORY_PREFIXES[:2]) for n in names)
                    or isinstance(call.func, ast.Name) and call.func.id in facts.model_classes):
                continue
            method = None
            for parent in facts.ancestors(call):
                if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    method = parent
                elif isinstance(parent, ast.ClassDef):
                    if method is not None and method.name != "__init__" and parent.name in facts.model_classes \
                            and method.name in _reached_from_forward(parent):
                        return True
                    break
        return False

    def visit_Module(self, node: cst.Module) -> bool:
        self._runtime: dict[str, set[str]] = {}
        return super().visit_Module(node)

    def visit_Call(self, node: cst.Call) -> None:
        method = self._model_method(node)
        if method is None:
            return
        function, klass = method
        if function.name.value not in self._runtime_methods(klass):
            return
        if self._local_callable(node):
            return  # ``for GBlock in self.GBlock: x = GBlock(x)`` (BigGAN): a module built in ``__init__``
        if not self._builds_weights(node) or self._lazy_init(node, function) \
                or self._registered_on_self(node, function, klass) or self._placed_and_cached(node):
            return
        name = code_of(node.func)
        self.report(node, f"`{name}(...)` is built inside `{function.name.value}()`: its weights are created on "
                          "the CPU on every call and never trained; build it once in `__init__` and call it here")

    def _local_callable(self, call: cst.Call) -> bool:
        """``name(...)`` where ``name`` is bound in the method itself (a loop variable, a
        parameter, an assignment) and so is no class, whatever it shares a name with."""
        if not isinstance(call.func, cst.Name):
            return False
        scope = self.metadata[ScopeProvider].get(call.func)
        return any(b.scope is scope for b in scope_bindings(scope, call.func.value))

    def _placed_and_cached(self, call: cst.Call) -> bool:
        """``self.cache[d] = nn.Linear(d, d).to(hidden)``, or ``proj(d).to(hidden)`` with ``proj``
        cached by a decorator: placed on the input's device by the author, and kept; the report
        (CPU weights, rebuilt on every call) would be false."""
        parents = self.metadata[ParentNodeProvider]
        function = next((p for p in ancestors(self.metadata, call) if isinstance(p, cst.FunctionDef)), None)
        if function is not None and function.decorators and function.name.value != "forward" and any(
                isinstance(r, cst.Return) and isinstance(r.value, cst.Call) and isinstance(r.value.func, cst.Attribute)
                and r.value.func.attr.value in ("to", "cuda") for r in walk(function.body)):
            return True  # a cached builder that assembles its layers in steps and returns them placed
        attribute, outer = parents.get(call), None
        if isinstance(attribute, cst.Attribute) and attribute.value is call and attribute.attr.value in ("to", "cuda"):
            outer = parents.get(attribute)
        if not (isinstance(outer, cst.Call) and outer.func is attribute):
            return False
        function = next((p for p in ancestors(self.metadata, call) if isinstance(p, cst.FunctionDef)), None)
        if function is not None and function.decorators and function.name.value != "forward":
            return True  # a cached builder (``@singleton``), placed where it is used
        target = parents.get(outer)
        return isinstance(target, cst.Assign) and all(
            isinstance(t.target, (cst.Attribute, cst.Subscript)) for t in target.targets)

    # -- where the call is -------------------------------------------------------------------------
    def _model_method(self, node: cst.CSTNode) -> tuple[cst.FunctionDef, cst.ClassDef] | None:
        """The method (directly in an nn.Module subclass of the file) that contains ``node``."""
        method: cst.FunctionDef | None = None
        for parent in ancestors(self.metadata, node):
            if isinstance(parent, cst.FunctionDef):
                method = parent
            elif isinstance(parent, cst.Lambda):
                continue
            elif isinstance(parent, cst.ClassDef):
                if method is None or parent.name.value not in self.facts.model_classes:
                    return None
                return method, parent
        return None

    def _runtime_methods(self, klass: cst.ClassDef) -> set[str]:
        """``forward`` and the methods it calls (``self.m(...)``), minus those ``__init__`` calls."""
        key = klass.name.value
        if key not in self._runtime:
            methods = _methods(klass)
            construction = _reachable(methods, {"__init__"})
            self._runtime[key] = _reachable(methods, {"forward"}) - construction
        return self._runtime[key]

    # -- what the call builds ----------------------------------------------------------------------
    def _builds_weights(self, call: cst.Call) -> bool:
        if not isinstance(call.func, (cst.Name, cst.Attribute)):
            return False  # ``nn.Linear(4, 2)(x)``: the inner call is the construction
        nn_classes = is_torch_nn_class(self.metadata, call)
        if nn_classes:
            return not is_loss_constructor(self.metadata, call) and layer_has_state(last_part(nn_classes), call)
        if isinstance(call.func, cst.Name) and call.func.value in self.facts.model_classes:
            klass = self.facts.classes.get(call.func.value)
            return klass is not None and self._class_builds_weights(klass, set())
        return any(n.startswith(MODEL_FACTORY_PREFIXES[:2]) for n in qualified_names(self.metadata, call.func))

    def _class_builds_weights(self, klass: cst.ClassDef, seen: set[str]) -> bool:
        """Does the class body build a layer with weights, an ``nn.Parameter`` or a buffer?"""
        seen.add(klass.name.value)
        for node in walk(klass):
            if not isinstance(node, cst.Call):
                continue
            names = qualified_names(self.metadata, node.func)
            if names & {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}:
                return True
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("register_buffer",
                                                                                 "register_parameter"):
                return True
            nn_classes = is_torch_nn_class(self.metadata, node)
            if nn_classes and not is_loss_constructor(self.metadata, node) \
                    and layer_has_state(last_part(nn_classes), node):
                return True
            if isinstance(node.func, cst.Name) and node.func.value not in seen \
                    and node.func.value in self.facts.model_classes:
                other = self.facts.classes.get(node.func.value)
                if other is not None and self._class_builds_weights(other, seen):
                    return True
        return False

    def _registered_on_self(self, call: cst.Call, function: cst.FunctionDef, klass: cst.ClassDef) -> bool:
        """``mlp = nn.Sequential(nn.Linear(...))`` then ``setattr(self, name, mlp)`` (or
        ``self.add_module(name, mlp)``) in the same method, or a class whose run-time methods
        register what they build (``self.add_module(key, self.mlps[key])`` in ``forward``): kept
        as sub-modules, moved and trained with the model (CUT's lazily built MLP heads)."""
        methods = _methods(klass)
        if any(isinstance(node, cst.Call) and registers_on_self(node)
               for name in self._runtime_methods(klass) if name in methods for node in walk(methods[name])):
            return True
        held: set[str] = set()
        for parent in ancestors(self.metadata, call):
            if isinstance(parent, cst.Assign):
                held = {t.target.value for t in parent.targets if isinstance(t.target, cst.Name)}
                break
            if isinstance(parent, cst.Arg):
                registering = self.metadata[ParentNodeProvider].get(parent)
                if isinstance(registering, cst.Call) and registers_on_self(registering):
                    return True
            if isinstance(parent, (cst.BaseStatement, cst.BaseSmallStatement)):
                break
        return bool(held) and any(
            isinstance(node, cst.Call) and registers_on_self(node) and isinstance(node.args[-1].value, cst.Name)
            and node.args[-1].value.value in held for node in walk(function))

    def _lazy_init(self, call: cst.Call, function: cst.FunctionDef) -> bool:
        """``if self.fc is None: self.fc = nn.Linear(...)``: built once, kept as a sub-module."""
        target = None
        for parent in ancestors(self.metadata, call):
            if isinstance(parent, cst.Assign):
                target = parent.targets[0].target if len(parent.targets) == 1 else None
                break
            if isinstance(parent, (cst.BaseStatement, cst.BaseSmallStatement)):
                break
        name = dotted(target) if target is not None else None
        if not name or not name.startswith("self."):
            return False
        for parent in ancestors(self.metadata, call):
            if parent is function:
                return False
            if isinstance(parent, cst.If) and any(dotted(n) == name for n in walk(parent.test)):
                return True
        return False

    VALID = [
        # a builder cached by a decorator, assembled in steps and returned placed on the input's device
        Valid("import torch.nn as nn\n\nclass Head(nn.Module):\n    @cache_once\n    def proj(self, x):\n"
              "        layer = nn.Linear(x.shape[-1], 4)\n        layer = nn.Sequential(nn.LayerNorm(x.shape[-1]), layer)\n"
              "        return layer.to(x)\n\n    def forward(self, x):\n        return self.proj(x)(x)\n"),
        # A projection built once per width, on the input's device, and kept.
        Valid('''import torch.nn as nn

class Mixer(nn.Module):
    def forward(self, hidden):
        d = hidden.shape[-1]
        if d not in self.cache:
            self.cache[d] = nn.Linear(d, d).to(hidden)
        return self.cache[d](hidden)
'''),
        # Layers built in __init__ (also through a helper it calls) and used in forward.
        Valid("import torch.nn as nn\nimport torch.nn.functional as F\n\nclass Net(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n"
              "        self.body = self._make_layers([4, 4])\n\n"
              "    def _make_layers(self, sizes):\n"
              "        return nn.Sequential(*[nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])\n\n"
              "    def forward(self, x):\n        return self.fc(F.relu(self.body(x)))\n"),
        # Functional calls and parameter-free modules in forward.
        Valid("import torch.nn as nn\nimport torch.nn.functional as F\n\nclass Net(nn.Module):\n"
              "    def forward(self, x):\n        x = nn.ReLU()(x)\n        x = nn.MaxPool2d(2)(x)\n"
              "        return F.linear(nn.Flatten()(x), self.weight)\n"),
        # Lazy initialisation: built once and kept as a sub-module.
        Valid("import torch.nn as nn\n\nclass Head(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.fc = None\n\n    def forward(self, x):\n"
              "        if self.fc is None:\n            self.fc = nn.Linear(x.shape[-1], 2).to(x.device)\n"
              "        return self.fc(x)\n"),
        # Building models outside nn.Module methods is training code.
        Valid("import torch.nn as nn\n\ndef forward(x):\n    return nn.Linear(4, 2)(x)\n"),
    ]
    INVALID = [
        Invalid("import torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
                "        return nn.Linear(x.shape[-1], 10)(x)\n"),
        # A helper called from forward, and a block class of the file with weights.
        Invalid("import torch\nimport torch.nn as nn\n\nclass Block(nn.Module):\n    def __init__(self, n):\n"
                "        super().__init__()\n        self.proj = nn.Conv2d(n, n, 3)\n\n"
                "class Net(nn.Module):\n    def head(self, x):\n        block = Block(x.shape[1])\n"
                "        return block(x)\n\n    def forward(self, x):\n        return self.head(x)\n"),
    ]


def _methods(klass: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ()
    return {stmt.name.value: stmt for stmt in body if isinstance(stmt, cst.FunctionDef)}


def _reached_from_forward(klass: ast.ClassDef) -> set[str]:
    """``_reachable(methods, {"forward"})`` on the ``ast`` tree, with no depth limit (so never fewer)."""
    methods = {s.name: s for s in klass.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found = {"forward"} & set(methods)
    frontier = set(found)
    while frontier:
        called = {node.func.attr for name in frontier for node in ast_nodes(methods[name])
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
                  and node.func.attr in methods}
        frontier = called - found
        found |= frontier
    return found


def _reachable(methods: dict[str, cst.FunctionDef], start: set[str]) -> set[str]:
    """Method names reachable from ``start`` through ``self.<name>(...)`` calls."""
    found = {name for name in start if name in methods}
    frontier = set(found)
    for _ in range(_MAX_DEPTH):
        called: set[str] = set()
        for name in frontier:
            for node in walk(methods[name]):
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                        and dotted(node.func.value) == "self" and node.func.attr.value in methods:
                    called.add(node.func.attr.value)
        frontier = called - found
        if not frontier:
            break
        found |= frontier
    return found
