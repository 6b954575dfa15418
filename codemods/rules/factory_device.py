"""DM201 factory-device: tensor factories in device code get ``device=``.

Why: ``torch.zeros``, ``torch.randn``, ``torch.arange`` and friends create CPU
tensors unless told otherwise. Combined with a model or batch on the GPU they fail
with "Expected all tensors to be on the same device". Creating the tensor on the
right device is also faster than creating it on the CPU and copying it: where
devmod's own fix leaves ``torch.zeros(...).to(device)`` (``.cuda()`` rewritten by DM302) it
folds into ``torch.zeros(..., device=device)``. The user's own working ``.to(d)`` stays as
written (the same tensor either way), unless it names the module's global device inside a
model method, which gets the input's device. A random factory never folds: drawn on the
device, it would come from another generator and give other numbers for the same seed.

- In training code and at module level: ``device=device`` (the shared variable, or
  the function's ``device`` parameter).
- Inside an ``nn.Module`` method: the device of the input (``device=x.device``), an
  existing ``self.device``, else ``next(self.parameters()).device``; never the
  module-level global, which breaks DataParallel replicas and reuse of the module.
- ``torch.from_numpy(a)`` shares the array's memory and takes no ``device=``, and the legacy
  CPU constructors (``torch.FloatTensor([[...]])``, ``torch.LongTensor(labels)``) take none
  either: where one (or the variable it is assigned to) is passed to a model or a loss in
  device code, it gets ``.to(device)``, so the model never moves without its inputs.
  Elsewhere host data is usually dataset material and stays.
- Never in Dataset methods, collate functions or a model's ``__init__``: CPU
  tensors are right there (CUDA in forked DataLoader workers fails).
- Skipped: calls that already place the tensor (``device=``, ``out=``, a CPU
  ``generator=``, ``pin_memory=``, ``**kwargs``, an extra positional argument, a
  following ``.to(device, dtype)`` / ``.to("cpu")`` / ``.cuda()``, or ``x = x.to(device)``
  a few ``x = f(x)`` lines later with nothing else seeing ``x`` before), factories without a
  ``device=`` (``complex``, ``polar``, ``normal(mean_t, std_t)``), parameter defaults
  (they run before the function's device exists), ``*_like`` and ``x.new_*`` (they
  follow their input), and tensors that feed CPU-side work: a Dataset or DataLoader,
  samples iterated in a loop (also through ``zip``/``enumerate``), values read as Python
  booleans (``if not drop``, ``if skip[k]:``, also a mask ``torch.rand(n) < self.p``: on a GPU
  each read waits for the device), an index (``data[perm]``: CPU indices work on any
  device), ``.numpy()`` / ``.tolist()`` / ``.item()`` / ``.cpu()``, NumPy, matplotlib or
  ``math`` (also after arithmetic or indexing: ``plt.axis(box * zoom)``), tensors that
  meet a legacy CPU tensor which stays on the CPU (``t[i] * torch.FloatTensor(pair)``), tensors the
  author casts to a CPU type (``(torch.ones(n, 1) * c).type(torch.LongTensor)``), and inputs of a method
  of an object used as a model that devmod cannot see and that is never moved, and inputs of a model's
  call that runs on the CPU before the line that moves the model (``net(probe)`` above ``net.cuda()``).
- A legacy tensor filled in place (``torch.LongTensor(3, 4).random_(0, 50)``) moves after its fills, so
  its numbers come from the same generator as before.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import ComprehensionScope, GlobalScope, ParentNodeProvider, ScopeProvider

from ..analysis.candidates import FileFacts, keywords, method_name
from ..analysis.devices import DEVICE_LIKE_NAMES, always_cpu, guessed_from_parameters, hands_a_device, is_torch_device_call
from ..analysis.names import dotted, keyword, keyword_arg, method_call, positional, qualified_names, torch_module_alias
from ..analysis.tree import ancestors, code_of, line_of, nodes_of, to_call, walk
from ..analysis.guards import sets_default_device
from ..analysis.scopes import ScopeKind, assigned_value, only_assigned_value, only_binding, scope_bindings
from ..analysis.groups import blocked_callee, blocked_scopes, dominating_binding_above, handed_with_a_model, models_fed, \
    samples_a_distribution
from ..analysis.loops import find_loader, packs_sequences
from ..analysis.pinned import moves_itself_somewhere, moves_off_the_cpu, pinned_to_cpu
from ..analysis.roles import HOST_MAKERS, builds_model, factory_name, tensor_factories, places_itself, is_loss_callee, is_loss_constructor, is_model_callee, is_model_method_call, \
    model_variables, wrapper_kind
from ..analysis.tensors import DTYPES, IN_PLACE_FILLS, TENSOR_METHODS, checked_for_none, is_number, passes_itself, runs_only_through_its_methods, NON_MOVING_TO_KEYWORDS, accepts_device_keyword, appended_to, bound_before, flows_only_to_cpu, in_signature, is_ctc_length, \
    filled_from_host, meets_host_result, moved_downstream, moved_in_chain, shape_data, to_names_a_place, assigned_name, chain_top, torch_data_function, uses_of, uses_of_binding, \
    scalar_operand
from .base import Invalid, Rule, Valid

_RANDOM_FACTORIES = frozenset(f"torch.{n}" for n in ("rand", "randn", "randint", "randperm", "normal", "bernoulli",
                                                       "poisson", "multinomial", "rand_like", "randn_like",
                                                       "randint_like"))
_PLACING = frozenset({"device", "out", "generator", "pin_memory", None})  # ``None``: ``**kwargs``
_MAX_REBINDINGS = 4  # ``x = f(x)`` steps followed before the move


_CAST = "a `.type(torch.<Type>Tensor)` cast"
# The dtype of each legacy tensor type.
_LEGACY_DTYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
                  "Long": "int64", "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool"}


# Methods only a model is asked for, among the objects a script builds.
_MODEL_API_CALLS = frozenset({"eval", "train", "parameters", "named_parameters", "state_dict", "load_state_dict",
                              "zero_grad", "modules", "children"})


def _cast_dtype(metadata, cast: cst.Call) -> str | None:
    """``torch.FloatTensor`` in ``x.type(torch.FloatTensor)`` -> ``"float32"``."""
    for name in qualified_names(metadata, cast.args[0].value):
        kind = name[len("torch."):-len("Tensor")] if name.startswith("torch.") and name.endswith("Tensor") else ""
        if kind in _LEGACY_DTYPES:
            return _LEGACY_DTYPES[kind]
    return None


class FactoryDevice(Rule):
    CODE = "DM201"
    NAME = "factory-device"
    SUMMARY = "tensor factories (`torch.zeros`, `randn`, `arange`, ...) in device code get `device=`"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    ORDER = 30

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        factories, definitions = tensor_factories(), None
        for call in facts.calls():
            names = facts.qnames(call.func)
            if names & factories and not keywords(call) & _PLACING:
                # a factory that may take ``device=``: where a device may be found, or folded
                # into a ``.to(<device>)`` right after it (anywhere)
                if (facts.may_get_device(call) and not _placed_after(facts, call)) or _may_fold(facts, call):
                    return True
            if names & HOST_MAKERS or (isinstance(call.func, ast.Name) and call.func.id in facts.role.tensor_helpers) \
                    or (method_name(call) == "type" and len(call.args) == 1 and facts.qnames(call.args[0]) & HOST_MAKERS):
                if facts.may_get_device(call):
                    return True
            if method_name(call) == "to" and len(call.args) == 1 and not call.keywords:
                # ``t.to(device)`` in a model's forward path with the module's global device
                argument = call.args[0].value if isinstance(call.args[0], ast.Starred) else call.args[0]
                kind, function = facts.place(call)
                if isinstance(argument, ast.Name) and kind == "model" and function.name != "__init__":  # type: ignore[union-attr]
                    definitions = facts.device_definition_names() if definitions is None else definitions
                    if argument.id in definitions:
                        return True
        return False

    def visit_Module(self, node: cst.Module) -> bool:
        self._model_names: set[str] | None = None  # computed on the first from_numpy
        self._packs: bool | None = None  # does the file call pack_padded_sequence? (computed on demand)
        # every factory lands there already
        self._default_device_set = "set_default_device" in self.state.source and sets_default_device(self.metadata, node)
        self._asked: set[int] = set()  # parameters whose callers are being asked about (recursion)
        return super().visit_Module(node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        folded = self._fold_to(original_node, updated_node)
        if folded is not None:
            return folded
        if self._global_device_in_model(original_node):
            device = self.device_for(original_node)
            if device is not None and not guessed_from_parameters(device):
                return self.fix(original_node, updated_node, updated_node.with_changes(args=[cst.Arg(device)]),
                                "inside a model the device comes from its input, not from the module's global")
        root = self._filled_maker(original_node)
        if root is not None and not self._filled_further(original_node):
            # ``torch.Tensor(3, 4).normal_()``: moved after its fill, so the numbers come from the
            # CPU generator as before (drawn on the device, the same seed gives others)
            return self._move_host_tensor(root, updated_node)
        if self._host_tensor_maker(original_node):
            if self._filled_further(original_node):
                return updated_node  # moved at the end of its fills (above)
            return self._move_host_tensor(original_node, updated_node)
        if self._default_device_set and self.devices.place(original_node).kind is not ScopeKind.MODEL_METHOD:
            # The file's own code runs after ``torch.set_default_device``; its model classes may
            # also be imported by a script that sets none (cleanrl's enjoy.py): they still follow
            # their input or their buffers.
            return updated_node
        if not self._needs_device(original_node) or self._moved_after(original_node) or self._cast_to_the_host(original_node) \
                or self._variable_moved_later(original_node) or self._left_to_the_author(original_node) \
                or self._host_first_then_moved(original_node):
            return updated_node
        device = self.device_for(original_node)
        if device is None or flows_only_to_cpu(self.metadata, original_node) or self._feeds_unplaced(original_node) \
                or self._built_into_a_model(original_node) \
                or self._lengths_on_cpu(original_node) or self._beside_a_blocked_group(original_node) \
                or self._meets_unmoved_host_tensor(original_node) or self._beside_cpu_tensors(original_node) \
                or self._other_branch_places(original_node, device) or self._moved_one_by_one_by_callers(original_node) \
                or self._combined_with_a_lambda_parameter(original_node) or self._handed_with_the_device(original_node):
            return updated_node
        if isinstance(device, cst.Name) and not bound_before(self.metadata, original_node, device.value):
            return updated_node  # the function defines its device further down
        return self.fix(original_node, updated_node, with_keyword(updated_node, "device", device),
                        f"`{factory_name(self.metadata, original_node)}` creates a CPU tensor here: add `device=`")

    def _built_into_a_model(self, call: cst.Call, depth: int = 0) -> bool:
        """``mask = torch.arange(n) % 2``, ``mask = mask.unsqueeze(0)``, then ``CouplingLayer(n, h, mask)``
        (pytorch-flows' tests): construction data the model keeps as a buffer; ``model.to()`` moves it,
        and placed alone it would meet the model's CPU weights."""
        parents = self.metadata[ParentNodeProvider]
        name = assigned_name(self.metadata, call, through_arithmetic=True)
        if name is None or depth > 3:
            return False
        for use in uses_of_binding(self.metadata, name):
            arg = parents.get(use)
            holder = parents.get(arg) if isinstance(arg, cst.Arg) else None
            if isinstance(holder, cst.Call) and builds_model(self.metadata, holder, self.facts):
                return True
            base = chain_top(self.metadata, use)
            if base is not use and isinstance(parents.get(base), cst.Assign) \
                    and self._built_into_a_model(use, depth + 1):  # ``mask = mask.unsqueeze(0)``
                return True
        return False

    def _combined_with_a_lambda_parameter(self, call: cst.Call) -> bool:
        """``jitter = lambda img: img + torch.rand(*img.shape) / 256.``: a transform handed to a
        Dataset, run on each CPU sample; the tensor goes where the lambda's argument is, not to the
        device of the function that defines it (normalizing_flows' ``data.py``)."""
        function = next((a for a in ancestors(self.metadata, call) if isinstance(a, (cst.Lambda, cst.FunctionDef))),
                        None)
        if not isinstance(function, cst.Lambda):
            return False
        params = {p.name.value for p in function.params.params}
        return any(isinstance(n, cst.Name) and n.value in params for n in walk(function.body))

    def _other_branch_places(self, call: cst.Call, device: cst.BaseExpression) -> bool:
        """``if cora: x = torch.tensor(a, device=device) ... elif ppi: x = torch.tensor(b)``: the
        function places with its ``device`` parameter in one branch and not in the other, so the
        other's tensors stay on the CPU on purpose (a data set too large for the GPU, moved batch
        by batch by its caller)."""
        if not isinstance(device, cst.Name):
            return False
        function = self.devices.place(call).function
        if function is None or device.value not in {p.name.value for p in function.params.params}:
            return False
        placed = [arg for arg in nodes_of(function.body, cst.Arg) if isinstance(arg.value, cst.Name)
                  and arg.value.value == device.value and arg.keyword is not None and arg.keyword.value == "device"
                  and self.written_by_user(arg)]  # (not one an earlier pass added)
        return any(_in_other_branches(self.metadata, arg, call) for arg in placed)

    def _moved_one_by_one_by_callers(self, call: cst.Call) -> bool:
        """``def load(device): ...; return samples`` and every caller ``for x in load(device):
        model(x.to(device))``: the samples are kept on the CPU on purpose (a data set larger
        than the GPU's memory) and moved a batch at a time; the factories that fill what the
        function returns stay as written."""
        function = self.devices.place(call).function
        if function is None or not self._returned_by(call, function):
            return False
        callers = [c for c in nodes_of(self.tree, cst.Call)
                   if isinstance(c.func, cst.Name) and c.func.value == function.name.value]
        parents = self.metadata[ParentNodeProvider]
        for caller in callers:
            loop = parents.get(caller)
            if not (isinstance(loop, cst.For) and loop.iter is caller and isinstance(loop.target, cst.Name)):
                return False
            sample = loop.target.value
            if not any(method_call(c, "to", "cuda") and dotted(c.func.value) == sample
                       for c in nodes_of(loop.body, cst.Call)):
                return False
        return bool(callers)

    def _returned_by(self, call: cst.Call, function: cst.FunctionDef) -> bool:
        """Is the factory's tensor what ``function`` returns (in a returned list or tuple, or
        appended to a list the function returns)?"""
        parents = self.metadata[ParentNodeProvider]
        current = chain_top(self.metadata, call)
        while True:
            parent = parents.get(current)
            if isinstance(parent, (cst.Element, cst.List, cst.Tuple)) \
                    or isinstance(parent, cst.ListComp) and parent.elt is current:
                current = parent
            elif isinstance(parent, cst.Return):
                return True
            elif isinstance(parent, cst.Arg):
                listed = appended_to(parents, parent)
                return listed is not None and any(
                    isinstance(r.value, cst.Name) and r.value.value == listed.value for r in nodes_of(function, cst.Return))
            else:
                return False

    def _host_tensor_maker(self, call: cst.Call) -> str | None:
        """What makes a CPU tensor here that takes no ``device=``: ``torch.from_numpy``, a legacy
        constructor, a ``.type(torch.FloatTensor)`` cast (always the CPU), or a project helper
        that returns one (``real_batch()``)."""
        made = sorted(qualified_names(self.metadata, call.func) & HOST_MAKERS)
        if made:
            return f"`{made[0]}`"
        func = call.func
        if isinstance(func, cst.Name) and func.value in self.state.role.tensor_helpers:
            return f"`{func.value}()`"
        if isinstance(func, cst.Attribute) and func.attr.value == "type" and len(call.args) == 1 \
                and qualified_names(self.metadata, call.args[0].value) & HOST_MAKERS:
            return _CAST
        return None

    def _needs_device(self, call: cst.Call) -> bool:
        """A factory call that takes ``device=``, has none, and runs where its code stands."""
        return accepts_device_keyword(self.metadata, call) and not in_signature(self.metadata, call)

    def _variable_moved_later(self, call: cst.Call) -> bool:
        """``x = torch.rand(n)``, ``x = (x - x.mean()) / x.std()``, ``x = x.to(device)``: the
        author already moves it, and nothing else sees it before then; leave it as written."""
        name = assigned_name(self.metadata, call)
        for _ in range(_MAX_REBINDINGS):
            if name is None:
                return False
            uses = uses_of_binding(self.metadata, name)
            assign = _next_assign_of(self.metadata, uses, name.value)
            if assign is None or len(uses) == 0 or any(not _inside(self.metadata, u, assign) for u in uses):
                return False
            if _moves_itself(assign.value, name.value):
                return True
            if any(isinstance(n, cst.Name) and n.value != name.value and not _is_attribute_name(self.metadata, n)
                   for n in walk(assign.value)):
                return False  # combined with something else: it may meet the device there
            name = assign.targets[0].target if isinstance(assign.targets[0].target, cst.Name) else None
        return False

    def _host_first_then_moved(self, call: cst.Call) -> bool:
        """``a = torch.randn(n)``, host work on ``a`` alone or with others like it
        (``torch.matmul(a, b)``, ``print(a.device)``), then ``a = a.to(device)``: the author
        compares the CPU with the GPU and moves it on purpose later; the first part stays."""
        name = assigned_name(self.metadata, call)
        if name is None:
            return False
        moves, others = self._split_self_moves(name)
        return bool(moves) and all(self._only_looked_at(use, name.value) for use in others)

    def _split_self_moves(self, name: cst.Name) -> tuple[list[cst.Name], list[cst.Name]]:
        """The uses of this binding of ``name`` in ``name = name.to(<place>)``, and the others."""
        parents = self.metadata[ParentNodeProvider]
        moves, others = [], []
        for use in uses_of_binding(self.metadata, name):
            to = parents.get(parents.get(use))
            statement = parents.get(to)
            if isinstance(to, cst.Call) and _moves_itself(to, name.value) and to_names_a_place(self.metadata, to) \
                    and isinstance(statement, cst.Assign) and statement.value is to \
                    and isinstance(statement.targets[0].target, cst.Name) \
                    and statement.targets[0].target.value == name.value:
                moves.append(use)
            else:
                others.append(use)
        return moves, others

    def _only_looked_at(self, use: cst.Name, variable: str) -> bool:
        """Printed (``print(a.device)``), or given to a torch function with nothing but itself,
        literals and other tensors the author moves later the same way (``torch.matmul(a, b)``)."""
        parents = self.metadata[ParentNodeProvider]
        top = use
        while isinstance(parents.get(top), cst.Attribute) and parents.get(top).value is top:
            top = parents.get(top)
        arg = parents.get(top)
        call = parents.get(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call):
            return False
        if isinstance(call.func, cst.Name) and call.func.value == "print":
            return True
        return any(n.startswith("torch.") for n in qualified_names(self.metadata, call.func)) and all(
            isinstance(a.value, (cst.Integer, cst.Float))
            or (isinstance(a.value, cst.Name) and (a.value.value == variable or self._moved_later_too(a.value)))
            for a in call.args)

    def _moved_later_too(self, name: cst.Name) -> bool:
        """The binding that reaches ``name`` is moved by the author later (``b = b.to(device)``)."""
        bindings = scope_bindings(self.metadata[ScopeProvider].get(name), name.value)
        reaching = dominating_binding_above(self.metadata, name, [b.node for b in bindings
                                                                   if isinstance(b.node, cst.Name)])
        return reaching is not None and bool(self._split_self_moves(reaching)[0])

    def _left_to_the_author(self, call: cst.Call) -> bool:
        """In model and library code, where the author's own code decides: a value computed
        from it is placed later (``moved_downstream``), it holds sizes (``shape_data``), or it
        meets a tensor the author brought to the host (``meets_host_result``). In driver code an
        operand may be what devmod itself moves to the GPU: only a placement through method
        chains, subscripts and assignments counts there (a CPU staging buffer moved by slices)."""
        if scalar_operand(self.metadata, call):
            return True  # a 0-dim constant read as an operand works with a tensor on any device
        kind = self.devices.place(call).kind
        if kind in (ScopeKind.MODEL_METHOD, ScopeKind.OTHER_METHOD) or self.devices.in_library_code(call):
            return moved_downstream(self.metadata, call) or shape_data(self.metadata, call) \
                or meets_host_result(self.metadata, call)
        return moved_downstream(self.metadata, call, strict=True) or filled_from_host(self.metadata, call)

    def _cast_to_the_host(self, call: cst.CSTNode) -> bool:
        """``(torch.ones(n, 1) * cls).type(torch.LongTensor)``: the author casts it to a CPU type, which
        brings it back to the CPU wherever it was made (semi-supervised-pytorch's ``enumerate_discrete``);
        also through its variable (``rows = torch.zeros(...)`` ... ``return rows.type(torch.LongTensor)``)."""
        parents = self.metadata[ParentNodeProvider]
        name = assigned_name(self.metadata, call)
        if name is not None and any(self._cast_to_the_host(use) for use in uses_of_binding(self.metadata, name)
                                    if use is not call):
            return True
        current: cst.CSTNode = call
        while True:
            parent = parents.get(current)
            if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
                current = parent
            elif isinstance(parent, cst.Attribute) and parent.value is current and isinstance(parents.get(parent), cst.Call):
                outer = parents[parent]
                if parent.attr.value == "type" and len(outer.args) == 1 \
                        and qualified_names(self.metadata, outer.args[0].value) & HOST_MAKERS:
                    return True
                if parent.attr.value not in TENSOR_METHODS:
                    return False
                current = outer
            else:
                return False

    def _moved_after(self, call: cst.Call) -> bool:
        """``torch.zeros(n).to(...)`` / ``.cuda()`` that already moves it: folded below when the
        move is a plain ``.to(device)``, else left as written (``.to(device, dtype)``,
        ``.to("cpu")``, ``.to(other_tensor)``). A dtype-only ``.to(torch.half)`` moves nothing."""
        parents = self.metadata[ParentNodeProvider]
        attribute = parents.get(call)
        outer = parents.get(attribute) if isinstance(attribute, cst.Attribute) else None
        if not (isinstance(attribute, cst.Attribute) and attribute.value is call
                and isinstance(outer, cst.Call) and outer.func is attribute):
            return False
        if attribute.attr.value not in ("to", "cuda"):
            # ``torch.ones(1).fill_(v).type(torch.long).to(d)``: placed at the end of the chain
            return moved_in_chain(self.metadata, outer)
        if attribute.attr.value == "cuda":
            return True
        if attribute.attr.value != "to":
            return False
        return to_names_a_place(self.metadata, outer)

    def _global_device_in_model(self, call: cst.Call) -> bool:
        """``t.to(device)`` in a model's forward path with ``device`` the module's global: on a
        DataParallel replica or a model moved elsewhere, that is the wrong device."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "to" and len(call.args) == 1
                and call.args[0].keyword is None and isinstance(call.args[0].value, cst.Name)):
            return False
        place = self.devices.place(call)
        if place.kind is not ScopeKind.MODEL_METHOD or place.method_name == "__init__":
            return False
        return self._is_global_device(call.args[0].value)

    def _is_global_device(self, name: cst.Name) -> bool:
        if name.value not in {d.name for d in self.device_definitions}:
            return False
        bindings = scope_bindings(self.metadata[ScopeProvider].get(name), name.value)
        return bool(bindings) and all(isinstance(b.scope, GlobalScope) for b in bindings)

    def _device_argument(self, to_call: cst.Call) -> cst.BaseExpression | None:
        """The device of ``.to(device)`` when that is its only argument."""
        args = positional(to_call)
        if len(to_call.args) != 1 or len(args) != 1:
            return None
        value = args[0].value
        if isinstance(value, cst.Name) and (value.value in DEVICE_LIKE_NAMES or value.value == self.shared_name
                                            or value.value in {d.name for d in self.device_definitions}):
            return value
        if isinstance(value, cst.Attribute) and value.attr.value == "device":
            return value
        if is_torch_device_call(self.metadata, value):
            return value
        return None

    def _host_tensor_moves(self, original: cst.Call) -> bool:
        """Does ``_move_host_tensor`` give this host tensor a ``.to(device)``?"""
        if in_signature(self.metadata, original) or moved_in_chain(self.metadata, original) \
                or self._left_to_the_author(original):
            return False
        device = self.device_for(original)
        in_model = self.devices.place(original).kind is ScopeKind.MODEL_METHOD  # it meets the input there
        if device is None or flows_only_to_cpu(self.metadata, original) or self._lengths_on_cpu(original) \
                or self._only_copied(original) \
                or self._joined_with_cpu_data(original) or self._beside_a_blocked_group(original) \
                or not (in_model or self._feeds_model(original)):
            return False
        return not (isinstance(device, cst.Name) and not bound_before(self.metadata, original, device.value))

    def _only_copied(self, call: cst.Call) -> bool:
        """``param.copy_(torch.from_numpy(w))``: ``copy_`` copies across devices itself."""
        parents = self.metadata[ParentNodeProvider]
        name = assigned_name(self.metadata, call)
        uses = [call] if name is None else uses_of_binding(self.metadata, name)
        for use in uses:
            arg = parents.get(chain_top(self.metadata, use))
            copy = parents.get(arg) if isinstance(arg, cst.Arg) else None
            if not (isinstance(copy, cst.Call) and isinstance(copy.func, cst.Attribute)
                    and copy.func.attr.value == "copy_" and copy.args and copy.args[0] is arg):
                return False
        return bool(uses)

    def _meets_unmoved_host_tensor(self, call: cst.Call) -> bool:
        """``t = torch.linspace(0, 1, n)`` then ``t[i] * torch.FloatTensor(pair)``: the legacy
        tensor stays on the CPU, so ``t`` stays with it (a CUDA element times a CPU vector fails)."""
        parents = self.metadata[ParentNodeProvider]
        name = assigned_name(self.metadata, call, through_arithmetic=True)
        summed = []  # ``weights += y.sum(0)``: a binding of ``weights`` to libcst, and a use here
        if name is not None:
            summed = [b.node for b in scope_bindings(self.metadata[ScopeProvider].get(name), name.value)
                      if isinstance(parents.get(b.node), cst.AugAssign)]
        for use in [call, *(uses_of_binding(self.metadata, name) if name is not None else []), *summed]:
            current = chain_top(self.metadata, use)
            while isinstance(parents.get(current), cst.Subscript) and parents.get(current).value is current:
                current = chain_top(self.metadata, parents.get(current))
            operation = parents.get(current)
            if isinstance(operation, cst.BinaryOperation):
                others = [operation.right if operation.left is current else operation.left]
            elif isinstance(operation, cst.AugAssign) and operation.target is current:
                others = [operation.value]  # ``attn[i] += y.cpu()``: an in-place sum needs one device
            elif isinstance(operation, cst.Arg) and isinstance(parents.get(operation), cst.Call):
                # ``criterion(Y_pred, Y)`` with ``Y`` kept on the CPU (read with ``Y.item()``)
                others = [a.value for a in parents.get(operation).args if a is not operation]
            elif isinstance(operation, cst.Element) and isinstance(parents.get(operation), (cst.Tuple, cst.List)) \
                    and self._joined_by_torch(parents.get(operation)):
                # ``out = torch.cat((out, torch.linspace(a, b, n)), 0)`` over ``out = torch.Tensor()``
                others = [e.value for e in parents.get(operation).elements if e is not operation]
            else:
                continue
            for other in others:
                root = self._host_root(other)
                if root is not None and not self._host_tensor_moves(root) or self._factory_kept_on_cpu(other) \
                        or self._on_the_host(other):
                    return True
        return False

    def _joined_by_torch(self, sequence: cst.BaseExpression) -> bool:
        """``torch.cat((a, b))`` / ``torch.stack([a, b])``: a torch function joins the tensors of the
        sequence, which must share one device."""
        arg = self.metadata[ParentNodeProvider].get(sequence)
        call = self.metadata[ParentNodeProvider].get(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(call, cst.Call) and any(q.startswith("torch.")
                                                   for q in qualified_names(self.metadata, call.func))

    def _on_the_host(self, expr: cst.BaseExpression) -> bool:
        """``y.squeeze(0).cpu().data``, or a batch of a loader loop that feeds no model and moves
        nothing (``for _, y in loader: weights += y.sum(0)``): a CPU tensor, whatever devmod does."""
        node = expr
        while True:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                if node.func.attr.value == "cpu" and not node.args:
                    return True
                if node.func.attr.value in ("to", "cuda"):
                    return False
                node = node.func.value
            elif isinstance(node, cst.Subscript) or isinstance(node, cst.Attribute) and node.attr.value == "data":
                node = node.value
            else:
                break
        if not isinstance(node, cst.Name):
            return False
        parents = self.metadata[ParentNodeProvider]
        around = set(map(id, ancestors(self.metadata, node)))
        loop = None
        for binding in scope_bindings(self.metadata[ScopeProvider].get(node), node.value):
            holder = parents.get(binding.node) if isinstance(binding.node, cst.Name) else None
            while isinstance(holder, (cst.Element, cst.Tuple, cst.List)):
                holder = parents.get(holder)
            if isinstance(holder, cst.For) and id(holder) in around:
                loop = holder  # the loop whose variable this is, around the use
        if loop is None or find_loader(self.metadata, loop.iter, frozenset()) is None:
            return False
        if models_fed(self.metadata, self.tree, loop, self.model_groups()):
            return False  # DM203 may move its batch
        inside = [use for use in uses_of(self.metadata, node) if any(a is loop for a in ancestors(self.metadata, use))]
        return not any(moves_itself_somewhere(self.metadata, use) or moved_in_chain(self.metadata, use)
                       for use in inside)

    def _factory_kept_on_cpu(self, expr: cst.BaseExpression) -> bool:
        """``Y`` bound once to ``torch.tensor([0])`` that this rule leaves on the CPU because it is
        read as a Python value or by NumPy (``flows_only_to_cpu``)."""
        if not isinstance(expr, cst.Name):
            return False
        bindings = scope_bindings(self.metadata[ScopeProvider].get(expr), expr.value)
        reaching = dominating_binding_above(self.metadata, expr, [b.node for b in bindings if isinstance(b.node, cst.Name)])
        value = assigned_value(self.metadata, reaching) if reaching is not None else None  # (``Y`` rebound later)
        return isinstance(value, cst.Call) and keyword(value, "device") is None \
            and bool(qualified_names(self.metadata, value.func) & tensor_factories()) \
            and flows_only_to_cpu(self.metadata, value)

    def _beside_cpu_tensors(self, call: cst.Call) -> bool:
        """Its scope computes with a CPU tensor that devmod leaves where it is (a legacy
        constructor or ``from_numpy`` that feeds no model, a ``Normal(0, 1).sample(...)``, a
        tensor drawn from a generator):
        ``corr2d(X, K)`` or ``X @ W + b`` would then mix devices, so no factory there moves."""
        scopes = self.metadata[ScopeProvider]
        if self.state.cpu_scopes is None or self.state.cpu_scopes[0] is not self.tree:
            makers: dict[int, list[cst.Call]] = {}  # one walk per tree: the CPU tensors of each scope
            for node in nodes_of(self.tree, cst.Call):
                if (self._host_tensor_maker(node) or samples_a_distribution(node)
                                                   or self._drawn_from_a_generator(node)
                                                   or self._brought_to_host(node)):
                    makers.setdefault(id(scopes.get(node)), []).append(node)
            self.state.cpu_scopes = (self.tree, makers, {})
        _, makers, known = self.state.cpu_scopes
        key = id(scopes.get(call))
        if key not in known:
            known[key] = any(self._unmoved_and_computed_with(node) for node in makers.get(key, ()))
        return known[key]

    def _brought_to_host(self, call: cst.Call) -> bool:
        """``dist = model(x).data.cpu()``: the author computes on the CPU from here on (RL-Adventure's
        ``dist * support``); a tensor that leaves for NumPy or Python (``.cpu().numpy()``) does not count."""
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "cpu" and not call.args):
            return False
        node = chain_top(self.metadata, call)
        while node is not call and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value in ("numpy", "item", "tolist"):
                return False
            node = node.func.value
        return True

    def _drawn_from_a_generator(self, call: cst.Call) -> bool:
        """``torch.randn(27, 27, generator=g)``: drawn on the generator's device (a CPU
        ``torch.Generator()``), never given a ``device=`` by this rule, so it stays where it is."""
        return keyword(call, "generator") is not None and keyword(call, "device") is None \
            and bool(qualified_names(self.metadata, call.func) & tensor_factories())

    def _unmoved_and_computed_with(self, maker: cst.Call) -> bool:
        if self._host_tensor_maker(maker) and self._host_tensor_moves(maker):
            return False
        parents = self.metadata[ParentNodeProvider]
        name = assigned_name(self.metadata, maker)
        for use in [maker] if name is None else uses_of_binding(self.metadata, name):
            current = chain_top(self.metadata, use)
            parent = parents.get(current)
            if isinstance(parent, cst.BinaryOperation):
                return True
            call = parents.get(parent) if isinstance(parent, cst.Arg) else None
            if isinstance(call, cst.Call) and (torch_data_function(self.metadata, call) or isinstance(
                    call.func, cst.Name) and isinstance(only_binding(self.metadata, call.func), cst.FunctionDef)):
                return True  # ``torch.matmul(X, K)``, ``corr2d(X, K)``
        return False

    def _host_root(self, expr: cst.BaseExpression, depth: int = 0) -> cst.Call | None:
        """The legacy constructor / ``from_numpy`` call an operand comes from: ``torch.FloatTensor(pair)``,
        ``m.t()`` with ``m = torch.Tensor(rows)`` bound once; None when it is moved or unknown."""
        root = expr
        while True:
            if isinstance(root, cst.Subscript):
                root = root.value
            elif isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute) \
                    and root.func.attr.value not in ("to", "cuda") and not self._host_tensor_maker(root) \
                    and isinstance(root.func.value, (cst.Call, cst.Name, cst.Subscript)):
                root = root.func.value  # ``torch.FloatTensor(pair).unsqueeze(0)``
            elif isinstance(root, cst.Comparison) and all(is_number(c.comparator) for c in root.comparisons):
                root = root.left  # ``torch.Tensor(n).uniform_() > 0.9``: a mask where its tensor is
            else:
                break
        if isinstance(root, cst.Call):
            return root if self._host_tensor_maker(root) else None
        if isinstance(root, cst.Name) and depth < 2:
            value = only_assigned_value(self.metadata, root) or self._dominating_value(root)
            if value is not None:
                return self._host_root(value, depth + 1)
        return None

    def _dominating_value(self, use: cst.Name) -> cst.BaseExpression | None:
        """The value of the binding of ``use`` that surely runs last above it (``out = torch.Tensor()``
        above the loop that grows ``out``)."""
        statement = self._dominating_assign(use)
        return statement.value if statement is not None and len(statement.targets) == 1 else None

    def _dominating_assign(self, use: cst.Name) -> cst.Assign | None:
        """The assignment whose binding of ``use``'s name surely runs last above it (``dominating_binding_above``)."""
        targets = [b.node for b in scope_bindings(self.metadata[ScopeProvider].get(use), use.value)
                   if isinstance(b.node, cst.Name)]
        reaching = dominating_binding_above(self.metadata, use, targets) if targets else None
        parents = self.metadata[ParentNodeProvider]
        statement = parents.get(parents.get(reaching)) if reaching is not None else None
        return statement if isinstance(statement, cst.Assign) else None

    def _filled_maker(self, call: cst.Call) -> cst.Call | None:
        """The host tensor maker under a chain of in-place fills ending at ``call``, if any."""
        node = call
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in IN_PLACE_FILLS and isinstance(node.func.value, cst.Call):
            node = node.func.value
        return node if node is not call and self._host_tensor_maker(node) not in (None, _CAST) else None

    def _filled_further(self, call: cst.Call) -> bool:
        """Is ``call`` the receiver of an in-place fill (``<call>.random_(0, 50)``)?"""
        parent = self.metadata[ParentNodeProvider].get(call)
        return isinstance(parent, cst.Attribute) and parent.value is call and parent.attr.value in IN_PLACE_FILLS \
            and isinstance(self.metadata[ParentNodeProvider].get(parent), cst.Call)

    def _move_host_tensor(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``torch.from_numpy(a)`` shares the array's memory, so it can take no ``device=``:
        in device code it gets ``.to(device)``, unless its chain already moves it."""
        if not self._host_tensor_moves(original):
            return updated
        device = self.device_for(original)
        maker = self._host_tensor_maker(original)
        dtype = _cast_dtype(self.metadata, original) if maker == _CAST and torch_module_alias(self.tree) else None
        if dtype is not None:  # ``x.type(torch.FloatTensor)`` -> ``x.to(device, torch.float32)``: no CPU round trip
            receiver = updated.func.value  # type: ignore[union-attr]
            dtype_node = cst.Attribute(cst.Name(self.torch_alias), cst.Name(dtype))
            moved = cst.Call(cst.Attribute(receiver, cst.Name("to")), [
                cst.Arg(device, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(dtype_node)])
            return self.fix(original, updated, moved,
                            "a `.type(torch.<Type>Tensor)` cast makes a CPU tensor: cast and move in one `.to(device, dtype)`")
        moved = to_call(updated, device)
        return self.fix(original, updated, moved, f"{maker} makes a CPU tensor; move it with `.to(device)`")

    def _beside_a_blocked_group(self, call: cst.Call) -> bool:
        """In the scope of a model whose group stays on the CPU (DM202 reports it): this tensor
        may meet that group, so it stays too."""
        blocked = blocked_scopes(self.metadata, self.model_groups())
        if not blocked:
            return False
        scope = self.metadata[ScopeProvider].get(call)
        while isinstance(scope, ComprehensionScope):
            scope = scope.parent  # ``batches = [torch.rand(4, 3) for _ in range(2)]``: the comprehension's own scope
        return any(scope is s for s in blocked)

    def _joined_with_cpu_data(self, call: cst.Call) -> bool:
        """``feats = torch.FloatTensor()`` then ``feats = torch.cat((feats, part.cpu()))``: the
        author builds it on the CPU on purpose and moves it once, later."""
        parents = self.metadata[ParentNodeProvider]
        name = assigned_name(self.metadata, call)
        for use in uses_of_binding(self.metadata, name) if name is not None else []:
            node = parents.get(use)
            while isinstance(node, (cst.Element, cst.Tuple, cst.List, cst.Arg)):
                node = parents.get(node)
            if isinstance(node, cst.Call) and any(
                    n.startswith("torch.") for n in qualified_names(self.metadata, node.func)) and any(
                    isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "cpu"
                    for n in walk(node)):
                return True
        return False

    def _lengths_on_cpu(self, call: cst.Call) -> bool:
        """``lengths = torch.LongTensor([len(ids)])`` in a file that packs sequences:
        ``pack_padded_sequence`` wants its lengths on the CPU (maybe behind ``model(ids, lengths)``);
        so do CTC losses (warp-ctc needs them there, ``nn.CTCLoss`` accepts them there)."""
        if is_ctc_length(self.metadata, call):
            return True
        name = assigned_name(self.metadata, call)
        if name is None or "len" not in name.value.lower():
            return False
        if self._packs is None:
            self._packs = packs_sequences(self.metadata, self.tree)
        return self._packs

    def _feeds_unplaced(self, call: cst.Call) -> bool:
        """Is the tensor an input of an object devmod cannot place (``net = build()`` with
        ``build`` unknown, never moved)? Moving the input alone would break a call that works:
        the group stays where it is."""
        parents = self.metadata[ParentNodeProvider]
        start = call
        wrapper = parents.get(parents.get(call)) if isinstance(parents.get(call), cst.Arg) else None
        if isinstance(wrapper, cst.Call) and dotted(wrapper.func) in ("Variable", "autograd.Variable",
                                                                     "torch.autograd.Variable"):
            start = wrapper  # ``x = Variable(torch.ones(n))``: the wrapper is the value
        for callee in self._calls_fed(start, rebound=_MAX_REBINDINGS, in_literals=True, through_wrappers=True):
            if isinstance(callee.func, cst.Call) \
                    and builds_model(self.metadata, callee.func, self.facts):
                return True  # ``Net()(x)``: a model built right there stays on the CPU
            if isinstance(callee.func, cst.Attribute) and isinstance(callee.func.value, cst.Call) \
                    and builds_model(self.metadata, callee.func.value, self.facts):
                return True  # ``Gauss().draw(3, cond=x)``: so does one whose method runs right there
            if any(isinstance(a.value, cst.Call) and builds_model(self.metadata, a.value, self.facts)
                   for a in callee.args):
                return True  # ``forward(x, make_head(8, 5))``: handed a model built right there, on the CPU
            if isinstance(callee.func, cst.Name) \
                    and (self._unplaced_object(callee.func) or self._pinned_to_cpu(callee.func)
                         or blocked_callee(self.metadata, self.model_groups(), callee.func)
                         or self._called_before_its_move(callee.func)):
                return True
            if isinstance(callee.func, cst.Attribute) and isinstance(callee.func.value, cst.Name) \
                    and self._pinned_to_cpu(callee.func.value):
                return True  # ``policy.act(obs, hxs)`` of a policy loaded with ``map_location="cpu"``
            if isinstance(callee.func, cst.Attribute) and isinstance(callee.func.value, cst.Name) \
                    and self._acts_as_a_model(callee.func.value) and self._unplaced_object(callee.func.value):
                return True  # ``model.sample(z)`` of a class devmod cannot see (a package re-export), never moved
            if isinstance(callee.func, cst.Attribute) and isinstance(callee.func.value, cst.Name) \
                    and (self._made_by_a_parameter(callee.func.value) or self._loaded_as_saved(callee.func.value)):
                return True  # ``ac = actor_critic()`` (a class handed in), never moved: ``ac.act(obs)``
            if any(isinstance(a.value, cst.Name) and self._acts_as_a_model(a.value) and self._unplaced_object(a.value)
                   for a in callee.args):
                return True  # ``FlopCountAnalysis(model, x)`` with ``model = timm.models.x()``, never moved
            if any(self._output_of_unplaced(a.value) for a in callee.args):
                return True  # ``F.binary_cross_entropy(net(feats), labels)``: labels stay with that output
        return False

    def _handed_with_the_device(self, call: cst.Call) -> bool:
        """``complete(net, pics[0], keep, dev)``: a function of the user's handed the tensor together with
        the device places what it needs itself, and may keep the rest on the host (``guess[keep] = ...``
        on a CPU result): the tensor stays where the author made it."""
        for callee in self._calls_fed(call, rebound=_MAX_REBINDINGS):
            if not isinstance(callee.func, cst.Name) or is_model_callee(callee.func, self._models()) \
                    or any(q.startswith("torch.") for q in qualified_names(self.metadata, callee.func)):
                continue
            if hands_a_device(callee, DEVICE_LIKE_NAMES | {self.shared_name}):
                return True
        return False

    def _output_of_unplaced(self, expr: cst.BaseExpression) -> bool:
        """``net(feats)`` (or a variable holding it) of a ``net = getattr(nets, kind)(5)`` that devmod
        cannot see and nothing moves: its output is on the CPU."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and expr.func.attr.value in TENSOR_METHODS:
            expr = expr.func.value  # ``A_pred.view(-1)``
        if isinstance(expr, cst.Name):
            expr = only_assigned_value(self.metadata, expr)
        return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) \
            and (self._unplaced_object(expr.func) or self._pinned_to_cpu(expr.func) or self._rebound_unplaced(expr.func))

    def _rebound_unplaced(self, use: cst.Name) -> bool:
        """``import model`` then ``model = getattr(model, name)(adj)``: the binding that reaches ``use``
        is a call devmod cannot see, and nothing moves the name anywhere."""
        statement = self._dominating_assign(use)
        if not (statement is not None and isinstance(statement.value, cst.Call)
                and isinstance(statement.value.func, cst.Call)):
            return False  # only ``getattr(module, name)(...)``-like calls of a computed callee
        return not any(moves_itself_somewhere(self.metadata, u) for u in uses_of(self.metadata, use))

    def _called_before_its_move(self, use: cst.Name) -> bool:
        """``net = nn.Linear(4, 3); net(torch.randn(2, 4)); net = net.cuda()``: the model runs once on
        the CPU before the line that moves it, so that call's inputs stay on the CPU too."""
        if not all(isinstance(b.node, cst.Name) for b in scope_bindings(self.metadata[ScopeProvider].get(use), use.value)):
            return False  # (also bound by an import, a def or a loop: no straight line to follow)
        statement = self._dominating_assign(use)
        if not (statement is not None and isinstance(statement.value, cst.Call)
                and builds_model(self.metadata, statement.value, self.facts)
                and not moved_in_chain(self.metadata, statement.value)):
            return False
        line = line_of(self.metadata, use)
        loops = {id(a) for a in ancestors(self.metadata, use) if isinstance(a, (cst.For, cst.While))}
        moves = [m for m in uses_of(self.metadata, use) if moves_itself_somewhere(self.metadata, m)]
        return bool(moves) and all(line_of(self.metadata, m) > line and not any(
            id(a) in loops for a in ancestors(self.metadata, m)) for m in moves)

    def _acts_as_a_model(self, name: cst.Name) -> bool:
        """``model.eval()``, ``model.parameters()``, ``model.state_dict()``: the object is used as a model."""
        parents = self.metadata[ParentNodeProvider]
        return any(isinstance(parents.get(use), cst.Attribute) and parents[use].attr.value in _MODEL_API_CALLS
                   for use in uses_of(self.metadata, name))

    def _loaded_as_saved(self, name: cst.Name) -> bool:
        """``model = torch.load(path)`` that DM302 leaves where it was saved, because it runs only
        through a method of a class devmod cannot see (``model.act(obs)``)."""
        value = only_assigned_value(self.metadata, name)
        target = only_binding(self.metadata, name)
        return isinstance(value, cst.Call) and "torch.load" in qualified_names(self.metadata, value.func) \
            and keyword(value, "map_location") is None and isinstance(target, cst.Name) \
            and runs_only_through_its_methods(self.metadata, target)

    def _made_by_a_parameter(self, name: cst.Name) -> bool:
        """``def run(actor_critic=Policy): ac = actor_critic()``: a model built by a class the
        function is handed (spinningup), which nothing moves; its inputs stay with it."""
        value = only_assigned_value(self.metadata, name)
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return False
        bindings = scope_bindings(self.metadata[ScopeProvider].get(value.func), value.func.value)
        if len(bindings) != 1 or not isinstance(bindings[0].node, cst.Param):
            return False
        return not any(moves_itself_somewhere(self.metadata, use) for use in uses_of(self.metadata, name))

    def _pinned_to_cpu(self, name: cst.Name) -> bool:
        return pinned_to_cpu(self.metadata, name)

    def _unplaced_object(self, name: cst.Name) -> bool:
        """``name`` is bound only to results of calls that build no known model and is never moved."""
        bindings = scope_bindings(self.metadata[ScopeProvider].get(name), name.value)
        if not bindings:
            return False
        if len(bindings) == 1 and isinstance(bindings[0].node, cst.Param):
            return self._given_unmoved_model(bindings[0].node)
        if len(bindings) == 1 and self._from_unmoved_models(name, bindings[0].node):
            return True
        parents = self.metadata[ParentNodeProvider]
        if any(isinstance(s, cst.Assign) and passes_itself(self.metadata, s.value, name.value)
               for s in (parents.get(parents.get(b.node)) for b in bindings)):
            return True  # ``model = load_weights(model, path)``: DM202 leaves it be
        for binding in bindings:
            target = binding.node
            assign = self.metadata[ParentNodeProvider].get(self.metadata[ParentNodeProvider].get(target))
            if not isinstance(assign, cst.Assign) or not isinstance(assign.value, cst.Call):
                return False  # a def, an import, a parameter, a loop variable: not ours to judge
            value = assign.value
            if isinstance(target, cst.Name) and checked_for_none(self.metadata, target):
                return True  # ``model = load_optional()`` then ``if model is None``: DM202 leaves it be
            if moved_in_chain(self.metadata, value) or _moved_by_method(value):
                return False
            if "torch.load" in qualified_names(self.metadata, value.func) and self.state.config.enabled("DM302") \
                    and keyword(value, "map_location") is None:
                return False  # DM302 loads it onto the device (``map_location=device``): its inputs go there too
            inner = value
            while isinstance(inner.func, cst.Attribute) and isinstance(inner.func.value, cst.Call):
                inner = inner.func.value
            if builds_model(self.metadata, inner, self.facts) or wrapper_kind(self.metadata, inner) \
                    or is_loss_constructor(self.metadata, inner) or factory_name(self.metadata, inner):
                return False
        return not any(moves_itself_somewhere(self.metadata, use)
                       for use in uses_of(self.metadata, name))

    def _from_unmoved_models(self, name: cst.Name, target: cst.CSTNode) -> bool:
        """``for key, model in models.items()`` over ``models = {"a": nn.Linear(4, 2), ...}``: a model
        of a literal collection that nothing moves (nor the loop variable): its inputs stay with it."""
        parents = self.metadata[ParentNodeProvider]
        loop = parents.get(target)
        if isinstance(loop, cst.Element):
            loop = parents.get(parents.get(loop))
        if not isinstance(loop, cst.For):
            return False
        source = loop.iter
        if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) \
                and source.func.attr.value in ("items", "values") and not source.args:
            source = source.func.value
        if not isinstance(source, cst.Name):
            return False
        collection = only_assigned_value(self.metadata, source)
        if isinstance(collection, cst.Dict):
            values = [e.value for e in collection.elements if isinstance(e, cst.DictElement)]
        elif isinstance(collection, (cst.List, cst.Tuple)):
            values = [e.value for e in collection.elements if isinstance(e, cst.Element)]
        else:
            return False
        if not values or not all(isinstance(v, cst.Call) and builds_model(self.metadata, v, self.facts)
                                 and not moved_in_chain(self.metadata, v) for v in values):
            return False
        return not any(moves_itself_somewhere(self.metadata, use)
                       for use in (*uses_of(self.metadata, name), *uses_of(self.metadata, source)))

    def _given_unmoved_model(self, param: cst.Param) -> bool:
        """``def sample(model, n)`` called as ``sample(Tiny(), 2)``: every caller in the file
        hands in a model built right there and never moved; the inputs stay with it."""
        function = next((p for p in ancestors(self.metadata, param) if isinstance(p, cst.FunctionDef)), None)
        if function is None or param not in function.params.params:
            return False
        index = list(function.params.params).index(param)
        calls = [n for n in nodes_of(self.tree, cst.Call) if isinstance(n.func, cst.Name)
                 and n.func.value == function.name.value]
        if not calls:
            return False
        for call in calls:
            args = positional(call)
            given = next((a.value for a in call.args if a.keyword and a.keyword.value == param.name.value), None)
            if given is None and index < len(args):
                given = args[index].value
            if isinstance(given, cst.Name) and id(param) not in self._asked:
                # ``model = prepare_model("mae")`` (a factory devmod cannot see into, never moved)
                self._asked.add(id(param))
                try:
                    if self._unplaced_object(given) or self._pinned_to_cpu(given):
                        continue
                finally:
                    self._asked.discard(id(param))
            if not (isinstance(given, cst.Call) and builds_model(self.metadata, given, self.facts)
                    and not places_itself(given)):
                return False
        return True

    def _calls_fed(self, start: cst.BaseExpression, unmoved: bool = False, rebound: int = 0,
                   in_literals: bool = False, through_wrappers: bool = False):
        """The calls that take the value of ``start`` as an argument, directly or through the
        variable it is assigned to, also inside arithmetic (``net(batch + offset)``).
        ``unmoved``: not through a use that the author moves on the way (``net(avg.to(device))``).
        ``rebound``: how many ``x = x.unsqueeze(0)`` / ``x = torch.einsum(..., x)`` steps to follow
        from one variable to the next. ``in_literals``: also as a part of a list, tuple or dict
        written in the call (``Tok()({"ids": ids})``)."""
        parents = self.metadata[ParentNodeProvider]
        name = assigned_name(self.metadata, start, through_arithmetic=True)  # (``probe = torch.rand(n) * 2 - 1``)
        for use in [start, *(uses_of_binding(self.metadata, name) if name is not None else [])]:
            if unmoved and moved_in_chain(self.metadata, use):
                continue
            top = chain_top(self.metadata, use)
            while isinstance(parents.get(top), cst.Subscript) and parents[top].value is top:
                top = chain_top(self.metadata, parents[top])  # ``img = imgs[0]``, ``net(x[0])``: the same data
            while isinstance(parents.get(top), (cst.BinaryOperation, cst.UnaryOperation)) or (
                    in_literals and isinstance(parents.get(top), (cst.Element, cst.DictElement))
                    and parents[top].value is top):
                top = parents.get(top)
                if isinstance(top, (cst.Element, cst.DictElement)):
                    top = parents.get(top)  # the list, tuple, set or dict
            arg = parents.get(top)
            callee = parents.get(arg) if isinstance(arg, cst.Arg) else None
            if isinstance(callee, cst.Call):
                yield callee
                if rebound and torch_data_function(self.metadata, callee) \
                        and isinstance(parents.get(callee), cst.Assign):
                    yield from self._calls_fed(callee, unmoved, rebound - 1)  # ``x = torch.einsum(.., x)``
                elif rebound and through_wrappers and not (isinstance(callee.func, cst.Name)
                                                          and self._unplaced_object(callee.func)):
                    # ``x = nn.GeometricTensor(x, field)`` or ``model(nn.GeometricTensor(x, field))`` (e2cnn):
                    # the same data, wrapped, goes on to what takes the wrapper
                    yield from self._calls_fed(callee, unmoved, rebound - 1, in_literals, through_wrappers)
            elif rebound and use is not start and isinstance(parents.get(top), cst.Assign) \
                    and parents.get(top).value is top:
                yield from self._calls_fed(top, unmoved, rebound - 1)  # ``x = x.unsqueeze(dim=0)``

    def _models(self) -> set[str]:
        if self._model_names is None:
            self._model_names = model_variables(self.metadata, self.tree, self.facts)
        return self._model_names

    def _feeds_model(self, call: cst.Call) -> bool:
        """Host data is usually dataset material: move it only where it is, directly or through
        the variable it is assigned to, an argument of a model or a loss."""
        self._models()
        for callee in self._calls_fed(call, unmoved=True):
            if is_model_callee(callee.func, self._model_names) or is_loss_callee(callee.func):
                return not blocked_callee(self.metadata, self.model_groups(), callee.func) \
                    and not (isinstance(callee.func, cst.Name) and self._pinned_to_cpu(callee.func))
            if is_model_method_call(callee.func, self._model_names):  # ``agent.act(obs)``
                return not blocked_callee(self.metadata, self.model_groups(), callee.func.value) \
                    and not self._pinned_to_cpu(callee.func.value)
            handed = handed_with_a_model(self.metadata, callee, self._model_names)
            if handed is not None:  # ``pick_scores(table, offsets, ids)``: the file's function runs the model on it
                return not blocked_callee(self.metadata, self.model_groups(), handed) and not self._pinned_to_cpu(handed)
        return False

    def _fold_to(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """``torch.zeros(n).to(device)`` -> ``torch.zeros(n, device=device)``: same tensor, no copy."""
        func = original.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "to" and isinstance(func.value, cst.Call)):
            return None
        if self.devices.in_library_code(original):
            return None  # a library's working ``.to(d)``: same tensor either way, so it stays as written
        written = device = self._device_argument(original)
        if device is None or not self._needs_device(func.value) \
                or factory_name(self.metadata, func.value) in _RANDOM_FACTORIES:
            return None  # a random tensor drawn on the device comes from another generator: other numbers
        if isinstance(device, cst.Name) and self._is_global_device(device) \
                and self.devices.place(original).kind is ScopeKind.MODEL_METHOD:
            found = self.device_for(original)  # the input's device, not the module's global
            device = device if found is None or guessed_from_parameters(found) else found
        if device is written and self.written_by_user(original):
            return None  # the user's own working ``.to(d)``: same tensor either way, so it stays as written
        inner = updated.func.value  # type: ignore[union-attr]
        return self.fix(original, updated, with_keyword(inner, "device", device),
                        "create the tensor on the device instead of copying it there")

    VALID = [
        # A CPU-then-GPU timing demo: the author moves the tensor later on purpose.
        Valid('''import torch
m = torch.rand(8, 8)
print(torch.mm(m, m).sum(), m.device)
m = m.to(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
print(torch.mm(m, m).sum(), m.device)
'''),
        # A module without parameters (a loss): ``next(self.parameters())`` would raise
        # StopIteration, and its caller moves the result to the input's device anyway.
        Valid('''import torch
from torch import nn

class Smooth(nn.Module):
    def __init__(self, width=3):
        super().__init__()
        self.width = width

    def kernel(self):
        return torch.ones(self.width) / self.width

    def forward(self, x):
        return x * self.kernel().to(x.device).sum()
'''),
        # Library code: a helper for __init__ (model.to() moves the buffer), a helper no driver code
        # calls, and the input of an object devmod cannot place (``build`` is not known to make a model).
        Valid('''import torch
import torch.nn as nn
from elsewhere import build

def ramp(n):
    return torch.arange(n) / n

def noise(n):
    return torch.randn(n)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", ramp(4))

if __name__ == "__main__":
    net = build()
    print(net(torch.randn(1, 4)))
'''),
        # Indices read one by one as Python numbers, and a tensor read as a boolean, stay on the CPU.
        Valid('''import numpy as np
import torch

data = np.arange(100)
ix = torch.randint(90, (4,))
rows = [data[i:i + 8] for i in ix]
done = torch.rand(1) > 0.5
if done:
    print(rows)
'''),
        # Tensors whose values end up in Python numbers or NumPy, whatever they are combined
        # with first (``math.sin(angles[i])``, ``plt.axis(box * zoom)``), and a tensor that
        # meets a legacy CPU tensor which stays there: moving them would fail, or sync per element.
        Valid('''import math
import matplotlib.pyplot as plt
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
net = nn.Linear(2, 2).to(device)
zoom = 2
steps = torch.linspace(0, 1, 4)
angles = torch.linspace(0, math.pi, 4)
rows = [steps[i] * torch.FloatTensor((math.cos(angles[i]), math.sin(angles[i]))) for i in range(4)]
print(net(torch.stack(rows).to(device)))
plt.axis(torch.tensor((-1.0, 1.0, -1.0, 1.0)) * zoom)
'''),
        # nanoGPT: already on the input's device.
        Valid('''import torch
import torch.nn as nn

class GPT(nn.Module):
    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        return idx + pos
'''),
        # Data code keeps CPU tensors: Dataset methods, a model's __init__, data for TensorDataset.
        Valid('''import torch
import torch.nn as nn
from torch.utils.data import Dataset, TensorDataset, DataLoader

class Pairs(Dataset):
    def __getitem__(self, i):
        x = torch.tensor([i, i + 1], dtype=torch.float32)
        return x, torch.zeros(1)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(3))

features = torch.randn(100, 3)
labels = torch.randint(0, 2, (100,))
data = TensorDataset(features, labels)
more = TensorDataset(torch.randn(10, 3), torch.zeros(10))
loader = DataLoader(data, batch_size=10)
'''),
        # They follow their input: *_like and new_*.
        Valid('''import torch

def f(x, weight):
    return torch.zeros_like(x) + torch.randn_like(x) + weight.new_zeros(3)
'''),
        # Samples iterated in a loop, indices, NumPy and plotting want CPU tensors.
        Valid('''import torch
import matplotlib.pyplot as plt

samples = [torch.randn(1, 4) for _ in range(8)]
for s in samples:
    print(s)
data = torch.from_numpy(load())
perm = torch.randperm(len(data))
train = data[perm[:80]]
grid = torch.linspace(-1, 1, 50)
plt.plot(grid, grid ** 2)
values = torch.rand(5).numpy()
'''),
        # Already placed, or placed by what follows; a CPU generator; a default argument.
        Valid('''import torch

def step(model, device, h=torch.zeros(3)):
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(4, generator=g)
    half = torch.ones(4).to(device, torch.float16)
    cpu = torch.ones(4).to("cpu")
    return model(noise, h, half, cpu)
'''),
        # Handed with the device to a function of the user's, which places what it needs itself.
        Valid('''import torch
from helpers import restore

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
net = torch.nn.Linear(4, 4).to(device)
holes = torch.zeros(4).bool()
print(restore(net, torch.ones(4), holes, device))
'''),
    ]
    INVALID = [
        # The model moves, so its inputs built the old way move with it: a legacy constructor, a
        # ``.type(torch.FloatTensor)`` cast (always the CPU) and a helper that returns a NumPy batch.
        Invalid('''import numpy as np
import torch
import torch.nn as nn

def batch():
    return torch.from_numpy(np.ones((2, 3))).float()

if __name__ == "__main__":
    model = nn.Linear(3, 2).cuda()
    x = torch.FloatTensor([[1.0, 2.0, 3.0]])
    y = torch.cat((x, x)).type(torch.FloatTensor)
    print(model(x), model(y), model(batch()))
''', '''import numpy as np
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

def batch():
    return torch.from_numpy(np.ones((2, 3))).float()

if __name__ == "__main__":
    model = nn.Linear(3, 2).cuda()
    x = torch.FloatTensor([[1.0, 2.0, 3.0]]).to(device)
    y = torch.cat((x, x)).to(device, torch.float32)
    print(model(x), model(y), model(batch().to(device)))
'''),
        # Inside forward the module's global device gives way to the input's; a helper that
        # receives a tensor follows it.
        Invalid('''import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

def keep_mask(t, p):
    return torch.rand(t.shape[0]) < p

class Net(nn.Module):
    def forward(self, x):
        offset = torch.ones(3).to(device)
        return (x + offset) * keep_mask(x, 0.5)[:, None]
''', '''import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

def keep_mask(t, p):
    return torch.rand(t.shape[0], device=t.device) < p

class Net(nn.Module):
    def forward(self, x):
        offset = torch.ones(3, device=x.device)
        return (x + offset) * keep_mask(x, 0.5)[:, None]
'''),
        # A training function with a `device` parameter; `import torch as th`; `.to(device)` folds.
        Invalid('''import torch as th

def step(model, device):
    noise = th.randn(4, 8)
    zeros = th.zeros(
        4,
        8,
    ).to(device)
    return model(noise + zeros)
''', '''import torch as th

def step(model, device):
    noise = th.randn(4, 8, device=device)
    zeros = th.zeros(
        4,
        8,
        device=device,
    )
    return model(noise + zeros)
'''),
        # A module-level script with `from torch import ...` aliases and a main guard.
        Invalid('''import torch
from torch import randn, zeros, tensor as T

w = randn(20, 5)
b = T([1.0, 2.0])

if __name__ == "__main__":
    h = zeros(2, 3)
    print(torch.nn.functional.mse_loss(w @ h, w @ h))
''', '''import torch
from torch import randn, zeros, tensor as T

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

w = randn(20, 5, device=device)
b = T([1.0, 2.0], device=device)

if __name__ == "__main__":
    h = zeros(2, 3, device=device)
    print(torch.nn.functional.mse_loss(w @ h, w @ h))
'''),
        # forward() builds positions and a mask: they follow the input.
        Invalid('''import torch
import torch.nn as nn

class Encoder(nn.Module):
    def forward(self, x, lengths):
        positions = torch.arange(x.size(1))
        mask = torch.arange(x.size(1))[None, :] < lengths[:, None]
        return x + positions, mask
''', '''import torch
import torch.nn as nn

class Encoder(nn.Module):
    def forward(self, x, lengths):
        positions = torch.arange(x.size(1), device=x.device)
        mask = torch.arange(x.size(1), device=x.device)[None, :] < lengths[:, None]
        return x + positions, mask
'''),
        # An RNN's hidden state: the input's device in forward, the parameters' elsewhere.
        Invalid('''import torch
import torch.nn as nn

class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 8)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(1), 8)
        return self.rnn(x, h0)

    def init_hidden(self, batch_size):
        return torch.zeros(1, batch_size, 8)
''', '''import torch
import torch.nn as nn

class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 8)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(1), 8, device=x.device)
        return self.rnn(x, h0)

    def init_hidden(self, batch_size):
        return torch.zeros(1, batch_size, 8, device=next(self.parameters()).device)
'''),
        # A model with a `device` property (lucidrains' style) uses it.
        Invalid('''import torch
import torch.nn as nn

class Sampler(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("dummy", torch.zeros(1), persistent=False)

    @property
    def device(self):
        return self.dummy.device

    def sample(self, n):
        return torch.randn(n, 3)
''', '''import torch
import torch.nn as nn

class Sampler(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("dummy", torch.zeros(1), persistent=False)

    @property
    def device(self):
        return self.dummy.device

    def sample(self, n):
        return torch.randn(n, 3, device=self.device)
'''),
    ]


