"""DM305 module-container: a Python list or dict of sub-modules becomes ``nn.ModuleList`` / ``nn.ModuleDict``.

Why: ``nn.Module`` only registers sub-modules assigned as attributes or held in its
own containers. Layers kept in a plain ``list`` or ``dict`` are invisible to it:
``model.to(device)`` leaves them on the CPU ("Expected all tensors to be on the same
device"), ``model.parameters()`` does not list them (the optimizer never trains
them), and ``model.eval()`` does not reach them.

**Unsafe fix** (applied only with ``--unsafe-fixes``, otherwise reported with the code it
would write): once registered, the layers' weights appear in ``parameters()`` and in
``state_dict()`` (new keys such as ``layers.0.weight``), which changes training and
makes checkpoints saved before the fix load only with ``strict=False``.

Only in ``nn.Module.__init__``, for ``self.<name> = [...]`` / ``{...}`` (literals or
comprehensions) in which every element is surely a module (``nn.Linear(...)``, a model
class of the file, a model factory), and ``self.<name> = []`` filled only by
``.append(<module>)``. Left alone: lists whose modules are registered one by one (``add_module``,
``setattr``, or each of their parameters with ``register_parameter``), lists of tensors or of anything unknown, attributes
assigned more than once, dicts with keys that are not plain strings (a ``ModuleDict``
key must be a string without dots), and containers used with list/dict methods that
``ModuleList`` / ``ModuleDict`` lack (``.index``, ``.sort``, ``.get``, ...).
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import ParentNodeProvider

from ..analysis.candidates import FileFacts, dotted as ast_dotted, init_assignment, method_name
from ..analysis.devices import construction_methods
from ..analysis.modules import attribute_uses, class_family, init_attribute, nn_alias, only_binding, registers_on_self
from ..analysis.names import dotted, last_part
from ..analysis.roles import builds_model, holds_no_tensors, is_torch_nn_class
from ..analysis.tree import ancestors, nodes_of, walk
from .base import Invalid, Rule, Valid

# torch.nn containers that register the modules they are given.
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
# Methods each container offers beyond indexing, len(), iteration and ``in``.
_MODULE_LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "__getitem__", "__len__", "__iter__",
                                  "children", "modules", "parameters", "named_parameters", "named_children",
                                  "named_modules", "to", "train", "eval", "apply", "state_dict", "zero_grad"})
_MODULE_DICT_METHODS = frozenset({"keys", "values", "items", "pop", "update", "clear", "children", "modules",
                                  "parameters", "named_parameters", "named_children", "named_modules", "to",
                                  "train", "eval", "apply", "state_dict", "zero_grad"})


class ModuleContainer(Rule):
    CODE = "DM305"
    NAME = "module-container"
    SUMMARY = "a list/dict of sub-modules in `__init__` becomes `nn.ModuleList` / `nn.ModuleDict`"
    SAFETY = "unsafe"
    ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    TRIGGERS = ("self.",)
    ORDER = 26

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # ``self.x = [<calls>]`` / a dict or comprehension of calls / ``[]`` filled by
        # ``self.x.append(<call>)``, in the ``__init__`` of a class that may be a model.
        for node in facts.nodes(ast.Assign):
            if not init_assignment(facts, node):
                continue
            value = node.value
            if isinstance(value, ast.List) and not value.elts:
                attribute = node.targets[0].attr  # type: ignore[attr-defined]
                if any(method_name(c) == "append" and ast_dotted(c.func.value) == f"self.{attribute}"  # type: ignore[attr-defined]
                       and len(c.args) == 1 and isinstance(c.args[0], ast.Call) for c in facts.calls()):
                    return True
            elif isinstance(value, ast.List):
                if all(isinstance(e, ast.Call) for e in value.elts):
                    return True
            elif isinstance(value, ast.Dict):
                if value.values and all(k is not None for k in value.keys) \
                        and all(isinstance(v, ast.Call) for v in value.values):
                    return True
            elif isinstance(value, ast.ListComp) and isinstance(value.elt, ast.Call):
                return True
            elif isinstance(value, ast.DictComp) and isinstance(value.value, ast.Call):
                return True
        return False

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        place = self.devices.place(original_node)
        attribute = init_attribute(place, original_node, original_node)
        if attribute is None or place.klass is None:
            return updated_node
        container = self._container(original_node.value, place.klass, attribute)
        if container is None or not only_binding(self.facts, place.klass, attribute):
            return updated_node
        if not self._uses_fit(place.klass, attribute, container):
            return updated_node
        if self._read_only_while_built(place.klass, attribute):
            return updated_node  # a lookup table for __init__ (``self.backbone = self.nets[name]``)
        if self._registered_through_container(place.klass, attribute) \
                or self._registered_one_by_one(place.klass, attribute):
            return updated_node
        if self._holds_no_tensors(original_node.value, place.klass, attribute):
            return updated_node  # nothing for model.to() or parameters() to miss
        call = cst.Call(cst.parse_expression(f"{nn_alias(self.tree, self.torch_alias)}.{container}"),
                        [cst.Arg(updated_node.value)] if not _empty(original_node.value) else [])
        replacement = updated_node.with_changes(value=call)
        return self.fix(original_node, updated_node, replacement,
                        f"`self.{attribute}` holds sub-modules in a plain {'list' if container == 'ModuleList' else 'dict'}: "
                        "model.to(device) and model.parameters() do not see them")

    # -- what the value is ------------------------------------------------------------------
    def _container(self, value: cst.BaseExpression, klass: cst.ClassDef, attribute: str) -> str | None:
        """"ModuleList" / "ModuleDict" when ``value`` surely holds only modules, else None."""
        if isinstance(value, cst.List):
            if not value.elements:
                return "ModuleList" if self._filled_with_modules(klass, attribute) else None
            if all(isinstance(e, cst.Element) and self._module(e.value) for e in value.elements):
                return "ModuleList"
        elif isinstance(value, cst.ListComp):
            if self._module(value.elt):
                return "ModuleList"
        elif isinstance(value, cst.Dict):
            if value.elements and all(isinstance(e, cst.DictElement) and _plain_key(e.key) and self._module(e.value)
                                      for e in value.elements):
                return "ModuleDict"
        elif isinstance(value, cst.DictComp):
            if _comprehension_key(value) and self._module(value.value):
                return "ModuleDict"
        return None

    def _module(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and builds_model(self.metadata, node, self.facts)

    def _read_only_while_built(self, klass: cst.ClassDef, attribute: str) -> bool:
        """Is ``self.<attr>`` read only by ``__init__`` and the methods it calls? Then the
        modules it holds are used only to build others: what the model keeps is registered
        elsewhere (SimCLR: ``self.backbone = self._get_basemodel(name)`` picks from a dict)."""
        building = construction_methods(klass)
        methods = {s for s in klass.body.body if isinstance(s, cst.FunctionDef)}
        read = False
        for use in attribute_uses(class_family(self.facts, klass), attribute):
            if isinstance(self.metadata_parent(use), cst.AssignTarget) \
                    or self._method_called(use) in ("append", "extend", "insert", "update"):
                continue  # filling it, not reading it
            method = next((a for a in ancestors(self.metadata, use) if a in methods), None)
            if method is None or method.name.value not in building:
                return False
            read = True
        return read

    def _registered_through_container(self, klass: cst.ClassDef, attribute: str) -> bool:
        """``self.layer = nn.Sequential(*self.layer_list)`` / ``nn.ModuleList(self.layer_list)``:
        the same modules are registered there, so ``model.to()`` already sees them, and a second
        registration would add state_dict keys that old checkpoints lack."""
        for use in attribute_uses(class_family(self.facts, klass), attribute):
            arg = self.metadata_parent(use)
            call = self.metadata_parent(arg) if isinstance(arg, cst.Arg) else None
            if isinstance(call, cst.Call) and last_part(is_torch_nn_class(self.metadata, call)) & _CONTAINERS:
                return True
        return False

    def _registered_one_by_one(self, klass: cst.ClassDef, attribute: str) -> bool:
        """``for i, head in enumerate(self.heads): self.add_module(f"head_{i}", head)`` (or
        ``setattr(self, name, self.heads[i])``): each module is registered already."""
        for use in attribute_uses(class_family(self.facts, klass), attribute):
            for parent in ancestors(self.metadata, use):
                if isinstance(parent, cst.Call) and registers_on_self(parent):
                    return True
                if isinstance(parent, cst.For) and any(node is use for node in walk(parent.iter)) \
                        and any(registers_on_self(call) or _registers_a_parameter(call)
                                for call in nodes_of(parent.body, cst.Call)):
                    return True  # (``self.register_parameter(name, p)`` for each module's parameters: RVAE's highway)
                if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
                    break
        return False

    def _holds_no_tensors(self, value: cst.BaseExpression, klass: cst.ClassDef, attribute: str) -> bool:
        """Every module the container would hold has no parameter or buffer (``nn.AvgPool1d``, or
        a class of the file around such modules)."""
        if isinstance(value, cst.List) and not value.elements:  # filled by ``append`` (``_filled_with_modules``)
            built = [self._call_of(use).args[0].value for use in attribute_uses(class_family(self.facts, klass), attribute)
                     if self._method_called(use) == "append"]
        elif isinstance(value, cst.List):
            built = [e.value for e in value.elements]
        elif isinstance(value, cst.ListComp):
            built = [value.elt]
        elif isinstance(value, (cst.Dict, cst.DictComp)):
            built = [e.value for e in value.elements] if isinstance(value, cst.Dict) else [value.value]
        else:
            return False
        return all(isinstance(b, cst.Call) and holds_no_tensors(self.metadata, b, self.facts) for b in built)

    def _filled_with_modules(self, klass: cst.ClassDef, attribute: str) -> bool:
        """``self.<attr> = []`` followed only by ``self.<attr>.append(<module>)``."""
        appends = [use for use in attribute_uses(class_family(self.facts, klass), attribute)
                   if self._method_called(use) == "append"]
        return bool(appends) and all(
            len(call.args) == 1 and self._module(call.args[0].value) for call in map(self._call_of, appends))

    def _uses_fit(self, klass: cst.ClassDef, attribute: str, container: str) -> bool:
        """Every ``self.<attr>.method(...)`` exists on the new container; ``+=`` / ``+`` too for lists."""
        allowed = _MODULE_LIST_METHODS if container == "ModuleList" else _MODULE_DICT_METHODS
        for use in attribute_uses(class_family(self.facts, klass), attribute):
            parent = self.metadata_parent(use)
            if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value not in allowed:
                return False
            if isinstance(parent, cst.BinaryOperation) and not (
                    container == "ModuleList" and parent.left is use and isinstance(parent.operator, cst.Add)):
                return False  # ``[x] + self.layers`` fails on a ModuleList; ``self.layers + [...]`` works
            if container == "ModuleList" and self._method_called(use) == "append":
                call = self._call_of(use)
                if len(call.args) != 1 or not self._module(call.args[0].value):
                    return False  # a ModuleList only takes modules
        return True

    def metadata_parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.get_metadata(ParentNodeProvider, node, None)

    def _method_called(self, use: cst.Attribute) -> str | None:
        parent = self.metadata_parent(use)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            call = self.metadata_parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                return parent.attr.value
        return None

    def _call_of(self, use: cst.Attribute) -> cst.Call:
        call = self.metadata_parent(self.metadata_parent(use))  # type: ignore[arg-type]
        assert isinstance(call, cst.Call)
        return call

    VALID = [
        Valid("import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])\n"
              "        self.masks = [torch.ones(4) for _ in range(3)]\n        self.names = ['a', 'b']\n"),
        Valid("import torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self, blocks):\n"
              "        super().__init__()\n        self.blocks = [b for b in blocks]\n"
              "        self.heads = {'a': nn.Linear(2, 2), 'b': blocks[0]}\n"),
        Valid("import torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.layers = [nn.Linear(2, 2)]\n\n"
              "    def forward(self, x):\n        return self.layers[self.layers.index(x)]\n"),
        Valid("import torch.nn as nn\n\nclass Holder:\n    def __init__(self):\n"
              "        self.layers = [nn.Linear(2, 2)]\n"),
        # registered through a container built from the same list: model.to() already sees them
        Valid("import torch.nn as nn\n\nclass Stack(nn.Module):\n    def __init__(self, n):\n"
              "        super().__init__()\n        self.parts = [nn.Linear(4, 4) for _ in range(n)]\n"
              "        self.body = nn.Sequential(*self.parts)\n        self.rows = [nn.Linear(4, 4), nn.Linear(4, 4)]\n"
              "        self.table = nn.ModuleList(self.rows)\n\n    def reset(self):\n"
              "        for part in self.parts:\n            part.reset_parameters()\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.nn as nn\n\nclass MLP(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.layers = [nn.Linear(4, 4) for _ in range(3)]\n"
            "        self.heads = {\"a\": nn.Linear(4, 1), \"b\": nn.Linear(4, 2)}\n\n"
            "    def forward(self, x):\n        for layer in self.layers:\n            x = layer(x)\n"
            "        return [head(x) for head in self.heads.values()]\n",
            "import torch\nimport torch.nn as nn\n\nclass MLP(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])\n"
            "        self.heads = nn.ModuleDict({\"a\": nn.Linear(4, 1), \"b\": nn.Linear(4, 2)})\n\n"
            "    def forward(self, x):\n        for layer in self.layers:\n            x = layer(x)\n"
            "        return [head(x) for head in self.heads.values()]\n",
        ),
        Invalid(
            "import torch\n\nclass Block(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = torch.nn.Linear(2, 2)\n\nclass Net(torch.nn.Module):\n"
            "    def __init__(self, n):\n        super().__init__()\n        self.blocks = []\n"
            "        for _ in range(n):\n            self.blocks.append(Block())\n",
            "import torch\n\nclass Block(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = torch.nn.Linear(2, 2)\n\nclass Net(torch.nn.Module):\n"
            "    def __init__(self, n):\n        super().__init__()\n        self.blocks = torch.nn.ModuleList()\n"
            "        for _ in range(n):\n            self.blocks.append(Block())\n",
        ),
    ]


def _registers_a_parameter(call: cst.Call) -> bool:
    """``self.register_parameter(name, p)``: ``model.to()`` and ``parameters()`` reach ``p`` (the
    module in the list holds the same tensor, moved in place)."""
    return dotted(call.func) == "self.register_parameter" and len(call.args) == 2


def _empty(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.List) and not value.elements


def _plain_key(key: cst.BaseExpression) -> bool:
    """A string literal that ``ModuleDict`` accepts as a name: not empty, no dots."""
    if not isinstance(key, cst.SimpleString):
        return False
    value = key.evaluated_value
    return isinstance(value, str) and bool(value) and "." not in value


def _comprehension_key(comp: cst.DictComp) -> bool:
    """``{f"layer{i}": ... for i in range(n)}`` / ``{str(i): ...}``: surely a string without
    dots, because every formatted value is a counter from ``range``."""
    counters = set()
    clause: cst.CompFor | None = comp.for_in
    while clause is not None:
        if isinstance(clause.target, cst.Name) and isinstance(clause.iter, cst.Call) \
                and dotted(clause.iter.func) == "range":
            counters.add(clause.target.value)
        clause = clause.inner_for_in
    key = comp.key
    if isinstance(key, cst.FormattedString):
        return all("." not in part.value if isinstance(part, cst.FormattedStringText)
                   else isinstance(part.expression, cst.Name) and part.expression.value in counters
                   and part.conversion is None and part.format_spec is None
                   for part in key.parts)
    return (isinstance(key, cst.Call) and dotted(key.func) == "str" and len(key.args) == 1
            and isinstance(key.args[0].value, cst.Name) and key.args[0].value.value in counters)
