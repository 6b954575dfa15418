"""Shapes found by the thirty-fifth held-out trial (docs/real-repos.md "Thirty-fifth run").
Each test fails on the code the run measured (7fe647b)."""

from __future__ import annotations

from pathlib import Path

from all_rules_support import project_reports, run

_SELF_PLACING = """\
    import torch
    import torch.nn as nn


    class Pair(nn.Module):
        def __init__(self, on_gpu, gpu_list):
            super().__init__()
            self.enc = nn.Linear(4, 4)
            self.dec = nn.Linear(4, 2)
            if on_gpu:
                self.enc.to(gpu_list[0])
                self.dec.to(gpu_list[0])

        def forward(self, x):
            return self.dec(self.enc(x))
"""


def test_a_self_placing_model_wrapped_with_its_gpu_list_and_switched_inputs_are_not_reported(tmp_path: Path):
    # generative-inpainting's train.py: ``Trainer(config, device_ids)`` moves its parts to ``device_ids[0]``
    # itself, then ``nn.DataParallel(trainer, device_ids=device_ids)``; its inputs move under ``if cuda:``
    # in a file that sets CUDA_VISIBLE_DEVICES (false DM202 "move it to the first of them", false DM103).
    reports = project_reports(tmp_path, {"pair.py": _SELF_PLACING, "run.py": """\
        import os
        import torch
        import torch.nn as nn
        from pair import Pair


        def main(on_gpu=False, gpu_list=(0,)):
            if on_gpu:
                os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpu_list)
                gpu_list = list(range(len(gpu_list)))
            model = Pair(on_gpu, gpu_list)
            if on_gpu:
                model = nn.DataParallel(model, device_ids=gpu_list)
            x = torch.randn(8, 4)
            if on_gpu:
                x = x.cuda()
            print(model(x).shape)


        if __name__ == "__main__":
            main()
    """})
    assert not reports["run.py"].findings
    assert not reports["run.py"].diff


def test_cuda_under_a_settings_key_switch_in_a_helper_is_not_reported(tmp_path: Path):
    # generative-inpainting's utils/tools.py: ``if config['cuda']: grid = grid.cuda()`` in a helper other files
    # import (a false DM103 "library code"): the user's own switch, read from a dict.
    reports = project_reports(tmp_path, {"helpers.py": """\
        import numpy as np
        import torch


        def weight_grid(cfg):
            grid = torch.tensor(np.ones((1, 1, cfg["h"], cfg["w"])), dtype=torch.float32)
            if cfg["use_gpu"]:
                grid = grid.cuda()
            return grid
    """, "run.py": """\
        import torch
        from helpers import weight_grid

        if __name__ == "__main__":
            cfg = {"h": 4, "w": 4, "use_gpu": torch.cuda.is_available()}
            print(weight_grid(cfg).sum())
    """})
    assert not reports["helpers.py"].findings
