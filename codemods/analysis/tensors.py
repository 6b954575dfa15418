"""Where a tensor goes: does it meet device code, or only CPU-side data code?

Syntax only, through libcst's scope analysis (assignments and their accesses), so
every answer is "surely" or "don't know"; rules act on "surely" only.
"""

from __future__ import annotations

from typing import Mapping

import libcst as cst
from libcst.metadata import Assignment, ComprehensionScope, GlobalScope, ParentNodeProvider, PositionProvider, ScopeProvider

from .loops import find_loader
from .names import dotted, keyword, positional, qualified_names
from .roles import MODULE_API, factory_name
from .scopes import assigned_value, scope_bindings
from .tree import ancestors, chain_root, in_source_order, line_of, walk

_CPU_CONSUMERS_SUFFIXES = ("Dataset", "DataLoader", "random_split", "Sampler", "Subset")
# Libraries that turn their argument into a NumPy array: a CUDA tensor fails there.
# ``math`` reads Python numbers: one device sync per element on a GPU.
_CPU_LIBRARIES = ("numpy.", "matplotlib.", "pandas.", "scipy.", "sklearn.", "seaborn.", "PIL.", "cv2.", "math.")
# Attributes and methods that read a tensor's metadata, never its data.
_METADATA_ATTRIBUTES = frozenset({"shape", "size", "dtype", "device", "ndim", "dim", "numel", "is_cuda"})
_CPU_METHODS = frozenset({"numpy", "tolist", "item", "cpu"})
# Read at once for its shape (``torch.zeros(k).numel()``): the values are never used, any device does.
_SHAPE_ONLY = frozenset({"numel", "nelement", "dim", "ndimension", "size", "shape"})
# Fill a tensor where it is and return it (``torch.LongTensor(3, 4).random_(0, 50)``).
IN_PLACE_FILLS = frozenset({"fill_", "normal_", "uniform_", "zero_", "random_", "bernoulli_", "exponential_",
                            "geometric_", "cauchy_", "log_normal_"})
TENSOR_METHODS = frozenset({"float", "double", "long", "int", "half", "bool", "byte", "char", "short", "bfloat16",
                             "detach", "clone", "view", "reshape", "unsqueeze", "squeeze", "permute", "t",
                             "transpose", "contiguous", "to", "requires_grad_", "expand", *IN_PLACE_FILLS})
# Methods that return a converted copy and leave the receiver alone: discarding the result is a no-op.
CONVERSION_METHODS = frozenset({"to", "cpu", "cuda", "float", "double", "half", "bfloat16", "long", "int",
                                "short", "bool", "byte", "char"})
DTYPES = frozenset({"float", "float32", "float64", "double", "float16", "half", "bfloat16", "int", "int8",
                    "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128",
                    "cfloat", "cdouble"})

# Factory signatures. Tensors from data take exactly one positional argument; some
# "factories" take no ``device=`` at all; ``normal`` takes one only with a size.
_SINGLE_DATA_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray", "torch.scalar_tensor"})
_NO_DEVICE_FACTORIES = frozenset({"torch.complex", "torch.polar"})
_VARARG_SIZE_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn"})
# Keywords that pin a factory to a place of their own (a CPU generator, an output buffer, pinned memory).
_PLACED_KEYWORDS = ("device", "out", "generator", "pin_memory")


def chain_top(metadata: Mapping, node: cst.CSTNode) -> cst.CSTNode:
    """The outermost expression of a method chain starting at ``node`` (``f(...).float().t()``)."""
    parents = metadata[ParentNodeProvider]
    current = node
    while True:
        parent = parents.get(current)
        if isinstance(parent, cst.Attribute) and parent.value is current:
            call = parents.get(parent)
            if isinstance(call, cst.Call) and call.func is parent and parent.attr.value in TENSOR_METHODS:
                current = call
                continue
        return current


def moved_in_chain(metadata: Mapping, node: cst.CSTNode) -> bool:
    """Does a method chain on ``node`` already place it (``.to(...)``, ``.cuda()``, ``.cpu()``)?"""
    parents = metadata[ParentNodeProvider]
    current = node
    while True:
        attribute = parents.get(current)
        call = parents.get(attribute) if isinstance(attribute, cst.Attribute) else None
        if not (isinstance(call, cst.Call) and call.func is attribute and attribute.value is current):
            return False
        if attribute.attr.value in ("to", "cuda", "cpu", "pin_memory"):
            return True
        current = call


def assigned_name(metadata: Mapping, node: cst.CSTNode, through_arithmetic: bool = False) -> cst.Name | None:
    """The Name a value is assigned to (``x = <node>``, also through a method chain or a
    list comprehension around it, and with ``through_arithmetic`` through ``* 2 - 1``), else None."""
    parents = metadata[ParentNodeProvider]
    current = chain_top(metadata, node)
    while through_arithmetic:  # ``(torch.rand(n) > 0.5).float()``: a chain on the arithmetic too
        top = chain_top(metadata, _arithmetic_top(metadata, current))
        if top is current:
            break
        current = top
    parent = parents.get(current)
    if isinstance(parent, (cst.ListComp, cst.GeneratorExp)) and parent.elt is current:
        current, parent = parent, parents.get(parent)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target
    return None


def uses_of(metadata: Mapping, name: cst.Name) -> list[cst.Name]:
    """The loads of the variable bound by ``name`` (an assignment target), in its scope."""
    scope = metadata[ScopeProvider].get(name)
    if scope is None:
        return []
    return [a.node for a in scope.accesses[name.value] if isinstance(a.node, cst.Name)]


def uses_of_binding(metadata: Mapping, name: cst.Name) -> list[cst.Name]:
    """The loads that see this binding of ``name`` (an assignment target): in its own scope
    those after it and before the next binding (by line), plus every load from a nested
    function, which may run at any time."""
    scope = metadata[ScopeProvider].get(name)
    if scope is None:
        return []
    binding = next((b for b in scope.assignments[name.value] if getattr(b, "node", None) is name), None)
    if binding is None:
        # ``global model`` (or ``nonlocal``) above ``model = ...``: the binding lives in an outer
        # scope, and every load there may run after this function did.
        outer = _declared_outer_binding(scope, name)
        return in_source_order(metadata, [a.node for a in outer.references if isinstance(a.node, cst.Name)]) \
            if outer is not None else []  # type: ignore[return-value]
    start = line_of(metadata, name)
    later = [b.node for b in scope.assignments[name.value]
             if isinstance(b, Assignment) and line_of(metadata, b.node) > start
             and not _other_branch(metadata, name, b.node)]  # ``if a: m = f() else: m = g()``: both reach on
    nearest = min(later, key=lambda n: line_of(metadata, n), default=None)
    end = _statement_end(metadata, nearest) if nearest is not None else float("inf")
    uses = []
    for access in binding.references:
        if access.scope is not scope and any(a.scope is access.scope for a in access.scope.assignments[name.value]):
            continue  # a nested function's own variable of the same name (Python makes it local throughout)
        # ``x = f(x)`` on the next binding's line still reads this one
        if isinstance(access.node, cst.Name) and (
                access.scope is not scope or start < line_of(metadata, access.node) <= end):
            uses.append(access.node)
    return in_source_order(metadata, uses)  # type: ignore[return-value]


