"""Qualified names through imports and aliases (``import torch as th``, ``from torch import zeros``)."""

from __future__ import annotations

from typing import Iterable, Mapping

import libcst as cst
from libcst.metadata import QualifiedNameProvider, ScopeProvider

try:
    from libcst.metadata.base_provider import LazyValue
except ImportError:  # libcst < 1.2 stores plain sets
    class LazyValue:  # type: ignore[no-redef]
        pass


def qualified_names(metadata: Mapping, node: cst.CSTNode) -> set[str]:
    """All names ``node`` may refer to, e.g. ``{"torch.nn.Linear"}`` for ``nn.Linear``.

    Asked of the node's scope, as ``QualifiedNameProvider`` does for every node of the tree:
    the rules ask for a few nodes only, so the provider's whole-tree walk is not run."""
    if QualifiedNameProvider in metadata:  # a caller that resolved the provider itself
        names = metadata[QualifiedNameProvider].get(node, ())
        if isinstance(names, LazyValue):  # libcst >= 1.2 resolves qualified names lazily
            names = names()
        return {qn.name for qn in names}
    global _ASKED
    scopes = metadata.get(ScopeProvider, {})
    asked = _ASKED
    if asked is None or asked[0] is not scopes:  # a new tree's scopes: the answers kept are for the old one
        asked = _ASKED = (scopes, {})
    found = asked[1].get(node)
    if found is None:  # every rule asks of the same nodes (``torch.zeros``, ``nn.Linear``)
        scope = scopes.get(node)
        found = asked[1][node] = frozenset(qn.name for qn in scope.get_qualified_names_for(node)) if scope \
            else frozenset()
    return set(found)


# (the scopes of one tree, {node: its qualified names}): answers kept while that tree is analysed
_ASKED: tuple[Mapping, dict[cst.CSTNode, frozenset[str]]] | None = None


def forget_answers() -> None:
    """Drop the kept answers (and with them the tree they are for): the file is done."""
    global _ASKED
    _ASKED = None


def callee_names(metadata: Mapping, call: cst.Call) -> set[str]:
    return qualified_names(metadata, call.func)


def refers_to(metadata: Mapping, node: cst.CSTNode, *names: str) -> bool:
    return bool(qualified_names(metadata, node) & set(names))


def last_part(names: set[str]) -> set[str]:
    return {n.rsplit(".", 1)[-1] for n in names}


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None (syntax only, no imports)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def method_call(node: cst.CSTNode, *methods: str) -> bool:
    """``<anything>.method(...)`` for one of ``methods``."""
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in methods)


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def torch_module_alias(module: cst.Module) -> str | None:
    """The name ``import torch`` binds at module level (``torch``, ``th``), if any."""
    for stmt in _top_level_statements(module.body):
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if dotted(alias.name) == "torch":
                        return alias.asname.name.value if alias.asname else "torch"  # type: ignore[union-attr]
                    if alias.asname is None and (dotted(alias.name) or "").startswith("torch."):
                        return "torch"  # `import torch.nn` binds `torch` too
    return None


def _top_level_statements(body: Iterable[cst.BaseStatement]) -> Iterable[cst.BaseStatement]:
    """Module-level statements, looking into if/try blocks (guarded imports) but not defs."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (cst.If, cst.Try)):
            yield from _top_level_statements(stmt.body.body)
            if isinstance(stmt, cst.Try):
                for handler in stmt.handlers:
                    yield from _top_level_statements(handler.body.body)


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value`` written the PEP 8 way (libcst's default puts spaces around ``=``)."""
    return cst.Arg(value, keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))


def argument_for(call: cst.Call, index: int, name: str) -> cst.BaseExpression | None:
    """What ``call`` passes for the parameter at ``index`` called ``name`` (None with ``*args``
    or ``**kwargs`` in the call, or when it passes nothing there)."""
    if any(a.star for a in call.args):
        return None
    named = [a for a in call.args if a.keyword is not None and a.keyword.value == name]
    if named:
        return named[0].value
    positional_args = [a for a in call.args if a.keyword is None]
    return positional_args[index].value if index < len(positional_args) else None
