"""analysis.tree.walk reads child fields directly; it must give exactly libcst's children, in order.
analysis.ast_walk does the same for CPython's ``ast``: ``ast.walk``'s nodes and order, less ``ctx``."""

from __future__ import annotations

from pathlib import Path

import ast

import libcst as cst
import pytest

from codemods.analysis.ast_walk import ast_children, ast_nodes
from codemods.analysis.tree import TreeIndex, _walk, nodes_of, walk
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


@pytest.mark.parametrize("source", [TRICKY, (ROOT / "examples" / "03_model_moved_input_not.py").read_text()])
def test_the_index_gives_every_walk_and_every_kind_filter_as_the_plain_walk_does(source):
    module = cst.parse_module(source)
    TreeIndex.forget()
    plain = list(_walk(module))
    assert [id(n) for n in walk(module)] == [id(n) for n in plain]  # builds the index
    kinds = [(cst.Call,), (cst.Name, cst.Attribute), (cst.BaseCompoundStatement,), (cst.Assign, cst.For, cst.ClassDef)]
    for node in plain[::7]:  # subtrees: slices of the one walk
        assert [id(n) for n in walk(node)] == [id(n) for n in _walk(node)]
        for kind in kinds:
            assert [id(n) for n in nodes_of(node, *kind)] == [id(n) for n in _walk(node) if isinstance(n, kind)]
    for kind in kinds:
        assert [id(n) for n in nodes_of(module, *kind)] == [id(n) for n in plain if isinstance(n, kind)]
    TreeIndex.forget()


def test_a_node_of_another_tree_is_walked_and_the_index_follows_the_tree_asked():
    first, second = cst.parse_module("import torch\nx = torch.ones(2)\n"), cst.parse_module("y = f(1)\n")
    list(walk(first))
    call = second.body[0].body[0].value
    assert [type(n).__name__ for n in walk(call)][:2] == ["Call", "Name"]  # not in the index: walked
    assert [n.func.value for n in nodes_of(second, cst.Call)] == ["f"]  # the index moves to the new tree
    assert nodes_of(first.body[1], cst.Name)[0].value == "x"
    TreeIndex.forget()
    assert list(walk(call))[0] is call


def test_a_node_used_twice_in_one_tree_walks_the_same_either_way():
    shared = cst.Name("device")
    module = cst.parse_module("a = 1\nb = 2\n")
    module = module.with_changes(body=[s.with_changes(body=[s.body[0].with_changes(value=shared)]) for s in module.body])
    assert [id(n) for n in walk(module)] == [id(n) for n in _walk(module)]
    assert list(walk(shared)) == [shared]
    assert nodes_of(module, cst.Name)[1] is shared and nodes_of(module, cst.Name)[3] is shared
    TreeIndex.forget()


def test_qualified_names_kept_for_one_tree_are_not_answers_for_the_next():
    from codemods.analysis.names import forget_answers, qualified_names
    from libcst.metadata import MetadataWrapper, ScopeProvider

    def asker(source):
        wrapper = MetadataWrapper(cst.parse_module(source))
        scopes = wrapper.resolve(ScopeProvider)
        call = wrapper.module.body[-1].body[0].value
        return lambda: qualified_names({ScopeProvider: scopes}, call.func)
    assert asker("import torch\ntorch.ones(2)\n")() == {"torch.ones"}
    assert asker("import numpy as torch\ntorch.ones(2)\n")() == {"numpy.ones"}
    ask = asker("from torch import ones\nones(2)\n")
    ask().add("changed by a caller")
    assert ask() == {"torch.ones"}  # the kept answer is not the caller's set
    forget_answers()
    assert ask() == {"torch.ones"}


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
