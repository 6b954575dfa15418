"""A model's group: the values that must sit on the model's device for the code to run.

When devmod moves a model, its inputs and the tensors combined with its outputs must move
too, or a call that worked on the CPU fails ("Expected all tensors to be on the same
device"). Batches from a DataLoader (DM203) and factory tensors (DM201) are placed by their
own rules. What no other rule places is *held-out data*: tensors taken from a dataset's
storage (``test_x = test_data.data[:2000].float() / 255``), a ``.type(torch.FloatTensor)``
cast, ``torch.from_numpy`` or a project helper that returns host data, bound to a name and
then fed to the model or compared with its output.

A value made by a library whose results devmod does not move (an image transform, a
tokenizer, an audio loader) and fed to the model holds the group back too.

Each such value either moves with the model (``.to(device)`` where it is bound), when every
use of it is fine on the device, or, when some use needs it on the CPU, the whole group
stays where it is and is reported, with the line of each use that holds it back. Groups
that share a held-out value stand or fall together.

Syntax only, through libcst's scope analysis; "don't know" never moves anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from .devices import DEVICE_LIKE_NAMES, construction_methods, hands_a_device
from .loops import batch_plan, find_loader, moved_in, packs_sequences
from .pinned import pinned_to_cpu
from .names import dotted, method_call, qualified_names
from .roles import HOST_MAKERS, MODULE_API, builds_model, factory_name, is_loss_callee, is_model_callee, \
    holds_no_tensors, model_variables, wrapper_kind
from .scopes import ClassFacts, only_assigned_value, only_binding, scope_bindings
from .tensors import IN_PLACE_FILLS, flows_only_to_cpu, is_number, torch_data_function, uses_of_binding
from .modules import builds_parts_when_run
from .runs import runs_a_parameter
from .tree import ancestors, code_of, in_source_order, line_of, nodes_of, walk

# Attributes of a dataset object that hold its whole storage as tensors.
_DATASET_STORAGE = frozenset({"data", "targets", "tensors", "train_data", "train_labels", "test_data",
                              "test_labels"})
# Functions whose result lives where their one argument does.
_SAME_DEVICE_WRAPPERS = frozenset({"Variable", "autograd.Variable", "torch.autograd.Variable", "deepcopy",
                                   "copy.deepcopy"})
# Names of the project helpers that move what they are handed (``to_device(device, net)``).
_MOVER_NAME = re.compile(r"^to_|device|move|send|cuda|gpu", re.IGNORECASE)
# Methods that keep a tensor a tensor on the same device (climbed through in both directions).
_SAME_DEVICE_METHODS = frozenset({"float", "double", "half", "long", "int", "bool", "byte", "detach", "clone",
                                  "view", "reshape", "unsqueeze", "squeeze", "permute", "t", "contiguous",
                                  "flatten", "argmax", "argmin", "max", "min", "sum", "mean", "softmax",
                                  "log_softmax", "sigmoid", "exp", "log", "abs", "type_as", "expand",
                                  "expand_as", "transpose", "narrow", "split", "chunk", "eq", "ne", "gt", "lt",
                                  "std", "var", "norm", "prod", "cumsum", "pow", "sqrt", "clamp", "round",
                                  "floor", "ceil", "neg", "square",
                                  # in-place fills return the tensor itself (``torch.LongTensor(3, 4).random_(0, 50)``)
                                  *IN_PLACE_FILLS})
# Reads that are fine on any device: the data leaves for the CPU or only metadata is read.
_LEAVES = frozenset({"cpu", "item", "tolist", "size", "dim", "numel", "shape", "dtype", "device", "ndim",
                     "is_cuda"})
_HARMLESS_CALLS = frozenset({"print", "len", "str", "repr", "format", "float", "int", "round"})
_MAX_DEPTH = 3  # assignments followed from a model's output
_MOVES = frozenset({"to", "cuda", "to_empty"})
# Libraries whose results are CPU data (tensors, encodings, images) that devmod does not move:
# a model fed one directly stays with it.
# Methods that add a sub-module after construction (``nn.Module.add_module``, ``nn.ModuleList.append``).
_ADDS_PARTS = frozenset({"add_module", "register_module", "append", "extend", "insert"})
# Module methods that return the module itself, so a move can follow them in one chain.
_CHAINED = frozenset({"eval", "train", "float", "double", "half", "bfloat16", "requires_grad_", "share_memory"})
# Tensor methods that compute with their tensor argument: it must be on the output's device.
_COMBINING_METHODS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "add", "add_", "sub", "sub_", "mul", "mul_",
                                "div", "div_", "matmul", "mm", "bmm", "dot", "pow", "maximum", "minimum", "equal"})
# A part's tensors: writing into them changes no part.
_TENSORS_OF_A_PART = frozenset({"data", "weight", "bias", "grad"})
_CPU_DATA_LIBRARIES = ("torchvision.transforms", "torchvision.io", "torchaudio", "PIL", "transformers",
                       "tokenizers", "cv2", "librosa", "skimage", "imageio", "datasets", "dgl", "torch_geometric",
                       "torchfile", "torch.utils.serialization")
# NumPy calls that make an array (not a scalar such as ``np.sqrt(2)``): a model handed one makes
# its own CPU tensor of it.
_NUMPY_ARRAYS = frozenset(f"numpy.{n}" for n in ("array", "asarray", "load", "zeros", "ones", "empty", "full",
                                                  "stack", "concatenate", "vstack", "hstack", "arange"))


@dataclass
class HeldOut:
    """A held-out tensor bound to ``name`` at ``statement``; ``blockers`` are the lines of the
    uses that need it on the CPU (empty: it can move with its group)."""

    name: str
    statement: cst.Assign
    line: int
    blockers: list[int] = field(default_factory=list)
    unpacked: bool = False  # ``x, y = make_batch()``: moved by a line after the statement
    unplaceable: bool = False  # made where devmod places nothing (library code): it cannot move


@dataclass
class Group:
    """The model bound at ``statement`` and the held-out values it meets."""

    model: str
    statement: cst.Assign
    held_out: list[HeldOut] = field(default_factory=list)
    inline: list[cst.BaseExpression] = field(default_factory=list)  # ``net(ds.data[:8])``: moved in place
    placed: bool = False  # the author moves the model (``.to``, ``.cuda()``, ``device=``)
    blocked: bool = False
    stuck_batches: list[str] = field(default_factory=list)  # loops whose batch devmod cannot move
    foreign: list[str] = field(default_factory=list)  # inputs made by a library devmod does not move
    unplaceable_inline: list[int] = field(default_factory=list)  # lines of inline inputs in library code
    parts_later: bool = False  # ``net.add_module(...)`` after it is built: DM202 reports it, nothing moves
    cpu_by_design: bool = False  # its class computes on the CPU (a ``.cuda() ... .cpu()`` round trip): stays, unreported

    def why(self) -> str:
        """Which values hold the group back, for the report."""
        parts = [*self.foreign, *self.stuck_batches]
        parts += [f"the input at line {line} is in code where devmod adds no device"
                  for line in sorted(set(self.unplaceable_inline))]
        for h in sorted(self.held_out, key=lambda h: h.line):
            if h.unplaceable:
                parts.append(f"`{h.name}` (line {h.line}) is made in library code, where devmod adds no device")
            elif h.blockers:
                parts.append(f"devmod cannot tell whether `{h.name}` (line {h.line}) may move to the device: it is "
                             f"also used at line {', '.join(str(b) for b in sorted(set(h.blockers)))}")
        if not parts:
            parts = ["it shares its data or its parts with a model whose group stays"]
        return "; ".join(parts)


def model_groups(metadata: Mapping, module: cst.Module, facts: ClassFacts, helpers: frozenset[str],
                 numpy_fixed: bool, placeable: Callable[[cst.CSTNode], bool] = lambda node: True,
                 device_names: frozenset[str] = frozenset(),
                 loops: frozenset[str] = frozenset(),
                 cpu_resident: frozenset[str] = frozenset(),
                 self_placing: frozenset[str] = frozenset(),
                 list_collators: frozenset[str] = frozenset(),
                 host_methods: frozenset[str] = frozenset(),
                 unplaceable_methods: frozenset[tuple[str, str, str]] = frozenset(),
                 param_movers: frozenset[tuple[str, int, str]] = frozenset(),
                 in_library: Callable[[cst.CSTNode], bool] = lambda node: True) -> dict[cst.Assign, Group]:
    """Every model bound by an assignment in ``module``, with the held-out data it meets.

    ``helpers``: the project's functions that return host tensors. ``numpy_fixed``: DM303 is
    on, so a ``.numpy()`` of a moved value gets ``.cpu()`` and stays fine. ``placeable``: may
    a fix add a placement at this statement (driver code)? A value that cannot move holds
    its group back, and so does a loop over a loader whose batch DM203 cannot move
    (``device_names``: the names that already place a batch there)."""
    finder = _GroupFinder(metadata, helpers, numpy_fixed)
    finder.host_methods = host_methods  # ``net.init_hidden()`` of a model class in another file
    finder.facts = facts
    finder.loops = loops  # the project's training loops in other files (``d2l.train_ch3``)
    finder.tuple_helpers = finder.tuple_helpers_of(module)
    finder.packs = packs_sequences(metadata, module)
    groups: dict[cst.Assign, Group] = {}
    for node in nodes_of(module, cst.Assign):
        if not (len(node.targets) == 1
                and isinstance(node.targets[0].target, cst.Name) and isinstance(node.value, cst.Call)):
            continue
        call = node.value
        while isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call):
            call = call.func.value  # ``Net().to(device)``
        if builds_model(metadata, call, facts) and not holds_no_tensors(metadata, call) \
                or wrapper_kind(metadata, call):  # (``nn.Softmax(dim=0)`` runs on any device: no group)
            groups[node] = None  # type: ignore[assignment]
    finder.model_names = {s.targets[0].target.value for s in groups}  # type: ignore[attr-defined]
    for statement in groups:
        groups[statement] = finder.group(statement)
        built = statement.value
        while isinstance(built.func, cst.Attribute) and isinstance(built.func.value, cst.Call):
            built = built.func.value
        groups[statement].cpu_by_design |= dotted(built.func) in cpu_resident or _moves_itself(facts, built, self_placing) \
            or _placed_by_its_factory(metadata, built)
        if pinned_to_cpu(metadata, statement.targets[0].target) or _built_on_the_cpu(metadata, built):
            # ``model.to("cpu")  # on purpose``, ``Extractor(torch.device("cpu"), 4)``: the author's CPU
            groups[statement].cpu_by_design, groups[statement].placed = True, False  # placed on the CPU
        unplaced = _unplaceable_inside(metadata, facts, built, placeable) \
            or _tensors_kept_by_a_plain_object(metadata, facts, built) \
            or _unplaceable_imported(metadata, statement.targets[0].target, built, unplaceable_methods)
        if unplaced is not None:
            groups[statement].foreign.append(unplaced)
        for held in groups[statement].held_out:
            held.unplaceable = not placeable(held.statement)
        # an input moved where it is used needs a device there too, or the model moves alone
        groups[statement].unplaceable_inline = [line_of(metadata, e) for e in groups[statement].inline
                                                if not placeable(e)]
    _stuck_batches(metadata, module, facts, groups, device_names, finder.packs, placeable, list_collators,
                   in_library, param_movers)
    _block_together(groups, _parts(metadata, groups) + _outputs_passed_on(metadata, module, groups))
    return groups


def _unplaceable_inside(metadata: Mapping, facts: ClassFacts, built: cst.Call,
                        placeable: Callable[[cst.CSTNode], bool]) -> str | None:
    """Why a model of the file's own class cannot move: a method that runs after construction makes
    a CPU tensor where devmod has no device to give it (graphsage's aggregator, whose ``forward``
    takes a list of ids: ``torch.zeros(...)`` and ``torch.LongTensor(ids)`` there would stay behind)."""
    klass = facts.classes.get(built.func.value) if isinstance(built.func, cst.Name) else None
    if klass is None or built.func.value not in facts.model_classes:
        return None
    building = construction_methods(klass)
    for method in klass.body.body:
        if not isinstance(method, cst.FunctionDef) or method.name.value in building:
            continue
        calls = list(nodes_of(method, cst.Call))
        moved = {id(x) for n in calls if isinstance(n.func, cst.Attribute) and n.func.attr.value in _MOVES
                 for x in walk(n.func.value)}  # everything under a ``.to(...)`` / ``.cuda()`` receiver
        for call in calls:
            if not (factory_name(metadata, call) or qualified_names(metadata, call.func) & HOST_MAKERS):
                continue
            if any(a.keyword and a.keyword.value in ("device", "out") for a in call.args) or id(call) in moved:
                continue  # placed by its author
            if flows_only_to_cpu(metadata, call) or placeable(call):
                continue
            return (f"its class `{built.func.value}` makes a tensor at line {line_of(metadata, call)} "
                    "that devmod has no device for (its method takes no tensor to follow)")
    return None


def _tensors_kept_by_a_plain_object(metadata: Mapping, facts: ClassFacts, built: cst.Call) -> str | None:
    """Why a model of the file's own class cannot move: it keeps an object of a plain class of the
    file (``self.pruner = Pruner(layers)``) whose construction makes tensors (``self.masks +=
    [torch.ones_like(W)]``, also through further plain objects it keeps), and a method that runs
    later uses that object. ``model.to()`` moves parameters and buffers, not such an object's
    tensors (WaveRNN's pruning notebook)."""
    klass = facts.classes.get(built.func.value) if isinstance(built.func, cst.Name) else None
    if klass is None or built.func.value not in facts.model_classes:
        return None
    building = construction_methods(klass)
    kept: dict[str, tuple[str, int]] = {}  # attribute -> (plain class, line of its tensor)
    for target, value in _self_stores(klass):
        for call in nodes_of(value, cst.Call):
            name = call.func.value if isinstance(call.func, cst.Name) else None
            if name in facts.classes and name not in facts.model_classes:
                line = _tensor_made_at_construction(metadata, facts, facts.classes[name], 0)
                if line is not None:
                    kept[target] = (name, line)
    for method in klass.body.body:
        if not isinstance(method, cst.FunctionDef) or method.name.value in building:
            continue
        for node in nodes_of(method, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value == "self" and node.attr.value in kept:
                other, line = kept[node.attr.value]
                return (f"its class `{built.func.value}` keeps a `{other}` (`self.{node.attr.value}`) whose "
                        f"tensor made at line {line} `model.to()` does not move")
    return None


def _self_stores(klass: cst.ClassDef) -> list[tuple[str, cst.BaseExpression]]:
    """``(attr, value)`` of each ``self.attr = value`` / ``self.attr += value`` in the class's construction."""
    building = construction_methods(klass)
    stores = []
    for method in klass.body.body:
        if not (isinstance(method, cst.FunctionDef) and method.name.value in building):
            continue
        for node in walk(method):
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                target = node.targets[0].target
            elif isinstance(node, cst.AugAssign):
                target = node.target
            else:
                continue
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                stores.append((target.attr.value, node.value))
    return stores


def _tensor_made_at_construction(metadata: Mapping, facts: ClassFacts, klass: cst.ClassDef, depth: int) -> int | None:
    """The line of a tensor a plain class makes in its construction and keeps on ``self``, itself or
    in a plain object of the file it keeps (``self.masks += [PruneMask(layer)]``)."""
    for _, value in _self_stores(klass):
        for call in nodes_of(value, cst.Call):
            if factory_name(metadata, call) or any(n.startswith("torch.") and n.endswith("_like")
                                                   for n in qualified_names(metadata, call.func)):
                return line_of(metadata, call)
            name = call.func.value if isinstance(call.func, cst.Name) else None
            if depth < 2 and name in facts.classes and name not in facts.model_classes and facts.classes[name] is not klass:
                line = _tensor_made_at_construction(metadata, facts, facts.classes[name], depth + 1)
                if line is not None:
                    return line
    return None


# Why a model handed to another file's training loop (or trainer class) stays.
_LOOP_ELSEWHERE = "a loop in another file whose batches devmod does not move"
# Torch functions that run a model on the example inputs they are given.
_TRACERS = frozenset({"torch.jit.trace", "torch.jit.trace_module", "torch.onnx.export", "torch.export.export"})
# Builtins that look at a model without running it.
_READ_ONLY_BUILTINS = _HARMLESS_CALLS | {"isinstance", "type", "id", "hasattr", "getattr", "setattr", "vars", "dir"}


def _unplaceable_imported(metadata: Mapping, model: cst.Name, built: cst.Call,
                          unplaceable: frozenset[tuple[str, str, str]]) -> str | None:
    """Why a model of a class imported from another file cannot move: a method this file runs
    (``model(...)``, or ``model.method(...)``; also the model handed on, which may be run there)
    makes a tensor there that devmod has no device for (``project.FileRole.unplaceable_methods``)."""
    name = dotted(built.func)
    methods = {method: where for klass, method, where in unplaceable if klass == name}
    if not methods:
        return None
    parents = metadata[ParentNodeProvider]
    for use in uses_of_binding(metadata, model):
        parent = parents.get(use)
        ran = None
        handed = isinstance(parent, cst.Arg) and isinstance(parents.get(parent), cst.Call) \
            and dotted(parents.get(parent).func) not in _READ_ONLY_BUILTINS
        if isinstance(parent, cst.Call) and parent.func is use or handed:
            ran = methods.get("forward") or methods.get("__call__")
        elif isinstance(parent, cst.Attribute) and parent.value is use and isinstance(parents.get(parent), cst.Call):
            ran = methods.get(parent.attr.value)
        if ran is not None:
            return (f"its class `{name}` makes a tensor at {ran} that devmod has no device for "
                    "(its method takes no tensor to follow)")
    return None


def handed_with_a_model(metadata: Mapping, call: cst.Call, models: set[str] | frozenset[str]) -> cst.Name | None:
    """The model variable that ``call``, a function of this file, is handed (``pick_scores(table, ids)``)."""
    if not isinstance(call.func, cst.Name):
        return None
    binding = only_binding(metadata, call.func)
    function = binding if isinstance(binding, cst.FunctionDef) else metadata[ParentNodeProvider].get(binding) \
        if isinstance(binding, cst.Name) else None
    if not isinstance(function, cst.FunctionDef):
        return None
    return next((a.value for a in call.args if isinstance(a.value, cst.Name) and a.value.value in models), None)


def moved_by_a_helper(parents: Mapping, use: cst.CSTNode) -> bool:
    """``to_device(device, policy_net, value_net)`` (PyTorch-RL's helper), ``send_all(dev, net)``:
    handed to a function named for moving, together with a device."""
    arg = parents.get(use)
    call = parents.get(arg) if isinstance(arg, cst.Arg) else None
    if not (isinstance(call, cst.Call) and isinstance(call.func, (cst.Name, cst.Attribute))
            and _MOVER_NAME.search(call.func.value if isinstance(call.func, cst.Name) else call.func.attr.value)):
        return False
    return any(isinstance(a.value, cst.Name) and a.value.value in DEVICE_LIKE_NAMES for a in call.args)


def _built_on_the_cpu(metadata: Mapping, built: cst.Call) -> bool:
    """``LossTexture(torch.device("cpu"), ...)``, ``Net(device="cpu")``: built where the author says, the CPU."""
    for arg in built.args:
        value = arg.value
        if isinstance(value, cst.Call) and "torch.device" in qualified_names(metadata, value.func) \
                and len(value.args) == 1:
            value = value.args[0].value
        if isinstance(value, cst.SimpleString) and value.evaluated_value == "cpu" \
                and (arg.keyword is None or "device" in arg.keyword.value):
            return True
    return False


def moved_by_chain(parents: Mapping, use: cst.CSTNode) -> bool:
    """``model.to(device)``, also after methods that return the model (``model.eval().to(device)``)."""
    node, parent = use, parents.get(use)
    while isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _CHAINED:
        node = parents.get(parent)
        parent = parents.get(node) if isinstance(node, cst.Call) and node.func is parent else None
    return isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _MOVES \
        and isinstance(parents.get(parent), cst.Call)


def _moves_itself(facts: ClassFacts, built: cst.Call, self_placing: frozenset[str] = frozenset()) -> bool:
    """``Detector()`` of a project class whose ``__init__`` calls ``self.to(self.device)``: it
    places itself (and, as facenet's MTCNN, its own inputs), where its ``device=`` says. Also a
    class that builds its parts as it runs: where they land is its own business."""
    klass = facts.classes.get(built.func.value) if isinstance(built.func, cst.Name) else None
    if klass is not None and builds_parts_when_run(klass):
        return True  # it gets its parts when it first runs: moving it before then moves nothing (CUT)
    if any(a.keyword is not None and "device" in a.keyword.value
           or a.keyword is None and (dotted(a.value) or "").endswith("device") for a in built.args):
        return False  # ``Net(device)``: it goes where the driver's device says; its inputs must follow
    # the project index's answer, for the file's own classes and imported ones (facenet's ``MTCNN``)
    return (dotted(built.func) or "") in self_placing


def _placed_by_its_factory(metadata: Mapping, call: cst.Call) -> bool:
    """``make_net(opt)``, a function of this file whose every ``return`` gives a model it moved
    itself (``Net().to(device)`` with the device of the user's ``--cuda`` switch, protonet's
    ``init_protonet``; ``model = model.cuda()`` under ``if use_cuda:``): the model goes where the
    author says, and its inputs with it; the shared device would override that choice."""
    binding = only_binding(metadata, call.func) if isinstance(call.func, cst.Name) else None
    if not isinstance(binding, cst.FunctionDef):
        return False
    parents = metadata[ParentNodeProvider]
    moved: set[str] = set()
    returns: list[cst.BaseExpression | None] = []
    for node in walk(binding.body):
        if isinstance(node, cst.Return):
            returns.append(node.value)
        elif method_call(node, "to", "cuda"):
            if isinstance(node.func.value, cst.Name):  # type: ignore[attr-defined]
                moved.add(node.func.value.value)  # ``model.to(device)``, ``model = model.cuda()``
            holder = parents.get(node)
            if isinstance(holder, cst.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0].target, cst.Name):
                moved.add(holder.targets[0].target.value)  # ``model = Net().to(device)``
    return bool(returns) and all(isinstance(value, cst.Name) and value.value in moved
                                 or method_call(value, "to", "cuda") for value in returns)


def _stuck_batches(metadata: Mapping, module: cst.Module, facts: ClassFacts, groups: Mapping[cst.Assign, Group],
                   device_names: frozenset[str], packs: bool, placeable: Callable[[cst.CSTNode], bool],
                   collators: frozenset[str] = frozenset(),
                   in_library: Callable[[cst.CSTNode], bool] = lambda node: True,
                   param_movers: frozenset[tuple[str, int, str]] = frozenset()) -> None:
    """``for g, labels in loader: model(g, g.ndata["feat"])`` with a batch devmod cannot move
    (DM203 reports it), or a loop in library code, where devmod adds no device: the models fed
    there, directly or handed to the loop's function (``train(model, loader)``), stay with
    their batch."""
    models = model_variables(metadata, module, facts)

    def is_model(func: cst.BaseExpression) -> bool:
        return is_model_callee(func, models)

    for loop in nodes_of(module, cst.For):
        if any(isinstance(a, cst.ClassDef) for a in ancestors(metadata, loop)):
            continue
        loader = find_loader(metadata, loop.iter, collators)
        if loader is None:
            handed = _items_handed_with_a_model(metadata, module, loop, device_names)
            if handed is not None:
                for group in models_fed(metadata, module, loop, groups):
                    group.stuck_batches.append(
                        f"the loop at line {line_of(metadata, loop)} hands its items with the model to "
                        f"`{handed}`, and devmod does not know where they come from")
            continue
        fed = models_fed(metadata, module, loop, groups)
        if not fed:
            continue
        why = batch_plan(metadata, loop, loader, is_model, set(device_names), packs, param_movers)
        if why is not None and not placeable(loop):
            why = "it is in library code, where devmod adds no device" if in_library(loop) else \
                "devmod has no device there (a function that takes no device and runs no model itself)"
        if isinstance(why, str):
            for group in fed:
                group.stuck_batches.append(f"devmod cannot move the batch of the loop at line "
                                           f"{line_of(metadata, loop)}: {why}")


def _items_handed_with_a_model(metadata: Mapping, module: cst.Module, loop: cst.For,
                               device_names: frozenset[str]) -> str | None:
    """``for j, (X, T) in enumerate(data_ld): wrap(dlrm, X, T)`` over something devmod does not
    know as a loader: the items go, unmoved, to a function of the file together with another
    value (the model). The function's name, or None."""
    source = loop.iter
    if isinstance(source, cst.Call) and dotted(source.func) == "enumerate" and source.args:
        source = source.args[0].value
    if not isinstance(source, (cst.Name, cst.Attribute)):
        return None  # ``range(3)``, a literal, a call: steps and numbers, or values devmod sees elsewhere
    items = {n.value for n in walk(loop.target) if isinstance(n, cst.Name)}
    if not items or moved_in(loop.body, items, set(device_names)):
        return None
    # A function that moves something itself (``inputs.cuda()`` in char-rnn's ``predict``) places
    # what it makes of the items: only one that moves nothing leaves them where they are.
    functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)
                 and not any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                             and n.func.attr.value in ("to", "cuda") for n in walk(s.body))}
    for node in walk(loop.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in functions \
                and runs_a_parameter(functions[node.func.value]):
            names = [a.value.value for a in node.args if isinstance(a.value, cst.Name)]
            if any(n in items for n in names) and any(n not in items for n in names):
                return node.func.value
    return None


def models_fed(metadata: Mapping, module: cst.Module, loop: cst.For, groups: Mapping[cst.Assign, Group]) -> list[Group]:
    """The groups whose model the loop body calls: bound in reach, or a parameter of the
    loop's function that a call in the file fills with the model."""
    scopes = metadata[ScopeProvider]
    parents = metadata[ParentNodeProvider]
    found: list[Group] = []

    traced: set[int] = set()

    def add_bound(name: cst.Name) -> None:
        for binding in scope_bindings(scopes.get(name), name.value):
            if isinstance(binding.node, cst.Name):
                statement = parents.get(parents.get(binding.node))
                group = groups.get(statement)  # type: ignore[arg-type]
                if group is not None and group not in found:
                    found.append(group)
                elif group is None and isinstance(statement, cst.Assign) and id(statement) not in traced:
                    traced.add(id(statement))
                    add_wrapped(statement.value)
            elif isinstance(binding.node, cst.Param):
                add_arguments(binding.node)

    def add_wrapped(value: cst.BaseExpression) -> None:
        """``learner = maml.clone()`` after ``maml = MAML(model, lr=0.1)`` (learn2learn): the copy of a
        wrapper built around the model runs the model."""
        if not isinstance(value, cst.Call):
            return
        if isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Name) and not value.args:
            add_bound(value.func.value)  # ``maml.clone()``
            return
        first = next((a.value for a in value.args if a.keyword is None and not a.star), None)
        if isinstance(first, cst.Name) and (dotted(value.func) or "").rsplit(".", 1)[-1][:1].isupper():
            add_bound(first)  # ``MAML(model, ...)``: a wrapper class around it

    followed: set[int] = set()

    def add_arguments(param: cst.Param) -> None:
        function = next((a for a in ancestors(metadata, param) if isinstance(a, cst.FunctionDef)), None)
        if function is None or id(param) in followed:
            return
        followed.add(id(param))
        index = next((i for i, p in enumerate(function.params.params) if p is param), None)
        for call in nodes_of(module, cst.Call):
            if not (isinstance(call.func, cst.Name)
                    and call.func.value == function.name.value):
                continue
            given = next((a.value for a in call.args if a.keyword and a.keyword.value == param.name.value), None)
            plain = [a for a in call.args if a.keyword is None and not a.star]
            if given is None and index is not None and index < len(plain):
                given = plain[index].value
            if isinstance(given, cst.Name):
                add_bound(given)  # a model bound there, or handed on from a caller again (dlrm's visualize.py)

    for node in walk(loop.body):
        if isinstance(node, cst.Call):
            # ``net(x)``, ``net.forward(x)``, ``net.apply_mlp(x, net.bot)``: a method that runs the model
            func = node.func.value if isinstance(node.func, cst.Attribute) and node.func.attr.value not in MODULE_API \
                and node.args else node.func
            if isinstance(func, cst.Name):
                add_bound(func)
            for arg in node.args:  # ``wrap(dlrm, X)``: the model handed on with the batch
                if isinstance(arg.value, cst.Name) and arg.keyword is None and not arg.star:
                    add_bound(arg.value)
    return found


