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
    _NORMALIZED.clear()  # `cuda:1` may have become valid or invalid


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


_NORMALIZED: dict[Any, str] = {}


def normalize_known(device: str | torch.device) -> str:
    """:func:`normalize` for a string or ``torch.device``, remembered per value (``x.to(device)``
    runs every step with the same few devices)."""
    found = _NORMALIZED.get(device)
    if found is None:
        found = normalize(device)  # raises for an ordinal the machine lacks: not remembered
        if len(_NORMALIZED) < 64:
            _NORMALIZED[device] = found
    return found


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


_TENSOR_TYPES = frozenset({torch.Tensor, torch.nn.Parameter})
def uniform_device(known: dict, tensors: list[torch.Tensor]) -> str | None:
    """The device every one of ``tensors`` is on (``known`` is a :class:`DeviceTable`'s dict), or
    None when they are not all on one device (or there are none): the caller then decides tensor
    by tensor. (A plain loop: measured faster than chaining ``map`` in C for lists of 4 to 32.)"""
    first = None
    for tensor in tensors:
        entry = known.get(id(tensor))
        device = entry[1] if entry is not None and entry[0]() is tensor else CPU
        if first is None:
            first = device
        elif device != first:
            return None
    return first


def collect_tensors(value: Any, found: list[torch.Tensor]) -> list[torch.Tensor]:
    """:func:`tensors_in` into ``found``, without a generator per level (the dispatcher's hot path)."""
    if type(value) is not dict and _TENSOR_TYPES.issuperset(map(type, value)):
        found.extend(value)  # a flat list of tensors (cat, the foreach ops): checked in C
        return found
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
    tensor alive, and a reused ``id`` is told apart by the reference no longer pointing at the
    tensor. Only GPU tensors are stored. The references carry no callback (one per tensor cost
    a closure at birth and a call at death, for every GPU result); entries of dead tensors are
    swept instead whenever the dict has doubled since the last sweep, which keeps it within
    twice the live GPU tensors at an amortised constant cost. (Cheaper per call than a
    ``WeakIdKeyDictionary``, which builds a reference object for every lookup.)"""

    def __init__(self) -> None:
        self._devices: dict[int, tuple[weakref.ref, str]] = {}
        self.sweep_at = _FIRST_SWEEP

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
        if device == CPU:
            if key in devices:
                del devices[key]  # only GPU entries are kept: the dispatcher relies on it
            return  # the default: nothing to remember
        devices[key] = (_ref(tensor), device)
        if len(devices) > self.sweep_at:
            self.sweep()

    def sweep(self) -> None:
        """Drop the entries of tensors that no longer exist."""
        devices = self._devices
        for key in [key for key, entry in devices.items() if entry[0]() is None]:
            del devices[key]
        self.sweep_at = max(_FIRST_SWEEP, 2 * len(devices))

    def mark(self, value: Any, device: str) -> None:
        for tensor in tensors_in(value):
            self.set(tensor, device)

    def forget(self, tensor: Any) -> str:
        """Drop the entry (and with it the weak reference ``torch.utils.swap_tensors`` refuses)."""
        device = self.of(tensor)
        if self.knows(tensor):
            del self._devices[id(tensor)]
        return device


_ref = weakref.ref
_FIRST_SWEEP = 4096
