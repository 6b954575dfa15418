"""The project index: which files are library code, which functions are driver code, which
names build models; and what `devmod apply` does with it on a small library-shaped project."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from codemods.analysis.project import ProjectIndex, summarise
from codemods.config import Config
from codemods.driver import process_files

BLOCKS = '''\
import torch
import torch.nn as nn


def ramp(n):
    return torch.arange(n) / n


def Block(dim):
    return nn.Sequential(nn.Linear(dim, dim), nn.ReLU())


class Net(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.block = Block(dim)
        self.register_buffer("scale", ramp(dim))

    def forward(self, x):
        return self.block(x * self.scale)


def make_net():
    return Net(4)


def selftest():
    net = Net()
    return net(torch.randn(2, 4))


if __name__ == "__main__":
    print(selftest().shape)
    net = Net()
    print(net(torch.randn(2, 4)).shape)
'''

TRAIN = '''\
import torch
from models import *

net = make_net()
print(net(torch.randn(1, 4)))
'''


def project(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("from .blocks import *\n")
    (tmp_path / "models" / "blocks.py").write_text(BLOCKS)
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def test_roles(tmp_path):
    root = project(tmp_path)
    index = ProjectIndex.from_paths([str(p) for p in root.rglob("*.py")])
    blocks = index.role_for(str(root / "models" / "blocks.py"))
    train = index.role_for(str(root / "train.py"))
    assert blocks.imported and not train.imported
    # selftest() only runs from the main block; ramp() runs at construction time
    assert blocks.driver_functions == {"selftest", "make_net"}
    assert {"Net", "Block", "make_net"} <= train.model_names
    assert "ramp" not in train.model_names


def test_a_function_also_called_from_model_code_is_not_driver_code():
    sources = [("a.py", "import torch\n\ndef helper():\n    return torch.zeros(2)\n\n"
                        "class M:\n    def f(self):\n        return helper()\n\n"
                        "if __name__ == '__main__':\n    helper()\n")]
    assert ProjectIndex.build(sources).role_for("a.py").driver_functions == frozenset()


def test_library_project_is_rewritten_in_driver_code_only(tmp_path):
    root = project(tmp_path)
    paths = sorted(str(p) for p in root.rglob("*.py"))
    reports = {Path(r.path).name: r for r in process_files(paths, Config(), "write", jobs=1)}
    assert not any(r.error for r in reports.values())
    blocks = (root / "models" / "blocks.py").read_text()
    # nothing at module level (``from models import *`` would export it), nothing in helpers
    assert blocks.startswith("import torch\nimport torch.nn as nn\n\n\ndef ramp(n):\n    return torch.arange(n) / n\n")
    assert "def Block(dim):\n    return nn.Sequential(nn.Linear(dim, dim), nn.ReLU())\n" in blocks
    assert 'if __name__ == "__main__":\n    device = torch.device(' in blocks
    assert "    net = Net().to(device)\n    print(net(torch.randn(2, 4, device=device)).shape)\n" in blocks
    # selftest() is library code too: ``from models.blocks import selftest`` must keep working
    assert "    net = Net()\n    return net(torch.randn(2, 4))\n" in blocks
    train = (root / "train.py").read_text()
    assert "net = make_net().to(device)\nprint(net(torch.randn(1, 4, device=device)))\n" in train
    # the rewritten project still runs, and a second run changes nothing
    assert subprocess.run([sys.executable, "train.py"], cwd=root, capture_output=True).returncode == 0
    again = list(process_files(paths, Config(), "check", jobs=1))
    assert not any(r.changed for r in again)


def test_a_lone_file_still_sees_its_project(tmp_path):
    root = project(tmp_path)
    (root / "pyproject.toml").write_text("")
    report = next(process_files([str(root / "train.py")], Config(), "diff", jobs=1))
    assert "+net = make_net().to(device)\n" in report.diff


def test_inputs_of_an_object_devmod_cannot_place_stay():
    from codemods.engine import transform_source
    source = textwrap.dedent("""\
        import torch
        from elsewhere import build

        net = build()
        print(net(torch.randn(1, 4)))
        """)
    assert transform_source(source).output == source


def test_a_model_whose_loop_is_library_code_stays_with_its_batches(tmp_path):
    """``fit(model, loader)`` lives in a file others import, so its loop gets no device: the
    model that the file's own main block hands to it stays too, and the group is reported."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "use.py").write_text("from pkg.train import fit\n")
    train = package / "train.py"
    train.write_text(textwrap.dedent("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset


        def fit(model, loader):
            for x, y in loader:
                nn.functional.mse_loss(model(x), y).backward()


        if __name__ == "__main__":
            data = TensorDataset(torch.randn(16, 3), torch.randn(16, 1))
            net = nn.Linear(3, 1)
            fit(net, DataLoader(data, batch_size=4))
        """))
    before = train.read_text()
    paths = sorted(str(p) for p in tmp_path.rglob("*.py"))
    reports = list(process_files(paths, Config(), "write", jobs=1))
    assert train.read_text() == before
    findings = [f for r in reports for f in r.findings if f.code == "DM202"]
    assert len(findings) == 1 and "the batch of the loop at line 7: it is in library code" in findings[0].message


def test_a_helper_that_returns_another_helpers_padded_batch_is_host_data():
    from codemods.engine import transform_source
    source = textwrap.dedent("""\
        import torch
        import torch.nn as nn

        def pad(rows):
            out = torch.zeros((len(rows), max(len(r) for r in rows))).long()
            for i, r in enumerate(rows):
                out[i, :len(r)] = torch.LongTensor(r)
            return out

        def make_batch(words):
            return pad([[ord(c) % 16 for c in w] for w in words])

        if __name__ == "__main__":
            net = nn.Embedding(16, 4)
            batch = make_batch(["ab", "c"])
            print(net(batch).shape)
        """)
    out = transform_source(source).output
    assert '    batch = make_batch(["ab", "c"]).to(device)\n' in out
    assert "    net = nn.Embedding(16, 4).to(device)\n" in out


def test_a_model_whose_input_is_made_in_library_code_it_is_handed_to_stays(tmp_path):
    """``evaluate(model, arr)`` lives in a file others import: the input it builds inline gets no
    device there, so the model that the file's main block hands to it stays, and is reported."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "use.py").write_text("from lib import evaluate\n")
    lib = tmp_path / "lib.py"
    lib.write_text(textwrap.dedent("""\
        import numpy as np
        import torch
        import torch.nn as nn


        def evaluate(net, arr):
            return net(torch.from_numpy(arr).float()).argmax(1).tolist()


        if __name__ == "__main__":
            model = nn.Linear(4, 2)
            print(evaluate(model, np.ones((3, 4))))
        """))
    before = lib.read_text()
    reports = list(process_files([str(lib), str(tmp_path / "use.py")], Config(), "write", jobs=1))
    assert lib.read_text() == before
    findings = [f for r in reports for f in r.findings if f.code == "DM202"]
    assert len(findings) == 1 and "the input at line 7 is in code where devmod adds no device" in findings[0].message


def test_a_device_that_a_star_import_of_a_project_file_brings_is_reused(tmp_path):
    """``from data import *`` (data.py says ``from conf import *``) already binds the project's
    ``device``: no new one below it, which would shadow the user's choice."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "conf.py").write_text('import torch\n\ndevice = torch.device("cpu")\nbatch_size = 4\n')
    (tmp_path / "data.py").write_text("from conf import *\n\nbatches = [(torch.rand(batch_size, 3), "
                                      "torch.randint(0, 2, (batch_size,)))]\n")
    train = tmp_path / "train.py"
    train.write_text(textwrap.dedent("""\
        from torch import nn

        from data import *

        model = nn.Linear(3, 2).to(device)
        criterion = nn.CrossEntropyLoss()

        if __name__ == '__main__':
            for X, y in batches:
                print(criterion(model(X.to(device)), y.to(device)).item())
        """))
    before = train.read_text()
    index = ProjectIndex.from_paths([str(p) for p in tmp_path.glob("*.py")])
    assert "device" in index.role_for(str(train)).star_names
    assert "device" not in index.role_for(str(tmp_path / "conf.py")).star_names
    paths = sorted(str(p) for p in tmp_path.glob("*.py"))
    reports = list(process_files(paths, Config(), "write", jobs=1))
    assert not any(r.error for r in reports)
    assert train.read_text() == before
    assert subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True).returncode == 0


def test_a_star_import_whose_all_leaves_out_device_brings_none():
    sources = [("conf.py", "import torch\ndevice = torch.device('cpu')\n__all__ = ['torch']\n"),
               ("train.py", "from conf import *\n")]
    assert ProjectIndex.build(sources).role_for("train.py").star_names == {"torch"}


def test_a_model_handed_to_a_training_loop_in_another_file_stays_with_its_batches(tmp_path):
    """``helpers.train(net, data)`` and ``train(net, data)`` loop over batches in a file devmod
    gives no device (and that places nothing itself): the model stays and is reported."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helpers.py").write_text(textwrap.dedent("""\
        import torch


        def train(net, data, loss_fn):
            for X, y in data:
                loss_fn(net(X), y).backward()
        """))
    scripts = {
        "a.py": "import torch.nn as nn\nimport helpers\n\nnet = nn.Linear(3, 2)\n"
                "helpers.train(net, [], nn.CrossEntropyLoss())\n",
        "b.py": "import torch.nn as nn\nfrom helpers import train\n\nnet = nn.Linear(3, 2)\n"
                "train(net, [], nn.CrossEntropyLoss())\n",
    }
    for name, text in scripts.items():
        (tmp_path / name).write_text(text)
    paths = sorted(str(p) for p in tmp_path.glob("*.py"))
    reports = list(process_files(paths, Config(), "write", jobs=1))
    for name, text in scripts.items():
        assert (tmp_path / name).read_text() == text
    messages = [f.message for r in reports for f in r.findings if f.code == "DM202"]
    assert len(messages) == 2 and all("a loop in another file whose batches devmod does not move" in m for m in messages)


def test_a_training_loop_of_the_same_file_is_not_another_files_loop(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    script = tmp_path / "dqn.py"
    script.write_text(textwrap.dedent("""\
        import torch
        import torch.nn as nn


        def train(net, data):
            for x in data:
                net(x).sum().backward()


        if __name__ == "__main__":
            q = nn.Linear(4, 2)
            train(q, [torch.ones(1, 4)])
        """))
    report = next(process_files([str(script)], Config(), "diff", jobs=1))
    assert not [f for f in report.findings if "another file" in f.message]


def test_hubconf_is_library_code(tmp_path):
    """``torch.hub.load`` imports ``hubconf.py`` from outside the project: no global device there."""
    (tmp_path / "pyproject.toml").write_text("")
    hub = tmp_path / "hubconf.py"
    hub.write_text("import torch.nn as nn\n\n\ndef tiny():\n    net = nn.Linear(2, 2)\n    return net\n\n\n"
                   "if True:\n    net = tiny()\n    print(net.weight.shape)\n")
    before = hub.read_text()
    list(process_files([str(hub)], Config(), "write", jobs=1))
    assert hub.read_text() == before


def test_a_module_that_brings_its_results_back_to_the_cpu_stays_there_unreported(tmp_path):
    """``conv1d(x.cuda(), w.cuda()).cpu()`` then computed on with its own buffer: the class lives
    on the CPU by design, so its users do not move it (and a second run changes nothing)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "feat.py").write_text(textwrap.dedent("""\
        import torch


        class Spec(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("basis", torch.randn(6, 1, 4))
                self.register_buffer("mel", torch.randn(2, 6))

            def transform(self, x):
                return torch.conv1d(x.cuda(), self.basis.cuda(), stride=2).cpu()

            def forward(self, y):
                return torch.matmul(self.mel, self.transform(y))
        """))
    run = tmp_path / "run.py"
    run.write_text("import torch\nfrom feat import Spec\n\nif __name__ == '__main__':\n    spec = Spec()\n"
                   "    print(spec(torch.rand(1, 1, 16)).shape)\n")
    paths = [str(tmp_path / "feat.py"), str(run)]
    reports = list(process_files(paths, Config(), "write", jobs=1))
    assert "spec = Spec()\n" in run.read_text() and "device" not in run.read_text()
    assert not [f for r in reports for f in r.findings if not f.fixed]
    assert not any(r.changed for r in process_files(paths, Config(), "check", jobs=1))


def test_a_training_loop_re_exported_by_a_package_is_another_files_loop(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "d2l"
    package.mkdir()
    (package / "__init__.py").write_text("from .train import *\n")
    (package / "train.py").write_text("import torch\n\n\ndef train_ch3(net, data, loss):\n    for X, y in data:\n"
                                      "        loss(net(X), y).backward()\n")
    script = tmp_path / "nb.py"
    script.write_text("import torch.nn as nn\nimport d2l\n\nnet = nn.Linear(3, 2)\n"
                      "d2l.train_ch3(net, [], nn.CrossEntropyLoss())\n")
    report = next(r for r in process_files([str(script)], Config(), "diff", jobs=1))
    assert not report.diff
    assert any("`d2l.train_ch3`" in f.message for f in report.findings)


def test_a_module_holding_a_cpu_resident_part_stays_on_the_cpu_too(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "stft.py").write_text(textwrap.dedent("""\
        import torch


        class STFT(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("basis", torch.randn(6, 1, 4))

            def transform(self, x):
                return torch.conv1d(x.cuda(), self.basis.cuda(), stride=2).cpu()


        class MelSTFT(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.stft_fn = STFT()
                self.register_buffer("mel", torch.randn(2, 6))

            def forward(self, y):
                return torch.matmul(self.mel, self.stft_fn.transform(y))
        """))
    run = tmp_path / "run.py"
    run.write_text("import torch\nfrom stft import MelSTFT\n\nif __name__ == '__main__':\n    m = MelSTFT()\n"
                   "    print(m(torch.rand(1, 1, 16)).shape)\n")
    list(process_files([str(tmp_path / "stft.py"), str(run)], Config(), "write", jobs=1))
    assert "device" not in run.read_text()


def test_a_notebook_sees_its_projects_training_loops(tmp_path):
    """A notebook is read into the project index too: handing its model to the project's
    ``d2l.train_ch3`` keeps the model where the loop's batches are."""
    import nbformat

    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "d2l"
    package.mkdir()
    (package / "__init__.py").write_text("from .train import *\n")
    (package / "train.py").write_text("import torch\n\n\ndef train_ch3(net, data, loss):\n    for X, y in data:\n"
                                      "        loss(net(X), y).backward()\n")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import torch.nn as nn\nimport d2l"),
                      nbformat.v4.new_code_cell("net = nn.Linear(3, 2)\nd2l.train_ch3(net, [], nn.CrossEntropyLoss())")]
    path = tmp_path / "nb" / "softmax.ipynb"
    path.parent.mkdir()
    nbformat.write(notebook, str(path))
    before = path.read_text()
    reports = list(process_files([str(path)], Config(), "write", jobs=1))
    assert path.read_text() == before
    assert any("`d2l.train_ch3`" in f.message for r in reports for f in r.findings)


def test_a_helper_computed_from_its_unpacked_input_returns_no_host_data():
    # detr's box_ops: ``cx, cy, w, h = x.unbind(-1); return torch.stack([cx - 0.5 * w, ...])`` lives
    # where ``x`` does; taken for host data, its results got ``.to(...)`` in the matcher.
    source = (
        "import torch\n\n"
        "def to_corners(x):\n"
        "    cx, cy, w, h = x.unbind(-1)\n"
        "    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)\n\n"
        "def table(rows):\n"
        "    return torch.tensor(rows)\n"
    )
    summary = summarise("ops.py", source)
    assert summary.tensor_helpers == {"table"}
