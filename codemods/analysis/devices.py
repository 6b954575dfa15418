"""The device in scope: one lookup that every rule uses to say "the right device here".

The global device belongs to driver code only (see ``analysis/project.py``):

- a ``device`` parameter of the enclosing function (or of a function around a closure)
  always wins;
- driver code: the ``__main__`` block, the top level of a script no project file imports,
  and functions only they call (in a file no project file imports), when the function works
  with a device at all (calls a model or a loss, moves something, or names the device): the
  shared variable;
- a plain helper that is not driver code: the device of a tensor parameter
  (``t.device``), else nothing: it runs wherever its caller runs it (model
  construction, data statistics), and ``model.to()`` moves what construction built;
- the top level of a file other project files import: nothing (library code);
- inside an ``nn.Module`` method: the device of a tensor argument (``x.device``), an
  existing ``self.device``, else ``next(self.parameters()).device``; never the module
  global, which breaks DataParallel replicas and reuse of the module elsewhere;
- in Dataset methods and collate functions: no device at all (returns None), as
  does ``__init__`` of a model (a tensor built there belongs in a buffer instead).
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Mapping

import libcst as cst

from .tree import ancestors, chain_root, code_of, line_of, walk
from .project import FileRole
from .tensor_names import COUNT_NAME as _COUNT_NAME, NON_TENSOR_PARAMS as _NON_TENSOR_PARAMS, \
    TORCH_ONLY_ATTRIBUTES as _TORCH_ONLY_ATTRIBUTES
from .roles import builds_model, is_loss_callee, is_model_callee, is_model_method_call, model_variables
from .tensors import bound_before
from .names import dotted, qualified_names
from .scopes import ClassFacts, Place, ScopeKind, enclosing_place, is_main_guard

CUDA_STRINGS = frozenset({"cuda", "cuda:0"})
DEVICE_LIKE_NAMES = frozenset({"device", "dev", "DEVICE", "torch_device", "DEV"})
# Reading one of these on a parameter says it is a tensor.
_TENSOR_ATTRIBUTES = frozenset({"shape", "device", "dtype", "ndim", "size", "dim", "numel"})


def cuda_string(node: cst.CSTNode) -> str | None:
    """The value of a ``"cuda"`` / ``"cuda:0"`` literal, else None. Other GPUs are deliberate."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        if isinstance(value, str) and value in CUDA_STRINGS:
            return value
    return None


def is_torch_device_call(metadata: Mapping, node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and "torch.device" in qualified_names(metadata, node.func)


def hardcoded_cuda(metadata: Mapping, node: cst.CSTNode) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")`` or ``torch.device("cuda", 0)``."""
    if cuda_string(node):
        return True
    if is_torch_device_call(metadata, node):
        args = node.args  # type: ignore[attr-defined]
        if len(args) == 1 and cuda_string(args[0].value):
            return True
        if (len(args) == 2 and isinstance(args[0].value, cst.SimpleString)
                and args[0].value.evaluated_value == "cuda"
                and isinstance(args[1].value, cst.Integer) and args[1].value.value == "0"):
            return True
    return False


def hands_a_device(call: cst.Call, names: frozenset[str] = DEVICE_LIKE_NAMES, but: cst.Arg | None = None) -> bool:
    """``Trainer(device, net, opt)``, ``restore(net, img, mask, dev)``, ``f(x, device=d)``: one of the
    call's arguments (other than ``but``) is a device, by keyword or by a device-like variable name."""
    return any(arg is not but and (arg.keyword is not None and arg.keyword.value == "device"
                                   or isinstance(arg.value, cst.Name) and arg.value.value in names)
               for arg in call.args)


def is_device_definition(metadata: Mapping, name: str, value: cst.BaseExpression) -> bool:
    """Does ``name = value`` define a device? Shapes seen in real code, any variable name."""
    if is_torch_device_call(metadata, value):
        return True
    if cuda_string(value) or _string_device_choice(value):
        return True
    for node in walk(value):
        if isinstance(node, cst.Call) and any(
                q.startswith("torch.accelerator.") for q in qualified_names(metadata, node.func)):
            return True
    return name in DEVICE_LIKE_NAMES and not isinstance(value, (cst.Integer, cst.Float, cst.Name)) \
        and not _surely_no_device(value)


# Containers, and the data sets a "dev" split is loaded with (``dev = TabularDataset(...)``).
_DATA_WORD = re.compile(r"data|loader|iter|split|corpus|examples", re.IGNORECASE)


def _surely_no_device(value: cst.BaseExpression) -> bool:
    """``dev = ["validation", ...]``, ``dev = "dev.tsv"``, ``dev = TabularDataset(...)``: a name that
    reads like a device holding a development set."""
    if isinstance(value, (cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp,
                          cst.GeneratorExp, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(value, cst.SimpleString):
        text = value.evaluated_value
        return not isinstance(text, str) or not re.fullmatch(r"(cpu|cuda|mps|xpu|meta)(:\d+)?", text)
    if isinstance(value, cst.Call):
        callee = (dotted(value.func) or "").rsplit(".", 1)[-1]
        return bool(_DATA_WORD.search(callee)) and "device" not in callee.lower()
    return False


def _string_device_choice(value: cst.BaseExpression) -> bool:
    """``"cuda" if cond else "cpu"`` (also nested): a device chosen as a string."""
    if isinstance(value, cst.IfExp):
        branches = (value.body, value.orelse)
        return any(cuda_string(b) or _string_device_choice(b) for b in branches) and all(
            isinstance(b, (cst.SimpleString, cst.IfExp)) for b in branches)
    return False



@dataclass(frozen=True)
class DeviceDefinition:
    name: str
    statement: cst.SimpleStatementLine
    assign: cst.Assign


def module_device_definitions(module: cst.Module, metadata: Mapping) -> list[DeviceDefinition]:
    """Device definitions at module level (also inside ``if``/``try``/``with`` blocks there)."""
    found: list[DeviceDefinition] = []
    for stmt in _module_level(module.body):
        for small in stmt.body:
            if (isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)):
                name = small.targets[0].target.value
                if is_device_definition(metadata, name, small.value):
                    found.append(DeviceDefinition(name, stmt, small))
    return found


def chosen_conditionally(definitions: list[DeviceDefinition], module: cst.Module, name: str) -> bool:
    """Is ``name`` assigned only in some branches of module-level ``if``/``try``/``with``
    blocks (``if args.accel: device = ...`` with no ``else``)? Then code outside that branch
    deliberately stays on the CPU, and hoisting or reusing the variable would change that."""
    own = [d for d in definitions if d.name == name]
    return bool(own) and not any(movable(d, module) or _every_branch(d, module) for d in own)


def defined_from_line(definitions: list[DeviceDefinition], module: cst.Module, name: str,
                      metadata: Mapping) -> int | None:
    """The line of the block that always binds ``name`` in every branch (``if cuda: device = ...
    else: device = ...``) when no definition can be moved: module code above it has no device."""
    own = [d for d in definitions if d.name == name]
    if not own or any(movable(d, module) for d in own):
        return None
    lines = [line_of(metadata, _top(d, module)) for d in own if _every_branch(d, module)]
    return min(lines, default=None)


def movable(definition: DeviceDefinition, module: cst.Module) -> bool:
    """A top-level definition (or one in the main guard) that DM101 may move up."""
    if definition.statement in module.body:
        return True
    return any(is_main_guard(stmt) and definition.statement in stmt.body.body for stmt in module.body
               if isinstance(stmt, cst.If))


def _top(definition: DeviceDefinition, module: cst.Module) -> cst.BaseStatement:
    return next(stmt for stmt in module.body if any(n is definition.statement for n in walk(stmt)))


def _every_branch(definition: DeviceDefinition, module: cst.Module) -> bool:
    """Is the definition in a top-level ``if``/``else`` or ``try``/``except`` every branch of
    which assigns the same name (so the name is always bound after the block)?"""
    block = _top(definition, module)
    if isinstance(block, cst.If):
        branches, current = [], block
        while isinstance(current, cst.If):
            branches.append(current.body)
            current = current.orelse
        if current is None:
            return False
        branches.append(current.body)
    elif isinstance(block, cst.Try):
        branches = [block.body, *(h.body for h in block.handlers)]
    else:
        return False
    return all(any(isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == definition.name
                                              for t in small.targets) for small in stmt.body)
        for stmt in branch.body) for branch in branches)


