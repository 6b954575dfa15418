"""Shapes found by the sixteenth held-out trial (awd-lstm-lm, ssd.pytorch, BicycleGAN,
pytorch-template, llama2.c, pytorch-soft-actor-critic, hifi-gan, PerceptualSimilarity;
docs/real-repos.md "Sixteenth run"). Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import rewrite as run

from codemods.config import Config
from codemods.driver import process_files


def _unfixed(result) -> list[str]:
    return [f.code for f in result.findings if not f.fixed]


def test_a_whole_model_reloaded_into_a_global_keeps_its_device():
    # awd-lstm's ``model_load``: ``global model, ...`` then ``model, crit, opt = torch.load(f)``;
    # the reloaded model is evaluated beside data moved under ``--cuda``. ``map_location="cpu"``
    # left it on the CPU and every GPU run failed.
    source, result = run("""\
        import sys
        import torch

        use_gpu = "--cuda" in sys.argv
        net = torch.nn.Linear(5, 3)
        loss_fn = torch.nn.MSELoss()
        if use_gpu:
            net = net.cuda()


        def restore(path):
            global net, loss_fn
            with open(path, "rb") as handle:
                net, loss_fn = torch.load(handle, weights_only=False)


        batch = torch.ones(2, 5)
        if use_gpu:
            batch = batch.cuda()
        torch.save((net, loss_fn), "snapshot.pt")
        restore("snapshot.pt")
        print(net(batch).shape)
    """)
    assert "map_location" not in result.output


def test_a_single_global_reloaded_in_a_function_is_seen_where_it_runs():
    # the same through one name and an argparse switch: the function's ``global`` binding is
    # read at module level, where the model runs.
    _, result = run("""\
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_true")
        args = parser.parse_args()
        encoder = torch.nn.Linear(4, 4)
        if args.cuda:
            encoder.cuda()


        def reload(path):
            global encoder
            encoder = torch.load(path, weights_only=False)


        probe = torch.zeros(1, 4)
        if args.cuda:
            probe = probe.cuda()
        reload("enc.pt")
        print(encoder(probe))
    """)
    assert "map_location" not in result.output


def test_a_cuda_default_behind_the_gpu_test_is_reported_only_with_a_shuffling_loader():
    # ssd.pytorch's eval and test scripts: the default is set only where CUDA is available, and
    # nothing shuffles; that works on both machines. Its train.py shuffles: that one is true.
    quiet_source, quiet = run("""\
        import torch

        if torch.cuda.is_available():
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
        scores = torch.rand(4)
        print(scores.max())
    """)
    assert quiet.output == quiet_source and not _unfixed(quiet)
    _, shuffling = run("""\
        import torch
        from torch.utils.data import DataLoader

        if torch.cuda.is_available():
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
        batches = DataLoader(list(range(10)), batch_size=5, shuffle=True)
        print(sum(len(b) for b in batches))
    """)
    assert _unfixed(shuffling) == ["DM402"]
    assert "shuffling" in next(f.message for f in shuffling.findings if f.code == "DM402")


def test_a_model_that_may_be_none_is_not_moved_nor_its_input():
    # llama2.c's ``export.py``: ``load_hf_model`` returns None without transformers, and the
    # script checks ``if model is None`` next; ``.to(device)`` raised AttributeError first.
    source, result = run("""\
        import torch
        import torch.nn as nn


        def optional_decoder(path):
            try:
                import decoder_weights  # noqa: F401
            except ImportError:
                return None
            return nn.Linear(6, 6)


        if __name__ == "__main__":
            decoder = optional_decoder("weights")
            if decoder is None:
                raise SystemExit("no decoder available")
            print(decoder(torch.zeros(6)))
    """)
    assert result.output == source and not _unfixed(result)


def test_a_model_bound_in_each_branch_and_only_saved_stays():
    # llama2.c's export: ``if a: model = load_a() elif b: model = load_b()`` and then only its
    # state dict is written. The first branch got ``.to(device)``, the others did not.
    source, result = run("""\
        import sys
        import torch
        import torch.nn as nn


        def restore(path):
            layer = nn.Linear(3, 3)
            layer.load_state_dict(torch.load(path, map_location="cpu"))
            return layer


        if __name__ == "__main__":
            if sys.argv[1:] == ["a"]:
                layer = restore("a.pt")
            elif sys.argv[1:] == ["b"]:
                layer = restore("b.pt")
            else:
                layer = restore("c.pt")
            torch.save({k: v.double() for k, v in layer.state_dict().items()}, "out.pt")
    """)
    assert result.output == source and not _unfixed(result)


def test_a_nested_loop_that_reuses_the_batch_name_is_not_an_index():
    # hifi-gan's training loop holds its validation loop, both ``for batch in ...`` and both
    # unpacking and moving by hand; DM203 said "`batch` is indexed in several places".
    source, result = run("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net = torch.nn.Linear(2, 1).to(device)
        train = DataLoader(TensorDataset(torch.randn(6, 2), torch.randn(6, 1)), batch_size=3)
        valid = DataLoader(TensorDataset(torch.randn(6, 2), torch.randn(6, 1)), batch_size=3)
        for batch in train:
            a, b = batch
            net(a.to(device)).sub(b.to(device)).pow(2).mean().backward()
            for batch in valid:
                a, b = batch
                print(net(a.to(device)).sub(b.to(device)).abs().mean().item())
    """)
    assert result.output == source and not _unfixed(result)


def test_data_parallel_over_range_starts_at_the_first_gpu(tmp_path: Path):
    # pytorch-playground's ``eval_model`` (the fifteenth run's open gap): ``DataParallel(model,
    # device_ids=range(ngpu)).cuda()`` was told to "move it to the first of them before wrapping",
    # but ``range(ngpu)`` starts at GPU 0, where the wrapper's ``.cuda()`` puts it. Only the
    # ``.cuda()`` itself (library code, no GPU without CUDA) is reported.
    (tmp_path / "setup.py").write_text("")
    helpers = tmp_path / "helpers.py"
    helpers.write_text(textwrap.dedent("""\
        import torch


        def score(model, batches, ngpu=1, scaled=False):
            class Scaled(torch.nn.Module):
                def __init__(self, inner):
                    super().__init__()
                    self.inner = inner

                def forward(self, x):
                    return self.inner(x / 255.0)

            if scaled:
                model = Scaled(model)
            model = model.eval()
            model = torch.nn.DataParallel(model, device_ids=range(ngpu)).cuda()
            return [model(b.cuda()).argmax(1) for b in batches]
    """))
    (tmp_path / "run.py").write_text("import torch\nfrom helpers import score\n\nprint(score)\n")
    reports = list(process_files([str(helpers), str(tmp_path / "run.py")], Config(), "check", jobs=1))
    codes = [f.code for r in reports if r.path == str(helpers) for f in r.findings if not f.fixed]
    assert codes == ["DM103", "DM103"]
