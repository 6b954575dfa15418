"""``torch.save`` / ``torch.load`` under the simulation.

A checkpoint written from ``cuda:0`` tensors records the location ``cuda:0`` (as on a GPU),
although the bytes come from the CPU; ``torch.load`` then honours ``map_location`` exactly
as PyTorch does (None keeps the recorded location), loads the bytes on the CPU, and gives
the loaded tensors the virtual device they would have had."""

from __future__ import annotations

import contextlib
import types
from typing import Any, Iterator

import torch
import torch.serialization as serialization

from .virtual_devices import CPU, CUDA, normalize

_ATOMS = (str, bytes, int, float, bool, complex, type, types.ModuleType, types.FunctionType,
          types.MethodType, types.BuiltinFunctionType)
_WALK_LIMIT = 200_000  # objects visited per save/load; checkpoints are trees of dicts and lists


def walk_tensors(root: Any) -> Iterator[torch.Tensor]:
    """Tensors reachable from ``root`` through containers, modules and plain objects."""
    seen: set[int] = set()
    stack = [root]
    while stack and len(seen) < _WALK_LIMIT:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, _ATOMS):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            yield obj
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__dict__"):
            try:
                stack.extend(vars(obj).values())
            except TypeError:
                pass


def _storage_key(tensor: torch.Tensor) -> int:
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0


def _choose(location: str, map_location: Any) -> str:
    """Where ``torch.load`` puts a storage saved at ``location``, on a one-GPU machine."""
    wanted: Any = location
    if isinstance(map_location, dict):
        wanted = map_location.get(location, location)
    elif isinstance(map_location, bytes):
        wanted = map_location.decode("ascii")
    elif isinstance(map_location, (str, torch.device, int)):
        wanted = map_location
    if map_location is None or isinstance(map_location, dict):
        device = torch.device(wanted)
        if device.type == "cuda" and device.index not in (None, 0):
            raise RuntimeError(f"Attempting to deserialize object on CUDA device {device.index} but "
                               "torch.cuda.device_count() is 1. Please use torch.load with map_location to "
                               "map your storages to an existing device.")
    return normalize(wanted)


@contextlib.contextmanager
def patched_serialization(mode: Any) -> Iterator[None]:
    real_save, real_load, real_tag = torch.save, torch.load, serialization.location_tag
    on_cuda: list[set[int]] = []  # storages of cuda:0 tensors, per torch.save in progress

    def location_tag(storage: Any) -> str:
        tag = real_tag(storage)
        if tag == "cpu" and on_cuda and storage.data_ptr() in on_cuda[-1]:
            return CUDA
        return tag

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        keys = {_storage_key(t) for t in walk_tensors(obj) if mode.table.of(t) == CUDA}
        on_cuda.append(keys - {0})
        try:
            return real_save(obj, f, *args, **kwargs)
        finally:
            on_cuda.pop()

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        placed: dict[int, str] = {}

        def restore(storage: Any, location: str) -> Any:
            target = CPU
            if callable(map_location) and not isinstance(map_location, (torch.device, dict)):
                # Callables run as given; `lambda storage, loc: storage` keeps the CPU copy. One that
                # calls storage.cuda() cannot run without a GPU: treat it as "on the GPU".
                try:
                    result = map_location(storage, location)
                except Exception:  # noqa: BLE001 - the user's callable on a machine without CUDA
                    result, target = storage, CUDA
                if result is None:
                    result, target = storage, _choose(location, None)
            else:
                result, target = storage, _choose(location, map_location)
            if result.data_ptr():
                placed[result.data_ptr()] = target
            return result

        loaded = real_load(f, restore, *args, **kwargs)
        if CUDA in placed.values():
            for tensor in walk_tensors(loaded):
                device = placed.get(_storage_key(tensor))
                if device is not None:
                    mode.table.set(tensor, device)
        return loaded

    patches = {"save": save, "load": load}
    saved = {name: getattr(torch, name) for name in patches}
    try:
        for name, value in patches.items():
            setattr(torch, name, value)
            setattr(serialization, name, value)
        serialization.location_tag = location_tag
        yield
    finally:
        for name, value in saved.items():
            setattr(torch, name, value)
            setattr(serialization, name, value)
        serialization.location_tag = real_tag

