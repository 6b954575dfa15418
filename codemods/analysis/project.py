"""What one file cannot see about itself: the project around it.

Built once per run with CPython's ``ast`` (cheap next to libcst) over every file the run
looks at, then shared with each file's rewrite as a small, picklable ``FileRole``:

- ``imported``: another project file imports this one, so it is library code: its top
  level gets no global device (``from models import *`` would export it over the user's own).
- ``driver_functions``: the functions that only driver code reaches. Driver code is the
  ``__main__`` block, the top level of a script no project file imports, and what only
  they call (main, train, test). Only driver code may use the global device.
- ``model_names``: classes deriving from ``nn.Module`` (also through project classes in other
  files) and functions that return a module (``def make_net(): return Net()``), as visible
  in this file (its own definitions and what it imports from the project), so that
  ``net = make_net()`` moves with its inputs.
- ``tensor_helpers``: functions that return a CPU tensor they build from host data
  (``return torch.from_numpy(a).float()``) and place nothing themselves: where driver code
  feeds their result to a model, it moves with the model.
- ``star_names``: module-level variables that the file's ``from x import *`` of project files
  brings (``device`` from a config module): DM101 reuses such a ``device`` instead of
  defining one that would shadow it.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .bases import NN_MODULE_BASES
from .factory_names import tensor_factories
from .ast_walk import ast_dotted, ast_nodes
from .unplaceable_classes import tensors_it_cannot_place

# As written in the source (``ast``, no import resolution): ``Module``, ``nn.Module``, ``torch.nn.Module``.
_NN_MODULE = NN_MODULE_BASES | {f"{prefix}{name.rsplit('.', 1)[-1]}" for name in NN_MODULE_BASES
                                for prefix in ("", "nn.")}
# torch.nn names that build a module one moves (containers included: they hold parameters).
_NOT_MODULE_BUILDERS = frozenset({"Parameter", "ParameterList", "ParameterDict", "Identity"})
_MAIN = "<main>"  # the ``if __name__ == "__main__":`` block
_TOP = "<top>"    # other module-level statements
_CLASS = "<class>"  # class bodies and methods: construction and forward paths, never driver code


@dataclass(frozen=True)
class FileRole:
    """What the project says about one file; the default is a lone script."""

    imported: bool = False
    driver_functions: frozenset[str] = frozenset()
    model_names: frozenset[str] = frozenset()
    tensor_helpers: frozenset[str] = frozenset()
    main_only: frozenset[str] = frozenset()  # driver functions only this file's main block reaches
    star_names: frozenset[str] = frozenset()  # variables its star imports of project files bring
    training_loops: frozenset[str] = frozenset()  # ``train``, ``d2l.train_ch3``: project loops that feed a model handed in
    cpu_resident: frozenset[str] = frozenset()  # model classes whose methods bring results back with ``.cpu()``
    # It calls ``torch.cuda.set_device``, itself or through a project function (dino's and detr's
    # ``init_distributed_mode``): per rank, a bare ``.cuda()`` / ``"cuda"`` then is the rank's GPU.
    sets_cuda_device: bool = False
    cuda_device_setters: frozenset[str] = frozenset()  # the names it calls them by (``utils.init_distributed_mode``)
    list_collators: frozenset[str] = frozenset()  # project functions that return lists (facenet's ``collate_pil``)
    self_placing: frozenset[str] = frozenset()  # project model classes whose ``__init__`` calls ``self.to(...)``
    plain_classes: frozenset[str] = frozenset()  # project classes seen here that are no ``nn.Module`` (ddim's ``EMAHelper``)
    # Those of them with a ``cuda()`` of their own or of a project base (seq2seq's losses): no ``.to()``.
    cuda_method_classes: frozenset[str] = frozenset()
    # Methods of model classes imported from other files that return a fresh CPU tensor
    # (``net.init_hidden()`` building ``torch.zeros(...)``): library code devmod leaves as it is.
    host_methods: frozenset[str] = frozenset()
    # (class, method, where) for model classes of other files whose method makes a tensor devmod has no
    # device for (graphsage's aggregator): a model of one moved by this file would compute with it.
    unplaceable_methods: frozenset[tuple[str, str, str]] = frozenset()
    # (function, position, parameter) for project functions that move that parameter themselves
    # (``g = None if g is None else g.to(device)``): a batch handed to one is placed by its author.
    param_movers: frozenset[tuple[str, int, str]] = frozenset()
    in_package: bool = False  # a module of a package (an ``__init__.py`` beside it): library-shaped
    # Imported only by files that stop without CUDA (or by files imported only by such): a GPU-only
    # program's library code, where a bare ``.cuda()`` is correct wherever it runs.
    gpu_only_program: bool = False


@dataclass
class _Summary:
    """One file, read with ``ast``: definitions, imports and who references what."""

    path: str
    names: tuple[str, ...]  # dotted module names this file may be imported as
    functions: set[str] = field(default_factory=set)
    class_bases: dict[str, set[str]] = field(default_factory=dict)
    returns: dict[str, list[frozenset[str] | None]] = field(default_factory=dict)  # function -> _returned_callees
    tensor_helpers: set[str] = field(default_factory=set)
    imports: set[str] = field(default_factory=set)  # absolute dotted modules imported
    from_names: dict[str, tuple[str, str]] = field(default_factory=dict)  # local -> (module, name)
    star_modules: set[str] = field(default_factory=set)
    variables: set[str] = field(default_factory=set)  # other module-level names bound at import
    exports: tuple[str, ...] | None = None  # a literal ``__all__``
    loop_functions: set[str] = field(default_factory=set)  # loops feeding a parameter, placing nothing
    cpu_resident: set[str] = field(default_factory=set)  # classes whose methods compute on after ``.cpu()``
    module_aliases: dict[str, str] = field(default_factory=dict)  # ``import d2l`` -> {"d2l": "d2l"}
    references: dict[str, set[str]] = field(default_factory=dict)  # context -> names loaded there
    has_main: bool = False
    does_work: bool = False  # top-level loops, ``with`` blocks or calls made for their effect
    sets_cuda_device: bool = False  # the file calls ``torch.cuda.set_device`` somewhere
    requires_gpu: bool = False  # it stops without CUDA (``if not torch.cuda.is_available(): sys.exit(1)``)
    cuda_device_setters: set[str] = field(default_factory=set)  # its functions that call it
    list_collators: set[str] = field(default_factory=set)  # functions that return only lists
    self_placing: set[str] = field(default_factory=set)  # classes whose ``__init__`` moves ``self``
    cuda_methods: set[str] = field(default_factory=set)  # classes that define their own ``cuda()``
    host_methods: dict[str, set[str]] = field(default_factory=dict)  # class -> its methods returning CPU tensors
    unplaceable: dict[str, dict[str, int]] = field(default_factory=dict)  # class -> {method: line of the tensor}
    param_movers: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # function -> moved parameters


def module_names(path: str) -> tuple[str, ...]:
    """``a/b/c.py`` -> ``("c", "b.c", "a.b.c")``; a package's ``__init__.py`` is the package."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)[1:]
    stem = parts[-1][:-3] if parts[-1].endswith(".py") else parts[-1]
    parts = parts[:-1] if stem == "__init__" else parts[:-1] + [stem]
    return tuple(".".join(parts[i:]) for i in range(len(parts) - 1, -1, -1) if parts[i:])


