"""`devmod rules` and docs/rules.md come from the rules' own docstrings and tested examples."""

from __future__ import annotations

import pathlib
import pytest
from click.testing import CliRunner

from codemods.catalogue import SAFETY_LABEL, explain_rule, rules_markdown
from codemods.cli import main
from codemods.rules import all_rules

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def markdown() -> str:
    """rules_markdown() runs every rule's first example through the engine: build it once."""
    return rules_markdown()


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_rules_lists_every_rule_with_code_name_kind_and_summary():
    result = invoke("rules")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == len(all_rules())
    for rule in all_rules():
        line = next(l for l in lines if l.startswith(rule.CODE + " "))
        assert rule.NAME in line and SAFETY_LABEL[rule.SAFETY] in line and rule.SUMMARY in line
    assert [l.split()[0] for l in lines] == sorted(r.CODE for r in all_rules())


def test_rules_explains_one_with_its_docstring_and_tested_example():
    result = invoke("rules", "DM103")
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith("DM103 cuda-call (safe fix)")
    first_doc_line = next(l for l in all_rules_by_code()["DM103"].documentation().splitlines() if l.strip())
    assert first_doc_line in text
    assert "Prevents: AssertionError: Torch not compiled with CUDA enabled" in text
    before, after = text.index("Before:"), text.index("After:")
    assert before < after
    assert ".cuda()" in text[before:after] and ".to(device)" in text[after:]


@pytest.mark.parametrize("code", ["dm103", "Dm103"])
def test_rule_codes_are_case_insensitive(code):
    result = invoke("rules", code)
    assert result.exit_code == 0 and result.output.startswith("DM103 ")


def test_report_only_rule_says_so():
    rule = next(r for r in all_rules() if r.SAFETY == "report")
    result = invoke("rules", rule.CODE)
    assert result.exit_code == 0
    assert "(report only)" in result.output and "Reported, not rewritten." in result.output


@pytest.mark.parametrize("code", ["DM999", "XYZ", "DM1"])
def test_unknown_rule_is_a_clear_error(code):
    result = invoke("rules", code)
    assert result.exit_code == 2
    assert f"unknown rule {code!r}" in result.output and "devmod rules" in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.CODE)
def test_every_rule_explains_itself(rule):
    text = explain_rule(rule.CODE)
    assert text is not None and text.startswith(f"{rule.CODE} {rule.NAME} ")
    assert rule.ERROR, f"{rule.CODE} does not say which PyTorch error it prevents"
    assert f"Prevents: {rule.ERROR}" in text
    assert "Before:" in text


def test_rules_doc_is_up_to_date(markdown):
    current = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == markdown, "docs/rules.md is stale: run `python scripts/gen_rules_doc.py`"


def test_rules_doc_has_a_section_per_rule(markdown):
    text = markdown
    for rule in all_rules():
        assert f"\n## {rule.CODE} {rule.NAME}\n" in text
        assert f"[{rule.CODE}](#{rule.CODE.lower()}-{rule.NAME})" in text


def all_rules_by_code():
    return {r.CODE: r for r in all_rules()}


def test_gen_rules_doc_writes_and_detects_staleness(tmp_path, monkeypatch, capsys, markdown):
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_rules_doc", ROOT / "scripts" / "gen_rules_doc.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    target = tmp_path / "docs" / "rules.md"
    target.parent.mkdir()
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(script, "TARGET", target)
    monkeypatch.setattr(script, "rules_markdown", lambda: markdown)
    assert script.main(["--check"]) == 1  # missing
    assert script.main([]) == 0 and target.read_text(encoding="utf-8") == markdown
    assert script.main(["--check"]) == 0
    target.write_text(markdown + "edited\n", encoding="utf-8")
    assert script.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
