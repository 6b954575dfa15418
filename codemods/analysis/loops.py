"""DataLoader loops: which ``for`` loops iterate batches, and what each batch looks like.

Syntax only: a loop is a loader loop when its iterable is (a wrapper around) a name
assigned from ``DataLoader(...)`` under any import alias, a parameter named like a
loader, a ``get_*loader(...)`` result, or a list of sample tensors. How a batch is
used in the body (``batch["x"]``, ``model(batch)``, ``x, y = batch``) decides how to
move it; anything else is "unknown" and the rule reports instead of guessing.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider

from .names import argument_for, dotted, keyword, method_call, qualified_names
from .roles import factory_name, is_loader_constructor, wrapper_kind
from .tree import ancestors, in_source_order, line_of, nodes_of, walk

_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm"})
_TQDM = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm"})
_LOADER_PARAM_NAMES = frozenset({"dl", "train_dl", "val_dl", "valid_dl", "test_dl", "eval_dl", "dataloader"})
_DICT_METHODS = frozenset({"items", "keys", "values", "get"})
# Attributes and methods that only a tensor has among the things a loader yields.
_TENSOR_ATTRIBUTES = frozenset({
    "to", "cuda", "size", "shape", "dim", "ndim", "float", "long", "int", "half", "double", "bool",
    "view", "reshape", "unsqueeze", "squeeze", "permute", "transpose", "contiguous", "flatten",
    "numel", "dtype", "type", "detach", "clone", "max", "min", "sum", "mean", "argmax", "t", "T",
    # (``target.data[i]``: ``.data`` is the tensor itself; these are tensor methods too)
    "data", "eq", "ne", "item", "tolist", "cpu", "numpy", "expand", "repeat", "argmin", "abs", "exp", "log",
})
_MOVES = ("to", "cuda")
# Loop variables that are surely not tensors (a default collate keeps strings as lists).
_NOT_TENSOR_NAME = re.compile(r"(path|file|fname|filename|name|caption|text|sentence|url|meta|info)s?$", re.I)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


class BatchShape(enum.Enum):
    TENSOR = "tensor"      # used as a tensor: batch = batch.to(device)
    DICT = "dict"          # batch["x"], batch.items(), model(**batch): a dict comprehension
    SEQUENCE = "sequence"  # x, y = batch / batch[0]: move the unpacked names
    UNKNOWN = "unknown"    # attributes (custom objects), mixed use or nothing to go on


@dataclass(frozen=True)
class Loader:
    """A loop's batch source: the ``DataLoader(...)`` call when one is visible."""

    label: str
    call: cst.Call | None
    enumerated: bool
    lists: bool = False  # its ``collate_fn`` returns lists (of PIL images, say): no tensor to move

    @property
    def pins_memory(self) -> bool:
        """``pin_memory=`` set to anything but False/None: pinned batches can copy asynchronously."""
        arg = keyword(self.call, "pin_memory") if self.call is not None else None
        return arg is not None and not (isinstance(arg.value, cst.Name) and arg.value.value in ("False", "None"))


