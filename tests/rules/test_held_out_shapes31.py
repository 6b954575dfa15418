"""Shapes found by the thirty-first held-out trial (docs/real-repos.md "Thirty-first run").
Each test fails on the code the run measured (8bebe9e)."""

from __future__ import annotations

from all_rules_support import run


def test_a_report_names_the_option_that_leaves_the_device_to_the_user():
    # attention-transfer's imagenet.py: a ``--cuda`` option (never read) keeps the file's ``.cuda()``;
    # the reason said "takes its device from the user's settings (e.g. `args.device`)".
    _, open_findings = run("""\
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_true")
        opt = parser.parse_args()
        table = torch.ones(3).cuda()
    """)
    [finding] = [f for f in open_findings if f.code == "DM103"]
    assert "the file has a `--cuda` option" in finding.message
    assert "args.device" not in finding.message


def test_a_report_in_a_plain_class_says_why_nothing_is_placed_there():
    # monodepth2's Trainer: "devmod cannot tell which device this class uses", of a class that
    # holds ``self.device``: the reason is that devmod places nothing in such a class's methods.
    _, open_findings = run("""\
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, model):
                self.model = model

            def mask_loss(self, mask):
                return F.binary_cross_entropy(mask, torch.ones(mask.shape).cuda())
    """)
    [finding] = [f for f in open_findings if f.code == "DM103"]
    assert "a method of `Trainer`, which is neither a model nor driver code" in finding.message
    assert "cannot tell" not in finding.message


def test_a_batch_moved_key_by_key_in_a_loop_is_not_moved_again():
    # monodepth2's evaluate_pose.py: ``for key, ipt in inputs.items(): inputs[key] = ipt.cuda()``;
    # DM203 added a second move of the whole dict above the author's own.
    out, _ = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader


        def evaluate(data):
            net = nn.Linear(3, 1)
            net.cuda()
            loader = DataLoader(data, batch_size=4)
            outs = []
            for inputs in loader:
                for key, ipt in inputs.items():
                    inputs[key] = ipt.cuda()
                outs.append(net(inputs["x"]))
            return outs


        if __name__ == "__main__":
            evaluate(torch.load("samples.pt"))
    """)
    assert "ipt.to(device)" in out
    assert "for k, v in inputs.items()" not in out


def test_samples_handed_to_a_function_that_builds_a_loader_stay_on_the_cpu():
    # Found while reducing the monodepth2 shape: ``evaluate(samples)`` whose ``def evaluate(data)``
    # wraps ``data`` in a DataLoader with workers; the samples were made on the device.
    out, _ = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader


        def evaluate(data):
            net = nn.Linear(3, 1).cuda()
            return [net(x.cuda()) for x in DataLoader(data, batch_size=4, num_workers=2)]


        if __name__ == "__main__":
            samples = [torch.randn(3) for _ in range(8)]
            evaluate(samples)
            evaluate([{"x": torch.randn(3)} for _ in range(8)])
    """)
    assert "samples = [torch.randn(3) for _ in range(8)]" in out
    assert 'evaluate([{"x": torch.randn(3)} for _ in range(8)])' in out
    assert "net = nn.Linear(3, 1).to(device)" in out