def read_summary(path: str) -> _Summary | None:
    """``summarise`` of the file at ``path``; None when it cannot be read or parsed, or cannot matter."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if b"torch" in data or b"import" in data:
        text = data.decode("utf-8", "replace")
        if path.endswith(".ipynb"):  # its code cells, so that it sees its project's loops, models and helpers
            from ..notebooks import notebook_script  # late: the notebooks module needs the engine
            try:
                text = notebook_script(text).text
            except Exception:  # noqa: BLE001 - not a notebook devmod can read: the engine reports that
                return None
        return summarise(path, text)
    return None


def _foreign_module_base(summary: _Summary, base: str) -> bool:
    """``nn.Module`` where ``nn`` is ``flax.linen`` (cleanrl's JAX files), or ``Module`` from
    another library: spelled like torch's, but no torch module (no ``.to``, no parameters)."""
    if base not in _NN_MODULE:
        return False
    head = base.split(".")[0]
    target = summary.module_aliases.get(head)
    return target is not None and not target.startswith("torch")


def summarise(path: str, source: str) -> _Summary | None:
    """The facts of one file, or None when ``ast`` cannot read it (the engine reports that)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    path = os.path.abspath(path)
    summary = _Summary(path, module_names(path))
    package = summary.names[-1].rsplit(".", 1)[0] if "." in summary.names[-1] else ""
    if os.path.basename(path) == "__init__.py":
        package = summary.names[-1]
    for node in ast_nodes(tree):
        if isinstance(node, ast.Import):
            summary.imports |= {a.name for a in node.names}
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                summary.module_aliases[local] = a.name if a.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            summary.imports.add(base)
            for alias in node.names:
                if alias.name == "*":
                    summary.star_modules.add(base)
                else:
                    summary.imports.add(f"{base}.{alias.name}")
                    summary.from_names[alias.asname or alias.name] = (base, alias.name)
                    summary.module_aliases.setdefault(alias.asname or alias.name, f"{base}.{alias.name}")
    walked: dict[ast.AST, list[ast.AST]] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            summary.functions.add(stmt.name)
            nodes = walked[stmt] = ast_nodes(stmt)  # one walk of each function serves every question below
            summary.returns[stmt.name] = _returned_callees(nodes)
            if _returns_host_tensor(stmt, nodes):
                summary.tensor_helpers.add(stmt.name)
            if _feeds_a_handed_model(stmt, nodes):
                summary.loop_functions.add(stmt.name)
            if _calls_set_device(nodes):
                summary.cuda_device_setters.add(stmt.name)
            moved = _moved_parameters(stmt, nodes)
            if moved:
                summary.param_movers[stmt.name] = moved
            if _returns_lists(nodes):
                summary.list_collators.add(stmt.name)
            args = stmt.args
            signature = [*stmt.decorator_list, stmt.returns, args.vararg, args.kwarg,
                         *(a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))]
            _collect_loads(summary, stmt.name, _outside(nodes, signature))  # body and defaults
            _collect_loads(summary, _TOP, _walk_all(stmt.decorator_list))
        elif isinstance(stmt, ast.ClassDef):
            summary.class_bases[stmt.name] = {b for b in map(_dotted, stmt.bases)
                                              if b and not _foreign_module_base(summary, b)}
            nodes = ast_nodes(stmt)
            if _brings_results_to_the_cpu(nodes):
                summary.cpu_resident.add(stmt.name)
            if _places_itself_when_built(stmt):
                summary.self_placing.add(stmt.name)
            if any(isinstance(f, ast.FunctionDef) and f.name == "cuda" for f in stmt.body):
                summary.cuda_methods.add(stmt.name)
            methods = {f.name for f in stmt.body if isinstance(f, ast.FunctionDef) and _returns_fresh_tensor(f)}
            if methods:
                summary.host_methods[stmt.name] = methods
            if _runs_a_handed_model(stmt, nodes):
                summary.loop_functions.add(stmt.name)  # ``Fitter(net, batches).fit()``: a loop like ``train(net, ...)``
            unplaced = tensors_it_cannot_place(stmt, _HOST_DATA | tensor_factories(), nodes)
            if unplaced:
                summary.unplaceable[stmt.name] = unplaced
            _collect_loads(summary, _CLASS, _outside(nodes, [*stmt.bases, *stmt.keywords, *stmt.decorator_list]))
        elif _is_main_guard(stmt):
            summary.has_main = True
            _collect_loads(summary, _MAIN, _walk_all(stmt.body))
        else:
            _collect_loads(summary, _TOP, ast_nodes(stmt))
    summary.does_work = _does_work(tree.body)
    summary.requires_gpu = _stops_without_cuda(tree)
    summary.sets_cuda_device = bool(summary.cuda_device_setters) or _calls_set_device(
        [n for stmt in tree.body if stmt not in walked for n in ast_nodes(stmt)])
    _collect_variables(summary, tree.body)
    _holders_of_cpu_resident(summary, [s for s in tree.body if isinstance(s, ast.ClassDef)])
    functions = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    # ``make_batch()`` that returns ``pad(rows)``, a helper of the file that builds host data
    _grow(summary.tensor_helpers, functions, lambda f: _returns_host_tensor(f, walked[f], summary.tensor_helpers))
    # ``compare(pairs, loader)`` that hands each model of ``pairs`` to the file's own loop
    _grow(summary.loop_functions, functions, lambda f: _hands_models_to_a_loop(f, walked[f], summary.loop_functions))
    return summary


def _returns_fresh_tensor(method: ast.FunctionDef) -> bool:
    """A method (not ``forward``) whose every ``return`` is a new CPU tensor from a factory:
    ``def init_hidden(self): return torch.zeros(self.layers, 1, self.size)``."""
    if method.name in ("forward", "__call__", "__init__"):
        return False
    nodes = ast_nodes(method)
    if not _returns_host_tensor(method, nodes):
        return False
    makers = _HOST_DATA | tensor_factories()
    for ret in (n for n in nodes if isinstance(n, ast.Return)):
        value = ret.value
        if isinstance(value, ast.Name):
            value = _last_assignment(method, nodes, ret)
        if not (isinstance(value, ast.Call) and _dotted(value.func) in makers):
            return False
    return True


def _returns_lists(nodes: list[ast.AST]) -> bool:
    """Every ``return`` gives a list, or a tuple of lists: a literal, a comprehension, or a name the
    function binds only to one (``out_x, out_y = [], []`` ... ``return out_x, out_y``)."""
    returns = [n.value for n in nodes if isinstance(n, ast.Return)]
    lists: set[str] = set()
    others: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
            if isinstance(node.value, ast.Tuple):
                pairs = [(e, v) for t in node.targets if isinstance(t, ast.Tuple) and len(t.elts) == len(node.value.elts)
                         for e, v in zip(t.elts, node.value.elts)] or pairs
            for target, value in pairs:
                if isinstance(target, ast.Name):
                    (lists if isinstance(value, (ast.List, ast.ListComp)) else others).add(target.id)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.For)) \
                and isinstance(getattr(node, "target", None), ast.Name):
            others.add(node.target.id)  # type: ignore[union-attr]

    def a_list(value: ast.AST | None) -> bool:
        if isinstance(value, ast.Tuple):
            return bool(value.elts) and all(a_list(e) for e in value.elts)
        if isinstance(value, ast.Name):
            return value.id in lists and value.id not in others
        return isinstance(value, (ast.List, ast.ListComp))
    return bool(returns) and all(a_list(v) for v in returns)


def _places_itself_when_built(klass: ast.ClassDef) -> bool:
    """``__init__`` calls ``self.to(...)`` or ``self.cuda(...)`` (facenet's MTCNN: ``self.to(device)``
    with a CPU default), or moves its parts to a device it is handed (``self.enc.to(gpu_ids[0])``): the
    model goes where its own arguments say."""
    init = next((s for s in klass.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    if init is None:
        return False
    params = _parameters(init)
    for n in ast_nodes(init):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "cuda")):
            continue
        if isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
            return True
        # ``self.enc.to(gpu_ids[0])``: its parts go to the GPUs it is handed (generative-inpainting's Trainer)
        if isinstance(n.func.value, ast.Attribute) and isinstance(n.func.value.value, ast.Name) \
                and n.func.value.value.id == "self" and n.func.attr == "to" and n.args \
                and any(isinstance(x, ast.Name) and x.id in params for x in ast.walk(n.args[0])):
            return True
    return _sends_inputs_to_its_own_device(klass, init, params) or _moves_parts_to_a_device_it_picks(init, params)


def _is_self_device(node: ast.AST) -> bool:
    """``self.device``."""
    return isinstance(node, ast.Attribute) and node.attr == "device" \
        and isinstance(node.value, ast.Name) and node.value.id == "self"


def _moves_parts_to_a_device_it_picks(init: ast.FunctionDef, params: set[str]) -> bool:
    """``self.device = torch.device('cpu' if args.cpu else 'cuda')`` from a parameter, then
    ``self.model = make_model(args).to(self.device)`` (EDSR's and RCAN's ``Model``): the model goes where
    the user's switch says, and its trainer sends the data there."""
    picked = any(isinstance(n, ast.Assign) and len(n.targets) == 1 and _is_self_device(n.targets[0])
                 and isinstance(n.value, ast.Call)
                 and (_dotted(n.value.func) or "").endswith("device")
                 and any(isinstance(x, ast.Name) and x.id in params for x in ast.walk(n.value))
                 for n in ast_nodes(init))
    return picked and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "to" and n.args
        and _is_self_device(n.args[0]) for n in ast_nodes(init))