# Names that hold the user's settings: ``args.device`` is a device the user chose.
_SETTINGS_NAMES = frozenset({"args", "opt", "opts", "cfg", "config", "conf", "hparams", "hp", "params",
                             "FLAGS", "flags", "settings", "options"})


def user_chosen_device(module: cst.Module, text: str | None = None) -> str | None:
    """Does the file take its device from the user's settings (``args.device``,
    ``cfg.device``)? Then a second, global device would override the user's choice
    (``--device cpu`` on a GPU machine): the file's own choice is left to decide. So it is
    for a file that shares a model between processes (``model.share_memory()``).
    The answer is what shows it, as a report's reason names it (None: nothing does).
    ``text``: the module's source, when known: without any of the words these need, the
    tree is not walked."""
    if text is not None and not any(word in text for word in _USER_DEVICE_WORDS) \
            and not _SETTINGS_DEVICE.search(text):
        return None
    for node in walk(module):
        if isinstance(node, (cst.Import, cst.ImportFrom)) and _imports_placer(node):
            # Accelerate / Fabric place the model and prepared loaders themselves
            return "the file leaves placement to Accelerate or Fabric"
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == "add_argument":
            flag = next((a.value.evaluated_value for a in node.args if a.keyword is None
                         and isinstance(a.value, cst.SimpleString) and _DEVICE_FLAG.search(a.value.value)), None)
            if flag is not None:  # ``--cuda`` / ``--device`` / ``--no-cuda``: the user picks where it runs
                return f"the file has a `{flag}` option, so where it runs is the user's choice"
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == "share_memory" and not node.args:
            # Hogwild: models in CPU shared memory for forked workers, which cannot use CUDA
            return "the file shares a model between processes (`share_memory()`), which keeps it on the CPU"
        if isinstance(node, cst.Attribute) and node.attr.value == "device":
            base = node.value
            while isinstance(base, cst.Attribute):
                base = base.value
            if isinstance(base, cst.Name) and base.value in _SETTINGS_NAMES:
                return f"the file takes its device from the user's settings (`{code_of(node)}`)"
    return None


# Words without which ``user_chosen_device`` finds nothing (a text check before the walk).
_USER_DEVICE_WORDS = ("accelerate", "fabric", "add_argument", "share_memory")
_SETTINGS_DEVICE = re.compile(r"\b(?:" + "|".join(sorted(_SETTINGS_NAMES)) + r")\s*\)?\s*\.[\w.\s()]*\bdevice\b")
_DEVICE_FLAG = re.compile(r"^[rbuRBU]*['\"]--?(no[-_])?(use[-_])?(cuda|gpus?|device|cpu)['\"]$")
_PLACERS = ("accelerate", "lightning.fabric", "lightning_fabric")


def _imports_placer(node: cst.Import | cst.ImportFrom) -> bool:
    """``from accelerate import Accelerator``: a library that owns the device of what it prepares
    (on ``Accelerator(cpu=True)`` or on rank 1 the shared ``cuda`` device would be wrong)."""
    if isinstance(node, cst.ImportFrom):
        names = [dotted(node.module) or ""] if node.module is not None and not node.relative else []
    else:
        names = [dotted(a.name) or "" for a in node.names]
    return any(n == p or n.startswith(p + ".") for n in names for p in _PLACERS)


def runs_per_rank(module: cst.Module, text: str | None = None) -> bool:
    """Does the file import torch.distributed, DistributedDataParallel or Horovod, or wrap a model in
    ``nn.parallel.DistributedDataParallel`` (one process per GPU)? ``text``: the module's source, when
    known: without the word, the tree is not walked for the wrapper."""
    if (text is None or "DistributedDataParallel" in text) and any(
            isinstance(n, cst.Attribute) and n.attr.value == "DistributedDataParallel" for n in walk(module)):
        return True  # ``nn.parallel.DistributedDataParallel(net, device_ids=[gpu])`` (vicreg)
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue  # imports inside blocks are rare; top-level ones decide
        for small in stmt.body:
            if isinstance(small, cst.Import):
                if any((dotted(a.name) or "").startswith(_PER_RANK_MODULES) for a in small.names):
                    return True
            elif isinstance(small, cst.ImportFrom) and small.module is not None:
                source = dotted(small.module) or ""
                names = small.names if isinstance(small.names, (list, tuple)) else ()
                if source.startswith(_PER_RANK_MODULES) or any(  # (``from torch import distributed``)
                        dotted(a.name) == "DistributedDataParallel"
                        or (source == "torch" and dotted(a.name) == "distributed") for a in names):
                    return True
    return False


# Imports that make a program one process per GPU (``horovod.torch``: once-for-all's training).
_PER_RANK_MODULES = ("torch.distributed", "horovod")


def _module_level(body):
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield stmt
        elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
            yield from _module_level(stmt.body.body)
            orelse = getattr(stmt, "orelse", None)
            if isinstance(orelse, cst.Else):
                yield from _module_level(orelse.body.body)


def shared_device_name(definitions: list[DeviceDefinition], default: str) -> str:
    """Reuse the file's own device variable when it has one; else the configured name.

    A variable that is always the CPU (``cpu = torch.device("cpu")``) is intent, not the
    shared device.
    """
    usable = [d for d in definitions if not always_cpu(d.assign.value)]
    for definition in usable:
        if definition.name == default:
            return default
    return usable[0].name if usable else default


def always_cpu(value: cst.BaseExpression) -> bool:
    """``"cpu"``, or a one-argument call of it (``torch.device("cpu")``)."""
    if isinstance(value, cst.Call) and len(value.args) == 1:
        value = value.args[0].value
    return isinstance(value, cst.SimpleString) and value.evaluated_value == "cpu"


