"""Shapes found by the twenty-seventh held-out trial and the open shapes of earlier runs
(docs/real-repos.md "Twenty-seventh run"). Each test fails on the code before its fix (72007e7)."""

from __future__ import annotations

from pathlib import Path

from all_rules_support import project_reports, rewrite as run

from codemods.config import Config
from codemods.driver import process_files

_AGGREGATOR = """\
    import torch
    import torch.nn as nn


    class SetMean(nn.Module):
        def __init__(self, table):
            super().__init__()
            self.table = table

        def forward(self, ids, groups):
            members = [set(g) | {ids[k]} for k, g in enumerate(groups)]
            order = sorted(set.union(*members))
            weights = torch.zeros(len(members), len(order))
            for r, m in enumerate(members):
                for n in m:
                    weights[r, order.index(n)] = 1.0 / len(m)
            return weights.mm(self.table(torch.LongTensor(order)))

        def sample(self, count):
            codes = torch.randint(0, 10, (count,))
            return self.table(codes)
"""


def _project(tmp_path: Path, files: dict[str, str]) -> dict[str, object]:
    return project_reports(tmp_path, files)


def test_a_model_of_an_imported_class_that_makes_cpu_tensors_in_forward_stays_and_is_reported(tmp_path: Path):
    # graphsage's aggregator, imported by its driver (the 25th run): its forward takes lists of ids and
    # builds ``torch.zeros(...)`` and ``torch.LongTensor(ids)``, which devmod gives no device in library
    # code. The driver's model got ``.to(device)`` and every forward then mixed devices.
    reports = _project(tmp_path, {"sets.py": _AGGREGATOR, "run.py": """\
        import torch.nn as nn
        from sets import SetMean

        agg = SetMean(nn.Embedding(10, 4))
        print(agg([1, 2, 3], [{4, 5}, {6}, {7, 8, 9}]).shape)
    """})
    run = reports["run.py"]
    assert not run.diff
    assert [f.code for f in run.findings] == ["DM202"]
    assert "sets.py:13" in run.findings[0].message and "`SetMean`" in run.findings[0].message


def test_a_model_of_an_imported_class_still_moves_when_the_method_that_makes_cpu_tensors_is_not_run(tmp_path: Path):
    # Only ``sample(count)`` would compute with a tensor devmod cannot place; this driver never calls it.
    aggregator = _AGGREGATOR.replace("def forward(self, ids, groups):", "def forward(self, x):\n"
                                     "            return self.table(x)\n\n        def pool(self, ids, groups):")
    reports = _project(tmp_path, {"sets.py": aggregator, "run.py": """\
        import torch
        import torch.nn as nn
        from sets import SetMean

        agg = SetMean(nn.Embedding(10, 4))
        print(agg(torch.tensor([1, 2])).shape)
    """})
    assert "SetMean(nn.Embedding(10, 4)).to(device)" in reports["run.py"].diff
    reports = _project(tmp_path, {"run.py": """\
        import torch
        import torch.nn as nn
        from sets import SetMean

        agg = SetMean(nn.Embedding(10, 4))
        print(agg(torch.tensor([1, 2])).shape, agg.sample(3).shape)
    """, "sets.py": aggregator})
    assert not reports["run.py"].diff and "sets.py:23" in reports["run.py"].findings[0].message


def test_a_variable_wrapper_that_passes_on_its_callers_keywords_is_left_as_it_is():
    # ewc.pytorch's ``def variable(t, use_cuda=True, **kwargs): ... return Variable(t, **kwargs)`` became
    # ``return t.detach()``, dropping a caller's ``requires_grad=True`` (then "does not require grad").
    _, result = run("""\
        import torch
        from torch.autograd import Variable


        def wrap(t, **opts):
            return Variable(t, **opts)


        x = wrap(torch.ones(3), requires_grad=True)
        print(torch.autograd.grad((x * x).sum(), x))
    """)
    assert "detach" not in result.output and "Variable(t, **opts)" in result.output
    assert not result.findings


def test_each_notebook_cell_that_defines_its_own_device_keeps_a_converted_definition(tmp_path: Path):
    # pytorch-lr-finder's notebooks: each experiment cell starts with ``device = torch.device('cuda')``;
    # devmod converted the first and dropped the others as repeated, so a later cell no longer ran alone.
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import torch\nimport torch.nn as nn"), *(
        nbformat.v4.new_code_cell(f"device = torch.device('cuda')\nnet{k} = nn.Linear(2, 2).to(device)\n"
                                  f"print(net{k}(torch.ones(1, 2, device=device)))") for k in (1, 2))]
    nbformat.write(notebook, tmp_path / "experiments.ipynb")
    (report,) = process_files([str(tmp_path / "experiments.ipynb")], Config(), "diff", jobs=1)
    converted = '+device = torch.device("cuda" if torch.cuda.is_available() else "cpu")'
    assert report.diff.count(converted) == 2 and "-device = torch.device('cuda')\n net2" not in report.diff


