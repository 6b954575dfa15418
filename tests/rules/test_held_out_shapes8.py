"""Shapes from the eighth held-out trial (detr, dino, 3D-ResNets, pytorch-transformer,
pytorch-a2c-ppo-acktr-gail, PyTorch-YOLOv3, efficient_densenet_pytorch, LLMs-from-scratch;
docs/real-repos.md). Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap

from codemods.engine import transform_source


def run(source: str):
    source = textwrap.dedent(source)
    return source, transform_source(source)


def test_a_dict_of_outputs_is_no_device_source():
    # detr's matcher: forward(self, outputs, targets) gets the model's output dict; ``outputs.device``
    # raised AttributeError on every machine. Its CPU index tensors are deliberate.
    source, result = run("""\
        import torch
        from torch import nn


        class Matcher(nn.Module):
            @torch.no_grad()
            def forward(self, outputs, targets):
                logits = outputs["logits"].flatten(0, 1)
                order = torch.argsort(logits.sum(-1)).cpu().tolist()
                return torch.as_tensor(order, dtype=torch.int64)
    """)
    assert result.output == source and not result.findings
