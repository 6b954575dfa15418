"""Which virtual device each tensor is on, while its data stays on the CPU."""

from __future__ import annotations

from typing import Any, Iterator

import torch
from torch.utils.weak import WeakIdKeyDictionary

CPU = "cpu"
CUDA = "cuda:0"


def invalid_ordinal(device: Any) -> RuntimeError:
    return RuntimeError(f"CUDA error: invalid device ordinal (the simulated machine has one GPU, cuda:0; "
                        f"got {device})")


def normalize(device: Any) -> str:
    """``"cuda"``, ``"cuda:0"``, ``0``, ``torch.device("cuda", 0)`` -> ``"cuda:0"``; other devices -> ``"cpu"``.

    Raises like CUDA does for an ordinal the one simulated GPU does not have."""
    if isinstance(device, bool):
        return CPU
    if isinstance(device, int):  # a bare int is a CUDA ordinal
        if device != 0:
            raise invalid_ordinal(f"cuda:{device}")
        return CUDA
    if isinstance(device, str):
        if device == "cuda" or device == "cuda:0":  # fast path: the common spellings
            return CUDA
        if device == "cpu":
            return CPU
        device = torch.device(device)
    if isinstance(device, torch.device) and device.type == "cuda":
        if device.index not in (None, 0):
            raise invalid_ordinal(device)
        return CUDA
    return CPU


def is_cuda_request(device: Any) -> bool:
    """True when ``device`` names the (simulated) GPU; never raises."""
    try:
        return device is not None and normalize(device) == CUDA
    except RuntimeError:
        return True


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor inside nested lists, tuples and dicts (the shapes torch functions take)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


class DeviceTable:
    """Tensor -> virtual device, by object identity. Tensors it never saw are on the CPU,
    as every tensor that was not put on the GPU is in real PyTorch."""

    def __init__(self) -> None:
        self._devices: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def of(self, tensor: torch.Tensor) -> str:
        return self._devices.get(tensor, CPU)

    def knows(self, tensor: torch.Tensor) -> bool:
        return tensor in self._devices

    def set(self, tensor: torch.Tensor, device: str) -> None:
        self._devices[tensor] = device

    def mark(self, value: Any, device: str) -> None:
        for tensor in tensors_in(value):
            self._devices[tensor] = device

    def forget(self, tensor: torch.Tensor) -> str:
        """Drop the entry (and with it the weak reference ``torch.utils.swap_tensors`` refuses)."""
        return self._devices.pop(tensor, CPU)
