"""One traversal for all the rules of a pass, over the original tree, for passes that fix nothing.

libcst's transformer traversal builds a new copy of every node it passes, changed or not, and
the engine ran one such traversal per rule. Most passes fix nothing (every file that needs no
fix, and the last, settling pass of every file that did), so their rebuilt trees were thrown
away. ``scan`` drives every rule's ``visit_*``/``leave_*`` callbacks in one walk over the
original nodes, in the order libcst's own traversal calls them for each rule (each node is its
own "updated" node), and builds nothing. The moment a rule asks for a change (records a fix,
or returns another node from ``leave_*``), the scan gives up: the engine then discards what the
scan did and runs the pass the old way, one libcst traversal per rule, so every rewrite is still
made by libcst exactly as before. The metadata resolved for the scan is kept for that run;
positions are resolved only if a rule reads one.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .analysis.tree import children_of
from .rules.base import Rule, RunState


class _GiveUp(Exception):
    """A rule asked for a change."""


def scan(wrapper: MetadataWrapper, rules: Sequence[Rule], state: RunState) -> bool:
    """Run ``rules`` over ``wrapper.module``; True when none of them changed anything.

    The findings the rules record are added to ``state.findings`` grouped by rule, in the order
    of ``rules``, as consecutive libcst traversals would leave them. On False, ``state`` is as
    it was before the call, and the caller reruns the rules with libcst's traversal.
    """
    handlers = [_Handlers.of(rule) for rule in rules]
    if any(h is None for h in handlers):
        return False
    order = {rule.CODE: index for index, rule in enumerate(rules)}
    start, device_used = len(state.findings), state.device_used
    positions = _OnFirstUse(wrapper, PositionProvider)
    try:
        for rule in rules:
            needed = rule.get_inherited_dependencies()
            rule.metadata = dict(wrapper.resolve_many([p for p in needed if p is not PositionProvider]))
            if PositionProvider in needed:
                rule.metadata[PositionProvider] = positions
        _walk(wrapper.module, list(handlers), state)  # type: ignore[arg-type]
    except Exception:  # a change asked for, or a rule bug (the libcst traversal reports it as before)
        del state.findings[start:]  # what the scan did is undone: the caller reruns these rules
        state.changed, state.device_used = False, device_used
        return False
    state.findings[start:] = sorted(state.findings[start:], key=lambda finding: order.get(finding.code, len(order)))
    return True


class _OnFirstUse(Mapping):
    """A provider's metadata, resolved the first time a rule reads it: positions cost a codegen
    of the whole module and most files that need no fix never ask for one."""

    def __init__(self, wrapper: MetadataWrapper, provider: type) -> None:
        self._wrapper, self._provider = wrapper, provider
        self._resolved: Mapping | None = None

    def _mapping(self) -> Mapping:
        if self._resolved is None:
            self._resolved = self._wrapper.resolve(self._provider)
        return self._resolved

    def __getitem__(self, node):  # type: ignore[no-untyped-def]
        return self._mapping()[node]

    def get(self, node, default=None):  # type: ignore[no-untyped-def]
        return self._mapping().get(node, default)

    def __contains__(self, node) -> bool:  # type: ignore[no-untyped-def]
        return node in self._mapping()

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())


class _Handlers:
    """One rule instance with its ``visit_<Node>``/``leave_<Node>`` methods looked up once."""

    __slots__ = ("rule", "visits", "leaves", "on_leave")
    _CACHE: dict[type, tuple[frozenset[str], frozenset[str], bool] | None] = {}

    def __init__(self, rule: Rule, visits: frozenset[str], leaves: frozenset[str], on_leave: bool) -> None:
        self.rule, self.visits, self.leaves, self.on_leave = rule, visits, leaves, on_leave

    @classmethod
    def of(cls, rule: Rule) -> "_Handlers | None":
        """None when the rule dispatches in a way the scan does not mirror."""
        kind = type(rule)
        if kind not in cls._CACHE:
            cls._CACHE[kind] = cls._names(kind)
        names = cls._CACHE[kind]
        return None if names is None else cls(rule, *names)

    @staticmethod
    def _names(kind: type) -> tuple[frozenset[str], frozenset[str], bool] | None:
        """The rule's own visit/leave names, and whether it overrides ``on_leave`` (then that is
        called on every node, as libcst does, and it calls ``leave_<Node>`` through ``super()``)."""
        if (kind.on_visit is not cst.CSTTransformer.on_visit
                or kind.on_visit_attribute is not cst.CSTTransformer.on_visit_attribute
                or kind.on_leave_attribute is not cst.CSTTransformer.on_leave_attribute):
            return None
        visits, leaves = set(), set()
        for attribute in dir(kind):
            prefix, _, node = attribute.partition("_")
            if prefix not in ("visit", "leave") or not node[:1].isupper():
                continue
            if getattr(kind, attribute) is getattr(cst.CSTTransformer, attribute, None):
                continue  # libcst's own do-nothing stub
            if "_" in node:  # visit_<Node>_<field>: attribute hooks are not mirrored
                return None
            (visits if prefix == "visit" else leaves).add(node)
        return frozenset(visits), frozenset(leaves), kind.on_leave is not cst.CSTTransformer.on_leave


def _walk(node: cst.CSTNode, active: list[_Handlers], state: RunState) -> None:
    name = type(node).__name__
    entered = [h for h in active if name not in h.visits or getattr(h.rule, "visit_" + name)(node) is not False]
    if entered:
        for child in children_of(node):  # the fields libcst visits, in its order
            _walk(child, entered, state)
    for handler in active:
        if handler.on_leave:
            if handler.rule.on_leave(node, node) is not node:
                raise _GiveUp
        elif name in handler.leaves:
            if getattr(handler.rule, "leave_" + name)(node, node) is not node:
                raise _GiveUp
        if state.changed:
            raise _GiveUp