def _parts(metadata: Mapping, groups: Mapping[cst.Assign, Group]) -> list[tuple[Group, Group]]:
    """``wrapper = Predictor(model, 8)``: the model handed in is part of the wrapper."""
    links = []
    scopes = metadata[ScopeProvider]
    parents = metadata[ParentNodeProvider]
    for statement, group in groups.items():
        for node in walk(statement.value):
            if not isinstance(node, cst.Name) or not isinstance(parents.get(node), cst.Arg):
                continue
            for binding in scope_bindings(scopes.get(node), node.value):
                holder = parents.get(parents.get(binding.node)) if isinstance(binding.node, cst.Name) else None
                part = groups.get(holder)  # type: ignore[arg-type]
                if part is not None and part is not group:
                    links.append((group, part))
    return links


def _outputs_passed_on(metadata: Mapping, module: cst.Module,
                       groups: Mapping[cst.Assign, Group]) -> list[tuple[Group, Group]]:
    """``feats = encoder(x)`` then ``decoder(feats, mask)``: one model's output is another's input,
    so the two move together (an encoder held back leaves its output on the CPU)."""
    parents = metadata[ParentNodeProvider]
    scopes = metadata[ScopeProvider]
    owners = {id(statement.targets[0].target): group for statement, group in groups.items()}

    def group_called(call: cst.Call) -> Group | None:
        if not isinstance(call.func, cst.Name):
            return None
        found = [owners.get(id(b.node)) for b in scope_bindings(scopes.get(call.func), call.func.value)]
        return found[0] if len(found) == 1 else None
    calls = [(call, group) for call in nodes_of(module, cst.Call) if (group := group_called(call)) is not None]
    outputs: dict[int, Group] = {}  # the name bound to a model's output -> that model's group
    for call, group in calls:
        statement = parents.get(call)
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            target = statement.targets[0].target
            names = [target] if isinstance(target, cst.Name) else [  # ``feats, score = trunk(x)`` (pfld)
                e.value for e in target.elements if isinstance(e.value, cst.Name)] \
                if isinstance(target, (cst.Tuple, cst.List)) else []
            for name in names:
                outputs[id(name)] = group
    links = []
    for call, group in calls:
        for arg in call.args:
            if isinstance(arg.value, cst.Name):
                for binding in scope_bindings(scopes.get(arg.value), arg.value.value):
                    producer = outputs.get(id(binding.node))
                    if producer is not None and producer is not group:
                        links.append((producer, group))
    return links