def _sends_inputs_to_its_own_device(klass: ast.ClassDef, init: ast.FunctionDef, params: set[str]) -> bool:
    """``self.device = device`` from ``__init__``'s parameter (default ``'cpu'``), and a method that
    sends what it is given there (``state.to(self.device)``, learn2learn's RL policies): moved alone
    to another device, the model would get its inputs on the old one."""
    if not any(isinstance(n, ast.Assign) and any(_is_self_device(t) for t in n.targets)
               and isinstance(n.value, ast.Name) and n.value.id in params for n in ast_nodes(init)):
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "to"
               and not (isinstance(n.func.value, ast.Name) and n.func.value.id == "self")
               and any(_is_self_device(a) for a in (*n.args, *(k.value for k in n.keywords)))
               for method in klass.body if isinstance(method, ast.FunctionDef) and method is not init
               for n in ast_nodes(method))


def _grow(found: set[str], functions: list, holds: Callable[[ast.AST], bool]) -> None:
    """Add the name of each function for which ``holds`` is true, again until none is added (one
    function found may make another one's answer true)."""
    grown = True
    while grown:
        grown = False
        for function in functions:
            if function.name not in found and holds(function):
                found.add(function.name)
                grown = True


def _hands_models_to_a_loop(function: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST],
                            loops: set[str]) -> bool:
    """``for model, label in pairs: evaluate(model, loader)``: a loop over a parameter that hands
    what it iterates to a loop function of the file, placing nothing itself."""
    params = _parameters(function)
    if not loops or _places_something(nodes):
        return False
    for loop in nodes:
        iterated = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else None
        if isinstance(iterated, ast.Call) and _dotted(iterated.func) == "enumerate" and iterated.args:
            iterated = iterated.args[0]  # ``for i, (model, label) in enumerate(pairs)``
        if isinstance(iterated, ast.Name) and iterated.id in params:
            targets = {n.id for n in ast_nodes(loop.target) if isinstance(n, ast.Name)}
            if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in loops
                   and any(isinstance(a, ast.Name) and a.id in targets for a in n.args)
                   for stmt in loop.body for n in ast_nodes(stmt)):
                return True
    return False


