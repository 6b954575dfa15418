"""Notebooks run for real: `devmod verify` on the simulated GPU, and a Jupyter kernel (nbclient +
ipykernel, CPU torch) executing the notebook before and after the rewrite."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import nbformat
import pytest


pytest.importorskip("torch")
from test_notebooks import COLAB, HERE, run  # noqa: E402  (shared with the notebook tests)


def test_verify_names_the_cell_and_line_of_a_device_error(tmp_path: Path) -> None:
    path = Path(shutil.copy(COLAB, tmp_path / "train.ipynb"))
    code, _, err = run("verify", "--simulate", str(path))
    assert code == 3, err
    assert f"{path}:cell-6:4: device error on simulated cuda:0" in err
    assert "    loss = loss_fn(model(x), y)  # the batch stays on the CPU" in err
    assert "DM203" in err and "IPython line(s)" in err
    run("apply", str(path))
    code, _, err = run("verify", "--simulate", str(path))
    assert code == 0, err
    assert "ran clean on simulated cuda:0 (model parameters on cuda:0)" in err


def test_verify_json_and_traceback_point_at_cells(tmp_path: Path) -> None:
    import json

    path = Path(shutil.copy(COLAB, tmp_path / "train.ipynb"))
    code, out, _ = run("verify", "--simulate", "--json", str(path))
    outcome = json.loads(out)
    assert code == 3 and outcome["location"] == f"{path}:cell-6:4" and outcome["rule"] == "DM203"
    assert f'File "{path}", cell 6, line 4' in outcome["traceback"]


def kernel_notebook(path: Path) -> Path:
    """A notebook with magics, written for a GPU: `.cuda()`, `device='cuda'` and a batch left on the CPU."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Train a tiny model"),
        nbformat.v4.new_code_cell("!echo setting up\n%config InlineBackend.figure_format = 'png'"),
        nbformat.v4.new_code_cell("import torch\nimport torch.nn as nn"),
        nbformat.v4.new_code_cell("torch.manual_seed(0)\nmodel = nn.Linear(4, 2).cuda()\n"
                                  "batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)]"),
        nbformat.v4.new_code_cell("%%time\nfor x, y in batches:\n"
                                  "    loss = nn.functional.cross_entropy(model(x), y)\n    loss.backward()"),
        nbformat.v4.new_code_cell("model?\nprobe = torch.ones(1, 4, device='cuda')\n"
                                  "print('done', model(probe).shape, next(model.parameters()).device)"),
    ]
    # Laid out as Colab exports it: two-space indent, its own key order, sources as lists of lines.
    cells = [{"cell_type": c.cell_type, "metadata": {"id": f"c{i}"}, "source": c.source.splitlines(True),
              **({"execution_count": None, "outputs": []} if c.cell_type == "code" else {})}
             for i, c in enumerate(nb.cells)]
    colab = {"nbformat": 4, "nbformat_minor": 0,
             "metadata": {"colab": {"provenance": []}, **nb.metadata, "accelerator": "GPU"}, "cells": cells}
    path.write_text(json.dumps(colab, indent=2) + "\n", encoding="utf-8")
    return path


def execute(path: Path):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def test_a_real_jupyter_kernel_runs_the_rewritten_notebook(tmp_path: Path) -> None:
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from nbclient.exceptions import CellExecutionError

    path = kernel_notebook(tmp_path / "train.ipynb")
    before = path.read_text(encoding="utf-8")
    original_magics = [c.source.splitlines()[0] for c in nbformat.read(path, as_version=4).cells[1:]]
    with pytest.raises(CellExecutionError) as failure:  # CPU torch: the GPU-only notebook fails
        execute(path)
    assert "cell-3" not in str(failure.value) and ".cuda()" in str(failure.value)

    code, _, err = run("apply", str(path))
    assert code == 0, err
    changed = [line for line in difflib.unified_diff(before.splitlines(), path.read_text(encoding="utf-8").splitlines(),
                                                     lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == [
        '-        "import torch.nn as nn"',
        '+        "import torch.nn as nn\\n",',
        '+        "\\n",',
        '+        "device = torch.device(\\"cuda\\" if torch.cuda.is_available() else \\"cpu\\")"',
        '-        "model = nn.Linear(4, 2).cuda()\\n",',
        '-        "batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)]"',
        '+        "model = nn.Linear(4, 2).to(device)\\n",',
        '+        "batches = [(torch.randn(8, 4, device=device), torch.randint(0, 2, (8,), device=device))'
        ' for _ in range(3)]"',
        '-        "probe = torch.ones(1, 4, device=\'cuda\')\\n",',
        '+        "probe = torch.ones(1, 4, device=device)\\n",',
    ], "only the device lines of the sources change"
    rewritten = nbformat.read(path, as_version=4)
    assert [c.source.splitlines()[0] for c in rewritten.cells[1:]] == original_magics
    executed = execute(path)
    text = "".join(out.get("text", "") for cell in executed.cells if cell.cell_type == "code"
                   for out in cell.outputs)
    assert "setting up" in text and "Wall time" in text  # the shell escape and %%time ran
    assert "done torch.Size([1, 2]) cpu" in text


def test_the_notebook_example_fails_before_and_runs_clean_after(tmp_path: Path) -> None:
    path = Path(shutil.copy(HERE.parent / "examples" / "22_colab_training.ipynb", tmp_path / "22.ipynb"))
    code, _, err = run("verify", "--simulate", str(path))
    assert code == 3 and f"{path}:cell-6:5: device error" in err and "DM203" in err
    assert run("apply", str(path))[0] == 0
    code, _, err = run("verify", "--simulate", str(path))
    assert code == 0 and "model parameters on cuda:0" in err


def test_the_tutorial_notebook_example_runs_on_the_cpu_after_the_rewrite(tmp_path: Path) -> None:
    # examples/28: `import torch` first, `from torch import nn` below the first use, `torch.*Tensor?`.
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    path = Path(shutil.copy(HERE.parent / "examples" / "28_tutorial_notebook_cells.ipynb", tmp_path / "28.ipynb"))
    code, out, err = run("apply", str(path))
    assert code == 0 and "0 findings not fixed" in out + err, out + err
    executed = execute(path)  # every cell, the wildcard help included, on the CPU kernel: no NameError
    text = "".join(out.get("text", "") for cell in executed.cells if cell.cell_type == "code" for out in cell.outputs)
    assert "torch.Size([5, 2])" in text
    code, _, err = run("verify", "--simulate", str(path))
    assert code == 0 and "ran clean on simulated cuda:0" in err, err
