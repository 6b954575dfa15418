"""Which virtual device each tensor is on, while its data stays on the CPU."""

from __future__ import annotations

from typing import Any, Iterator

import torch
from torch.utils.weak import WeakIdKeyDictionary

CPU = "cpu"
CUDA = "cuda:0"


def normalize(device: Any) -> str:
    """``"cuda"``, ``0``, ``torch.device("cuda", 0)`` -> ``"cuda:0"``; anything else -> ``"cpu"``."""
    if isinstance(device, int) and not isinstance(device, bool):
        return CUDA
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device) and device.type == "cuda":
        if device.index not in (None, 0):
            raise RuntimeError(f"CUDA error: invalid device ordinal (the simulated machine has one GPU; got {device})")
        return CUDA
    return CPU


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor inside nested lists, tuples and dicts."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


class DeviceTable:
    """Tensor -> virtual device. Tensors it never saw are on the CPU, like real new tensors."""

    def __init__(self) -> None:
        self._devices: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def of(self, tensor: torch.Tensor) -> str:
        return self._devices.get(tensor, CPU)

    def knows(self, tensor: torch.Tensor) -> bool:
        return tensor in self._devices

    def mark(self, value: Any, device: str) -> None:
        for tensor in tensors_in(value):
            self._devices[tensor] = device