# -- which loops iterate a loader ---------------------------------------------------------------
def loader_source(metadata: Mapping, iterable: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """Strip ``enumerate(...)``/``tqdm(...)``/``iter(...)``; the flag says whether ``enumerate`` was one."""
    enumerated = False
    while isinstance(iterable, cst.Call) and iterable.args and iterable.args[0].keyword is None and (
            dotted(iterable.func) in _WRAPPERS or qualified_names(metadata, iterable.func) & _TQDM):
        enumerated = enumerated or dotted(iterable.func) == "enumerate"
        iterable = iterable.args[0].value
    return iterable, enumerated


def find_loader(metadata: Mapping, iterable: cst.BaseExpression,
                collators: frozenset[str] = frozenset()) -> Loader | None:
    """The loader a ``for`` loop iterates, or None when it is not (surely) a loader
    (``collators``: the project's functions that return lists, for ``Loader.lists``)."""
    source, enumerated = loader_source(metadata, iterable)
    if isinstance(source, cst.Call) and is_loader_constructor(metadata, source):
        return Loader("DataLoader(...)", source, enumerated, _collates_into_lists(source, collators))
    if not isinstance(source, cst.Name):
        return None
    found = _loader_name(metadata, source)
    if found is None:
        return None
    call = found if isinstance(found, cst.Call) else None
    return Loader(source.value, call, enumerated, call is not None and _collates_into_lists(call, collators))


def _collates_into_lists(loader: cst.Call, collators: frozenset[str]) -> bool:
    """``DataLoader(..., collate_fn=collate)`` with ``collate`` one of the project's functions that
    return lists (``collators``, from the project index: the file's own too), also by its own name
    (``training.collate_pil`` of a package imported under its installed name): no tensor to move."""
    arg = keyword(loader, "collate_fn")
    name = dotted(arg.value) if arg is not None else None
    return name is not None and (name in collators or "." in name and name.rsplit(".", 1)[-1] in collators)


def _loader_name(metadata: Mapping, name: cst.Name, depth: int = 0) -> cst.Call | bool | None:
    """The ``DataLoader(...)`` a name was assigned from; True for another sure loader; None when
    the name is not one, or when something else (``accelerator.prepare``) places its batches."""
    scope = metadata[ScopeProvider].get(name)
    if scope is None:
        return None
    found: cst.Call | bool | None = None
    for assignment in scope[name.value]:
        node = getattr(assignment, "node", None)
        if isinstance(node, cst.Param):
            found = found or _loader_param(node) or _given_a_loader(metadata, node, depth)
            continue
        value = _assigned_value(metadata, node)
        if value is None:
            continue
        if isinstance(value, cst.Call) and method_call(value, "prepare", "setup_dataloaders"):
            return None  # Accelerate / Fabric move batches to each process's device themselves
        if isinstance(value, cst.Call) and is_loader_constructor(metadata, value):
            found = value
        elif found is None and _loader_factory(name.value, value) or _sample_tensors(metadata, value):
            found = found or True
    return found or None


def _assigned_value(metadata: Mapping, target: cst.CSTNode | None) -> cst.BaseExpression | None:
    """The right-hand side of the assignment binding ``target`` (also inside a tuple target)."""
    parents = metadata[ParentNodeProvider]
    current = target
    while current is not None:
        parent = parents.get(current)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)):
            return parent.value if current is not parent.value else None
        if not isinstance(parent, (cst.AssignTarget, cst.Element, cst.Tuple, cst.List)):
            return None
        current = parent
    return None


def _given_a_loader(metadata: Mapping, param: cst.Param, depth: int) -> bool:
    """``def collect(net, data_ld)`` that a call in the file hands a loader (dlrm's visualize.py,
    through two functions): a loader under another name."""
    if depth >= 3:
        return False
    for given in _arguments_given(metadata, param) or ():
        if isinstance(given, cst.Call) and is_loader_constructor(metadata, given):
            return True
        if isinstance(given, cst.Name) and _loader_name(metadata, given, depth + 1):
            return True
    return False


def _arguments_given(metadata: Mapping, param: cst.Param) -> list[cst.BaseExpression | None] | None:
    """What each call of the parameter's function in the file passes for it (None: the parameter
    belongs to no plain function)."""
    function = next((a for a in ancestors(metadata, param) if isinstance(a, cst.FunctionDef)), None)
    if function is None or param not in function.params.params:
        return None
    index = list(function.params.params).index(param)
    module = next(p for p in ancestors(metadata, function) if isinstance(p, cst.Module))
    return [argument_for(c, index, param.name.value) for c in nodes_of(module, cst.Call)
            if isinstance(c.func, cst.Name) and c.func.value == function.name.value]


def _loader_param(param: cst.Param) -> bool:
    name = param.name.value
    annotation = dotted(param.annotation.annotation) if param.annotation else None
    return ("loader" in name.lower() or name in _LOADER_PARAM_NAMES
            or bool(annotation and annotation.endswith("DataLoader")))


def _loader_factory(name: str, value: cst.BaseExpression) -> bool:
    """``train_loader = get_loader(...)``: both the name and the function say "loader"."""
    callee = dotted(value.func) if isinstance(value, cst.Call) else None
    return bool(callee) and "loader" in name.lower() and "loader" in callee.rsplit(".", 1)[-1].lower()


def _sample_tensors(metadata: Mapping, value: cst.BaseExpression) -> bool:
    """``[torch.randn(1, 10) for _ in range(n)]``: a list of CPU sample tensors."""
    if not isinstance(value, cst.ListComp):
        return False
    call = value.elt
    while isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call):
        if call.func.attr.value in _MOVES:
            return False  # ``[torch.tensor(y).to(device) for y in ys]``: placed already
        call = call.func.value
    return factory_name(metadata, call) is not None and keyword(call, "device") is None  # type: ignore[arg-type]