def blocked_scopes(metadata: Mapping, groups: Mapping[cst.Assign, Group]) -> list[object]:
    """The scopes that hold a model whose group stays on the CPU: nothing there is placed."""
    scopes = metadata[ScopeProvider]
    return [scopes.get(g.statement) for g in groups.values() if g.blocked]


def gets_parts_later(metadata: Mapping, facts: ClassFacts, uses: list[cst.CSTNode]) -> bool:
    """``model.head = <something that is not a constructor>``: a ``.to`` on the constructor
    would leave that part behind. (A new layer, ``model.fc = nn.Linear(...)``, is moved
    where it is assigned: see ``_place_part``.)"""
    parents = metadata[ParentNodeProvider]
    for use in uses:
        method = parents.get(use)
        if isinstance(method, cst.Attribute) and method.attr.value in _ADDS_PARTS \
                and isinstance(parents.get(method), cst.Call):
            return True  # ``net.add_module("fc", nn.Linear(...))`` on an empty ``nn.Sequential()``
        node = use
        while isinstance(parents.get(node), (cst.Attribute, cst.Subscript)) and parents.get(node).value is node:
            node = parents.get(node)
        target = parents.get(node)
        if isinstance(node, cst.Subscript) and any(isinstance(n, cst.Attribute) and n.attr.value in _TENSORS_OF_A_PART
                                                   for n in walk(node.value)):
            continue  # ``m[0].weight.data[0][0] = 42``: a write into a tensor it has, not a new part
        if node is not use and isinstance(target, cst.AssignTarget):
            statement = parents.get(target)
            if isinstance(statement, cst.Assign) and isinstance(statement.value, cst.Name) \
                    and statement.value.value == "None":
                continue  # ``model.norm.weight = None``: a part removed, nothing left behind
            if isinstance(statement, cst.Assign) and (
                    isinstance(statement.value, cst.Name) and statement.value.value in ("True", "False")
                    or isinstance(statement.value, (cst.Integer, cst.Float, cst.SimpleString))):
                continue  # ``net.training = True``: a flag, not a part
            if isinstance(node, cst.Attribute) and node.attr.value.isupper():
                continue  # ``segmentor.CLASSES = meta["CLASSES"]``: a constant the model carries, not a part
            if not (isinstance(statement, cst.Assign) and isinstance(statement.value, cst.Call)
                    and builds_model(metadata, statement.value, facts)):
                return True
    return False


