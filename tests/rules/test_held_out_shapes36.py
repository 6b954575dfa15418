"""Shapes found by the thirty-sixth held-out trial (docs/real-repos.md "Thirty-sixth run") and the
reports left open by the thirty-fifth. Each test fails on the code the run measured (c85b2b0)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import project_reports, run

_SETTINGS_PLACED = """\
    import torch.nn as nn


    class Painter(nn.Module):
        def __init__(self, settings):
            super().__init__()
            self.settings = settings
            self.gpus = settings["gpus"]
            self.enc = nn.Linear(4, 4)
            self.dec = nn.Linear(4, 2)
            if settings["on_gpu"]:
                self.enc.to(self.gpus[0])
                self.dec.to(self.gpus[0])

        def forward(self, x):
            return self.dec(self.enc(x))
"""


def test_a_model_built_with_the_settings_its_gpu_list_comes_from_is_not_reported(tmp_path: Path):
    # generative-inpainting's train.py: ``device_ids = config['gpu_ids']``, ``Trainer(config)`` moves its
    # parts to ``self.device_ids[0]`` (read from the same config), then ``DataParallel(trainer,
    # device_ids=device_ids)``: the false DM202 "move it to the first of them" the 35th run left open.
    reports = project_reports(tmp_path, {"painter.py": _SETTINGS_PLACED, "train.py": """\
        import os
        import torch
        import torch.nn as nn
        from painter import Painter


        def main(settings):
            on_gpu = settings["on_gpu"]
            gpus = settings["gpus"]
            if on_gpu:
                os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpus)
                gpus = list(range(len(gpus)))
                settings["gpus"] = gpus
            painter = Painter(settings)
            if on_gpu:
                painter = nn.DataParallel(painter, device_ids=gpus)
            x = torch.randn(8, 4)
            if on_gpu:
                x = x.cuda()
            print(painter(x).shape)


        if __name__ == "__main__":
            main({"on_gpu": False, "gpus": [0]})
    """})
    assert not reports["train.py"].findings
    assert not reports["train.py"].diff


def test_the_state_dict_of_a_pickled_model_copied_into_the_model_loads_to_the_cpu():
    # pytorch-SRResNet's ``--resume``: ``checkpoint = torch.load(path)`` of a whole model pickled after
    # ``.cuda()``, then ``model.load_state_dict(checkpoint["model"].state_dict())``: without
    # ``map_location`` the load fails on a machine without a GPU (missed by the 34th run). Every
    # tensor is copied into the model, so the CPU is the right place to load it.
    output, _ = run("""\
        import argparse
        import torch
        import torch.nn as nn


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--cuda", action="store_true")
            parser.add_argument("--resume", default="")
            opt = parser.parse_args()
            model = nn.Linear(4, 2)
            if opt.cuda:
                model = model.cuda()
            start = 1
            if opt.resume:
                checkpoint = torch.load(opt.resume)
                start = checkpoint["epoch"] + 1
                model.load_state_dict(checkpoint["model"].state_dict())
            print(start, model.weight.shape)


        if __name__ == "__main__":
            main()
    """)
    assert 'checkpoint = torch.load(opt.resume, map_location="cpu")' in output


def test_a_library_models_sampler_builds_its_tensors_on_the_device_of_the_input_it_sizes(tmp_path: Path):
    # nflows' ``MixtureOfGaussiansMADE.sample(num_samples, context=None)`` in an installable package:
    # ``torch.zeros(context.shape[0], self.features)`` fed to ``self.forward(samples, context)`` and
    # ``means + torch.randn(context.shape[0]) * stds`` stored into it; both stayed on the CPU (missed
    # by the 33rd run: a device error with the model and context on the GPU). The factory reads the
    # context's size, so the context is a tensor there: its device is the input's.
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='flows')\n")
    reports = project_reports(tmp_path, {"flows/__init__.py": "", "flows/made.py": """\
        import torch
        import torch.nn as nn


        class Made(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.n = n
                self.net = nn.Linear(2 * n, 2 * n)

            def forward(self, x, context=None):
                return self.net(torch.cat([x, context], dim=1))

            def sample(self, count, context=None):
                with torch.no_grad():
                    samples = torch.zeros(context.shape[0], self.n)
                    for i in range(self.n):
                        out = self.forward(samples, context)
                        mean, scale = out[:, i], out[:, self.n + i].exp()
                        samples[:, i] = mean + torch.randn(context.shape[0]) * scale
                return samples
    """})
    diff = reports["flows/made.py"].diff
    assert "samples = torch.zeros(context.shape[0], self.n, device=context.device)" in diff
    assert "torch.randn(context.shape[0], device=context.device) * scale" in diff


def test_lengths_sized_in_a_library_method_are_no_input_device():
    # ``torch.arange(lengths.max())`` style: lengths stay on the CPU by design, so a size read from
    # them names no device (the method keeps its factory as it is, where it has no other device).
    from codemods.analysis.devices import _sized_input
    import libcst as cst

    function = cst.ensure_type(cst.parse_statement("def mask(self, lengths, x=None):\n    pass\n"), cst.FunctionDef)
    assert _sized_input(cst.parse_expression("torch.zeros(lengths.shape[0], 4)"), function) is None
    found = _sized_input(cst.parse_expression("torch.zeros(x.size(0), 4)"), function)
    assert found is not None and cst.Module([]).code_for_node(found) == "x.device"


_MASKS = """\
    import torch


    def window_masks(rows, cells, lead=1, shuffle=True, device=None):
        # built row by row on the host, moved once at the end
        head = torch.arange(lead)
        kept = []
        for _ in range(rows):
            shown = torch.zeros(cells, dtype=torch.bool)
            board = torch.zeros(cells, dtype=torch.bool)
            board[: cells // 2] = True
            chosen = board.nonzero().flatten()[: cells // 3]
            shown[chosen] = True
            if shuffle:
                shown = torch.roll(
                    shown.reshape(1, cells),
                    shifts=(0, 1),
                    dims=(0, 1),
                ).flatten()
            kept.append(torch.cat([head, shown.nonzero().flatten() + lead]))
        return torch.stack(kept).to(device)
"""


def test_a_host_mask_builder_given_a_device_by_its_caller_keeps_every_piece_on_the_host(tmp_path: Path):
    # lightly's ``random_inverse_block_mask`` (CAPI): masks built per row on the CPU and moved once at the
    # end with the caller's ``device=``. devmod moved the row mask (read after a rebinding that spans
    # lines, ``shown = torch.roll(\\n shown.reshape(...), ...)``) and the board whose indices index it, but
    # not ``head``: ``torch.cat`` then mixed devices, and CPU ``shown`` indexed by GPU ids failed.
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='masking')\n")
    reports = project_reports(tmp_path, {"masking/__init__.py": "", "masking/masks.py": _MASKS, "train.py": """\
        import torch
        from masking.masks import window_masks

        device = "cuda" if torch.cuda.is_available() else "cpu"
        x = torch.rand(2, 9, 4, device=device)
        print(window_masks(x.shape[0], x.shape[1] - 1, device=x.device).shape)
    """})
    assert not reports["masking/masks.py"].diff
    assert not reports["masking/masks.py"].findings


def test_a_collate_module_keeps_its_labels_on_the_host(tmp_path: Path):
    # lightly's ``BaseCollateFunction(nn.Module).forward(batch)``: ``batch`` is the DataLoader's list of
    # samples; ``torch.LongTensor([item[1] for item in batch])`` got ``.to(batch.device)``, an
    # AttributeError on every machine. A collate module runs in the loader's workers: data-loading code.
    reports = project_reports(tmp_path, {"collate.py": """\
        from typing import List, Tuple

        import torch
        from torch import nn


        class TwoViewCollate(nn.Module):
            def __init__(self, augment):
                super().__init__()
                self.augment = augment

            def forward(self, samples: List[Tuple[torch.Tensor, int]]):
                half = len(samples)
                views = [self.augment(samples[k % half][0]).unsqueeze_(0) for k in range(2 * half)]
                marks = torch.LongTensor([s[1] for s in samples])
                return (torch.cat(views[:half]), torch.cat(views[half:])), marks
    """})
    assert not reports["collate.py"].diff
    assert not reports["collate.py"].findings


def test_an_input_turned_into_a_numpy_array_names_no_device():
    # lightly's SMoG example: ``features = features.cpu().numpy()`` in a model method whose parameter is
    # annotated as a tensor; ``torch.from_numpy(...)`` then got ``.to(features.device)`` (an
    # AttributeError on NumPy 1.x, a no-op on 2.x). The model's own device is asked instead.
    output, _ = run("""\
        import numpy as np
        import torch
        from torch import nn


        class Grouper(nn.Module):
            def __init__(self, k):
                super().__init__()
                self.k = k
                self.proj = nn.Linear(4, 4)

            def centres(self, feats: torch.Tensor) -> torch.Tensor:
                feats = feats.cpu().numpy()
                picked = feats[np.random.default_rng(0).choice(len(feats), self.k)]
                return self.proj(torch.from_numpy(picked).float())
    """)
    assert "feats.device" not in output
    assert "torch.from_numpy(picked).to(next(self.parameters()).device).float()" in output


def test_views_unpacked_from_one_index_of_the_batch_and_moved_by_hand_are_not_reported():
    # lightly's examples: ``x0, x1 = batch[0]`` (or ``(x0, m0), (x1, m1) = batch[0]``), each view moved
    # with ``.to(device)``: 24 false DM203 reports ("indexed in several places"), and 6 false DM202
    # reports on the losses beside them (a loss module now moves with the model, which moves nothing
    # where it holds no tensor, and keeps an exercise's loss class right once its author adds one).
    source = """\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset


        class Pair(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 2)

            def forward(self, a, m):
                return self.net(a * m)


        class Gap(nn.Module):
            def forward(self, a, b):
                return (a - b).abs().mean()


        model = Pair()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model.to(device)
        crit = Gap()
        data = TensorDataset(torch.rand(8, 2, 2, 4), torch.zeros(8))
        loader = DataLoader(data, batch_size=4, collate_fn=lambda s: (torch.stack([t[0] for t in s]).unbind(1), None))
        for item in loader:
            (x0, m0), (x1, m1) = item[0]
            x0 = x0.to(device)
            m0 = m0.to(device)
            x1 = x1.to(device)
            m1 = m1.to(device)
            print(crit(model(x0, m0), model(x1, m1)).item())
    """
    output, unfixed = run(source)
    assert not unfixed
    assert output == textwrap.dedent(source).replace("crit = Gap()", "crit = Gap().to(device)")


def test_cuda_index_under_a_device_ids_against_none_switch_is_not_reported():
    # face.evoLVe's heads: ``if self.device_id == None: <CPU> else: <weight split over the listed GPUs
    # with .cuda(self.device_id[i])>``: 30 false DM103 reports ("whatever the run"); the same code with
    # the switch named ``gpu_ids`` was already left alone.
    output, unfixed = run("""\
        import torch
        import torch.nn.functional as F
        from torch import nn


        class SplitHead(nn.Module):
            def __init__(self, d_in, d_out, device_id=None):
                super().__init__()
                self.device_id = device_id
                self.w = nn.Parameter(torch.randn(d_out, d_in))

            def forward(self, x):
                if self.device_id is None:
                    return F.linear(x, self.w)
                parts = torch.chunk(self.w, len(self.device_id), dim=0)
                out = F.linear(x.cuda(self.device_id[0]), parts[0].cuda(self.device_id[0]))
                for i in range(1, len(self.device_id)):
                    piece = F.linear(x.cuda(self.device_id[i]), parts[i].cuda(self.device_id[i]))
                    out = torch.cat((out, piece.cuda(self.device_id[0])), dim=1)
                return out
    """)
    assert not unfixed
    assert ".cuda(self.device_id[0])" in output


def test_a_cpu_table_looked_up_with_indices_from_a_value_then_moved_to_its_device_is_reported():
    # score_sde's ``discretize``: ``timestep = (t * (N - 1) / T).long()`` then
    # ``self.discrete_sigmas[timestep - 1].to(t.device)``, a CPU table in a plain class: with ``t`` on a
    # GPU the lookup fails before the move (missed by the 36th run; ``verify`` named DM405).
    _, unfixed = run("""\
        import torch


        class Noise:
            def __init__(self, steps):
                self.steps = steps
                self.sigmas = torch.exp(torch.linspace(-3.0, 2.0, steps))

            def pair(self, x, t):
                step = (t * (self.steps - 1)).long()
                now = self.sigmas.to(t.device)[step]
                before = torch.where(step == 0, torch.zeros_like(t), self.sigmas[step - 1].to(t.device))
                return x * (now - before)[:, None]
    """)
    assert [f.code for f in unfixed] == ["DM405"]
    assert "self.sigmas.to(t.device)[step - 1]" in unfixed[0].message


def test_a_model_class_whose_base_is_named_through_its_module_path_is_a_model(tmp_path: Path):
    # ENAS: ``import models.shared_base`` then ``class RNN(models.shared_base.SharedModel)``: the class was
    # "neither a model nor driver code", so ``torch.FloatTensor(mask).cuda()`` in its forward was reported
    # with a wrong reason instead of taking the input's device (as it does with ``from ... import``).
    reports = project_reports(tmp_path, {"nets/__init__.py": "", "nets/base.py": """\
        import torch


        class Base(torch.nn.Module):
            def width(self):
                return 3
    """, "nets/cell.py": """\
        import numpy as np
        import torch
        import nets.base


        class Cell(nets.base.Base):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(3, 3)

            def forward(self, h):
                h = self.lin(h)
                return h * torch.FloatTensor(np.ones(h.size())).cuda()
    """, "run.py": """\
        import torch
        from nets.cell import Cell

        if __name__ == "__main__":
            print(Cell()(torch.zeros(2, 3)).shape)
    """})
    assert not [f for f in reports["nets/cell.py"].findings if not f.fixed]
    assert "torch.FloatTensor(np.ones(h.size())).to(h.device)" in reports["nets/cell.py"].diff


def test_a_dataset_helper_that_runs_a_model_is_not_called_data_loading_code():
    # DEQ's segmentation Dataset has an inference helper (``multi_scale_inference(self, model, image)``)
    # with a ``.cuda()``: the true report said it "runs in data-loading code, where tensors must stay on
    # the CPU", which is not so; a method its DataLoader never calls gets the plain reason.
    _, unfixed = run("""\
        import numpy as np
        import torch
        from torch.utils import data


        class Frames(data.Dataset):
            def __init__(self, n):
                self.items = [np.zeros((3, 4, 4), dtype=np.float32) for _ in range(n)]

            def __len__(self):
                return len(self.items)

            def __getitem__(self, k):
                return self._read(k)

            def _read(self, k):
                return torch.from_numpy(self.items[k])

            def mirrored(self, model, image):
                flipped = model(torch.flip(image, dims=[-1])).cpu().numpy()
                return model(image) + torch.from_numpy(flipped[..., ::-1].copy()).cuda()
    """)
    assert [f.code for f in unfixed] == ["DM103"]
    assert "data-loading code" not in unfixed[0].message
    assert "`mirrored`, a method of a Dataset class that its DataLoader does not call" in unfixed[0].message


# -- the 37th run (first pass on 8f79b67) -------------------------------------------------------------


def test_a_dict_batch_whose_one_tensor_a_helper_picks_and_the_author_moves_is_left_alone():
    # taming-transformers' extract_segmentation: ``img = get_input(batch, "image")`` then ``img.cuda()``;
    # devmod added ``batch = {k: v.to(device) for k, v in batch.items()}`` to a batch that also holds lists
    # of file paths (an AttributeError on every machine). A helper's pick of one key is a part of the batch.
    output, unfixed = run("""\
        import torch
        from torch.utils.data import DataLoader, Dataset


        class Named(Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                return {"pixels": torch.rand(6, 6, 3), "path": "img%d.png" % i}


        def pick(batch, key):
            return batch[key].permute(0, 3, 1, 2).float()


        def run_all(loader, net):
            for step, batch in enumerate(loader):
                pic = pick(batch, "pixels")
                pic = pic.cuda()
                print(batch["path"][0], tuple(net(pic).shape))


        if __name__ == "__main__":
            run_all(DataLoader(Named(), batch_size=1), torch.nn.Conv2d(3, 2, 3).cuda())
    """)
    assert not unfixed
    assert "batch.items()" not in output
    assert "pic = pic.to(device)" in output


def test_cuda_below_an_unconditional_set_device_is_gpu_only_by_design(tmp_path: Path):
    # 3DDFA's benchmark helpers: ``torch.cuda.set_device(ids[0])`` then ``DataParallel(..., device_ids=ids)
    # .cuda()`` and ``batch.cuda()`` in an imported function: it runs only where there is a GPU (false DM103).
    reports = project_reports(tmp_path, {"scoring.py": """\
        import torch
        import torch.nn as nn


        def score_all(batches, gpu_ids=[0]):
            torch.cuda.set_device(gpu_ids[0])
            net = nn.DataParallel(nn.Linear(4, 2), device_ids=gpu_ids).cuda()
            scores = []
            with torch.no_grad():
                for batch in batches:
                    scores.append(net(batch.cuda()).cpu())
            return scores
    """, "bench.py": """\
        import torch
        from scoring import score_all

        if __name__ == "__main__":
            print(score_all([torch.rand(2, 4)])[0].shape)
    """})
    assert not reports["scoring.py"].findings
    assert not reports["scoring.py"].diff


def test_a_mode_string_compared_with_gpu_is_the_callers_switch_and_a_gpu_twin_is_by_design(tmp_path: Path):
    # 3DDFA's utils/io.py: ``elif mode.lower() == 'gpu': return ....cuda()`` under the caller's own switch,
    # and ``def read_gpu(fp)`` beside ``def read_cpu(fp)``: false DM103 reports.
    reports = project_reports(tmp_path, {"arrays.py": """\
        import numpy as np
        import torch


        def read(path, mode="cpu"):
            if mode.lower() == "cpu":
                return torch.from_numpy(np.load(path))
            elif mode.lower() == "gpu":
                return torch.from_numpy(np.load(path)).cuda()


        def read_cpu(path):
            return torch.from_numpy(np.load(path))


        def read_gpu(path):
            return torch.from_numpy(np.load(path)).cuda()
    """, "use.py": """\
        import numpy as np
        from arrays import read, read_cpu

        if __name__ == "__main__":
            np.save("w.npy", np.ones(3, dtype=np.float32))
            print(read("w.npy").sum(), read_cpu("w.npy").sum())
    """})
    assert not reports["arrays.py"].findings
    assert not reports["arrays.py"].diff


def test_a_forward_that_only_counts_its_input_names_no_device():
    # pytorch-metric-learning's tests: ``TextModel.forward(self, list_of_text)`` returns
    # ``torch.randn(len(list_of_text), 32)``; devmod added ``device=list_of_text.device`` (an AttributeError
    # on every machine: the input is a list of strings). Such a model holds no tensor: no report either.
    source = """\
        import torch


        class RandomEncoder(torch.nn.Module):
            def forward(self, sentences):
                return torch.randn(len(sentences), 8)


        if __name__ == "__main__":
            print(RandomEncoder()(["a cat", "a dog"]).shape)
    """
    output, unfixed = run(source)
    assert not unfixed
    assert output == textwrap.dedent(source)


def test_a_model_that_sends_its_inputs_to_its_own_device_is_not_moved_alone():
    # learn2learn's RL examples: ``DiagNormalPolicy(..., device='cpu')`` keeps ``self.device`` and its
    # ``density`` does ``state.to(self.device)``; ``policy.to(device)`` put its weights on the GPU and every
    # state back on the CPU (3 wrong hunks).
    output, unfixed = run("""\
        import torch
        from torch import nn


        class Steer(nn.Module):
            def __init__(self, n_in, n_out, device="cpu"):
                super().__init__()
                self.device = device
                self.mean = nn.Linear(n_in, n_out)

            def forward(self, obs):
                return self.mean(obs.to(self.device))


        def main():
            steer = Steer(3, 2)
            opt = torch.optim.SGD(steer.parameters(), lr=0.1)
            for _ in range(2):
                loss = steer(torch.randn(4, 3)).pow(2).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()


        if __name__ == "__main__":
            main()
    """)
    assert not unfixed
    assert "Steer(3, 2)\n" in output and ".to(device)" not in output


def test_optimizer_state_moved_by_hand_after_loading_is_not_reported():
    # ffjord's train_cnf.py: ``optimizer.load_state_dict(...)`` then a loop over ``optimizer.state.values()``
    # that moves each tensor with ``cvt`` (``.to(device)``), then ``DataParallel(model).cuda()``: a false DM403.
    _, unfixed = run("""\
        import sys
        import torch
        import torch.nn as nn

        if __name__ == "__main__":
            device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
            to_dev = lambda t: t.float().to(device)
            net = nn.Linear(3, 1)
            opt = torch.optim.Adam(net.parameters(), lr=1e-3)
            if len(sys.argv) > 1:
                ckpt = torch.load(sys.argv[1], map_location=lambda storage, loc: storage)
                net.load_state_dict(ckpt["state_dict"])
                opt.load_state_dict(ckpt["optim_state_dict"])
                for st in opt.state.values():
                    for key, val in st.items():
                        if torch.is_tensor(val):
                            st[key] = to_dev(val)
            if torch.cuda.is_available():
                net = nn.DataParallel(net).cuda()
            opt.zero_grad()
            net(to_dev(torch.randn(5, 3))).sum().backward()
            opt.step()
    """)
    assert [f.code for f in unfixed if f.code == "DM403"] == []


def test_a_factory_returning_a_class_of_an_imported_module_and_a_dunder_peeked_batch_move_together(tmp_path: Path):
    # ffjord's viz_multiscale: ``import lib.odenvp as odenvp``-style model from a factory of the file, a batch
    # taken with ``loader.__iter__().__next__()``; devmod moved only ``torch.linspace(...)`` combined with
    # the model's output (the model and the batch stayed on the CPU).
    reports = project_reports(tmp_path, {"flowlib.py": """\
        import torch.nn as nn


        class Flow(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.lin = nn.Linear(dim, dim)

            def forward(self, x):
                return self.lin(x)
    """, "interp.py": """\
        import math
        import torch
        import flowlib


        def make_flow(dim):
            return flowlib.Flow(dim)


        if __name__ == "__main__":
            device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
            net = make_flow(4)
            data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.zeros(16))
            loader = torch.utils.data.DataLoader(data, batch_size=8)
            samples, _ = loader.__iter__().__next__()
            codes = net(samples[:2])
            w = torch.linspace(0, 0.5, 3) * math.pi
            print((torch.cos(w).view(-1, 1) * codes[0] + torch.sin(w).view(-1, 1) * codes[1]).shape)
    """})
    diff = reports["interp.py"].diff
    assert "+    net = make_flow(4).to(device)" in diff
    assert "+    samples = samples.to(device)" in diff
    assert "torch.linspace(0, 0.5, 3, device=device)" in diff


def test_a_model_run_through_a_copy_of_an_outside_wrapper_stays_with_a_batch_devmod_cannot_move(tmp_path: Path):
    # learn2learn's maml_sine: ``maml = l2l.algorithms.MAML(model, ...)``, ``learner = maml.clone()``,
    # ``learner(x)`` on a batch indexed in several places (DM203 reports it); the model was moved alone.
    (tmp_path / "app").mkdir()
    reports = project_reports(tmp_path / "app", {"sine.py": """\
        import torch
        from torch import nn
        import metalearn


        class Reg(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(1, 1)

            def forward(self, x):
                return self.fc(x)


        def main():
            data = torch.utils.data.TensorDataset(torch.randn(8, 6, 1), torch.randn(8, 6, 1))
            loader = torch.utils.data.DataLoader(data, batch_size=4)
            net = Reg()
            meta = metalearn.Wrapper(net, lr=0.1)
            opt = torch.optim.SGD(meta.parameters(), lr=0.1)
            for it, batch in enumerate(loader):
                total = 0.0
                for i in range(batch[0].shape[0]):
                    learner = meta.clone()
                    total += nn.functional.mse_loss(learner(batch[0][i]), batch[1][i])
                opt.zero_grad()
                total.backward()
                opt.step()


        if __name__ == "__main__":
            main()
    """})
    assert "Reg().to(device)" not in reports["sine.py"].diff
    assert sorted(f.code for f in reports["sine.py"].findings if not f.fixed) == ["DM202", "DM203"]


def test_an_input_from_a_transform_a_helper_returns_keeps_its_model_and_a_factory_adds_parts_unplaced(tmp_path: Path):
    # places365, seen by the regression once models named through a module became visible: ``tf =
    # returnTF()`` returns ``trn.Compose([...])``; ``model = load_model()`` (``import wideresnet`` inside,
    # ``model.avgpool = nn.AvgPool2d(...)``, ``return model``) got ``.to(device)`` while ``tf(img)`` did not,
    # and the new part got its own ``.to(device)`` in the factory.
    reports = project_reports(tmp_path, {"netdef.py": """\
        import torch.nn as nn


        def resnet(num_classes=3):
            return nn.Sequential(nn.Conv2d(3, 4, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, num_classes))
    """, "run.py": """\
        import torch
        import torch.nn.functional as F
        from torchvision import transforms as trn
        from PIL import Image


        def returnTF():
            tf = trn.Compose([trn.Resize((4, 4)), trn.ToTensor()])
            return tf


        def load_model():
            import netdef
            model = netdef.resnet(num_classes=3)
            model.pool = torch.nn.AvgPool2d(kernel_size=2)
            model.head = torch.nn.Linear(3, 3)
            model.eval()
            return model


        model = load_model()
        tf = returnTF()
        input_img = tf(Image.new("RGB", (8, 8))).unsqueeze(0)
        print(F.softmax(model.forward(input_img), 1).squeeze().numpy())
    """})
    diff = reports["run.py"].diff
    assert ".to(device)" not in diff and "device=" not in diff


# -- the 38th run (first pass on d423897) -------------------------------------------------------------


def test_cuda_of_a_model_methods_own_input_does_not_become_a_move_to_where_it_is(tmp_path: Path):
    # glow's ``generate_z(self, img)``: ``img.unsqueeze(0).repeat(...).cuda()`` sends a CPU sample to the
    # model's GPU; ``.to(img.device)`` was a no-op, so the sample never reached the model.
    reports = project_reports(tmp_path, {"coder.py": """\
        import torch
        from torch import nn


        class Coder(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def forward(self, v):
                return self.proj(v)

            def encode_one(self, sample):
                batch = sample.unsqueeze(0).repeat(3, 1).cuda()
                return self(batch)[0].detach().cpu().numpy()
    """, "run.py": """\
        import torch
        from coder import Coder

        if __name__ == "__main__":
            coder = Coder().cuda()
            print(coder.encode_one(torch.rand(4)))
    """})
    assert "sample.device" not in reports["coder.py"].diff
    assert [f.code for f in reports["coder.py"].findings if not f.fixed] == ["DM103"]


def test_a_buffer_that_exists_only_in_eval_mode_names_no_device():
    # e2cnn's convolutions register their expanded filter as a buffer in eval mode and ``del`` it in
    # ``train()``; ``.to(self.filter.device)`` in a self-test failed once ``.train()`` ran.
    output, _ = run("""\
        import torch
        from torch import nn


        class Expanded(nn.Module):
            def __init__(self):
                super().__init__()
                self.weights = nn.Parameter(torch.randn(3, 3))
                self.register_buffer("kernel", self.weights.detach().clone())

            def train(self, mode=True):
                if mode and hasattr(self, "kernel"):
                    del self.kernel
                elif not mode and self.training:
                    self.register_buffer("kernel", self.weights.detach().clone())
                return super().train(mode)

            def forward(self, v):
                return v @ (self.kernel if not self.training else self.weights)

            def check(self):
                v = torch.FloatTensor(torch.rand(2, 3).numpy())
                return (self(v) - self(v)).abs().max().item()
    """)
    assert "self.kernel.device" not in output


def test_gpu_only_by_design_device_checks_engines_and_reservations(tmp_path: Path):
    # e2cnn's field dropout: ``torch.cuda.FloatTensor(*shape, device=...)`` in the ``else`` of
    # ``if x.device == torch.device('cpu'):``; ProxylessNAS: ``.cuda()`` after ``from torch2trt import
    # TRTModule``, ``torch.cuda.FloatTensor(...)`` in ``reserve_gpu_memory(gpu_index, mb)`` and a ``del`` of
    # the tensor it made (reported as a use of a type alias): false DM103 / DM304 reports.
    reports = project_reports(tmp_path, {"gpuwork.py": """\
        import time
        import torch


        def channel_drop(feats, p=0.3):
            shape = list(feats.size())
            shape[1] = 1
            if feats.device == torch.device("cpu"):
                keep = torch.FloatTensor(*shape)
            else:
                keep = torch.cuda.FloatTensor(*shape, device=feats.device)
            keep = (keep.uniform_() > p).to(torch.float)
            return feats * keep / (1.0 - p)


        def reserve_gpu_memory(gpu_index, free_mb):
            block = torch.cuda.FloatTensor(256, 1024, free_mb)
            del block
            time.sleep(0.1)


        class Runner:
            def __init__(self, model, engine_file=None):
                self.model = model
                if engine_file is not None:
                    from torch2trt import TRTModule
                    engine = TRTModule()
                    engine.load_state_dict(torch.load(engine_file))
                    self.model(torch.ones(1, 3, 8, 8).cuda())
                    self.model = engine
    """, "main.py": """\
        import torch
        from gpuwork import Runner, channel_drop, reserve_gpu_memory

        if __name__ == "__main__":
            if torch.cuda.is_available():
                reserve_gpu_memory(0, 16)
            print(channel_drop(torch.rand(2, 3, 4)).shape, Runner(torch.nn.Identity()).model)
    """})
    assert [f.code for f in reports["gpuwork.py"].findings if not f.fixed] == []


def test_a_loop_whose_batch_only_feeds_numpy_is_not_reported():
    # ProxylessNAS's eval_tf.py: a torch DataLoader whose batches go to a TensorFlow model through
    # ``.numpy()`` only: a false DM203 ("goes through NumPy ... move it by hand").
    _, unfixed = run("""\
        import numpy as np
        import torch.utils.data
        from otherframework import zoo

        net = zoo.small_net()
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.rand(8, 3, 4, 4), torch.randint(0, 5, (8,))), batch_size=4)
        for step, (imgs, labels) in enumerate(loader):
            arr = imgs.numpy()
            arr = np.transpose(arr, axes=[0, 2, 3, 1])
            onehot = net.to_one_hot(5, labels.numpy())
            print(step, net.session.run([net.loss], feed_dict={net.images: arr, net.labels: onehot}))
    """)
    assert not unfixed


def test_a_model_class_named_through_an_imported_submodule_moves_with_its_input(tmp_path: Path):
    # glow's test_modules.py and e2cnn's notebook: ``from flowlib import nets`` then ``net = nets.Stepper(8)``
    # fed ``torch.Tensor(np.random.rand(...))``: the input got ``.to(device)``, the model did not.
    reports = project_reports(tmp_path, {"flowlib/__init__.py": "", "flowlib/nets.py": """\
        from torch import nn


        class Stepper(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.lin = nn.Linear(width, width)

            def forward(self, v):
                return self.lin(v)
    """, "check_nets.py": """\
        import numpy as np
        import torch
        from flowlib import nets


        def try_stepper():
            net = nets.Stepper(8)
            v = torch.Tensor(np.random.rand(2, 8))
            print(net(v).shape)


        if __name__ == "__main__":
            try_stepper()
    """})
    diff = reports["check_nets.py"].diff
    assert "+    net = nets.Stepper(8).to(device)" in diff
    assert "torch.Tensor(np.random.rand(2, 8)).to(device)" in diff


def test_a_model_fed_one_output_of_a_held_back_model_stays_with_it():
    # ProxylessNAS's pfld.py: ``features, landmarks = backbone(img)`` then ``angle = auxiliary(features)``;
    # the backbone was held back (its input is also handed to a profiler) and ``auxiliary`` alone moved.
    output, unfixed = run("""\
        import torch
        from torch import nn


        class Trunk(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(6, 6)

            def forward(self, v):
                feats = self.body(v)
                return feats, feats.sum(1)


        class Side(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(6, 2)

            def forward(self, feats):
                return self.head(feats)


        if __name__ == "__main__":
            sample = torch.randn(1, 6)
            trunk = Trunk()
            side = Side()
            feats, score = trunk(sample)
            print(side(feats).shape, score.shape)
            from opcounter import count_macs
            print(count_macs(trunk, args=(sample,)))
    """)
    assert ".to(device)" not in output
    assert sorted(f.code for f in unfixed) == ["DM202", "DM202"]


def test_a_model_that_picks_its_device_from_a_users_switch_is_not_moved_again(tmp_path: Path):
    # EDSR's and RCAN's ``model.Model(args, ckp)``: ``self.device = torch.device('cpu' if args.cpu else
    # 'cuda')``, ``self.model = make_model(args).to(self.device)``; the trainer sends the data there. Once
    # ``import model; model.Model(...)`` was seen as a model, ``.to(device)`` would have overridden ``--cpu``.
    reports = project_reports(tmp_path, {"model/__init__.py": """\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self, args):
                super().__init__()
                self.device = torch.device("cpu" if args.cpu else "cuda")
                self.model = nn.Linear(3, 3).to(self.device)

            def forward(self, x):
                return self.model(x.to(self.device))
    """, "main.py": """\
        import argparse
        import torch
        import model

        parser = argparse.ArgumentParser()
        parser.add_argument("--cpu", action="store_true")
        args = parser.parse_args()
        net = model.Model(args)
        print(net(torch.rand(2, 3)).shape)
    """})
    assert ".to(device)" not in reports["main.py"].diff


def test_a_factory_that_hands_its_model_to_a_reworking_helper_is_still_construction(tmp_path: Path):
    # places365's ``load_model()``: ``model = wideresnet.resnet18(...)``, ``recursion_change_bn(model)``,
    # ``return model``; the caller's image comes from a transform, so nothing may move inside the factory.
    reports = project_reports(tmp_path, {"wideres.py": """\
        import torch.nn as nn


        def resnet18(num_classes=3):
            return nn.Sequential(nn.Conv2d(3, 4, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, num_classes))
    """, "run.py": """\
        import torch
        from torchvision import transforms as trn
        from PIL import Image


        def rework(module):
            return module


        def load_model():
            import wideres
            model = wideres.resnet18(num_classes=3)
            for i, (name, module) in enumerate(model._modules.items()):
                module = rework(model)
            model.eval()
            return model


        model = load_model()
        tf = trn.Compose([trn.Resize((4, 4)), trn.ToTensor()])
        print(model(tf(Image.new("RGB", (8, 8))).unsqueeze(0)).shape)
    """})
    assert ".to(device)" not in reports["run.py"].diff


def test_a_tensor_handed_to_a_model_constructor_is_construction_data(tmp_path: Path):
    # pytorch-flows' flow_test.py: ``mask = torch.arange(0, N) % 2; mask = mask.unsqueeze(0)`` at module level,
    # then ``fnn.CouplingLayer(N, H, mask)`` (a buffer) in unittest methods that place nothing: once ``fnn.X``
    # was seen as a model, the mask got ``device=device`` alone and met the layer's CPU weights.
    reports = project_reports(tmp_path, {"flows.py": """\
        import torch.nn as nn


        class Coupling(nn.Module):
            def __init__(self, n, mask):
                super().__init__()
                self.lin = nn.Linear(n, n)
                self.register_buffer("mask", mask)

            def forward(self, x):
                return self.lin(x * self.mask)
    """, "flow_test.py": """\
        import unittest
        import torch
        import flows as fnn

        N = 6
        mask = torch.arange(0, N) % 2
        mask = mask.unsqueeze(0)


        class TestFlow(unittest.TestCase):
            def test_coupling(self):
                layer = fnn.Coupling(N, mask)
                self.assertEqual(layer(torch.randn(3, N)).shape, (3, N))
    """})
    assert not reports["flow_test.py"].diff


def test_an_input_wrapped_by_an_unknown_class_and_fed_to_an_unknown_model_stays(tmp_path: Path):
    # e2cnn's introduction notebook (made worse on a real H200): ``x = torch.randn(...)``, ``x =
    # nn.GeometricTensor(x, field)`` (e2cnn's ``nn``), ``model(x)`` with ``model = nn.SequentialModule(...)``,
    # which devmod cannot see: the input got ``device=`` and the model stayed on the CPU.
    source = """\
        import torch
        from somelib import nn

        field = nn.FieldType(4)
        model = nn.SequentialModule(nn.R2Conv(field, field, kernel_size=3)).eval()
        x = torch.randn(1, 1, 17, 17)
        x = nn.GeometricTensor(x, field)
        y = model(x)
        z = model(nn.GeometricTensor(torch.randn(3, 1, 7, 7), field))
        print(y, z)
    """
    output, unfixed = run(source)
    assert output == textwrap.dedent(source)
    assert not unfixed


# -- the 39th run (first pass on cfaa386) -------------------------------------------------------------


def test_cuda_in_library_code_of_a_program_that_stops_without_cuda_is_not_reported(tmp_path: Path):
    # TorchSSL (104 reports) and DenseNAS (4): every driver raises or exits when CUDA is missing, and the
    # algorithm classes they import call ``.cuda(args.gpu)`` / ``.cuda()``: correct wherever the program runs.
    reports = project_reports(tmp_path, {"algos/__init__.py": "", "algos/steps.py": """\
        import torch


        class Trainer:
            def __init__(self, net, gpu=None):
                self.net = net
                self.gpu = gpu

            def step(self, x):
                x = x.cuda(self.gpu) if self.gpu is not None else x.cuda()
                return self.net(x.cuda())
    """, "launch.py": """\
        import sys
        import torch
        from algos.steps import Trainer

        if __name__ == "__main__":
            if not torch.cuda.is_available():
                raise Exception("ONLY GPU TRAINING IS SUPPORTED")
            print(Trainer(torch.nn.Linear(3, 2).cuda()).step(torch.rand(2, 3)))
    """})
    assert [f.code for f in reports["algos/steps.py"].findings if not f.fixed] == []
    assert not reports["algos/steps.py"].diff