def _statement_end(metadata: Mapping, target: cst.CSTNode) -> int:
    """The last line of ``target = value`` (its value may span lines and reads the old binding:
    ``x = torch.roll(\n    x.reshape(h, w), ...)``); the target's own line for other bindings."""
    parents = metadata[ParentNodeProvider]
    holder = parents.get(target)
    statement = parents.get(holder) if isinstance(holder, cst.AssignTarget) else None
    position = metadata.get(PositionProvider, {}).get(statement) if isinstance(statement, cst.Assign) else None
    return position.end.line if position is not None else line_of(metadata, target)


def runs_only_through_its_methods(metadata: Mapping, name: cst.Name) -> bool:
    """A loaded object that is never called itself (``model(x)``, ``model.forward(x)``) but runs
    through a method of its own class (spinningup's ``model.act(obs)``): a class devmod cannot
    see, whose method may hand its results to NumPy, so it stays where it was saved."""
    parents = metadata[ParentNodeProvider]
    methods = False
    for use in uses_of_binding(metadata, name):
        parent = parents.get(use)
        if isinstance(parent, cst.Call) and parent.func is use:
            return False
        call = parents.get(parent)
        if isinstance(parent, cst.Attribute) and parent.value is use and isinstance(call, cst.Call) \
                and call.func is parent:
            if parent.attr.value == "forward":
                return False
            if parent.attr.value in _CONTAINER_METHODS:
                return False  # ``ckpt.pop("hparams")``: a checkpoint dict, not a model
            methods = methods or parent.attr.value not in MODULE_API
    return methods


_CONTAINER_METHODS = frozenset({"pop", "get", "keys", "items", "values", "update", "setdefault", "copy"})


def checked_for_none(metadata: Mapping, name: cst.Name) -> bool:
    """Is the value bound to ``name`` (an assignment target) tested for ``None`` or truth
    (``if model is None:``, ``if not model:``)? Then it may be None: a ``.to(device)`` on it
    would raise before the author's own check, and nothing fed to it may move alone."""
    parents = metadata[ParentNodeProvider]
    for use in uses_of_binding(metadata, name):
        holder = parents.get(use)
        if isinstance(holder, cst.Comparison) and any(
                isinstance(c.comparator, cst.Name) and c.comparator.value == "None" for c in holder.comparisons):
            return True
        if isinstance(holder, (cst.If, cst.While)) and holder.test is use:
            return True
        if isinstance(holder, cst.UnaryOperation) and isinstance(holder.operator, cst.Not):
            return True
    return False