class DeviceLookup:
    """Answers "which device expression belongs at this node?" for every rule."""

    def __init__(self, metadata: Mapping, facts: ClassFacts, shared_name: str,
                 chosen_conditionally: bool = False, per_rank: bool = False,
                 defined_from: int | None = None, role: FileRole | None = None,
                 module: cst.Module | None = None, user_device: str | None = None) -> None:
        self.metadata = metadata
        self.role = role or FileRole()
        self.user_device = user_device
        self.module = module
        self._works_with_device: dict[int, bool] = {}
        self._early_calls: dict[tuple[cst.ClassDef, cst.FunctionDef], bool] = {}  # (nodes of this tree)
        self._defined: frozenset[str] | None = None  # the file's function and method names
        self.facts = facts
        self.shared_name = shared_name
        # The file picks its device inside an ``if`` (``if args.accel: device = ...``): code
        # outside that branch deliberately stays where it is, so the global is no answer.
        self.chosen_conditionally = chosen_conditionally
        # One process per GPU (torch.distributed): each rank has its own device, so a global
        # ``cuda`` device would put every rank's tensors on GPU 0.
        self.per_rank = per_rank
        # Module code above an if/else that defines the device in every branch has none yet.
        self.defined_from = defined_from

    def place(self, node: cst.CSTNode) -> Place:
        return enclosing_place(self.metadata, node, self.facts)

    def expression_for(self, node: cst.CSTNode, replaces_cuda: bool = False) -> cst.BaseExpression | None:
        """The device expression to use at ``node`` (an original node), or None: leave it.

        ``replaces_cuda``: the fix swaps a placement the author already wrote (``.cuda()``,
        ``"cuda"``, a ``torch.cuda.FloatTensor`` alias) for the shared device, which is the
        same device on a GPU machine; such a fix may use the shared device in library code
        too, but never in a file others import (outside its main block): the global device belongs
        to driver code, so there the fix follows a tensor parameter or is not made. A fix that adds
        a placement where none was written follows driver code only."""
        if replaces_cuda and self.in_library_code(node):
            replaces_cuda = False
        place = self.place(node)
        if place.kind in (ScopeKind.DATA_METHOD, ScopeKind.DATA_CALLBACK):
            return None
        if place.kind is ScopeKind.MODEL_METHOD:
            return self._model_device(place, node)
        if place.kind is ScopeKind.OTHER_METHOD:
            return None  # unknown objects: no safe guess
        functions = list(self._enclosing_functions(node))
        local = self.local_device(node)
        if local and not bound_before(self.metadata, node, local):
            return None  # ``net = net.cuda()`` above ``dev = next(net.parameters()).device``: UnboundLocalError
        if local:
            return cst.Name(local)
        if place.kind is ScopeKind.FUNCTION and not replaces_cuda:
            outer = functions[-1]
            # A function in a file others import stays library code even when its own main block
            # calls it: ``from models.dla import test; test()`` must keep working. One defined
            # inside the main block exists only there: it is driver code.
            in_main = self._in_main_block(outer)
            driver = in_main or (not self.role.imported and outer.name.value in self.role.driver_functions)
            tensor = self._helper_tensor_parameter(functions)
            if in_main and tensor:
                return cst.Attribute(cst.Name(tensor), cst.Name("device"))  # the device its own code follows
            if not (driver and self._uses_device(outer)):
                return cst.Attribute(cst.Name(tensor), cst.Name("device")) if tensor else None
        elif place.kind is ScopeKind.MODULE and not replaces_cuda and self.role.imported \
                and not self._in_main_block(node):
            return None  # a module others import: its top level is library code
        elif place.kind is ScopeKind.MODULE and not replaces_cuda and not self._top_level_uses_device():
            return None  # a script with no model, loss or move (an autograd demo): nothing to meet
        if self.chosen_conditionally or self.per_rank or self.user_device:
            return None
        if self.defined_from is not None and place.kind is ScopeKind.MODULE \
                and line_of(self.metadata, node) < self.defined_from:
            return None
        return cst.Name(self.shared_name)

    def input_device(self, node: cst.CSTNode) -> cst.Attribute | None:
        """``x.device`` of the tensor input that the forward path or helper around ``node``
        computes on, or None (driver code, construction, data code, no tensor input)."""
        place = self.place(node)
        functions = list(self._enclosing_functions(node))
        if place.kind is ScopeKind.MODEL_METHOD and place.function is not None and place.klass is not None:
            method = self._method_around(place.function)
            if method.name.value in construction_methods(place.klass):
                return None
            function = place.function
            tensor = self._method_tensor_input(function)
        elif place.kind is ScopeKind.FUNCTION and functions and not self._in_main_block(functions[-1]) \
                and (self.role.imported or functions[-1].name.value not in self.role.driver_functions):
            tensor = self._helper_tensor_parameter(functions)
        else:
            return None
        return cst.Attribute(cst.Name(tensor), cst.Name("device")) if tensor else None

    def local_device(self, node: cst.CSTNode) -> str | None:
        """The device parameter (or local device) of a function around ``node``, if any."""
        return next(filter(None, map(self._function_device_name, self._enclosing_functions(node))), None)

    def in_library_code(self, node: cst.CSTNode) -> bool:
        """Code of a file others import, outside its main block: it gets no global device."""
        return self.role.imported and not self._in_main_block(node)

    def _in_main_block(self, node: cst.CSTNode) -> bool:
        return any(is_main_guard(parent) for parent in ancestors(self.metadata, node))

    def _top_level_uses_device(self) -> bool:
        """Does the file's top level (main block included, defs and classes not) build a model,
        call one or a loss, hand a model to a call, move something or name the shared device?"""
        known = self._works_with_device.get(0)
        if known is None and self.module is not None:
            models = model_variables(self.metadata, self.module, self.facts)
            known = bool(models) or any(  # a script that builds a model moves it, and what meets it
                self._device_work(child, models, top_level=True)
                for stmt in self.module.body if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef))
                for child in walk(stmt))
            self._works_with_device[0] = known
        return bool(known) or self.module is None

    def _uses_device(self, function: cst.FunctionDef) -> bool:
        """Does a driver function work with a device at all: call a model or a loss, move
        something, or name the shared device? One that only builds or summarises tensors
        (``mean_std(loader)``, ``build_model()``) hands them to a caller that decides."""
        known = self._works_with_device.get(id(function))
        if known is None:
            models = model_variables(self.metadata, self.module, self.facts) if self.module is not None else set()
            known = any(self._device_work(child, models) for child in walk(function.body))
            self._works_with_device[id(function)] = known
        return known

    def _device_work(self, node: cst.CSTNode, models: set[str], top_level: bool = False) -> bool:
        """Is ``node`` device work: the shared device's name, a call of a model or a loss, a
        ``.to`` / ``.cuda``; at a script's top level also building a model or handing one over."""
        if isinstance(node, cst.Name):
            return node.value == self.shared_name
        if not isinstance(node, cst.Call):
            return False
        func = node.func
        if is_model_callee(func, models) or is_model_method_call(func, models) or is_loss_callee(func) \
                or isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda"):
            return True
        return top_level and (builds_model(self.metadata, node, self.facts)
                              or any(is_model_callee(a.value, models) for a in node.args))

    def _helper_tensor_parameter(self, functions: list[cst.FunctionDef]) -> str | None:
        """A helper's tensor parameter, innermost function first: annotated ``Tensor``, or read
        as one (``t.shape``, ``t.device``, ``t.size()``)."""
        for function in functions:
            params = [p for p in (*function.params.posonly_params, *function.params.params,
                                  *function.params.kwonly_params) if p.name.value not in ("self", "cls")]
            for param in params:
                annotation = dotted(param.annotation.annotation) if param.annotation else None
                if annotation and annotation.rsplit(".", 1)[-1] == "Tensor":
                    return param.name.value
            read = _used_as_tensor(function, _TENSOR_ATTRIBUTES)
            if read:
                return read
        return None

    def _enclosing_functions(self, node: cst.CSTNode):
        """The defs around ``node``, innermost first: a closure sees its outer function's device."""
        for parent in ancestors(self.metadata, node):
            if isinstance(parent, cst.FunctionDef):
                yield parent
            elif isinstance(parent, cst.ClassDef):
                return

    def cuda_is_the_ranks(self, node: cst.CSTNode) -> bool:
        """One process per GPU that calls ``torch.cuda.set_device`` (itself or through a project
        helper): a bare ``.cuda()`` / ``"cuda"`` in its driver code already is the rank's own GPU."""
        if self.per_rank and self.in_library_code(node):
            return True  # a distributed program's helper: its driver picks each rank's GPU
        if not (self.per_rank and self.role.sets_cuda_device
                and self.place(node).kind in (ScopeKind.MODULE, ScopeKind.FUNCTION, ScopeKind.OTHER_METHOD)):
            return False
        # ``x.cuda()`` and only later ``init_distributed_mode(args)`` in the same function: every rank
        # is still on GPU 0 there (a true report)
        scope = next(iter(self._enclosing_functions(node)), None)
        body = scope.body if scope is not None else self.module
        setters = [c for c in walk(body) if isinstance(c, cst.Call) and dotted(c.func) in self.role.cuda_device_setters]
        line = line_of(self.metadata, node)
        return not setters or any(line_of(self.metadata, c) < line for c in setters)

    def _moves_a_new_module(self, node: cst.CSTNode) -> bool:
        """``VGG19().cuda()``: the move of a module built right there."""
        return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value in ("cuda", "to") and isinstance(node.func.value, cst.Call) \
            and builds_model(self.metadata, node.func.value, self.facts)

    def _in_a_plain_container(self, node: cst.CSTNode) -> bool:
        """Inside a list, tuple or dict (literal or comprehension) that no ``nn.ModuleList(...)``
        (or any other call) wraps."""
        for parent in ancestors(self.metadata, node):
            if isinstance(parent, (cst.List, cst.ListComp, cst.Tuple, cst.Dict, cst.DictComp)):
                return not any(isinstance(a, cst.Call) for a in ancestors(self.metadata, parent)
                               if not isinstance(a, (cst.FunctionDef, cst.ClassDef, cst.Module)))
            if isinstance(parent, (cst.Call, cst.SimpleStatementLine)) and parent is not node:
                return False
        return False

    def why_no_device(self, node: cst.CSTNode) -> str:
        """A one-line reason for a report where ``expression_for`` gave None."""
        kind = self.place(node).kind
        if self.per_rank and kind in (ScopeKind.MODULE, ScopeKind.FUNCTION):
            return ("this file uses torch.distributed, where each rank has its own device; use the "
                    "rank's device (e.g. `torch.device('cuda', local_rank)`) here")
        if self.user_device and kind in (ScopeKind.MODULE, ScopeKind.FUNCTION):
            return f"{self.user_device}; use the device the user chose here"
        if self.chosen_conditionally and kind in (ScopeKind.MODULE, ScopeKind.FUNCTION):
            return (f"the file assigns `{self.shared_name}` only inside a conditional block, so code "
                    "outside it deliberately stays on the CPU; place this tensor by hand")
        place = self.place(node)
        if kind is ScopeKind.DATA_METHOD and place.function is not None and place.klass is not None \
                and place.function.name.value not in _LOADER_PROTOCOL \
                and not _called_on_self(place.klass, place.function.name.value):
            # ``EvalSet.predict_flipped(self, model, image)`` (DEQ): a Dataset's own helper that runs
            # a model, not what its DataLoader calls
            return (f"this runs in `{place.function.name.value}`, a method of a Dataset class that its DataLoader "
                    "does not call, and devmod places nothing there; use the device of a tensor it works on "
                    "(e.g. `x.device`)")
        if kind in (ScopeKind.DATA_METHOD, ScopeKind.DATA_CALLBACK):
            return ("this runs in data-loading code (Dataset or collate function), where tensors must stay "
                    "on the CPU; move the batch in the training loop instead")
        if kind is ScopeKind.MODEL_METHOD:
            # The buffer advice fits __init__ only: an ordinary method works on its inputs, and
            # telling its author the line is in __init__ is a false report.
            method = self._model_method(node)
            name = method.name.value if method is not None else "?"
            if name == "__init__" and self._moves_a_new_module(node) and self._in_a_plain_container(node):
                return ("this runs in a model's __init__, and the module is kept in a plain list or dict, which "
                        "model.to(device) does not see; keep it in an nn.ModuleList (or nn.ModuleDict) and drop "
                        "the move")  # DomainBed's ``self.clist = [nn.Linear(...).cuda() for ...]``
            if name == "__init__" and self._moves_a_new_module(node):
                return ("this runs in a model's __init__; drop the move: a sub-module built here moves with "
                        "the model's own model.to(device)")  # SPADE's ``self.vgg = VGG19().cuda()``
            if name == "__init__":  # (a tensor, or a module of a class devmod cannot see: WaveGlow's ``STFT``)
                return ("this runs in a model's __init__, where nothing needs placing: register a tensor as a "
                        "buffer, or drop the move of a sub-module; model.to(device) moves both")
            if method is not None and _instance_parameter(method) is None:
                return (f"this runs in the model's static or class method `{name}`, which has no model to read "
                        "the device from; use the device of the tensors it works on (e.g. `x.device`) or pass "
                        "one in")
            receiver = _instance_parameter(method) if method is not None else None
            if receiver is not None and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and isinstance(node.func.value, cst.Name) and node.func.value.value == receiver:
                return (f"`{receiver}.cuda()` in the model method `{name}` moves the model itself, and its own "
                        "parameters cannot say where it should go; pass the device in and use "
                        f"`{receiver}.to(device)`")
            klass = next((a for a in ancestors(self.metadata, node) if isinstance(a, cst.ClassDef)), None)
            if method is not None and klass is not None and self.module is not None \
                    and self._called_before_moved(klass, method):
                return (f"the file calls the model method `{name}` before it moves the model, so the model's "
                        "parameters are no guide to the device there; pass the device in")
            if method is not None and _moves_its_parameters(method, but=_instance_parameter(method)):
                return (f"the model method `{name}` moves its own inputs to the GPU, so they may arrive on the CPU "
                        "and carry no device to follow; pass the device in, or use the device of the model's "
                        "parameters")  # robustness's attacker: ``orig_input = orig_input.cuda()``
            return (f"this runs in the model method `{name}`, where devmod finds no tensor input to take the "
                    "device from and does not read it from the model's parameters here; use the device of the "
                    "tensors it works on (e.g. `x.device`) or of the model's parameters")
        if kind in (ScopeKind.MODULE, ScopeKind.FUNCTION) and self.in_library_code(node):
            return ("this file is library code (other project files import it, or it is a module of a package "
                    "that runs nothing when imported), and the device belongs to the code that runs the program; "
                    "take a device parameter, or use the device of a tensor it works on")
        if kind is ScopeKind.OTHER_METHOD:
            klass = next((a for a in ancestors(self.metadata, node) if isinstance(a, cst.ClassDef)), None)
            owner = f"a method of `{klass.name.value}`" if klass is not None else "a method of a class"
            layer = next((code_of(b.value) for b in klass.bases if code_of(b.value).startswith(("nn.", "torch.nn."))),
                         None) if klass is not None else None
            if layer is not None:  # ``class GatedConv(nn.Conv2d)``: a layer, which devmod does not read as a model
                return (f"this runs in {owner}, a subclass of the torch.nn class `{layer}` that devmod does not read "
                        "as a model, and devmod places nothing there; use the device of a tensor it works on (e.g. "
                        "`x.device`) or of the module's own parameters or buffers")
            return (f"this runs in {owner}, which is neither a model nor driver code, and devmod places nothing "
                    "there; use the device of a tensor it works on (e.g. `x.device`) or a device the object holds")
        return "devmod has no device for this place; pass a device in explicitly"

    def _model_method(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The method of the class around ``node`` (the outer def, for a closure inside it)."""
        method = None
        for parent in ancestors(self.metadata, node):
            if isinstance(parent, cst.FunctionDef):
                method = parent
            elif isinstance(parent, cst.ClassDef):
                break
        return method

    def _function_device_name(self, function: cst.FunctionDef) -> str | None:
        """A ``device`` parameter, or a device the function defines itself (the author's choice;
        rules check that it is bound before the line they fix)."""
        params = function.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if (param.name.value in DEVICE_LIKE_NAMES or param.name.value == self.shared_name) \
                    and not _given_other_strings(function, param.name.value):
                return param.name.value
        if isinstance(function.body, cst.IndentedBlock):
            for stmt in function.body.body:
                for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                    if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                            and isinstance(small.targets[0].target, cst.Name) \
                            and is_device_definition(self.metadata, small.targets[0].target.value, small.value):
                        return small.targets[0].target.value
        return None

    def _model_device(self, place: Place, node: cst.CSTNode | None = None) -> cst.BaseExpression | None:
        function = place.function
        assert function is not None and place.klass is not None
        method = self._method_around(function)  # a def nested in a method is no method itself
        if method.name.value in construction_methods(place.klass):
            return None  # runs while the parameters are still on the CPU: ``model.to()`` places later
        tensor_param = self._method_tensor_input(function)
        if tensor_param and _rebound_off_torch(function, tensor_param):
            tensor_param = None  # ``feats = feats.cpu().numpy()``: no tensor to ask for a device any more
        if tensor_param and _moves_the_input_itself(node, tensor_param):
            # ``sample.unsqueeze(0).cuda()`` in ``encode_one(self, sample)`` (glow): the author sends the
            # input to the model's GPU; its own device would be a move to where it already is
            tensor_param = None
        if tensor_param and not _moves_its_parameters(function):
            return cst.Attribute(cst.Name(tensor_param), cst.Name("device"))
        receiver = _instance_parameter(method)
        sized = _sized_input(node, function)
        if receiver is None:
            return sized  # a staticmethod or classmethod has no instance to ask for its device
        if _class_has_device_attribute(place.klass):
            return cst.Attribute(cst.Name(receiver), cst.Name("device"))
        buffer = _registered_buffer(place.klass)
        if buffer is not None:  # sure to exist, unlike a parameter of a sub-module that may have none
            return cst.Attribute(cst.Attribute(cst.Name(receiver), cst.Name(buffer)), cst.Name("device"))
        if not _may_have_parameters(place.klass):
            return sized  # ``next(self.parameters())`` would raise StopIteration (a loss module)
        if self.in_library_code(function):
            # A library's model may run with its weights offloaded (accelerate's meta-device hooks),
            # where its first parameter's device is not where its work runs: no guess there.
            return sized
        if receiver is not None and _moves_own_part(node, receiver):
            return sized  # ``self.net.cuda()``: the model's first parameter may be that part's own
        if self.module is not None and self._called_before_moved(place.klass, method):
            return sized  # ``h = enc.init_hidden()`` then ``enc.cuda()``: its parameters are still on the CPU
        return cst.parse_expression(f"next({receiver}.parameters()).device")

    def _called_before_moved(self, klass: cst.ClassDef, method: cst.FunctionDef) -> bool:
        """``_called_before_moved`` once per method: it walks the whole file."""
        key = (klass, method)
        if key not in self._early_calls:
            assert self.module is not None
            self._early_calls[key] = _called_before_moved(self.metadata, self.module, klass, method)
        return self._early_calls[key]

    def _method_around(self, function: cst.FunctionDef) -> cst.FunctionDef:
        """The method that ``function`` is, or is nested in: the outermost def below the class."""
        return [function, *self._enclosing_functions(function)][-1]

    def _method_tensor_input(self, function: cst.FunctionDef) -> str | None:
        """The input a model method computes on: forward's, one read or annotated as a tensor, or
        one handed to the model's own parts."""
        return self._tensor_parameter(function) or _used_as_tensor(function) \
            or _fed_to_own_parts(function, self._method_names())

    def _method_names(self) -> frozenset[str]:
        """The names of the file's functions and methods (``self._draw(n, c)`` calls a method, no layer)."""
        if self._defined is None:
            self._defined = frozenset(n.name.value for n in walk(self.module) if isinstance(n, cst.FunctionDef)) \
                if self.module is not None else frozenset()
        return self._defined

    @staticmethod
    def _tensor_parameter(function: cst.FunctionDef) -> str | None:
        """forward's first input, or any parameter annotated as a Tensor."""
        params = [p for p in function.params.params if p.name.value not in ("self", "cls")]
        for param in params:
            annotation = dotted(param.annotation.annotation) if param.annotation else None
            if annotation and annotation.rsplit(".", 1)[-1] == "Tensor":
                return param.name.value
        if function.name.value == "forward" and params:
            first = params[0]
            if first.default is None and first.annotation is None and first.name.value not in _NON_TENSOR_PARAMS \
                    and not _COUNT_NAME.search(first.name.value) and not _used_as_container(function, first.name.value) \
                    and first.name.value not in _converted_to_tensors(function) \
                    and first.name.value not in _tested_for_other_types(function):  # ``isinstance(inputs, list)``
                return first.name.value
        return None


_MAPPING_METHODS = frozenset({"items", "keys", "values", "get"})


_TORCH_DEVICE_TYPES = frozenset({"cpu", "cuda", "mps", "xpu", "meta", "hip", "xla", "npu", "hpu", "ipu", "mtia"})


def _given_other_strings(function: cst.FunctionDef, name: str) -> bool:
    """``@pytest.mark.parametrize("device", ["cpu", "cuda", "auto"])`` (stable-baselines3's tests):
    the parameter also takes a string no torch function accepts, for a library of its own that
    resolves it; a factory given ``device=device`` would raise."""
    for decorator in function.decorators:
        call = decorator.decorator
        if not (isinstance(call, cst.Call) and (dotted(call.func) or "").endswith("parametrize") and len(call.args) >= 2):
            continue
        names = call.args[0].value
        if not (isinstance(names, cst.SimpleString) and name in str(names.evaluated_value).replace(" ", "").split(",")):
            continue
        for node in walk(call.args[1].value):
            value = node.evaluated_value if isinstance(node, cst.SimpleString) else None
            if isinstance(value, str) and value.split(":")[0] not in _TORCH_DEVICE_TYPES:
                return True
    return False


def _moves_its_parameters(function: cst.FunctionDef, but: str | None = None) -> bool:
    """``label_map.cuda()`` on a parameter (pix2pixHD's ``encode_input``): the method moves its
    inputs to the GPU, so they arrive on the CPU and carry no device to follow. (``kernel.to(
    x.device)`` follows another input: that one does carry it.) ``but``: a parameter not to count."""
    params = {p.name.value for p in (*function.params.posonly_params, *function.params.params,
                                     *function.params.kwonly_params)} - {but}
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "cuda"
               and isinstance(n.func.value, cst.Name) and n.func.value.value in params for n in walk(function.body))