def _places_something(nodes: list[ast.AST]) -> bool:
    """``.to`` / ``.cuda`` or a name with "device" in it: the function places what it runs."""
    return any(isinstance(node, ast.Attribute) and node.attr in ("to", "cuda")
               or isinstance(node, ast.Name) and "device" in node.id
               or isinstance(node, ast.arg) and "device" in node.arg for node in nodes)


def _calls_set_device(nodes: Iterable[ast.AST]) -> bool:
    return any(isinstance(n, ast.Call) and _dotted(n.func) in ("torch.cuda.set_device", "cuda.set_device")
               for n in nodes)


def _stops_without_cuda(tree: ast.Module) -> bool:
    """``if not torch.cuda.is_available(): sys.exit(1)`` / ``raise ...``, or ``assert
    torch.cuda.is_available()``, anywhere in the file (a driver's first lines, TorchSSL's and DenseNAS's)."""
    def cuda_available(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith("cuda.is_available")
    for node in ast_nodes(tree):
        if isinstance(node, ast.Assert) and cuda_available(node.test):
            return True
        if isinstance(node, ast.If) and isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not) \
                and cuda_available(node.test.operand) and node.body:
            last = node.body[-1]
            if isinstance(last, ast.Raise) or (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                                               and (_dotted(last.value.func) or "") in ("sys.exit", "exit", "quit")):
                return True
    return False


def _does_work(body: list[ast.stmt]) -> bool:
    """Does the module's top level run anything besides definitions and assignments (a loop, a
    ``with`` block, a call made for its effect), outside the main block?"""
    for stmt in body:
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
            return True
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Call, ast.Await)):
            return True
        if isinstance(stmt, (ast.If, ast.Try)) and not _is_main_guard(stmt) and any(
                _does_work(getattr(stmt, part, [])) for part in ("body", "orelse", "finalbody")):
            return True
    return False