# -- how the body uses a batch --------------------------------------------------------------------
def _uses(metadata: Mapping, body: cst.CSTNode, name: str) -> Iterator[tuple[cst.Name, cst.CSTNode]]:
    """Reads of ``name`` in ``body`` with their parent (not attribute names or keywords, nor
    the ones of a nested loop that rebinds it: hifi-gan's validation loop inside the training
    loop, both over a ``batch``)."""
    parents = metadata[ParentNodeProvider]
    inner = {id(n) for loop in walk(body) if isinstance(loop, cst.For)
             and name in (plain_names(loop.target) or ()) for part in (loop.target, loop.body) for n in walk(part)}
    inner |= _after_a_rebinding(metadata, body, name)
    for node in walk(body):
        if isinstance(node, cst.Name) and node.value == name and id(node) not in inner:
            parent = parents.get(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, (cst.Arg, cst.Param)) and getattr(parent, "keyword", None) is node:
                continue
            yield node, parent


def _after_a_rebinding(metadata: Mapping, body: cst.CSTNode, name: str) -> set[int]:
    """Nodes that see another value of ``name``: the statements after ``k, batch = next(...)`` in
    its block, and that line's targets (pointnet's peek at the test loader inside the training loop;
    not ``batch = batch.to(device)``, which is the same batch)."""
    parents = metadata[ParentNodeProvider]
    found: set[int] = set()
    for line in walk(body):
        if not (isinstance(line, cst.SimpleStatementLine) and any(
                isinstance(small, cst.Assign) and any(name in (plain_names(t.target) or ()) for t in small.targets)
                and not any(isinstance(n, cst.Name) and n.value == name for n in walk(small.value))
                for small in line.body)):  # (``batch = batch.to(device)`` is the same batch)
            continue
        suite = parents.get(line)
        statements = list(getattr(suite, "body", ()))
        if line not in statements:
            continue
        for later in statements[statements.index(line) + 1:]:
            found |= {id(n) for n in walk(later)}
        found |= {id(n) for small in line.body if isinstance(small, cst.Assign)
                  for t in small.targets for n in walk(t.target)}
    return found


def evidence(metadata: Mapping, body: cst.CSTNode, name: str,
             is_model: Callable[[cst.BaseExpression], bool]) -> set[str]:
    """What the body does with ``name``: "dict", "index" (``[0]``), "unpack", "iter", "tensor",
    "attr" (an attribute no tensor has: a custom object) and "alias" (``other = name``)."""
    parents = metadata[ParentNodeProvider]
    found: set[str] = set()
    for node, parent in _uses(metadata, body, name):
        if isinstance(parent, cst.Subscript) and parent.value is node:
            found.add(_index_kind(parent))
        elif isinstance(parent, cst.Attribute):
            attr = parent.attr.value
            found.add("dict" if attr in _DICT_METHODS else "tensor" if attr in _TENSOR_ATTRIBUTES else "attr")
        elif isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if parent.star == "**":
                found.add("dict")
            elif parent.star == "*":
                found.add("unpack")
            elif isinstance(call, cst.Call) and is_model(call.func):
                found.add("tensor")
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            found.add("unpack" if all(isinstance(t, (cst.Tuple, cst.List)) for t in targets) else "alias")
        elif isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node:
            found.add("iter")
        elif isinstance(parent, cst.BinaryOperation):
            found.add("tensor")
    found.discard("")
    return found


def _index_kind(subscript: cst.Subscript) -> str:
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return "tensor"  # ``x[:, 0]``, ``x[1:]``
    value = subscript.slice[0].slice.value
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return "dict"
    if isinstance(value, cst.Integer) or (isinstance(value, cst.UnaryOperation) and isinstance(value.expression, cst.Integer)):
        return "index"
    return ""  # ``batch[i]``: could be anything


def batch_shape(found: set[str]) -> BatchShape:
    """The shape of a single loop variable, from its ``evidence``."""
    if found == {"dict"}:
        return BatchShape.DICT
    if found == {"tensor"}:
        return BatchShape.TENSOR
    if found and found <= {"unpack", "index"}:
        return BatchShape.SEQUENCE
    return BatchShape.UNKNOWN


def unpacking(metadata: Mapping, statements: Sequence[cst.BaseStatement], name: str) -> tuple[int, list[str]] | None:
    """``x, y = batch`` (or ``x = batch[0]; y = batch[1]``) near the top of the body, and no other
    use of ``batch``: where to insert the move (after the last unpacking line) and the names."""
    names: list[str] = []
    end = None
    for index, statement in enumerate(statements):
        mentions = any(True for _ in _uses(metadata, statement, name))
        unpacked = _unpacked_names(statement, name)
        if unpacked is not None and (end is None or end == index):
            names += unpacked
            end = index + 1
        elif mentions:
            return None  # used in some other way: no single place to move it
    return (end, names) if end is not None and names and len(set(names)) == len(names) else None