def _moves_own_part(node: cst.CSTNode | None, receiver: str) -> bool:
    """``self.net.cuda()``: a move of one of the model's own attributes; or ``self.cuda()``, of
    the model itself (to its own parameters' device, it would stay where it is)."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return False
    moved = node.func.value
    if isinstance(moved, cst.Name) and moved.value == receiver:
        return True
    return isinstance(moved, cst.Attribute) and isinstance(moved.value, cst.Name) and moved.value.value == receiver


def _used_as_container(function: cst.FunctionDef, name: str) -> bool:
    """``outputs["pred_boxes"]``, ``outputs.items()``: the parameter is a dict (detr's matcher takes
    the model's output dict), which has no ``.device``. (Iterating it proves nothing: ``for row in x``
    reads a tensor's rows.) Also a tuple the body unpacks (``audio, spect = forward_input``,
    WaveGlow's): a pair of tensors, which has no ``.device`` either; and a list of ids whose items go
    into a Python set (graphsage's ``set([nodes[i]])``: a tensor's items would hash by identity)."""
    for node in walk(function.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value == name \
                and any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            return True
        if isinstance(node, cst.Set) or isinstance(node, cst.Call) and dotted(node.func) in ("set", "frozenset"):
            items = [e.value for e in node.elements] if isinstance(node, cst.Set) else [
                e.value for a in node.args for e in (a.value.elements if isinstance(a.value, (cst.List, cst.Tuple))
                                                     else [a])]
            if any(isinstance(i, cst.Subscript) and isinstance(i.value, cst.Name) and i.value.value == name
                   for i in items):
                return True
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == name:
            index = node.slice[0].slice if len(node.slice) == 1 else None
            if isinstance(index, cst.Index) and isinstance(index.value, (cst.SimpleString, cst.ConcatenatedString,
                                                                         cst.FormattedString)):
                return True
        elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == name \
                and node.attr.value in _MAPPING_METHODS:
            return True
    return _only_counted(function, name)


def _only_counted(function: cst.FunctionDef, name: str) -> bool:
    """``torch.randn(len(sentences), 8)`` and nothing else of ``sentences``: a stand-in encoder of a
    list of strings (pytorch-metric-learning's tests); a tensor input would be computed on."""
    counted = seen = 0
    for node in walk(function.body):
        if isinstance(node, cst.Call) and dotted(node.func) == "len" and len(node.args) == 1 \
                and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == name:
            counted += 1
        elif isinstance(node, cst.Name) and node.value == name:
            seen += 1
    return counted > 0 and seen == counted


def _used_as_tensor(function: cst.FunctionDef, attributes: frozenset[str] = _TORCH_ONLY_ATTRIBUTES) -> str | None:
    """A parameter that the body reads as a tensor (one of ``attributes``, or ``c.size(0)``) and
    never tests for another type. In a model's helper method (torch-only attributes by default:
    ``c.unsqueeze(1)``) it arrives on the device the caller computes on, which a DataParallel
    replica's ``parameters()`` (empty there) cannot tell."""
    params = {p.name.value for p in (*function.params.posonly_params, *function.params.params,
                                     *function.params.kwonly_params)
              if not _no_tensor_by_default(p)} - {"self", "cls"} - _tested_for_other_types(function) \
        - _converted_to_tensors(function) - _arrays_or_images(function)
    for node in walk(function.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in params:
            if node.attr.value in attributes:
                return node.value.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size" \
                and isinstance(node.func.value, cst.Name) and node.func.value.value in params:
            return node.func.value.value
    return None


def _fed_to_own_parts(method: cst.FunctionDef, methods: frozenset[str] = frozenset()) -> str | None:
    """A parameter that a model method hands to one of its own layers (``self.f2(z[:, :half])``)
    or to a ``torch.*_like`` function (``torch.zeros_like(z)``): a tensor, on the device the method
    computes on (a flow's ``backward(self, z)``, which is no ``forward``). A call of one of the
    file's ``methods`` (``self._sample(num_samples, context)``) is no layer: its first argument may
    be a count (nflows' ``Distribution.sample``)."""
    receiver = _instance_parameter(method)
    params = {p.name.value for p in (*method.params.posonly_params, *method.params.params)
              if not _no_tensor_by_default(p)} - {receiver} - _tested_for_other_types(method) \
        - _converted_to_tensors(method)
    if receiver is None or not params:
        return None

    def root_param(value: cst.BaseExpression) -> str | None:
        while isinstance(value, cst.Subscript):
            value = value.value
        if isinstance(value, cst.Name):
            return value.value if value.value in params else derived.get(value.value)
        return None
    derived: dict[str, str] = {}  # ``lower, upper = z[:, :h], z[:, h:]``: slices of a parameter
    nodes = list(walk(method.body))
    # ``state = torch.FloatTensor(np.float32(state))``: a parameter made a tensor in the body was none
    params -= {n.value for node in nodes if isinstance(node, cst.Assign) and _makes_host_data(node.value)
               for t in node.targets for n in walk(t.target) if isinstance(n, cst.Name)}
    for node in nodes:
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target, value = node.targets[0].target, node.value
            pairs = zip(target.elements, value.elements) if isinstance(target, cst.Tuple) \
                and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements) \
                else [(target, value)]
            for t, v in pairs:
                t, v = getattr(t, "value", t), getattr(v, "value", v)
                if isinstance(t, cst.Name) and t.value not in params and root_param(v):
                    derived[t.value] = root_param(v)  # type: ignore[assignment]
    parts = {receiver}  # ``for flow in self.flows[::-1]: z, ld = flow.backward(z)``: its layers too
    for node in nodes:
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name):
            source = node.iter
            while isinstance(source, cst.Subscript) or isinstance(source, cst.Call) and dotted(source.func) == "reversed":
                source = source.value if isinstance(source, cst.Subscript) else source.args[0].value
            if isinstance(source, cst.Attribute) and isinstance(source.value, cst.Name) and source.value.value == receiver:
                parts.add(node.target.value)
    for node in nodes:
        if not isinstance(node, cst.Call) or not node.args or node.args[0].keyword or node.args[0].star:
            continue
        func = node.func
        base = func.value if isinstance(func, cst.Attribute) else func
        own_part = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
            and func.value.value == receiver and func.attr.value not in methods \
            or isinstance(base, cst.Name) and base.value in parts - {receiver}
        if not (own_part or (dotted(func) or "").startswith("torch.") and (dotted(func) or "").endswith("_like")):
            continue
        found = root_param(node.args[0].value)
        if found:
            return found
    return None


_ARRAY_OR_IMAGE_METHODS = frozenset({"astype", "copy", "tobytes", "crop", "paste", "convert", "getpixel", "putpixel",
                                     "thumbnail", "getbbox"})


def _arrays_or_images(function: cst.FunctionDef) -> set[str]:
    """Parameters the body treats as a NumPy array or a PIL image, which have no torch device:
    handed to a NumPy function (``np.fliplr(x)``), asked for ``.astype``/``.crop``/``.paste``, their
    ``size`` unpacked as a pair (``w, h = img.size``), or rebound by a plain function's result
    (``pic = as_array(pic)``). ``shape``, ``dtype`` and ``ndim`` alone prove nothing."""
    found: set[str] = set()
    for node in walk(function.body):
        if isinstance(node, cst.Call) and (dotted(node.func) or "").startswith(("np.", "numpy.")):
            found |= {a.value.value for a in node.args if isinstance(a.value, cst.Name)}
        elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) \
                and node.attr.value in _ARRAY_OR_IMAGE_METHODS:
            found.add(node.value.value)
        elif isinstance(node, cst.Assign) and len(node.targets) == 1:
            target, value = node.targets[0].target, node.value
            if isinstance(target, cst.Tuple) and isinstance(value, cst.Attribute) and value.attr.value == "size" \
                    and isinstance(value.value, cst.Name):
                found.add(value.value.value)  # ``w, h = img.size``: a tensor's ``size`` is a method
            elif isinstance(target, cst.Name) and isinstance(value, cst.Call) and isinstance(value.func, cst.Name) \
                    and any(isinstance(a.value, cst.Name) and a.value.value == target.value for a in value.args):
                found.add(target.value)  # ``pic = as_array(pic)``: whatever that returns
    return found