def _collect_variables(summary: _Summary, body: list[ast.stmt]) -> None:
    """Names bound when the file is imported (outside defs, classes and the main block):
    what ``from it import *`` gives besides its functions and classes."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or _is_main_guard(stmt):
            continue
        targets: list[ast.AST] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets) \
                    and isinstance(stmt.value, (ast.List, ast.Tuple)) \
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in stmt.value.elts):
                summary.exports = tuple(e.value for e in stmt.value.elts)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and getattr(stmt, "value", None) is not None:
            targets = [stmt.target]
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            targets = [stmt.target]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            summary.variables |= {(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"}
        for target in targets:
            summary.variables |= {n.id for n in ast_nodes(target) if isinstance(n, ast.Name)}
        for field_name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field_name, None)
            if isinstance(inner, list):
                _collect_variables(summary, inner)
        for handler in getattr(stmt, "handlers", ()):
            _collect_variables(summary, handler.body)


def _absolute(module: str | None, level: int, package: str) -> str:
    if not level:
        return module or ""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*base, module] if module else base)


_dotted = ast_dotted


def _is_main_guard(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    values = [stmt.test.left, *stmt.test.comparators]
    return any(isinstance(v, ast.Name) and v.id == "__name__" for v in values) and any(
        isinstance(v, ast.Constant) and v.value == "__main__" for v in values)


def _walk_all(roots: Iterable[ast.AST | None]) -> list[ast.AST]:
    return [node for root in roots if root is not None for node in ast_nodes(root)]


def _outside(nodes: list[ast.AST], parts: Iterable[ast.AST | None]) -> list[ast.AST]:
    """``nodes`` without those under ``parts`` (a function's signature, a class's bases)."""
    skip = {id(node) for node in _walk_all(parts)}
    return [node for node in nodes if id(node) not in skip] if skip else nodes


def _collect_loads(summary: _Summary, context: str, nodes: Iterable[ast.AST]) -> None:
    """The names and dotted names that ``nodes`` (already walked) read."""
    found = summary.references.setdefault(context, set())
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            dotted = _dotted(node)
            if dotted:
                found.add(dotted)


def _returned_callees(nodes: list[ast.AST]) -> list[frozenset[str] | None]:
    """What each ``return`` of a function (its walked ``nodes``) gives, as the names of the calls that
    may have made it: ``return Net(4)``, or ``m = Net(); return m``. None for a name the function never
    assigns (a parameter handed back); an empty set for anything else (a literal, ``None``, a tuple)."""
    assigned: dict[str, set[str]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign):
            callee = _callee(node.value) if isinstance(node.value, ast.Call) else ""
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, set()).add(callee)
    returned: list[frozenset[str] | None] = []
    for node in nodes:
        if isinstance(node, ast.Return) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call):
                returned.append(frozenset({_callee(value)}) - {""})
            elif isinstance(value, ast.Name):
                returned.append(frozenset(assigned[value.id]) - {""} if value.id in assigned else None)
            else:
                returned.append(frozenset())
    return returned


def _makes_a_module(returns: list[frozenset[str] | None], known: set[str]) -> bool:
    """Does every ``return`` give a module (``known``: the project's model classes and factories)?
    ``def main(eval_only): ...; return score(net)`` on one path and ``return net`` on the other is no
    factory: ``main(...).to(device)`` would fail on the dict it returns."""
    made = [r for r in returns if r is not None]
    return bool(made) and all(any(_builds_module(c) or c in known for c in r) for r in made)


_NOT_TENSORS = ("torch.nn.", "torch.device", "torch.load", "torch.Generator", "torch.optim.", "torch.utils.")


def _returns_host_tensor(function: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST],
                         helpers: Iterable[str] = ()) -> bool:
    """Every ``return`` gives a torch call chain (``torch.from_numpy(a).float()``) or a call of
    one of ``helpers``, and the function places nothing itself (no ``.to``, ``.cuda``, ``device=``)."""
    returns = [n for n in nodes if isinstance(n, ast.Return)]
    if not returns:
        return False
    for node in nodes:
        if isinstance(node, ast.Attribute) and node.attr in ("to", "cuda"):
            return False
        if isinstance(node, ast.keyword) and node.arg == "device":
            return False
    for ret in returns:
        value = ret.value
        if isinstance(value, ast.Name):
            value = _last_assignment(function, nodes, ret)
            root = value
            while isinstance(root, ast.Call) and isinstance(root.func, ast.Attribute) \
                    and isinstance(root.func.value, ast.Call):
                root = root.func.value
            if not (isinstance(root, ast.Call) and (_dotted(root.func) in _HOST_DATA
                                                    or _dotted(root.func) in tensor_factories())):
                return False  # ``return out`` of ``torch.where(...)``: computed from inputs, not host data
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and isinstance(value.func.value, ast.Call):
            value = value.func.value  # ``torch.from_numpy(a).float()``
        if not isinstance(value, ast.Call):
            return False
        name = _dotted(value.func)
        if name in helpers:
            continue
        if not name.startswith("torch.") or name.startswith(_NOT_TENSORS):
            return False
        if _from_inputs(ret.value, _derived_from_inputs(nodes, _parameters(function))):
            return False  # ``torch.split(x, n)``, ``torch.log(x.clamp(...))``: on its input's device
    return True


def _derived_from_inputs(nodes: list[ast.AST], params: set[str]) -> set[str]:
    """The parameters and the names assigned from them (``cx, cy, w, h = x.unbind(-1)``), so that
    ``torch.stack([cx - w / 2, ...])`` counts as computed from the input (detr's box helpers)."""
    found = set(params)
    assigns = [n for n in nodes if isinstance(n, ast.Assign)]
    for _ in range(4):  # a few steps of ``a = f(x); b = g(a)``
        grown = False
        for node in assigns:
            if _from_inputs(node.value, found):
                for target in node.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id not in found:
                            found.add(name.id)
                            grown = True
        if not grown:
            break
    return found


def _holders_of_cpu_resident(summary: _Summary, classes: list[ast.ClassDef]) -> None:
    """A class that holds a CPU-resident one as a part (``self.stft_fn = STFT()``) and computes
    with its results lives on the CPU too (classes of the same file)."""
    grown = bool(summary.cpu_resident)  # nothing to hold in almost every file
    while grown:
        grown = False
        for klass in classes:
            if klass.name not in summary.cpu_resident and any(
                    isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                    and _dotted(n.value.func) in summary.cpu_resident
                    and any(isinstance(t, ast.Attribute) and _dotted(t.value) == "self" for t in n.targets)
                    for n in ast_nodes(klass)):
                summary.cpu_resident.add(klass.name)
                grown = True


def _brings_results_to_the_cpu(nodes: list[ast.AST]) -> bool:
    """``out = conv(x.cuda(), w.cuda()).cpu()`` in a method, then computed on with the module's
    own tensors: the module is meant to live on the CPU (its results come back there), so moving
    it would mix devices. A ``.cpu()`` read at once (``.numpy()``, ``.item()``, ``.tolist()``)
    is not that."""
    read_at_once: set[int] = set()
    round_trips: list[ast.Call] = []
    for node in nodes:  # the class's walk, no parent map: most classes have no ``.cpu()`` at all
        if isinstance(node, ast.Attribute) and node.attr in ("numpy", "item", "tolist"):
            read_at_once.add(id(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cpu" \
                and not node.args:
            round_trips.append(node)
    return any(id(call) not in read_at_once and any(isinstance(n, ast.Attribute) and n.attr in ("cuda", "to")
                                                    for n in ast_nodes(call.func.value)) for call in round_trips)


def _feeds_a_handed_model(function: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST]) -> bool:
    """``def train(net, data, ...)``: a loop that calls one of its parameters on what it
    iterates, and places nothing itself (no ``.to``, ``.cuda``, ``device``): the batches stay
    where the data is, so a model handed in must stay there too."""
    params = _parameters(function)
    if _places_something(nodes):
        return False
    for loop in nodes:
        if isinstance(loop, (ast.For, ast.AsyncFor)) and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in params
                for stmt in loop.body for n in ast_nodes(stmt)):
            return True
    return False


def _moved_parameters(function: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST]) -> list[tuple[int, str]]:
    """(position, name) of each parameter the function moves itself (``c.to(device)``, ``g.cuda()``)."""
    args = function.args
    params = [a.arg for a in (*args.posonlyargs, *args.args)]
    moved = {n.func.value.id for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("to", "cuda") and isinstance(n.func.value, ast.Name)}
    return [(i, p) for i, p in enumerate(params) if p in moved] + \
        [(-1, a.arg) for a in args.kwonlyargs if a.arg in moved]


def _runs_a_handed_model(klass: ast.ClassDef, nodes: list[ast.AST]) -> bool:
    """A trainer class: ``__init__`` keeps a parameter (``self.net = net``) that a loop in one of
    its methods calls (``for xb in self.batches: self.net(xb.type(self.cast))``), and the class
    places nothing itself (wavenet's ``WavenetTrainer``): the batches stay where the data is, so
    a model handed in must stay there too."""
    init = next((f for f in klass.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None or _places_something(nodes):
        return False
    params = _parameters(init)
    kept = {t.attr for n in ast_nodes(init) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name)
            and n.value.id in params for t in n.targets
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return bool(kept) and any(
        isinstance(loop, (ast.For, ast.AsyncFor)) and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in kept
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"
            for stmt in loop.body for n in ast_nodes(stmt))
        for loop in nodes)


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = function.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {"self", "cls"}


def _from_inputs(expr: ast.AST, params: set[str]) -> bool:
    """Is ``expr`` computed from one of ``params`` by tensor operations (so it lives where its
    input does), rather than built from host data by a factory or ``torch.tensor``?"""
    if isinstance(expr, ast.Name):
        return expr.id in params
    if isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):
        return _from_inputs(expr.value, params)
    if isinstance(expr, ast.BinOp):
        return _from_inputs(expr.left, params) or _from_inputs(expr.right, params)
    if isinstance(expr, ast.UnaryOp):
        return _from_inputs(expr.operand, params)
    if isinstance(expr, (ast.List, ast.Tuple)):
        return any(_from_inputs(e, params) for e in expr.elts)
    if isinstance(expr, ast.Call):
        name = _dotted(expr.func)
        if name == "torch.normal" and len(expr.args) < 3 and not any(k.arg == "size" for k in expr.keywords):
            return any(_from_inputs(a, params) for a in expr.args)  # ``normal(mean, std)``: on their device
        if name in _HOST_DATA or name in tensor_factories():
            return False  # built here, on the CPU, whatever its arguments
        if isinstance(expr.func, ast.Attribute) and _from_inputs(expr.func.value, params):
            return True  # ``x.abs()``
        return any(_from_inputs(a, params) for a in expr.args)
    return False


# Calls that turn host data (NumPy arrays, Python lists) into a CPU tensor.
_HOST_DATA = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.Tensor",
                        *(f"torch.{kind}Tensor" for kind in ("Float", "Double", "Half", "Long", "Int", "Short",
                                                            "Char", "Byte", "Bool"))})


