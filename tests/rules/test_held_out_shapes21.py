"""Shapes found by the twenty-first held-out trial (docs/real-repos.md "Twenty-first run"). Each
test fails on the code before its fix (8c3d4ba)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import rewrite as run

from codemods.config import Config
from codemods.driver import process_files


def test_a_cuda_type_in_an_isinstance_tuple_is_not_reported():
    # torchMoji's ``isinstance(x, (torch.LongTensor, torch.cuda.LongTensor))``: a type test.
    _, result = run("""\
        import numpy as np
        import torch


        def as_tensor(seqs):
            if isinstance(seqs, (torch.LongTensor, torch.cuda.LongTensor)):
                return seqs
            return torch.from_numpy(seqs.astype("int64"))
    """)
    assert result.findings == []


def test_an_array_parameter_gives_no_device():
    # torchMoji's ``forward(self, seqs)`` turns the NumPy array ``seqs`` into a tensor; devmod wrote
    # ``.to(seqs.device)``, which an array has not (or is always the CPU).
    _, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn


        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(10, 4)

            def forward(self, seqs):
                x = torch.from_numpy(seqs.astype("int64"))
                return self.emb(x).sum(1)
    """)
    assert "seqs.device" not in result.output


def test_a_model_handed_a_numpy_array_stays_with_it(tmp_path: Path):
    # torchMoji's examples: ``model = torchmoji_emojis(path).to(device)`` then ``model(tokens)`` with
    # a NumPy array that ``forward`` turns into a CPU tensor.
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "lib.py").write_text(textwrap.dedent("""\
        import torch
        import torch.nn as nn


        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(10, 4)

            def forward(self, seqs):
                return self.emb(torch.from_numpy(seqs.astype("int64"))).sum(1)


        def build():
            return Enc()
    """))
    script = tmp_path / "encode.py"
    script.write_text(textwrap.dedent("""\
        import numpy as np
        import torch
        from lib import build

        model = build()
        print(model(np.array([[1, 2, 3]])))
    """))
    reports = list(process_files([str(script), str(tmp_path / "lib.py")], Config(), "diff", jobs=1))
    assert not reports[0].changed
    assert "comes from NumPy" in reports[0].findings[0].message


def test_loaded_indices_for_a_sampler_stay_on_the_cpu():
    # temperature_scaling's demo: ``indices = torch.load(f)`` feeds ``SubsetRandomSampler``; with
    # ``map_location=device`` the sampler yields CUDA indices.
    _, result = run("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        from torch.utils.data.sampler import SubsetRandomSampler

        indices = torch.load("valid_indices.pth")
        loader = DataLoader(TensorDataset(torch.randn(100, 3)), batch_size=8, sampler=SubsetRandomSampler(indices))
        net = torch.nn.Linear(3, 2).cuda()
        for (x,) in loader:
            net(x.cuda())
    """)
    assert 'torch.load("valid_indices.pth", map_location="cpu")' in result.output


def test_a_cpu_demo_that_imports_torch_in_its_main_block_is_not_reported():
    # RepDistiller's ``models/resnet.py`` demo: ``import torch`` inside the main block, all on the CPU.
    # devmod could not define the device there and reported three placements (false reports).
    _, result = run("""\
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x)


        if __name__ == "__main__":
            import torch

            x = torch.randn(2, 4)
            net = Net()
            print(net(x).shape)
    """)
    assert result.findings == []


def test_a_model_moving_itself_in_its_method_is_reported_not_moved_to_itself():
    # temperature_scaling's ``set_temperature``: ``self.cuda()`` became ``self.to(next(self.parameters())
    # .device)``, a move to where the model already is.
    _, result = run("""\
        import torch
        from torch import nn


        class Scaled(nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model
                self.t = nn.Parameter(torch.ones(1))

            def fit(self, loader):
                self.cuda()
                for x in loader:
                    print(self.model(x.cuda()) / self.t)
    """)
    assert "self.to(next(self.parameters()).device)" not in result.output
    assert "moves the model itself" in " ".join(f.message for f in result.findings if not f.fixed)