def dominating_binding_above(metadata: Mapping, use: cst.Name, targets: list[cst.Name]) -> cst.Name | None:
    """The last of ``targets`` above ``use`` when it surely runs before it on every path: no loop, ``if``,
    ``try`` or ``with`` around it that is not around ``use`` too (a ``for`` target is in its loop)."""
    line = line_of(metadata, use)
    above = [t for t in targets if 0 < line_of(metadata, t) < line]
    if not above:
        return None
    last = max(above, key=lambda n: line_of(metadata, n))
    if sum(line_of(metadata, t) == line_of(metadata, last) for t in above) > 1:
        return None  # two bindings on one line: no single answer
    around_use = {id(a) for a in ancestors(metadata, use)}
    # (the suites too: a binding in an ``if`` body does not reach a use in its ``else``)
    blocks = (cst.For, cst.While, cst.If, cst.Try, cst.With, cst.FunctionDef, cst.ClassDef, cst.Match,
              cst.IndentedBlock, cst.SimpleStatementSuite, cst.Else)
    if any(isinstance(a, blocks) and id(a) not in around_use for a in ancestors(metadata, last)):
        return None
    return last


def blocked_callee(metadata: Mapping, groups: Mapping[cst.Assign, Group], func: cst.BaseExpression) -> bool:
    """Is ``func`` (the callee of ``model(x)``) a model whose group cannot move? Where one binding
    of the name surely reaches the call (``model = ...`` rebound for a second model), only that one."""
    if not isinstance(func, cst.Name):
        return False
    parents = metadata[ParentNodeProvider]
    bindings = scope_bindings(metadata[ScopeProvider].get(func), func.value)
    reaching = dominating_binding_above(metadata, func, [b.node for b in bindings if isinstance(b.node, cst.Name)]) \
        if len(bindings) > 1 else None
    for binding in bindings:
        if reaching is not None and binding.node is not reaching:
            continue
        statement = parents.get(parents.get(binding.node)) if isinstance(binding.node, cst.Name) else None
        group = groups.get(statement)  # type: ignore[arg-type]
        if group is not None and (group.blocked or group.parts_later and not group.placed):
            return True
    return False


def _block_together(groups: dict[cst.Assign, Group], links: list[tuple[Group, Group]]) -> None:
    """Groups that share a held-out value, and a wrapper and the model inside it, move
    together or not at all. A model the author placed already is on its device whatever
    devmod does: its group is never held back. A group that stays only beside one the author
    keeps on the CPU (``Smooth(4, device="cpu")``) stays on the CPU with it, unreported: the
    whole of it runs where the author chose."""
    for group in groups.values():
        # (a model given new parts after it is built stays where it is: DM202 reports it)
        group.blocked = not group.placed and (bool(group.stuck_batches) or bool(group.foreign)
                                              or bool(group.unplaceable_inline) or group.parts_later
                                              or any(h.blockers or h.unplaceable for h in group.held_out))
    _spread(groups, links, by_design=False)
    for group in groups.values():
        group.blocked = group.blocked or (group.cpu_by_design and not group.placed)
    _spread(groups, links, by_design=True)


def _spread(groups: dict[cst.Assign, Group], links: list[tuple[Group, Group]], by_design: bool) -> None:
    """Hold back every group linked to a held-back one (``by_design``: as the CPU's, unreported)."""
    def hold(group: Group) -> None:
        group.blocked = True
        group.cpu_by_design = group.cpu_by_design or by_design
    changed = True
    while changed:
        changed = False
        for a, b in links:
            for one, other in ((a, b), (b, a)):
                if one.blocked and not other.blocked and not other.placed:
                    hold(other)
                    changed = True
        blocked = {id(h.statement) for g in groups.values() if g.blocked for h in g.held_out}
        for group in groups.values():
            if not group.blocked and not group.placed and any(id(h.statement) in blocked for h in group.held_out):
                hold(group)
                changed = True


