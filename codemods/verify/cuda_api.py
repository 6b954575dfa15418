"""The parts of ``torch.cuda`` / ``torch.accelerator`` a script calls, answered as a
one-GPU machine would, plus the few entry points the function mode cannot see
(``nn.Parameter(...)``, ``torch.save`` / ``torch.load``, legacy ``torch.cuda.FloatTensor``)."""

from __future__ import annotations

import contextlib
import os
import types
from typing import Any, Iterator

import torch

from .virtual_devices import CPU, CUDA, normalize, tensors_in

GPU_NAME = "Simulated CUDA GPU (devmod)"


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


def _properties(*args: Any, **kwargs: Any) -> Any:
    return types.SimpleNamespace(name=GPU_NAME, major=9, minor=0, total_memory=80 * 2**30,
                                 multi_processor_count=132, is_integrated=False)


_CUDA_FUNCTIONS = {
    "is_available": lambda: True, "device_count": lambda: 1, "current_device": _zero,
    "get_device_name": lambda *a, **k: GPU_NAME, "get_device_capability": lambda *a, **k: (9, 0),
    "get_device_properties": _properties, "synchronize": _noop, "set_device": _noop,
    "empty_cache": _noop, "manual_seed": _noop, "manual_seed_all": _noop, "seed": _noop, "seed_all": _noop,
    "memory_allocated": _zero, "max_memory_allocated": _zero, "memory_reserved": _zero,
    "max_memory_reserved": _zero, "reset_peak_memory_stats": _noop, "reset_max_memory_allocated": _noop,
    "is_current_stream_capturing": lambda: False, "is_initialized": lambda: True, "init": _noop,
    "ipc_collect": _noop, "is_bf16_supported": lambda *a, **k: True,
    "current_stream": lambda *a, **k: _Stream(), "default_stream": lambda *a, **k: _Stream(),
}
class _Stream:
    """Stands in for a CUDA stream: nothing is ever captured or pending."""

    def is_capturing(self) -> bool:
        return False

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def wait_stream(self, other: Any) -> None:
        return None


_ACCELERATOR_FUNCTIONS = {
    "current_stream": lambda *a, **k: _Stream(),
    "is_available": lambda *a, **k: True, "current_accelerator": lambda *a, **k: torch.device("cuda"),
    "device_count": lambda: 1, "current_device_index": _zero, "current_device_idx": _zero,
    "set_device_index": _noop, "set_device_idx": _noop, "synchronize": _noop,
}
_LEGACY_TYPES = {"FloatTensor": torch.FloatTensor, "DoubleTensor": torch.DoubleTensor,
                 "HalfTensor": torch.HalfTensor, "LongTensor": torch.LongTensor, "IntTensor": torch.IntTensor,
                 "ShortTensor": torch.ShortTensor, "ByteTensor": torch.ByteTensor,
                 "CharTensor": torch.CharTensor, "BoolTensor": torch.BoolTensor}


@contextlib.contextmanager
def _patched(owner: Any, values: dict[str, Any]) -> Iterator[None]:
    missing = object()
    saved = {name: getattr(owner, name, missing) for name in values}
    try:
        for name, value in values.items():
            setattr(owner, name, value)
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def _legacy_type(mode: Any, name: str, real: type) -> type:
    """``torch.cuda.FloatTensor(8, 1)``: a CPU tensor marked as on the GPU."""
    def __new__(cls, *args: Any) -> torch.Tensor:
        tensor = real(*args)
        mode.table.mark(tensor, CUDA)
        return tensor
    return type(name, (), {"__new__": __new__, "__module__": "torch.cuda", "legacy_name": f"torch.cuda.{name}"})


def _file_key(f: Any) -> str | None:
    return os.path.abspath(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else None


def _own(function: Any) -> Any:
    """A distinct function object per patched name (torch._dynamo maps functions to rules)."""
    return lambda *args, **kwargs: function(*args, **kwargs)


@contextlib.contextmanager
def patched_cuda_api(mode: Any) -> Iterator[None]:
    """Make this process look like a machine with one CUDA GPU while ``mode`` is active."""
    try:  # optimizers import torch._dynamo lazily; it must see the real torch.cuda
        import torch._dynamo  # noqa: F401
    except Exception:  # pragma: no cover - dynamo is optional for the simulation
        pass
    saved_on: dict[str, str] = {}
    real_save, real_load = torch.save, torch.load
    real_parameter_new = torch.nn.Parameter.__new__

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        key = _file_key(f)
        if key is not None:
            devices = {mode.table.of(t) for t in tensors_in(obj if not hasattr(obj, "state_dict") else {})}
            devices |= {mode.table.of(t) for t in tensors_in(obj) if isinstance(obj, (dict, list, tuple))}
            saved_on[key] = CUDA if CUDA in devices else CPU
        return real_save(obj, f, *args, **kwargs)

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        if callable(map_location) or isinstance(map_location, dict):
            return real_load(f, map_location, *args, **kwargs)  # not modelled: left on the CPU
        target = normalize(map_location) if map_location is not None else saved_on.get(_file_key(f) or "", CPU)
        result = real_load(f, "cpu", *args, **kwargs)
        mode.table.mark(result, target)
        return result

    def parameter_new(cls: type, data: Any = None, requires_grad: bool = True) -> Any:
        param = real_parameter_new(cls, data, requires_grad)
        if isinstance(data, torch.Tensor):
            mode.table.mark(param, mode.table.of(data))
        return param

    legacy = {name: _legacy_type(mode, name, real) for name, real in _LEGACY_TYPES.items()}
    real_variable = torch.autograd.Variable

    def variable_new(cls: type, data: Any, *args: Any, **kwargs: Any) -> Any:
        wrapped = real_variable(data, *args, **kwargs)  # a new tensor object the mode never sees
        mode.table.mark(wrapped, mode.table.of(data))
        return wrapped

    variable = type("Variable", (), {"__new__": variable_new, "__module__": "torch.autograd"})
    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(torch.cuda, {**{k: _own(v) for k, v in _CUDA_FUNCTIONS.items()}, **legacy}))
        if hasattr(torch, "accelerator"):
            stack.enter_context(_patched(torch.accelerator, {
                k: _own(v) for k, v in _ACCELERATOR_FUNCTIONS.items() if hasattr(torch.accelerator, k)}))
        stack.enter_context(_patched(torch, {"save": save, "load": load}))
        stack.enter_context(_patched(torch.autograd, {"Variable": variable}))
        stack.enter_context(_patched(torch.nn.Parameter, {"__new__": parameter_new}))
        stack.enter_context(_patched(torch.nn.DataParallel, {"forward": _data_parallel_forward(mode)}))
        yield


def _data_parallel_forward(mode: Any) -> Any:
    """One simulated GPU: check placement as DataParallel does, move the inputs to
    ``cuda:0`` (its scatter does), and run the module."""
    def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
        for tensor in [*self.module.parameters(), *self.module.buffers()]:
            if mode.table.of(tensor) != CUDA:
                raise RuntimeError("module must have its parameters and buffers on device cuda:0 "
                                   f"(device_ids[0]) but found one of them on device: {mode.table.of(tensor)}")
        moved = [_to_cuda(v) for v in inputs]
        return self.module(*moved, **{k: _to_cuda(v) for k, v in kwargs.items()})
    return forward


def _to_cuda(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to("cuda")
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cuda(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_cuda(v) for k, v in value.items()}
    return value
