"""Image grids and saving, good enough for scripts that write samples to disk."""

from __future__ import annotations

import math

import torch


def make_grid(tensor, nrow: int = 8, padding: int = 2, normalize: bool = False, value_range=None,
              scale_each: bool = False, pad_value: float = 0.0, **_ignored) -> torch.Tensor:
    if isinstance(tensor, (list, tuple)):
        tensor = torch.stack(list(tensor))
    tensor = tensor.detach()
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 3:
        tensor = tensor.unsqueeze(0)
    if tensor.size(1) == 1:
        tensor = tensor.expand(-1, 3, -1, -1)
    if normalize:
        lo, hi = value_range if value_range is not None else (tensor.min(), tensor.max())
        tensor = (tensor - lo) / max(float(hi - lo), 1e-5)
    n, c, h, w = tensor.shape
    cols = min(nrow, n)
    rows = int(math.ceil(n / cols))
    grid = tensor.new_full((c, rows * (h + padding) + padding, cols * (w + padding) + padding), pad_value)
    for k in range(n):
        r, q = divmod(k, cols)
        top, left = r * (h + padding) + padding, q * (w + padding) + padding
        grid[:, top:top + h, left:left + w] = tensor[k]
    return grid


def save_image(tensor, fp, **kwargs) -> None:
    from PIL import Image

    grid = make_grid(tensor, **{k: v for k, v in kwargs.items() if k != "format"})
    array = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to("cpu", torch.uint8).numpy()
    Image.fromarray(array).save(fp)


def __getattr__(name: str):
    # What this stand-in lacks comes from the real torchvision where one is installed.
    if name.startswith("__"):
        raise AttributeError(name)
    from . import real_attribute
    return real_attribute("utils", name)
