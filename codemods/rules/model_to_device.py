"""DM202 model-to-device: a model built in training code gets ``.to(device)`` once.

Why: a model's parameters are created on the CPU. Feeding it a batch on the GPU
(or the other way round) fails with "Expected all tensors to be on the same
device" (or "Input type (torch.cuda.FloatTensor) and weight type
(torch.FloatTensor) should be the same"). Moving the model right where it is
built, before an optimizer is made from its parameters, is the expert fix.

- Models: nn.Module subclasses of the file, ``torch.nn`` layers and containers,
  ``torchvision.models.*``, ``timm.create_model``, ``*.from_pretrained`` (not
  tokenizers, configs, processors or schedulers), assigned to a name in module-level
  code, an ``if __name__ == "__main__":`` block or a plain function.
- A model wrapped in ``nn.DataParallel`` in the same block is moved once, on the
  wrapper (``nn.DataParallel(model).to(device)``); a wrap inside an ``if`` moves the
  model where it is built instead, so it is moved on machines with one GPU too.
- ``DistributedDataParallel`` needs the model on *this process's* GPU before
  wrapping; the shared device is the wrong one for every rank but 0, so this is
  reported, not rewritten.
- Loss modules built with a ``weight=`` / ``pos_weight=`` tensor move too: those
  tensors are buffers. Losses without one are left alone.
- The model's group moves with it (``analysis/groups.py``): held-out data fed to the model
  or combined with its output (a slice of a dataset's storage, an item of a Dataset,
  ``points, labels = dataset[i]``, a ``.type(torch.FloatTensor)`` cast, ``torch.from_numpy``)
  gets ``.to(device)`` where it is made. When such a value is
  also needed on the CPU (plotted, passed to NumPy code), nothing in the group moves and
  the model is reported, with the line of each use that holds it back. The same holds when
  an input devmod cannot move reaches the model: one made in library code, one from a
  library such as an image transform or a tokenizer, or a loader's batch that DM203 cannot
  move (a graph object), also through the function the model is handed to (or a trainer class
  of another file that keeps it and runs it in a loop, placing nothing); and when a
  method the file runs on a model of a class imported from another file makes a tensor
  devmod has no device for (its forward takes lists of ids, not a tensor).
- A factory that builds a model and returns it without running it (``def mobilenet_v2():
  model = MobileNetV2(); ...; return model``) is construction: the model is moved where the
  factory is called, not inside. A model from a factory of the file that places it itself
  (``return Net().to(device)`` with the device of the user's switch) stays where the factory put
  it, and so do its inputs (``analysis/groups.py``: it places itself).
- Nothing is added where the model is already moved anywhere (``model.to(...)``,
  ``.cuda()``, ``accelerator.prepare(model)``, ``.to`` on the constructor), placed
  by its constructor (``device=``, ``device_map=``, 8/4-bit loading), inside
  nn.Module methods (sub-modules move with their parent), in Dataset code or in
  other classes.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from ..analysis.candidates import FileFacts, chain, may_build_model
from ..analysis.groups import gets_parts_later, moved_by_a_helper, moved_by_chain
from ..analysis.guards import sets_default_device
from ..analysis.names import dotted, keyword, method_call, positional, qualified_names
from ..analysis.roles import (DATA_PARALLEL, DISTRIBUTED_DATA_PARALLEL, MODULE_API, builds_model, holds_no_tensors,
                              loss_weight_argument, model_variables, places_itself, wrapper_kind)
from ..analysis.runs import handed_to_run_nothing, may_run
from ..analysis.scopes import ScopeKind, scope_bindings
from ..analysis.tensors import checked_for_none, passes_itself, uses_of_binding
from ..analysis.tree import ancestors, code_of, nodes_of, to_call, walk
from .base import Invalid, Rule, Valid

_MOVES = ("to", "cuda", "to_empty")
# Methods that read or fill a model's weights without running it: a model used only through these
# (and saved or printed) never meets data, and moving it would save or show CUDA tensors.
# A model's methods that list its layers: handed to a new model, they become its parts.
_PART_LISTS = frozenset({"children", "modules", "named_children", "named_modules"})
# A model's methods that list its weights: reading them runs nothing.
_WEIGHT_LISTS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers"})
_READ_ONLY = frozenset({"state_dict", "load_state_dict"}) | _PART_LISTS | _WEIGHT_LISTS
_PREPARES = ("prepare", "prepare_model")  # Accelerate / Fabric place the model themselves
_WRAPPERS = DATA_PARALLEL | DISTRIBUTED_DATA_PARALLEL


class ModelToDevice(Rule):
    CODE = "DM202"
    NAME = "model-to-device"
    SUMMARY = "a model (or a loss with a weight tensor) built in training code gets `.to(device)` once"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    ORDER = 40

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # Every fix and report starts from an assignment in training code (no class around it)
        # whose value builds a model, a wrapper or a loss (maybe in a chain, a list or a tuple).
        wrappers = "DataParallel" in facts.text
        for node in facts.nodes(ast.Assign, ast.AnnAssign):
            value = node.value
            if value is None or facts.in_class(node):
                continue
            if facts.role.imported and not wrappers and not facts.in_main_block(node):
                continue  # a file others import: no device there (``device_for``), and no wrapper to report
            for element in value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]:
                if any(may_build_model(facts, call) for call in chain(element)):
                    return True
        return False

    def visit_Module(self, node: cst.Module) -> bool:
        self._default_device_set = "set_default_device" in self.state.source and sets_default_device(self.metadata, node)
        visit = super().visit_Module(node)
        self._model_names = model_variables(self.metadata, node, self.facts)
        self._groups = self.model_groups()
        self._inline_moves: dict[cst.CSTNode, str] = {}
        self._unpack_moves: dict[cst.Assign, tuple[list[str], str]] = {}
        self._held_out = self._held_out_moves()
        return visit

    def _held_out_moves(self) -> dict[cst.Assign, tuple[str, str]]:
        """Held-out data bound before its model: ``statement -> (value name, model name)`` for
        each group that moves (decided here, since the statement may come first)."""
        moves: dict[cst.Assign, tuple[str, str]] = {}
        for statement, group in self._groups.items():
            if group.blocked or not (group.held_out or group.inline) or not self._would_move(statement):
                continue
            for held in group.held_out:
                if held.unpacked:
                    names = self._unpack_moves.setdefault(held.statement, ([], group.model))[0]
                    if held.name not in names:
                        names.append(held.name)
                else:
                    moves.setdefault(held.statement, (held.name, group.model))
            for expr in group.inline:
                self._inline_moves.setdefault(expr, group.model)
        return moves

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        updated = super().on_leave(original_node, updated_node)
        if original_node in self._inline_moves and isinstance(updated, cst.BaseExpression):
            device = self.device_for(original_node)
            if device is not None:
                return self.fix(original_node, updated, to_call(_parenthesized(updated), device),
                                f"data from a dataset meets model `{self._inline_moves[original_node]}`, "
                                "which moves: `.to(device)` where it is used")
        return updated

    def _would_move(self, statement: cst.Assign) -> bool:
        """What ``_place`` decides for this model, without reporting anything."""
        name = statement.targets[0].target.value  # type: ignore[attr-defined]
        findings = len(self.state.findings)
        try:
            return self._in_training_code(statement) and self._needs_move(statement, statement.value, name) \
                and self.device_for(statement) is not None
        finally:
            del self.state.findings[findings:]


    def device_for(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """No new model move in library code: a file others import builds and hands over
        models; where they run is its callers' choice (a converter's ``device`` parameter says
        where the checkpoint is read, not where every part should go)."""
        if self.devices.in_library_code(node) or self._default_device_set:
            return None  # (``torch.set_default_device``: the file's models are built on that device)
        return super().device_for(node)

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if original_node in self._held_out:
            return self._move_held_out(original_node, updated_node)
        if len(original_node.targets) == 1 and isinstance(original_node.targets[0].target,
                                                          (cst.Attribute, cst.Subscript)):
            return self._place_part(original_node, updated_node)
        if len(original_node.targets) != 1 or not isinstance(original_node.targets[0].target, cst.Name):
            return updated_node
        return self._place(original_node, updated_node, original_node.targets[0].target.value)

    def leave_AnnAssign(self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign) -> cst.AnnAssign:
        if original_node.value is None or not isinstance(original_node.target, cst.Name):
            return updated_node
        return self._place(original_node, updated_node, original_node.target.value)

    def _place(self, original, updated, name: str):
        value = original.value
        if isinstance(value, (cst.List, cst.Tuple)) and self._in_training_code(original):
            return self._place_each(original, updated, name)
        if not isinstance(value, cst.Call) or not self._in_training_code(original):
            return updated
        if not self._needs_move(original, value, name):
            return updated
        device = self.device_for(original)
        if device is None:
            return updated
        group = self._groups.get(original)
        if group is not None and group.cpu_by_design:
            return updated  # the author's own design keeps it on the CPU: nothing to report
        if group is not None and group.blocked:
            if holds_no_tensors(self.metadata, value, self.facts):
                return updated  # a module with no parameter or buffer: nothing of it needs a device
            self.report(original, f"model `{name}` and its data stay where they are: {group.why()}; "
                                  "move them together by hand")
            return updated
        moved = to_call(updated.value, device)
        message = (f"loss `{name}` keeps its weight tensor on the CPU: `.to(device)` moves it"
                   if loss_weight_argument(self.metadata, value) is not None
                   else f"model `{name}` goes to the device where it is built (`.to(device)`), before any use")
        return self.fix(original, updated, updated.with_changes(value=moved), message)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine):
        """``x, y = make_batch()`` fed to a model that moves: a line after it moves them."""
        statement = original_node.body[0] if len(original_node.body) == 1 else None
        if statement not in self._unpack_moves:
            return updated_node
        device = self.device_for(statement)
        if device is None:
            return updated_node
        names, model = self._unpack_moves[statement]  # type: ignore[index]
        targets = cst.Tuple([cst.Element(cst.Name(n)) for n in names], lpar=[], rpar=[]) if len(names) > 1 \
            else cst.Name(names[0])
        values = cst.Tuple([cst.Element(to_call(cst.Name(n), device)) for n in names], lpar=[], rpar=[]) \
            if len(names) > 1 else to_call(cst.Name(names[0]), device)
        move = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(targets)], values)])
        listed = ", ".join(f"`{n}`" for n in names)
        return self.fix(statement, updated_node, cst.FlattenSentinel([updated_node, move]),
                        f"{listed} meet model `{model}`, which moves: `.to(device)` right after they are made")

    def _move_held_out(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        """``test_x = test_data.data[:100].float() / 255`` fed to a model that moves: it moves too."""
        device = self.device_for(original)
        if device is None:
            return updated
        value, model = self._held_out[original]
        moved = to_call(_parenthesized(updated.value), device)
        return self.fix(original, updated, updated.with_changes(value=moved),
                        f"`{value}` is fed to (or compared with) model `{model}`, which moves: "
                        "`.to(device)` where it is made")

    def _place_each(self, original, updated, name: str):
        """``nets = [Net(4), Net(16)]``: every model of the list moves, as one would alone."""
        elements = original.value.elements
        if not elements or not all(isinstance(e.value, cst.Call) and builds_model(self.metadata, e.value, self.facts)
                                   and not places_itself(e.value) for e in elements):
            return updated
        if self._moved_in_a_loop(original, name):
            return updated
        device = self.device_for(original)
        if device is None:
            return updated
        moved = [e.with_changes(value=to_call(e.value, device)) for e in updated.value.elements]
        return self.fix(original, updated, updated.with_changes(value=updated.value.with_changes(elements=moved)),
                        f"the models in `{name}` are never moved: `.to(device)` on each where it is built")

    def _moved_in_a_loop(self, assign, name: str) -> bool:
        """``for m in nets: m.to(device)`` / ``[m.cuda() for m in nets]``: the author moves them."""
        for node in nodes_of(self.tree, cst.For, cst.CompFor):
            if isinstance(node.iter, cst.Name) \
                    and node.iter.value == name:
                scope = node.body if isinstance(node, cst.For) else self.metadata[ParentNodeProvider].get(node)
                if any(isinstance(n, cst.Attribute) and n.attr.value in ("to", "cuda") for n in walk(scope)):
                    return True
        return False

    # -- what the assignment builds ------------------------------------------------------------
    def _needs_move(self, assign, call: cst.Call, name: str) -> bool:
        wrapper = wrapper_kind(self.metadata, call)
        if wrapper == "dp":
            return self._wrapper_needs_move(assign, call, name)
        if wrapper == "ddp":
            inner = positional(call)[0].value if positional(call) else None
            if isinstance(inner, cst.Call) and builds_model(self.metadata, inner, self.facts) \
                    and not places_itself(inner):
                self.report(assign, _DDP_MESSAGE.format(name=name))
            return False
        if builds_model(self.metadata, call, self.facts):
            return self._model_needs_move(assign, call, name)
        weight = loss_weight_argument(self.metadata, call)
        if weight is not None:
            return not places_itself(call) and not self._placed_tensor(weight.value) \
                and not self._moved(assign, name)
        return False

    def _model_needs_move(self, assign, call: cst.Call, name: str) -> bool:
        if holds_no_tensors(self.metadata, call):
            return False  # ``nn.Softmax(dim=0)``: nothing to move
        if places_itself(call) or self._moved(assign, name) or self._only_a_template(assign) \
                or self._never_runs(assign) or self._may_be_none(assign) or self._rebuilt_later(assign, name) \
                or self._built_for_the_caller(assign):
            return False
        if self._changed_later(assign, name):
            if self.device_for(assign) is None:
                return False  # no device here (library code, say): devmod moves nothing, so there is nothing to ask
            self.report(assign, f"model `{name}` gets new parts after it is built "
                                f"(`{name}.<attr> = ...`, `{name}.add_module(...)`): "
                                f"move it with `{name}.to(device)` after the last change")
            return False
        for wrap_assign, kind in self._wrappers_of(assign, name):
            if kind == "ddp":
                self.report(assign, _DDP_MESSAGE.format(name=name))
                return False
            if self._same_block(assign, wrap_assign):
                return False  # the wrapper is moved instead, once (or DM404 reports its device_ids)
            if _chosen_gpus(wrap_assign.value):
                if self._told_its_gpus(assign, name, wrap_assign.value):
                    return False  # it places itself on the first of them
                self.report(assign, f"model `{name}` is wrapped in nn.DataParallel with its own `device_ids`: "
                                    "move it to the first of them before wrapping")
                return False
        return True

    def _told_its_gpus(self, assign, name: str, wrapper: cst.BaseExpression) -> bool:
        """``model.initialize(gpu_ids)`` before ``DataParallel(model, device_ids=gpu_ids)``
        (pix2pixHD), or ``Net(..., gpu_ids)`` where it is built: the model was handed the same GPU
        list and places itself on it."""
        ids = _device_ids(wrapper)
        if not isinstance(ids, cst.Name):
            return False
        value = assign.value if isinstance(assign, cst.Assign) else None
        if isinstance(value, cst.Call):
            # ``Trainer(config, device_ids)``, or ``device_ids = config['gpu_ids']`` and ``Trainer(config)``:
            # built with the same GPU list, or with the settings it is read from (generative-inpainting)
            sources = {ids.value} | {dotted(bound.value.value) for bound in self._assignments(assign, ids.value)
                                     if isinstance(bound.value, (cst.Subscript, cst.Attribute))}
            if any(isinstance(a.value, cst.Name) and a.value.value in sources for a in value.args):
                return True
        parents = self.metadata[ParentNodeProvider]
        for use in self._references(assign, name):
            method = parents.get(use)
            call = parents.get(method)
            if isinstance(method, cst.Attribute) and method.value is use and isinstance(call, cst.Call) \
                    and call.func is method and any(isinstance(a.value, cst.Name) and a.value.value == ids.value
                                                    for a in call.args):
                return True
        return False

    def _rebuilt_later(self, assign, name: str) -> bool:
        """``model = load_tf_weights(model, path)`` after it is built (pytorch-pretrained-BigGAN):
        a function of the file that takes the model and gives it back may replace its weights
        with new CPU tensors, so a move where it is built would not hold."""
        return any(later is not assign and passes_itself(self.metadata, later.value, name)
                   and self.position(later)[0] > self.position(assign)[0]
                   for later in self._assignments(assign, name))

    def _may_be_none(self, assign) -> bool:
        """``model = load_hf(path)`` then ``if model is None: ...`` (llama2.c's export)."""
        target = assign.targets[0].target if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else None
        return isinstance(target, cst.Name) and checked_for_none(self.metadata, target)

    def _only_a_template(self, assign) -> bool:
        """``g = Generator(); state = g.state_dict()`` and nothing else: a converter fills and
        saves the state; the model never runs, and moving it would save CUDA tensors."""
        target = assign.targets[0].target if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else None
        if not isinstance(target, cst.Name):
            return False
        parents = self.metadata[ParentNodeProvider]
        uses = uses_of_binding(self.metadata, target)

        def saved(use: cst.Name) -> bool:  # ``torch.save(model, path)``, ``print(model)``
            arg = parents.get(use)
            call = parents.get(arg) if isinstance(arg, cst.Arg) and arg.value is use else None
            return isinstance(call, cst.Call) and (
                "torch.save" in qualified_names(self.metadata, call.func)
                or isinstance(call.func, cst.Name) and call.func.value == "print")
        def only_read(use: cst.Name) -> bool:  # ``model.state_dict()``, ``for p in model.parameters(): print(p)``
            attribute = parents.get(use)
            call = parents.get(attribute) if isinstance(attribute, cst.Attribute) and attribute.value is use else None
            if not (isinstance(call, cst.Call) and call.func is attribute and attribute.attr.value in _READ_ONLY):
                return False
            # weights handed to something (``SGD(model.parameters())``) are for a model that runs
            return attribute.attr.value in ("state_dict", "load_state_dict") or isinstance(
                parents.get(call), (cst.For, cst.CompFor))
        return bool(uses) and all(saved(use) or only_read(use) for use in uses)

    def _built_for_the_caller(self, assign) -> bool:
        """``def mobilenet_v2(pretrained=True): model = MobileNetV2(); model.load_state_dict(...);
        return model``: a factory builds the model and returns it without running it. That is
        construction, also when the file's main block calls it: the caller places the model
        (``net = mobilenet_v2().to(device)``), and a caller that keeps it on the CPU keeps working."""
        target = assign.targets[0].target if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else None
        if not isinstance(target, cst.Name) or not any(isinstance(a, cst.FunctionDef)
                                                       for a in ancestors(self.metadata, assign)):
            return False
        parents = self.metadata[ParentNodeProvider]
        returned = False
        for use in uses_of_binding(self.metadata, target):
            parent = parents.get(use)
            if isinstance(parent, cst.Return):
                returned = True
                continue
            call = parents.get(parent) if isinstance(parent, cst.Attribute) and parent.value is use else None
            if isinstance(parent, cst.Attribute) and parent.value is use and not isinstance(call, cst.Call) \
                    and parent.attr.value not in ("to", "cuda", "forward"):
                continue  # ``model.avgpool = ...``, ``model._modules.get(n).register_forward_hook(f)``: built up
            helper = parents.get(parent) if isinstance(parent, cst.Arg) else None
            if isinstance(helper, cst.Call) and len(helper.args) == 1 and helper.args[0] is parent \
                    and not _moves_by_name(helper):
                continue  # ``recursion_change_bn(model)``: a helper given the model alone reworks it
            if not (isinstance(call, cst.Call) and call.func is parent and parent.attr.value in MODULE_API
                    and parent.attr.value not in ("to", "cuda")):
                return False  # run, handed on, moved by its author: not only built here
        return returned

    def _never_runs(self, assign) -> bool:
        """A model only read for its sizes and weights, given new parts, or itself put into
        another model as a part (``donor.classifier[-1] = fc``): it never runs on data, so
        nothing of it needs the device (the model it became part of moves it, if that moves)."""
        target = assign.targets[0].target if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else None
        if not isinstance(target, cst.Name):
            return False
        parents = self.metadata[ParentNodeProvider]
        donated = False  # its weights or itself go somewhere: a donor, not a model still being set up
        for use in uses_of_binding(self.metadata, target):
            parent = parents.get(use)
            if isinstance(parent, cst.Assign) and parent.value is use and len(parent.targets) == 1 \
                    and isinstance(parent.targets[0].target, (cst.Attribute, cst.Subscript)):
                donated = True  # ``donor.classifier[-1] = fc``: a part of another model
                continue
            if self._built_into_a_model(use):
                donated = True  # ``Pair(enc, head)``, ``nn.Sequential(*list(trunk.children())[:2])``
                continue
            if handed_to_run_nothing(self.metadata, use) or not may_run(self.metadata, use) \
                    and isinstance(parent, cst.Arg):
                donated = True  # ``fill_from(item, layer)`` copying weights, ``seq.add_module(n, layer)``
                continue
            node = use
            while isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is node:
                node, parent = parent, parents.get(parent)
            printed = parents.get(parent) if isinstance(parent, cst.Arg) else None
            if isinstance(printed, cst.Call) and isinstance(printed.func, cst.Name) and printed.func.value == "print":
                continue  # ``print(donor)``: shows its layers, runs nothing
            if node is use:
                return False  # called, handed to a call, returned, ...: it may run
            if isinstance(parent, cst.Call) and parent.func is node:
                if isinstance(node, cst.Attribute) and node.attr.value == "load_state_dict":
                    continue  # ``net[0].load_state_dict(...)``: weights come in, nothing runs (a converter)
                if isinstance(node, cst.Attribute) and node.value is use and node.attr.value in _WEIGHT_LISTS:
                    continue  # ``net.named_parameters()`` read for names and shapes (timm's converters)
                if isinstance(node, cst.Attribute) and node.value is use and node.attr.value in _PART_LISTS:
                    donated = True  # ``net.children()``: its layers run, or not, where they are taken
                    continue
                if not (isinstance(node, cst.Attribute) and node.attr.value == "state_dict"):
                    return False  # ``donor.features(x)``, ``donor.eval()``: its parts may run
                donated = True
        return donated

    def _built_into_a_model(self, use: cst.Name) -> bool:
        """``use`` (a model) or its layers (``use.children()``) are handed to the constructor of
        another model: they become its parts, and move when it moves."""
        parents = self.metadata[ParentNodeProvider]
        node: cst.CSTNode = use
        parent = parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _PART_LISTS:
            node = parents.get(parent)  # ``trunk.children()``
            if not (isinstance(node, cst.Call) and node.func is parent):
                return False
            while isinstance(parents.get(node), (cst.Subscript, cst.Arg, cst.Call, cst.Index, cst.SubscriptElement)) \
                    and not self._model_call(parents.get(parents.get(node))):
                node = parents.get(node)  # through ``list(...)[:2]``
            parent = parents.get(node)
        call = parents.get(parent) if isinstance(parent, cst.Arg) else None
        return self._model_call(call)

    def _model_call(self, call: cst.CSTNode | None) -> bool:
        """``Pair(...)``, ``nn.Sequential(...)``, and ``parts.Pair(...)`` of a project module; not a
        ``DataParallel`` wrapper, which needs its model placed first (DM404)."""
        if not isinstance(call, cst.Call) or qualified_names(self.metadata, call.func) & _WRAPPERS:
            return False
        return builds_model(self.metadata, call, self.facts) or dotted(call.func) in self.facts.model_classes

    def _changed_later(self, assign, name: str) -> bool:
        target = assign.targets[0].target if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else None
        uses = uses_of_binding(self.metadata, target) if isinstance(target, cst.Name) \
            else self._references(assign, name)  # only this binding: ``net`` may be rebound to another model
        return gets_parts_later(self.metadata, self.facts, uses)

    def _place_part(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        """``model.fc = nn.Linear(...)`` on a model devmod moves: the new layer moves too."""
        target = original.targets[0].target
        root = target
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        value = original.value
        if not (isinstance(root, cst.Name) and root.value in self._model_names and isinstance(value, cst.Call)
                and builds_model(self.metadata, value, self.facts) and not places_itself(value)
                and self._in_training_code(original)) or self._root_never_runs(root) \
                or self._author_moves_part(original, target) or holds_no_tensors(self.metadata, value, self.facts) \
                or self._built_for_a_caller(original, root.value):
            return updated
        device = self.device_for(original)
        if device is None:
            return updated
        moved = to_call(updated.value, device)
        return self.fix(original, updated, updated.with_changes(value=moved),
                        f"a new part of model `{root.value}` is built on the CPU: `.to(device)` where it is assigned")

    def _built_for_a_caller(self, assign: cst.Assign, name: str) -> bool:
        """``model.avgpool = nn.AvgPool2d(...)`` in ``load_model()`` that ends ``return model``
        (places365): construction, where nothing is placed; the caller moves the whole model."""
        function = next((a for a in ancestors(self.metadata, assign) if isinstance(a, cst.FunctionDef)), None)
        return function is not None and any(isinstance(n, cst.Return) and isinstance(n.value, cst.Name)
                                            and n.value.value == name for n in walk(function.body))

    def _author_moves_part(self, assign: cst.Assign, target: cst.BaseExpression) -> bool:
        """``net[2] = nn.Linear(...)`` then ``if use_gpu: net[2] = net[2].cuda()``: the author places
        the new part (behind a switch); a ``.to(device)`` where it is built would ignore the switch."""
        wanted = code_of(target)
        scope = next((a for a in ancestors(self.metadata, assign) if isinstance(a, cst.FunctionDef)), self.tree)
        return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("to", "cuda")
                   and code_of(n.func.value) == wanted for n in walk(scope))

    def _root_never_runs(self, root: cst.Name) -> bool:
        """The model given a new part is one that never runs (``_never_runs``): it is not
        moved, so neither is its new part."""
        bindings = scope_bindings(self.metadata[ScopeProvider].get(root), root.value)
        parents = self.metadata[ParentNodeProvider]
        assigns = [parents.get(parents.get(b.node)) for b in bindings if isinstance(b.node, cst.Name)]
        return len(assigns) == 1 and isinstance(assigns[0], cst.Assign) and self._never_runs(assigns[0])

    def _wrapper_needs_move(self, assign, call: cst.Call, name: str) -> bool:
        """``nn.DataParallel(...)``: move the wrapper when the model it wraps is built unmoved
        in the same block (otherwise the model itself is moved where it is built)."""
        args = positional(call)
        if not args or self._moved(assign, name) or _chosen_gpus(call):
            return False  # ``device_ids=[1, 2]``: the shared device is not the first of them (DM404)
        inner = args[0].value
        if isinstance(inner, cst.Call):
            return builds_model(self.metadata, inner, self.facts) and not places_itself(inner)
        if not isinstance(inner, cst.Name) or (inner.value != name and self._moved(assign, inner.value)):
            return False
        for built in self._assignments(assign, inner.value):
            if built is assign or not isinstance(built.value, cst.Call):
                continue
            if builds_model(self.metadata, built.value, self.facts) and not places_itself(built.value):
                return self._same_block(assign, built)
        return False

    def _placed_tensor(self, expr: cst.BaseExpression) -> bool:
        """A weight tensor already on a device: ``w.to(device)``, ``torch.tensor(..., device=d)``,
        or a name assigned once from such an expression."""
        if isinstance(expr, cst.Name):
            scope = self.metadata[ScopeProvider].get(expr)
            assignments = scope_bindings(scope, expr.value)
            if len(assignments) == 1:
                statement = self._assign_of(assignments[0].node)
                if statement is not None:
                    expr = statement.value
        return any(isinstance(n, cst.Call) and (method_call(n, *_MOVES) or keyword(n, "device") is not None)
                   for n in walk(expr))

    # -- where the name goes afterwards ----------------------------------------------------------
    def _references(self, node: cst.CSTNode, name: str) -> list[cst.CSTNode]:
        """Every use of ``name`` (in this scope and in functions that read it as a global)."""
        scope = self.metadata[ScopeProvider].get(node)
        if scope is None:
            return []
        return [access.node for assignment in scope[name] for access in getattr(assignment, "references", ())]

    def _moved(self, node: cst.CSTNode, name: str) -> bool:
        parents = self.metadata[ParentNodeProvider]
        for use in self._references(node, name):
            parent = parents.get(use)
            if moved_by_chain(parents, use) or moved_by_a_helper(parents, use):  # ``net.to(device)``, ``to_device(device, net)``
                return True
            if isinstance(parent, cst.Arg):
                call = parents.get(parent)
                if isinstance(call, cst.Call) and method_call(call, *_PREPARES):
                    return True
        return False

    def _wrappers_of(self, node: cst.CSTNode, name: str):
        """``other = nn.DataParallel(name)`` assignments, with their kind ("dp" / "ddp")."""
        parents = self.metadata[ParentNodeProvider]
        for use in self._references(node, name):
            arg = parents.get(use)
            call = parents.get(arg) if isinstance(arg, cst.Arg) else None
            if not isinstance(call, cst.Call) or not positional(call) or positional(call)[0] is not arg:
                continue
            kind = wrapper_kind(self.metadata, call)
            top = call  # ``nn.DataParallel(model).to(device)``: the statement is above the chain
            while isinstance(parents.get(top), cst.Attribute) and isinstance(parents.get(parents.get(top)), cst.Call):
                top = parents.get(parents.get(top))
            statement = parents.get(top)
            if kind and isinstance(statement, (cst.Assign, cst.AnnAssign)):
                yield statement, kind

    def _assignments(self, node: cst.CSTNode, name: str) -> list[cst.Assign]:
        scope = self.metadata[ScopeProvider].get(node)
        found = [self._assign_of(a.node) for a in scope_bindings(scope, name)]
        return [a for a in found if a is not None]

    def _assign_of(self, target: cst.CSTNode) -> cst.Assign | None:
        parents = self.metadata[ParentNodeProvider]
        parent = parents.get(target) if isinstance(target, cst.Name) else None
        assign = parents.get(parent) if isinstance(parent, cst.AssignTarget) else None
        return assign if isinstance(assign, cst.Assign) else None

    def _same_block(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        parents = self.metadata[ParentNodeProvider]
        return parents.get(parents.get(a)) is parents.get(parents.get(b))

    def _in_training_code(self, node: cst.CSTNode) -> bool:
        """Module level, a main block or a plain function; not a class body or any method."""
        if self.devices.place(node).kind not in (ScopeKind.MODULE, ScopeKind.FUNCTION):
            return False
        for parent in ancestors(self.metadata, node):
            if isinstance(parent, cst.FunctionDef):
                return True
            if isinstance(parent, cst.ClassDef):
                return False  # a class attribute, evaluated at import time
        return True

    VALID = [
        # already moved: chained, later in place, in a guard, by the constructor, by Accelerate
        Valid('import torch\nimport torch.nn as nn\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "model = nn.Linear(4, 2).to(device)\n"),
        Valid('import torch\nimport torch.nn as nn\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "model = nn.Linear(4, 2)\nmodel.to(device)\n"),
        Valid("import torch\nfrom torch import nn\n\ndef main(device):\n    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())\n"
              "    if torch.cuda.is_available():\n        model.to(device)\n    return model\n"),
        Valid("import torch\nimport torch.nn as nn\n\ndef build(device):\n    layer = nn.Linear(3, 4, device=device)\n"
              "    return layer\n"),
        Valid("import torch\nfrom accelerate import Accelerator\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
              "accelerator = Accelerator()\nmodel = AutoModelForCausalLM.from_pretrained('gpt2')\n"
              "tokenizer = AutoTokenizer.from_pretrained('gpt2')\nmodel = accelerator.prepare(model)\n"),
        Valid("import torch\nfrom transformers import AutoModelForCausalLM\n"
              "model = AutoModelForCausalLM.from_pretrained('big', device_map='auto', load_in_8bit=True)\n"),
        # sub-modules in a model, a Trainer's attributes, class bodies, plain losses
        Valid("import torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.fc = nn.Linear(4, 2)\n        head = nn.Linear(2, 2)\n        self.head = head\n"),
        Valid("import torch.nn as nn\n\nclass Trainer:\n    default = nn.Linear(2, 2)\n\n    def __init__(self):\n"
              "        self.model = nn.Linear(4, 2)\n        backup = nn.Linear(4, 2)\n"),
        Valid("import torch.nn as nn\ncriterion = nn.CrossEntropyLoss()\nbce = nn.BCEWithLogitsLoss(reduction='sum')\n"),
        # wrapped after moving: leave both
        Valid('import torch\nimport torch.nn as nn\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "model = nn.Linear(4, 2).to(device)\nmodel = nn.DataParallel(model)\n"),
    ]
    INVALID = [
        # module-level script: moved before the optimizer takes its parameters
        Invalid(
            "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2)\n\n    def forward(self, x):\n        return self.fc(x)\n\n"
            "model = Net()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
            "import torch\nimport torch.nn as nn\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2)\n\n    def forward(self, x):\n        return self.fc(x)\n\n"
            "model = Net().to(device)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        ),
        # everything in main(), aliased imports, a loss with a class-weight tensor
        Invalid(
            "import torch as th\nfrom torch import nn as tnn\nimport torchvision\n\ndef main():\n"
            "    backbone = torchvision.models.resnet18(weights=None)\n    head = tnn.Linear(1000, 10)\n"
            "    criterion = tnn.CrossEntropyLoss(weight=class_weights)\n    plain = tnn.MSELoss()\n\n"
            'if __name__ == "__main__":\n    main()\n',
            "import torch as th\nfrom torch import nn as tnn\nimport torchvision\n\n"
            'device = th.device("cuda" if th.cuda.is_available() else "cpu")\n\ndef main():\n'
            "    backbone = torchvision.models.resnet18(weights=None).to(device)\n"
            "    head = tnn.Linear(1000, 10).to(device)\n"
            "    criterion = tnn.CrossEntropyLoss(weight=class_weights).to(device)\n    plain = tnn.MSELoss()\n\n"
            'if __name__ == "__main__":\n    main()\n',
        ),
        # a main block; the function's own `device` parameter; DataParallel in the same block
        Invalid(
            "import torch\nfrom torch import nn\n\ndef main(device):\n    model = nn.Linear(3, 1)\n"
            "    model = nn.DataParallel(model)\n    w = torch.tensor([1.0, 2.0])\n"
            "    loss_fn = nn.BCEWithLogitsLoss(pos_weight=w)\n    return model, loss_fn\n",
            "import torch\nfrom torch import nn\n\ndef main(device):\n    model = nn.Linear(3, 1)\n"
            "    model = nn.DataParallel(model).to(device)\n    w = torch.tensor([1.0, 2.0])\n"
            "    loss_fn = nn.BCEWithLogitsLoss(pos_weight=w).to(device)\n    return model, loss_fn\n",
        ),
        # DataParallel only on multi-GPU machines: move the model where it is built
        Invalid(
            "import torch\nimport torch.nn as nn\n\n"
            'if __name__ == "__main__":\n    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())\n'
            "    if torch.cuda.device_count() > 1:\n        net = nn.DataParallel(net)\n",
            "import torch\nimport torch.nn as nn\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            'if __name__ == "__main__":\n    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).to(device)\n'
            "    if torch.cuda.device_count() > 1:\n        net = nn.DataParallel(net)\n",
        ),
        # held-out data taken from the dataset moves with the model, bound or inline
        Invalid(
            "import torch\nimport torch.nn as nn\nfrom torch.utils.data import TensorDataset\n"
            "data = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))\nheld = data.tensors[0][8:16] / 2\n"
            "net = nn.Linear(3, 1)\nprint(net(held) - data.tensors[1][8:16])\n",
            "import torch\nimport torch.nn as nn\nfrom torch.utils.data import TensorDataset\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "data = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))\nheld = (data.tensors[0][8:16] / 2).to(device)\n"
            "net = nn.Linear(3, 1).to(device)\nprint(net(held) - data.tensors[1][8:16].to(device))\n",
        ),
        # host tensors unpacked from a tuple move on the line after, with the model
        Invalid(
            "import torch\nimport torch.nn as nn\n\nrows = [([1, 2], 0), ([2, 1], 1)]\n\n"
            'if __name__ == "__main__":\n    net = nn.Sequential(nn.Embedding(3, 2), nn.Flatten(), nn.Linear(4, 2))\n'
            "    ids, labels = map(torch.LongTensor, zip(*rows))\n    print(net(ids).argmax(1) == labels)\n",
            "import torch\nimport torch.nn as nn\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\nrows = [([1, 2], 0), ([2, 1], 1)]\n\n'
            'if __name__ == "__main__":\n    net = nn.Sequential(nn.Embedding(3, 2), nn.Flatten(), nn.Linear(4, 2)).to(device)\n'
            "    ids, labels = map(torch.LongTensor, zip(*rows))\n    ids, labels = ids.to(device), labels.to(device)\n"
            "    print(net(ids).argmax(1) == labels)\n",
        ),
        # ... but held-out data that is also plotted keeps the whole group on the CPU: report only
        Invalid(
            "import matplotlib.pyplot as plt\nimport torch\nimport torch.nn as nn\nfrom torch.utils.data import TensorDataset\n"
            "data = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))\nheld = data.tensors[0][:8]\n"
            "net = nn.Linear(3, 1)\nprint(net(held))\nplt.plot(held[:, 0])\n",
        ),
        # host data normalised with its own statistics is still host data: it moves after the last step
        Invalid(
            "import torch\nimport torch.nn as nn\n\nrows = [(k * 0.1, k * 0.2) for k in range(8)]\n"
            "net = nn.Linear(2, 1)\nxs = torch.Tensor(rows)\nxs = (xs - xs.mean(0)) / xs.std(0)\n"
            "for i in range(len(xs)):\n    print(net(xs[i]))\n",
            "import torch\nimport torch.nn as nn\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "rows = [(k * 0.1, k * 0.2) for k in range(8)]\n"
            "net = nn.Linear(2, 1).to(device)\nxs = torch.Tensor(rows)\nxs = ((xs - xs.mean(0)) / xs.std(0)).to(device)\n"
            "for i in range(len(xs)):\n    print(net(xs[i]))\n",
        ),
        # a test function defined inside the main block is driver code: its inputs move with the model
        Invalid(
            "import torch\nimport torch.nn as nn\n\ndef probe_rows(n):\n    return torch.FloatTensor([[0.5] * 4] * n)\n\n"
            'if __name__ == "__main__":\n    net = nn.Linear(4, 2)\n\n    def check(n):\n'
            "        rows = probe_rows(n)\n        return net(rows)\n\n    print(check(2))\n",
            "import torch\nimport torch.nn as nn\n\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "def probe_rows(n):\n    return torch.FloatTensor([[0.5] * 4] * n)\n\n"
            'if __name__ == "__main__":\n    net = nn.Linear(4, 2).to(device)\n\n    def check(n):\n'
            "        rows = probe_rows(n).to(device)\n        return net(rows)\n\n    print(check(2))\n",
        ),
        # ... but inputs made in a library function (a class method calls it too) cannot move:
        # the model stays with them, and the group is reported
        Invalid(
            "import numpy as np\nimport torch\nimport torch.nn as nn\n\ndef score():\n"
            "    rows = torch.from_numpy(np.ones((2, 4), dtype=np.float32))\n    return net(rows)\n\n"
            "class Probe:\n    def run(self):\n        return score()\n\n"
            'if __name__ == "__main__":\n    net = nn.Linear(4, 2)\n    print(score())\n',
        ),
        # the model's batches are custom objects devmod cannot move (a graph library's batch):
        # the model stays with them, whether the loop is here or in the function it is handed to
        Invalid(
            "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n\n"
            "def train(net, loader):\n    for graph, labels in loader:\n"
            "        loss = nn.functional.cross_entropy(net(graph.ndata[\"x\"]), labels)\n\n"
            "samples = [(torch.randn(3), k % 2) for k in range(8)]\n"
            "model = nn.Linear(3, 2)\ntrain(model, DataLoader(samples, batch_size=4, collate_fn=make_graph))\n",
        ),
        # the input comes from a library whose results devmod does not move (an image transform,
        # a tokenizer): the model stays with it; report only
        Invalid(
            "import torch.nn as nn\nfrom PIL import Image\nfrom torchvision import transforms\n\n"
            "to_tensor = transforms.ToTensor()\nnet = nn.Conv2d(3, 8, 3)\n"
            "picture = to_tensor(Image.new(\"RGB\", (8, 8))).unsqueeze(0)\nprint(net(picture).shape)\n",
        ),
        # DistributedDataParallel: the rank's device is not the shared one; report only
        Invalid(
            "import torch\nimport torch.nn as nn\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n"
            "def worker(rank):\n    model = nn.Linear(4, 2)\n    model = DDP(model, device_ids=[rank])\n",
        ),
    ]


def _parenthesized(value: cst.BaseExpression) -> cst.BaseExpression:
    """``x / 255.`` -> ``(x / 255.)``, so that ``.to(device)`` applies to the whole value."""
    if value.lpar or isinstance(value, (cst.Name, cst.Call, cst.Attribute, cst.Subscript)):
        return value
    return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _moves_by_name(call: cst.Call) -> bool:
    """``to_device(model)``, ``model_to_cuda(model)``: a helper whose name says it places things."""
    name = (dotted(call.func) or "").rsplit(".", 1)[-1].lower()
    return any(word in name for word in ("device", "cuda", "gpu", "parallel"))


def _device_ids(wrapper: cst.BaseExpression) -> cst.BaseExpression | None:
    """The ``device_ids`` of ``nn.DataParallel(model, device_ids=...)`` (also through a
    ``.to(device)`` chain on it); None when not given or ``None``."""
    while isinstance(wrapper, cst.Call) and isinstance(wrapper.func, cst.Attribute) \
            and isinstance(wrapper.func.value, cst.Call):
        wrapper = wrapper.func.value  # ``nn.DataParallel(model).to(device)``
    if not isinstance(wrapper, cst.Call):
        return None
    args = positional(wrapper)
    ids = keyword(wrapper, "device_ids") or (args[1] if len(args) > 1 else None)
    if ids is None or (isinstance(ids.value, cst.Name) and ids.value.value == "None"):
        return None
    return ids.value


def _chosen_gpus(wrapper: cst.BaseExpression) -> bool:
    """``nn.DataParallel(model, device_ids=...)`` whose first device is not surely GPU 0."""
    value = _device_ids(wrapper)
    if value is None:
        return False
    first = value.elements[0].value if isinstance(value, (cst.List, cst.Tuple)) and value.elements else None
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "range" \
            and (len(value.args) == 1 or len(value.args) > 1 and isinstance(value.args[0].value, cst.Integer)):
        first = value.args[0].value if len(value.args) > 1 else cst.Integer("0")  # ``range(ngpu)`` starts at 0
    return not (isinstance(first, cst.Integer) and first.value == "0")


_DDP_MESSAGE = ("model `{name}` is wrapped in DistributedDataParallel but never moved: move it to this "
                "process's GPU (`torch.device('cuda', local_rank)`) before wrapping")
