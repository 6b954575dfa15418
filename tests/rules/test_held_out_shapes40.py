"""Shapes found by the fortieth held-out trial (docs/real-repos.md "Fortieth run") and the one the
thirty-ninth left open. Each test fails on the code the run measured (d4a49fa)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import project_reports, run


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
