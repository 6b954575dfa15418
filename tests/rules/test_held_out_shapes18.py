"""Shapes found by the eighteenth held-out trial (pix2pixHD, moco, pytorch_image_classification,
pytorch-trpo, stable-baselines3, pytorch-pretrained-BigGAN, densenet.pytorch,
wide-residual-networks; docs/real-repos.md "Eighteenth run"). Each test fails on the code before
its fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import rewrite as run

from codemods.config import Config
from codemods.driver import process_files


def _unfixed(result) -> list[str]:
    return [f.code for f in result.findings if not f.fixed]


def test_a_method_that_moves_its_inputs_does_not_take_their_device():
    # pix2pixHD's ``encode_input``: ``label_map.cuda()`` became ``label_map.to(label_map.device)``,
    # a move to where it already is; the batch stayed on the CPU beside a model on the GPU.
    _, result = run("""\
        import torch
        import torch.nn as nn


        class Translator(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)

            def encode(self, label, image):
                rows = label.size(0)
                return self.body(label.cuda() + image.cuda()).view(rows, -1)


        net = Translator().cuda()
        print(net.encode(torch.ones(2, 4), torch.zeros(2, 4)).shape)
    """)
    assert "label.device" not in result.output
    assert "label.to(next(self.parameters()).device)" in result.output


def test_a_part_moved_after_construction_is_not_moved_to_its_own_device():
    # the same helper's second shape: ``self.net.cuda()`` outside ``__init__`` became a move to
    # ``next(self.parameters()).device``, which may be that part's own first parameter.
    _, result = run("""\
        import torch
        import torch.nn as nn


        class Growing(nn.Module):
            def attach(self):
                self.head = nn.Linear(3, 3)
                self.head.cuda()


        net = Growing()
        net.attach()
        print(next(net.parameters()).device)
    """)
    assert "self.head.to(next(self.parameters()).device)" not in result.output
    assert _unfixed(result) == ["DM103"]


def test_a_model_told_its_gpus_is_not_reported_for_data_parallel(tmp_path: Path):
    # pix2pixHD's ``create_model``: ``model.initialize(opt)`` places every network on
    # ``gpu_ids[0]``, then ``DataParallel(model, device_ids=gpu_ids)`` only when there are GPUs.
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "nets.py").write_text(textwrap.dedent("""\
        import torch.nn as nn


        class Painter(nn.Module):
            def setup(self, gpu_ids):
                self.net = nn.Linear(4, 4)
                if gpu_ids:
                    self.net.cuda(gpu_ids[0])

            def forward(self, x):
                return self.net(x)
    """))
    factory = tmp_path / "factory.py"
    factory.write_text(textwrap.dedent("""\
        import torch
        from nets import Painter


        def create(gpu_ids, training):
            painter = Painter()
            painter.setup(gpu_ids)
            if training and gpu_ids:
                painter = torch.nn.DataParallel(painter, device_ids=gpu_ids)
            return painter
    """))
    reports = list(process_files([str(factory), str(tmp_path / "nets.py")], Config(), "check", jobs=1))
    assert [f.code for r in reports if r.path == str(factory) for f in r.findings] == []


def test_a_device_parameter_that_also_takes_auto_is_no_torch_device():
    # stable-baselines3's tests: ``@pytest.mark.parametrize("device", ["cpu", "cuda", "auto"])``;
    # ``torch.zeros(1, device=device)`` raised for "auto", which only the library resolves.
    source, result = run("""\
        import pytest
        import torch


        class Store:
            def __init__(self, device="auto"):
                self.items = []

            def add(self, value):
                self.items.append(value.cpu().numpy())


        @pytest.mark.parametrize("device", ["cpu", "cuda", "auto"])
        def test_store(device):
            store = Store(device=device)
            store.add(torch.zeros(1))
            assert len(store.items) == 1
    """)
    assert result.output == source


def test_a_model_handed_to_a_weight_converter_is_not_moved_before_it():
    # pytorch-pretrained-BigGAN's main block: ``model = load_tf_weights_in_biggan(model, ...)``
    # replaces every parameter with a CPU tensor after the move devmod added; its inputs moved.
    source, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn


        def load_arrays(model, arrays):
            with torch.no_grad():
                for p, a in zip(model.parameters(), arrays):
                    p.data = torch.from_numpy(a)
            return model


        if __name__ == "__main__":
            decoder = nn.Linear(3, 2)
            decoder = load_arrays(decoder, [np.ones((2, 3), np.float32), np.zeros(2, np.float32)])
            z = torch.tensor(np.random.randn(4, 3), dtype=torch.float)
            print(decoder(z).shape)
    """)
    assert result.output == source