def passes_itself(metadata: Mapping, value: cst.BaseExpression, name: str) -> bool:
    """``model = load_tf_weights(model, path)``: a call of a function defined in the file, handed
    the very name it is bound to. Such a function may give the model back with new CPU weights
    (pytorch-pretrained-BigGAN's converter), so a move before it does not hold."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
            and any(isinstance(a.value, cst.Name) and a.value.value == name for a in value.args)):
        return False
    bindings = scope_bindings(metadata[ScopeProvider].get(value.func), value.func.value)
    return len(bindings) == 1 and isinstance(bindings[0].node, cst.FunctionDef)


def _other_branch(metadata: Mapping, node: cst.CSTNode, other: cst.CSTNode) -> bool:
    """Are ``node`` and ``other`` in different branches of one ``if``/``elif``/``else`` (so
    that at most one of them runs)?"""
    above = {id(a) for a in ancestors(metadata, other)}
    child: cst.CSTNode = node
    for parent in ancestors(metadata, node):
        if isinstance(parent, cst.If) and child is parent.body and parent.orelse is not None \
                and id(parent.orelse) in above:
            return True
        child = parent
    return False


def _declared_outer_binding(scope, name: cst.Name):
    """The binding of ``name`` that a ``global``/``nonlocal`` declaration put in an outer scope."""
    current = scope
    while getattr(current, "parent", current) is not current:
        current = current.parent
        found = next((b for b in current.assignments[name.value] if getattr(b, "node", None) is name), None)
        if found is not None:
            return found
    return None


def flows_only_to_cpu(metadata: Mapping, call: cst.Call) -> bool:
    """A factory whose tensor is data for a Dataset/DataLoader, iterated as samples, used
    as an index, or turned into NumPy/Python values: it belongs on (or is fine on) the CPU.

    One such use is enough: moving the tensor to the GPU could break that use, while
    leaving it on the CPU never introduces a new error.
    """
    top = _arithmetic_top(metadata, chain_top(metadata, call))
    if _consumed_on_cpu(metadata, top, methods=_CPU_METHODS | _SHAPE_ONLY) or _used_as_index(metadata, top) or _read_by_cpu_library(metadata, call):
        return True
    name = assigned_name(metadata, call, through_arithmetic=True) or _mask_name(metadata, top)
    if name is not None and any(_consumed_on_cpu(metadata, use) or _used_as_index(metadata, use)
                                or _read_by_cpu_library(metadata, use) for use in uses_of_binding(metadata, name)):
        return True
    return _cpu_bound(metadata, call, 0)


def _mask_name(metadata: Mapping, top: cst.CSTNode) -> cst.Name | None:
    """``coin = torch.rand(n) < self.p``: the name of a mask made by comparing the tensor with a
    setting (a name or attribute). Only asked whether its uses want the CPU: leaving a tensor
    where it was made never adds an error."""
    parent = metadata[ParentNodeProvider].get(top)
    if not (isinstance(parent, cst.Comparison) and parent.left is top
            and all(isinstance(c.comparator, (cst.Name, cst.Attribute)) for c in parent.comparisons)):
        return None
    holder = metadata[ParentNodeProvider].get(parent)
    if isinstance(holder, cst.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0].target, cst.Name):
        return holder.targets[0].target
    return None


def _read_by_cpu_library(metadata: Mapping, node: cst.CSTNode) -> bool:
    """``plt.axis(torch.tensor(box) * zoom)``, ``math.sin(angles[i])``: whatever the value is
    combined with or indexed by, the result goes to NumPy or Python numbers. On the CPU that
    works; on the GPU it fails (or syncs per element), so the tensor stays."""
    parents = metadata[ParentNodeProvider]
    current = chain_top(metadata, node)
    while True:
        parent = parents.get(current)
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)) \
                or (isinstance(parent, cst.Subscript) and parent.value is current):
            current = chain_top(metadata, parent)
            continue
        if isinstance(parent, cst.Attribute) and parent.value is current and parent.attr.value == "cpu" \
                and isinstance(parents.get(parent), cst.Call):
            # ``plt.plot(ids[0].cpu())`` (DM303 adds that ``.cpu()``): still read by the library
            current = chain_top(metadata, parents.get(parent))
            continue
        break
    if not isinstance(parent, cst.Arg):
        return False
    call = parents.get(parent)
    if not isinstance(call, cst.Call):
        return False
    return _calls_cpu_library(metadata, call)


def _callee_names(metadata: Mapping, call: cst.Call) -> set[str]:
    """What ``call`` calls: its qualified names and, for a name devmod cannot resolve, its spelling."""
    return qualified_names(metadata, call.func) | {dotted(call.func) or ""}


def _feeds_cpu_data(metadata: Mapping, call: cst.Call) -> bool:
    """``TensorDataset(...)``, ``DataLoader(...)``, ``random_split(...)``: data that stays on the CPU."""
    return any(n.endswith(_CPU_CONSUMERS_SUFFIXES) for n in _callee_names(metadata, call))


def _calls_cpu_library(metadata: Mapping, call: cst.Call) -> bool:
    """``np.asarray(...)``, ``plt.plot(...)``, ``math.sin(...)``: a library that reads host data."""
    return any(n.startswith(_CPU_LIBRARIES) for n in _callee_names(metadata, call))


_MAX_FLOW_DEPTH = 3  # assignments followed from a factory to where its data ends up


def _cpu_bound(metadata: Mapping, node: cst.CSTNode, depth: int, contained: bool = False) -> bool:
    """Does the value reach CPU-side work through torch functions, tensor methods, arithmetic
    with numbers or with other CPU-bound data, and a few assignments? ``feats =
    torch.unsqueeze(torch.linspace(...), 1)``; ``target = feats.pow(2) + 0.1 * noise``;
    ``TensorDataset(feats, target)``: every tensor in that chain is dataset material."""
    if depth > _MAX_FLOW_DEPTH:
        return False
    top = _data_top(metadata, node, depth)
    # In a list or tuple of samples, only a Dataset, a DataLoader or a NumPy-based library says
    # "CPU": iterating the list or testing it reads no tensor.
    contained = contained or isinstance(top, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp))
    if _consumed_on_cpu(metadata, top, loops=not contained, bools=not contained) \
            or (not contained and _used_as_index(metadata, top)):
        return True
    target = _target_of(metadata, top)
    if target is None:
        parents = metadata[ParentNodeProvider]
        holder = parents.get(top)  # ``edges.append(edge_index)``: where the list goes, it goes
        listed = appended_to(parents, holder) if isinstance(holder, cst.Arg) else None
        return listed is not None and any(_cpu_bound(metadata, use, depth + 1, True)
                                          for use in uses_of(metadata, listed) if not _fills(metadata, use))
    return any(_cpu_bound(metadata, use, depth + 1, contained) for use in uses_of_binding(metadata, target))


def _fills(metadata: Mapping, use: cst.CSTNode) -> bool:
    """``parts.append(...)`` / ``parts = []``: the list being filled, not read."""
    parent = metadata[ParentNodeProvider].get(use)
    return isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value in ("append", "extend")


def _same_root(current: cst.CSTNode, other: cst.CSTNode) -> bool:
    """``edge_index - edge_index.min()``: the other operand is read from the same variable."""
    def root(node: cst.CSTNode) -> cst.CSTNode:
        while True:
            if isinstance(node, cst.Call):
                node = node.func
            elif isinstance(node, (cst.Attribute, cst.Subscript)):
                node = node.value
            else:
                return node
    mine, theirs = root(current), root(other)
    return isinstance(mine, cst.Name) and isinstance(theirs, cst.Name) and mine.value == theirs.value


def _target_of(metadata: Mapping, value: cst.CSTNode) -> cst.Name | None:
    """The name ``value`` is assigned to: ``name = value``, or ``a, b = value, other``."""
    parents = metadata[ParentNodeProvider]
    parent = parents.get(value)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target
    values = parents.get(parent) if isinstance(parent, cst.Element) else None
    assign = parents.get(values) if isinstance(values, (cst.Tuple, cst.List)) else None
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and assign.value is values):
        return None
    targets = assign.targets[0].target
    if not (isinstance(targets, (cst.Tuple, cst.List)) and len(targets.elements) == len(values.elements)):
        return None
    index = next(i for i, e in enumerate(values.elements) if e is parent)
    name = targets.elements[index].value
    return name if isinstance(name, cst.Name) and not isinstance(values.elements[index], cst.StarredElement) else None


def _data_top(metadata: Mapping, node: cst.CSTNode, depth: int) -> cst.CSTNode:
    parents = metadata[ParentNodeProvider]
    current = chain_top(metadata, node)
    while True:
        parent = parents.get(current)
        if isinstance(parent, cst.UnaryOperation):
            current = parent
        elif isinstance(parent, cst.Subscript) and parent.value is current:
            current = chain_top(metadata, parent)  # ``posemb[0].reshape(...)``: a part, on the same device
        elif isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is current else parent.left
            if not (is_number(other) or _cpu_rooted(metadata, other, depth) or _same_root(current, other)):
                return current
            current = parent
        elif isinstance(parent, (cst.Arg, cst.Element)):
            holder = parents.get(parent)
            container = holder if isinstance(holder, (cst.Tuple, cst.List)) else None
            if container is not None:
                holder = parents.get(parents.get(holder))  # ``torch.cat((a, b))``
            if isinstance(holder, cst.Call) and torch_data_function(metadata, holder):
                current = chain_top(metadata, holder)
            elif _target_of(metadata, current) is not None:
                return current  # ``a, b = x[:1], x[1:]``: each part goes to its own name
            elif container is not None and isinstance(parent, cst.Element):
                current = container  # a sample in a list or tuple goes where the container goes
            else:
                return current
        elif isinstance(parent, (cst.ListComp, cst.GeneratorExp)) and parent.elt is current:
            current = parent  # ``[(torch.randn(3), i % 2) for i in range(n)]``
        elif isinstance(parent, cst.DictElement) and parent.value is current \
                and isinstance(parents.get(parent), cst.Dict):
            current = parents.get(parent)  # ``{"x": torch.randn(3)}``: a sample's field goes with the sample
        else:
            return current


# ``.to(...)`` keywords that neither move the tensor nor name a device.
NON_MOVING_TO_KEYWORDS = frozenset({"dtype", "non_blocking", "copy", "memory_format"})


def to_names_a_place(metadata: Mapping, to_call: cst.Call) -> bool:
    """Does this ``.to(...)`` name a device or a tensor (not only a dtype, ``non_blocking``, ...)?"""
    return not all((a.keyword is not None and a.keyword.value in NON_MOVING_TO_KEYWORDS)
                   or (a.keyword is None and not a.star and is_dtype(metadata, a.value))
                   for a in to_call.args)


def _mentions_cpu(node: cst.CSTNode) -> bool:
    """Does ``node`` contain a ``.cpu`` access (``agent(x).cpu().clone()``)?"""
    return any(isinstance(n, cst.Attribute) and n.attr.value == "cpu" for n in walk(node))


# Namespaces of torch functions whose result lives where their tensor arguments do.
_MATH_NAMESPACES = ("torch.special.", "torch.linalg.", "torch.fft.")
_ELEMENTWISE_FUNCTIONS = frozenset({"torch.nn.functional.pad", "torch.nn.functional.normalize",
                                    "torch.nn.functional.softmax", "torch.nn.functional.interpolate"})
# Tensor methods whose result is computed from their tensor arguments too (``pos.mul(freqs)``).
_COMBINING_METHODS = frozenset({"mul", "add", "sub", "div", "matmul", "mm", "bmm", "outer", "pow", "where",
                                "masked_fill", "index_select", "gather", "expand_as", "view_as", "reshape_as",
                                "type_as", "lerp", "maximum", "minimum", "clamp", "remainder"})


def places_tensor(metadata: Mapping, call: cst.Call) -> bool:
    """Is ``call`` a method call that puts its receiver on a device other than the host:
    ``.cuda()``, ``.type_as(t)``, or a ``.to(...)`` that names a device or a tensor (not a
    dtype-only one, not a literal ``"cpu"``)?"""
    if not isinstance(call.func, cst.Attribute):
        return False
    method = call.func.attr.value
    if method in ("cuda", "type_as"):
        return True
    if method != "to" or any(isinstance(a.value, cst.SimpleString) and "cpu" in a.value.value for a in call.args):
        return False
    return to_names_a_place(metadata, call)


def moved_downstream(metadata: Mapping, call: cst.Call, strict: bool = False) -> bool:
    """Does the author place a value computed from this tensor later? ``freqs = torch.arange(n)
    / n``; ``table = torch.outer(pos, freqs).float()``; ``return table.to(x.device)``: the
    table is built on the host and moved once it is done (in float64 where MPS has none, or as
    shape data read on the host). Placing the factory would change where that work runs, so
    it stays as written. Followed through method chains, arithmetic, torch functions, tensor
    methods given it as an argument, and a few assignments; any operand met on the way is
    taken for host data, as the author's move says. Meant for model and library code: in
    driver code an operand may be what devmod itself moves to the GPU: there (``strict``) only
    method chains, subscripts and assignments are followed (``buf[i].to(device)``: a CPU staging
    buffer moved a slice at a time)."""
    return _reaches_placement(metadata, call, 0, strict)


_MAX_DERIVED_STEPS = 8  # assignments followed from a factory to the author's move (a schedule takes ~5)


def _reaches_placement(metadata: Mapping, node: cst.CSTNode, depth: int, strict: bool = False) -> bool:
    if depth > _MAX_DERIVED_STEPS:
        return False
    parents = metadata[ParentNodeProvider]
    current = node
    combined = False  # met another operand on the way (``out[:, i] + torch.randn(n)``)
    while True:
        attribute = parents.get(current)
        call = parents.get(attribute) if isinstance(attribute, cst.Attribute) else None
        if isinstance(call, cst.Call) and call.func is attribute and attribute.value is current:
            if places_tensor(metadata, call):
                return not isinstance(parents.get(call), cst.Expr)  # ``x.cuda()`` alone moves nothing
            if attribute.attr.value in ("cpu", "numpy", "tolist", "item") or (
                    attribute.attr.value == "to" and any(isinstance(a.value, cst.SimpleString) for a in call.args)):
                return False  # brought to the host (or converted) first: not the author's move to a device
            current = call  # ``.float().reshape(...)``: other methods keep following the value
            continue
        parent = parents.get(current)
        if isinstance(parent, cst.Subscript) and parent.value is current:
            store = parents.get(parent)
            if isinstance(store, cst.AssignTarget):  # ``buf[i] = ...``: a store into it, not a flow out of it
                return _mentions_cpu(parents.get(store).value)
            if _indexed_by_tensor(metadata, parent):
                return False  # ``freqs[idx].to(x.device)`` with ``idx`` from ``topk``: indexed before the move
            current = parent
        elif isinstance(parent, cst.Arg) and appended_to(parents, parent) is not None:
            return _stacked_and_placed(metadata, appended_to(parents, parent), depth, strict)
        elif strict:
            break
        elif isinstance(parent, cst.Index):
            # ``mask[ids] = True``: indices live where the tensor they index lives; where the author
            # builds that tensor on the host and moves it later, the indices stay with it
            element = parents.get(parent)
            indexed = parents.get(element)
            return isinstance(element, cst.SubscriptElement) and isinstance(indexed, cst.Subscript) \
                and isinstance(indexed.value, cst.Name) and _indexed_tensor_placed(metadata, indexed.value, depth)
        elif isinstance(parent, (cst.UnaryOperation, cst.BinaryOperation)):
            if isinstance(parent, cst.BinaryOperation):
                other = parent.right if parent.left is current else parent.left
                combined = combined or _may_be_placed(metadata, other)
            current = parent
        elif isinstance(parent, (cst.Arg, cst.Element)):
            holder = parents.get(parent)
            if isinstance(holder, (cst.Tuple, cst.List)):
                holder = parents.get(parents.get(holder))  # ``torch.cat((a, b))``
            if not isinstance(holder, cst.Call) or not (
                    torch_data_function(metadata, holder)
                    or qualified_names(metadata, holder.func) & _ELEMENTWISE_FUNCTIONS
                    or any(n.startswith(_MATH_NAMESPACES) for n in qualified_names(metadata, holder.func))
                    or (isinstance(holder.func, cst.Attribute) and holder.func.attr.value in _COMBINING_METHODS)):
                return False
            others = [e.value for a in holder.args for e in (a.value.elements if isinstance(a.value, (cst.Tuple, cst.List))
                                                              else [a]) if e is not parent]
            combined = combined or any(_may_be_placed(metadata, o) for o in others
                                       if not any(n is current for n in walk(o)))
            current = holder  # ``torch.outer(pos, freqs)``, ``pos.mul(freqs)``: computed from it
        else:
            break
    statement = parents.get(current)
    if isinstance(statement, cst.Assign) and statement.value is current and not combined \
            and all(isinstance(t.target, cst.Subscript) for t in statement.targets):
        # ``positions[rows, 0] = value``: the store copies it to the destination's device (not an
        # operand met before it: ``out[:, i] + torch.randn(n)`` fails before the store)
        return True
    target = _target_of(metadata, current)
    if target is None:
        return False
    uses = uses_of_binding(metadata, target)
    if strict:  # driver code: every use must end in the author's placement (metadata reads aside)
        uses = [u for u in uses if not _metadata_read(parents, u) and not _number_stored(parents, u)]
        return bool(uses) and all(_reaches_placement(metadata, use, depth + 1, strict) for use in uses)
    return any(_reaches_placement(metadata, use, depth + 1, strict) for use in uses)


def _may_be_placed(metadata: Mapping, operand: cst.BaseExpression) -> bool:
    """Could ``operand`` live off the CPU? Not a number, nor a factory with no ``device=`` (the
    other pieces of ``torch.cat([torch.full(...), torch.full(...)])``)."""
    if is_number(operand, named_constants=True):
        return False
    return not (isinstance(operand, cst.Call) and factory_name(metadata, operand) is not None
                and keyword(operand, "device") is None)


def _indexed_tensor_placed(metadata: Mapping, name: cst.Name, depth: int) -> bool:
    """Does a value bound to ``name`` (the tensor some indices index) reach the author's move?"""
    bindings = scope_bindings(metadata[ScopeProvider].get(name), name.value)
    return any(value is not None and _reaches_placement(metadata, value, depth + 1)
               for value in (assigned_value(metadata, b.node) for b in bindings))


