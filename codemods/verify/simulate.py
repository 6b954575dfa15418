"""A simulated ``cuda:0`` on a CPU-only PyTorch, built on ``TorchFunctionMode``.

Every tensor carries a virtual device (``cpu`` or ``cuda:0``) in a side table while
its data stays on the CPU. Factories with ``device=``, ``.to()``, ``.cuda()``,
``.cpu()``, ``Module.to``, gradients, optimizer state and ``torch.load(map_location=)``
keep the virtual device right; an operation that mixes devices raises the error real
PyTorch raises. ``torch.cuda.is_available()`` is True while the simulation is active.
See docs/verify.md for what it covers and what it cannot model.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from .cuda_api import patched_cuda_api
from .virtual_devices import CPU, CUDA, DeviceTable, normalize, tensors_in

MISMATCH = "Expected all tensors to be on the same device, but found at least two devices, {0} and {1}!"
NUMPY_ON_CUDA = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                 "to host memory first.")
RNN_MISMATCH = ("Input and hidden tensors are not at the same device, found input tensor at {0} and hidden "
                "tensor at {1}")
_RNN_FUNCTIONS = frozenset({"lstm", "gru", "rnn_tanh", "rnn_relu"})
INDEX_ON_OTHER_DEVICE = "indices should be either on cpu or on the same device as the indexed tensor (cpu)"
_T = torch.Tensor
# Operations that may take tensors on different devices, as in real PyTorch.
_MAY_MIX = {_T.copy_, _T.to, _T.cuda, _T.cpu, _T.type, _T.__repr__, _T.__format__, _T.__reduce_ex__,
            _T.__deepcopy__, _T.__setstate__, _T.set_, _T.__setitem__, _T.is_set_to,
            torch._has_compatible_shallow_copy_type, torch.is_same_size}
_INDEXING = {_T.__getitem__, _T.index_select, torch.index_select, _T.gather, torch.gather,
             _T.take, torch.take}


@dataclass
class Stats:
    """What the run touched; ``param_devices`` tells where the model's parameters worked."""

    param_devices: set[str] = field(default_factory=set)
    ops: int = 0


