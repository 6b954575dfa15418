"""analysis.tree.walk reads child fields directly; it must give exactly libcst's children, in order.
analysis.ast_walk does the same for CPython's ``ast``: ``ast.walk``'s nodes and order, less ``ctx``."""

from __future__ import annotations

from pathlib import Path

import ast

import libcst as cst
import pytest

from codemods.analysis.ast_walk import ast_children, ast_nodes
from codemods.analysis.tree import walk
from codemods.codes import rule_codes
from codemods.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent

TRICKY = '''
@decorator(arg)
async def f(a, /, b: int = 1, *args, c, **kw) -> "T":
    async with open(x) as (y, z):
        yield from (await g() if a else lambda q=1: q)
    return f"{a!r:>{width}} {b=}"

from .pkg import (a as b, c)
from m import *
x: list[int] = [i for i in range(3) if i for j in k]
del x[1:2:3], y
match p:
    case {"k": [1, *rest]} | Point(x=0) as q if q:
        pass
try:
    pass
except* (A, B) as e:
    raise X from e
finally:
    global g
'''


def _libcst_walk(node):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


@pytest.mark.parametrize("source", [TRICKY, *(p.read_text() for p in sorted((ROOT / "examples").glob("*.py")))])
def test_walk_is_libcsts_children_in_order(source):
    module = cst.parse_module(source)
    expected = list(_libcst_walk(module))
    got = list(walk(module))
    assert len(got) == len(expected)
    assert all(a is b for a, b in zip(got, expected))


def test_rule_codes_without_importing_the_rules_match_the_rules():
    assert rule_codes() == tuple(sorted(r.CODE for r in all_rules()))


@pytest.mark.parametrize("source", [TRICKY, *(p.read_text() for p in sorted((ROOT / "examples").glob("*.py")))])
def test_ast_nodes_is_ast_walk_without_the_ctx_nodes(source):
    tree = ast.parse(source)
    expected = [n for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
    got = ast_nodes(tree)
    assert len(got) == len(expected) > 1
    assert all(a is b for a, b in zip(got, expected))
    for node in expected:
        assert ast_children(node) == [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr_context)]