def _makes_host_data(value: cst.BaseExpression) -> bool:
    """``torch.FloatTensor(np.float32(state))``, ``torch.tensor(obs)``: data made into a CPU tensor."""
    names = [dotted(n.func) or "" for n in walk(value) if isinstance(n, cst.Call)]
    return any(name.startswith(("np.", "numpy.")) or name.count(".") == 1 and name.startswith("torch.")
               and (name[6:] in _TENSOR_FROM_DATA or name.endswith("Tensor")) for name in names)


def _no_tensor_by_default(param: cst.Param) -> bool:
    """``z_=None`` (BigGAN's ``sample_sheet``), ``nbounces=1`` (torchdiffeq's bouncing ball), a string
    or a flag: on the default path there is no tensor to ask."""
    default = param.default
    if isinstance(default, cst.UnaryOperation):
        default = default.expression  # ``-1``
    return isinstance(default, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)) \
        or (isinstance(default, cst.Name) and default.value in ("None", "True", "False"))


# Calls whose first argument is data to make a tensor from (a list, an array): no tensor yet.
_TENSOR_FROM_DATA = frozenset({"tensor", "as_tensor", "asarray", "from_numpy", "array", "Tensor", "FloatTensor",
                               "LongTensor", "DoubleTensor", "IntTensor", "BoolTensor", "ByteTensor"})


