"""Line-anchored fixes (shared by `devmod review` and `--format rdjson`) and the rdjson output."""

from __future__ import annotations

import json
import pathlib
import re

import jsonschema
import pytest
from click.testing import CliRunner

from codemods.cli import main
from codemods.driver import unified_diff
from codemods.engine import transform_source
from codemods.formats.rdjson import apply_unified_diff
from codemods.review.payload import _suggestion
from codemods.review.suggestions import Span, line_fixes, rule_anchor, why_sentence
from codemods.rules import all_rules

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def apply_spans(before: str, fixes) -> str:
    """Apply every fix's first span, bottom up, the way a reviewer committing all suggestions does."""
    lines = before.splitlines(keepends=True)
    for fix in sorted(fixes, key=lambda f: f.start, reverse=True):
        span = fix.spans()[0]
        lines[span.start - 1:span.end] = list(span.lines)
    return "".join(lines)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_committing_every_suggestion_gives_the_engines_output(path):
    before = path.read_text(encoding="utf-8")
    result = transform_source(before, str(path))
    fixes = line_fixes(path.name, before, result.output, result.findings)
    assert apply_spans(before, fixes) == result.output
    assert all(f.codes for f in fixes) or not result.fix_counts
    assert len({f.key for f in fixes}) == len(fixes)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_rdjson_rebuilds_the_rewrite_from_the_driver_diff(path):
    before = path.read_text(encoding="utf-8")
    after = transform_source(before, str(path)).output
    assert apply_unified_diff(before, unified_diff(before, after, str(path))) == after


def test_insertion_at_the_top_and_a_missing_final_newline():
    before = "x = 1\ny = 2"
    fixes = line_fixes("a.py", before, "import torch\nx = 1\ny = 3", [])
    assert [(f.start, f.end, f.old, f.new) for f in fixes] == [
        (1, 0, (), ("import torch\n",)), (2, 2, ("y = 2",), ("y = 3",))]
    assert fixes[0].spans() == [Span(1, 1, ("import torch\n", "x = 1\n"))]  # no line above: anchor below
    assert apply_unified_diff(before, unified_diff(before, "x = 1\ny = 3", "a.py")) == "x = 1\ny = 3"


def test_identical_changes_in_one_file_get_distinct_keys():
    before = "a = m.cuda()\nb = 1\na = m.cuda()\n"
    fixes = line_fixes("a.py", before, before.replace("cuda()", "to(device)"), [])
    assert len(fixes) == 2 and fixes[0].key != fixes[1].key


def test_suggestion_fence_outgrows_backticks_in_the_code():
    text = _suggestion(Span(1, 1, ('doc = """```python"""\r\n',)))
    assert text == '````suggestion\ndoc = """```python"""\n````'


def test_open_findings_map_back_to_the_original_lines():
    before = "import torch\nm = M().cuda()\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')\n"
    result = transform_source(before)
    (finding,) = result.open_findings
    assert finding.line == 3  # the user's line, though the rewrite inserted the device lines above it


def test_every_rule_links_to_its_heading_and_has_a_why():
    headings = re.findall(r"^## (DM\d+) (\S+)$", (ROOT / "docs" / "rules.md").read_text(), re.M)
    anchors = {f"{code.lower()}-{name}" for code, name in headings}
    for rule in all_rules():
        assert rule_anchor(rule.CODE) in anchors
        sentence = why_sentence(rule.CODE)
        assert 20 < len(sentence) < 400 and sentence.rstrip('"').endswith((".", "!", "?")), sentence


RDJSON_SCHEMA = {
    # Written here from reviewdog's proto/rdf/reviewdog.proto (DiagnosticResult message): the parts devmod fills.
    "type": "object", "required": ["diagnostics"], "additionalProperties": False,
    "properties": {
        "source": {"$ref": "#/$defs/source"}, "severity": {"$ref": "#/$defs/severity"},
        "diagnostics": {"type": "array", "items": {
            "type": "object", "required": ["message", "location"], "additionalProperties": False,
            "properties": {
                "message": {"type": "string", "minLength": 1},
                "location": {"type": "object", "required": ["path"], "additionalProperties": False,
                             "properties": {"path": {"type": "string"}, "range": {"$ref": "#/$defs/range"}}},
                "severity": {"$ref": "#/$defs/severity"}, "source": {"$ref": "#/$defs/source"},
                "code": {"type": "object", "required": ["value"], "additionalProperties": False,
                         "properties": {"value": {"type": "string"}, "url": {"type": "string"}}},
                "suggestions": {"type": "array", "items": {
                    "type": "object", "required": ["range", "text"], "additionalProperties": False,
                    "properties": {"range": {"$ref": "#/$defs/range"}, "text": {"type": "string"}}}}}}}},
    "$defs": {
        "severity": {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]},
        "source": {"type": "object", "required": ["name"], "additionalProperties": False,
                   "properties": {"name": {"type": "string"}, "url": {"type": "string"}}},
        "position": {"type": "object", "additionalProperties": False,
                     "properties": {"line": {"type": "integer", "minimum": 1},
                                    "column": {"type": "integer", "minimum": 1}}},
        "range": {"type": "object", "required": ["start"], "additionalProperties": False,
                  "properties": {"start": {"$ref": "#/$defs/position"}, "end": {"$ref": "#/$defs/position"}}}},
}


def apply_rdjson(text: str, suggestions: list[dict]) -> str:
    """Apply rdjson suggestions as reviewdog reads them: 1-based byte columns, exclusive ends."""
    data = text.encode()
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")]

    def offset(pos):
        return starts[pos["line"] - 1] + pos["column"] - 1 if pos["line"] <= len(starts) else len(data)
    for s in sorted(suggestions, key=lambda s: offset(s["range"]["start"]), reverse=True):
        lo, hi = offset(s["range"]["start"]), offset(s["range"]["end"])
        data = data[:lo] + s["text"].encode() + data[hi:]
    return data.decode()


def test_format_rdjson_is_valid_and_its_suggestions_make_the_rewrite(tmp_path, monkeypatch):
    source = (ROOT / "examples").glob("*.py")
    target = tmp_path / "train.py"
    before = next(iter(sorted(source))).read_text(encoding="utf-8")
    target.write_text(before, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["apply", "--format", "rdjson", "train.py"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    jsonschema.validate(document, RDJSON_SCHEMA)
    assert target.read_text(encoding="utf-8") == before  # rdjson writes nothing
    suggestions = [s for d in document["diagnostics"] for s in d.get("suggestions", [])]
    assert suggestions
    assert apply_rdjson(before, suggestions) == transform_source(before).output
    messages = " ".join(d["message"] for d in document["diagnostics"])
    assert all(f"{code}: " in messages for code in transform_source(before).fix_counts)
