"""Shapes found by the thirty-second held-out trial (docs/real-repos.md "Thirty-second run").
Each test fails on the code the run measured (7c8bff4)."""

from __future__ import annotations

from pathlib import Path

from all_rules_support import project_reports, run


def _project(tmp_path: Path, files: dict[str, str]) -> dict[str, object]:
    return project_reports(tmp_path, files)


def test_an_input_handed_with_an_unplaced_model_to_a_library_call_stays():
    # poolformer's mac_count_with_fvcore.py: ``model = timm.models.poolformer_s12()`` (never moved) and its
    # input meet only inside ``FlopCountAnalysis(model, input)``; the input got ``device=device``.
    out, _ = run("""\
        import torch
        import timm
        from fvcore.nn import FlopCountAnalysis

        if __name__ == "__main__":
            model = timm.models.poolformer_s12()
            model.eval()
            sample = torch.rand(1, 3, 224, 224)
            print(FlopCountAnalysis(model, sample).total())
    """)
    assert "sample = torch.rand(1, 3, 224, 224)\n" in out


def test_a_dict_batch_spread_into_a_scattering_wrapper_is_not_moved():
    # poolformer's segmentation benchmark: ``model = MMDataParallel(model, device_ids=[0])`` then
    # ``model(return_loss=False, **data)``; ``data`` holds lists of containers, and DM203's
    # ``{k: v.to(device) ...}`` raised AttributeError on every machine.
    out, _ = run("""\
        import torch
        from mmcv.parallel import MMDataParallel
        from mmseg.datasets import build_dataloader
        from mmseg.models import build_segmentor


        def main(cfg):
            data_loader = build_dataloader(cfg.data, samples_per_gpu=1)
            model = build_segmentor(cfg.model)
            model = MMDataParallel(model, device_ids=[0])
            model.eval()
            for i, data in enumerate(data_loader):
                with torch.no_grad():
                    model(return_loss=False, **data)


        if __name__ == "__main__":
            main(None)
    """)
    assert "v.to(device)" not in out


def test_cuda_after_an_assert_that_a_gpu_is_there_is_not_reported():
    # DeepLabv3's main.py starts with ``assert torch.cuda.is_available()``: GPU-only by design (5 false DM103).
    _, open_findings = run("""\
        import argparse
        import torch
        from torch import nn

        parser = argparse.ArgumentParser()
        parser.add_argument("--train", action="store_true")
        parser.add_argument("--gpu", type=int, default=0)
        opts = parser.parse_args()


        def run():
            assert torch.cuda.is_available()
            net = nn.Conv2d(3, 2, 1)
            if opts.train:
                net = nn.DataParallel(net).cuda()
                frames = torch.rand(2, 3, 8, 8).cuda()
                net(frames).sum().backward()
            else:
                torch.cuda.set_device(opts.gpu)
                net = net.cuda()
                print(net(torch.rand(1, 3, 8, 8).cuda()).shape)


        if __name__ == "__main__":
            run()
    """)
    assert not [f for f in open_findings if f.code == "DM103"]


def test_horovod_programs_run_one_process_per_gpu(tmp_path: Path):
    # once-for-all's distributed run manager: ``torch.cuda.set_device(hvd.local_rank())`` then bare
    # ``.cuda()``, which is that rank's GPU (7 false DM103, silent for the same code under torch.distributed).
    reports = _project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/runner.py": """\
            import torch
            import horovod.torch as hvd


            class RankRunner:
                def __init__(self, net):
                    self.net = net
                    self.net.cuda()
                    self.opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1))

                def step(self, loader):
                    for feats, labels in loader:
                        feats, labels = feats.cuda(), labels.cuda()
                        loss = torch.nn.functional.cross_entropy(self.net(feats), labels)
                        loss.backward()
                        self.opt.step()
        """,
        "train.py": """\
            import torch
            import horovod.torch as hvd
            from pkg.runner import RankRunner

            if __name__ == "__main__":
                hvd.init()
                torch.cuda.set_device(hvd.local_rank())
                RankRunner(torch.nn.Linear(6, 3)).step([])
        """})
    assert not reports["pkg/runner.py"].findings


def test_cuda_handed_straight_to_a_distributed_wrapper_or_apex_is_not_reported(tmp_path: Path):
    # poolformer's mmdet train.py: ``MMDistributedDataParallel(model.cuda(), device_ids=[...])`` and
    # ``apex.amp.initialize(model.cuda(), optimizer)`` need a GPU by what they are (2 false DM103).
    reports = _project(tmp_path, {
        "lib/__init__.py": "",
        "lib/fit.py": """\
            import torch
            import apex
            from mmcv.parallel import MMDistributedDataParallel


            def fit_model(model, optimizer, distributed=False, fp16=False):
                if fp16:
                    model, optimizer = apex.amp.initialize(model.cuda(), optimizer, opt_level="O1")
                if distributed:
                    model = MMDistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()])
                return model
        """,
        "train.py": """\
            import torch
            from lib.fit import fit_model

            if __name__ == "__main__":
                net = torch.nn.Linear(4, 2)
                fit_model(net, torch.optim.SGD(net.parameters(), lr=0.1))
        """})
    assert not [f for f in reports["lib/fit.py"].findings if f.code == "DM103"]


def test_a_noise_transform_in_a_lambda_follows_its_sample():
    # normalizing_flows' data.py: ``lambda img: img + torch.rand(*img.shape) / 256.`` handed to a Dataset in a
    # function that has a ``device`` parameter got ``device=device`` (CPU image plus CUDA noise).
    out, _ = run("""\
        import torch
        from torch.utils.data import DataLoader, Dataset


        class Pictures(Dataset):
            def __init__(self, transform):
                self.images = torch.rand(8, 3, 4, 4)
                self.transform = transform

            def __len__(self):
                return len(self.images)

            def __getitem__(self, i):
                return self.transform(self.images[i])


        def make_loader(batch, device):
            jitter = lambda img: img + torch.rand(*img.shape) / 256.
            return DataLoader(Pictures(jitter), batch)


        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = torch.nn.Linear(48, 2).to(device)
            for x in make_loader(4, device):
                print(net(x.view(x.shape[0], -1).to(device)).shape)
    """)
    assert "torch.rand(*img.shape) / 256." in out


def test_a_batch_unpacked_in_two_branches_and_moved_is_not_reported():
    # normalizing_flows' maf.py: ``inp, cond = batch[0], None`` or ``inp, cond = batch``, then both moved
    # (false DM203 "indexed in several places").
    _, open_findings = run("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset


        def fit(net, loader, opt, device):
            for step, batch in enumerate(loader):
                if len(batch) == 1:
                    inp, cond = batch[0], None
                else:
                    inp, cond = batch
                    cond = cond.to(device)
                inp = inp.to(device)
                loss = net(inp).sum() if cond is None else (net(inp) * cond).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()


        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = torch.nn.Linear(3, 2).to(device)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            fit(net, DataLoader(TensorDataset(torch.randn(8, 3)), batch_size=4), opt, device)
    """)
    assert not [f for f in open_findings if f.code == "DM203"]


