"""Notebooks: the code cells are one program; only the changed source lines change in the file."""

from __future__ import annotations

import difflib
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from codemods.cli import main
from codemods.discovery import iter_python_files
from codemods.notebooks import build_program, mask_cell, transform_notebook

HERE = Path(__file__).resolve().parent
COLAB = HERE / "notebooks" / "colab_export.ipynb"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def jupyter_notebook(path: Path, *sources: str) -> Path:
    """A notebook as Jupyter writes it (nbformat: indent 1, sorted keys), with a markdown cell first."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# Notes\nnot code: `x.cuda()`")]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, path)
    return path


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def sources(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]


@pytest.fixture
def colab(tmp_path: Path) -> Path:
    return Path(shutil.copy(COLAB, tmp_path / "train.ipynb"))


def test_colab_export_changes_only_its_device_lines(colab: Path) -> None:
    before = colab.read_text(encoding="utf-8")
    code, _, err = run("apply", str(colab))
    assert code == 0, err
    after = colab.read_text(encoding="utf-8")
    # Colab's layout (two-space indent, unsorted keys, raw emoji) survives: the file diff is the
    # changed source strings and nothing else.
    assert changed_lines(before, after) == [
        '-        "from torch.utils.data import DataLoader, TensorDataset"',
        '+        "from torch.utils.data import DataLoader, TensorDataset\\n",',
        '+        "\\n",',
        '+        "device = torch.device(\\"cuda\\" if torch.cuda.is_available() else \\"cpu\\")"',
        '-        "model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2)).cuda()\\n",',
        '+        "model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)\\n",',
        '+        "    x, y = x.to(device), y.to(device)\\n",',
        '-        "probe = torch.zeros(1, 10, device=\'cuda\')\\n",',
        '+        "probe = torch.zeros(1, 10, device=device)\\n",',
    ]
    old, new = json.loads(before), json.loads(after)
    for old_cell, new_cell in zip(old["cells"], new["cells"]):
        assert {k: v for k, v in old_cell.items() if k != "source"} == \
            {k: v for k, v in new_cell.items() if k != "source"}
    assert old["metadata"] == new["metadata"] and list(old) == list(new)
    # The IPython lines are byte-identical.
    cells = sources(colab)
    assert cells[1] == "!pip install -q torchmetrics\n%matplotlib inline"
    assert cells[5].startswith("%%time\nfor x, y in loader:\n") and "    !echo step\n" in cells[5]
    assert cells[6].startswith("files = !ls\nmodel?\n")
    assert run("apply", "--check", str(colab))[0] == 0, "a second run changes nothing"


def test_the_device_is_defined_once_after_the_imports_and_names_flow_between_cells(tmp_path: Path) -> None:
    path = jupyter_notebook(tmp_path / "nb.ipynb", "import torch", "x = torch.ones(2).cuda()",
                            "y = torch.zeros(2, device='cuda')\nz = x + y")
    run("apply", str(path))
    cells = sources(path)
    assert cells[1] == 'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")'
    assert cells[2] == "x = torch.ones(2, device=device)"
    assert cells[3] == "y = torch.zeros(2, device=device)\nz = x + y"
    assert sum(c.count("device = torch.device") for c in cells) == 1


def test_a_jupyter_written_notebook_is_written_back_by_nbformat_byte_for_byte(tmp_path: Path) -> None:
    path = jupyter_notebook(tmp_path / "nb.ipynb", "import torch\n%time t = 1", "x = torch.ones(2).cuda()")
    expected = nbformat.read(path, as_version=4)
    run("apply", str(path))
    expected.cells[1].source = ('import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() '
                                'else "cpu")\n%time t = 1')
    expected.cells[2].source = "x = torch.ones(2, device=device)"
    assert path.read_text(encoding="utf-8") == nbformat.writes(expected) + "\n"


def test_diff_labels_hunks_by_cell_and_writes_nothing(colab: Path) -> None:
    before = colab.read_bytes()
    code, out, _ = run("apply", "--diff", str(colab))
    assert code == 0 and colab.read_bytes() == before
    shown = str(colab).lstrip("/")
    labels = [line for line in out.splitlines() if line.startswith(("---", "+++"))]
    assert labels == [f"{side}{shown}:cell-{n}" for n in (3, 4, 6, 7) for side in (f"--- a/", f"+++ b/")]
    assert "\\ No newline" not in out
    assert "+    x, y = x.to(device), y.to(device)" in out.splitlines()


def test_check_names_the_cell_and_the_line_of_a_finding(tmp_path: Path) -> None:
    path = jupyter_notebook(tmp_path / "nb.ipynb", "import torch\nimport torch.nn as nn",
                            "class Net(nn.Module):\n    def forward(self, x):\n        layer = nn.Linear(4, 4)\n"
                            "        return layer(x)")
    code, _, err = run("apply", "--check", str(path))
    assert code == 1
    assert f"{path}:cell-3:3:17: DM401" in err
    annotation = run("apply", "--check", "--format", "github", str(path))[1].strip()
    lines = path.read_text(encoding="utf-8").splitlines()
    number = int(re.search(r"line=(\d+),", annotation).group(1))
    assert lines[number - 1].strip() == '"        layer = nn.Linear(4, 4)\\n",'
    assert "title=DM401 (cell 3, line 3)::" in annotation
    data = json.loads(run("apply", "--check", "--format", "json", str(path))[1])
    finding = next(f for f in data[0]["findings"] if f["code"] == "DM401")
    assert (finding["cell"], finding["line"]) == (3, 3)


def test_a_cell_that_does_not_parse_is_named_and_the_notebook_left_alone(tmp_path: Path) -> None:
    path = jupyter_notebook(tmp_path / "nb.ipynb", "import torch\nx = torch.ones(2).cuda()", "!ls\ndef f(:\n    pass")
    before = path.read_bytes()
    code, _, err = run("apply", str(path))
    assert code == 2 and path.read_bytes() == before
    assert f"{path}:cell-3:2:7: error: cannot parse" in err


def test_invalid_json_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [torch', encoding="utf-8")
    code, _, err = run("apply", str(path))
    assert code == 2 and "cannot read notebook: invalid JSON" in err and "Traceback" not in err


def test_folders_include_notebooks_but_not_checkpoints(tmp_path: Path) -> None:
    jupyter_notebook(tmp_path / "a.ipynb", "import torch")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    jupyter_notebook(tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb", "import torch")
    (tmp_path / "b.py").write_text("import torch\n", encoding="utf-8")
    assert sorted(Path(p).name for p in iter_python_files([str(tmp_path)])) == ["a.ipynb", "b.py"]


def test_ipython_syntax_is_masked_to_lines_that_parse_and_restored() -> None:
    placeholders: dict[str, str] = {}
    cell = "%%time\nfor i in range(2):\n    !echo $i \\\n        more\n    x = %env HOME\nlen?\n?len\n"
    masked = mask_cell(cell, placeholders)
    compile(masked, "<cell>", "exec")
    assert "for i in range(2):\n" in masked and len(placeholders) == 6
    program = build_program([(0, cell)])
    assert all(line in program.placeholders.values() for line in ("%%time", "    !echo $i \\", "len?"))
    # A cell magic whose body is another language is masked whole; a cell that parses is left alone.
    assert mask_cell("%%bash\nif [ -d x ]; then ls; fi", {}).count("_devmod_ipython") == 2
    text = 's = """\n%d items\n"""'
    assert mask_cell(text, {}) == text


def test_wildcard_help_is_masked_and_the_rest_is_rewritten(tmp_path: Path) -> None:
    # IPython's wildcard search (`torch.*Tensor?`, psearch) and help on an item (`xs[0]?`) were not
    # masked: the whole notebook was refused as "cannot parse".
    help_cell = "# all the *Tensor classes\ntorch.*Tensor?\n*int*??\nxs[0]?"
    path = jupyter_notebook(tmp_path / "nb.ipynb", "import torch\nxs = [1]", help_cell, "z = torch.ones(2).cuda()")
    code, _, err = run("apply", str(path))
    assert code == 0 and "cannot parse" not in err, err
    cells = sources(path)
    assert cells[2] == help_cell
    assert cells[3] == "z = torch.ones(2, device=device)"


def test_a_later_torch_import_cell_keeps_the_device_above_its_first_use(tmp_path: Path) -> None:
    # pytorch-beginner basic.ipynb: `import torch` in the first cell, `from torch import nn` many
    # cells below the first use. The device once went after the last torch import: DM101 reported
    # "used before torch is imported" (false) while `device=device` and `.to(device)` were written.
    path = jupyter_notebook(tmp_path / "nb.ipynb", "import torch", "torch.rand(5, 4)",
                            "a = torch.rand(5, 4)\na = a.cuda()\nprint(a)",
                            "from torch import nn\nprint(nn.Linear(2, 1)(torch.ones(1, 2)))")
    code, out, err = run("apply", str(path))
    assert code == 0 and "0 findings not fixed" in out + err, out + err
    cells = sources(path)
    assert cells[1] == 'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")'
    assert cells[3] == "a = torch.rand(5, 4)\na = a.to(device)\nprint(a)"
    exec(compile("\n".join(cells[1:]), "<cells>", "exec"), {})  # no NameError on the CPU


def test_magics_around_fixes_come_back_byte_identical(tmp_path: Path) -> None:
    path = jupyter_notebook(tmp_path / "nb.ipynb", "%load_ext autoreload\n%autoreload 2\nimport torch",
                            "%%capture out\nfor i in range(3):\n    %time y = torch.ones(1).cuda()\n    !echo {i}",
                            "%%bash\necho 'torch.cuda()'", "z = torch.ones(2).cuda()")
    run("apply", str(path))
    cells = sources(path)
    assert cells[1].startswith("%load_ext autoreload\n%autoreload 2\nimport torch\n\ndevice = ")
    assert cells[4] == "z = torch.ones(2, device=device)"
    # A fix inside a line magic is not attempted: the line is not Python.
    assert cells[2] == "%%capture out\nfor i in range(3):\n    %time y = torch.ones(1).cuda()\n    !echo {i}"
    assert cells[3] == "%%bash\necho 'torch.cuda()'"


def test_non_python_notebooks_and_notebooks_without_torch_are_skipped(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "ir", "language": "R", "display_name": "R"}})
    nb.cells = [nbformat.v4.new_code_cell("library(torch)\nx <- torch_ones(2)$cuda()")]
    text = nbformat.writes(nb)
    assert transform_notebook(text).skipped == "not a Python notebook"
    plain = nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('torch')")]))
    assert transform_notebook(plain).output == plain


def test_a_source_stored_as_one_string_stays_one_string(tmp_path: Path) -> None:
    data = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "execution_count": None, "outputs": [],
                       "source": "import torch\nx = torch.ones(2).cuda()"}]}
    text = json.dumps(data, indent=4)
    output = transform_notebook(text).output
    assert json.loads(output)["cells"][0]["source"].endswith("x = torch.ones(2, device=device)")
    assert len(changed_lines(text, output)) == 2


def test_windows_line_endings_and_one_line_lists_keep_their_layout(tmp_path: Path) -> None:
    text = COLAB.read_text(encoding="utf-8").replace("\n", "\r\n")
    output = transform_notebook(text).output
    assert "\r\n" in output and "\n" not in output.replace("\r\n", "")
    assert len(changed_lines(text.replace("\r\n", "\n"), output.replace("\r\n", "\n"))) == 9
    compact = json.dumps({"nbformat": 4, "nbformat_minor": 2, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": ["import torch\n", "x = torch.ones(2).cuda()"]}]})
    assert json.loads(transform_notebook(compact).output)["cells"][0]["source"][-1] == \
        "x = torch.ones(2, device=device)"
    assert "\n" not in transform_notebook(compact).output


DEVICE_LINE = 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")'


def test_a_device_defined_in_a_later_cell_moves_up_and_the_cells_keep_their_bounds(tmp_path: Path) -> None:
    # The definition moves above its first use; the marker that opens its cell stays, so the
    # notebook is rewritten instead of failing with "lost the cell boundaries".
    path = jupyter_notebook(tmp_path / "nb.ipynb", "import torch\nimport torch.nn as nn",
                            "# the encoder\nnet = nn.Linear(2, 2)\nout = net(torch.ones(1, 2).cuda())",
                            f"# pick the device\n{DEVICE_LINE}\n\ndevice", "print(out)")
    code, _, err = run("apply", str(path))
    assert code == 0, err
    cells = sources(path)
    assert cells[1] == f"import torch\nimport torch.nn as nn\n\n# pick the device\n{DEVICE_LINE}"
    assert cells[2] == "# the encoder\nnet = nn.Linear(2, 2).to(device)\nout = net(torch.ones(1, 2, device=device))"
    assert cells[3] == "device"
    assert cells[4] == "print(out)"
    assert run("apply", "--check", str(path))[0] == 0, "a second run changes nothing"


def test_a_device_repeated_in_each_cell_stays_in_each_cell(tmp_path: Path) -> None:
    # Each cell that defines its own device still runs on its own (the 27th run's lr-finder notebooks):
    # device-correct cells come through unchanged.
    path = jupyter_notebook(tmp_path / "nb.ipynb", "import torch",
                            f"{DEVICE_LINE}\nx = torch.ones(2, device=device)",
                            f"{DEVICE_LINE}\ny = torch.zeros(2, device=device)",
                            f"# last\n{DEVICE_LINE}")
    before = path.read_bytes()
    code, _, err = run("apply", str(path))
    assert code == 0, err
    assert path.read_bytes() == before
    assert run("apply", "--check", str(path))[0] == 0


def test_lines_named_in_a_report_are_cells_and_lines_of_the_notebook(tmp_path: Path) -> None:
    path = jupyter_notebook(tmp_path / "nb.ipynb", "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader",
                            "net = nn.Linear(3, 2)",
                            "for graph, labels in DataLoader(data, collate_fn=make_graph):\n"
                            "    loss = nn.functional.cross_entropy(net(graph.ndata['x']), labels)")
    code, _, err = run("apply", "--check", str(path))
    assert code == 1, err
    report = next(line for line in err.splitlines() if "DM202" in line)
    assert report.startswith(f"{path}:cell-3:1:1: DM202 model `net` and its data stay where they are")
    assert "the batch of the loop at cell-4:1:" in report and "line" not in report.split("DM202", 1)[1]


def test_a_notebook_with_an_output_nbformat_cannot_write_is_still_rewritten(tmp_path: Path) -> None:
    # The 29th run's pytorch-wavenet ``profiling.ipynb``: a code cell with an empty output ``{}``.
    # nbformat's writer raised AttributeError (output_type) and the whole notebook was skipped.
    path = tmp_path / "nb.ipynb"
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [{}],
            "source": ["import torch\n", "w = torch.ones(3).cuda()\n"]}
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 1, "metadata": {}, "cells": [cell]}, indent=1))
    code, _, err = run("apply", str(path))
    assert code == 0, err
    written = json.loads(path.read_text())
    assert written["cells"][0]["outputs"] == [{}]
    assert "w = torch.ones(3, device=device)" in "".join(written["cells"][0]["source"])
