"""What every rule is: a libcst codemod command with a code, a docstring and tested examples.

A rule never decides on its own whether a line is suppressed, whether an unsafe fix
may be applied, or which device to use: it asks this base class (``fix``, ``report``,
``device_for``), which asks the engine's shared state. That keeps suppression,
safety and device lookup in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar, Literal

import libcst as cst
from libcst.codemod import Codemod, CodemodContext, VisitorBasedCodemodCommand
from libcst.metadata import ParentNodeProvider, PositionProvider, ScopeProvider

from ..analysis.guards import gpu_only
from ..analysis.devices import DEVICE_LIKE_NAMES, DeviceLookup, chosen_conditionally, defined_from_line, module_device_definitions, \
    runs_per_rank, shared_device_name, user_chosen_device
from ..analysis.candidates import FileFacts
from ..analysis.device_anchor import DevicePlaces, device_unreachable, device_uses
from ..analysis.groups import Group, model_groups
from ..analysis.names import torch_module_alias
from ..analysis.project import FileRole
from ..analysis.tensors import assigned_name, bound_before, uses_of_binding
from ..analysis.tree import line_of, mentions_name
from ..analysis.scopes import collect_class_facts
from ..config import Config
from ..findings import Finding, Safety
from ..positions import OriginMap
from ..suppression import Suppressions

# Asked before each fix is applied: (code, line, column, message) -> apply it? Used by
# `devmod apply --interactive`; the engine passes positions in the original source.
Allow = Callable[[str, int, int, str], bool]
STATE_KEY = "devmod"


@dataclass(frozen=True)
class Valid:
    """Code the rule must leave byte-identical."""

    code: str


@dataclass(frozen=True)
class Invalid:
    """Code the rule changes into ``expected`` (None: report-only, the code stays as is)."""

    code: str
    expected: str | None = None


@dataclass
class RunState:
    """Engine state shared by the rules of one file during one pass."""

    config: Config = field(default_factory=Config)
    suppressions: Suppressions = field(default_factory=Suppressions)
    findings: list[Finding] = field(default_factory=list)
    changed: bool = False
    device_used: bool = False  # a fix referenced the shared device variable
    analysed: tuple | None = None  # (module, facts...) cached while the tree is unchanged
    groups: tuple | None = None  # (module, model groups) cached while the tree is unchanged
    role: FileRole = field(default_factory=FileRole)  # what the project index says of this file
    source: str = ""  # the text of ``source_module``, the tree the pass started from
    source_module: cst.Module | None = None
    original: str = ""  # the file's text before the first pass (what the user wrote)
    allow: Allow | None = None  # None: every fix the configuration enables is applied
    cpu_scopes: tuple | None = None  # (module, {id(scope): CPU tensor makers}, {id(scope): any left there})
    origins: tuple | None = None  # (current text, OriginMap to ``original``) for ``written_by_user``
    device_places: tuple | None = None  # (module, DevicePlaces, index of the first statement reading the device)


class Rule(VisitorBasedCodemodCommand):
    """Base class. Subclasses set the ClassVars below and write a docstring for `devmod rules`."""

    CODE: ClassVar[str]
    NAME: ClassVar[str]
    SUMMARY: ClassVar[str]
    SAFETY: ClassVar[Safety] = "safe"
    ERROR: ClassVar[str] = ""  # the PyTorch error this rule prevents, for the catalogue
    TRIGGERS: ClassVar[tuple[str, ...]] = ()  # the rule runs only on source containing one of these
    ORDER: ClassVar[int] = 50  # lower runs earlier within a pass
    # The rule swaps a CUDA placement the author wrote for the shared device (see DeviceLookup).
    REPLACES_CUDA: ClassVar[bool] = False
    # DM101: its fixes are the definition of the shared device, not uses that need one.
    DEFINES_DEVICE: ClassVar[bool] = False
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    # Declared once for every rule: libcst caches inherited dependencies per class.
    # Qualified names are asked of the scopes, node by node (``analysis.names.qualified_names``).
    METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider, ParentNodeProvider)

    def __init__(self, context: CodemodContext | None = None) -> None:
        context = context or CodemodContext()
        # libcst's matcher-decorator dispatch costs more than the rules themselves and no rule
        # uses matcher decorators: initialise the plain transformer and use its dispatch.
        Codemod.__init__(self, context)
        cst.CSTTransformer.__init__(self)
        self.DESCRIPTION = f"{self.CODE} {self.SUMMARY}"
        self.state: RunState = context.scratch.setdefault(STATE_KEY, RunState())

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        """False only when this rule certainly records no fix and no finding in the file, judged
        from its ``ast`` tree before libcst parses it (see analysis/candidates.py). A rule that
        does not say stays a candidate for every file."""
        return True

    @classmethod
    def documentation(cls) -> str:
        """The rule's explanation: its class docstring, else its module's (one rule per file)."""
        import inspect
        import sys
        return inspect.cleandoc(cls.__doc__ or sys.modules[cls.__module__].__doc__ or "")

    on_visit = cst.CSTTransformer.on_visit
    on_leave = cst.CSTTransformer.on_leave
    on_visit_attribute = cst.CSTTransformer.on_visit_attribute
    on_leave_attribute = cst.CSTTransformer.on_leave_attribute

    # -- analysis available to every rule --------------------------------------------------
    def visit_Module(self, node: cst.Module) -> bool:
        self.tree = node
        cached = self.state.analysed
        if cached is None or cached[0] is not node:
            facts = collect_class_facts(node, self.metadata, self.state.role.model_names)
            definitions = module_device_definitions(node, self.metadata)
            shared = shared_device_name(definitions, self.state.config.device_name)
            text = self.state.source if node is self.state.source_module else None
            placement = (chosen_conditionally(definitions, node, shared), runs_per_rank(node, text),
                         defined_from_line(definitions, node, shared, self.metadata),
                         user_chosen_device(node, text))
            cached = (node, facts, definitions, torch_module_alias(node) or "torch", shared, placement)
            self.state.analysed = cached
        _, self.facts, self.device_definitions, self.torch_alias, self.shared_name, placement = cached
        *placement, user_device = placement
        self.devices = DeviceLookup(self.metadata, self.facts, self.shared_name, *placement,
                                    role=self.state.role, module=node, user_device=user_device)
        return True

    def model_groups(self) -> dict[cst.Assign, Group]:
        """Each model of the file with the held-out data it meets (shared by DM201/202/203)."""
        cached = self.state.groups
        if cached is None or cached[0] is not self.tree:
            groups = model_groups(self.metadata, self.tree, self.facts, self.state.role.tensor_helpers,
                                  numpy_fixed=self.state.config.enabled("DM303"),
                                  placeable=lambda node: self.devices.expression_for(node) is not None,
                                  device_names=frozenset({*DEVICE_LIKE_NAMES, self.shared_name}),
                                  loops=self.state.role.training_loops, cpu_resident=self.state.role.cpu_resident,
                                  self_placing=self.state.role.self_placing,
                                  list_collators=self.state.role.list_collators,
                                  host_methods=self.state.role.host_methods,
                                  unplaceable_methods=self.state.role.unplaceable_methods,
                                  param_movers=self.state.role.param_movers,
                                  in_library=self.devices.in_library_code)
            cached = self.state.groups = (self.tree, groups)
        return cached[1]

    def module_text(self, module: cst.Module) -> str:
        """``module.code`` without a whole-module codegen when the engine already holds the text."""
        if module is self.state.source_module:
            return self.state.source
        return module.code

    def device_for(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The device expression for ``node`` (an original node), or None where none is safe."""
        return self.devices.expression_for(node, self.REPLACES_CUDA)

    def written_by_user(self, node: cst.CSTNode) -> bool:
        """Did the user write ``node``, word for word where it is, or did a fix of an earlier pass
        make it (``.cuda()`` that DM302 turned into ``.to(device)``)?"""
        current = self.module_text(self.tree)
        if not self.state.original or current == self.state.original:
            return True  # the first pass: everything is the user's
        cached = self.state.origins
        if cached is None or cached[0] != current:
            cached = self.state.origins = (current, OriginMap(self.state.original, current))
        line, column = self.position(node)
        where = cached[1].origin(line, column)
        if where is None:
            return False
        lines = self.state.original.splitlines(keepends=True)
        offset = sum(len(line) for line in lines[:where[0] - 1]) + where[1] - 1
        return self.state.original.startswith(self.tree.code_for_node(node), offset)

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        pos = self.get_metadata(PositionProvider, node, None)
        return (pos.start.line, pos.start.column + 1) if pos else (0, 0)

    # -- the only two ways a rule acts --------------------------------------------------------
    def fix(self, node: cst.CSTNode, updated: cst.CSTNode, replacement, message: str):
        """Return ``replacement`` if this fix may be applied at ``node``, else ``updated``.

        ``node`` is the original node (for its position and suppression comments).
        """
        line, column = self.position(node)
        if self.state.suppressions.suppresses(self.CODE, line):
            return updated
        if not self.DEFINES_DEVICE and self._mentions_shared_device(replacement) \
                and not mentions_name(node, self.shared_name) and not self._own_local_device(node):
            reason = self._device_unreachable(node)
            if reason is not None and self._used_before_the_users_device(node):
                return updated  # nothing is on the device yet where it is used: nothing to report
            if reason is not None and self.CODE in ("DM201", "DM202") and "cuda" not in self.state.source:
                # A file that names no GPU anywhere runs all on the CPU, on every machine: a placement
                # devmod cannot write is no fault to report (RepDistiller's demos import torch locally).
                return updated
            if reason is not None and self.REPLACES_CUDA and gpu_only(self.metadata, node):
                return updated  # ``if on_gpu: x = x.cuda()``: the author's own switch, correct as written
            if reason is not None:  # DM101 could not define it: the fix would be a NameError
                self._add(line, column, f"{message}; left as it is: `{self.shared_name}` cannot be defined "
                                        f"above this line ({reason})", fixed=False)
                return updated
        if self.SAFETY == "unsafe" and not self.state.config.unsafe_fixes:
            shown = replacement if isinstance(replacement, cst.CSTNode) else None
            code = self.tree.code_for_node(shown) if shown is not None else ""
            self._add(line, column, message, fixed=False, replacement=code)
            return updated
        if self.state.allow is not None and not self.state.allow(self.CODE, line, column, message):
            return updated  # declined (`apply -i`): like a suppression comment, for this run only
        self._add(line, column, message, fixed=True)
        self.state.changed = True
        if self._mentions_shared_device(replacement):
            self.state.device_used = True
        return replacement

    def report(self, node: cst.CSTNode, message: str) -> None:
        """A finding devmod cannot fix safely: shown to the user, makes --check fail."""
        line, column = self.position(node)
        if not self.state.suppressions.suppresses(self.CODE, line):
            self._add(line, column, message, fixed=False)

    def _add(self, line: int, column: int, message: str, fixed: bool, replacement: str | None = None) -> None:
        self.state.findings.append(Finding(self.CODE, self.NAME, line, column, message, fixed,
                                           self.SAFETY, replacement))

    def _own_local_device(self, node: cst.CSTNode) -> bool:
        """``device = torch.device(...)`` of the function around ``node``, bound above it: the fix
        uses that variable, which needs nothing from DM101 (a ``main`` that sets
        ``CUDA_VISIBLE_DEVICES`` first, where no module-level device can go)."""
        return self.devices.local_device(node) == self.shared_name \
            and bound_before(self.metadata, node, self.shared_name)

    def _used_before_the_users_device(self, node: cst.CSTNode) -> bool:
        """``X = torch.randn(1, 8)`` probing a CPU model above the file's own ``device = ...``:
        every use of the value comes before that line, where nothing is on the device yet."""
        lines = [line_of(self.metadata, d.statement) for d in self.device_definitions if d.name == self.shared_name]
        if not lines:
            return False
        name = assigned_name(self.metadata, node)
        uses = [node] if name is None else uses_of_binding(self.metadata, name)
        return all(line_of(self.metadata, use) < min(lines) for use in uses)

    def _device_unreachable(self, node: cst.CSTNode) -> str | None:
        """Why DM101 will not have the shared device bound where ``node`` runs (None: it will)."""
        cached = self.state.device_places
        if cached is None or cached[0] is not self.tree:
            places = DevicePlaces(self.tree, self.torch_alias, self.state.source or None)
            immediate, _ = device_uses(self.metadata, self.shared_name)
            first = min((i for i in map(places.index, immediate) if i is not None), default=None)
            cached = self.state.device_places = (self.tree, places, first)
        _, places, first = cached
        return device_unreachable(self.metadata, places, self.tree, node, self.shared_name,
                                  self.device_definitions, self.torch_alias, first, self.state.role.star_names)

    def _mentions_shared_device(self, replacement) -> bool:
        if isinstance(replacement, cst.RemovalSentinel):
            return False
        nodes = replacement.nodes if isinstance(replacement, cst.FlattenSentinel) else [replacement]
        if not all(isinstance(n, cst.CSTNode) for n in nodes):
            return True  # unknown shape: assume the device is needed rather than lose its definition
        return any(mentions_name(node, self.shared_name) for node in nodes)

    # -- libcst.tool compatibility: `python -m libcst.tool codemod <module>.<Rule> PATH` -------
    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        from ..engine import transform_module_with  # late import: the engine imports the rules
        return transform_module_with(tree, [type(self)], self.state.config)