def test_a_model_keeping_a_plain_object_with_tensors_stays_and_is_reported():
    # WaveRNN's pruning notebook: the model keeps ``self.pruner = Pruner(...)``, whose masks
    # (``torch.ones_like(W)`` in a plain ``PruneMask``) ``model.to()`` does not move; forward multiplies the
    # weights by them. DM202 moved the model: a device error at the first pruning step.
    out, open_findings = run("""\
        import torch
        import torch.nn as nn


        class Mask:
            def __init__(self, layer):
                self.mask = []
                for w in layer.parameters():
                    self.mask += [torch.ones_like(w)]

            def apply(self, layer):
                for m, w in zip(self.mask, layer.parameters()):
                    w.data *= m


        class Pruner:
            def __init__(self, layers):
                self.masks = [Mask(layer) for layer in layers]

            def prune(self, layers):
                for layer, mask in zip(layers, self.masks):
                    mask.apply(layer)


        class Pruned(nn.Module):
            def __init__(self, size):
                super().__init__()
                self.fc = nn.Linear(size, size)
                self.pruner = Pruner([self.fc])

            def forward(self, x):
                self.pruner.prune([self.fc])
                return self.fc(x)


        model = Pruned(4)
        print(model(torch.randn(2, 4)))
    """)
    assert "model = Pruned(4)\n" in out
    [finding] = [f for f in open_findings if f.code == "DM202"]
    assert "keeps a `Pruner` (`self.pruner`)" in finding.message


def test_cuda_of_the_ranks_device_after_a_project_helper_pins_it_is_not_reported(tmp_path: Path):
    # vicreg (the 33rd run): ``start_ranks(args)`` of another file calls ``torch.cuda.set_device``, then
    # ``.cuda(gpu)`` with ``gpu = torch.device(args.device)`` in a program that wraps its model in
    # ``nn.parallel.DistributedDataParallel`` (3 false DM103: "a CPU-only run fails here").
    reports = _project(tmp_path, {
        "dist_setup.py": """\
            import os
            import torch
            import torch.distributed as dist


            def start_ranks(opts):
                opts.local = int(os.environ["LOCAL_RANK"])
                torch.cuda.set_device(opts.local)
                dist.init_process_group(backend="nccl")
        """,
        "pretrain.py": """\
            import argparse
            import torch
            from torch import nn
            from dist_setup import start_ranks


            def run(opts):
                start_ranks(opts)
                gpu = torch.device(opts.device)
                net = nn.Linear(8, 4).cuda(gpu)
                net = nn.parallel.DistributedDataParallel(net, device_ids=[gpu])
                for (batch,) in torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(6, 8))):
                    batch = batch.cuda(gpu, non_blocking=True)
                    net(batch).sum().backward()


            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("--device", default="cuda")
                run(parser.parse_args())
        """})
    assert not reports["pretrain.py"].findings
    assert not reports["pretrain.py"].diff


def test_a_count_handed_to_an_own_method_gives_no_device(tmp_path: Path):
    # nflows (the 33rd run): ``sample(self, num_samples, context=None)`` checks ``num_samples`` is an int and
    # hands it to ``self._sample(num_samples, context)``, a method, not a layer: devmod wrote
    # ``torch.as_tensor(context, device=num_samples.device)`` (AttributeError on every machine). And the
    # script's ``Gauss().draw(3, cond=...)`` runs a model built right there, which stays: its input too.
    reports = _project(tmp_path, {
        "sampler.py": """\
            import torch
            from torch import nn


            def is_count(n):
                return isinstance(n, int) and n > 0


            class Base(nn.Module):
                def draw(self, how_many, cond=None):
                    if not is_count(how_many):
                        raise TypeError("how_many must be a positive int")
                    if cond is not None:
                        cond = torch.as_tensor(cond)
                    return self._draw(how_many, cond)


            class Gauss(Base):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(1, 2)

                def _draw(self, how_many, cond):
                    mu = self.lin(cond)
                    return mu + torch.randn(how_many, 2, device=mu.device)
        """,
        "run_it.py": """\
            import torch
            from sampler import Gauss

            print(Gauss().draw(3, cond=torch.ones(3, 1)).shape)
        """})
    assert "how_many.device" not in reports["sampler.py"].diff
    assert not reports["run_it.py"].diff
