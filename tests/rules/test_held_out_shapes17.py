"""Shapes found by the seventeenth held-out trial (SPADE, BigGAN-PyTorch, Rainbow, the
Super-Resolution tutorial, glide-text2im, pretrained-models.pytorch, MAML-Pytorch, ResNeSt;
docs/real-repos.md "Seventeenth run"). Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import rewrite as run

from codemods.config import Config
from codemods.driver import process_files


def _unfixed(result) -> list[str]:
    return [f.code for f in result.findings if not f.fixed]


def test_a_tensor_type_chosen_by_the_gpu_switch_is_not_reported():
    # SPADE's ``torch.cuda.FloatTensor if self.use_gpu() else torch.FloatTensor``: the author's
    # own choice, which works on both machines. DM304 reported it.
    source, result = run("""\
        import torch
        import torch.nn as nn


        class Head(nn.Module):
            def __init__(self, gpu_ids):
                super().__init__()
                self.Tensor = torch.cuda.FloatTensor if len(gpu_ids) > 0 else torch.FloatTensor

            def forward(self, x):
                return x + self.Tensor(x.size()).fill_(0.5)
    """)
    assert result.output == source and not _unfixed(result)


def test_a_loop_variable_named_like_a_block_class_builds_nothing():
    # BigGAN's TF-Hub port: ``for i, (code, GBlock) in enumerate(zip(codes, self.GBlock))`` then
    # ``GBlock(h, code)``; DM401 took the call for a layer built in ``forward``.
    source, result = run("""\
        import torch.nn as nn


        class Stage(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 3, 1)

            def forward(self, x):
                return self.conv(x)


        class Tower(nn.Module):
            def __init__(self):
                super().__init__()
                self.Stage = nn.ModuleList([Stage() for _ in range(3)])

            def forward(self, x):
                for index, Stage in enumerate(self.Stage):
                    x = Stage(x) + index
                return x
    """)
    assert result.output == source and not _unfixed(result)


def test_an_optional_tensor_parameter_gives_no_device(tmp_path: Path):
    # BigGAN's ``sample_sheet(G, ..., z_=None)``: ``device='cuda'`` became ``device=z_.device``,
    # an AttributeError on the default path.
    (tmp_path / "setup.py").write_text("")
    sheets = tmp_path / "sheets.py"
    sheets.write_text(textwrap.dedent("""\
        import torch


        def grid(G, count, noise=None):
            rows = torch.arange(count, device="cuda")
            if noise is None or noise.size(0) < count:
                noise = torch.randn(count, 8, device="cuda")
            return G(noise[:count]) + rows[:, None]
    """))
    (tmp_path / "main.py").write_text("import torch\nimport sheets\n\nprint(sheets.grid)\n")
    list(process_files([str(sheets), str(tmp_path / "main.py")], Config(), "write", jobs=1))
    assert "noise.device" not in sheets.read_text()


def test_a_model_kept_inside_a_checkpoint_keeps_its_device():
    # the awd-lstm shape through a checkpoint dict: ``net = ckpt["model"]`` then ``net(x)`` with
    # ``x`` moved under ``--cuda``; ``map_location="cpu"`` left the model behind on a GPU run.
    _, result = run("""\
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_true")
        args = parser.parse_args()

        bundle = torch.load("bundle.pt", weights_only=False)
        scorer = bundle["scorer"]
        scorer.eval()
        probe = torch.rand(2, 3)
        if args.cuda:
            probe = probe.cuda()
        print(scorer(probe))
    """)
    assert "map_location" not in result.output


def test_an_alias_does_not_hide_a_transform_input():
    # pretrained-models' ``visu_arch.py``: ``x = data`` (or ``Variable(data)``) with ``data`` from
    # a torchvision transform; the model moved and ``x`` stayed behind.
    source, result = run("""\
        import torch
        import torch.nn as nn
        import torchvision.transforms as T
        from PIL import Image

        classifier = nn.Linear(6, 3)
        print(classifier(torch.randn(1, 6)))
        pixels = T.ToTensor()(Image.new("L", (6, 1))).view(1, 6)
        batch = pixels
        print(classifier(batch))
    """)
    assert result.output == source
    assert _unfixed(result) == ["DM202"]


def test_a_host_tensor_compared_with_the_output_by_a_torch_function_moves_too():
    # pretrained-models' ``resnet152_load.py``: ``torch.dist(output, reference)`` with the
    # reference read from NumPy; the model and its input moved, the reference did not.
    _, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn

        expected = torch.from_numpy(np.ones((1, 3), dtype=np.float32))
        layer = nn.Linear(5, 3)
        got = layer(torch.ones(1, 5))
        print(torch.dist(got, expected))
    """)
    assert "layer = nn.Linear(5, 3).to(device)" in result.output
    assert "expected = torch.from_numpy(np.ones((1, 3), dtype=np.float32)).to(device)" in result.output


def test_a_sub_module_moved_in_init_gets_the_right_advice():
    # SPADE's ``VGGLoss.__init__``: ``self.vgg = VGG19().cuda()`` was told to "register the tensor
    # as a buffer"; a module moves with its parent's ``.to(device)``.
    _, result = run("""\
        import torch.nn as nn


        class Trunk(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)

            def forward(self, x):
                return self.conv(x)


        class TrunkLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk = Trunk().cuda()

            def forward(self, a, b):
                return (self.trunk(a) - self.trunk(b)).abs().mean()
    """)
    messages = [f.message for f in result.findings if f.code == "DM103" and not f.fixed]
    assert len(messages) == 1 and "sub-module built here moves with the model" in messages[0]
    assert "buffer" not in messages[0]


def test_a_host_tensor_compared_in_a_forward_hook_moves_too():
    # resnet152_load.py does the comparison in a forward hook: the hook's ``output`` is the
    # model's output, so the NumPy reference it meets moves with the model.
    _, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn

        reference = torch.from_numpy(np.zeros((1, 3), dtype=np.float32))


        def compare(module, inputs, output):
            print(torch.dist(output.data, reference))


        probe = nn.Linear(5, 3)
        probe.register_forward_hook(compare)
        probe(torch.ones(1, 5))
    """)
    out = result.output
    assert "probe = nn.Linear(5, 3).to(device)" in out
    assert "reference = torch.from_numpy(np.zeros((1, 3), dtype=np.float32)).to(device)" in out