def _converted_to_tensors(function: cst.FunctionDef) -> set[str]:
    """Names the function hands to ``torch.tensor(k)``-like calls as data (stylegan2's
    ``k = torch.tensor(k)`` of a kernel list): they arrive as lists or arrays, not tensors, even
    where the body later reads ``k.ndim`` of the tensor made from them."""
    found = set()
    for node in walk(function.body):
        if isinstance(node, cst.Call) and node.args and node.args[0].keyword is None \
                and (dotted(node.func) or "").rsplit(".", 1)[-1] in _TENSOR_FROM_DATA:
            data = node.args[0].value
            while isinstance(data, cst.Call) and isinstance(data.func, cst.Attribute) \
                    and data.func.attr.value in ("astype", "tolist", "copy"):
                data = data.func.value  # ``torch.from_numpy(seqs.astype("int64"))`` (torchMoji): an array
            if isinstance(data, cst.Name):
                found.add(data.value)
    return found


def _tested_for_other_types(function: cst.FunctionDef) -> set[str]:
    """Names the function tests with ``isinstance(name, float)`` (anything but a Tensor): they
    may arrive as numbers or lists, which have no ``.device``."""
    found = set()
    for node in walk(function.body):
        if isinstance(node, cst.Call) and dotted(node.func) == "isinstance" and len(node.args) == 2 \
                and isinstance(node.args[0].value, cst.Name) \
                and "Tensor" not in (code_of(node.args[1].value) or ""):
            found.add(node.args[0].value.value)
    return found


