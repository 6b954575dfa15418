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
