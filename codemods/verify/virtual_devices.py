"""Which virtual device each tensor is on, while its data stays on the CPU."""

from __future__ import annotations

import os
from typing import Any, Iterator

import torch
from torch.utils.weak import WeakIdKeyDictionary

CPU = "cpu"
CUDA = "cuda:0"
GPUS_VARIABLE = "DEVMOD_SIMULATED_GPUS"  # how many GPUs the simulated machine has (default 1)
_GPU_NAMES: tuple[str, ...] = (CUDA,)


def set_gpu_count(count: int) -> None:
    """Give the simulated machine ``count`` GPUs (``cuda:0`` ... ``cuda:{count-1}``)."""
    global _GPU_NAMES
    _GPU_NAMES = tuple(f"cuda:{i}" for i in range(max(1, count)))


def gpu_count() -> int:
    return len(_GPU_NAMES)


def gpu_count_from_environment() -> int:
    try:
        return max(1, int(os.environ.get(GPUS_VARIABLE, "1")))
    except ValueError:
        return 1


def invalid_ordinal(device: Any) -> RuntimeError:
    return RuntimeError(f"CUDA error: invalid device ordinal (the simulated machine has {len(_GPU_NAMES)} GPU(s), "
                        f"{', '.join(_GPU_NAMES)}; got {device})")


def _ordinal(index: int, shown: Any) -> str:
    if 0 <= index < len(_GPU_NAMES):
        return _GPU_NAMES[index]
    raise invalid_ordinal(shown)


def normalize(device: Any) -> str:
    """``"cuda"``, ``"cuda:0"``, ``0``, ``torch.device("cuda", 0)`` -> ``"cuda:0"`` (``"cuda:1"`` ... on a
    simulated machine with more GPUs); other devices -> ``"cpu"``.

    Raises like CUDA does for an ordinal the simulated machine does not have."""
    if isinstance(device, bool):
        return CPU
    if isinstance(device, int):  # a bare int is a CUDA ordinal
        return _ordinal(device, f"cuda:{device}")
    if isinstance(device, str):
        if device == "cuda" or device == "cuda:0":  # fast path: the common spellings
            return CUDA
        if device == "cpu":
            return CPU
        device = torch.device(device)
    if isinstance(device, torch.device) and device.type == "cuda":
        return CUDA if device.index is None else _ordinal(device.index, device)
    return CPU


def is_cuda_request(device: Any) -> bool:
    """True when ``device`` names the (simulated) GPU; never raises."""
    try:
        return device is not None and normalize(device) != CPU
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
