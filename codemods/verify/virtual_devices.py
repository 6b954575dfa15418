"""Which virtual device each tensor is on, while its data stays on the CPU."""

from __future__ import annotations

import os
import weakref
from typing import Any, Iterator

import torch

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


def collect_tensors(value: Any, found: list[torch.Tensor]) -> list[torch.Tensor]:
    """:func:`tensors_in` into ``found``, without a generator per level (the dispatcher's hot path)."""
    for item in (value.values() if isinstance(value, dict) else value):
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple, dict)):
            collect_tensors(item, found)
    return found


class DeviceTable:
    """Tensor -> virtual device, by object identity. Tensors it never saw are on the CPU,
    as every tensor that was not put on the GPU is in real PyTorch.

    A dict keyed by ``id()`` holding a weak reference next to the device: it never keeps a
    tensor alive, the reference's callback drops the entry, and a reused ``id`` is told apart
    by the reference no longer pointing at the tensor. (Cheaper per call than a
    ``WeakIdKeyDictionary``, which builds a reference object for every lookup.)"""

    def __init__(self) -> None:
        self._devices: dict[int, tuple[weakref.ref, str]] = {}

    def of(self, tensor: Any) -> str:
        entry = self._devices.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            return entry[1]
        return CPU

    def knows(self, tensor: Any) -> bool:
        entry = self._devices.get(id(tensor))
        return entry is not None and entry[0]() is tensor

    def set(self, tensor: Any, device: str) -> None:
        key = id(tensor)
        devices = self._devices
        entry = devices.get(key)
        if entry is not None and entry[0]() is tensor:
            if device == CPU:
                del devices[key]  # only GPU entries are kept: the dispatcher relies on it
            elif entry[1] != device:
                devices[key] = (entry[0], device)
            return
        if device == CPU:
            if entry is not None:
                del devices[key]  # a dead tensor's entry under a reused id
            return  # the default: nothing to remember
        devices[key] = (weakref.ref(tensor, lambda ref, key=key: _drop(devices, key, ref)), device)

    def mark(self, value: Any, device: str) -> None:
        for tensor in tensors_in(value):
            self.set(tensor, device)

    def forget(self, tensor: Any) -> str:
        """Drop the entry (and with it the weak reference ``torch.utils.swap_tensors`` refuses)."""
        device = self.of(tensor)
        if self.knows(tensor):
            del self._devices[id(tensor)]
        return device


def _drop(devices: dict, key: int, ref: weakref.ref) -> None:
    entry = devices.get(key)
    if entry is not None and entry[0] is ref:
        del devices[key]
