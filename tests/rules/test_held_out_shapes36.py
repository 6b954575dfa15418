"""Shapes found by the thirty-sixth held-out trial (docs/real-repos.md "Thirty-sixth run") and the
reports left open by the thirty-fifth. Each test fails on the code the run measured (c85b2b0)."""

from __future__ import annotations

from pathlib import Path

from all_rules_support import project_reports

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
