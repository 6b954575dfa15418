"""Every rule's own VALID / INVALID examples, run through the engine as users run them.

Each example runs twice: the second run must change nothing (idempotency), and a
VALID example must come through byte-identical.
"""

from __future__ import annotations

import libcst as cst
import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules import all_rules

CONFIG = Config(unsafe_fixes=True)


def _cases(kind: str, unsafe_only: bool = False):
    for rule in all_rules():
        if unsafe_only and rule.SAFETY != "unsafe":
            continue
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.CODE}-{rule.NAME}-{kind.lower()}{index}")


def test_every_rule_has_examples():
    for rule in all_rules():
        assert rule.INVALID, f"{rule.CODE} has no INVALID examples"
        assert rule.VALID, f"{rule.CODE} has no VALID examples"
        assert rule.documentation(), f"{rule.CODE} has no docstring"


@pytest.mark.parametrize("rule, example", list(_cases("VALID")))
def test_valid_example_is_left_alone(rule, example):
    result = transform_source(example.code, config=CONFIG, rules=[rule])
    assert result.output == example.code
    assert not [f for f in result.findings if f.code == rule.CODE], "a VALID example must produce no finding"


@pytest.mark.parametrize("rule, example", list(_cases("INVALID")))
def test_invalid_example_is_fixed_or_reported(rule, example):
    cst.parse_module(example.code)
    result = transform_source(example.code, config=CONFIG, rules=[rule])
    expected = example.code if example.expected is None else example.expected
    assert result.output == expected
    assert [f for f in result.findings if f.code == rule.CODE], "an INVALID example must produce a finding"
    second = transform_source(result.output, config=CONFIG, rules=[rule])
    assert second.output == result.output, "a second run must change nothing"


@pytest.mark.parametrize("rule, example", list(_cases("INVALID", unsafe_only=True)))
def test_unsafe_fix_needs_opt_in(rule, example):
    result = transform_source(example.code, config=Config(), rules=[rule])
    assert result.output == example.code
    assert any(f.replacement for f in result.findings if f.code == rule.CODE)