class _GroupFinder:
    def __init__(self, metadata: Mapping, helpers: frozenset[str], numpy_fixed: bool) -> None:
        self.metadata = metadata
        self.parents = metadata[ParentNodeProvider]
        self.helpers = helpers
        self.numpy_fixed = numpy_fixed
        self.tuple_helpers: set[str] = set()
        self.alias_depth = 0
        self.hosts_only = 0  # > 0: a factory does not count as held-out data
        self.loop_depth = 0  # loop variables followed back to their sequences
        self.model_names: set[str] = set()
        self.packs = False  # the file packs sequences: ``lengths`` tensors stay on the CPU
        self.container = ""  # the list whose elements are being considered (``refs.append(v)``)
        self.host_methods: frozenset[str] = frozenset()

    def tuple_helpers_of(self, module: cst.Module) -> set[str]:
        """Functions of the file whose every ``return`` is a tuple of host tensors
        (``return torch.FloatTensor(xs), torch.LongTensor(ys)``)."""
        found = set()
        functions = [(f"{s.name.value}.{m.name.value}", m) for s in module.body if isinstance(s, cst.ClassDef)
                     for m in s.body.body if isinstance(m, cst.FunctionDef)]  # ``ReplayBuffer.sample``
        functions += [(s.name.value, s) for s in module.body if isinstance(s, cst.FunctionDef)]
        for name, stmt in functions:
            returns = [n for n in walk(stmt.body) if isinstance(n, cst.Return)]
            if returns and all(isinstance(r.value, cst.Tuple) and r.value.elements
                               and all(self._held_out(e.value) for e in r.value.elements) for r in returns):
                found.add(name)
        return found

    def group(self, statement: cst.Assign) -> Group:
        target = statement.targets[0].target
        assert isinstance(target, cst.Name)
        group = Group(target.value, statement)
        self.model_name = target.value
        self.aliases: set[str] = set()  # the parameters the model is handed to (``def learn(net, ...)``)
        self.followed: set[int] = set()  # those parameters' bindings, each followed once
        self.partner_uses: set[int] = set()
        self.inline: dict[int, cst.BaseExpression] = {}
        self.foreign: list[str] = []
        self.handed_away: list[str] = []
        self.managed = False  # handed to an object of the file that places what it runs itself, or to a tracer
        found: dict[int, HeldOut] = {}
        for call in self._calls(target):
            for arg in call.args:
                self._consider(arg.value, found)
            self._follow_output(call, found, 0)
        for output in self._hook_outputs(target):
            self._follow_output(output, found, 1)
        for held in found.values():
            held.blockers = self._blockers(held)
        group.held_out = list(found.values())
        group.inline = list(self.inline.values())
        group.foreign = list(dict.fromkeys(self.foreign + self.handed_away))
        group.placed = self._placed(statement, target)
        group.parts_later = gets_parts_later(self.metadata, self.facts, self._uses(target))
        group.cpu_by_design = self.managed  # stays as written, unreported (set again below for CPU classes)
        return group

    def _placed(self, statement: cst.Assign, target: cst.Name) -> bool:
        """``Net().cuda()``, ``Net(device=d)``, or ``model.to(device)`` anywhere later."""
        if any(isinstance(n, cst.Call) and (isinstance(n.func, cst.Attribute) and n.func.attr.value in _MOVES
                                            or any(a.keyword and a.keyword.value in ("device", "device_map")
                                                   for a in n.args))
               for n in walk(statement.value)):
            return True
        scope = self.metadata[ScopeProvider].get(target)
        for binding in (scope[target.value] if scope is not None else ()):
            for access in getattr(binding, "references", ()):
                if moved_by_chain(self.parents, access.node) or moved_by_a_helper(self.parents, access.node):
                    return True
        return False

    def _hook_outputs(self, target: cst.Name) -> list[cst.Name]:
        """The reads of ``output`` in ``model.register_forward_hook(lambda m, inp, output: ...)``
        (or a ``def`` of the file): the model's output, met there by whatever the hook compares
        it with (pretrained-models' ``torch.dist(output.data, reference)``)."""
        reads: list[cst.Name] = []
        for use in self._uses(target):
            attribute = self.parents.get(use)
            while (isinstance(attribute, cst.Attribute) and attribute.attr.value != "register_forward_hook"
                   or isinstance(attribute, cst.Subscript)) and attribute.value is use:
                use, attribute = attribute, self.parents.get(attribute)  # ``net.layer1[0].register_forward_hook``
            call = self.parents.get(attribute)
            if not (isinstance(attribute, cst.Attribute) and attribute.value is use
                    and attribute.attr.value == "register_forward_hook" and isinstance(call, cst.Call)
                    and call.func is attribute and call.args):
                continue
            hook = call.args[0].value
            if isinstance(hook, cst.Name):
                hook = only_binding(self.metadata, hook)
                hook = self.parents.get(hook) if isinstance(hook, cst.Name) else hook
            if not isinstance(hook, (cst.Lambda, cst.FunctionDef)) or len(hook.params.params) < 3:
                continue
            output = hook.params.params[2].name
            scope = self.metadata[ScopeProvider].get(output)
            reads += [a.node for a in (scope.accesses[output.value] if scope is not None else ())
                      if isinstance(a.node, cst.Name)]
        return reads

    # -- where the model is called --------------------------------------------------------
    def _calls(self, target: cst.Name) -> list[cst.Call]:
        calls: list[cst.Call] = []
        for use in self._uses(target):  # this binding only: the name may be rebound to another model
            self._call_of(use, calls, handed=True)
        return in_source_order(self.metadata, calls)  # type: ignore[return-value]

    def _call_of(self, node: cst.CSTNode, calls: list[cst.Call], handed: bool) -> None:
        """``model(x)``, ``model.forward(x)``, ``model.act(obs)``; and, for ``train(model, ...)``
        with ``train`` defined in the file, the calls of its parameter there."""
        parent = self.parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value not in MODULE_API:
            node, parent = parent, self.parents.get(parent)
        if isinstance(parent, cst.Call) and parent.func is node:
            calls.append(parent)
        elif handed and isinstance(parent, cst.Element):
            self._handed_in_a_list(parent)
        elif handed and isinstance(parent, cst.Arg) and not parent.star and self._object_told_the_device(parent):
            self.managed = True  # ``Trainer(device, net, opt)``: the object is told the device and places what it runs
        elif handed and isinstance(parent, cst.Arg) and not parent.star and self._traced_in_a_callee(node, parent):
            self.managed = True  # an export tool's own inputs: the whole pipeline stays as written
        elif handed and isinstance(parent, cst.Arg) and not parent.star and self._library_object_run(parent):
            call = self.parents.get(parent)
            self.handed_away.append(f"it is handed to `{dotted(call.func)}` (line {line_of(self.metadata, call)}), "  # type: ignore[union-attr]
                                    "a library object that runs it on inputs devmod does not follow")
        elif handed and isinstance(parent, cst.Arg) and parent.keyword is not None and not parent.star \
                and isinstance(self.parents.get(parent), cst.Call) and dotted(self.parents[parent].func) in self.loops:
            call = self.parents[parent]  # ``WavenetTrainer(model=model, ...)``
            self.handed_away.append(f"it is handed to `{dotted(call.func)}` (line {line_of(self.metadata, call)}), "
                                    + _LOOP_ELSEWHERE)
        elif handed and isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
            call = self.parents.get(parent)
            if isinstance(call, cst.Call) and dotted(call.func) in self.loops:
                self.handed_away.append(f"it is handed to `{dotted(call.func)}` (line {line_of(self.metadata, call)}), "
                                        + _LOOP_ELSEWHERE)
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) \
                    and call.func.value in self.facts.classes and call.func.value not in self.facts.model_classes:
                # ``ClassSpecificImageGeneration(model, ...)``: an object of the file keeps the model and
                # runs it on inputs it makes itself (pytorch-cnn-visualizations), which devmod does not follow.
                # One that places things itself (``self.model.cuda()`` if asked) manages them: no report.
                klass = self.facts.classes[call.func.value]
                if any(isinstance(n, cst.Attribute) and n.attr.value in _MOVES for n in walk(klass)):
                    self.managed = True
                else:
                    self.handed_away.append(f"it is handed to `{call.func.value}` (line {line_of(self.metadata, call)}), "
                                            "an object that runs it on inputs devmod does not follow")
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Name):
                for param in self._parameters_given(call, parent):
                    if id(param) in self.followed:
                        continue  # already followed (a function that hands the model to itself)
                    self.followed.add(id(param))
                    self.aliases.add(param.name)  # type: ignore[attr-defined]
                    # handed on from there too: ``def visualize(model): Explainer(model)(x)``
                    for access in getattr(param, "references", ()):
                        self._call_of(access.node, calls, handed=True)

    def _object_told_the_device(self, arg: cst.Arg) -> bool:
        """``NeuralProcessTrainer(device, neuralprocess, optimizer)``: a class that is no model, built with the
        model and the device, decides itself what goes where (neural-processes moves image batches only)."""
        call = self.parents.get(arg)
        if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
            return False
        name = dotted(call.func) or ""
        if not name.rsplit(".", 1)[-1][:1].isupper() or name in self.facts.model_classes \
                or any(q.startswith("torch.") for q in qualified_names(self.metadata, call.func)):
            return False
        return hands_a_device(call, but=arg)

    def _traced_in_a_callee(self, node: cst.CSTNode, arg: cst.Arg) -> bool:
        """``def export(model, shape): imgs = make_inputs(shape); torch.jit.trace(model, imgs)`` with the
        model handed in: the tracer runs it on inputs made there, which no rewrite of the caller moves."""
        call = self.parents.get(arg)
        if not (isinstance(call, cst.Call) and qualified_names(self.metadata, call.func) & _TRACERS
                and isinstance(node, cst.Name)):
            return False
        return any(isinstance(b.node, cst.Param) for b in scope_bindings(self.metadata[ScopeProvider].get(node), node.value))

    def _library_object_run(self, arg: cst.Arg) -> bool:
        """``dff = DeepFeatureFactorization(model=model, ...)`` then ``dff(input_tensor)``: an object of
        another library (not torch, not a class of this file) keeps the model and is called on data,
        which it may or may not move (grad-cam's GradCAM does, its DeepFeatureFactorization does not)."""
        call = self.parents.get(arg)
        if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
            return False
        name = dotted(call.func) or ""
        last = name.rsplit(".", 1)[-1]
        if not last[:1].isupper() or last in self.facts.classes or name in self.facts.model_classes or any(
                n.startswith(("torch.", "builtins.")) for n in qualified_names(self.metadata, call.func)):
            return False
        holder = self.parents.get(call)
        if not (isinstance(holder, cst.Assign) and holder.value is call and len(holder.targets) == 1
                and isinstance(holder.targets[0].target, cst.Name)):
            return False
        return any(isinstance(self.parents.get(use), cst.Call) and self.parents.get(use).func is use
                   and self.parents.get(use).args for use in uses_of_binding(self.metadata, holder.targets[0].target))

    def _handed_in_a_list(self, element: cst.Element) -> None:
        """``pairs = [(model_a, "default"), ...]`` then ``helpers.compare(pairs, loader)``: a model in
        a list or tuple handed to a loop in another file is handed to that loop too."""
        node: cst.CSTNode | None = element
        while isinstance(node, (cst.Element, cst.Tuple, cst.List)):
            node = self.parents.get(node)
        holders: list[cst.CSTNode | None] = [node]
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            holders = [self.parents.get(use) for use in uses_of_binding(self.metadata, node.targets[0].target)]
        for arg in holders:
            call = self.parents.get(arg) if isinstance(arg, cst.Arg) else None
            if isinstance(call, cst.Call) and dotted(call.func) in self.loops:
                self.handed_away.append(f"it is handed to `{dotted(call.func)}` (line {line_of(self.metadata, call)}) "
                                        "in a list, to a loop in another file whose batches devmod does not move")
                return

    def _parameters_given(self, call: cst.Call, arg: cst.Arg) -> list[object]:
        """The parameter bindings of a function of the file that ``arg`` fills."""
        found = []
        for binding in scope_bindings(self.metadata[ScopeProvider].get(call.func), call.func.value):  # type: ignore[attr-defined]
            function = self.parents.get(binding.node) if isinstance(binding.node, cst.Name) else binding.node
            if not isinstance(function, cst.FunctionDef):
                continue
            plain = [a for a in call.args if a.keyword is None and not a.star]
            index = plain.index(arg)
            params = [*function.params.posonly_params, *function.params.params]
            if index < len(params):
                inner = self.metadata[ScopeProvider].get(function.body)
                if inner is not None:
                    found += [b for b in inner[params[index].name.value] if b.node is params[index]]
        return found

    def _follow_output(self, node: cst.CSTNode, found: dict[int, HeldOut], depth: int) -> None:
        """Climb from a model output to the values it is combined with."""
        current = node
        while True:
            parent = self.parents.get(current)
            if isinstance(parent, cst.Attribute) and parent.value is current:
                if parent.attr.value in _LEAVES or parent.attr.value == "numpy":
                    return
                call = self.parents.get(parent)
                if isinstance(call, cst.Call) and call.func is parent and parent.attr.value in _COMBINING_METHODS:
                    for arg in call.args:  # ``pred.eq(y_test)``: the argument meets the output
                        if arg.keyword is None and not arg.star:
                            self._partner(arg.value, found)
                current = call if isinstance(call, cst.Call) and call.func is parent else parent
            elif isinstance(parent, cst.Subscript) and parent.value is current:
                current = parent
            elif isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.ComparisonTarget,
                                     cst.Comparison)):
                if isinstance(parent, cst.BinaryOperation):
                    self._partner(parent.right if parent.left is current else parent.left, found)
                elif isinstance(parent, cst.Comparison):
                    for target in parent.comparisons:
                        self._partner(target.comparator, found)
                elif isinstance(parent, cst.ComparisonTarget):
                    comparison = self.parents.get(parent)
                    self._partner(comparison.left, found)  # type: ignore[union-attr]
                    for target in comparison.comparisons:  # type: ignore[union-attr]
                        if target is not parent:
                            self._partner(target.comparator, found)
                    parent = comparison
                current = parent
            elif isinstance(parent, cst.Arg):
                call = self.parents.get(parent)
                if not isinstance(call, cst.Call):
                    return
                if is_loss_callee(call.func) or self._a_loss_object(call.func):
                    for arg in call.args:
                        if arg is not parent:
                            self._partner(arg.value, found)
                    current = call
                elif any(n.startswith("torch.") for n in qualified_names(self.metadata, call.func)):
                    for arg in call.args:  # ``torch.dist(out, ref)``: ``ref`` meets the output
                        if arg is not parent and not arg.star and (arg.keyword is None or arg.keyword.value == "other"):
                            self._partner(arg.value, found)
                    current = call  # ``torch.max(out, 1)``: its result lives with ``out``
                else:
                    return
            elif isinstance(parent, (cst.Element, cst.Tuple)) and depth < _MAX_DEPTH:
                current = parent
            elif isinstance(parent, cst.Assign) and depth < _MAX_DEPTH:
                for target in parent.targets:
                    for name in _target_names(target.target):
                        for use in self._uses(name):
                            self._follow_output(use, found, depth + 1)
                return
            elif isinstance(parent, cst.Return) and depth < _MAX_DEPTH:
                # ``def select(s): return policy(s)``: the output meets what each caller combines it with
                for site in self._call_sites(parent):
                    self._follow_output(site, found, depth + 1)
                return
            else:
                return

    def _a_loss_object(self, func: cst.BaseExpression) -> bool:
        """``mse(value, target)`` with ``mse = nn.MSELoss()``: a loss under another name."""
        made = only_assigned_value(self.metadata, func) if isinstance(func, cst.Name) else None
        return isinstance(made, cst.Call) and any(n.startswith("torch.nn.") and n.endswith("Loss")
                                                  for n in qualified_names(self.metadata, made.func))

    def _call_sites(self, returned: cst.Return) -> list[cst.Call]:
        """The calls, in the file, of the function that ``returned`` belongs to."""
        function = next((a for a in ancestors(self.metadata, returned)
                         if isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef))), None)
        return self._call_sites_of(function) if isinstance(function, cst.FunctionDef) else []

    def _call_sites_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls of ``function`` by its name, in the file."""
        scope = self.metadata[ScopeProvider].get(function)
        sites: list[cst.Call] = []
        for binding in scope_bindings(scope, function.name.value):
            if binding.node is not function:
                continue
            for access in binding.references:
                call = self.parents.get(access.node)
                if isinstance(call, cst.Call) and call.func is access.node:
                    sites.append(call)
        return sites

    def _partner(self, expr: cst.BaseExpression, found: dict[int, HeldOut]) -> None:
        root = _data_root(expr)
        if isinstance(root, cst.Name):
            self.partner_uses.add(id(root))
        self._consider(expr, found)

    # -- what a value is -----------------------------------------------------------------
    def _consider(self, expr: cst.BaseExpression, found: dict[int, HeldOut]) -> None:
        if isinstance(expr, cst.BinaryOperation) and (not (is_number(expr.left) or is_number(expr.right))
                                                      or not self._held_out(expr)):
            self._consider(expr.left, found)  # ``net(held + noise)``: each operand meets the model
            self._consider(expr.right, found)
            return
        if isinstance(expr, cst.UnaryOperation):
            self._consider(expr.expression, found)
            return
        root = _data_root(expr)
        if not isinstance(root, cst.Name):
            if self._held_out(expr):
                self.inline[id(expr)] = expr  # used right there and nowhere else: it moves in place
            else:
                self._note_foreign(expr, None)
            return
        target = self._reaching_binding(root)
        if target is None:
            self._note_unpacked_arguments(root)
        for carried in self._loop_carried(root, target):
            # ``state = ...`` at the end of the loop body: the value the next pass runs the model on
            self._consider_binding(carried, found)
        self._consider_binding(target, found)

    def _loop_carried(self, use: cst.Name, reaching: cst.Name | None) -> list[cst.Name]:
        """For a read at the top of a loop body, the bindings of the same name further down that
        body (the last of them is what the next pass reads): ``for t in ...: net(state); ...;
        state = torch.from_numpy(s).float()``."""
        loop = next((a for a in ancestors(self.metadata, use) if isinstance(a, (cst.For, cst.While))), None)
        if loop is None:
            return []
        line = line_of(self.metadata, use)
        inside = set(map(id, walk(loop.body)))
        if reaching is not None and id(reaching) in inside and line_of(self.metadata, reaching) < line:
            return []  # ``obs = torch.Tensor(obs)`` above the use in the body: the pass's own value
        later = [b.node for b in scope_bindings(self.metadata[ScopeProvider].get(use), use.value)
                 if isinstance(b.node, cst.Name) and b.node is not reaching and id(b.node) in inside
                 and line_of(self.metadata, b.node) > line]
        return [max(later, key=lambda n: line_of(self.metadata, n))] if later else []

    def _consider_binding(self, target: cst.Name | None, found: dict[int, HeldOut]) -> None:
        if target is None or (self.packs and "len" in target.value.lower()):
            return  # ``pack_padded_sequence`` wants its lengths on the CPU
        holder = self.parents.get(target)
        statement = self.parents.get(holder)
        source = self._iterated(target)
        if source is not None:
            if self.loop_depth < _MAX_DEPTH:  # ``for x, y in zip(xs, ys): net(x)``: ``xs`` meets the model
                self.loop_depth += 1
                try:
                    self._consider(source, found)
                finally:
                    self.loop_depth -= 1
            return
        if isinstance(holder, cst.Element):
            self._consider_unpacked(target, holder, found)
            return
        if not (isinstance(holder, cst.AssignTarget) and isinstance(statement, cst.Assign)
                and len(statement.targets) == 1 and statement.targets[0].target is target):
            return
        if id(statement) in found:
            return
        if _empty_container(statement.value):
            for value in self._put_into(target):  # ``refs = []`` then ``refs.append(load(p))``
                self.container, outer = target.value, self.container
                try:
                    self._consider(value, found)
                finally:
                    self.container = outer
            return
        if not self._held_out(statement.value):
            root_name = _data_root(statement.value)
            if isinstance(root_name, cst.Name) and self.loop_depth < _MAX_DEPTH:
                # ``one = one.view(1, -1)``: the value it was before; ``x = data``: the value it aliases
                self.loop_depth += 1
                try:
                    self._consider(statement.value, found)
                finally:
                    self.loop_depth -= 1
                return
            self._note_foreign(statement.value, target)
            return
        found[id(statement)] = HeldOut(target.value, statement, line_of(self.metadata, statement))

    def _note_unpacked_arguments(self, name: cst.Name) -> None:
        """``def train(inp, target)`` called as ``train(*random_pair())``: the values come from a
        call devmod does not follow into the parameters, so they cannot move with the model."""
        bindings = scope_bindings(self.metadata[ScopeProvider].get(name), name.value)
        if len(bindings) != 1 or not isinstance(bindings[0].node, cst.Param):
            return
        param = bindings[0].node
        function = self.parents.get(self.parents.get(param))
        if not isinstance(function, cst.FunctionDef) or param not in function.params.params:
            return
        index = list(function.params.params).index(param)
        for site in self._call_sites_of(function):
            plain = [a for a in site.args if a.keyword is None and not a.star]
            named = any(a.keyword and a.keyword.value == param.name.value for a in site.args)
            star = next((a for a in site.args if a.star == "*"), None)
            if star is not None and not named and index >= len(plain):
                self.foreign.append(f"`{name.value}` (line {line_of(self.metadata, param)}) is given by "
                                    f"`*{code_of(star.value)}` (line {line_of(self.metadata, site)}), "
                                    "which devmod does not move")
                return

    def _put_into(self, target: cst.Name) -> list[cst.BaseExpression]:
        """The values put into the container bound to ``target``: ``target.append(v)``,
        ``target.insert(i, v)`` and ``target[k] = v``."""
        values: list[cst.BaseExpression] = []
        for use in self._uses(target):
            parent = self.parents.get(use)
            call = self.parents.get(parent)
            if isinstance(parent, cst.Attribute) and parent.value is use and isinstance(call, cst.Call) \
                    and call.func is parent and parent.attr.value in ("append", "insert") and call.args:
                values.append(call.args[-1].value)
            holder = self.parents.get(parent)
            statement = self.parents.get(holder)
            if isinstance(parent, cst.Subscript) and parent.value is use and isinstance(holder, cst.AssignTarget) \
                    and isinstance(statement, cst.Assign):
                values.append(statement.value)
        return values

    def _iterated(self, target: cst.Name) -> cst.BaseExpression | None:
        """For a loop variable, the sequence its values come from: ``xs`` for ``x`` in
        ``for x in xs``, ``for i, x in enumerate(xs)`` and ``for x, y in zip(xs, ys)``."""
        holder = self.parents.get(target)
        loop = holder
        index = None
        if isinstance(holder, cst.Element) and isinstance(self.parents.get(holder), (cst.Tuple, cst.List)):
            pattern = self.parents.get(holder)
            index = next(i for i, e in enumerate(pattern.elements) if e is holder)  # type: ignore[union-attr]
            loop = self.parents.get(pattern)
            if not (isinstance(loop, cst.For) and loop.target is pattern):
                return None
        elif not (isinstance(loop, cst.For) and loop.target is target):
            return None
        iterable = loop.iter  # type: ignore[union-attr]
        if index is None:
            return iterable if isinstance(iterable, cst.Name) else None
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) \
                and all(a.keyword is None and not a.star for a in iterable.args):
            if iterable.func.value == "zip" and index < len(iterable.args):
                return iterable.args[index].value
            if iterable.func.value == "enumerate" and index == 1 and iterable.args:
                return iterable.args[0].value
        return None

    def _loop_target_for(self, arg: cst.Arg, call: cst.Call) -> cst.Name | None:
        """``xs`` in ``for x, y in zip(xs, ys)`` / ``enumerate(xs)``: the loop variable it feeds."""
        loop = self.parents.get(call)
        if not (isinstance(loop, cst.For) and loop.iter is call and isinstance(call.func, cst.Name)
                and arg.keyword is None and not arg.star):
            return None
        index = call.args.index(arg)
        if call.func.value == "enumerate":
            index = 1 if index == 0 else -1
        elif call.func.value != "zip":
            return None
        target = loop.target
        if isinstance(target, (cst.Tuple, cst.List)) and 0 <= index < len(target.elements) \
                and isinstance(target.elements[index].value, cst.Name):
            return target.elements[index].value
        return None

    def _note_foreign(self, value: cst.BaseExpression, target: cst.Name | None) -> None:
        """``img = to_tensor(picture).unsqueeze(0)`` / ``model(**tokenizer(text))``: made by a
        library whose results devmod does not move, so the model stays with them."""
        what = f"`{target.value}` (line {line_of(self.metadata, target)})" if target is not None \
            else f"an element of `{self.container}` (line {line_of(self.metadata, value)})" if self.container \
            else f"its input at line {line_of(self.metadata, value)}"
        held = self._cpu_global_read(value)
        if held is not None:
            self.foreign.append(f"{what} is computed with `{held.value}` (line {line_of(self.metadata, held)}), "
                                "a CPU tensor devmod does not move")
            return
        library = self._cpu_library(value)
        if library is None:
            return
        self.foreign.append(f"{what} comes from {library}, whose results devmod does not move")

    def _cpu_global_read(self, value: cst.BaseExpression) -> cst.Name | None:
        """``head(affine(X))`` where the file's ``affine`` computes with a module-level
        ``W = Normal(0, 1).sample(...)`` or ``K = torch.Tensor(rows)``: the global that stays."""
        node = _data_root(value)
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name)):
            return None
        function = only_binding(self.metadata, node.func)
        if not isinstance(function, cst.FunctionDef):
            return None
        scopes = self.metadata[ScopeProvider]
        for name in walk(function.body):
            if not isinstance(name, cst.Name):
                continue
            scope = scopes.get(name)
            if scope is None or name.value not in scope or any(a.scope is scope for a in scope.assignments[name.value]):
                continue  # a local of the function (or not a variable read)
            for binding in scope_bindings(scope, name.value):  # not a builtin (``print``, ``len``)
                target = binding.node
                statement = self.parents.get(self.parents.get(target)) if isinstance(target, cst.Name) else None
                if isinstance(statement, cst.Assign) and len(statement.targets) == 1 \
                        and isinstance(statement.value, cst.Call) and _makes_cpu_tensor(self.metadata, statement.value):
                    return target
        return None

    def _cpu_library(self, value: cst.BaseExpression) -> str | None:
        node = _data_root(value)
        if not isinstance(node, cst.Call):
            return None
        names = qualified_names(self.metadata, node.func)
        if isinstance(node.func, cst.Name) and not names & _library_names(names):
            # ``to_tensor = transforms.ToTensor()``, ``tok = AutoTokenizer.from_pretrained(...)``
            made_by = only_assigned_value(self.metadata, node.func)
            if isinstance(made_by, cst.Call):
                names = qualified_names(self.metadata, made_by.func)
                returned = self._returned_call(made_by)  # ``tf = returnTF()`` that returns ``trn.Compose(...)``
                if returned is not None:
                    names = names | qualified_names(self.metadata, returned.func)
        if names & _NUMPY_ARRAYS or any(n.startswith("numpy.random.") for n in names):
            return "NumPy"
        found = sorted(_library_names(names))
        return next((lib for lib in _CPU_DATA_LIBRARIES if found and found[0].startswith(lib)), None)

    def _returned_call(self, call: cst.Call) -> cst.Call | None:
        """The call a function of the file returns (``return trn.Compose([...])``), when every
        ``return`` of it gives a call (places365's ``returnTF()``)."""
        function = only_binding(self.metadata, call.func) if isinstance(call.func, cst.Name) else None
        if not isinstance(function, cst.FunctionDef):
            return None
        returns = [n for n in walk(function.body) if isinstance(n, cst.Return)]
        values = [only_assigned_value(self.metadata, r.value) if isinstance(r.value, cst.Name) else r.value
                  for r in returns]  # (``tf = trn.Compose([...])`` then ``return tf``)
        if not values or not all(isinstance(v, cst.Call) for v in values):
            return None
        return values[0]  # type: ignore[return-value]

    def _consider_unpacked(self, target: cst.Name, element: cst.Element, found: dict[int, HeldOut]) -> None:
        """``tokens, labels = map(torch.LongTensor, rows)`` / ``x, y = make_batch()`` where the
        helper returns a tuple of host tensors: each name is held-out data."""
        pattern = self.parents.get(element)
        holder = self.parents.get(pattern)
        statement = self.parents.get(holder)
        if not (isinstance(pattern, (cst.Tuple, cst.List)) and isinstance(holder, cst.AssignTarget)
                and isinstance(statement, cst.Assign) and len(statement.targets) == 1
                and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in pattern.elements)):
            return
        key = id(target)
        value = statement.value
        if isinstance(value, cst.Tuple) and len(value.elements) == len(pattern.elements):
            # ``x, y = x.detach(), y.detach()``: each name holds its own element
            index = next(i for i, e in enumerate(pattern.elements) if e.value is target)
            held = self._held_out(value.elements[index].value)
        else:
            held = self._host_tuple(value)
            if held:  # every name holds a host tensor of the same batch (``s, a, r = memory.sample(n)``)
                for other in pattern.elements:
                    name = other.value
                    if id(name) not in found and (name is target or name.value != "_"):  # type: ignore[union-attr]
                        found[id(name)] = HeldOut(name.value, statement,  # type: ignore[union-attr]
                                                  line_of(self.metadata, statement), unpacked=True)
        if key in found or not held:
            return
        found[key] = HeldOut(target.value, statement, line_of(self.metadata, statement), unpacked=True)

    def _host_tuple(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and self._dataset_object(value.value):
            return True  # ``points, labels = dataset[i]``: an item of a Dataset
        if not isinstance(value, cst.Call):
            return False
        if self._next_batch(value):
            return True
        if dotted(value.func) == "map" and value.args \
                and qualified_names(self.metadata, value.args[0].value) & HOST_MAKERS:
            return True
        if isinstance(value.func, cst.Name) and value.func.value in self.tuple_helpers:
            return True
        func = value.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):  # ``memory.sample(n)``
            bindings = scope_bindings(self.metadata[ScopeProvider].get(func.value), func.value.value)
            if len(bindings) != 1:
                return False
            node = bindings[0].node
            statement = self.parents.get(self.parents.get(node)) if isinstance(node, cst.Name) else None
            if isinstance(statement, cst.Assign) and isinstance(statement.value, cst.Call) \
                    and isinstance(statement.value.func, cst.Name):
                return f"{statement.value.func.value}.{func.attr.value}" in self.tuple_helpers
            if isinstance(node, cst.Param):  # ``def train(q, memory)``: the one class of the file with that method
                owners = [h for h in self.tuple_helpers if h.endswith(f".{func.attr.value}")]
                return len(owners) == 1
        return False

    def _next_batch(self, value: cst.Call) -> bool:
        """``next(iter(loader))`` or ``next(batches)`` after ``batches = iter(loader)``: one CPU batch
        of a DataLoader, taken by hand instead of in a ``for`` loop (DM203 moves those). Also
        ``batches.next()``, which DataLoader iterators had until torch 1.13 (older notebooks), and the
        dunder spelling ``loader.__iter__().__next__()`` (ffjord's diagnostics)."""
        if dotted(value.func) == "next" and len(value.args) == 1:
            source = value.args[0].value
        elif isinstance(value.func, cst.Attribute) and value.func.attr.value in ("next", "__next__") and not value.args:
            source = value.func.value
        else:
            return False
        if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) \
                and source.func.attr.value == "__iter__" and not source.args:
            source = cst.Call(cst.Name("iter"), [cst.Arg(source.func.value)])  # ``loader.__iter__().__next__()``
        if isinstance(source, cst.Name):
            target = self._reaching_binding(source)  # ``data_iter = iter(loader)``, maybe rebound later
            if target is None:
                return False
            statement = self.parents.get(self.parents.get(target))
            if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1):
                return False
            source = statement.value
        return isinstance(source, cst.Call) and dotted(source.func) == "iter" and len(source.args) == 1 \
            and find_loader(self.metadata, source.args[0].value) is not None

    def _reaching_binding(self, use: cst.Name) -> cst.Name | None:
        """The assignment target whose value ``use`` reads: the only binding, or in straight-line
        code (no binding inside a loop) the last binding above the use."""
        bindings = scope_bindings(self.metadata[ScopeProvider].get(use), use.value)
        if not bindings or not all(isinstance(b.node, cst.Name) for b in bindings):
            return None
        if len(bindings) == 1:
            return bindings[0].node  # type: ignore[return-value]
        if any(b.scope is not bindings[0].scope for b in bindings):
            return None
        if any(self._in_loop(b.node) for b in bindings):
            if not self._in_loop(use):  # ``images, labels = next(it)`` after (or before) a loop over the same names
                straight = dominating_binding_above(self.metadata, use, [b.node for b in bindings])  # type: ignore[misc]
                if straight is not None:
                    return straight
            return self._loop_binding(use, [b.node for b in bindings])  # type: ignore[misc]
        line = line_of(self.metadata, use)
        above = [b.node for b in bindings if line_of(self.metadata, b.node) < line]
        return max(above, key=lambda n: line_of(self.metadata, n), default=None)  # type: ignore[arg-type]

    def _loop_binding(self, use: cst.Name, targets: list[cst.Name]) -> cst.Name | None:
        """``for one in rows: one = one.view(1, -1); net(one)``: in a ``for`` body, the last
        plain assignment above the use in the same block, else the loop's own variable."""
        statement = next((a for a in ancestors(self.metadata, use) if isinstance(a, cst.SimpleStatementLine)), None)
        block = self.parents.get(statement) if statement is not None else None
        loop = self.parents.get(block) if isinstance(block, cst.IndentedBlock) else None
        if not isinstance(loop, cst.For):
            return None
        index = list(block.body).index(statement)  # type: ignore[union-attr]
        for earlier in reversed(list(block.body)[:index]):  # type: ignore[union-attr]
            hits = [t for t in targets if any(a is earlier for a in ancestors(self.metadata, t))]
            if hits:
                holder = self.parents.get(hits[0])
                return hits[0] if len(hits) == 1 and isinstance(holder, cst.AssignTarget) else None
            if not isinstance(earlier, cst.SimpleStatementLine) and any(
                    isinstance(n, cst.Name) and n.value == use.value for n in walk(earlier)):
                return None  # named in a nested block: maybe bound there, no single answer
        mine = [t for t in targets if self._iterated(t) is not None
                and any(a is loop for a in ancestors(self.metadata, t))]
        bound_by_loop = any(t is loop.target or any(a is loop.target for a in ancestors(self.metadata, t))
                            for t in targets)
        if not mine and not bound_by_loop:
            # the first pass reads what was bound above the loop (later passes: ``_loop_carried``)
            outside = [t for t in targets if not any(a is loop for a in ancestors(self.metadata, t))]
            return dominating_binding_above(self.metadata, loop, outside) if outside else None  # type: ignore[arg-type]
        return mine[0] if len(mine) == 1 else None

    def _in_loop(self, node: cst.CSTNode) -> bool:
        return any(isinstance(a, (cst.For, cst.While)) for a in ancestors(self.metadata, node))

    def _held_out(self, value: cst.BaseExpression) -> bool:
        """Surely a CPU tensor that no other rule places: dataset storage, a host cast,
        ``from_numpy`` / a legacy constructor / a project helper, through tensor methods,
        slicing, arithmetic with numbers and ``torch.unsqueeze``-like functions."""
        host = False
        node: cst.BaseExpression | None = value
        while node is not None:
            if isinstance(node, cst.Call):
                names = qualified_names(self.metadata, node.func)
                if names & HOST_MAKERS:
                    return True
                if factory_name(self.metadata, node):  # one DM201 left on the CPU (or will place)
                    return not self.hosts_only and not any(a.keyword and a.keyword.value in ("device", "out")
                                                           for a in node.args)
                if isinstance(node.func, cst.Name) and node.func.value in self.helpers:
                    return True
                if torch_data_function(self.metadata, node) and node.args and node.args[0].keyword is None:
                    node = node.args[0].value  # ``torch.unsqueeze(x, 1)`` (a function, not a method)
                    continue
                if isinstance(node.func, cst.Attribute):
                    method = node.func.attr.value
                    if method in self.host_methods:
                        return True
                    if method in ("to", "cuda", "pin_memory") or any(a.keyword and a.keyword.value == "device"
                                                                       for a in node.args):
                        return False  # placed already
                    if method == "type" and len(node.args) == 1 \
                            and qualified_names(self.metadata, node.args[0].value) & HOST_MAKERS:
                        host = True
                        node = node.func.value
                        continue
                    if method in _SAME_DEVICE_METHODS:
                        node = node.func.value
                        continue
                    return host
                return host
            if isinstance(node, cst.Subscript):
                if isinstance(node.value, cst.Name) and self._dataset_object(node.value):
                    return True  # ``pts = store[0]``: an item of a Dataset, made on the CPU
                node = node.value
            elif isinstance(node, cst.BinaryOperation):
                if is_number(node.right):
                    node = node.left
                elif is_number(node.left):
                    node = node.right
                else:  # ``(x - mean) / std`` with every operand host data: normalised host data
                    return host or (self._host_only(node.left) and self._host_only(node.right))
            elif isinstance(node, cst.UnaryOperation):
                node = node.expression
            elif isinstance(node, (cst.Tuple, cst.List)) and self.alias_depth < _MAX_DEPTH:
                # ``torch.stack((inputs, inputs))``: on the CPU where one of its tensors is held out
                self.alias_depth += 1
                try:
                    return host or any(self._held_out(e.value) for e in node.elements
                                       if not isinstance(e, cst.StarredElement))
                finally:
                    self.alias_depth -= 1
            elif isinstance(node, cst.Name) and self.alias_depth < _MAX_DEPTH:
                return self._alias_held_out(node)  # ``target = y_train``
            elif isinstance(node, cst.Attribute):
                if node.attr.value in _DATASET_STORAGE and isinstance(node.value, cst.Name) \
                        and self._bound_to_object(node.value):
                    return True
                return host
            else:
                return host
        return host

    def _host_only(self, value: cst.BaseExpression) -> bool:
        """Held-out, and made from host data, not by a factory that DM201 places itself."""
        self.hosts_only += 1
        try:
            return self._held_out(value)
        finally:
            self.hosts_only -= 1

    def _alias_held_out(self, name: cst.Name) -> bool:
        """``inputs = x_train * 2``: held-out when ``x_train`` is."""
        target = self._reaching_binding(name)
        statement = self.parents.get(self.parents.get(target)) if target is not None else None
        if isinstance(statement, (cst.Tuple, cst.List)):  # ``images, labels = next(dataiter)``, then ``images[0]``
            holder: cst.CSTNode | None = statement
            while isinstance(holder, (cst.Element, cst.Tuple, cst.List)):
                holder = self.parents.get(holder)
            assign = self.parents.get(holder) if isinstance(holder, cst.AssignTarget) else None
            return isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call) and self._next_batch(assign.value)
        if not isinstance(statement, cst.Assign):
            return False
        self.alias_depth += 1
        try:
            return self._held_out(statement.value)
        finally:
            self.alias_depth -= 1

    def _bound_to_object(self, name: cst.Name) -> bool:
        """``test_data = datasets.MNIST(...)``: bound once, to a constructor call (not a tensor)."""
        bindings = scope_bindings(self.metadata[ScopeProvider].get(name), name.value)
        if len(bindings) != 1 or not isinstance(bindings[0].node, cst.Name):
            return False
        statement = self.parents.get(self.parents.get(bindings[0].node))
        if not isinstance(statement, cst.Assign) or not isinstance(statement.value, cst.Call):
            return False
        callee = dotted(statement.value.func) or ""
        return callee.rsplit(".", 1)[-1][:1].isupper()

    def _dataset_object(self, name: cst.Name) -> bool:
        """``store = ShapeNetDataset(...)``, ``datasets.MNIST(...)``, a Dataset class of the file."""
        if not self._bound_to_object(name):
            return False
        binding = scope_bindings(self.metadata[ScopeProvider].get(name), name.value)[0].node
        built = self.parents.get(self.parents.get(binding)).value  # type: ignore[union-attr]
        callee = dotted(built.func) or ""
        return callee in self.facts.dataset_classes or callee.rsplit(".", 1)[-1].endswith("Dataset") \
            or any(q.startswith("torchvision.datasets.") for q in qualified_names(self.metadata, built.func))

    def _model_output(self, expr: cst.BaseExpression) -> bool:
        """``net(x)``, or a name bound to it (``pred = net(x)``), for a model of the file."""
        root = _data_root(expr)
        if isinstance(root, cst.Name):
            target = self._reaching_binding(root)
            statement = self.parents.get(self.parents.get(target)) if target is not None else None
            root = _data_root(statement.value) if isinstance(statement, cst.Assign) else root
        return isinstance(root, cst.Call) and self._model_callee(root.func)

    def _model_callee(self, func: cst.BaseExpression) -> bool:
        """``net``, ``net.forward`` or one of the model's own methods (``policy.v``), not its module API."""
        if isinstance(func, cst.Attribute) and func.attr.value not in MODULE_API:
            func = func.value
        return self._is_model(func)

    def _is_model(self, func: cst.BaseExpression) -> bool:
        """This model, another model of the file, or a parameter this model is handed to."""
        return isinstance(func, cst.Name) and (func.value == self.model_name or func.value in self.model_names
                                               or func.value in self.aliases)

    # -- may it move? -------------------------------------------------------------------------
    def _blockers(self, held: HeldOut) -> list[int]:
        target = held.statement.targets[0].target
        if held.unpacked:
            line = self.parents.get(held.statement)
            if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
                return [held.line]  # no room for the line that would move it
            target = next(e.value for e in target.elements if e.value.value == held.name)  # type: ignore[attr-defined]
        return [line_of(self.metadata, use) for use in self._uses(target) if not self._fine_on_device(use)]

    def _uses(self, target: cst.CSTNode) -> list[cst.Name]:
        """The loads of this binding (``uses_of_binding`` leaves out a nested function's own
        variable of the same name, ``def forward(self, x)`` beside a module-level ``x``)."""
        return uses_of_binding(self.metadata, target) if isinstance(target, cst.Name) else []

    def _fine_on_device(self, use: cst.Name, depth: int = 0) -> bool:
        """Fed to this model, combined with its output, only its metadata read, sent back to
        the CPU, or turned by torch functions into values that are themselves only used so:
        each works the same once the value is on the model's device."""
        if id(use) in self.partner_uses:
            return True
        current: cst.CSTNode = use
        while True:
            parent = self.parents.get(current)
            if isinstance(parent, cst.Attribute) and parent.value is current:
                method = parent.attr.value
                if method in _LEAVES or (method == "numpy" and self.numpy_fixed):
                    return True
                if method == "numpy":
                    return False
                call = self.parents.get(parent)  # ``xs.pow(2)``: a tensor method's result lives with it
                current = call if isinstance(call, cst.Call) and call.func is parent else parent
            elif isinstance(parent, cst.Subscript) and parent.value is current:
                current = parent
            elif isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Element, cst.Tuple, cst.List)):
                current = parent  # ``net(held + noise)``, ``torch.cat((held, held))``
            elif isinstance(parent, cst.For) and parent.iter is current and isinstance(parent.target, cst.Name) \
                    and depth < _MAX_DEPTH:  # ``for row in xs``: each row is used as ``xs`` would be
                return all(self._fine_on_device(u, depth + 1) for u in self._uses(parent.target))
            elif isinstance(parent, cst.Arg):
                call = self.parents.get(parent)
                if not isinstance(call, cst.Call):
                    return False
                row = self._loop_target_for(parent, call) if depth < _MAX_DEPTH else None
                if row is not None:
                    return all(self._fine_on_device(u, depth + 1) for u in self._uses(row))
                func = call.func
                if self._model_callee(func):
                    return True  # a model or its method: its group moves with this one or stays with it
                if handed_with_a_model(self.metadata, call, self.model_names) is not None:
                    return True  # ``scaled_lookup(table, ids)``: they meet in the file's own function
                if is_loss_callee(call.func) and any(self._model_output(a.value) for a in call.args if a is not parent):
                    return True  # ``loss(other_net(x), y)``: the groups that share ``y`` move together
                if isinstance(func, cst.Attribute) and self._model_output(func.value):
                    return True  # ``q_out.gather(1, a)``: it meets a model's output
                if torch_data_function(self.metadata, call):
                    current = call  # its result lives where its inputs do
                    continue
                return isinstance(func, cst.Name) and func.value in _HARMLESS_CALLS
            elif isinstance(parent, cst.Assign) and len(parent.targets) == 1 and depth < _MAX_DEPTH \
                    and isinstance(parent.targets[0].target, cst.Name):
                return all(self._fine_on_device(u, depth + 1) for u in self._uses(parent.targets[0].target))
            elif isinstance(parent, cst.FormattedStringExpression) and parent.expression is current:
                return True  # ``f"{image}"``: formatted as ``print(image)`` would, on any device
            else:
                return False