def _unpacked_names(statement: cst.BaseStatement, name: str) -> list[str] | None:
    """``a, b = name`` / ``a = name[0]`` / ``a, b = name[0]`` / ``a, b = name[0], name[1]`` (``a, b =
    name[0], None``: only ``a``): the plain names bound to the batch."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    targets = plain_names(assign.targets[0].target)
    value = assign.value
    if _indexes(value, name) and isinstance(assign.targets[0].target, (cst.Tuple, cst.List)):
        # ``x0, x1 = batch[0]``, ``(x0, m0), (x1, m1) = batch[0]``: the views of a batch whose labels
        # go unused (lightly's examples)
        return _nested_names(assign.targets[0].target)
    if targets is None:
        return None
    if isinstance(value, cst.Name) and value.value == name and isinstance(assign.targets[0].target, (cst.Tuple, cst.List)):
        return targets
    parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    if len(parts) == len(targets) and all(_indexes(p, name) for p in parts):
        return targets
    if len(parts) == len(targets) and any(_indexes(p, name) for p in parts) \
            and all(_indexes(p, name) or isinstance(p, cst.Name) and p.value == "None" for p in parts):
        return [t for t, p in zip(targets, parts) if _indexes(p, name)]  # ``x, cond = batch[0], None``
    return None


def _nested_names(target: cst.BaseExpression) -> list[str] | None:
    """The names of ``(a, b), (c, d)``; None where a part is starred, an attribute or a subscript."""
    if isinstance(target, cst.Name):
        return [target.value]
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    names: list[str] = []
    for element in target.elements:
        inner = _nested_names(element.value) if isinstance(element, cst.Element) else None
        if inner is None:
            return None
        names += inner
    return names


def _indexes(node: cst.CSTNode, name: str) -> bool:
    return (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == name
            and _index_kind(node) == "index")


def plain_names(target: cst.BaseExpression) -> list[str] | None:
    """Plain names of a target (``x`` or ``x, y``); None for nested, starred or attribute targets."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        if all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements):
            return [e.value.value for e in target.elements]  # type: ignore[union-attr]
    return None


# -- already moved, or must stay on the CPU ---------------------------------------------------------
def moved_in(body: cst.CSTNode, names: set[str], device_names: set[str]) -> bool:
    """Is any of ``names`` already moved in the body? ``x.to(...)``, ``x.cuda()``, ``batch[0].to``,
    ``{k: v.to(d) for k, v in batch.items()}``, ``[t.to(d) for t in batch]``, a loop over the batch
    that moves its members (``for k, t in batch.items(): batch[k] = t.cuda()``) or a helper that
    takes the batch and a device (``to_device(batch, device)``, ``move_to_cuda(batch)``)."""
    def mentions(node: cst.CSTNode) -> bool:
        return any(isinstance(n, cst.Name) and n.value in names for n in walk(node))

    def has_move(node: cst.CSTNode) -> bool:
        return any(isinstance(n, cst.Call) and method_call(n, *_MOVES) for n in walk(node))

    for node in walk(body):
        if isinstance(node, cst.Call) and method_call(node, *_MOVES) and mentions(node.func.value) \
                and not _helper_result(node.func.value):  # type: ignore[attr-defined]
            return True
        if isinstance(node, _COMPREHENSIONS) and mentions(node.for_in.iter) and has_move(node):
            return True
        if isinstance(node, cst.For) and mentions(node.iter) and has_move(node.body):
            return True  # ``for key, t in batch.items(): batch[key] = t.cuda()`` (monodepth2)
        if isinstance(node, cst.Call) and any(_hands_over(a.value, names) for a in node.args):
            callee = (dotted(node.func) or "").rsplit(".", 1)[-1].lower()
            if "device" in callee or "cuda" in callee or any(_is_device(a.value, device_names) for a in node.args):
                return True
    return False


def _moved_by_its_callee(body: cst.CSTNode, names: set[str], param_movers: frozenset[tuple[str, int, str]]) -> bool:
    """A batch name handed to a function of the project that moves that parameter itself
    (wavenet_vocoder's ``batch_wavegen(model, c=c, g=g)``: ``None if g is None else g.to(device)``):
    the author places the batch there, where a member may be None."""
    return any(isinstance(arg, cst.Name) and arg.value in names
               for _, arg in moved_by_callees(nodes_of(body, cst.Call), param_movers))