def construction_methods(klass: cst.ClassDef) -> set[str]:
    """``__init__`` and the methods it calls on its instance (``self.priors = self.make_priors()``),
    transitively: construction-time code, where a tensor belongs in a buffer, not on a device."""
    methods = {s.name.value: s for s in klass.body.body if isinstance(s, cst.FunctionDef)}
    found, todo = set(), ["__init__"]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        method = methods.get(name)
        receiver = _instance_parameter(method) if method is not None else None
        if receiver is None:
            continue
        for node in walk(method.body):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and isinstance(node.func.value, cst.Name) and node.func.value.value == receiver \
                    and node.func.attr.value in methods:
                todo.append(node.func.attr.value)
    return found


def _called_before_moved(metadata: Mapping, module: cst.Module, klass: cst.ClassDef,
                         method: cst.FunctionDef) -> bool:
    """Does the file call ``method`` on an instance of ``klass`` (``enc = Encoder()``) above the
    line that moves that instance (``enc.cuda()``)? There its parameters are still on the CPU."""
    from .pinned import moves_itself_somewhere
    from .scopes import only_assigned_value
    from .tensors import moved_in_chain, uses_of_binding

    for call in (n for n in walk(module) if isinstance(n, cst.Call)):
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == method.name.value
                and isinstance(func.value, cst.Name)):
            continue
        made = only_assigned_value(metadata, func.value)
        if not (isinstance(made, cst.Call) and isinstance(made.func, cst.Name)
                and made.func.value == klass.name.value and not moved_in_chain(metadata, made)):
            continue
        assign = next((a for a in ancestors(metadata, made) if isinstance(a, cst.Assign)), None)
        target = assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
        uses = uses_of_binding(metadata, target) if isinstance(target, cst.Name) else []
        moves = [line_of(metadata, u) for u in uses if moves_itself_somewhere(metadata, u)]
        if moves and min(moves) > line_of(metadata, call):
            return True
    return False


