"""Could any rule act on this file? Asked of CPython's ``ast`` tree before libcst parses it.

Most files of a real repository need no fix and get no finding, and libcst's parse, metadata
and scan cost far more than the ``ast`` tree the engine already builds (``preflight``). Each
rule declares ``may_apply(facts)`` next to its own code: a cheap check on the tree that says
False only when the rule certainly records nothing in the file. When no enabled rule may
apply, the engine hands the file back unchanged without parsing it with libcst.

Every answer here is a *superset* of what the libcst analysis finds: qualified names are all
the names an expression may have through any import of the file (libcst resolves them per
scope, a subset), "a model class" is any class that may derive from ``nn.Module``, a load of
a name is "global" unless the enclosing function surely binds it, and so on. When in doubt a
check says "candidate". ``tests/test_prefilter.py`` holds each rule's check to the rule's own
examples, and ``benchmarks/scan_equivalence.py --prefilter`` compares whole corpora.
"""

from __future__ import annotations

import ast
import builtins
from typing import Iterable, Iterator

from .bases import NN_MODULE_BASES
from .project import FileRole
from .ast_walk import ast_children, ast_nodes

CUDA_STRINGS = frozenset({"cuda", "cuda:0"})
DEVICE_LIKE_NAMES = frozenset({"device", "dev", "DEVICE", "torch_device", "DEV"})
_BUILTINS = frozenset(dir(builtins))
_TENSOR_ATTRIBUTES = frozenset({"shape", "device", "dtype", "ndim", "size", "dim", "numel"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def full_name(node: ast.AST) -> str | None:
    """libcst's ``get_full_name_for_node`` on an ``ast`` node: ``a.b`` for ``a.b``, ``a().b``, ``a[0].b``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{full_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return full_name(node.func)
    if isinstance(node, ast.Subscript):
        return full_name(node.value)
    return None


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None (as ``analysis.names.dotted``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def keywords(call: ast.Call) -> set[str | None]:
    """The keyword names of a call (None for ``**kwargs``)."""
    return {k.arg for k in call.keywords}


def method_name(call: ast.AST) -> str | None:
    """``m`` for ``<anything>.m(...)``."""
    return call.func.attr if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None


class FileFacts:
    """One file's ``ast`` tree, walked once: nodes by type, parents, imports and class bases."""

    def __init__(self, tree: ast.Module, text: str, role: FileRole | None = None,
                 device_name: str = "device", user_text: bool = False) -> None:
        self.tree, self.text, self.device_name = tree, text, device_name
        # The file as the user wrote it (no fix of an earlier pass in it): every ``.to`` is theirs.
        self.user_text = user_text
        self.role = role or FileRole()
        self.parent: dict[ast.AST, ast.AST] = {}
        self._by_type: dict[type, list[ast.AST]] = {}
        stack: list[ast.AST] = [tree]
        while stack:
            node = stack.pop()
            self._by_type.setdefault(type(node), []).append(node)
            for child in ast_children(node):  # no ``ctx`` nodes: no check looks at them
                self.parent[child] = node
                stack.append(child)
        # first part of the bound name -> per import alias, its (bound prefix, real name) options
        self._imports: dict[str, list[list[tuple[str, str]]]] = {}
        for node in self.nodes(ast.Import, ast.ImportFrom):
            self._add_import(node)  # type: ignore[arg-type]
        self._name_qnames: dict[str, frozenset[str]] = {}
        self._model_classes: frozenset[str] | None = None
        self._binds: dict[ast.AST, tuple[set[str], set[str]]] = {}
        self._shared: set[str] | None = None

    def nodes(self, *types: type) -> list[ast.AST]:
        found: list[ast.AST] = []
        for kind in types:
            found.extend(self._by_type.get(kind, ()))
        return found

    def calls(self) -> list[ast.Call]:
        return self._by_type.get(ast.Call, [])  # type: ignore[return-value]

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        current = self.parent.get(node)
        while current is not None:
            yield current
            current = self.parent.get(current)

    # -- qualified names ---------------------------------------------------------------------------
    def _add_import(self, node: ast.Import | ast.ImportFrom) -> None:
        module = ""
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                continue
            parts = alias.name.split(".")
            options: list[tuple[str, str]] = []
            for index in range(len(parts), 0, -1):  # longest prefix first, as libcst
                real = ".".join(parts[:index])
                bound = alias.asname or real
                if module:
                    real = f"{module}{real}" if module.endswith(".") else f"{module}.{real}"
                options.append((bound, real))
            self._imports.setdefault(options[0][0].split(".", 1)[0], []).append(options)

    def qnames(self, node: ast.AST) -> frozenset[str]:
        """Every qualified name libcst may give ``node`` (``torch.nn.Linear`` for ``nn.Linear``), and more."""
        if isinstance(node, ast.Name):
            known = self._name_qnames.get(node.id)
            if known is None:
                known = self._name_qnames[node.id] = self._resolve(node.id)
            return known
        name = full_name(node)
        return self._resolve(name) if name is not None else frozenset()

    def _resolve(self, name: str) -> frozenset[str]:
        root = name.split(".", 1)[0]
        found = {name}  # a module-level binding that is no import: libcst names it as written
        for options in self._imports.get(root, ()):
            for bound, real in options:
                if name.startswith(bound):
                    rest = name[len(bound):]
                    if rest and not rest.startswith("."):
                        continue
                    rest = rest.lstrip(".")
                    found.add(f"{real}.{rest}" if rest else real)
                    break
        if root in _BUILTINS:
            found.add(f"builtins.{root}")
        return frozenset(found)

    def calls_of(self, *names: str) -> Iterator[ast.Call]:
        """Calls whose callee may be one of ``names`` (qualified)."""
        wanted = frozenset(names)
        for call in self.calls():
            if self.qnames(call.func) & wanted:
                yield call

    def any_call_named(self, predicate) -> bool:  # type: ignore[no-untyped-def]
        return any(predicate(q) for call in self.calls() for q in self.qnames(call.func))

    # -- classes and places ------------------------------------------------------------------------
    @property
    def model_classes(self) -> frozenset[str]:
        """Every class that may be a model (``ClassFacts.model_classes``, with all names of each base)."""
        if self._model_classes is None:
            bases: dict[str, set[str]] = {}
            for klass in self.nodes(ast.ClassDef):
                names = bases.setdefault(klass.name, set())  # type: ignore[attr-defined]
                for base in klass.bases:  # type: ignore[attr-defined]
                    names |= self.qnames(base) | {dotted(base) or ""}
            found = set(self.role.model_names)
            changed = True
            while changed:
                changed = False
                for name, parents in bases.items():
                    if name not in found and (parents & NN_MODULE_BASES
                                              or {p.rsplit(".", 1)[-1] for p in parents} & found):
                        found.add(name)
                        changed = True
            self._model_classes = frozenset(found)
        return self._model_classes

    def place(self, node: ast.AST) -> tuple[str, ast.AST | None]:
        """``enclosing_place`` on the ``ast`` tree: ("module" | "function" | "model" | "method", innermost def).

        "model" is a method of a class that may be a model, "method" one of any other class
        (a Dataset's, or an unknown object's: no rule places anything there)."""
        function: ast.AST | None = None
        for parent in self.ancestors(node):
            if isinstance(parent, _FUNCTIONS) and function is None:
                function = parent
                outer, _ = self.place(parent)
                if outer != "module":
                    return outer, function
            elif isinstance(parent, ast.ClassDef):
                if function is None:
                    return "module", None  # class body statements run at import time
                return ("model" if parent.name in self.model_classes else "method"), function
        return ("module", None) if function is None else ("function", function)

    def in_class(self, node: ast.AST) -> bool:
        return any(isinstance(p, ast.ClassDef) for p in self.ancestors(node))

    def may_get_device(self, node: ast.AST) -> bool:
        """Could ``DeviceLookup.expression_for`` give a device for a fix that *adds* a placement
        here? Never in a method of a class that is no model, nor in a model's ``__init__``, nor
        in a library helper with no device or tensor parameter, nor at the top level of a file
        other project files import."""
        kind, function = self.place(node)
        if kind == "method":
            return False
        if kind == "model":
            return function.name != "__init__"  # type: ignore[union-attr]
        functions = []
        for parent in self.ancestors(node):
            if isinstance(parent, ast.ClassDef):
                break
            if isinstance(parent, _FUNCTIONS):
                functions.append(parent)
        if any(self._local_device(f) for f in functions):
            return True
        if kind == "function":
            if self.in_main_block(functions[-1]):
                return True  # defined inside the main block: driver code
            if self.role.imported or functions[-1].name not in self.role.driver_functions:  # type: ignore[attr-defined]
                return any(self._tensor_parameter(f) for f in functions)
            return True
        return not self.role.imported or self.in_main_block(node)

    def in_main_block(self, node: ast.AST) -> bool:
        return any(isinstance(p, ast.If) and any(isinstance(n, ast.Name) and n.id == "__name__"
                                                 for n in ast_nodes(p.test))
                   for p in self.ancestors(node))

    def _local_device(self, function: ast.AST) -> bool:
        """A device parameter, or a device the function defines at its top (``_function_device_name``)."""
        args = function.args  # type: ignore[attr-defined]
        names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        if names & (DEVICE_LIKE_NAMES | self.shared_names()):
            return True
        return any(isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                   and self._may_define_device(s.targets[0].id, s.value) for s in function.body)  # type: ignore[attr-defined]

    def _tensor_parameter(self, function: ast.AST) -> bool:
        """A parameter annotated ``Tensor`` or read as a tensor (``t.shape``), as ``_helper_tensor_parameter``."""
        args = function.args  # type: ignore[attr-defined]
        params = {a.arg: a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")}
        if any(a.annotation is not None and (dotted(a.annotation) or "").rsplit(".", 1)[-1] == "Tensor"
               for a in params.values()):
            return True
        return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in params
                   and n.attr in _TENSOR_ATTRIBUTES for s in function.body for n in ast_nodes(s))  # type: ignore[attr-defined]

    def shared_names(self) -> set[str]:
        """Every name the shared device variable may have (``shared_device_name``)."""
        if self._shared is None:
            self._shared = {self.device_name} | self.device_definition_names()
        return self._shared

    # -- names ----------------------------------------------------------------------------------------
    def module_assignments(self) -> Iterator[tuple[str, ast.expr]]:
        """``name = value`` (one plain target) outside any def or class."""
        for node in self.nodes(ast.Assign):
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and not any(isinstance(p, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)) for p in self.ancestors(node)):
                yield node.targets[0].id, node.value  # type: ignore[attr-defined]

    def assigned_values(self, name: str) -> list[ast.expr]:
        """The values of every ``name = value`` (also ``a = name = value``) anywhere in the file."""
        return [node.value for node in self.nodes(ast.Assign)  # type: ignore[attr-defined]
                if any(isinstance(t, ast.Name) and t.id == name for t in node.targets)]  # type: ignore[attr-defined]

    def unpacked_values(self, name: str) -> list[ast.expr]:
        """The values of every ``a, name = value`` (a tuple or list target) anywhere in the file."""
        return [node.value for node in self.nodes(ast.Assign)  # type: ignore[attr-defined]
                if any(isinstance(t, (ast.Tuple, ast.List)) and any(isinstance(e, ast.Name) and e.id == name
                                                                     for e in t.elts)
                       for t in node.targets)]  # type: ignore[attr-defined]

    def values_read_by(self, name: ast.Name) -> list[ast.expr]:
        """The values of the ``name = value`` assignments that ``name`` may read: only those of its
        own function when that function surely binds the name (Python reads no other binding
        there), else every one in the file (``assigned_values``)."""
        child: ast.AST = name
        for parent in self.ancestors(name):
            if isinstance(parent, (*_FUNCTIONS, ast.Lambda)):
                body = parent.body if isinstance(parent.body, list) else [parent.body]  # type: ignore[attr-defined]
                if child not in body or isinstance(parent, ast.Lambda):
                    break  # a default or decorator (the enclosing scope), or a lambda: look everywhere
                local, declared = self._bindings(parent)
                if name.id in local and name.id not in declared:
                    return [node.value for node in _own_scope(body) if isinstance(node, ast.Assign)
                            and any(isinstance(t, ast.Name) and t.id == name.id for t in node.targets)]
                break
            child = parent
        return self.assigned_values(name.id)

    def device_definition_names(self) -> set[str]:
        """Names a module-level assignment may define as a device (``is_device_definition``)."""
        found = set()
        for name, value in self.module_assignments():
            if self._may_define_device(name, value):
                found.add(name)
        return found

    def _may_define_device(self, name: str, value: ast.expr) -> bool:
        if isinstance(value, ast.IfExp) or (isinstance(value, ast.Constant) and value.value in CUDA_STRINGS):
            return True
        for node in ast_nodes(value):
            if isinstance(node, ast.Call) and any(q == "torch.device" or q.startswith("torch.accelerator.")
                                                  for q in self.qnames(node.func)):
                return True
        plain = isinstance(value, ast.Name) or (isinstance(value, ast.Constant) and (
            value.value is None or type(value.value) in (int, float, bool)))
        return name in DEVICE_LIKE_NAMES and not plain

    def global_loads(self, names: set[str]) -> bool:
        """Is one of ``names`` read somewhere it may resolve to the module's binding (libcst's
        scope analysis may count it; only a load inside a function that surely binds the name
        itself does not)?"""
        for node in self.nodes(ast.Name):
            if node.id in names and not isinstance(node.ctx, ast.Store) and not self._surely_local(node):  # type: ignore[attr-defined]
                return True
        for node in self.nodes(ast.AugAssign):
            if isinstance(node.target, ast.Name) and node.target.id in names:  # type: ignore[attr-defined]
                return True
        return False

    def _surely_local(self, name: ast.Name) -> bool:
        child: ast.AST = name
        for parent in self.ancestors(name):
            if isinstance(parent, (*_FUNCTIONS, ast.Lambda)):
                body = parent.body if isinstance(parent.body, list) else [parent.body]  # type: ignore[attr-defined]
                if child in body:  # defaults and decorators run in the enclosing scope
                    local, declared = self._bindings(parent)
                    if name.id in declared:
                        return False
                    if name.id in local:
                        return True
            child = parent
        return False

    def parameter_here(self, name: ast.Name) -> bool:
        """Is ``name`` a parameter of the innermost def or lambda whose body holds it? Then its
        scope binds it as a parameter, never as ``name = value``."""
        child: ast.AST = name
        for parent in self.ancestors(name):
            if isinstance(parent, (*_FUNCTIONS, ast.Lambda)):
                body = parent.body if isinstance(parent.body, list) else [parent.body]  # type: ignore[attr-defined]
                if child not in body:
                    return False
                args = parent.args  # type: ignore[attr-defined]
                return name.id in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                                   *(a for a in (args.vararg, args.kwarg) if a is not None))}
            child = parent
        return False

    def _bindings(self, function: ast.AST) -> tuple[set[str], set[str]]:
        """(names surely bound in ``function``'s own scope, names declared global/nonlocal there)."""
        known = self._binds.get(function)
        if known is not None:
            return known
        args = function.args  # type: ignore[attr-defined]
        local = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        declared: set[str] = set()
        body = function.body if isinstance(function.body, list) else [function.body]  # type: ignore[attr-defined]
        for node in _own_scope(body):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                declared.update(node.names)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    local |= _target_names(target)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                local |= _target_names(node.target)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                local |= _target_names(node.target)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                local |= _target_names(node.optional_vars)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                local |= {a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"}
            elif isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
                local.add(node.name)
        self._binds[function] = (local, declared)
        return local, declared


def _own_scope(body: list[ast.AST]) -> Iterator[ast.AST]:
    """The nodes of a function body that belong to its own scope (not nested defs, classes,
    lambdas or comprehensions; their names, for defs and classes, do)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            continue
        stack.extend(ast_children(node))


def _target_names(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(e) for e in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return set()


def chain(call: ast.AST) -> Iterable[ast.Call]:
    """``a(...).b(...).c(...)``: the calls of a method chain, outermost first."""
    while isinstance(call, ast.Call):
        yield call
        call = call.func.value if isinstance(call.func, ast.Attribute) else None  # type: ignore[assignment]


# -- checks shared by several rules ---------------------------------------------------------------
_MODEL_FACTORY_PREFIXES = ("torchvision.models.", "timm.create_model", "transformers.")
_LOADER_CLASSES = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_LOADER_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm"})
_TQDM = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm"})


def may_build_model(facts: FileFacts, call: ast.Call) -> bool:
    """``is_model_constructor``, wrappers and losses included: a class of the file that may be a
    model, anything under ``torch.nn``, a model factory or ``X.from_pretrained(...)``."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in facts.model_classes:
        return True
    if isinstance(func, ast.Attribute) and dotted(func) in facts.model_classes:
        return True  # ``nets.Stepper(8)`` of ``from flowlib import nets`` (the project index's name)
    if isinstance(func, ast.Attribute) and func.attr == "from_pretrained":
        return True
    return any(n.startswith(("torch.nn.", *_MODEL_FACTORY_PREFIXES)) for n in facts.qnames(func))


def may_iterate_loader(facts: FileFacts, iterable: ast.AST) -> bool:
    """``find_loader`` may find one: a name, or ``DataLoader(...)``, maybe in ``enumerate``/``tqdm``."""
    if isinstance(iterable, ast.Name):
        return _may_name_loader(facts, iterable.id)
    if not isinstance(iterable, ast.Call):
        return False
    names = facts.qnames(iterable.func)
    if names & _LOADER_CLASSES:
        return True
    if iterable.args and (dotted(iterable.func) in _LOADER_WRAPPERS or names & _TQDM):
        first = iterable.args[0]
        return may_iterate_loader(facts, first.value if isinstance(first, ast.Starred) else first)
    return False


_LOADER_PARAM_NAMES = frozenset({"dl", "train_dl", "val_dl", "valid_dl", "test_dl", "eval_dl", "dataloader"})


def _may_name_loader(facts: FileFacts, name: str) -> bool:
    """``_loader_name``: a parameter named or annotated like a loader, a ``*loader`` from a
    ``*loader*(...)`` call, or a name assigned ``DataLoader(...)`` or a list comprehension."""
    if "loader" in name.lower() or name in _LOADER_PARAM_NAMES:
        return True
    for arg in facts.nodes(ast.arg):
        if arg.arg == name and arg.annotation is not None \
                and (dotted(arg.annotation) or "").endswith("DataLoader"):  # type: ignore[attr-defined]
            return True
    for node in facts.nodes(ast.Assign, ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
        value = node.value  # type: ignore[attr-defined]
        if value is None or not any(name in _target_names(t) for t in targets):
            continue
        if isinstance(value, ast.ListComp) or (isinstance(value, ast.Call) and facts.qnames(value.func) & _LOADER_CLASSES):
            return True
    return False


def init_assignment(facts: FileFacts, assign: ast.AST) -> bool:
    """``self.x = ...`` (one target) in the ``__init__`` of a class that may be a model (``init_attribute``)."""
    if not isinstance(assign, ast.Assign) or len(assign.targets) != 1:
        return False
    target = dotted(assign.targets[0]) or ""
    if not target.startswith("self.") or target.count(".") != 1:
        return False
    kind, function = facts.place(assign)
    return kind == "model" and function is not None and function.name == "__init__"  # type: ignore[attr-defined]


def may_be_tensor(facts: FileFacts, expr: ast.AST, seen: set[str] | None = None) -> bool:
    """``is_surely_tensor`` may say yes: a call of a ``torch.<function>`` in its method chain,
    arithmetic on one, or a name assigned one somewhere."""
    seen = set() if seen is None else seen
    node = expr
    while isinstance(node, ast.Call):  # a factory, or a torch function of a tensor (``torch.tril(t)``)
        if any(n.startswith("torch.") and n.count(".") == 1 and n[6:7].islower() for n in facts.qnames(node.func)):
            return True
        if not isinstance(node.func, ast.Attribute):
            return False
        node = node.func.value
    if isinstance(node, ast.UnaryOp):
        return may_be_tensor(facts, node.operand, seen)
    if isinstance(node, ast.BinOp):
        return may_be_tensor(facts, node.left, seen) or may_be_tensor(facts, node.right, seen)
    if isinstance(node, ast.Name) and node.id not in seen:
        seen.add(node.id)
        return any(may_be_tensor(facts, value, seen) for value in facts.assigned_values(node.id)) \
            or any(may_be_tensor(facts, value, seen) for value in facts.unpacked_values(node.id))
    return False
