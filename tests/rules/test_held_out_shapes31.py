"""Shapes found by the thirty-first held-out trial (docs/real-repos.md "Thirty-first run").
Each test fails on the code the run measured (8bebe9e)."""

from __future__ import annotations

from textwrap import dedent

from all_rules_support import run

from codemods.config import Config
from codemods.driver import process_files


def test_a_report_names_the_option_that_leaves_the_device_to_the_user():
    # attention-transfer's imagenet.py: a ``--cuda`` option (never read) keeps the file's ``.cuda()``;
    # the reason said "takes its device from the user's settings (e.g. `args.device`)".
    _, open_findings = run("""\
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_true")
        opt = parser.parse_args()
        table = torch.ones(3).cuda()
    """)
    [finding] = [f for f in open_findings if f.code == "DM103"]
    assert "the file has a `--cuda` option" in finding.message
    assert "args.device" not in finding.message


def test_a_report_in_a_plain_class_says_why_nothing_is_placed_there():
    # monodepth2's Trainer: "devmod cannot tell which device this class uses", of a class that
    # holds ``self.device``: the reason is that devmod places nothing in such a class's methods.
    _, open_findings = run("""\
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, model):
                self.model = model

            def mask_loss(self, mask):
                return F.binary_cross_entropy(mask, torch.ones(mask.shape).cuda())
    """)
    [finding] = [f for f in open_findings if f.code == "DM103"]
    assert "a method of `Trainer`, which is neither a model nor driver code" in finding.message
    assert "cannot tell" not in finding.message


def test_a_batch_moved_key_by_key_in_a_loop_is_not_moved_again():
    # monodepth2's evaluate_pose.py: ``for key, ipt in inputs.items(): inputs[key] = ipt.cuda()``;
    # DM203 added a second move of the whole dict above the author's own.
    out, _ = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader


        def evaluate(data):
            net = nn.Linear(3, 1)
            net.cuda()
            loader = DataLoader(data, batch_size=4)
            outs = []
            for inputs in loader:
                for key, ipt in inputs.items():
                    inputs[key] = ipt.cuda()
                outs.append(net(inputs["x"]))
            return outs


        if __name__ == "__main__":
            evaluate(torch.load("samples.pt"))
    """)
    assert "ipt.to(device)" in out
    assert "for k, v in inputs.items()" not in out


def test_samples_handed_to_a_function_that_builds_a_loader_stay_on_the_cpu():
    # Found while reducing the monodepth2 shape: ``evaluate(samples)`` whose ``def evaluate(data)``
    # wraps ``data`` in a DataLoader with workers; the samples were made on the device.
    out, _ = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader


        def evaluate(data):
            net = nn.Linear(3, 1).cuda()
            return [net(x.cuda()) for x in DataLoader(data, batch_size=4, num_workers=2)]


        if __name__ == "__main__":
            samples = [torch.randn(3) for _ in range(8)]
            evaluate(samples)
            evaluate([{"x": torch.randn(3)} for _ in range(8)])
    """)
    assert "samples = [torch.randn(3) for _ in range(8)]" in out
    assert 'evaluate([{"x": torch.randn(3)} for _ in range(8)])' in out
    assert "net = nn.Linear(3, 1).to(device)" in out


def test_a_parameter_with_a_number_default_gives_no_device():
    # torchdiffeq's bouncing ball: ``simulate(self, nbounces=1)`` hands ``nbounces`` to its own method;
    # devmod wrote ``device=nbounces.device`` on an int (AttributeError on every machine).
    out, _ = run("""\
        import torch
        import torch.nn as nn


        class Falling(nn.Module):
            def __init__(self):
                super().__init__()
                self.start = nn.Parameter(torch.tensor([0.0]))

            def forward(self, t):
                return self.start * t

            def hits(self, count=1):
                return [self.start + k for k in range(count)]

            def trace(self, count=1):
                pieces = []
                for stop in self.hits(count):
                    grid = torch.linspace(0.0, float(stop), 5)
                    pieces.append(self(grid))
                return torch.cat(pieces)


        if __name__ == "__main__":
            print(Falling().trace(count=3).shape)
    """)
    assert "count.device" not in out