class SimulatedCuda(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.table = DeviceTable()
        self.stats = Stats()

    # -- the dispatcher ------------------------------------------------------------------
    def __torch_function__(self, func: Callable, types, args=(), kwargs=None) -> Any:
        kwargs = dict(kwargs or {})
        self.stats.ops += 1
        name = getattr(func, "__name__", "")
        if name in ("__get__", "__set__"):
            return self._attribute(func, name, args)
        special = _SPECIAL.get(func)
        if special is not None:
            return special(self, func, args, kwargs)
        target = None
        if kwargs.get("device") is not None:
            target = normalize(kwargs["device"])
            kwargs["device"] = "cpu"
        inputs = [t for t in tensors_in((args, kwargs))]
        common = self._check(func, inputs)
        result = func(*args, **kwargs)
        if func not in _MAY_MIX:
            self.table.mark(result, target or common)
        return result

    def _check(self, func: Callable, inputs: list[torch.Tensor]) -> str:
        """The device the op runs on; raises like PyTorch when inputs disagree."""
        devices = []
        # In-place ops on parameters are initialisation and optimizer updates, not the model working.
        computes = (len(inputs) > 1 and func not in _MAY_MIX
                    and not getattr(func, "__name__", "").endswith("_"))
        for tensor in inputs:
            device = self.table.of(tensor)
            if computes and isinstance(tensor, torch.nn.Parameter):
                self.stats.param_devices.add(device)
            # 0-dim CPU tensors mix freely with tensors on any device (PyTorch treats them as scalars).
            if device == CPU and tensor.dim() == 0 and len(inputs) > 1:
                continue
            devices.append(device)
        if func in _INDEXING and inputs:
            base = self.table.of(inputs[0])
            others = {self.table.of(t) for t in inputs[1:]}
            if base == CPU and CUDA in others:
                raise RuntimeError(INDEX_ON_OTHER_DEVICE)
            return base
        distinct = sorted(set(devices), reverse=True)  # "cuda:0" before "cpu", as PyTorch prints it
        if len(distinct) > 1 and func not in _MAY_MIX:
            if getattr(func, "__name__", "") in _RNN_FUNCTIONS and len(devices) > 1:
                raise RuntimeError(RNN_MISMATCH.format(devices[0], next(d for d in devices if d != devices[0])))
            raise RuntimeError(MISMATCH.format(*distinct[:2]))
        return distinct[0] if distinct else CPU

    def _attribute(self, func: Callable, name: str, args) -> Any:
        attribute = getattr(getattr(func, "__self__", None), "__name__", "")
        owner = args[0]
        if name == "__set__":
            result = func(*args)
            if attribute in ("data", "grad") and isinstance(args[1], torch.Tensor):
                self.table.mark(owner if attribute == "data" else args[1], self.table.of(args[1]))
            return result
        value = func(*args)
        if attribute == "device":
            return torch.device(self.table.of(owner))
        if attribute == "is_cuda":
            return self.table.of(owner) != CPU
        if attribute == "is_cpu":
            return self.table.of(owner) == CPU
        if attribute in ("grad", "data") and isinstance(value, torch.Tensor) and not self.table.knows(value):
            self.table.mark(value, self.table.of(owner))  # autograd makes grads outside the mode
        return value

    # -- device moves -----------------------------------------------------------------------
    def _move(self, tensor: torch.Tensor, target: str, copy: bool = False, **options) -> torch.Tensor:
        options = {k: v for k, v in options.items() if v is not None}
        if target != self.table.of(tensor) or copy:
            result = tensor.to(device="cpu", copy=True, **options)
        else:
            result = tensor.to(**options) if options else tensor
        self.table.mark(result, target)
        return result

    def _to(self, func, args, kwargs):
        tensor, rest = args[0], args[1:]
        if rest and isinstance(rest[0], torch.Tensor):
            other = rest[0]
            return self._move(tensor, self.table.of(other), dtype=other.dtype, non_blocking=kwargs.get("non_blocking"))
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*rest, **kwargs)
        target = normalize(device) if device is not None else self.table.of(tensor)
        return self._move(tensor, target, copy=bool(kwargs.get("copy", False)), dtype=dtype,
                          non_blocking=non_blocking, memory_format=memory_format)

    def _cuda(self, func, args, kwargs):
        device = args[1] if len(args) > 1 else kwargs.get("device")
        return self._move(args[0], normalize(device if device is not None else "cuda"),
                          non_blocking=kwargs.get("non_blocking"))

    def _cpu(self, func, args, kwargs):
        return self._move(args[0], CPU)

    def _numpy(self, func, args, kwargs):
        if self.table.of(args[0]) != CPU:
            raise TypeError(NUMPY_ON_CUDA)
        return func(*args, **kwargs)

    def _pin_memory(self, func, args, kwargs):
        if self.table.of(args[0]) != CPU:
            raise RuntimeError(f"cannot pin '{args[0].type().replace('torch.', 'torch.cuda.')}' only dense CPU "
                               "tensors can be pinned")
        return args[0]  # no pinned memory without a GPU; a CPU tensor is what the caller needs

    def _get_device(self, func, args, kwargs):
        return 0 if self.table.of(args[0]) != CPU else -1

    def _type(self, func, args, kwargs):
        wanted = args[1] if len(args) > 1 else kwargs.get("dtype")
        if wanted is None:
            real = func(*args, **kwargs)
            return real.replace("torch.", "torch.cuda.", 1) if self.table.of(args[0]) != CPU else real
        name = wanted if isinstance(wanted, str) else getattr(wanted, "legacy_name", None) or \
            f"{getattr(wanted, '__module__', '')}.{getattr(wanted, '__name__', '')}"
        target = CUDA if ".cuda." in f".{name}" else CPU
        dtype = _LEGACY_DTYPES.get(name.rsplit(".", 1)[-1])
        if dtype is None:
            return func(*args, **kwargs)
        return self._move(args[0], target, dtype=dtype)


_LEGACY_DTYPES = {"FloatTensor": torch.float32, "DoubleTensor": torch.float64, "HalfTensor": torch.float16,
                  "LongTensor": torch.int64, "IntTensor": torch.int32, "ShortTensor": torch.int16,
                  "ByteTensor": torch.uint8, "CharTensor": torch.int8, "BoolTensor": torch.bool,
                  "BFloat16Tensor": torch.bfloat16}

_SPECIAL: dict[Callable, Callable] = {
    _T.to: SimulatedCuda._to, _T.cuda: SimulatedCuda._cuda, _T.cpu: SimulatedCuda._cpu,
    _T.numpy: SimulatedCuda._numpy, _T.pin_memory: SimulatedCuda._pin_memory,
    _T.get_device: SimulatedCuda._get_device, _T.type: SimulatedCuda._type,
}


@contextlib.contextmanager
def simulated_cuda() -> Iterator[SimulatedCuda]:
    """Run the block with a simulated ``cuda:0``; everything is restored on exit."""
    mode = SimulatedCuda()
    with patched_cuda_api(mode), mode:
        yield mode


def simulation_requested() -> bool:
    return os.environ.get("DEVMOD_SIMULATE_CUDA", "") not in ("", "0")