def _last_assignment(function: ast.AST, nodes: list[ast.AST], ret: ast.Return) -> ast.AST | None:
    """``x = np.stack(...); x = torch.from_numpy(x).float(); return x``: the value the returned
    name holds, when plain assignments at the function's top level are all that bind it."""
    name = ret.value.id  # type: ignore[union-attr]
    body = getattr(function, "body", [])
    binders = [n for n in nodes if isinstance(getattr(n, "ctx", None), ast.Store)
               and isinstance(n, ast.Name) and n.id == name]
    top = [stmt for stmt in body if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
           and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name]
    if len(top) != len(binders) or not top or ret not in body or top[-1].lineno > ret.lineno:
        return None
    return top[-1].value


def _callee(call: ast.Call) -> str:
    """``Net`` / ``nn.Sequential``; for ``Net(...).to(d)`` / ``.eval()`` the constructor."""
    func = call.func
    while isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) \
            and func.attr in ("to", "eval", "train", "float", "double", "half", "cuda", "cpu"):
        func = func.value.func
    return _dotted(func)


class ProjectIndex:
    """The whole run's files, read once; ``role_for(path)`` is what one file's rewrite needs."""

    def __init__(self, summaries: Iterable[_Summary]) -> None:
        self.files = {os.path.abspath(s.path): s for s in summaries}
        self._by_name: dict[str, list[_Summary]] = {}
        for summary in self.files.values():
            for name in summary.names:
                self._by_name.setdefault(name, []).append(summary)
        self._importers: dict[str, set[str]] = {}  # a file -> the project files that import it
        for s in self.files.values():
            for m in s.imports:
                for target in self._resolve(m):
                    if target.path != s.path:
                        self._importers.setdefault(target.path, set()).add(s.path)
        self.imported = set(self._importers)
        self._gpu_only = self._gpu_only_files()
        self.model_classes, self.model_factories = self._models()
        self.driver, self._callers = self._driver_functions()
        # Every project function that returns lists, by its own name too: a package may be imported
        # under another name than its folder's (facenet's ``package_dir={'facenet_pytorch': '.'}``).
        self._all_collators = frozenset(name for s in self.files.values() for name in s.list_collators)

    @classmethod
    def build(cls, sources: Iterable[tuple[str, str]]) -> "ProjectIndex":
        return cls(s for path, text in sources if (s := summarise(path, text)) is not None)

    @classmethod
    def from_paths(cls, paths: Iterable[str],
                   summary_of: Callable[[str], _Summary | None] | None = None) -> "ProjectIndex":
        """Read the files from disk; unreadable ones are simply not in the index. ``summary_of``
        may answer from a cache instead (``read_summary``'s answer for an unchanged file)."""
        read = summary_of or read_summary
        return cls(s for path in paths if (s := read(path)) is not None)

    @classmethod
    def around(cls, paths: Iterable[str], limit: int = 2000,
               summary_of: Callable[[str], _Summary | None] | None = None) -> "ProjectIndex":
        """The files to rewrite plus the rest of their project (up to ``limit`` more files), so
        that ``devmod apply train.py`` still sees that ``models/`` builds modules and that
        ``models/resnet.py`` is imported by others. The project is the nearest folder above
        with ``.git``, ``pyproject.toml``, ``setup.py`` or ``setup.cfg``, else the file's folder."""
        return cls.from_paths(files_around(paths, limit), summary_of)

    def _gpu_only_files(self) -> set[str]:
        """Files imported only by files that stop without CUDA, or by files in this set (a fixed point)."""
        found: set[str] = set()
        changed = True
        while changed:
            changed = False
            for path, users in self._importers.items():
                if path not in found and users and all(
                        self.files[u].requires_gpu or u in found for u in users):
                    found.add(path)
                    changed = True
        return found

    def role_for(self, path: str) -> FileRole:
        summary = self.files.get(os.path.abspath(path))
        if summary is None:
            return FileRole()
        visible = self._visible(summary)
        models = {name for name, (file, original) in visible.items()
                  if (file, original) in self.model_classes or (file, original) in self.model_factories}
        for local, module in summary.module_aliases.items():  # ``net.Net(vgg, decoder)`` of ``import net``
            models |= {f"{local}.{name}" for owner, name in self._exported(module)
                       if (owner.path, name) in self.model_classes}
        helpers = {name for name, (file, original) in visible.items()
                   if file in self.files and original in self.files[file].tensor_helpers}
        host_methods = {method for name, (file, original) in visible.items()
                        if file != summary.path and file in self.files
                        for method in self.files[file].host_methods.get(original, ())}
        cpu_resident = {name for name, (file, original) in visible.items()
                        if file in self.files and original in self.files[file].cpu_resident}
        loops = {name for name, (file, original) in visible.items()  # the file's own loops are seen there
                 if file != summary.path and file in self.files and original in self.files[file].loop_functions}
        for local, module in summary.module_aliases.items():  # ``d2l.train_ch3``, also re-exported by a package
            loops |= {f"{local}.{name}" for owner, name in self._exported(module) if name in owner.loop_functions}
        # ``hubconf.py`` is imported by ``torch.hub.load`` from outside the project: library code.
        # So is a module of a package that runs nothing itself (no main block, no top-level work):
        # it is imported by name (diffusers' lazy ``_import_structure``, entry points, plugins).
        in_package = os.path.basename(summary.path) != "__init__.py" \
            and os.path.exists(os.path.join(os.path.dirname(summary.path), "__init__.py"))
        imported = summary.path in self.imported or os.path.basename(summary.path) == "hubconf.py" or (
            not summary.has_main and not summary.does_work and in_package)
        setters = {name for name, (file, original) in visible.items()
                   if file in self.files and original in self.files[file].cuda_device_setters}
        for local, module in summary.module_aliases.items():  # ``utils.init_distributed_mode(args)``
            setters |= {f"{local}.{name}" for owner, name in self._exported(module) if name in owner.cuda_device_setters}
        sets_cuda_device = summary.sets_cuda_device or any(
            name in setters for names in summary.references.values() for name in names)
        collators = {name for name, (file, original) in visible.items()
                     if file in self.files and original in self.files[file].list_collators}
        self_placing = {name for name, (file, original) in visible.items()
                        if file in self.files and original in self.files[file].self_placing}
        collators |= self._all_collators
        plain = {name for name, (file, original) in visible.items() if file in self.files
                 and original in self.files[file].class_bases and (file, original) not in self.model_classes}
        own_cuda = {local for local, key in self._classes_through_reexports(summary).items()
                    if key not in self.model_classes and self._defines_cuda(*key)}
        for local, module in summary.module_aliases.items():  # ``training.collate_pil``
            collators |= {f"{local}.{name}" for owner, name in self._exported(module) if name in owner.list_collators}
            self_placing |= {f"{local}.{name}" for owner, name in self._exported(module) if name in owner.self_placing}
        return FileRole(gpu_only_program=summary.path in self._gpu_only,
                        imported=imported, training_loops=frozenset(loops), cpu_resident=frozenset(cpu_resident),
                        sets_cuda_device=sets_cuda_device,
                        cuda_device_setters=frozenset(setters | {"torch.cuda.set_device", "cuda.set_device"}),
                        driver_functions=frozenset(f for f in summary.functions if (summary.path, f) in self.driver),
                        model_names=frozenset(models), tensor_helpers=frozenset(helpers),
                        main_only=frozenset(self._main_only(summary)),
                        list_collators=frozenset(collators), self_placing=frozenset(self_placing),
                        plain_classes=frozenset(plain), cuda_method_classes=frozenset(own_cuda),
                        star_names=frozenset(self._star_variables(summary)),
                        host_methods=frozenset(self._host_methods_seen_in(summary, host_methods)),
                        unplaceable_methods=frozenset(self._unplaceable_seen_in(summary, visible)),
                        param_movers=frozenset((name, index, param) for name, (file, original) in visible.items()
                                               if file in self.files
                                               for index, param in self.files[file].param_movers.get(original, ())),
                        in_package=in_package)

    def _unplaceable_seen_in(self, summary: _Summary,
                             visible: dict[str, tuple[str, str]]) -> Iterable[tuple[str, str, str]]:
        """``FileRole.unplaceable_methods``: of the model classes this file imports by name."""
        for name, (file, original) in visible.items():
            other = self.files.get(file)
            if file == summary.path or other is None or (file, original) not in self.model_classes:
                continue
            where = os.path.relpath(file, os.path.dirname(summary.path))
            for method, line in other.unplaceable.get(original, {}).items():
                yield name, method, f"{where}:{line}"

    def _host_methods_seen_in(self, summary: _Summary, imported: set[str]) -> set[str]:
        """The methods that return new CPU tensors, for a file: those of the classes it imports, and
        of its own plain classes (``DatasetMoons().sample(n)`` returning ``torch.from_numpy(...)``).
        Not the names of its own models' methods: devmod places their tensors where they are made."""
        def of(models: bool) -> set[str]:
            return {method for name, methods in summary.host_methods.items()
                    if ((summary.path, name) in self.model_classes) == models for method in methods}
        return (imported | of(False)) - of(True)

    def _classes_through_reexports(self, summary: _Summary) -> dict[str, tuple[str, str]]:
        """Local name -> (defining file, name there) for the project classes a file imports by
        name, also through a package's ``from .loss import Perplexity`` (one level), and its own."""
        found = {name: (summary.path, name) for name in summary.class_bases}
        for local, (module, name) in summary.from_names.items():
            for target in self._resolve(module):
                if name in target.class_bases:
                    found[local] = (target.path, name)
                elif name in target.from_names:
                    inner, original = target.from_names[name]
                    found.update((local, (deeper.path, original)) for deeper in self._resolve(inner)
                                 if original in deeper.class_bases)
        return found

    def _defines_cuda(self, path: str, name: str, depth: int = 0) -> bool:
        """Does class ``name`` of ``path`` define ``cuda()``, itself or through a project base?"""
        summary = self.files.get(path)
        if summary is None or name not in summary.class_bases or depth > 20:
            return False
        if name in summary.cuda_methods:
            return True
        seen = self._visible(summary)
        return any(self._defines_cuda(*seen[base], depth + 1) for base in summary.class_bases[name] if base in seen)

    # -- name resolution -----------------------------------------------------------------------
    def _resolve(self, module: str) -> list[_Summary]:
        return self._by_name.get(module, [])

    def _visible(self, summary: _Summary) -> dict[str, tuple[str, str]]:
        """Local name -> (defining file, name there) for definitions and project imports."""
        visible: dict[str, tuple[str, str]] = {}
        for module in summary.star_modules:
            for owner, name in self._exported(module):
                if not name.startswith("_"):
                    visible.setdefault(name, (owner.path, name))
        for local, (module, name) in summary.from_names.items():
            for owner, defined in self._exported(module):
                if defined == name:
                    visible[local] = (owner.path, name)
        for name in (*summary.functions, *summary.class_bases):
            visible[name] = (summary.path, name)
        # Definitions named through a module: ``import models.blocks as blocks`` (``blocks.Block``), and
        # ``import models.shared_base`` then ``class RNN(models.shared_base.SharedModel)`` (ENAS)
        dotted_modules = dict(summary.module_aliases)  # (``import flowlib``: ``flowlib.Flow`` too)
        dotted_modules.update({module: module for module in summary.imports
                               if "." in module and summary.module_aliases.get(module.split(".")[0]) == module.split(".")[0]})
        for local, module in dotted_modules.items():
            for owner, name in self._exported(module):
                visible.setdefault(f"{local}.{name}", (owner.path, name))
        return visible

    def _star_variables(self, summary: _Summary, seen: set[str] | None = None) -> set[str]:
        """The variables ``from x import *`` of project files binds here, through star
        re-exports at any depth (``from data import *`` where data says ``from conf import *``)."""
        seen = set() if seen is None else seen
        found: set[str] = set()
        for module in summary.star_modules:
            for target in self._resolve(module):
                if target.path in seen:
                    continue
                seen.add(target.path)
                names = target.variables | self._star_variables(target, seen)
                names = {n for n in names if not n.startswith("_")}
                found |= names & set(target.exports) if target.exports is not None else names
        return found

    def _exported(self, module: str) -> Iterable[tuple[_Summary, str]]:
        """What ``module`` defines, then what it re-exports one level down (``from .blocks import *``
        or ``from pkg.density import Density`` in a package's ``__init__``)."""
        for target in self._resolve(module):
            for name in (*target.functions, *target.class_bases):
                yield target, name
            for inner in target.star_modules:
                for deeper in self._resolve(inner):
                    for name in (*deeper.functions, *deeper.class_bases):
                        yield deeper, name
            for local, (inner, name) in target.from_names.items():
                if local == name:  # (a renamed re-export would need its new name carried along)
                    for deeper in self._resolve(inner):
                        if deeper is not target and (name in deeper.functions or name in deeper.class_bases):
                            yield deeper, name

    # -- models ----------------------------------------------------------------------------------
    def _models(self) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
        visible = {path: self._visible(s) for path, s in self.files.items()}
        classes: set[tuple[str, str]] = set()
        factories: set[tuple[str, str]] = set()
        changed = True
        while changed:
            changed = False
            for path, summary in self.files.items():
                seen = visible[path]
                known = {local for local, key in seen.items() if key in classes or key in factories}
                for name, bases in summary.class_bases.items():
                    key = (summary.path, name)
                    if key not in classes and (bases & _NN_MODULE or bases & known):
                        classes.add(key)
                        changed = True
                for name, returns in summary.returns.items():
                    key = (summary.path, name)
                    if key not in factories and _makes_a_module(returns, known):
                        factories.add(key)
                        changed = True
        return classes, factories

    # -- driver code -------------------------------------------------------------------------------
    def _main_only(self, summary: _Summary) -> set[str]:
        """This file's driver functions that only its own main block reaches (also through
        each other): a device defined at the top of that block is bound when they run."""
        found = {f for f in summary.functions if (summary.path, f) in self.driver}
        changed = True
        while changed:
            changed = False
            for function in list(found):
                sites = self._callers.get((summary.path, function), set()) - {(summary.path, function)}
                if not all(path == summary.path and (name == _MAIN or name in found) for path, name in sites):
                    found.discard(function)
                    changed = True
        return found

    def _driver_functions(self) -> tuple[set[tuple[str, str]], dict]:
        """Functions reached from driver code and from nothing else. Start from everything
        reachable, then drop any function loaded elsewhere (or only reached through a
        dropped one) until nothing changes: the set only shrinks, so this ends."""
        callers: dict[tuple[str, str], set[tuple[str, str]]] = {}  # function -> contexts loading it
        for summary in self.files.values():
            visible = self._visible(summary)
            for context, names in summary.references.items():
                for name in names:
                    target = visible.get(name)
                    if target is not None and target[1] in self.files[target[0]].functions:
                        callers.setdefault(target, set()).add((summary.path, context))

        def is_root(context: tuple[str, str]) -> bool:
            path, name = context
            return name == _MAIN or (name == _TOP and path not in self.imported)

        driver = set(callers)
        changed = True
        while changed:
            changed = False
            for function in list(driver):
                sites = callers[function] - {function}
                reached = any(is_root(c) or c in driver for c in sites)
                pure = all(is_root(c) or c in driver for c in sites)
                if not (reached and pure):
                    driver.discard(function)
                    changed = True
        return driver, callers


def files_around(paths: Iterable[str], limit: int = 2000) -> list[str]:
    """The files ``ProjectIndex.around`` reads (absolute): ``paths``, then the rest of their
    project (nothing more when that is over ``limit`` files or cannot be listed)."""
    from ..discovery import iter_python_files  # discovery does not need the analysis
    paths = [os.path.abspath(p) for p in paths]
    given = set(paths)
    extra: list[str] = []
    try:
        marked_folders: dict[str, bool] = {}  # sibling folders share their parents' checks
        roots = {project_root(folder, marked=marked_folders) for folder in {os.path.dirname(p) for p in paths}}
        for root, marked in sorted(roots):
            # Without a project marker only the file's own folder is its project (never all of /tmp).
            found = iter_python_files([root]) if marked else (
                os.path.join(root, n) for n in sorted(os.listdir(root)) if n.endswith(".py"))
            for path in found:
                path = os.path.abspath(path)
                if path not in given and os.path.isfile(path):
                    extra.append(path)
                if len(extra) > limit:
                    return paths  # a huge tree: the given files decide alone
    except OSError:  # an unreadable folder or a symlink loop: the given files decide alone
        return paths
    return [*paths, *extra]


_ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


def project_root(folder: str, max_up: int = 6, marked: dict[str, bool] | None = None) -> tuple[str, bool]:
    """The nearest folder at or above ``folder`` that marks a project, and True; else
    ``(folder, False)``. ``marked``: what earlier calls found, folder by folder."""
    marked = {} if marked is None else marked
    current = os.path.abspath(folder)
    for _ in range(max_up):
        if current not in marked:
            marked[current] = any(os.path.exists(os.path.join(current, m)) for m in _ROOT_MARKERS)
        if marked[current]:
            return current, True
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return os.path.abspath(folder), False


def _builds_module(callee: str) -> bool:
    """``nn.Linear``, ``torch.nn.Sequential``: a torch.nn class that is a module."""
    parts = callee.split(".")
    return (len(parts) >= 2 and parts[-2] == "nn" and parts[-1][:1].isupper()
            and parts[-1] not in _NOT_MODULE_BUILDERS and not parts[-1].endswith("Loss"))
