"""Shapes found by the fortieth held-out trial (docs/real-repos.md "Fortieth run") and the one the
thirty-ninth left open. Each test fails on the code the run measured (d4a49fa)."""

from __future__ import annotations

import textwrap

from all_rules_support import run


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

