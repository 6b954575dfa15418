"""Shapes left over from the eleventh held-out trial (RAdam, pytorch-grad-cam, tacotron2;
docs/real-repos.md "Eleventh run"). Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap

from all_rules_support import rewrite as run

from codemods.analysis.project import ProjectIndex
from codemods.engine import transform_source


def test_cuda_on_a_module_without_tensors_is_not_reported():
    # RAdam language-model scripts: ``crit = nn.NLLLoss(); crit.cuda()`` under a user's --gpu
    # option moves nothing and runs on every machine; DM103 reported it as needing the user's device.
    source, result = run("""\
        import argparse
        import torch
        import torch.nn as nn

        parser = argparse.ArgumentParser()
        parser.add_argument('--gpu', type=int, default=-1)
        args = parser.parse_args()
        if args.gpu >= 0:
            torch.cuda.set_device(args.gpu)

        judge = nn.NLLLoss()
        judge.cuda()
        print(judge(torch.randn(4, 3).log_softmax(1), torch.tensor([0, 1, 2, 0])))
    """)
    assert result.output == source
    assert not [f for f in result.findings if not f.fixed]


def test_cuda_on_a_module_without_tensors_in_a_package_method_is_not_reported(tmp_path):
    # RAdam adaptive.py: ``nn.LogSoftmax(dim=1).cuda()`` in a model method of an imported file.
    head = textwrap.dedent("""\
        import torch
        from torch import nn


        class Scorer(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.proj = nn.Linear(6, n)

            def log_prob(self, x):
                normalise = nn.LogSoftmax(dim=1).cuda()
                return normalise(self.proj(x))
    """)
    files = [(str(tmp_path / "pkg" / "__init__.py"), ""), (str(tmp_path / "pkg" / "head.py"), head),
             (str(tmp_path / "run.py"), "from pkg.head import Scorer\n")]
    index = ProjectIndex.build(files)
    result = transform_source(head, files[1][0], role=index.role_for(files[1][0]))
    assert not [f for f in result.findings if not f.fixed]


def test_a_list_registered_through_sequential_is_not_reported():
    # RAdam densenet.py / ldnet.py: ``self.layer = nn.Sequential(*self.layer_list)``; DM305 said
    # parameters() missed them, and its unsafe fix would register them twice.
    source, result = run("""\
        import torch.nn as nn


        class Tower(nn.Module):
            def __init__(self, depth, width):
                super().__init__()
                self.stages = [nn.Linear(width, width) for _ in range(depth)]
                self.trunk = nn.Sequential(*self.stages)
                self.extra = [nn.Linear(width, width), nn.Linear(width, width)]
                self.more = nn.ModuleList(self.extra)

            def reinit(self):
                for stage in self.stages:
                    stage.reset_parameters()

            def forward(self, x):
                return self.trunk(x)
    """)
    assert result.output == source
    assert not [f for f in result.findings if not f.fixed]


def test_the_device_is_chosen_after_the_script_picks_its_gpus():
    # RAdam cifar.py: ``os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu_id`` below the imports; a
    # device defined above it checks for a GPU first, which fixes the GPU list and ignores --gpu-id.
    source, result = run("""\
        import argparse
        import os
        import torch
        import torch.nn as nn

        parser = argparse.ArgumentParser()
        parser.add_argument('--gpu-id', default='0', type=str)
        args = parser.parse_args()

        os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu_id
        net = nn.DataParallel(nn.Linear(4, 2)).cuda()
        print(net(torch.randn(3, 4).cuda()).shape)
    """)
    out = result.output
    assert out.index("os.environ['CUDA_VISIBLE_DEVICES']") < out.index("device = torch.device(")
    assert "nn.DataParallel(nn.Linear(4, 2)).to(device)" in out


def test_no_device_at_import_when_a_function_picks_the_gpus():
    # The same choice made in main(): any module-level device would run before it, so nothing is
    # rewritten and each `.cuda()` is reported with the reason.
    source, result = run("""\
        import os
        import sys
        import torch


        def main():
            os.environ.setdefault("CUDA_VISIBLE_DEVICES", sys.argv[1])
            print(torch.ones(2).cuda())


        if __name__ == "__main__":
            main()
    """)
    assert result.output == source
    reports = [f for f in result.findings if not f.fixed]
    assert reports and all("sets `CUDA_VISIBLE_DEVICES`" in f.message for f in reports)


def test_a_model_handed_on_to_an_object_by_a_helper_is_not_moved_alone():
    # pytorch-grad-cam notebook: ``visualize(model)`` hands the model to an explainer object that
    # runs it on an input it makes from NumPy; moving only the model broke the notebook.
    source, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn


        class Explainer:
            def __init__(self, model):
                self.model = model

            def __call__(self, x):
                return self.model(x)


        def visualize(model):
            x = torch.from_numpy(np.zeros((1, 4), dtype=np.float32))
            return Explainer(model)(x)


        net = nn.Linear(4, 2)
        net.eval()
        print(visualize(net))
    """)
    assert result.output == source
    reports = [f for f in result.findings if not f.fixed]
    assert [f.code for f in reports] == ["DM202"] and "handed to `Explainer`" in reports[0].message


def test_a_model_kept_by_a_library_object_that_runs_it_is_not_moved_alone():
    # grad-cam's Deep Feature Factorizations notebook: ``DeepFeatureFactorization(model=model, ...)``
    # then ``dff(input_tensor)``: the library runs the model on an input it does not move.
    source, result = run("""\
        import numpy as np
        import torch
        from torchvision.models import resnet18
        from explainers import Factorizer


        def show(model, image):
            x = torch.from_numpy(image).permute(2, 0, 1)[None]
            fac = Factorizer(model=model, layer=model.layer4)
            return fac(x, 3)


        net = resnet18()
        net.eval()
        print(show(net, np.zeros((8, 8, 3), dtype=np.float32)))
    """)
    assert result.output == source
    reports = [f for f in result.findings if not f.fixed]
    assert [f.code for f in reports] == ["DM202"] and "handed to `Factorizer`" in reports[0].message


def test_a_model_moved_after_eval_in_one_chain_is_left_as_it_is():
    # grad-cam's Faster R-CNN notebook: ``model.eval().to(device)`` already places the model;
    # devmod added a second ``.to(device)`` where it is built.
    source, result = run("""\
        import torch
        import torchvision

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torchvision.models.resnet18()
        model.eval().to(device)
        print(model(torch.rand(1, 3, 32, 32, device=device)).shape)
    """)
    assert result.output == source