def test_an_item_of_a_dataset_moves_with_the_model_it_feeds():
    # pointnet's ``show_seg.py``: ``point, seg = d[idx]`` (``d`` a ShapeNetDataset) fed the model after a
    # reshape; the model got ``.to(device)`` and its input stayed on the CPU (a device error on a GPU).
    _, result = run("""\
        import torch
        import torch.nn as nn


        class Clouds(torch.utils.data.Dataset):
            def __getitem__(self, i):
                return torch.rand(40, 3), torch.randint(0, 4, (40,))

            def __len__(self):
                return 8


        store = Clouds()
        cloud, parts = store[2]
        tagger = nn.Conv1d(3, 4, 1)
        cloud = cloud.transpose(1, 0).unsqueeze(0)
        print(tagger(cloud).argmax(1))
        single = store[3][0]
        print(tagger(single.t().unsqueeze(0)).shape)
    """)
    assert "tagger = nn.Conv1d(3, 4, 1).to(device)" in result.output
    assert "cloud, parts = store[2]\ncloud, parts = cloud.to(device), parts.to(device)\n" in result.output
    assert "single = store[3][0].to(device)" in result.output


def test_a_loop_batch_rebound_by_a_peek_at_another_loader_is_not_reported():
    # pointnet's training scripts: ``j, data = next(enumerate(testdataloader, 0))`` inside the loop over
    # ``data``; both batches are unpacked and moved by the author, yet DM203 said "`data` is indexed in
    # several places".
    _, result = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        pairs = TensorDataset(torch.rand(16, 4), torch.randint(0, 2, (16,)))
        train_feed = DataLoader(pairs, batch_size=4)
        check_feed = DataLoader(pairs, batch_size=4)
        net = nn.Linear(4, 2)
        net.cuda()
        for step, data in enumerate(train_feed, 0):
            feats, labels = data
            feats, labels = feats.cuda(), labels.cuda()
            nn.functional.cross_entropy(net(feats), labels).backward()
            if step % 2 == 0:
                k, data = next(enumerate(check_feed, 0))
                feats, labels = data
                feats, labels = feats.cuda(), labels.cuda()
                print(nn.functional.cross_entropy(net(feats), labels).item())
    """)
    assert not [f for f in result.findings if f.code == "DM203"]
    assert "feats, labels = feats.to(device), labels.to(device)" in result.output


def test_cuda_calls_under_a_negated_cpu_switch_are_not_reported():
    # Pointnet2's scripts: ``if not args.use_cpu: classifier = classifier.cuda()`` follows the user's
    # switch; DM103 reported it as if it ignored the user's settings (9 false reports).
    code, result = run("""\
        import argparse
        import torch
        import torch.nn as nn


        def main(opts):
            net = nn.Linear(4, 2)
            if not opts.use_cpu:
                net = net.cuda()
            x = torch.rand(3, 4)
            if opts.use_cpu:
                pass
            else:
                x = x.cuda()
            print(net(x).sum().item())


        if __name__ == "__main__":
            ap = argparse.ArgumentParser()
            ap.add_argument("--use_cpu", action="store_true", default=False)
            main(ap.parse_args())
    """)
    assert not result.findings and result.output == code


def test_a_cuda_device_in_a_helper_handed_a_tensor_becomes_that_tensors_device():
    # dgcnn's ``get_graph_feature(x, ...)`` (run from the model's forward): ``device = torch.device('cuda')``
    # became the global CPU-fallback device instead of ``x.device``: a model kept on the CPU on a GPU
    # machine still mixed devices.
    _, result = run("""\
        import torch
        import torch.nn as nn


        def offsets(x):
            dev = torch.device('cuda')
            return torch.arange(0, x.size(0), device=dev).view(-1, 1) * x.size(2)


        class Edges(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(1, 2)

            def forward(self, x):
                return self.lin(offsets(x).float())
    """)
    assert "dev = x.device" in result.output and "is_available" not in result.output


def test_a_factory_that_only_builds_and_returns_its_model_places_nothing():
    # The 28th run's mobilenet-v2: ``def mobilenet_v2(pretrained=True): model = MobileNetV2(); ...
    # model.load_state_dict(...); return model``, called by the file's main block, got ``.to(device)``:
    # every caller that kept it on the CPU then fed it CPU tensors on a GPU machine.
    _, result = run("""\
        import torch.nn as nn


        class TinyNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())

            def forward(self, x):
                return self.body(x)


        def tiny_net(pretrained=False):
            model = TinyNet()
            if pretrained:
                model.eval()
            return model


        if __name__ == "__main__":
            net = tiny_net(True)
    """)
    assert "model = TinyNet()\n" in result.output
    assert "net = tiny_net(True).to(device)" in result.output


def test_a_model_from_a_factory_that_places_it_itself_is_not_moved_again():
    # The 28th run's Prototypical Networks: ``init_protonet(opt)`` returns ``Net().to(device)`` with
    # ``device = 'cuda:0' if torch.cuda.is_available() and opt.cuda else 'cpu'``; the caller's new
    # ``.to(device)`` overrode the user's ``--cuda`` switch for the model only.
    _, result = run("""\
        import torch
        import torch.nn as nn


        def make_net(opt):
            device = 'cuda:0' if torch.cuda.is_available() and opt.cuda else 'cpu'
            model = nn.Linear(4, 2).to(device)
            return model


        def main(opt):
            model = make_net(opt)
            device = 'cuda:0' if torch.cuda.is_available() and opt.cuda else 'cpu'
            x = torch.randn(3, 4).to(device)
            print(model(x))
    """)
    assert "model = make_net(opt)\n" in result.output
    # Nor are its inputs given the shared device: they stay with the model where the author put it.
    _, result = run("""\
        import torch
        import torch.nn as nn


        def make_net(use_cuda):
            model = nn.Linear(4, 2)
            if use_cuda:
                model = model.cuda()
            return model


        def main(use_cuda):
            model = make_net(use_cuda)
            x = torch.randn(3, 4)
            print(model(x))


        if __name__ == "__main__":
            main(False)
    """)
    assert "model = make_net(use_cuda)\n" in result.output and "x = torch.randn(3, 4)\n" in result.output


def test_a_random_mask_read_only_as_python_booleans_stays_on_the_cpu():
    # The 28th run's reformer-pytorch: ``to_drop = torch.empty(n).uniform_(0, 1) < self.layer_dropout``,
    # read as ``... for block, drop in zip(self.blocks, to_drop) if not drop``, got ``device=x.device``:
    # every read then waits for the GPU (and the draw moves to the CUDA generator).
    code, result = run("""\
        import torch
        from torch import nn


        class SkipStack(nn.Module):
            def __init__(self, width, depth, p=0.2):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
                self.p = p

            def forward(self, h):
                coin = torch.empty(len(self.layers)).uniform_(0, 1) < self.p
                for layer, skip in zip(self.layers, coin):
                    if not skip:
                        h = h + layer(h)
                return h

            def forward_indexed(self, h):
                coin = torch.rand(len(self.layers)) < self.p
                for k, layer in enumerate(self.layers):
                    if coin[k]:
                        continue
                    h = h + layer(h)
                return h
    """)
    assert result.output == code


def test_an_input_made_with_arithmetic_stays_beside_a_model_devmod_cannot_place():
    # The 29th run's wavenet tests: ``net = GrownNet(width=6)`` from a package devmod cannot see, never
    # moved, and ``probe = torch.rand(1, 6) * 2 - 1`` got ``device=device`` (a plain ``torch.rand`` did not).
    code, result = run("""\
        import torch
        from somepkg.models import GrownNet

        net = GrownNet(width=6)
        probe = torch.rand(1, 6) * 2 - 1
        print(net(probe))
    """)
    assert result.output == code


def test_a_model_handed_to_a_trainer_class_of_another_file_stays_with_its_batches(tmp_path: Path):
    # wavenet's ``WavenetTrainer(model=model, ...)`` casts each batch with ``x.type(self.dtype)``, a CPU
    # type by default; the driver's model got ``.to(device)`` and every training step mixed devices.
    reports = _project(tmp_path, {"fitlib.py": """\
        import torch


        class Fitter:
            def __init__(self, net, batches, cast=torch.FloatTensor):
                self.net = net
                self.batches = batches
                self.cast = cast

            def fit(self):
                for xb in self.batches:
                    print(self.net(xb.type(self.cast)).sum())
    """, "run_fit.py": """\
        import torch
        from torch import nn
        from fitlib import Fitter

        net = nn.Linear(3, 2)
        batches = [torch.rand(4, 3) for _ in range(2)]
        Fitter(net, batches).fit()
    """})
    run_fit = reports["run_fit.py"]
    assert not run_fit.diff and [f.code for f in run_fit.findings] == ["DM202"]
    assert "handed to `Fitter`" in run_fit.findings[0].message
    # Handed by keyword, with the class from a star import (wavenet's ``test_script.py``).
    reports = _project(tmp_path, {"run_fit.py": """\
        import torch
        from torch import nn
        from fitlib import *

        net = nn.Linear(3, 2)
        fitter = Fitter(net=net, batches=[torch.rand(4, 3)])
        fitter.fit()
    """})
    assert not reports["run_fit.py"].diff and "handed to `Fitter`" in reports["run_fit.py"].findings[0].message


def test_a_model_method_that_builds_its_input_with_a_legacy_constructor_holds_the_model_back(tmp_path: Path):
    # wavenet's ``generate_fast``: ``torch.FloatTensor(1, n).zero_()`` fed to the model's own layers,
    # in a method the driver calls; the 27th run's check missed the chained ``.zero_()``.
    reports = _project(tmp_path, {"genlib.py": """\
        import torch
        from torch import nn
        from torch.autograd import Variable


        class Stepper(nn.Module):
            def __init__(self, width=5):
                super().__init__()
                self.width = width
                self.proj = nn.Linear(width, width)

            def forward(self, x):
                return self.proj(x)

            def roll_out(self, steps, first=None):
                if first is not None:
                    steps = steps + first.size(0)  # a tensor only when given: no device on the default path
                cur = Variable(torch.FloatTensor(1, self.width).zero_())
                outs = []
                for _ in range(steps):
                    cur = torch.tanh(self.proj(cur))
                    outs.append(cur.detach().cpu().numpy())
                return outs
    """, "run_gen.py": """\
        import torch
        from genlib import Stepper

        net = Stepper(width=5)
        print(len(net.roll_out(3)))
    """})
    run_gen = reports["run_gen.py"]
    assert not run_gen.diff and "genlib.py:18" in run_gen.findings[0].message


def test_a_legacy_type_alias_that_follows_the_machine_is_not_reported_where_it_is_passed_on():
    # wavenet's scripts: ``dtype = torch.FloatTensor`` then ``if use_cuda: dtype = torch.cuda.FloatTensor``,
    # handed on as ``dtype=dtype``; DM304 reported each use (7 false reports).
    _, result = run("""\
        import torch
        from torch import nn

        cast = torch.FloatTensor
        on_gpu = torch.cuda.is_available()
        if on_gpu:
            cast = torch.cuda.FloatTensor


        def fit(net, batches, cast):
            for xb in batches:
                print(net(xb.type(cast)).sum())


        fit(nn.Linear(3, 2), [torch.rand(4, 3)], cast=cast)
    """)
    assert not [f for f in result.findings if f.code == "DM304"]


def test_a_batch_handed_to_a_function_of_the_file_that_moves_it_is_not_moved_again():
    # The 30th run's wavenet_vocoder ``evaluate.py``: ``for idx, (x, y, c, g, lengths) in enumerate(loader)``
    # handed ``c`` and ``g`` to ``batch_wavegen``, which moves them itself (``None if g is None else
    # g.to(device)``); DM203 inserted ``g.to(device)`` at the top of the loop, and ``g`` is None there.
    code, result = run("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader

        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        def pack(items):
            return torch.stack([a for a, _ in items]), None


        def run_net(net, feats, spk=None):
            feats = feats.to(dev)
            spk = None if spk is None else spk.to(dev)
            return net(feats)


        if __name__ == "__main__":
            loader = DataLoader([(torch.randn(4), 0) for _ in range(6)], batch_size=3, collate_fn=pack)
            net = nn.Linear(4, 2).to(dev)
            for step, (feats, spk) in enumerate(loader):
                print(step, run_net(net, feats, spk).shape)
    """)
    assert result.output == code and not result.findings


def test_a_batch_handed_to_a_function_of_another_file_that_moves_it_is_not_moved_again(tmp_path: Path):
    # wavenet_vocoder's ``evaluate.py`` imports ``batch_wavegen`` from ``synthesis.py``.
    reports = _project(tmp_path, {"synth.py": """\
        import torch

        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        def run_net(net, feats, spk=None):
            feats = feats.to(dev)
            spk = None if spk is None else spk.to(dev)
            return net(feats)
    """, "evaluate.py": """\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader
        from synth import dev, run_net


        def pack(items):
            return torch.stack([a for a, _ in items]), None


        if __name__ == "__main__":
            loader = DataLoader([(torch.randn(4), 0) for _ in range(6)], batch_size=3, collate_fn=pack)
            net = nn.Linear(4, 2).to(dev)
            for step, (feats, spk) in enumerate(loader):
                print(step, run_net(net, feats, spk=spk).shape)
    """})
    assert not reports["evaluate.py"].diff and not reports["evaluate.py"].findings