def _in_other_branches(metadata, one: cst.CSTNode, other: cst.CSTNode) -> bool:
    """Are ``one`` and ``other`` in different arms of one ``if`` (``elif`` / ``else``)?"""
    arms: dict[cst.If, cst.CSTNode] = {}
    child = other
    for parent in ancestors(metadata, other):
        if isinstance(parent, cst.If) and child is not parent.test:
            arms[parent] = child
        child = parent
    child = one
    for parent in ancestors(metadata, one):
        if parent in arms:
            return child is not parent.test and child is not arms[parent]
        child = parent
    return False


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Append ``name=value`` to a call, following its layout (one per line, trailing comma)."""
    args = list(call.args)
    new = keyword_arg(name, value)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    trailing = last.comma if isinstance(last.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
    separator = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else \
        cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if len(args) == 1 and isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        separator = cst.Comma(whitespace_after=call.whitespace_before_args)  # one argument per line
    # The line break before ``)`` (no trailing comma) stays before ``)``, after the new argument.
    closing = last.whitespace_after_arg
    args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=[*args, new.with_changes(comma=trailing, whitespace_after_arg=closing)])


def _next_assign_of(metadata, uses: list[cst.Name], variable: str) -> cst.Assign | None:
    """The single ``variable = <value using variable>`` statement that holds every use, if any."""
    found = None
    for use in uses:
        for parent in ancestors(metadata, use):
            if isinstance(parent, cst.Assign):
                if len(parent.targets) != 1 or not isinstance(parent.targets[0].target, cst.Name) \
                        or parent.targets[0].target.value != variable:
                    return None
                if found is not None and parent is not found:
                    return None
                found = parent
                break
            if isinstance(parent, cst.BaseStatement):
                return None
    return found




def _moved_by_method(call: cst.Call) -> bool:
    """``build().cuda()`` / ``build().to(d)`` anywhere in the chain."""
    node = call
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if moves_off_the_cpu(node.func.attr.value, node):
            return True
        node = node.func.value
    return False


def _inside(metadata, node: cst.CSTNode, assign: cst.Assign) -> bool:
    return any(parent is assign.value for parent in ancestors(metadata, node)) or node is assign.value


def _moves_itself(value: cst.BaseExpression, variable: str) -> bool:
    """``x.to(<device>)`` / ``x.cuda()`` on the variable itself."""
    return (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and isinstance(value.func.value, cst.Name) and value.func.value.value == variable
            and value.func.attr.value in ("to", "cuda") and bool(value.args or value.func.attr.value == "cuda"))


def _is_attribute_name(metadata, node: cst.Name) -> bool:
    """The ``mean`` of ``x.mean`` or a keyword's name: not a variable."""
    parent = metadata[ParentNodeProvider].get(node)
    return (isinstance(parent, cst.Attribute) and parent.attr is node) or \
        (isinstance(parent, cst.Arg) and parent.keyword is node)