def test_layers_handed_to_a_project_model_are_its_parts(tmp_path):
    # AdaIN's train.py: ``vgg = nn.Sequential(*list(vgg.children())[:31])`` handed to ``net.Net(vgg, decoder)``,
    # which the author moves; devmod reported the encoder as handed to "a library object".
    (tmp_path / "parts.py").write_text(dedent("""\
        import torch.nn as nn

        trunk = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4))


        class Pair(nn.Module):
            def __init__(self, enc, dec):
                super().__init__()
                self.enc, self.dec = enc, dec

            def forward(self, a):
                return self.dec(self.enc(a))
    """))
    run_py = tmp_path / "run.py"
    run_py.write_text(dedent("""\
        import torch
        import torch.nn as nn

        import parts

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        enc = nn.Sequential(*list(parts.trunk.children())[:2])
        pair = parts.Pair(enc, nn.Linear(4, 2))
        pair.to(device)
        print(pair(torch.rand(2, 3).to(device)))
    """))
    [report] = process_files([str(run_py)], Config(), "diff", jobs=1)
    assert report.error is None
    assert not report.diff
    assert not report.findings


def test_a_converter_that_fills_layers_and_saves_their_weights_moves_nothing():
    # AdaIN's torch_to_pytorch.py: layers built, filled with ``copy_`` by a helper, added with ``add_module``,
    # and the state dict saved; 17 false DM202 reports ("the loop ... hands its items with the model").
    code = '''\
        import pickle
        import torch
        import torch.nn as nn


        def fill_from(src, dst):
            dst.weight.data.copy_(src.weight)
            if hasattr(dst, "running_mean"):
                dst.running_mean.copy_(src.running_mean)


        def append_to(seq, *layers):
            for layer in layers:
                seq.add_module(str(len(seq._modules)), layer)


        def fill_model(saved, seq):
            for item in saved.modules:
                if type(item).__name__ == "Linear":
                    layer = nn.Linear(item.weight.size(1), item.weight.size(0))
                    fill_from(item, layer)
                    append_to(seq, layer)


        def convert(src, dst):
            with open(src, "rb") as f:
                saved = pickle.load(f)
            out = nn.Sequential()
            fill_model(saved, out)
            torch.save(out.state_dict(), dst)


        if __name__ == "__main__":
            convert("model.t7.pkl", "model.pth")
    '''
    out, open_findings = run(code)
    assert out == dedent(code)
    assert not open_findings


def test_optimizer_state_loaded_before_a_function_moves_the_model_is_reported():
    # tacotron (the 29th run's open item): the checkpoint's optimizer state is loaded in the main block,
    # then ``fit(net, opt)`` moves ``net`` (``net = net.cuda()``): the state stays on the CPU. ``verify``
    # named DM403 for it; ``apply`` said nothing.
    _, open_findings = run("""\
        import torch
        from torch import nn, optim

        use_gpu = torch.cuda.is_available()


        def fit(net, opt):
            if use_gpu:
                net = net.cuda()
            x = torch.rand(2, 3)
            if use_gpu:
                x = x.cuda()
            net(x).sum().backward()
            opt.step()


        if __name__ == "__main__":
            net = nn.Linear(3, 1)
            opt = optim.Adam(net.parameters())
            ck = torch.load("ck.pt")
            net.load_state_dict(ck["m"])
            opt.load_state_dict(ck["o"])
            fit(net, opt)
    """)
    [finding] = [f for f in open_findings if f.code == "DM403"]
    assert finding.line == 22 and "`fit` (line 23) moves `net`" in finding.message


def test_a_model_kept_in_a_python_list_still_moves_but_one_in_a_module_list_is_a_part():
    # The converter fix must not read ``nets.append(net)`` (a plain list, run later on its own) as
    # making ``net`` part of another model; ``parts.append(net)`` on an ``nn.ModuleList`` does.
    out, _ = run("""\
        import torch
        import torch.nn as nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        x = torch.randn(2, 3).to(device)
        nets = []
        net = nn.Linear(3, 1)
        nets.append(net)
        for m in nets:
            print(m(x))
        parts = nn.ModuleList([])
        head = nn.Linear(3, 1)
        parts.append(head)
        parts.to(device)
        print(parts[0](x))
    """)
    assert "net = nn.Linear(3, 1).to(device)" in out
    assert "head = nn.Linear(3, 1)\n" in out


def test_numpy_of_arithmetic_with_a_cpu_tensor_gets_no_second_cpu():
    # RAFT's evaluate.py: ``epe = torch.sum((flow_pr[0].cpu() - flow_gt) ** 2, dim=0).sqrt()`` then
    # ``epe.view(-1).numpy()``: the error is on the CPU already; DM303 added ``.cpu()`` (harmless churn in
    # device-correct code).
    out, _ = run("""\
        import torch


        def validate(model, pairs):
            errors = []
            for image, flow_gt in pairs:
                flow_pr = model(image.cuda())
                epe = torch.sum((flow_pr[0].cpu() - flow_gt) ** 2, dim=0).sqrt()
                errors.append(epe.view(-1).numpy())
            return errors
    """)
    assert "epe.view(-1).numpy()" in out
