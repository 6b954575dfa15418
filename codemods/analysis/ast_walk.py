"""A cheaper ``ast.walk`` for the project index and the per-file pre-checks (no libcst here:
the warm path imports this without it)."""

from __future__ import annotations

import ast

# Fields of ``ast`` nodes that never hold a node worth visiting: plain values, and ``ctx``
# (``Load``/``Store``), which every name carries and which no analysis looks at as a node.
_AST_LEAF_FIELDS = frozenset({"ctx", "id", "attr", "arg", "name", "module", "level", "asname", "kind",
                              "type_comment", "conversion", "is_async", "simple", "tag"})
_AST_FIELDS: dict[type, tuple[str, ...]] = {}


def ast_children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` without the ``ctx`` nodes, as a list."""
    found: list[ast.AST] = []
    add_ast_children(node, found)
    return found


def ast_nodes(root: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(root))`` in the same (breadth-first) order, without the ``ctx`` nodes
    (about 3x cheaper: no generators, and a third fewer nodes)."""
    found = [root]
    for node in found:  # the list grows while it is read: breadth first, like ``ast.walk``
        add_ast_children(node, found)
    return found


def add_ast_children(node: ast.AST, found: list[ast.AST]) -> None:
    names = _AST_FIELDS.get(node.__class__)
    if names is None:
        names = _AST_FIELDS[node.__class__] = tuple(f for f in node._fields if f not in _AST_LEAF_FIELDS)
    for name in names:
        value = getattr(node, name, None)
        if value.__class__ is list:
            for item in value:
                if isinstance(item, ast.AST):
                    found.append(item)
        elif isinstance(value, ast.AST):
            found.append(value)


def ast_dotted(node: ast.AST) -> str:
    """``torch.nn.Linear`` for that attribute chain; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = ast_dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""