def _placed_after(facts: FileFacts, factory: ast.Call) -> bool:
    """``FactoryDevice._moved_after`` on the ``ast`` tree, where it surely says yes: a ``.cuda()``
    right after the factory, a ``.to`` naming a device (``device=``, ``x.device``), or a
    ``.to``/``.cuda``/``.cpu``/``.pin_memory`` later in a chain that starts with another method."""
    current: ast.AST = factory
    first = True
    while True:
        attribute = facts.parent.get(current)
        outer = facts.parent.get(attribute) if isinstance(attribute, ast.Attribute) else None
        if not (isinstance(outer, ast.Call) and outer.func is attribute and attribute.value is current):  # type: ignore[union-attr]
            return False
        name = attribute.attr  # type: ignore[union-attr]
        if first and name == "to":
            return _surely_names_a_place(facts, outer)  # type: ignore[arg-type]
        if name == "cuda" or (not first and name in ("to", "cpu", "pin_memory")):
            return True
        current, first = outer, False


def _surely_names_a_place(facts: FileFacts, to: ast.Call) -> bool:
    """``to_names_a_place`` on the ``ast`` tree, where it surely says yes: an argument that is no
    dtype under any name the import lines may give it, or a keyword that moves (``device=``)."""
    return any(k.arg not in NON_MOVING_TO_KEYWORDS for k in to.keywords) or any(
        isinstance(a, (ast.Starred, ast.Constant)) or isinstance(a, (ast.Name, ast.Attribute)) and not (
            (isinstance(a, ast.Attribute) and a.attr == "dtype")
            or any(n.startswith("torch.") and n[6:] in DTYPES for n in facts.qnames(a)))
        for a in to.args)


def _may_fold(facts: FileFacts, factory: ast.Call) -> bool:
    """``torch.zeros(n).to(<device>)``, which ``_fold_to`` folds wherever it is, unless the
    user wrote that ``.to`` (the first pass): then only in a model's forward path, with the
    module's global device, which ``may_apply`` asks about anyway."""
    if facts.user_text:
        return False
    attribute = facts.parent.get(factory)
    outer = facts.parent.get(attribute) if isinstance(attribute, ast.Attribute) and attribute.attr == "to" else None
    if not (isinstance(outer, ast.Call) and outer.func is attribute and len(outer.args) == 1 and not outer.keywords):
        return False
    value = outer.args[0]
    return isinstance(value, ast.Name) or (isinstance(value, ast.Attribute) and value.attr == "device") or (
        isinstance(value, ast.Call) and "torch.device" in facts.qnames(value.func))
