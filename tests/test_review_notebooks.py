"""`devmod review` on a notebook the pull request adds: suggestions on the notebook's JSON lines.

Skipped where devmod has no notebook support (codemods.notebooks, issue 10 part 2).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("codemods.notebooks")
nbformat = pytest.importorskip("nbformat")

from codemods.config import Config  # noqa: E402
from codemods.notebooks import transform_notebook  # noqa: E402
from test_review import fast_retries, git, github, pr_repo, run_review  # noqa: E402,F401  (fixtures)

CELLS = [
    ("markdown", "# Train on Colab"),
    ("code", "%matplotlib inline\nimport torch\nimport torch.nn as nn"),
    ("code", "model = nn.Linear(4, 2).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)"),
    ("code", "for x, y in loader:\n    loss = (model(x) - y).pow(2).mean()\n    loss.backward()"),
    ("code", "torch.set_default_tensor_type('torch.cuda.FloatTensor')"),
]


def notebook_text() -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(src) if kind == "markdown" else nbformat.v4.new_code_cell(src)
                for kind, src in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nbformat.writes(nb) + "\n"


def test_notebook_fixes_are_suggestions_on_its_json_lines(pr_repo, github):
    repo, base, _ = pr_repo
    text = notebook_text()
    (repo / "colab.ipynb").write_text(text)
    git(repo, "add", "colab.ipynb")
    git(repo, "commit", "-qm", "notebook")
    head = git(repo, "rev-parse", "HEAD")
    result = run_review(repo, github, base, head)
    assert result.exit_code == 0, result.output
    assert github.invalid == []
    review = github.posted_reviews()[0]
    notebook_comments = [c for c in review["comments"] if c["path"] == "colab.ipynb"]
    assert notebook_comments
    # Committing every suggestion gives devmod's rewrite, a valid notebook.
    lines = text.splitlines(keepends=True)
    for comment in sorted(notebook_comments, key=lambda c: c["line"], reverse=True):
        body = comment["body"]
        if "```suggestion" not in body:
            continue
        new = body.split("```suggestion\n", 1)[1].split("```", 1)[0]
        start = comment.get("start_line", comment["line"])
        lines[start - 1:comment["line"]] = new.splitlines(keepends=True)
    expected = transform_notebook(text, "colab.ipynb", Config(unsafe_fixes=True)).output
    assert "<code>colab.ipynb</code>" not in review["body"]  # a new file: every line is in the diff
    assert "".join(lines) == expected
    json.loads("".join(lines))
    cuda = [c for c in notebook_comments if "DM103" in c["body"]]
    assert cuda and '"model = nn.Linear(4, 2).to(device)\\n",' in cuda[0]["body"]
    report_only = [c for c in notebook_comments if "DM402" in c["body"]]
    assert report_only and "(cell 5)" in report_only[0]["body"]
    assert text.splitlines()[report_only[0]["line"] - 1].strip().startswith('"torch.set_default_tensor_type(')
