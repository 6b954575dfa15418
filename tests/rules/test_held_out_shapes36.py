"""Shapes found by the thirty-sixth held-out trial (docs/real-repos.md "Thirty-sixth run") and the
reports left open by the thirty-fifth. Each test fails on the code the run measured (c85b2b0)."""

from __future__ import annotations

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
