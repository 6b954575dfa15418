"""DM102 string-device: ``"cuda"`` / ``"cuda:0"`` in device positions become the shared device.

Why: a hard-coded ``"cuda"`` crashes on machines without a GPU and scatters the
choice of device over the file. Writing the one shared ``torch.device`` instead
(``device=device``, ``.to(device)``, ``map_location=device``, a parameter default
``device=device``) keeps every tensor on the same device and falls back to the CPU.

- A variable hard-coded to CUDA (``device = "cuda:0"``, ``dev = torch.device("cuda")``)
  becomes the shared ``torch.device(... if torch.cuda.is_available() else "cpu")`` (each
  copy alike where the same definition is repeated, as in a notebook's experiment cells);
  its comparisons with strings are rewritten to ``device.type == "cuda"``, because a
  ``torch.device`` never equals a string. If the variable is used as a string
  elsewhere (``.startswith``, slicing, concatenation), nothing is converted and the
  use is reported. A string that already falls back to the CPU
  (``"cuda" if torch.cuda.is_available() else "cpu"``, an argparse default) is
  correct code and stays: ``.to()`` and ``device=`` accept strings.
- A string device the user can override is configuration, not a bug: when the file
  replaces its globals from user input (``exec(open(configurator).read())``,
  ``globals()``) or has a ``--device`` command-line option, ``device = "cuda"`` stays a
  string, and so do its comparisons; ``--device=cpu`` must keep working.
- A comparison of an existing ``torch.device`` variable with a string is the same
  bug and is fixed the same way.
- A module-level ``device = "cuda"`` above the file's ``import torch`` (a notebook's first cell) is
  reported, not converted: ``torch.device(...)`` there would be a NameError.
- A device parameter's ``"cuda"`` default whose value the code reads as a string (``if 'cuda' in self.dev:``)
  stays: a ``torch.device`` would fail there.
- A deliberate ``"cpu"`` is intent and stays; ``"cuda:1"`` names a second GPU on
  purpose and stays.
- Inside an ``nn.Module`` method the device follows the input (``x.device``), and so does
  a local ``dev = torch.device("cuda")`` in a forward path or in a helper handed a tensor
  (``dev = x.device``), unless that helper moves the tensor itself; in Dataset code nothing
  is moved (reported instead).
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import ScopeProvider

from ..analysis.candidates import CUDA_STRINGS, FileFacts, method_name
from ..analysis.guards import gpu_only
from ..analysis.device_anchor import torch_bound_before
from ..analysis.devices import DEVICE_LIKE_NAMES, cuda_string, guessed_from_parameters, hardcoded_cuda, is_torch_device_call
from ..analysis.modules import ignored_argument
from ..analysis.names import keyword, positional, qualified_names
from ..analysis.tree import ancestors, code_of, walk
from .base import Invalid, Rule, Valid
from .shared_device import device_expression

DEVICE_KEYWORDS = ("device", "map_location")
_DEVICE_TYPES = ("cuda", "cpu", "mps", "xpu")
_STRING_METHODS_OK = ("type", "index")  # attributes a torch.device has too


class StringDevice(Rule):
    CODE = "DM102"
    NAME = "string-device"
    SUMMARY = '`"cuda"` / `"cuda:0"` in device positions become the shared `torch.device`'
    ERROR = "RuntimeError: Found no NVIDIA driver on your system / Expected all tensors to be on the same device"
    TRIGGERS = ("cuda",)
    ORDER = 10

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # A "cuda" / "cuda:0" literal where ``hardcoded_cuda`` may read it (every fix and report
        # needs one), or a variable bound to ``torch.device(...)``, whose comparisons with
        # strings are fixed or reported.
        for node in facts.nodes(ast.Constant):
            if isinstance(node.value, str) and node.value in CUDA_STRINGS and _may_be_device_position(facts, node):
                return True
        return any(len(a.targets) == 1 and isinstance(a.targets[0], ast.Name) and isinstance(a.value, ast.Call)
                   and "torch.device" in facts.qnames(a.value.func) for a in facts.nodes(ast.Assign))
    REPLACES_CUDA = True

    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        self._definitions: dict[cst.Assign, cst.BaseExpression] = {}
        self._comparisons: dict[cst.Comparison, cst.BaseExpression] = {}
        self._plan(node)
        return True

    # -- planning: which variables hold a device, and how they are used --------------------
    def _plan(self, module: cst.Module) -> None:
        # In the order the scopes appear (a set would follow memory addresses: output must not).
        scopes = dict.fromkeys(s for s in self.metadata[ScopeProvider].values() if s is not None)
        for scope in scopes:
            for assignment in scope.assignments:
                node = getattr(assignment, "node", None)
                assign = self._assign_of(node)
                if assign is None:
                    continue
                name = node.value  # type: ignore[union-attr]
                new_value = self._converted_value(assign.value)
                if new_value is not None:
                    new_value = self._input_device(assign) or new_value
                is_device = new_value is not None or is_torch_device_call(self.metadata, assign.value)
                if not is_device or len(scope.assignments[name]) != 1 and not (
                        new_value is not None and self._repeated_as_is(scope.assignments[name], assign)):
                    continue
                if isinstance(assign.value, cst.SimpleString) and self._overridable(module, name):
                    continue
                if new_value is not None and gpu_only(self.metadata, assign):
                    continue  # ``if torch.cuda.is_available(): dev = torch.device("cuda")``: correct code
                if new_value is not None and not torch_bound_before(self.metadata, assign, self.torch_alias):
                    self.report(assign, f"`{name}` is a hard-coded CUDA device, but `{self.torch_alias}` is "
                                        "imported only below it: move the import up, then rerun")
                    continue
                accesses = sorted((a.node for a in assignment.references if isinstance(a.node, cst.Name)),
                                  key=self.position)  # source order, not the set's
                blockers = [a for a in accesses if self._string_only_use(a)]
                if new_value is not None and blockers:
                    self.report(blockers[0], f"`{name}` is used as a string here; convert it to a "
                                             f"torch.device by hand, then rerun")
                    continue
                if new_value is not None:
                    self._definitions[assign] = new_value
                for access in accesses:
                    self._plan_comparison(access, name)

    def _repeated_as_is(self, assignments, assign: cst.Assign) -> bool:
        """Every binding of the name is this same hard-coded device (each experiment cell of a
        notebook with its own ``device = torch.device('cuda')``): each is converted alike."""
        same = code_of(assign.value)
        binders = [self._assign_of(getattr(a, "node", None)) for a in assignments]
        return all(b is not None and code_of(b.value) == same for b in binders)

    def _overridable(self, module: cst.Module, name: str) -> bool:
        """Can user input replace ``name``'s string value? nanoGPT's configurator execs code over
        the module's globals and checks that an override has the default's type."""
        options = {f"--{name}", f"--{name.replace('_', '-')}"}
        for node in walk(module):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("exec", "globals"):
                return True
            if isinstance(node, cst.SimpleString) and node.evaluated_value in options:
                return True
        return False

    def _assign_of(self, node: cst.CSTNode | None) -> cst.Assign | None:
        if not isinstance(node, cst.Name):
            return None
        parent = self.metadata[cst.metadata.ParentNodeProvider].get(node)
        grand = self.metadata[cst.metadata.ParentNodeProvider].get(parent) if parent is not None else None
        if isinstance(parent, cst.AssignTarget) and isinstance(grand, cst.Assign) and len(grand.targets) == 1:
            return grand
        return None

    def _input_device(self, assign: cst.Assign) -> cst.BaseExpression | None:
        """``dev = torch.device('cuda')`` in a forward path or a helper handed a tensor (dgcnn's
        ``get_graph_feature(x, ...)``): that tensor's device, ``x.device``, not the global one.
        Not where the function moves that tensor itself: there it is on its way to the GPU."""
        found = self.devices.input_device(assign)
        if found is None:
            return None
        function = next((a for a in ancestors(self.metadata, assign) if isinstance(a, cst.FunctionDef)), None)
        moved = function is None or any(
            isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("to", "cuda")
            and isinstance(n.func.value, cst.Name) and n.func.value.value == found.value.value for n in walk(function))
        return None if moved else found

    def _converted_value(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """The torch.device form of a string device definition, or None if it is not one."""
        if hardcoded_cuda(self.metadata, value):
            return device_expression(self.state.config.device_style, self.torch_alias)
        return None

    def _string_only_use(self, name: cst.Name) -> bool:
        parents = self.metadata[cst.metadata.ParentNodeProvider]
        if _text_use(parents, name, comparisons=False):
            return True
        parent = parents.get(name)
        if isinstance(parent, cst.ComparisonTarget) and isinstance(parent.operator, (cst.In, cst.NotIn)):
            return not self._is_string_comparison(self.metadata[cst.metadata.ParentNodeProvider].get(parent), name)
        return False

    def _plan_comparison(self, name: cst.Name, var: str) -> None:
        parents = self.metadata[cst.metadata.ParentNodeProvider]
        parent = parents.get(name)
        comparison = parents.get(parent) if isinstance(parent, cst.ComparisonTarget) else parent
        if isinstance(comparison, cst.Comparison) and self._is_string_comparison(comparison, name):
            replacement = self._type_comparison(comparison, var)
            if replacement is not None:
                self._comparisons[comparison] = replacement
            else:
                self.report(comparison, f'`{var}` is a torch.device; compare `{var}.type` or with torch.device(...)')

    @staticmethod
    def _is_string_comparison(comparison: cst.CSTNode | None, name: cst.Name) -> bool:
        if not isinstance(comparison, cst.Comparison) or len(comparison.comparisons) != 1:
            return False
        left, right = comparison.left, comparison.comparisons[0].comparator
        other = right if left is name else left if right is name else None
        return isinstance(other, cst.SimpleString)

    @staticmethod
    def _type_comparison(comparison: cst.Comparison, var: str) -> cst.Comparison | None:
        target = comparison.comparisons[0]
        left, right, op = comparison.left, target.comparator, target.operator
        literal = right if isinstance(right, cst.SimpleString) else left
        value = literal.evaluated_value  # type: ignore[union-attr]
        if value not in _DEVICE_TYPES:
            return None
        equal = isinstance(op, (cst.Equal, cst.Is)) or (isinstance(op, cst.In) and literal is left)
        unequal = isinstance(op, (cst.NotEqual, cst.IsNot)) or (isinstance(op, cst.NotIn) and literal is left)
        if not (equal or unequal):
            return None
        operator = cst.Equal() if equal else cst.NotEqual()
        return cst.Comparison(
            cst.Attribute(cst.Name(var), cst.Name("type")),
            [cst.ComparisonTarget(operator, cst.SimpleString(f'"{value}"'))],
            lpar=comparison.lpar, rpar=comparison.rpar)

    # -- rewriting ---------------------------------------------------------------------------
    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        new_value = self._definitions.get(original_node)
        if new_value is None:
            return updated_node
        return self.fix(original_node, updated_node, updated_node.with_changes(value=new_value),
                        "string device -> torch.device")

    def leave_Comparison(self, original_node: cst.Comparison, updated_node: cst.Comparison) -> cst.BaseExpression:
        replacement = self._comparisons.get(original_node)
        if replacement is None:
            return updated_node
        return self.fix(original_node, updated_node, replacement,
                        "a torch.device never equals a string: compare `.type`")

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        if not self._in_device_position(original_node) or not hardcoded_cuda(self.metadata, original_node.value):
            return updated_node
        device = self.device_for(original_node)
        if device is not None and guessed_from_parameters(device) and gpu_only(self.metadata, original_node):
            return updated_node  # a CUDA probe inside ``if torch.cuda.is_available():`` must stay on CUDA
        if device is None:
            if gpu_only(self.metadata, original_node):
                return updated_node  # correct code where it runs (the author checked for a GPU): nothing to report
            if cuda_string(original_node.value) == "cuda" and self.devices.cuda_is_the_ranks(original_node):
                return updated_node  # after ``torch.cuda.set_device``, "cuda" is the rank's GPU: correct code
            if self._ignored_by_its_class(original_node):
                return updated_node  # ``Block(device="cuda:0")`` whose ``forward`` sets ``self.device = x.device``
            self.report(original_node, "hard-coded CUDA device not rewritten: "
                        + self.devices.why_no_device(original_node))
            return updated_node
        return self.fix(original_node, updated_node, updated_node.with_changes(value=device),
                        "hard-coded CUDA device -> shared device")

    def _ignored_by_its_class(self, arg: cst.Arg) -> bool:
        call = self.metadata[cst.metadata.ParentNodeProvider].get(arg)
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and arg.keyword is not None \
            and call.func.value in self.facts.classes \
            and ignored_argument(self.metadata, self.facts, self.facts.classes[call.func.value], arg.keyword.value)

    def _in_device_position(self, arg: cst.Arg) -> bool:
        if arg.keyword is not None:
            return arg.keyword.value in DEVICE_KEYWORDS
        call = self.metadata[cst.metadata.ParentNodeProvider].get(arg)
        if not isinstance(call, cst.Call) or arg.star:
            return False
        args = positional(call)
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to":
            return bool(args) and args[0] is arg
        if "torch.load" in qualified_names(self.metadata, call.func):
            return len(args) > 1 and args[1] is arg and keyword(call, "map_location") is None
        return False

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        default = original_node.default
        if default is None or not hardcoded_cuda(self.metadata, default):
            return updated_node
        if original_node.name.value not in DEVICE_LIKE_NAMES or self.devices.in_library_code(original_node):
            return updated_node  # a library's default is its callers' to override: no global device there
        if self._read_as_text(original_node):
            return updated_node  # ``if 'cuda' in self.dev:`` (convmixer's benchmark): a torch.device would fail there
        # A default is evaluated once at definition time: the module-level device fits.
        return self.fix(original_node, updated_node, updated_node.with_changes(default=cst.Name(self.shared_name)),
                        "hard-coded CUDA default -> shared device")

    def _read_as_text(self, param: cst.Param) -> bool:
        """Is the parameter's value read as a string in its function, or through ``self.<attr>`` it is
        stored in, in its class (``'cuda' in self.dev``, ``dev.startswith('cuda')``, ``dev + ':0'``)?"""
        parents = self.metadata[cst.metadata.ParentNodeProvider]
        function = parents.get(parents.get(param))
        if not isinstance(function, cst.FunctionDef):
            return False
        name = param.name.value
        reads: list[cst.CSTNode] = [n for n in walk(function.body) if isinstance(n, cst.Name) and n.value == name]
        stored = {t.target.attr.value for a in walk(function.body) if isinstance(a, cst.Assign)
                  and isinstance(a.value, cst.Name) and a.value.value == name
                  for t in a.targets if isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                  and t.target.value.value == "self"}
        klass = next((a for a in ancestors(self.metadata, function) if isinstance(a, cst.ClassDef)), None)
        if stored and klass is not None:
            reads += [n for n in walk(klass) if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name)
                      and n.value.value == "self" and n.attr.value in stored]
        return any(_text_use(parents, read) for read in reads)

    VALID = [
        # A setting the user overrides (``--device=cpu``): it stays a string, comparisons too.
        Valid('''import sys
import torch

device = "cuda"
for arg in sys.argv[1:]:
    key, value = arg[2:].split("=")
    globals()[key] = value
x = torch.ones(2).to(device)
pinned = device == "cuda"
'''),
        Valid('import torch\nx = torch.ones(2).to("cpu")\ny = torch.zeros(2, device="cpu")\n'),
        Valid('import torch\nz = torch.ones(2, device="cuda:1")  # a second GPU on purpose\n'),
        Valid('import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
              'if device == "cuda":\n    print("gpu")\nx = torch.ones(2, device=device)\n'),
        Valid('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              'if device.type == "cuda":\n    torch.backends.cudnn.benchmark = True\n'),
    ]
    INVALID = [
        Invalid(
            'import torch\nx = torch.ones(2, device="cuda:0")\ny = x.to("cuda")\n',
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.ones(2, device=device)\ny = x.to(device)\n",
        ),
        Invalid(
            'import torch\ndevice = "cuda"\n'
            'if device == "cuda":\n    print("gpu")\nx = torch.ones(2, device=device)\n',
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            'if device.type == "cuda":\n    print("gpu")\nx = torch.ones(2, device=device)\n',
        ),
        Invalid(
            'import torch\ndev = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            'pin = dev == "cuda"\n',
            'import torch\ndev = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            'pin = dev.type == "cuda"\n',
        ),
        Invalid(
            'import torch\n\ndef load(path, device="cuda"):\n    return torch.load(path, map_location=device)\n',
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            'def load(path, device=device):\n    return torch.load(path, map_location=device)\n',
        ),
        Invalid(
            'import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n'
            '        return x + torch.ones(2).to("cuda")\n',
            'import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n'
            '        return x + torch.ones(2).to(x.device)\n',
        ),
        Invalid(
            'import torch\ndev = "cuda"\nprint(dev.upper())\nx = torch.ones(2, device=dev)\n',
        ),
    ]


def _text_use(parents, node: cst.CSTNode, comparisons: bool = True) -> bool:
    """``node`` read as a string: a string method, sliced, concatenated or (``comparisons``)
    compared (``'cuda' in d``, ``d == 'cuda'``)."""
    parent = parents.get(node)
    if isinstance(parent, cst.Attribute) and parent.value is node:
        return parent.attr.value not in _STRING_METHODS_OK
    if isinstance(parent, (cst.Subscript, cst.BinaryOperation)):
        return True
    return comparisons and isinstance(parent, (cst.Comparison, cst.ComparisonTarget))


def _device_default(facts: FileFacts, arguments: ast.arguments, literal: ast.Constant) -> bool:
    """Is ``literal`` the default of a device-named parameter outside library code (``leave_Param``)?"""
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = [*zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults),
             *zip(arguments.kwonlyargs, arguments.kw_defaults)]
    names = {argument.arg for argument, default in pairs if default is literal}
    return bool(names & DEVICE_LIKE_NAMES) and (not facts.role.imported or facts.in_main_block(arguments))


def _may_be_device_position(facts: FileFacts, literal: ast.Constant) -> bool:
    """Where DM102 may read a CUDA literal: an assigned value, a ``device=`` / ``map_location=``
    argument, an argument of ``.to(...)`` / ``torch.load(...)``, a parameter default, or inside
    ``torch.device(...)`` (which may sit in one of those)."""
    parent = facts.parent.get(literal)
    if isinstance(parent, ast.arguments):
        return _device_default(facts, parent, literal)
    if isinstance(parent, ast.Assign):
        return True
    if isinstance(parent, ast.keyword):
        return parent.arg in DEVICE_KEYWORDS
    if isinstance(parent, ast.Call) and literal in parent.args:
        return method_name(parent) == "to" or bool(facts.qnames(parent.func) & {"torch.load", "torch.device"})
    return False