def guessed_from_parameters(device: cst.BaseExpression) -> bool:
    """``next(self.parameters()).device``: right for a plain model, but a DataParallel replica
    has no parameters of its own (StopIteration), so it never replaces a device that works."""
    return isinstance(device, cst.Attribute) and isinstance(device.value, cst.Call) \
        and isinstance(device.value.func, cst.Name) and device.value.func.value == "next"


def _instance_parameter(function: cst.FunctionDef) -> str | None:
    """The name a method calls its instance (usually ``self``), or None for static/class methods."""
    for decorator in function.decorators:
        if dotted(decorator.decorator) in ("staticmethod", "classmethod"):
            return None
    params = (*function.params.posonly_params, *function.params.params)
    return params[0].name.value if params else None


def _registered_buffer(klass: cst.ClassDef) -> str | None:
    """A buffer that ``__init__`` always registers with a tensor (``self.register_buffer("w", t)``):
    it moves with ``model.to()``, so its device is the module's."""
    for stmt in klass.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            for line in stmt.body.body:
                for small in getattr(line, "body", ()) if isinstance(line, cst.SimpleStatementLine) else ():
                    call = small.value if isinstance(small, cst.Expr) else None
                    if isinstance(call, cst.Call) and dotted(call.func) == "self.register_buffer" \
                            and len(call.args) >= 2 and isinstance(call.args[0].value, cst.SimpleString) \
                            and not (isinstance(call.args[1].value, cst.Name) and call.args[1].value.value == "None"):
                        name = call.args[0].value.evaluated_value
                        if isinstance(name, str) and name.isidentifier() and not _deleted(klass, name):
                            return name
    return None


def _moves_the_input_itself(node: cst.CSTNode | None, name: str) -> bool:
    """``<an expression of name>.cuda()`` / ``.to(...)``: a move of the input (or what is computed
    from it) itself."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in ("cuda", "to")):
        return False
    root = chain_root(node.func.value)  # ``sample.unsqueeze(0).repeat(3, 1)``: what the chain starts from
    return isinstance(root, cst.Name) and root.value == name


def _deleted(klass: cst.ClassDef, name: str) -> bool:
    """``del self.<name>`` somewhere in the class: a buffer that exists only in one mode (e2cnn's
    expanded filters, dropped by ``train()``), so not sure to be there."""
    return any(isinstance(n, cst.Del) and dotted(n.target) == f"self.{name}" for n in walk(klass.body))


# What a DataLoader (and its workers) call on a Dataset, directly or through ``__getitem__``'s helpers
_LOADER_PROTOCOL = frozenset({"__getitem__", "__iter__", "__next__", "__len__", "__init__", "__getitems__",
                              "collate_fn", "collate"})


def _called_on_self(klass: cst.ClassDef, name: str) -> bool:
    """``self.<name>(...)`` somewhere in the class (a helper of ``__getitem__``, say)."""
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == name
               and isinstance(n.func.value, cst.Name) and n.func.value.value == "self" for n in walk(klass.body))


def _rebound_off_torch(function: cst.FunctionDef, name: str) -> bool:
    """``name = name.cpu().numpy()`` (or ``.tolist()``, ``np.asarray(name)``) in ``function``: the
    name holds a NumPy array or a list from there on (lightly's SMoG example clusters it)."""
    for node in walk(function.body):
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                for t in node.targets) and isinstance(node.value, cst.Call):
            func = node.value.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("numpy", "tolist", "item"):
                return True
            if (dotted(func) or "").startswith(("np.", "numpy.")):
                return True
    return False


def _sized_input(node: cst.CSTNode | None, function: cst.FunctionDef) -> cst.BaseExpression | None:
    """``torch.zeros(context.shape[0], n)`` in a method given ``context=None`` (nflows' MADE
    ``sample``): the factory reads the size of a parameter, so that parameter is a tensor here
    and its device is the input's. Lengths are left out: they stay on the CPU by design."""
    if not isinstance(node, cst.Call):
        return None
    params = {p.name.value for p in (*function.params.posonly_params, *function.params.params,
                                      *function.params.kwonly_params)} - {"self", "cls"}
    for arg in node.args:
        for part in walk(arg.value):
            read = part.func if isinstance(part, cst.Call) and isinstance(part.func, cst.Attribute) \
                and part.func.attr.value == "size" else part
            if isinstance(read, cst.Attribute) and isinstance(read.value, cst.Name) \
                    and read.attr.value in ("shape", "size") and read.value.value in params \
                    and "len" not in read.value.value.lower():
                return cst.Attribute(cst.Name(read.value.value), cst.Name("device"))
    return None


def _may_have_parameters(klass: cst.ClassDef) -> bool:
    """Could ``self.parameters()`` yield anything? Not for a class that derives from
    ``nn.Module`` only and never builds a sub-module (``self.x = Linear(...)``), a
    ``Parameter`` or registers one: a parameterless loss or helper module."""
    if any((dotted(b.value) or "").rsplit(".", 1)[-1] != "Module" for b in klass.bases):
        return True  # a parent class may hold parameters
    for node in walk(klass.body):
        if isinstance(node, cst.Call):
            name = (dotted(node.func) or "").rsplit(".", 1)[-1]
            if name in ("register_parameter", "register_module", "add_module", "Parameter"):
                return True
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and any(
                (dotted(t.target) or "").startswith("self.") for t in node.targets):
            name = (dotted(node.value.func) or "").rsplit(".", 1)[-1]
            if name[:1].isupper() or name.startswith(("make_", "build_", "create_", "get_")):
                return True  # ``self.proj = Linear(...)``, ``self.body = make_layers()``
    return False


def _class_has_device_attribute(klass: cst.ClassDef) -> bool:
    """``self.device = ...`` in a method, or a ``device`` property (lucidrains' style)."""
    for node in walk(klass.body):
        if isinstance(node, cst.FunctionDef) and node.name.value == "device" and any(
                dotted(d.decorator) == "property" for d in node.decorators):
            return True
        if isinstance(node, (cst.Assign,)) and any(
                dotted(t.target) == "self.device" for t in node.targets):
            return True
    return False