def scalar_operand(metadata: Mapping, call: cst.Call) -> bool:
    """``torch.sqrt(torch.tensor(2.0 / torch.pi)) * x``: a 0-dim tensor of a constant, read only as an
    operand of arithmetic (also through ``torch.sqrt``-like functions). PyTorch takes a CPU scalar
    tensor as an input of a CUDA operation (checked on an H200: the probe ``cpu_scalar_input``), so
    it already works wherever ``x`` is; ``device=`` there is churn (LLMs-from-scratch's GELU)."""
    if "torch.tensor" not in qualified_names(metadata, call.func) or len(call.args) != 1 \
            or call.args[0].keyword is not None or not is_number(call.args[0].value, named_constants=True):
        return False
    parents = metadata[ParentNodeProvider]
    current: cst.CSTNode = call
    while True:
        arg = parents.get(current)
        outer = parents.get(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(outer, cst.Call) and len(outer.args) == 1 \
                and qualified_names(metadata, outer.func) & _SCALAR_FUNCTIONS:
            current = outer
            continue
        break
    parent = parents.get(current)
    return isinstance(parent, cst.BinaryOperation) and not isinstance(parent.operator, cst.MatrixMultiply)


_SCALAR_FUNCTIONS = frozenset(f"torch.{f}" for f in ("sqrt", "rsqrt", "exp", "log", "log2", "log10", "tanh",
                                                      "sigmoid", "abs", "sin", "cos", "reciprocal"))


def appended_to(parents: Mapping, arg: cst.Arg) -> cst.Name | None:
    """The list ``rows`` in ``rows.append(value)``, for the ``arg`` holding ``value``."""
    call = parents.get(arg)
    if isinstance(call, cst.Call) and len(call.args) == 1 and isinstance(call.func, cst.Attribute) \
            and call.func.attr.value == "append" and isinstance(call.func.value, cst.Name):
        return call.func.value
    return None


def _stacked_and_placed(metadata: Mapping, rows: cst.Name, depth: int, strict: bool) -> bool:
    """``rows.append(x)`` ... ``torch.stack(rows).to(device)``: a collate function builds each row on
    the host and moves the stacked batch once (LLMs-from-scratch); the rows stay as written."""
    scope = metadata[ScopeProvider].get(rows)
    if scope is None:
        return False
    parents = metadata[ParentNodeProvider]
    stacked = []
    for access in scope.accesses[rows.value]:
        arg = parents.get(access.node)
        call = parents.get(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(call, cst.Call) and torch_data_function(metadata, call) and call.args[0] is arg:
            stacked.append(call)
    return bool(stacked) and all(_reaches_placement(metadata, call, depth + 1, strict) for call in stacked)


def _number_stored(parents: Mapping, use: cst.CSTNode) -> bool:
    """``mask[i, j] = 1``: a number written into the buffer, which reads nothing out of it (dino
    builds a neighbourhood mask on the host this way and moves it once it is done)."""
    subscript = parents.get(use)
    target = parents.get(subscript) if isinstance(subscript, cst.Subscript) and subscript.value is use else None
    statement = parents.get(target) if isinstance(target, cst.AssignTarget) else None
    return isinstance(statement, cst.Assign) and (is_number(statement.value) or (
        isinstance(statement.value, cst.Name) and statement.value.value in ("True", "False")))


def _metadata_read(parents: Mapping, use: cst.CSTNode) -> bool:
    """``buf.shape``, ``buf.dtype``, ``len(buf)``: reads no tensor data."""
    parent = parents.get(use)
    if isinstance(parent, cst.Attribute) and parent.value is use:
        return parent.attr.value in ("shape", "dtype", "ndim")
    call = parents.get(parent) if isinstance(parent, cst.Arg) else None
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len"


def filled_from_host(metadata: Mapping, call: cst.Call) -> bool:
    """``aux_pi = torch.zeros(...)`` then ``aux_pi[:, ind] = unflatten(logits)`` with ``logits =
    agent(x).cpu()``: a buffer the author fills with values brought to the host, a CPU staging
    buffer on purpose (cleanrl's ppg_procgen keeps rollouts there to save GPU memory)."""
    name = assigned_name(metadata, call)
    if name is None:
        return False
    parents = metadata[ParentNodeProvider]
    for use in uses_of_binding(metadata, name):
        subscript = parents.get(use)
        store = parents.get(subscript) if isinstance(subscript, cst.Subscript) else None
        if isinstance(store, cst.AssignTarget) and _brought_to_host(metadata, parents.get(store).value):
            return True
    return False


def _brought_to_host(metadata: Mapping, value: cst.BaseExpression) -> bool:
    """Does ``value`` hold a ``.cpu()`` result, itself or through a variable bound to one?"""
    if _mentions_cpu(value):
        return True
    for node in walk(value):
        if isinstance(node, cst.Name):
            for binding in scope_bindings(metadata[ScopeProvider].get(node), node.value):
                bound = assigned_value(metadata, binding.node)
                if bound is not None and _mentions_cpu(bound):
                    return True
    return False


def shape_data(metadata: Mapping, call: cst.Call) -> bool:
    """``torch.tensor(u.shape[2:])``, ``torch.tensor(x.size())``: a tensor of sizes, which code
    reads back on the host (``.tolist()``, loops, grid arithmetic) and which stays there.
    (``torch.arange(x.size(1))`` is no such thing: it counts positions.)"""
    if not qualified_names(metadata, call.func) & {"torch.tensor", "torch.as_tensor"}:
        return False
    data = call.args[0].value if call.args and call.args[0].keyword is None else None
    return data is not None and any(
        (isinstance(n, cst.Attribute) and n.attr.value == "shape")
        or (isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "size")
        for n in walk(data))


def meets_host_result(metadata: Mapping, call: cst.Call) -> bool:
    """``latents = latents.float().cpu()``; ``return (latents - mean) / std`` with ``mean =
    torch.tensor(stats)``: the tensor meets one the author brought to the host on purpose."""
    name = assigned_name(metadata, call)
    if name is None:
        return False
    parents = metadata[ParentNodeProvider]
    for use in uses_of_binding(metadata, name):
        parent = parents.get(chain_top(metadata, use))
        if not isinstance(parent, cst.BinaryOperation):
            continue
        other = parent.right if parent.left is chain_top(metadata, use) else parent.left
        while isinstance(other, cst.BinaryOperation):
            other = other.left
        if isinstance(other, cst.Name) and any(
                _ends_on_host(assigned_value(metadata, b.node))
                for b in scope_bindings(metadata[ScopeProvider].get(other), other.value)
                if _binding_before(metadata, b.node, use)):
            return True
    return False


def _ends_on_host(value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "cpu"


def _binding_before(metadata: Mapping, binding: cst.CSTNode, use: cst.CSTNode) -> bool:
    return line_of(metadata, binding) <= line_of(metadata, use)


def torch_data_function(metadata: Mapping, call: cst.Call) -> bool:
    """``torch.unsqueeze``, ``torch.normal``, ``torch.cat``: a torch function whose result
    lives where its tensor arguments do."""
    return any(n.startswith("torch.") and n.count(".") == 1 for n in qualified_names(metadata, call.func))


def _cpu_rooted(metadata: Mapping, expr: cst.BaseExpression, depth: int) -> bool:
    """``feats.pow(2)`` where ``feats`` is CPU-bound data itself."""
    node = chain_root(expr)
    if not isinstance(node, cst.Name) or depth >= _MAX_FLOW_DEPTH:
        return False
    bindings = scope_bindings(metadata[ScopeProvider].get(node), node.value)
    if len(bindings) != 1 or not isinstance(bindings[0].node, cst.Name):
        return False
    return any(_consumed_on_cpu(metadata, chain_top(metadata, use)) for use in uses_of_binding(metadata, bindings[0].node))


def _arithmetic_top(metadata: Mapping, node: cst.CSTNode) -> cst.CSTNode:
    """``torch.rand(n) * 2 - 1``: climb arithmetic with number literals, which keeps the
    tensor's device. Arithmetic with anything else may meet a GPU tensor, so it stops there."""
    parents = metadata[ParentNodeProvider]
    current = node
    while True:
        parent = parents.get(current)
        if isinstance(parent, cst.UnaryOperation):
            current = parent
        elif isinstance(parent, cst.Comparison) and parent.left is current \
                and all(is_number(c.comparator) for c in parent.comparisons):
            current = parent  # ``torch.rand(1) > 0.5``
        elif isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is current else parent.left
            if not is_number(other):
                return current
            current = parent
        else:
            return current


def is_number(node: cst.BaseExpression, named_constants: bool = False) -> bool:
    """A number literal and arithmetic of them; with ``named_constants`` also ``math.pi``-like names."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if named_constants and isinstance(node, cst.Attribute):
        return node.attr.value in ("pi", "e", "tau")
    if isinstance(node, cst.UnaryOperation):
        return is_number(node.expression, named_constants)
    if isinstance(node, cst.BinaryOperation):
        return is_number(node.left, named_constants) and is_number(node.right, named_constants)
    return False


def flows_only_to_cpu_name(metadata: Mapping, name: cst.Name) -> bool:
    """Does the variable ``name`` (any load or binding of it) feed a Dataset, a DataLoader,
    a NumPy-based library or ``.numpy()`` anywhere in its scope? Those want CPU tensors."""
    scope = metadata[ScopeProvider].get(name)
    if scope is None:
        return False
    uses = [a.node for a in scope.accesses[name.value] if isinstance(a.node, cst.Name)]
    return any(_consumed_on_cpu(metadata, use, methods=frozenset({"numpy"}), loops=False) for use in uses)


def _consumed_on_cpu(metadata: Mapping, node: cst.CSTNode, methods: frozenset[str] = _CPU_METHODS,
                     loops: bool = True, bools: bool = True) -> bool:
    parents = metadata[ParentNodeProvider]
    parent = parents.get(node)
    if isinstance(parent, cst.Arg):
        call = parents.get(parent)
        loop = parents.get(call)
        if loops and isinstance(call, cst.Call) and isinstance(call.func, cst.Name) \
                and call.func.value in ("zip", "enumerate") and isinstance(loop, (cst.For, cst.CompFor)) \
                and loop.iter is call:
            return True  # ``for block, drop in zip(blocks, mask)``: each element read as a Python value
        if isinstance(call, cst.Call):
            return _feeds_cpu_data(metadata, call) or _calls_cpu_library(metadata, call) \
                or _plotted_by_own_function(metadata, call, parent)
    if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in methods:
        return True
    if loops and isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node:
        return True  # ``for i in ix``: each element is read as a Python number (a sync per element on a GPU)
    if bools and _read_as_bool(parent, node):
        return True
    if bools and isinstance(parent, cst.Subscript) and parent.value is node \
            and _read_as_bool(parents.get(parent), parent):
        return True  # ``if skip[k]: continue``
    return False


def _plotted_by_own_function(metadata: Mapping, call: cst.Call, arg: cst.Arg) -> bool:
    """``plot_losses(epochs, losses)`` where the file's own ``def plot_losses(epochs_seen, ...)``
    hands that parameter straight to a NumPy-based library (``ax.plot(epochs_seen, ...)``, which
    calls ``np.asarray``): a CUDA tensor fails there, after the whole training run. So it is for
    ``evaluate(samples)`` whose ``def evaluate(data)`` builds ``DataLoader(data, ...)``."""
    if not isinstance(call.func, cst.Name) or arg.star:
        return False
    bindings = scope_bindings(metadata[ScopeProvider].get(call.func), call.func.value)
    function = bindings[0].node if len(bindings) == 1 else None
    if not isinstance(function, cst.FunctionDef):
        return False
    params = [*function.params.posonly_params, *function.params.params]
    if arg.keyword is not None:
        chosen = next((p for p in (*params, *function.params.kwonly_params) if p.name.value == arg.keyword.value), None)
    else:
        index = [a for a in call.args if a.keyword is None].index(arg)
        chosen = params[index] if index < len(params) else None
    if chosen is None:
        return False
    name = chosen.name.value
    return any(isinstance(node, cst.Name) and node.value == name and _shown_on_host(metadata, node)
               for node in walk(function.body))


def _shown_on_host(metadata: Mapping, node: cst.CSTNode) -> bool:
    """Does ``node`` reach a matplotlib plot, a NumPy-based library or a Dataset/DataLoader, directly or through
    arithmetic, indexing, tensor methods and torch functions (``plt.imshow(torch.clip(image *
    std, 0, 255).int())``)?"""
    parents = metadata[ParentNodeProvider]
    current = node
    for _ in range(_MAX_HOST_STEPS):
        parent = parents.get(current)
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)) \
                or (isinstance(parent, cst.Subscript) and parent.value is current):
            current = parent
        elif isinstance(parent, cst.Attribute) and parent.value is current:
            call = parents.get(parent)
            if not (isinstance(call, cst.Call) and call.func is parent):
                return False
            current = call  # ``.int()``, ``.permute(1, 2, 0)``: a tensor method's result
        elif isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if not isinstance(call, cst.Call):
                return False
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in _PLOTTING_METHODS:
                return True  # ``ax.plot(x, ...)``: an Axes made by matplotlib
            if _calls_cpu_library(metadata, call):
                return True
            if _feeds_cpu_data(metadata, call):
                return True  # ``DataLoader(data, num_workers=2)``: its workers must not touch CUDA
            if not torch_data_function(metadata, call):
                return False
            current = call  # ``torch.clip(x, 0, 1)``: its result lives where ``x`` does
        else:
            return False
    return False


_MAX_HOST_STEPS = 8  # links followed from a parameter to the library that reads it


# Methods of matplotlib's Axes (``fig, ax = plt.subplots()``) that turn their data into NumPy arrays.
_PLOTTING_METHODS = frozenset({"plot", "scatter", "bar", "barh", "hist", "imshow", "fill_between", "errorbar",
                               "semilogy", "semilogx", "loglog", "step", "stem", "contour", "contourf"})


def _read_as_bool(parent: cst.CSTNode | None, node: cst.CSTNode) -> bool:
    """``if flag:``, ``while done:``, ``not t``, ``a and t``: Python reads the value; on a GPU
    each read is a device sync, and the tensor is no faster there."""
    if isinstance(parent, (cst.If, cst.While, cst.IfExp)) and parent.test is node:
        return True
    if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
        return True
    return isinstance(parent, cst.BooleanOperation)


def _used_as_index(metadata: Mapping, node: cst.CSTNode) -> bool:
    """``data[perm]``, ``data[perm[:k]]``, ``data[perm.long()]``: CPU indices work on any
    device, GPU indices into a CPU tensor fail. Stops at the enclosing statement and at
    calls that take the value as an argument."""
    child = node
    for parent in ancestors(metadata, node):
        if isinstance(parent, cst.Attribute) and parent.value is child and parent.attr.value in _METADATA_ATTRIBUTES:
            return False  # ``a[x.shape[0]:]`` reads the tensor's size, not its data
        if isinstance(parent, cst.SubscriptElement):
            return True
        if isinstance(parent, cst.Call) and parent.func is not child:
            return False
        if isinstance(parent, (cst.BaseSmallStatement, cst.BaseStatement, cst.Lambda)):
            return False
        child = parent
    return False


_CTC_LENGTHS = ("input_lengths", "target_lengths")


def is_ctc_length(metadata: Mapping, node: cst.CSTNode) -> bool:
    """Is ``node`` (or the variable it is bound to) a length argument of a CTC loss that must
    stay where it is? warp-ctc's ``CTCLoss`` needs both lengths on the CPU, and PyTorch's
    copies input lengths there itself. PyTorch's *target* lengths are the exception: where its
    cuDNN kernel is eligible, the "mean" reduction divides the GPU losses by them as they are
    (seen failing on an H200 with CPU int32 ones), so they move with the group."""
    parents = metadata[ParentNodeProvider]
    name = assigned_name(metadata, node) if isinstance(node, cst.Call) else None
    for use in [node] if name is None else uses_of_binding(metadata, name):
        arg = parents.get(chain_top(metadata, use))
        call = parents.get(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call):
            continue
        makers = _ctc_makers(metadata, call.func)
        if not makers:
            continue
        position = call.args.index(arg) if arg.keyword is None else None
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "target_lengths" or position == 3:
            if all(m.startswith("torch.") for m in makers):
                continue
            return True
        if keyword in _CTC_LENGTHS or (position is not None and position >= 2):
            return True
    return False


def _ctc_makers(metadata: Mapping, func: cst.BaseExpression, bound: bool = False) -> set[str]:
    """The qualified names of the CTC losses behind ``func``: ``F.ctc_loss``, ``nn.CTCLoss()``,
    or ``criterion`` where some branch binds it to ``CTCLoss(...)`` (empty: not a CTC loss)."""
    makers: set[str] = set()
    if isinstance(func, cst.Name) and not bound:
        values = [_unmoved(assigned_value(metadata, b.node))
                  for b in scope_bindings(metadata[ScopeProvider].get(func), func.value)]
        for value in values:  # one branch may build warp-ctc's loss, another the attention head's
            if isinstance(value, cst.Call):
                makers |= _ctc_makers(metadata, value.func, True)
    made_by = func.func if isinstance(func, cst.Call) else func  # ``nn.CTCLoss()(...)``
    names = qualified_names(metadata, made_by) | {dotted(made_by) or ""}
    found = {n for n in names if n.endswith(("ctc_loss", "CTCLoss"))}
    # An unresolved ``nn.CTCLoss`` keeps its dotted spelling: only a resolved torch name counts as torch's.
    return makers | ({n for n in found if n.startswith("torch.")} or found)


def _unmoved(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """``nn.CTCLoss().to(device)`` -> ``nn.CTCLoss()``."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value in ("to", "cuda") and isinstance(value.func.value, cst.Call):
        value = value.func.value
    return value


def in_signature(metadata: Mapping, node: cst.CSTNode) -> bool:
    """Inside a parameter default, annotation or decorator: runs at ``def`` time, where
    neither the function's parameters nor its locals exist yet."""
    for parent in ancestors(metadata, node):
        if isinstance(parent, (cst.Parameters, cst.Decorator, cst.Annotation)):
            return True
        if isinstance(parent, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module)):
            return False
    return False


def is_dtype(metadata: Mapping, expr: cst.BaseExpression) -> bool:
    """``torch.float16``, ``th.long``, ``x.dtype``: an expression that surely is a dtype."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "dtype":
        return True
    return any(n.startswith("torch.") and n[6:] in DTYPES for n in qualified_names(metadata, expr))


def accepts_device_keyword(metadata: Mapping, call: cst.Call) -> bool:
    """May ``device=`` be added to this factory call without changing what it means?

    No for calls that already place the tensor (``device=``, ``out=``, ``generator=``,
    ``pin_memory=``), that may pass it hidden (``**kwargs``, extra positional arguments
    of ``torch.tensor``), or whose overload takes no device (``complex``, ``polar``,
    ``normal(mean_tensor, std_tensor)``).
    """
    name = factory_name(metadata, call)
    if name is None or name in _NO_DEVICE_FACTORIES:
        return False
    if any(keyword(call, k) is not None for k in _PLACED_KEYWORDS):
        return False
    if any(a.star == "**" for a in call.args):
        return False
    if any(a.star == "*" for a in call.args) and name not in _VARARG_SIZE_FACTORIES:
        return False
    if name in _SINGLE_DATA_FACTORIES and len(positional(call)) != 1:
        return False
    if name == "torch.normal":  # only ``normal(mean, std, size)`` creates a tensor from scratch
        return len(positional(call)) >= 3 or keyword(call, "size") is not None
    return True


def bound_before(metadata: Mapping, node: cst.CSTNode, name: str) -> bool:
    """Is ``name`` usable at ``node``? False when it is a local of the enclosing function
    that is only assigned further down (writing it there raises UnboundLocalError)."""
    scope = metadata[ScopeProvider].get(node)
    while isinstance(scope, ComprehensionScope):
        scope = scope.parent
    if scope is None or isinstance(scope, GlobalScope):
        return True  # module level: DM101 places the shared variable above its first use
    local = [a for a in scope.assignments[name] if a.scope is scope]
    if not local:
        return True
    line = line_of(metadata, node)
    return any(isinstance(a.node, cst.Param) or line_of(metadata, a.node) < line for a in local)


_INDEX_MAKERS = frozenset({"topk", "sort", "argsort", "argmax", "argmin", "max", "min", "nonzero", "multinomial"})


def _indexed_by_tensor(metadata: Mapping, subscript: cst.Subscript) -> bool:
    """``table[idx]`` with a tensor index: a factory's result, or a name unpacked from
    ``torch.topk`` / ``x.max(dim)`` and the like (on the device of the data they ranked)."""
    for element in subscript.slice:
        index = element.slice.value if isinstance(element.slice, cst.Index) else None
        if index is None:
            continue
        if is_surely_tensor(metadata, index):
            return True
        if isinstance(index, cst.Name):
            scope = metadata[ScopeProvider].get(index)
            bindings = scope_bindings(scope, index.value) if scope is not None else []
            for binding in bindings:
                assign = next((a for a in ancestors(metadata, binding.node) if isinstance(a, cst.Assign)), None)
                value = assign.value if assign is not None else None
                if isinstance(value, cst.Call) and (
                        isinstance(value.func, cst.Attribute) and value.func.attr.value in _INDEX_MAKERS
                        or any(n.startswith("torch.") for n in qualified_names(metadata, value.func))):
                    return True
    return False


def is_surely_tensor(metadata: Mapping, expr: cst.BaseExpression) -> bool:
    """A factory call, a tensor method chain on one, or a name assigned once from either."""
    node = expr
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value in TENSOR_METHODS:
        node = node.func.value
    if factory_name(metadata, node):
        return True
    if isinstance(node, cst.Call) and _torch_function_of_tensor(metadata, node):
        return True
    if isinstance(node, cst.UnaryOperation):
        return is_surely_tensor(metadata, node.expression)
    if isinstance(node, cst.BinaryOperation) and not any(
            isinstance(side, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
            for side in (node.left, node.right)):  # ``"%.3f" % t`` is a string
        return is_surely_tensor(metadata, node.left) or is_surely_tensor(metadata, node.right)
    if isinstance(node, cst.Name):
        scope = metadata[ScopeProvider].get(node)
        if scope is None:
            return False
        assignments = scope_bindings(scope, node.value)
        if len(assignments) != 1:
            return False
        target = assignments[0].node
        parent = metadata[ParentNodeProvider].get(target)
        assign = metadata[ParentNodeProvider].get(parent) if parent is not None else None
        if isinstance(parent, cst.AssignTarget) and isinstance(assign, cst.Assign) and assign.value is not expr:
            return not any(n is expr for n in walk(assign.value)) and is_surely_tensor(metadata, assign.value)
        if isinstance(parent, cst.Element):  # ``P, L, U = torch.lu_unpack(...)``
            return _unpacks_torch_results(metadata, parent)
    return False


def _unpacks_torch_results(metadata: Mapping, element: cst.Element) -> bool:
    """An element of ``a, b = torch.<function>(...)`` (``torch.max(x, 1)``, ``torch.linalg.qr(m)``):
    a torch function that returns several values returns tensors (``torch.load`` returns anything)."""
    parents = metadata[ParentNodeProvider]
    target = parents.get(parents.get(element))
    assign = parents.get(target)
    if not (isinstance(target, cst.AssignTarget) and isinstance(assign, cst.Assign)
            and isinstance(assign.value, cst.Call)):
        return False
    names = qualified_names(metadata, assign.value.func)
    return any((n.count(".") == 1 and n[6:7].islower() or n.startswith("torch.linalg."))
               and n.startswith("torch.") and n != "torch.load" for n in names)


def surely_tensor_variable(metadata: Mapping, name: cst.Name) -> bool:
    """Does the variable ``name`` (a load) hold a tensor wherever it is bound?

    Every binding in ``name``'s own scope must make a tensor: ``x = <factory or tensor
    chain>``, ``x = x.<conversion>(...)``, ``x += ...``, or a ``for x, y in loader``
    unpacking of a DataLoader batch. Parameters, imports, ``global`` names and bindings
    in enclosing scopes are "don't know".
    """
    scope = metadata[ScopeProvider].get(name)
    if scope is None:
        return False
    bindings = scope_bindings(scope, name.value)
    if not bindings or any(b.scope is not scope for b in bindings):
        return False
    return all(_binds_tensor(metadata, b.node, name.value) for b in bindings)


def _binds_tensor(metadata: Mapping, target: cst.CSTNode, variable: str) -> bool:
    parents = metadata[ParentNodeProvider]
    if not isinstance(target, cst.Name):
        return False
    parent = parents.get(target)
    if isinstance(parent, cst.AugAssign):
        return True  # ``x += y`` keeps a tensor a tensor
    if isinstance(parent, cst.AssignTarget):
        assign = parents.get(parent)
        return isinstance(assign, cst.Assign) and _makes_tensor(metadata, assign.value, variable)
    if isinstance(parent, cst.AnnAssign) and parent.value is not None:
        return _makes_tensor(metadata, parent.value, variable)
    return _loader_batch_element(metadata, target)


def _makes_tensor(metadata: Mapping, value: cst.BaseExpression, variable: str) -> bool:
    """``torch.zeros(3)``, ``t.float()`` for a surely-tensor ``t``, or ``x.to(device)`` of the variable itself."""
    node = value
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value in TENSOR_METHODS | CONVERSION_METHODS:
        node = node.func.value
    if isinstance(node, cst.Name) and node.value == variable and node is not value:
        return True  # a conversion of the variable's own (tensor) value
    if isinstance(node, cst.Name) and node.value == variable:
        return False
    return is_surely_tensor(metadata, value)


def _loader_batch_element(metadata: Mapping, target: cst.Name) -> bool:
    """``x`` in ``for x, y in loader`` / ``for i, (x, y) in enumerate(loader)``: the
    default collate function stacks sample tensors into batch tensors."""
    parents = metadata[ParentNodeProvider]
    node: cst.CSTNode = target
    unpacked = False
    while True:
        parent = parents.get(node)
        if isinstance(parent, cst.Element):
            parent = parents.get(parent)
        if isinstance(parent, (cst.Tuple, cst.List)):
            node, unpacked = parent, True
            continue
        break
    loop = parents.get(node)
    if not unpacked or not isinstance(loop, cst.For) or loop.target is not node:
        return False
    loader = find_loader(metadata, loop.iter)
    if loader is None:
        return False
    if loader.enumerated and isinstance(node, (cst.Tuple, cst.List)) and len(node.elements) == 2 and \
            any(e.value is target for e in node.elements):
        return False  # the enumerate counter, or the whole batch rather than an unpacked element
    return True


def _torch_function_of_tensor(metadata: Mapping, call: cst.Call) -> bool:
    """``torch.tril(t)``, ``torch.cat([a, b])``: a torch function applied to a tensor."""
    names = qualified_names(metadata, call.func)
    if not any(n.startswith("torch.") and n.count(".") == 1 and n[6:7].islower() for n in names):
        return False
    return any(is_surely_tensor(metadata, a.value) for a in call.args if a.keyword is None)
