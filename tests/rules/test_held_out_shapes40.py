"""Shapes found by the fortieth held-out trial (docs/real-repos.md "Fortieth run") and the one the
thirty-ninth left open. Each test fails on the code the run measured (d4a49fa)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import project_reports, run


# neural-processes' ``inpaint``: moves the image itself, and indexes its CPU result with the mask.
_RESTORE_ON_THE_HOST = """\
    import torch


    def restore(net, img, holes, device):
        out = net(img.unsqueeze(0).to(device)).detach().cpu()[0]
        out[holes.bool()] = img[holes.bool()]
        return out
"""


def test_a_model_run_once_on_the_cpu_before_the_line_that_moves_it_keeps_that_input_on_the_cpu():
    # run 39 (call_before_move): ``net(torch.randn(2, 4))`` probes the model on the CPU, then ``net =
    # net.cuda()``; ``device=`` on the probe's input sent it to the GPU while the model was still on the CPU.
    output, _ = run(textwrap.dedent("""\
        import torch
        import torch.nn as nn

        if __name__ == "__main__":
            net = nn.Linear(4, 3)
            probe = torch.randn(2, 4)
            print(net(probe).shape)
            net.cuda()
            print(net(torch.randn(2, 4).cuda()).shape)
    """))
    assert "probe = torch.randn(2, 4)\n" in output
    assert "net.to(device)" in output and "torch.randn(2, 4).to(device)" in output



# -- the 40th run (first pass on d4a49fa) -------------------------------------------------------------


def test_a_guarded_move_above_the_local_device_read_from_the_model_is_left_as_written():
    # Found while reducing (run 40, B, x1): ``if torch.cuda.is_available(): net = net.cuda()`` above
    # ``dev = next(net.parameters()).device`` became ``net = net.to(dev)``: UnboundLocalError everywhere.
    output, unfixed = run("""\
        import torch
        import torch.nn as nn


        def score_once():
            net = nn.Linear(3, 1)
            if torch.cuda.is_available():
                net = net.cuda()
            dev = next(net.parameters()).device
            return net(torch.ones(5, 3, device=dev)).sum().item()


        if __name__ == "__main__":
            print(score_once())
    """)
    assert "net.to(dev)" not in output
    assert "    if torch.cuda.is_available():\n        net = net.cuda()\n" in output
    assert unfixed == []


def test_the_result_of_a_driver_that_returns_a_report_on_one_path_is_not_moved(tmp_path: Path):
    # robustness's main.py: ``final = main(args)`` where ``main`` returns the evaluation's dict with
    # ``--eval-only`` and the trained model otherwise; ``main(args).to(device)`` failed on the dict.
    reports = project_reports(tmp_path, {"fitting.py": """\
        import torch


        def train(net):
            net = torch.nn.DataParallel(net).cuda()
            net(torch.rand(6, 3).cuda()).mean().backward()
            return net


        def evaluate(net):
            with torch.no_grad():
                return {"avg": net(torch.rand(6, 3).cuda()).mean().item()}
    """, "run_all.py": """\
        import sys
        import torch
        from fitting import evaluate, train


        def main(only_eval):
            net = torch.nn.Linear(3, 1).cuda()
            if only_eval:
                return evaluate(net)
            return train(net)


        if __name__ == "__main__":
            outcome = main("--eval" in sys.argv)
    """})
    assert "main(\"--eval\" in sys.argv).to(" not in reports["run_all.py"].diff


def test_a_move_to_cuda_in_the_block_that_initialises_apex_amp_is_not_reported(tmp_path: Path):
    # robustness's train.py: ``model.to("cuda")`` right above ``amp.initialize(model, opt, "O1")``, under the
    # user's mixed-precision switch: apex's amp needs CUDA, so the block runs only on a GPU.
    reports = project_reports(tmp_path, {"opt_setup.py": """\
        import torch

        try:
            from apex import amp
        except ImportError:
            amp = None


        def build_optimizer(model, lr, mixed):
            opt = torch.optim.SGD(model.parameters(), lr)
            if mixed:
                model.to("cuda")
                model, opt = amp.initialize(model, opt, "O1")
            return model, opt
    """, "fit.py": """\
        import torch
        from opt_setup import build_optimizer

        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = torch.nn.Linear(3, 1).to(device)
            model, opt = build_optimizer(model, 0.1, mixed=False)
            model(torch.ones(2, 3, device=device)).sum().backward()
    """})
    assert [f.code for f in reports["opt_setup.py"].findings if not f.fixed] == []


def test_a_model_method_that_moves_its_own_input_is_reported_with_that_reason(tmp_path: Path):
    # robustness's attacker: ``orig = orig.cuda()`` on a keyword-only input of forward; the report said
    # "finds no tensor input", though forward has one: the reason is that the method moves its inputs.
    reports = project_reports(tmp_path, {"nudge.py": """\
        import torch


        class Nudger(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x, *, step, start=None):
                if start is None:
                    start = x.detach()
                start = start.cuda()
                return self.inner(start + (x - start).clamp(-step, step))
    """, "go.py": """\
        import torch
        from nudge import Nudger

        if __name__ == "__main__":
            n = Nudger(torch.nn.Linear(3, 1)).cuda()
            print(n(torch.ones(2, 3).cuda(), step=0.1).shape)
    """})
    [finding] = [f for f in reports["nudge.py"].findings if not f.fixed]
    assert "moves its own inputs to the GPU" in finding.message


def test_a_bare_cuda_below_set_device_is_left_to_the_rank_it_chose():
    # ddpm-torch train.py: ``torch.cuda.set_device(local_rank); _model.cuda()`` became ``_model.to(train_device)``
    # while ``train_device`` was still ``cuda:0`` (rebound to the rank's GPU two lines later).
    output, unfixed = run("""\
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel


        def launch(cfg):
            dev = torch.device(cfg.dev)
            body = torch.nn.Linear(3, 2)
            if cfg.multi:
                dist.init_process_group("nccl")
                rank = int(os.environ["LOCAL_RANK"])
                torch.cuda.set_device(rank)
                body.cuda()
                runner = DistributedDataParallel(body, device_ids=[rank])
                dev = torch.device(f"cuda:{rank}")
            else:
                runner = body.to(dev)
            return runner(torch.ones(4, 3, device=dev))
    """)
    assert "        body.cuda()\n" in output
    assert unfixed == []


def test_tensors_handed_to_a_helper_with_the_device_stay_where_the_author_made_them(tmp_path: Path):
    # neural-processes example-img.ipynb: ``inpaint(model, img, mask, device)`` moves the image itself and
    # indexes its CPU result with the mask; the image buffer and the mask got ``device=device``.
    reports = project_reports(tmp_path, {"fill.py": _RESTORE_ON_THE_HOST, "show.py": """\
        import numpy as np
        import torch
        from fill import restore

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net = torch.nn.Linear(5, 5).to(device)
        imgs = torch.zeros(2, 5)
        for i in range(2):
            imgs[i] = torch.tensor(np.random.rand(5))
        holes = torch.zeros(5).bool()
        holes[:2] = True
        print(restore(net, imgs[0], holes, device))
        speckle = torch.Tensor(5).uniform_() > 0.8
        print(imgs[1] * speckle.float())
        # the notebook's own spelling: a row picked into a name, a ``.byte()`` mask, the call in a loop
        img = imgs[1]
        gaps = torch.zeros(5).byte()
        gaps[:2] = 1
        print(img * gaps.float())
        for i in range(3):
            print(restore(net, img, gaps, device))
    """})
    assert "device=device" not in reports["show.py"].diff


def test_targets_of_a_loss_over_the_output_of_a_model_devmod_cannot_see_stay_with_it():
    # vgae_pytorch: ``net = getattr(models, name)(...)`` is never moved; its labels and the loss weight got
    # ``device=``, the model and its features stayed: a half-moved group.
    output, _ = run("""\
        import torch
        import torch.nn.functional as F
        import zoo

        feats = torch.randn(6, 4)
        labels = (torch.rand(6) > 0.5).float()
        weight = torch.ones(6)
        weight[labels == 1] = 2.0
        net = getattr(zoo, "Scorer")(4)
        loss = F.binary_cross_entropy(net(feats), labels, weight=weight)
        loss.backward()
    """)
    assert "device=" not in output


def test_a_mode_flag_set_on_a_model_is_no_new_part():
    # neural-processes example-1d.ipynb: ``neuralprocess.training = True`` made DM202 report "gets new parts
    # after it is built" (also poolformer's ``segmentor.CLASSES = meta["CLASSES"]``); the model moves with its input.
    output, unfixed = run("""\
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net = torch.nn.Linear(1, 1)
        net.training = True
        net.LABELS = ("low", "high")
        print(net(torch.randn(3, 1)))
    """)
    assert not any("new parts" in f.message for f in unfixed)
    assert "net = torch.nn.Linear(1, 1).to(device)" in output


def test_a_cuda_call_in_a_layer_subclass_says_what_it_subclasses():
    # vae-lagging-encoder's MaskedConv2d(nn.Conv2d): the true DM103 report called it "neither a model nor
    # driver code".
    _, unfixed = run("""\
        import torch
        import torch.nn as nn


        class HalfConv(nn.Conv2d):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.register_buffer("cut", torch.ones_like(self.weight))

            def forward(self, x):
                self.weight.data *= self.cut.cuda()
                return super().forward(x)
    """)
    [finding] = unfixed
    assert "a subclass of the torch.nn class `nn.Conv2d`" in finding.message



def test_a_loss_over_a_view_of_the_output_of_a_model_rebinding_its_module_keeps_its_weight():
    # vgae_pytorch's spelling: ``import model`` then ``model = getattr(model, args.model)(adj)``, and
    # ``F.binary_cross_entropy(A_pred.view(-1), target, weight=weight_tensor)``.
    output, _ = run("""\
        import torch
        import torch.nn.functional as F
        import zoo as model

        feats = torch.randn(6, 4)
        target = torch.rand(6)
        weight_tensor = torch.ones(6)
        model = getattr(model, "Scorer")(4)
        for epoch in range(2):
            pred = model(feats)
            loss = F.binary_cross_entropy(pred.view(-1), target, weight=weight_tensor)
            loss.backward()
    """)
    assert "device=" not in output


def test_a_model_handed_to_a_function_that_traces_it_on_its_own_inputs_stays(tmp_path: Path):
    # poolformer's pytorch2torchscript.py (regression of this run's fixes): once ``_convert_batchnorm`` was
    # read as a model factory, ``segmentor`` got ``.to(device)`` while ``pytorch2libtorch(segmentor, shape)``
    # traced it on CPU inputs it builds itself (``torch.FloatTensor(imgs)``).
    reports = project_reports(tmp_path, {"export.py": """\
        import numpy as np
        import torch
        import torch.nn as nn
        from builders import build_net


        def swap_norms(module):
            out = module
            if isinstance(module, nn.SyncBatchNorm):
                out = nn.BatchNorm2d(module.num_features)
            for name, child in module.named_children():
                out.add_module(name, swap_norms(child))
            return out


        def to_torchscript(model, shape):
            imgs = torch.FloatTensor(np.random.rand(*shape))
            traced = torch.jit.trace(model, example_inputs=imgs)
            traced.save("net.pt")


        if __name__ == "__main__":
            net = build_net()
            net = swap_norms(net)
            net.CLASSES = ("a", "b")
            to_torchscript(net, (1, 4))
    """, "builders.py": """\
        import torch.nn as nn


        def build_net():
            return nn.Linear(4, 2)
    """})
    assert not reports["export.py"].diff
    assert [f.code for f in reports["export.py"].findings if not f.fixed] == []


def test_a_model_handed_with_the_device_to_a_trainer_class_of_the_project_stays(tmp_path: Path):
    # neural-processes example-1d.ipynb on a real GPU (H100): with the flag no longer read as a new part, the
    # model got ``.to(device)``, but ``NeuralProcessTrainer(device, neuralprocess, optimizer)`` moves only image
    # batches: its sine batches stayed on the CPU and training failed.
    reports = project_reports(tmp_path, {"coaching.py": """\
        import torch


        class Coach:
            def __init__(self, device, net, opt, images=False):
                self.device, self.net, self.opt, self.images = device, net, opt, images

            def fit(self, loader, epochs):
                for _ in range(epochs):
                    for xb, yb in loader:
                        if self.images:
                            xb, yb = xb.to(self.device), yb.to(self.device)
                        loss = (self.net(xb) - yb).pow(2).mean()
                        self.opt.zero_grad()
                        loss.backward()
                        self.opt.step()
    """, "notebook_cells.py": """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        from coaching import Coach

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net = torch.nn.Linear(1, 1)
        data = TensorDataset(torch.randn(8, 1), torch.randn(8, 1))
        coach = Coach(device, net, torch.optim.Adam(net.parameters(), lr=1e-3))
        net.training = True
        coach.fit(DataLoader(data, batch_size=4), 2)
        print(net(torch.randn(3, 1)).shape)
    """})
    assert ".to(device)" not in reports["notebook_cells.py"].diff
    assert [f.code for f in reports["notebook_cells.py"].findings if not f.fixed] == []


# -- the 41st run (first pass on 5b3eef5) -------------------------------------------------------------


def test_a_section_header_above_the_device_stays_when_the_device_moves_up():
    # BERT-pytorch-style evaluation script (run 41, A): ``device = ...`` under a ``## Score ##`` banner, used
    # above it by a load; the banner moved to the top of the file with the definition.
    output, _ = run("""\
        import torch
        import torch.nn as nn

        ###########
        ## Build ##
        ###########

        net = nn.Linear(4, 2)
        net.load_state_dict(torch.load("weights.pt"))

        ############
        ## Score ##
        ############

        # the GPU when there is one
        device = "cuda" if torch.cuda.is_available() else "cpu"
        net = net.to(device)
        print(net(torch.ones(1, 4, device=device)))
    """)
    assert "############\n## Score ##\n############\n\nnet = net.to(device)" in output
    assert output.index("# the GPU when there is one") < output.index("## Build ##")


def test_a_model_class_a_package_re_exports_by_name_is_a_model(tmp_path: Path):
    # survae_flows' examples (run 41, A): ``from survae.flows import Flow`` where the package's ``__init__``
    # says ``from survae.flows.flow import Flow``: the model was unseen, so only DM203 "move the batch by hand"
    # was printed, which alone would break the script; a model of the file's own gets the group's DM202 too.
    reports = project_reports(tmp_path, {"kit/__init__.py": "from kit.density import Density, Points\n",
                                         "kit/density.py": """\
        import torch
        import torch.nn as nn
        from torch.utils.data import Dataset


        class Points(Dataset):
            def __init__(self, n):
                self.data = torch.rand(n, 2)

            def __getitem__(self, i):
                return self.data[i]

            def __len__(self):
                return len(self.data)


        class Density(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(2, 2)

            def log_prob(self, x):
                return -(self.net(x) ** 2).sum(-1)
    """, "fit.py": """\
        import torch
        from torch.utils.data import DataLoader
        from kit import Density, Points

        loader = DataLoader(Points(64), batch_size=8)
        model = Density()
        opt = torch.optim.Adam(model.parameters())
        for i, x in enumerate(loader):
            loss = -model.log_prob(x).mean()
            loss.backward()
    """})
    assert sorted(f.code for f in reports["fit.py"].findings if not f.fixed) == ["DM202", "DM203"]


def test_a_plotted_model_output_converted_with_numpy_gets_one_cpu_before_numpy():
    # semi-supervised-pytorch's notebook (found regressing the re-export fix): ``ax.imshow(samples[i].view(64,
    # 64).data.numpy())`` of a model's samples got DM303's ``.cpu()`` before ``.numpy()`` and the plot fix's
    # ``.cpu()`` after it: ``.numpy().cpu()``, an AttributeError on the array.
    output, _ = run("""\
        import torch
        import torch.nn as nn
        import matplotlib.pyplot as plt

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(4, 16).to(device)
        samples = model(torch.rand(3, 4, device=device))
        f, axes = plt.subplots(1, 3)
        for i, ax in enumerate(axes.flat):
            ax.imshow(samples[i].view(4, 4).data.numpy())
        plt.plot(range(16), samples.data.numpy()[0])
    """)
    assert "ax.imshow(samples[i].view(4, 4).data.cpu().numpy())" in output
    assert "plt.plot(range(16), samples.data.cpu().numpy()[0])" in output


# -- the 42nd run (first pass on 7ad9eef) -------------------------------------------------------------


def test_a_ramp_joined_onto_an_empty_host_accumulator_stays_on_the_host():
    # latent_ode's linspace_vector: ``res = torch.Tensor()`` then, in a loop, ``res = torch.cat((res,
    # torch.linspace(start[i], end[i], n)), 0)``; ``device=start.device`` on the ramp met the CPU accumulator.
    output, _ = run("""\
        import torch


        def ramps(lo, hi, steps):
            out = torch.Tensor()
            for k in range(lo.size(0)):
                out = torch.cat((out, torch.linspace(lo[k], hi[k], steps)), 0)
            return out.reshape(lo.size(0), steps).t()
    """)
    assert "torch.linspace(lo[k], hi[k], steps))" in output
