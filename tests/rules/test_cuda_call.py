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


def test_the_reason_names_the_method_and_gives_the_buffer_advice_only_in_init():
    code = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    class Spectrum(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.ones(3).cuda()

        def transform(self, wave):
            return torch.abs(wave.cuda()).cpu()

        @staticmethod
        def window(n):
            return torch.ones(n).cuda()
    """)
    result = transform_source(code)
    reasons = {f.line: f.message for f in result.findings if f.code == "DM103" and not f.fixed}
    assert "__init__" in reasons[7] and "register a tensor as a buffer" in reasons[7]
    # an ordinary method is not __init__: no buffer advice, its own name instead
    assert "__init__" not in reasons[10] and "register the tensor" not in reasons[10]
    assert "`transform`" in reasons[10]
    assert "__init__" not in reasons[14] and "static or class method `window`" in reasons[14]


def test_cuda_code_below_an_early_exit_on_no_gpu_is_not_reported():
    # A test suite's deliberate CUDA cases: reached only where a GPU (or two) exists.
    code = textwrap.dedent("""\
    import unittest
    import torch


    def check(weight, bias):
        y = weight.sum(0)
        if y.is_cuda and y.get_device() != bias.get_device():
            y = y.cuda(bias.get_device())
        return y + bias


    class TestOptim(unittest.TestCase):
        def test_cases(self):
            check(torch.randn(3, 2), torch.randn(2))
            if not torch.cuda.is_available():
                return
            check(torch.randn(3, 2).cuda(), torch.randn(2).cuda())
            if torch.cuda.device_count() < 2:
                self.skipTest("needs two GPUs")
            check(torch.randn(3, 2).cuda(0), torch.randn(2).cuda(1))

        @unittest.skipIf(not torch.cuda.is_available(), "no GPU")
        def test_on_gpu(self):
            check(torch.randn(3, 2).cuda(), torch.randn(2).cuda())
    """)
    result = transform_source(code)
    assert result.output == code
    assert not [f for f in result.findings if not f.fixed]


def test_cuda_code_after_an_exit_that_does_not_test_for_a_gpu_is_still_reported():
    code = textwrap.dedent("""\
    import torch


    def run(x, empty):
        if empty:
            return None
        return x.cuda(1)
    """)
    result = transform_source(code)
    assert [f.code for f in result.findings if not f.fixed] == ["DM103"]


def test_a_cuda_device_defined_only_where_cuda_is_available_stays():
    # DM102 shares the GPU-only check: ``torch.device("cuda")`` inside the availability test is
    # correct code (a library's capability probe), not a crash to fix.
    code = textwrap.dedent("""\
    import torch


    def capability():
        if torch.cuda.is_available():
            device = torch.device("cuda")
            major, minor = torch.cuda.get_device_capability(device)
            return float(f"{major}.{minor}")
        return None
    """)
    result = transform_source(code)
    assert result.output == code
    assert not [f for f in result.findings if not f.fixed]
