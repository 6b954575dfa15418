"""DM302 load-map-location: ``torch.load`` without a map location gets one.

Why: a checkpoint saved on a GPU machine remembers its CUDA device. Loading it on a
CPU-only machine fails ("Attempting to deserialize object on a CUDA device but
torch.cuda.is_available() is False"), and loading it on a GPU puts the tensors on
whatever device they were saved from, which need not be the model's.
``map_location=device`` puts them where the rest of the code expects them.

- In training code and at module level: ``map_location=device`` (the shared variable
  or the function's ``device`` parameter). In library code (a file other project files
  import, outside its main block) only the function's own ``device`` parameter, else
  ``"cpu"``: no global device is added there.
- Everywhere else (Dataset code, model methods such as loading helpers and
  classmethods, other classes) and where the function only defines its device
  further down: ``map_location="cpu"``. It always works, and
  ``model.load_state_dict`` copies the tensors to wherever the parameters are.
- Not where the loaded object may be a whole model that runs (called, ``.eval()``,
  returned by a plain function): ``"cpu"`` would put it beside data its saver placed on
  the GPU (TCN reloads the model it saved after ``.cuda()``), so that load stays as written,
  unless every use moves what it loads right away (``ckpt["model"].to(device)``).
  So does a load whose tensors leave the function as loaded: a part returned to the caller
  (``return ckpt["mean"]``; bookkeeping such as ``ckpt["epoch"]`` does not count) or one put on
  the model in its own method (``self.scale = torch.load(path)`` replaces a placed buffer).
- Not behind the author's GPU test (``if torch.cuda.is_available(): torch.load(path)``, whose
  ``else`` maps to the CPU itself), and not in a one-process-per-GPU program that keeps its
  ``.cuda()`` when the tensors are used as loaded (a queue resumed beside the rank's GPU tensors);
  a checkpoint that only goes to ``load_state_dict`` there still gets ``"cpu"``.
- A second positional argument already is the map location; ``weights_only`` and
  every other argument stay as written. ``map_location="cuda:0"`` is DM102's (string
  devices) and ``**kwargs`` may carry one: both are left alone.
"""

from __future__ import annotations

import ast
import re
from typing import Mapping

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from ..analysis.candidates import FileFacts
from ..analysis.guards import gpu_only, in_cuda_available_branch
from ..analysis.names import dotted, keyword, method_call, positional, qualified_names
from ..analysis.roles import looks_like_model_name, model_variables
from ..analysis.runs import READS_NOTHING
from ..analysis.scopes import ScopeKind, assigned_value, only_binding, scope_bindings
from ..analysis.tree import ancestors, nodes_of, walk
from ..analysis.tensors import assigned_name, bound_before, flows_only_to_cpu_name, runs_only_through_its_methods, \
    uses_of, uses_of_binding
from .base import Invalid, Rule, Valid
from .factory_device import with_keyword


# Keys of a checkpoint's numbers, settings and state dicts: returned to a caller, they meet no tensor.
_BOOKKEEPING = re.compile(r"epoch|step|iter|best|acc|loss|score|miou|lr|arg|conf|cfg|opt|param|arch|version|"
                          r"state|sched|meta|name|model|net")

# Keys of a checkpoint's numbers (not its tensors): read from a checkpoint, they meet no tensor.
_NUMBERS = re.compile(r"epoch|step|iter|best|acc|loss|score|miou|lr|arg|conf|cfg|version|meta|name|arch")

# Code that reads data on the CPU by design (a Dataset's methods, collate functions).
_DATA_KINDS = (ScopeKind.DATA_METHOD, ScopeKind.DATA_CALLBACK)

# A model's own methods: a loaded object asked for these runs as a model.
_MODEL_API = frozenset({"eval", "train", "forward", "parameters", "named_parameters", "modules", "children"})


def _unpacked_names(parent: cst.CSTNode | None, load: cst.Call) -> list[cst.Name]:
    """``model, criterion, optimizer = torch.load(f)``: the names a loaded tuple is unpacked to."""
    if not isinstance(parent, cst.Assign) or parent.value is not load or len(parent.targets) != 1:
        return []
    target = parent.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return []
    return [e.value for e in target.elements if isinstance(e.value, cst.Name)]


