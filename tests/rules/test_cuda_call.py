"""DM103 cuda-call: CUDA checks that lose their meaning once everything uses the shared device."""

from __future__ import annotations

import textwrap

from codemods.engine import transform_source


def test_a_conditional_expression_with_identical_branches_collapses():
    code = textwrap.dedent("""\
    import torch

    a = torch.ones(3).to("cuda") if torch.cuda.is_available() else torch.ones(3)
    b = torch.ones(3, device="cpu") if torch.cuda.is_available() else torch.ones(3, device="cpu")
    """)
    out = transform_source(code).output
    assert "a = torch.ones(3, device=device)\n" in out
    # identical branches without the shared device are the author's: left as written
    assert 'b = torch.ones(3, device="cpu") if torch.cuda.is_available() else torch.ones(3, device="cpu")' in out
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in out
    assert transform_source(out).output == out


def test_a_cuda_index_behind_the_users_own_switch_on_that_index_is_not_reported():
    # ``if args.gpu is not None: x.cuda(args.gpu)`` already runs on the CPU without --gpu,
    # like ``if args.gpu: x.cuda()``: correct code, no finding
    code = textwrap.dedent("""\
    import argparse
    import torch

    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--gpu", default=None, type=int)
        args = parser.parse_args()
        model = torch.nn.Linear(4, 2)
        if args.gpu is not None:
            model = model.cuda(args.gpu)
        x = torch.randn(3, 4)
        if args.gpu >= 0:
            x = x.cuda(args.gpu, non_blocking=True)
        y = x.cuda(args.gpu) if args.gpu else x
        z = x.cuda(args.gpu)
        return model(x), y, z

    if __name__ == "__main__":
        main()
    """)
    result = transform_source(code)
    assert result.output == code
    # the ungated one stays reported
    assert [f.line for f in result.findings if f.code == "DM103"] == [15]