def moved_by_callees(calls: Iterable[cst.CSTNode],
                     param_movers: frozenset[tuple[str, int, str]]) -> Iterator[tuple[cst.Call, cst.BaseExpression]]:
    """``(call, argument)`` for each argument handed to a function of the project that moves the
    parameter it fills. ``param_movers``: the project index's (function, position, parameter) for the
    functions a file sees, its own included."""
    for call in calls:
        if not isinstance(call, cst.Call):
            continue
        callee = dotted(call.func) or ""
        for name, index, param in param_movers:
            arg = argument_for(call, index if index >= 0 else len(call.args), param) \
                if name == callee else None  # (-1: keyword-only)
            if arg is not None:
                yield call, arg


def _helper_result(value: cst.BaseExpression) -> bool:
    """``one_hot(y)`` (maybe with methods after it): a new value a function made from the batch;
    moving it (``one_hot(y).to(device)``) leaves the batch where it is."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        value = value.func.value
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name)


def _hands_over(value: cst.BaseExpression, names: set[str]) -> bool:
    """Is ``value`` the batch itself (``batch``, ``batch[0]``, ``(x, y)``), not something read off it
    (``*images.shape`` in ``torch.randn(*images.shape, device=device)`` moves nothing)?"""
    if isinstance(value, (cst.Tuple, cst.List)):
        return any(_hands_over(e.value, names) for e in value.elements)
    while isinstance(value, cst.Subscript):
        value = value.value
    return isinstance(value, cst.Name) and value.value in names


def _is_device(node: cst.BaseExpression, device_names: set[str]) -> bool:
    return (isinstance(node, cst.Name) and node.value in device_names) or (
        isinstance(node, cst.Attribute) and node.attr.value == "device")


def cpu_only_lengths(metadata: Mapping, body: cst.CSTNode, names: Sequence[str], packs_anywhere: bool) -> set[str]:
    """Loop variables that must stay on the CPU: ``pack_padded_sequence``'s ``lengths`` argument,
    and, when the file packs sequences anywhere (a model's forward), names that say "len"."""
    found: set[str] = set()
    for node in walk(body):
        if isinstance(node, cst.Call) and is_pack_padded(metadata, node):
            args = [a for a in node.args if a.keyword is None and not a.star]
            lengths = keyword(node, "lengths") or (args[1] if len(args) > 1 else None)
            if lengths is not None and isinstance(lengths.value, cst.Name):
                found.add(lengths.value.value)
    if packs_anywhere:
        found |= {n for n in names if "len" in n.lower()}
    return found


def is_pack_padded(metadata: Mapping, call: cst.Call) -> bool:
    names = qualified_names(metadata, call.func) | {dotted(call.func) or ""}
    return any(n.endswith("pack_padded_sequence") for n in names)


def packs_sequences(metadata: Mapping, module: cst.Module) -> bool:
    """Does the file call ``pack_padded_sequence`` anywhere (maybe in forward, behind
    ``model(x, lengths)``)? Its lengths must stay on the CPU."""
    return any(is_pack_padded(metadata, n) for n in nodes_of(module, cst.Call))


# -- the plan for one loop ------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchPlan:
    """Move ``names`` by a statement inserted at ``index`` of the body (a dict comprehension
    for a dict batch)."""

    index: int
    names: list[str]
    dict_batch: bool


def batch_plan(metadata: Mapping, loop: cst.For, loader: Loader, is_model: Callable[[cst.BaseExpression], bool],
               device_names: set[str], packs: bool,
               param_movers: frozenset[tuple[str, int, str]] = frozenset()) -> BatchPlan | str | None:
    """How DM203 moves the batch of a loop over ``loader``: a plan, a str that says why devmod
    cannot (it reports the loop), or None when nothing is to be moved (already moved, or only
    lengths and file names). Shared with the model groups: a model fed a batch that cannot
    move stays with it."""
    target = loop.target
    if loader.enumerated and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
        target = target.elements[1].value
    if placed_by_its_loader(metadata, loop, loader, device_names):
        return None
    names = plain_names(target)
    if names is None:
        leaves = {n.value for n in walk(target) if isinstance(n, cst.Name) and n.value != "_"}
        if moved_in(loop.body, leaves, device_names):
            return None  # ``for step, ((y1, y2), _) in ...`` then ``y1 = y1.cuda(gpu)``: the author moves it
        return "the batch is unpacked into nested or starred names"
    if moved_in(loop.body, set(names), device_names):
        return None
    if _moved_by_its_callee(loop.body, set(names), param_movers):
        return None  # ``run_net(net, feats, spk)`` whose body moves ``feats`` (and ``spk`` unless None)
    if isinstance(target, cst.Name):
        if next(_uses(metadata, loop.body, target.value), None) is None:
            return None  # ``for unused in val_loader:``: nothing of the batch reaches anything
        unpacked = _unpacked_wherever(metadata, loop.body, target.value)
        if unpacked and moved_in(loop.body, set(unpacked), device_names):
            return None  # ``xs, ys = pair`` in two places, each followed by ``xs = xs.to(device)``
    if loader.lists:
        return "its `collate_fn` returns lists, which `.to()` cannot move"
    if not isinstance(loop.body, cst.IndentedBlock):
        return "the loop body is on the `for` line"
    if isinstance(target, cst.Name):
        plan = _plan_single(metadata, loop, target.value, is_model, packs)
    else:
        plan = _plan_many(metadata, loop, names, is_model, packs)
    if isinstance(plan, BatchPlan) and plan.index and moved_in(loop.body, set(plan.names), device_names):
        return None  # ``x, y = batch`` then ``x = x.to(device)``
    if isinstance(plan, BatchPlan) and _only_read_on_the_host(metadata, loop.body, plan.names):
        return None  # ``arr = imgs.numpy()`` and nothing else: the batch feeds NumPy (a TensorFlow model)
    if isinstance(plan, BatchPlan) and (numpy_call := _through_numpy(metadata, loop.body, plan.names)):
        return f"the batch goes through NumPy (`{numpy_call}`) in the loop, which needs it on the CPU"
    if isinstance(plan, BatchPlan) and plan.dict_batch:
        parts = _parts_of(loop.body, plan.names[0])
        if parts and all(moved_in(loop.body, {part}, device_names) for part in parts):
            return None  # ``images = batch["image"]`` then ``images.to(device=device, ...)``, each part
    if isinstance(plan, str) and _fed_only_to_data_parallel(metadata, loop, is_model):
        return None  # ``nn.DataParallel`` scatters its CPU inputs to its GPUs itself
    if isinstance(plan, BatchPlan) and plan.dict_batch and _spread_into_a_scattering_wrapper(metadata, loop,
                                                                                            plan.names[0]):
        return None  # ``model(**data)`` of ``MMDataParallel(model)``: its values may be lists and containers
    return plan


def _built(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The constructor call under a chain of moves and modes (``nn.DataParallel(net).to(device).eval()``)."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value in ("to", "cuda", "eval", "train") and isinstance(value.func.value, cst.Call):
        value = value.func.value
    return value


def _spread_into_a_scattering_wrapper(metadata: Mapping, loop: cst.For, name: str) -> bool:
    """Is the dict batch only spread into a call of a ``*DataParallel`` wrapper (``model(**data)``
    after ``model = MMDataParallel(model, device_ids=[0])``)? The wrapper scatters the batch to its
    GPUs itself, including values ``.to()`` cannot move (mmcv's lists of ``DataContainer``s)."""
    uses = list(_uses(metadata, loop.body, name))
    if not uses:
        return False
    parents = metadata[ParentNodeProvider]
    for use, _ in uses:
        arg = parents.get(use)
        call = parents.get(arg) if isinstance(arg, cst.Arg) else None
        if not (isinstance(arg, cst.Arg) and arg.star == "**" and isinstance(call, cst.Call)
                and isinstance(call.func, cst.Name)):
            return False
        scope = metadata[ScopeProvider].get(call.func)
        above = [getattr(a, "node", None) for a in scope[call.func.value]] if scope is not None else []
        above = [n for n in above if isinstance(n, cst.CSTNode) and line_of(metadata, n) < line_of(metadata, loop)]
        value = _built(_assigned_value(metadata, in_source_order(metadata, above)[-1]) if above else None)
        if not (isinstance(value, cst.Call) and (dotted(value.func) or "").endswith("DataParallel")):
            return False
    return True


def _unpacked_wherever(metadata: Mapping, body: cst.BaseSuite, name: str) -> list[str] | None:
    """The names of every ``x, y = name`` in ``body`` (in branches, or repeated in a nested loop),
    when unpacking (and ``len(name)``) is all the body does with ``name``; else None."""
    names: list[str] = []
    parents = metadata[ParentNodeProvider]
    for node, parent in _uses(metadata, body, name):
        call = parents.get(parent) if isinstance(parent, cst.Arg) else None
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len":
            continue  # ``if len(batch) == 1:``: how many parts, not a use of them
        line = next((a for a in ancestors(metadata, node) if isinstance(a, cst.SimpleStatementLine)), None)
        unpacked = _unpacked_names(line, name) if line is not None else None
        if unpacked is None:
            return None
        names += unpacked
    return names or None


def _fed_only_to_data_parallel(metadata: Mapping, loop: cst.For, is_model: Callable[[cst.BaseExpression], bool]) -> bool:
    """Is every model the loop body calls an ``nn.DataParallel`` wrapper (``wrapped = DataParallel(net)``)?"""
    calls = [n for n in walk(loop.body) if isinstance(n, cst.Call) and is_model(n.func)]
    if not calls:
        return False
    for call in calls:
        if not isinstance(call.func, cst.Name):
            return False
        scope = metadata[ScopeProvider].get(call.func)
        nodes = [getattr(a, "node", None) for a in scope[call.func.value]] if scope is not None else []
        value = _built(_assigned_value(metadata, nodes[0]) if len(nodes) == 1 else None)
        if not (isinstance(value, cst.Call) and wrapper_kind(metadata, value) == "dp"):
            return False
    return True


def placed_by_its_loader(metadata: Mapping, loop: cst.For, loader: Loader, device_names: set[str]) -> bool:
    """Is the loop's source built with the device (torchtext's ``BucketIterator(data, device=device)``),
    itself or, for a parameter of the loop's function, at every call of that function in the file?
    Its batches arrive on the device: nothing to move, nothing to report."""
    def with_device(value: cst.BaseExpression | None, depth: int = 0) -> bool:
        if isinstance(value, cst.Name) and depth < 3:
            bindings = metadata[ScopeProvider].get(value)
            nodes = [getattr(a, "node", None) for a in bindings[value.value]] if bindings is not None else []
            values = [_assigned_value(metadata, n) for n in nodes]
            return bool(values) and all(with_device(v, depth + 1) for v in values)
        return isinstance(value, cst.Call) and any(
            (a.keyword is not None and a.keyword.value == "device")
            or (isinstance(a.value, cst.Name) and a.value.value in device_names) for a in value.args)
    if loader.call is not None:
        return with_device(loader.call) or _items_placed_by_dataset(metadata, loader.call)
    source, _ = loader_source(metadata, loop.iter)
    if not isinstance(source, cst.Name):
        return False
    scope = metadata[ScopeProvider].get(source)
    nodes = [getattr(a, "node", None) for a in scope[source.value]] if scope is not None else []
    if len(nodes) != 1 or not isinstance(nodes[0], cst.Param):
        return with_device(source)
    param = nodes[0]
    given = _arguments_given(metadata, param)
    return bool(given) and all(with_device(g) for g in given)


def _items_placed_by_dataset(metadata: Mapping, loader: cst.Call) -> bool:
    """``DataLoader(dataset)`` over an instance of a Dataset class of the file whose
    ``__getitem__`` moves each item itself (whisper's LibriSpeech notebook: ``.to(self.device)``)."""
    dataset = argument_for(loader, 0, "dataset")
    if isinstance(dataset, cst.Call):
        made: list = [dataset]  # ``DataLoader(Clips(), ...)``
    elif isinstance(dataset, cst.Name):
        scope = metadata[ScopeProvider].get(dataset)
        made = [_assigned_value(metadata, getattr(a, "node", None)) for a in scope[dataset.value]] \
            if scope is not None else []
    else:
        return False
    if len(made) != 1 or not isinstance(made[0], cst.Call) or not isinstance(made[0].func, cst.Name):
        return False
    module = next(p for p in ancestors(metadata, loader) if isinstance(p, cst.Module))
    for klass in (s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == made[0].func.value):
        for method in klass.body.body:
            if isinstance(method, cst.FunctionDef) and method.name.value == "__getitem__":
                return any(isinstance(n, cst.Call) and method_call(n, *_MOVES) for n in walk(method.body))
    return False


def _through_numpy(metadata: Mapping, body: cst.BaseSuite, names: Sequence[str]) -> str | None:
    """The NumPy function (``np.clip``) that the loop hands a batch tensor, or a value computed
    from one in the loop (``noisy = images + noise``), as an argument of its own, if any: NumPy
    reads a CUDA tensor as an array and fails, so such a batch cannot move. (``y.numpy()`` in
    ``np.sum(pred == y.numpy())`` is DM303's: it gets a ``.cpu()``.)"""
    derived = set(names)
    assigns = [n for n in walk(body) if isinstance(n, cst.Assign)]
    for _ in range(len(assigns) + 1):
        grown = {t.target.value for a in assigns for t in a.targets if isinstance(t.target, cst.Name)
                 and any(isinstance(n, cst.Name) and n.value in derived for n in walk(a.value))} - derived
        if not grown:
            break
        derived |= grown
    for node in walk(body):
        if isinstance(node, cst.Call) and any(q.startswith("numpy.") for q in qualified_names(metadata, node.func)) \
                and any(isinstance(a.value, cst.Name) and a.value.value in derived for a in node.args):
            return dotted(node.func) or "numpy"
    return None


_TO_HOST = frozenset({"cpu", "detach"})


def _only_read_on_the_host(metadata: Mapping, body: cst.BaseSuite, names: Sequence[str]) -> bool:
    """Is every read of the batch names in the loop ``.numpy()`` / ``.tolist()`` / ``.item()`` (or a
    size)? Then no tensor of the batch meets a model: there is nothing to move, nor to report
    (ProxylessNAS's TensorFlow evaluation loop)."""
    parents = metadata[ParentNodeProvider]
    reads = [n for n in walk(body) if isinstance(n, cst.Name) and n.value in names
             and not isinstance(parents.get(n), (cst.AssignTarget, cst.Element, cst.Tuple))
             and not (isinstance(parents.get(n), cst.Attribute) and parents.get(n).attr is n)  # ``net.labels``
             and not (isinstance(parents.get(n), cst.Arg) and parents.get(n).keyword is n)]
    for read in reads:
        current: cst.CSTNode = read
        holder = parents.get(current)
        call = parents.get(holder)
        while isinstance(holder, cst.Attribute) and holder.value is current and holder.attr.value in _TO_HOST \
                and isinstance(call, cst.Call) and call.func is holder:
            current, holder = call, parents.get(call)  # ``imgs.cpu().numpy()``, ``x.detach().numpy()``
            call = parents.get(holder)
        if not (isinstance(holder, cst.Attribute) and holder.value is current
                and (holder.attr.value in ("shape", "dtype")
                     or (holder.attr.value in ("numpy", "tolist", "item", "size")
                         and isinstance(call, cst.Call) and call.func is holder))):
            return False
    return bool(reads)


def _parts_of(body: cst.BaseSuite, name: str) -> list[str]:
    """Names bound to ``name[...]`` at the top of a loop body (``x, y = batch["x"], batch["y"]``), or to
    a helper's pick of one key (``img = get_input(batch, "image")``)."""
    parts: list[str] = []
    for statement in getattr(body, "body", ()):
        for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                continue
            target, value = small.targets[0].target, small.value
            pairs = zip(target.elements, value.elements) \
                if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) \
                and len(target.elements) == len(value.elements) else [(target, value)]
            for left, right in pairs:
                left = left.value if isinstance(left, cst.Element) else left
                right = right.value if isinstance(right, cst.Element) else right
                if isinstance(left, cst.Name) and isinstance(right, cst.Subscript) \
                        and isinstance(right.value, cst.Name) and right.value.value == name:
                    parts.append(left.value)
                elif isinstance(left, cst.Name) and isinstance(right, cst.Call) and any(
                        isinstance(a.value, cst.Name) and a.value.value == name for a in right.args) and any(
                        isinstance(a.value, cst.SimpleString) for a in right.args):
                    parts.append(left.value)  # ``img = get_input(batch, "image")`` (taming's scripts)
    return parts


def _plan_single(metadata: Mapping, loop: cst.For, name: str, is_model: Callable[[cst.BaseExpression], bool],
                 packs: bool) -> BatchPlan | str | None:
    shape = batch_shape(evidence(metadata, loop.body, name, is_model))
    if shape is BatchShape.DICT:
        return BatchPlan(0, [name], True)
    if shape is BatchShape.TENSOR:
        return BatchPlan(0, [name], False)
    if shape is BatchShape.SEQUENCE:
        unpacked = unpacking(metadata, loop.body.body, name)  # type: ignore[attr-defined]
        if unpacked is None:
            return f"`{name}` is indexed in several places; unpack it first (`x, y = {name}`)"
        index, names = unpacked
        names = _movable(metadata, loop, names, packs)
        return BatchPlan(index, names, False) if names else None
    return f"`{name}` is not a tensor, tuple or dict batch devmod can see"


def _plan_many(metadata: Mapping, loop: cst.For, names: list[str], is_model: Callable[[cst.BaseExpression], bool],
               packs: bool) -> BatchPlan | str | None:
    for name in names:
        found = evidence(metadata, loop.body, name, is_model)
        if found & {"dict", "iter", "attr", "unpack"} and not _NOT_TENSOR_NAME.search(name):
            return f"`{name}` is not a plain tensor (a dict, list or custom object)"
    names = _movable(metadata, loop, names, packs)
    return BatchPlan(0, names, False) if names else None


def _movable(metadata: Mapping, loop: cst.For, names: list[str], packs: bool) -> list[str]:
    """Leave ``pack_padded_sequence`` lengths and file names on the CPU."""
    keep = cpu_only_lengths(metadata, loop.body, names, packs)
    return [n for n in names if n not in keep and not _NOT_TENSOR_NAME.search(n) and n != "_"]