class LoadMapLocation(Rule):
    CODE = "DM302"
    NAME = "load-map-location"
    SUMMARY = "`torch.load` without `map_location` gets `map_location=device`"
    ERROR = ("RuntimeError: Attempting to deserialize object on a CUDA device but "
             "torch.cuda.is_available() is False")
    TRIGGERS = ("load",)
    ORDER = 35

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # (the checks ``leave_Call`` starts with: one positional argument, no ``map_location``, no ``*``/``**``)
        return any(len(call.args) == 1 and not isinstance(call.args[0], ast.Starred)
                   and all(k.arg is not None and k.arg != "map_location" for k in call.keywords)
                   for call in facts.calls_of("torch.load"))
    REPLACES_CUDA = True

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if "torch.load" not in qualified_names(self.metadata, original_node.func):
            return updated_node
        if keyword(original_node, "map_location") is not None or len(positional(original_node)) != 1:
            return updated_node
        if any(a.star for a in original_node.args):
            return updated_node
        if in_cuda_available_branch(self.metadata, original_node):
            return updated_node  # ``if torch.cuda.is_available(): torch.load(path)``: the author's GPU branch
        device = self._device(original_node)
        if isinstance(device, cst.SimpleString) and self._may_be_a_whole_model(original_node) \
                and self.devices.place(original_node).kind in (ScopeKind.MODULE, ScopeKind.FUNCTION) \
                and not self._moved_as_loaded(original_node):
            return updated_node  # on the CPU it would meet the data its saver placed: left as the author has it
        if self._moves_behind_a_switch() and self._may_be_a_whole_model(original_node):
            return updated_node  # the data moves only when the user asks: so did the model it saved
        if not isinstance(device, cst.SimpleString) and self._run_where_nothing_moves(original_node):
            return updated_node  # its inputs are made where devmod places nothing: they would not follow
        loaded = assigned_name(self.metadata, original_node)
        if not isinstance(device, cst.SimpleString) and loaded is not None \
                and runs_only_through_its_methods(self.metadata, loaded):
            return updated_node  # ``model.act(obs)`` of a pickled class devmod cannot see: left where it was saved
        if isinstance(device, cst.SimpleString) and (self._used_as_loaded(original_node)
                                                     or self._handed_on_as_loaded(original_node)):
            return updated_node  # (an EMA shadow kept as restored, used beside the model's parameters)
        if isinstance(device, cst.SimpleString) and self.devices.place(original_node).kind not in _DATA_KINDS \
                and self._kept_as_loaded(original_node) and not self._only_converted(original_node) \
                and not self._moved_as_loaded(original_node) \
                and not (loaded is not None and flows_only_to_cpu_name(self.metadata, loaded)):
            # Tensors used where they were restored (attention-transfer's teacher weights, run as a
            # function's parameters beside the student's on the GPU): on the CPU they would meet them.
            return updated_node
        if isinstance(device, cst.SimpleString) and self.devices.per_rank and self.state.role.sets_cuda_device \
                and self._used_outside_state_dicts(original_node):
            # One process per GPU that keeps its ``.cuda()``: a tensor used as loaded (swav's queue)
            # would meet the rank's GPU tensors; ``load_state_dict`` copies to them.
            return updated_node
        return self.fix(original_node, updated_node, with_keyword(updated_node, "map_location", device),
                        "`torch.load` without `map_location` restores tensors to the device they were saved on")

    def _moves_behind_a_switch(self) -> bool:
        """Does the file move values only behind a GPU switch (``if args.cuda: x = x.cuda()``)?"""
        def compute() -> bool:
            return any(method_call(call, "cuda", "to") and gpu_only(self.metadata, call)
                       for call in nodes_of(self.tree, cst.Call))
        return self.facts.remembered("moves_behind_a_switch", self.tree, compute)

    def _may_be_a_whole_model(self, load: cst.Call) -> bool:
        """Is the loaded object maybe a pickled model that runs, not a state dict? Returned to a
        caller, or bound to a name that is called or asked for ``eval()`` / ``parameters()``
        (TCN's ``model = torch.load(f)`` then ``model(data)`` with ``data`` on the GPU)."""
        parents = self.metadata[ParentNodeProvider]
        parent = parents.get(load)
        if isinstance(parent, cst.Return):
            return True
        if isinstance(parent, cst.Call) and parent.func is load:
            return True
        name = assigned_name(self.metadata, load)
        names = [name] if name is not None else _unpacked_names(parents.get(load), load)
        uses = [u for n in names for u in uses_of_binding(self.metadata, n)]
        for use in uses:
            holder = parents.get(use)
            if isinstance(holder, cst.Return) or (isinstance(holder, cst.Call) and holder.func is use):
                return True
            if isinstance(holder, cst.Attribute) and holder.value is use and holder.attr.value in _MODEL_API:
                return True
        # ``net = ckpt["model"]`` / ``net = torch.load(f)["model"]``, then ``net(x)`` or ``net.eval()``
        for whole in (load, *uses):
            part = parents.get(whole)
            piece = assigned_name(self.metadata, part) \
                if isinstance(part, cst.Subscript) and part.value is whole else None
            for use in uses_of_binding(self.metadata, piece) if piece is not None else ():
                holder = parents.get(use)
                if (isinstance(holder, cst.Call) and holder.func is use) or (
                        isinstance(holder, cst.Attribute) and holder.value is use and holder.attr.value in _MODEL_API):
                    return True
        return False

    def _moved_as_loaded(self, load: cst.Call) -> bool:
        """``checkpoint = torch.load(f)`` then ``model = checkpoint["model"].to(device)`` (and nothing
        else of it): the author moves what is loaded right away, so loading it to the CPU first
        changes nothing for the code, and a GPU checkpoint loads on a machine without one."""
        parents = self.metadata[ParentNodeProvider]
        name = assigned_name(self.metadata, load)
        uses = uses_of_binding(self.metadata, name) if name is not None else [load]
        moved = False
        for use in sorted(uses, key=lambda u: self.position(u)):  # (scopes give a module-level name's every use)
            node = use
            while isinstance(parents.get(node), cst.Subscript) and parents[node].value is node:
                node = parents[node]
            method = parents.get(node)
            call = parents.get(method) if isinstance(method, cst.Attribute) and method.value is node else None
            if not isinstance(call, cst.Call) or call.func is not method:
                return False
            if method.attr.value in ("to", "cuda"):
                moved = True
                statement = parents.get(call)
                if node is use and name is not None and isinstance(statement, cst.Assign) \
                        and len(statement.targets) == 1 and isinstance(statement.targets[0].target, cst.Name) \
                        and statement.targets[0].target.value == name.value:
                    return True  # ``model = model.to(device)``: what follows uses the moved model
            elif not (node is use and isinstance(parents.get(call), cst.Expr)):
                return False  # (``model.backward_compatible()`` on its own line, before the move, is fine)
        return moved

    def _run_where_nothing_moves(self, load: cst.Call) -> bool:
        """``model = torch.load(path)`` then ``run(model)``, where ``run`` is another file's training
        loop or a function of this file that others import (library code, given no device) and
        that calls the model: its inputs stay on the CPU, so the whole model must stay with them."""
        name = assigned_name(self.metadata, load)
        parents = self.metadata[ParentNodeProvider]
        for use in uses_of_binding(self.metadata, name) if name is not None else ():
            arg = parents.get(use)
            call = parents.get(arg)
            if not (isinstance(arg, cst.Arg) and isinstance(call, cst.Call) and isinstance(call.func, cst.Name)):
                continue
            if call.func.value in self.state.role.training_loops:
                return True
            function = only_binding(self.metadata, call.func)
            function = parents.get(function) if isinstance(function, cst.Name) else function
            if not isinstance(function, cst.FunctionDef) or not self.devices.in_library_code(function.body):
                continue
            index = [a for a in call.args if a.keyword is None and not a.star].index(arg) \
                if arg.keyword is None and not arg.star else None
            params = function.params.params
            param = params[index].name.value if index is not None and index < len(params) \
                else arg.keyword.value if arg.keyword is not None else None
            if param is not None and any(isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
                                         and n.func.value == param for n in walk(function.body)):
                return True
        return False

    def _used_as_loaded(self, load: cst.Call) -> bool:
        """Is a part of the checkpoint handed to the ``load_state_dict`` of an instance of a
        project class that is no ``nn.Module`` (ddim's ``ema_helper = EMAHelper(...)``,
        ``ema_helper.load_state_dict(states[4])``)? Such an object may keep the tensors as
        loaded and add them to the parameters on the GPU: restored to the CPU, they would fail."""
        parents = self.metadata[ParentNodeProvider]
        plain = self.state.role.plain_classes | (set(self.facts.classes) - self.facts.model_classes)
        name = assigned_name(self.metadata, load)
        for piece in [load] if name is None else uses_of_binding(self.metadata, name):
            expr = piece
            while isinstance(parents.get(expr), cst.Subscript) and parents[expr].value is expr:
                expr = parents[expr]
            holder = parents.get(expr)
            call = parents.get(holder) if isinstance(holder, cst.Arg) else None
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                    and call.func.attr.value == "load_state_dict" and isinstance(call.func.value, cst.Name):
                receiver = call.func.value
                for binding in scope_bindings(self.metadata[ScopeProvider].get(receiver), receiver.value):
                    built = assigned_value(self.metadata, binding.node)
                    if isinstance(built, cst.Call) and (dotted(built.func) or "") in plain:
                        return True  # an instance of a class of the project that is no module
        return False

    def _pieces(self, load: cst.Call) -> list[cst.CSTNode]:
        """The load itself, or the reads of the name it is bound to."""
        name = assigned_name(self.metadata, load)
        return [load] if name is None else list(uses_of_binding(self.metadata, name))

    def _handed_on_as_loaded(self, load: cst.Call) -> bool:
        """Does a tensor of the checkpoint leave the function as loaded: a part returned to the
        caller (``return ckpt["mean"]``, used there beside the model), or the value put on a
        model in its own method (``self.scale = torch.load(path)`` replaces a buffer that
        ``model.to()`` placed)? On the CPU it would meet the model's tensors on the GPU.
        Bookkeeping returned beside it (``ckpt["epoch"]``) does not count."""
        parents = self.metadata[ParentNodeProvider]
        in_model = self.devices.place(load).kind is ScopeKind.MODEL_METHOD
        for piece in self._pieces(load):
            expr, key = _part_read(parents, piece)
            holder = parents.get(expr)
            if isinstance(holder, cst.Element) and isinstance(parents.get(holder), cst.Tuple):
                holder = parents.get(parents.get(holder))  # ``return ckpt["mean"], ckpt["epoch"]``
            if isinstance(holder, cst.Return) and expr is not piece \
                    and not (isinstance(key, str) and _BOOKKEEPING.search(key.lower())):
                return True
            if in_model and isinstance(holder, cst.Assign) and holder.value is expr and any(
                    isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                    and t.target.value.value == "self" for t in holder.targets):
                return True
        return False

    def _kept_as_loaded(self, load: cst.Call) -> bool:
        """May a tensor of the checkpoint be used where it was restored? Safe uses: handed to a
        ``load_state_dict`` or ``copy_`` (which copy to where the model is), moved (``.to``,
        ``.cuda``), a number read from it (``ckpt["epoch"]``), its keys; followed through names it is
        bound to, subscripts, ``.items()`` / ``.values()`` / ``.get()``, comprehensions and the calls
        it is handed to whose result is followed in turn (``sd = fix_keys(sd)``)."""
        parents = self.metadata[ParentNodeProvider]
        work: list[cst.CSTNode] = [load]
        seen: set[int] = set()
        while work:
            node = work.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            expr, key = _part_read(parents, node)
            if expr is not node and isinstance(key, str) and _NUMBERS.search(key.lower()):
                continue
            holder = parents.get(expr)
            if isinstance(holder, (cst.ComparisonTarget, cst.Expr)):
                continue  # ``"ema" in ckpt``, a bare statement
            if isinstance(holder, cst.Attribute) and holder.value is expr:
                call = parents.get(holder)
                method = holder.attr.value
                if method in ("to", "cuda", "cpu", "keys", "size", "shape", "dtype", "dim", "ndim", "numel"):
                    continue  # moved, or only its keys or shape read
                if method == "state_dict" and isinstance(call, cst.Call) and call.func is holder:
                    work.append(call)  # ``ckpt["model"].state_dict()``: the same tensors, followed in turn
                    continue
                if method in ("items", "values", "get") and isinstance(call, cst.Call) and call.func is holder:
                    first = call.args[0].value if method == "get" and call.args else None
                    key = first.evaluated_value if isinstance(first, cst.SimpleString) else None
                    if not (isinstance(key, str) and _NUMBERS.search(key.lower())):
                        work.append(call)  # (``ckpt.get("epoch", 0)`` is a number)
                    continue
                return True
            if isinstance(holder, cst.Arg):
                call = parents.get(holder)
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                        and call.func.attr.value in ("load_state_dict", "copy_"):
                    continue
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in READS_NOTHING:
                    continue  # ``isinstance(ckpt, dict)``, ``len(ckpt)``
                if isinstance(call, cst.Call):
                    work.append(call)
                    continue
                return True
            if isinstance(holder, cst.CompFor) and holder.iter is expr:
                comprehension = next((a for a in ancestors(self.metadata, holder)
                                      if isinstance(a, (cst.DictComp, cst.ListComp, cst.GeneratorExp, cst.SetComp))),
                                     None)
                if comprehension is None:
                    return True
                work.append(comprehension)
                continue
            if isinstance(holder, cst.IfExp) and expr in (holder.body, holder.orelse):
                work.append(holder)  # ``ckpt["params"] if "params" in ckpt else ckpt``
                continue
            if isinstance(holder, cst.For) and holder.iter is expr:
                # ``for k, v in sd.items():``: where each member goes (``new[k[7:]] = v``, ``p.copy_(v)``)
                members = holder.target
                if method_call(expr, "items") and isinstance(members, cst.Tuple) and len(members.elements) == 2:
                    members = members.elements[1].value  # (the keys are strings)
                work.extend(use for target in nodes_of(members, cst.Name)
                            for use in uses_of_binding(self.metadata, target))
                continue
            name = assigned_name(self.metadata, expr)
            if name is not None and parents.get(parents.get(name)) is holder:
                work.extend(uses_of_binding(self.metadata, name))
                continue
            filled = _filled_container(holder, expr)
            if filled is not None:  # ``new[k] = v``: the container goes on, the store itself is no use
                work.extend(use for use in uses_of(self.metadata, filled) if not _stored_into(parents, use))
                continue
            return True
        return False

    def _used_outside_state_dicts(self, load: cst.Call) -> bool:
        """Is a part of the checkpoint used otherwise than handed to a ``load_state_dict`` or read
        as bookkeeping (``ckpt["epoch"]``)?"""
        parents = self.metadata[ParentNodeProvider]
        for piece in self._pieces(load):
            expr, key = _part_read(parents, piece)
            call = parents.get(parents.get(expr)) if isinstance(parents.get(expr), cst.Arg) else None
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                    and call.func.attr.value == "load_state_dict":
                continue
            if isinstance(key, str) and _BOOKKEEPING.search(key.lower()) and expr is not piece:
                continue
            holder = parents.get(expr)
            if isinstance(holder, cst.ComparisonTarget) or (  # ``"config" in pkg``, ``pkg.keys()``
                    isinstance(holder, cst.Attribute) and holder.attr.value == "keys"):
                continue
            return True
        return False

    def _device(self, node: cst.Call) -> cst.BaseExpression:
        """The shared device in module/function code, else the CPU (always safe to load to)."""
        cpu = cst.SimpleString('"cpu"')
        if self.devices.place(node).kind not in (ScopeKind.MODULE, ScopeKind.FUNCTION):
            return cpu
        # Adding a map location places what the author left unplaced: in library code that is
        # the caller's choice, so only a device the function itself has (a parameter) or the CPU,
        # never a new global ``device`` (``load_state_dict`` copies to the model anyway).
        if self._only_converted(node):
            return cpu
        loaded = assigned_name(self.metadata, node)
        if loaded is not None and flows_only_to_cpu_name(self.metadata, loaded):
            return cpu  # ``indices = torch.load(f)`` for a ``SubsetRandomSampler``: data stays on the CPU
        device = self.devices.expression_for(node, replaces_cuda=not self.devices.in_library_code(node))
        if not isinstance(device, cst.Name) or not bound_before(self.metadata, node, device.value):
            return cpu
        return device

    def _only_converted(self, load: cst.Call) -> bool:
        """A conversion script (rename keys, mix two checkpoints): the function or file saves
        with ``torch.save`` and runs no model and moves nothing. Loaded to the GPU, the file it
        saves would need a GPU to load; on the CPU it loads anywhere, as before."""
        scope = next((a for a in ancestors(self.metadata, load) if isinstance(a, cst.FunctionDef)), self.tree)
        models, saves = model_variables(self.metadata, self.tree, self.facts), False
        for node in walk(scope):
            if not isinstance(node, cst.Call):
                continue
            if "torch.save" in qualified_names(self.metadata, node.func):
                saves = True
            elif isinstance(node.func, cst.Name) and (node.func.value in models or looks_like_model_name(node.func.value)):
                return False  # a model runs here: its checkpoint goes where it runs
            elif isinstance(node.func, cst.Attribute) and node.func.attr.value in ("to", "cuda"):
                return False
        return saves

    VALID = [
        Valid('import torch\nstate = torch.load("ckpt.pt", map_location="cpu")\n'),
        Valid('import torch\nstate = torch.load("ckpt.pt", "cpu", weights_only=True)\n'),
        Valid("import numpy as np\nx = np.load('a.npy')\nimport torch\n"),
    ]
    INVALID = [
        # A conversion script: what it saves must load on any machine.
        Invalid(
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "old = torch.load('old.pt')\ntorch.save({k[7:]: v for k, v in old.items()}, 'new.pt')\n",
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "old = torch.load('old.pt', map_location=\"cpu\")\ntorch.save({k[7:]: v for k, v in old.items()}, 'new.pt')\n",
        ),
        Invalid(
            "import torch\n\ndef restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(path, weights_only=True))\n",
            "import torch\n\ndef restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(path, weights_only=True, map_location=device))\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    @classmethod\n"
            "    def restore(cls, path):\n        net = cls()\n        net.load_state_dict(torch.load(path))\n"
            "        return net\n\nstate = torch.load('opt.pt')\n",
            "import torch\nimport torch.nn as nn\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "class Net(nn.Module):\n    @classmethod\n"
            "    def restore(cls, path):\n        net = cls()\n        net.load_state_dict(torch.load(path, map_location=\"cpu\"))\n"
            "        return net\n\nstate = torch.load('opt.pt', map_location=device)\n",
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import Dataset\n\nclass Cached(Dataset):\n"
            "    def __getitem__(self, i):\n        return torch.load(f\"{i}.pt\")\n",
            "import torch\nfrom torch.utils.data import Dataset\n\nclass Cached(Dataset):\n"
            "    def __getitem__(self, i):\n        return torch.load(f\"{i}.pt\", map_location=\"cpu\")\n",
        ),
    ]


def _filled_container(holder: cst.CSTNode | None, value: cst.CSTNode) -> cst.Name | None:
    """``new`` of ``new[k] = value``."""
    if isinstance(holder, cst.Assign) and holder.value is value and len(holder.targets) == 1:
        target = holder.targets[0].target
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            return target.value
    return None


def _stored_into(parents: Mapping, use: cst.Name) -> bool:
    """``use`` is the container of a store (``use[k] = ...``)."""
    subscript = parents.get(use)
    return isinstance(subscript, cst.Subscript) and subscript.value is use \
        and isinstance(parents.get(subscript), cst.AssignTarget)


def _part_read(parents: Mapping, piece: cst.CSTNode) -> tuple[cst.CSTNode, object]:
    """``ckpt["ema"][0]`` around ``piece`` (``ckpt``): the outermost subscript and its last
    string key (None when no key is a string)."""
    expr, key = piece, None
    while isinstance(parents.get(expr), cst.Subscript) and parents[expr].value is expr:
        expr = parents[expr]
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        key = index.value.evaluated_value if isinstance(index, cst.Index) \
            and isinstance(index.value, cst.SimpleString) else key
    return expr, key
