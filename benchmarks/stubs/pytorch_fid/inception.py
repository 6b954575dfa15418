"""An InceptionV3 with the real interface and a tiny random network (no weights to download)."""

import torch
import torch.nn as nn


class InceptionV3(nn.Module):
    DEFAULT_BLOCK_INDEX = 3
    BLOCK_INDEX_BY_DIM = {64: 0, 192: 1, 768: 2, 2048: 3}

    def __init__(self, output_blocks=(3,), *args, **kwargs):
        super().__init__()
        dims = {v: k for k, v in self.BLOCK_INDEX_BY_DIM.items()}
        self.dim = dims[list(output_blocks)[-1]]
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(8, self.dim))

    def forward(self, x):
        return [self.net(x).unsqueeze(-1).unsqueeze(-1)]