def samples_a_distribution(call: cst.Call) -> bool:
    """``Normal(0, 0.01).sample((4, 3))``: a CPU tensor drawn from a distribution built from numbers."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value in ("sample", "rsample")
            and isinstance(func.value, cst.Call)):
        return False
    return bool(func.value.args) and all(is_number(a.value) for a in func.value.args)


def _makes_cpu_tensor(metadata: Mapping, call: cst.Call) -> bool:
    """``torch.Tensor(rows)`` / ``torch.from_numpy(a)`` / ``Normal(0, 1).sample(...)``, as written."""
    root = call
    while isinstance(root.func, cst.Attribute) and isinstance(root.func.value, cst.Call) \
            and root.func.attr.value not in ("sample", "rsample", "to", "cuda"):
        root = root.func.value
    if samples_a_distribution(root):
        return True
    return bool(qualified_names(metadata, root.func) & HOST_MAKERS) and not any(
        isinstance(n, cst.Attribute) and n.attr.value in ("to", "cuda") for n in walk(call))


def _library_names(names: set[str]) -> set[str]:
    return {n for n in names if n.startswith(_CPU_DATA_LIBRARIES)}


def _empty_container(value: cst.BaseExpression) -> bool:
    """``[]``, ``{}``, ``list()``, ``dict()``: a container filled later."""
    if isinstance(value, (cst.List, cst.Dict)):
        return not value.elements
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) \
        and value.func.value in ("list", "dict") and not value.args


def _data_root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``x[:10].view(-1, 28)`` -> ``x``: the value whose device the expression has."""
    node = expr
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in _SAME_DEVICE_METHODS:
            node = node.func.value
        elif isinstance(node, cst.Call) and dotted(node.func) in _SAME_DEVICE_WRAPPERS \
                and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
            node = node.args[0].value  # ``Variable(state)``, ``deepcopy(state)``: where ``state`` is
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Attribute) and node.attr.value == "data":
            node = node.value
        else:
            return node


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []

