"""What kind of code a node sits in: model code, data code, training code or module level.

The answer decides which device a rule may use: the shared variable in training
code, the input's device inside an ``nn.Module``, and none at all in a Dataset or
collate function (CUDA in forked DataLoader workers fails; pinning needs CPU tensors).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Mapping, TypeVar

import libcst as cst
from libcst.metadata import Assignment, ParentNodeProvider, ScopeProvider

from .bases import NN_MODULE_BASES
from .tree import nodes_of
from .names import dotted, keyword, qualified_names

DATASET_BASES = frozenset({
    "torch.utils.data.Dataset", "torch.utils.data.IterableDataset",
    "torch.utils.data.dataset.Dataset", "torch.utils.data.dataset.IterableDataset",
})
# Keywords whose function argument runs inside DataLoader workers or data pipelines.
DATA_CALLBACK_KEYWORDS = frozenset({"collate_fn", "transform", "target_transform", "transforms",
                                    "worker_init_fn", "pre_transform"})
T = TypeVar("T")


class ScopeKind(enum.Enum):
    MODULE = "module"                # module level, outside any def
    FUNCTION = "function"            # a plain function: training, evaluation, helpers, main()
    MODEL_METHOD = "model-method"    # a method of an nn.Module subclass
    DATA_METHOD = "data-method"      # a method of a Dataset subclass
    DATA_CALLBACK = "data-callback"  # a collate function or transform
    OTHER_METHOD = "other-method"    # a method of some other class


@dataclass
class ClassFacts:
    """The classes of one file and what they derive from (transitively, within the file)."""

    model_classes: set[str] = field(default_factory=set)
    dataset_classes: set[str] = field(default_factory=set)
    data_callbacks: set[str] = field(default_factory=set)
    classes: dict[str, cst.ClassDef] = field(default_factory=dict)
    # Answers computed once per tree for every rule of a pass: {name: (module, answer)}.
    derived: dict[str, tuple] = field(default_factory=dict, repr=False, compare=False)

    def remembered(self, name: str, module: cst.Module, compute: Callable[[], T]) -> T:
        """``compute()`` for ``module``, once: the facts live as long as one tree's pass."""
        cached = self.derived.get(name)
        if cached is None or cached[0] is not module:
            cached = self.derived[name] = (module, compute())
        return cached[1]


def collect_class_facts(module: cst.Module, metadata: Mapping,
                        project_models: frozenset[str] = frozenset()) -> ClassFacts:
    """``project_models``: model classes and model-returning functions the project index
    sees from this file (``from models import ResNet18``); they build models here too."""
    facts = ClassFacts()
    bases: dict[str, set[str]] = {}
    for node in nodes_of(module, cst.ClassDef, cst.Call):
        if isinstance(node, cst.ClassDef):
            facts.classes[node.name.value] = node
            names: set[str] = set()
            for base in node.bases:
                names |= qualified_names(metadata, base.value) or {dotted(base.value) or ""}
            bases[node.name.value] = names
        elif isinstance(node, cst.Call):
            for kw in DATA_CALLBACK_KEYWORDS:
                arg = keyword(node, kw)
                if arg is not None and isinstance(arg.value, cst.Name):
                    facts.data_callbacks.add(arg.value.value)
    facts.model_classes = _derived(bases, NN_MODULE_BASES, project_models) | set(project_models)
    facts.dataset_classes = _derived(bases, DATASET_BASES)
    return facts


def _derived(bases: dict[str, set[str]], roots: frozenset[str], known: frozenset[str] = frozenset()) -> set[str]:
    """Classes deriving from ``roots``, also through other classes of the same file (or ``known`` ones)."""
    found: set[str] = set(known)
    changed = True
    while changed:
        changed = False
        for name, parents in bases.items():
            if name in found:
                continue
            if parents & roots or {p.rsplit(".", 1)[-1] for p in parents} & found:
                found.add(name)
                changed = True
    return found



@dataclass(frozen=True)
class Place:
    """Where a node is: the innermost function and the class owning it, if any."""

    kind: ScopeKind
    function: cst.FunctionDef | None = None
    klass: cst.ClassDef | None = None

    @property
    def method_name(self) -> str | None:
        return self.function.name.value if self.function else None


def enclosing_place(metadata: Mapping, node: cst.CSTNode, facts: ClassFacts) -> Place:
    """Classify the innermost ``def`` around ``node`` (lambdas count as their outer def)."""
    parents = metadata[ParentNodeProvider]
    function: cst.FunctionDef | None = None
    current: cst.CSTNode | None = node
    while current is not None:
        current = parents.get(current)
        if isinstance(current, cst.FunctionDef) and function is None:
            function = current
            # A nested def belongs to its outer function's kind (closures in forward, etc.).
            outer = enclosing_place(metadata, current, facts)
            if outer.kind is not ScopeKind.MODULE:
                return Place(outer.kind, function, outer.klass)
        elif isinstance(current, cst.ClassDef):
            if function is None:
                return Place(ScopeKind.MODULE)  # class body statements run at import time
            name = current.name.value
            if "collate" in name.lower():
                # ``class SimCLRCollateFunction(nn.Module)``: a module that runs as a DataLoader's
                # ``collate_fn`` in its workers, on the samples' list (lightly): data-loading code
                return Place(ScopeKind.DATA_CALLBACK, function, current)
            if name in facts.model_classes:
                return Place(ScopeKind.MODEL_METHOD, function, current)
            if name in facts.dataset_classes:
                return Place(ScopeKind.DATA_METHOD, function, current)
            return Place(ScopeKind.OTHER_METHOD, function, current)
    if function is None:
        return Place(ScopeKind.MODULE)
    if function.name.value in facts.data_callbacks:
        return Place(ScopeKind.DATA_CALLBACK, function)
    return Place(ScopeKind.FUNCTION, function)


def is_main_guard(node: cst.CSTNode) -> bool:
    """``if __name__ == "__main__":``"""
    if not isinstance(node, cst.If) or not isinstance(node.test, cst.Comparison):
        return False
    test = node.test
    values = [test.left] + [c.comparator for c in test.comparisons]
    return any(isinstance(v, cst.Name) and v.value == "__name__" for v in values) and any(
        isinstance(v, cst.SimpleString) and v.evaluated_value == "__main__" for v in values)


def scope_bindings(scope: object | None, name: str) -> list[Assignment]:
    """The bindings of ``name`` visible in ``scope`` that have a node. libcst also lists a
    builtin (``input``, ``len``) as a binding with no node: for the rules that is "don't know"."""
    if scope is None:
        return []
    return [b for b in scope[name] if isinstance(b, Assignment)]  # type: ignore[index]


def only_binding(metadata: Mapping, name: cst.Name) -> cst.CSTNode | None:
    """The node that binds ``name`` when it has exactly one binding (a def, an import target,
    an assignment target); None when it has none, several, or only a builtin."""
    bindings = scope_bindings(metadata[ScopeProvider].get(name), name.value)
    return bindings[0].node if len(bindings) == 1 else None


def only_assigned_value(metadata: Mapping, name: cst.Name) -> cst.BaseExpression | None:
    """``value`` when ``name``'s only binding is a plain ``name = value``."""
    return assigned_value(metadata, only_binding(metadata, name))


def assigned_value(metadata: Mapping, target: cst.CSTNode | None) -> cst.BaseExpression | None:
    """``value`` when ``target`` is the one target of a plain ``target = value``."""
    if not isinstance(target, cst.Name):
        return None
    parents = metadata[ParentNodeProvider]
    statement = parents.get(parents.get(target))
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        return statement.value
    return None
