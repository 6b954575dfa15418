"""What the torch function mode cannot see, patched for as long as the simulation runs:
``torch.cuda`` itself, tensor construction that bypasses the mode (``nn.Parameter``,
legacy ``torch.cuda.FloatTensor``, ``Variable``), pinning, ``Module.to(0)``, default
devices, ``torch.compile``, ``torch.Generator(device="cuda")``, ``nn.DataParallel`` and
checkpoints. Every patch is undone on exit, also when the run raises."""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import Any, Callable, Iterator

import torch

from .cuda_api import ACCELERATOR_FUNCTIONS, CUDA_FUNCTIONS
from .serialization import patched_serialization
from .warning_lines import patched_warnings
from .tensor_ops import _LEGACY_DTYPES, legacy_name
from .virtual_devices import CPU, CUDA, is_cuda_request, normalize, tensors_in

_MISSING = object()


@contextlib.contextmanager
def _patched(owner: Any, values: dict[str, Any]) -> Iterator[None]:
    """Set attributes on ``owner``; put back exactly what was there (or nothing) on exit."""
    own = owner.__dict__ if isinstance(owner, type) else None
    saved = {name: (own.get(name, _MISSING) if own is not None else getattr(owner, name, _MISSING))
             for name in values}
    try:
        for name, value in values.items():
            setattr(owner, name, value)
        yield
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
            else:
                setattr(owner, name, value)


def _own(function: Callable) -> Callable:
    """A distinct function object per patched name (torch._dynamo keys rules by function)."""
    if isinstance(function, type):
        return function
    return lambda *args, **kwargs: function(*args, **kwargs)


def _instance_check(check: Callable[[Any], bool]) -> type:
    """A metaclass whose isinstance() is ``check``: stand-in classes stay honest to isinstance."""
    return type("_CheckMeta", (type,), {"__instancecheck__": lambda cls, obj: check(obj)})


def _legacy_type(mode: Any, name: str, real: type) -> type:
    """``torch.cuda.FloatTensor(8, 1)``: a CPU tensor on the virtual GPU."""
    dtype = _LEGACY_DTYPES[name]

    def __new__(cls: type, *args: Any) -> torch.Tensor:
        tensor = real(*args)
        mode.table.set(tensor, CUDA)
        return tensor

    meta = _instance_check(lambda obj: isinstance(obj, torch.Tensor) and obj.dtype == dtype
                           and mode.table.of(obj) != CPU)
    return meta(name, (), {"__new__": __new__, "__module__": "torch.cuda", "legacy_name": f"torch.cuda.{name}"})


def _tensor_patches(mode: Any) -> dict[str, Any]:
    real_make_subclass = torch._C.TensorBase._make_subclass

    def make_subclass(cls: type, data: Any, *args: Any, **kwargs: Any) -> Any:
        # nn.Parameter(t) / nn.Buffer(t) wrap t without a torch call the mode would see.
        result = real_make_subclass(cls, data, *args, **kwargs)
        if isinstance(data, torch.Tensor):
            mode.table.set(result, mode.table.of(data))
        return result

    def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        # Patched on the class, not in the mode: DataLoader pins in a thread the mode does not reach.
        if mode.table.of(self) != CPU:
            raise RuntimeError(f"cannot pin '{legacy_name(self, True)}' only dense CPU tensors can be pinned")
        return self  # no page-locked memory without a GPU; the CPU tensor is what the caller needs

    def is_pinned(self: torch.Tensor, device: Any = None) -> bool:
        return False

    return {"_make_subclass": staticmethod(make_subclass), "pin_memory": pin_memory, "is_pinned": is_pinned}


def _swap_tensors(mode: Any) -> Callable:
    real = torch.utils.swap_tensors

    def swap_tensors(t1: torch.Tensor, t2: torch.Tensor) -> None:
        # The table's weak references would make PyTorch refuse the swap: drop them meanwhile.
        d1, d2 = mode.table.forget(t1), mode.table.forget(t2)
        try:
            real(t1, t2)
        except BaseException:
            mode.table.set(t1, d1)
            mode.table.set(t2, d2)
            raise
        mode.table.set(t1, d2)
        mode.table.set(t2, d1)

    return swap_tensors


def _parse_to(mode: Any) -> Callable:
    real = torch._C._nn._parse_to

    def parse_to(*args: Any, **kwargs: Any) -> Any:
        # Module.to(0) and Module.to(tensor): a CPU-only build cannot parse either the GPU way.
        if args and isinstance(args[0], torch.Tensor):
            args = (torch.device(mode.table.of(args[0])), args[0].dtype, *args[1:])
        elif args and isinstance(args[0], int) and not isinstance(args[0], bool):
            args = (torch.device(normalize(args[0])), *args[1:])
        if isinstance(kwargs.get("device"), int) and not isinstance(kwargs["device"], bool):
            kwargs = {**kwargs, "device": torch.device(normalize(kwargs["device"]))}
        if not args and kwargs.get("device") is not None:
            # Module.to(device=d): the CPU build parses a keyword CUDA device as the CPU under the
            # simulation (seen with torch 2.13), the positional form right; pass it positionally.
            kwargs = dict(kwargs)
            args = (kwargs.pop("device"),)
        return real(*args, **kwargs)

    return parse_to


def _default_device_patches(mode: Any) -> dict[str, Any]:
    real_set, real_get, real_set_type = torch.set_default_device, torch.get_default_device, \
        torch.set_default_tensor_type

    def set_default_device(device: Any) -> None:
        if device is not None and is_cuda_request(device):
            mode.default_device = normalize(device)  # an ordinal the machine lacks fails here, as on a GPU
            return real_set(None)  # factories get device="cpu" plus a virtual cuda:0 from the mode
        mode.default_device = CPU
        return real_set(device)

    def get_default_device() -> torch.device:
        target = mode.default_target()
        return torch.device(target) if target is not None and target != CPU else real_get()

    def set_default_tensor_type(t: Any) -> None:
        name = t if isinstance(t, str) else (getattr(t, "legacy_name", None) or f"{t.__module__}.{t.__name__}")
        if ".cuda." in f".{name}":
            mode.default_device = CUDA
            return real_set_type(f"torch.{name.rsplit('.', 1)[-1]}")
        mode.default_device = CPU
        return real_set_type(t)

    return {"set_default_device": set_default_device, "get_default_device": get_default_device,
            "set_default_tensor_type": set_default_tensor_type}


def _compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``torch.compile`` runs eagerly under the simulation: the graph compiler would trace
    through the mode and see CPU tensors."""
    return model if model is not None else (lambda function: function)


class _MarkedScriptFunction:
    """A TorchScript function runs in C++, past the mode: its results get the device of its
    inputs. Everything else (``.save``, ``.graph``, ``.code``) is the scripted function's."""

    def __init__(self, mode: Any, function: Any) -> None:
        self._mode, self._function = mode, function
        self.__doc__ = getattr(function, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _mark_outputs(self._mode, self._function(*args, **kwargs), [*tensors_in((args, kwargs))])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._function, name)


def _mark_outputs(mode: Any, result: Any, inputs: list[torch.Tensor]) -> Any:
    devices = [d for d in (mode.table.of(t) for t in inputs) if d != CPU]
    mode.mark_result(result, devices[0] if devices else CPU, inputs)
    return result


def _jit_patches(mode: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """TorchScript keeps working; what it returns is marked (not checked) by device."""
    real_script, real_trace = torch.jit.script, torch.jit.trace
    real_call = torch.jit.ScriptModule.__call__

    def wrap(result: Any) -> Any:
        return _MarkedScriptFunction(mode, result) if isinstance(result, torch.jit.ScriptFunction) else result

    def script(obj: Any, *args: Any, **kwargs: Any) -> Any:
        result = real_script(obj, *args, **kwargs)
        if sys._getframe(1).f_globals.get("__name__", "").startswith("torch."):
            return result  # TorchScript compiling a function it met (``F.pad``): it needs the real one
        return wrap(result)

    def trace(func: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("check_trace", False)  # its re-run would compare virtual devices with real ones
        return wrap(real_trace(func, *args, **kwargs))

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        weights = [t for t in (next(iter(self.parameters()), None),) if t is not None]
        return _mark_outputs(mode, real_call(self, *args, **kwargs), [*tensors_in((args, kwargs)), *weights])

    return {"script": script, "trace": trace}, {"__call__": call}


class _VirtualGenerator(torch._C.Generator):
    """A CPU random stream that says it is on a GPU: ``.device`` reads the virtual device."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device(_GENERATOR_DEVICES.of(self) if _GENERATOR_DEVICES is not None else CPU)


_GENERATOR_DEVICES: Any = None


def _generator_class(mode: Any) -> type:
    global _GENERATOR_DEVICES
    real = torch.Generator
    _GENERATOR_DEVICES = mode.table

    def __new__(cls: type, device: Any = "cpu") -> Any:
        if not is_cuda_request(device):
            return real(device)
        generator = _VirtualGenerator("cpu")  # the random stream is a CPU one
        mode.table.set(generator, normalize(device))  # factories check it against their device
        return generator

    meta = _instance_check(lambda obj: isinstance(obj, real))
    return meta("Generator", (), {"__new__": __new__, "__module__": "torch", "__doc__": real.__doc__})


def _autocast_init() -> Callable:
    real = torch.amp.autocast_mode.autocast.__init__

    def __init__(self: Any, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: Any = None) -> None:
        # The data is on the CPU, so CUDA autocast runs as CPU autocast with CUDA's default dtype
        # (float16): lower-precision casts happen as on a GPU (CPU's op lists are a little shorter).
        if device_type == "cuda":
            device_type, dtype = "cpu", dtype if dtype is not None else torch.float16
        real(self, device_type, dtype, enabled, cache_enabled)

    return __init__


def _group_tensors(mode: Any) -> Callable:
    real = torch._C._group_tensors_by_device_and_dtype

    def group(tensorlistlist: Any, with_indices: bool = False) -> Any:
        # The real grouping sees CPU tensors only; the foreach path of the optimizers relies on it
        # to reject state that lives on another device than the parameters.
        from .device_checks import group_tensors_check

        group_tensors_check(mode, tensorlistlist)
        return real(tensorlistlist, with_indices)

    return group


def _tensor_dataset_getitem(mode: Any) -> Callable:
    real = torch.utils.data.TensorDataset.__getitem__
    plain = torch.Tensor

    def __getitem__(self: Any, index: Any) -> Any:
        # DataLoader calls this once per sample. Rows of plain CPU tensors cut by an int index are
        # CPU tensors that cannot clash with anything, so they are cut without a trip through the
        # mode each (the simulation's largest per-sample cost); GPU tensors and tensor indices are not.
        tensors = self.tensors
        if type(index) is int and all(type(t) is plain and not mode.table.knows(t) for t in tensors):
            with torch._C.DisableTorchFunction():
                return tuple(tensor[index] for tensor in tensors)
        return real(self, index)

    return __getitem__


def _variable_class(mode: Any) -> type:
    real = torch.autograd.Variable

    def __new__(cls: type, data: Any = None, *args: Any, **kwargs: Any) -> Any:
        wrapped = real(data, *args, **kwargs) if data is not None else real(*args, **kwargs)
        if isinstance(data, torch.Tensor):
            mode.table.set(wrapped, mode.table.of(data))  # a new tensor object the mode never sees
        return wrapped

    meta = _instance_check(lambda obj: isinstance(obj, torch.Tensor))
    # ``Variable._execution_engine``: autograd's own code reads it (reentrant checkpointing's backward)
    attributes = {k: v for k, v in vars(real).items() if not k.startswith("__")}
    return meta("Variable", (), {**attributes, "__new__": __new__, "__module__": "torch.autograd"})


def _data_parallel_forward(mode: Any) -> Callable:
    """One simulated GPU: check placement as DataParallel does, move the inputs to ``cuda:0``
    as its scatter does, and run the module (the real scatter needs CUDA kernels)."""
    def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        for tensor in [*self.module.parameters(), *self.module.buffers()]:
            if mode.table.of(tensor) != CUDA:
                raise RuntimeError("module must have its parameters and buffers on device cuda:0 "
                                   f"(device_ids[0]) but found one of them on device: {mode.table.of(tensor)}")
        return self.module(*_to_cuda(inputs), **_to_cuda(kwargs))
    return forward


def _to_cuda(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to("cuda")
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_to_cuda(v) for v in value)
    if isinstance(value, tuple):  # a namedtuple
        return type(value)(*(_to_cuda(v) for v in value))
    if isinstance(value, dict):
        return {k: _to_cuda(v) for k, v in value.items()}
    return value


@contextlib.contextmanager
def patched_torch(mode: Any) -> Iterator[None]:
    """Make this process look like a machine with one CUDA GPU while ``mode`` is active."""
    # Optimizers import torch._dynamo on their first step; importing it under these patches
    # fails (it checks torch's own functions), so import it first, against the real torch.
    with contextlib.suppress(Exception):
        importlib.import_module("torch._dynamo")
    legacy = {name: _legacy_type(mode, name, getattr(torch, name)) for name in _LEGACY_DTYPES
              if hasattr(torch, name)}
    with contextlib.ExitStack() as stack:
        enter = stack.enter_context
        enter(_patched(torch.cuda, {**{k: _own(v) for k, v in CUDA_FUNCTIONS.items()}, **legacy}))
        if hasattr(torch, "accelerator"):
            enter(_patched(torch.accelerator, {k: _own(v) for k, v in ACCELERATOR_FUNCTIONS.items()
                                               if hasattr(torch.accelerator, k)}))
        enter(_patched(torch.Tensor, _tensor_patches(mode)))
        enter(_patched(torch.utils, {"swap_tensors": _swap_tensors(mode)}))
        enter(_patched(torch._C._nn, {"_parse_to": _parse_to(mode)}))
        enter(_patched(torch, {**_default_device_patches(mode), "compile": _compile,
                               "Generator": _generator_class(mode)}))
        enter(_patched(torch._C, {"_group_tensors_by_device_and_dtype": _group_tensors(mode)}))
        enter(patched_warnings())
        enter(_patched(torch.amp.autocast_mode.autocast, {"__init__": _autocast_init()}))
        enter(_patched(torch.autograd, {"Variable": _variable_class(mode)}))
        enter(_patched(torch.nn.DataParallel, {"forward": _data_parallel_forward(mode)}))
        enter(_patched(torch.utils.data.TensorDataset, {"__getitem__": _tensor_dataset_getitem(mode)}))
        enter(_patched(torch.backends.cudnn, {"is_acceptable": lambda tensor: False}))  # no cuDNN to accept it
        jit_functions, script_module = _jit_patches(mode)
        enter(_patched(torch.jit, jit_functions))
        enter(_patched(torch.jit.ScriptModule, script_module))
        enter(patched_serialization(mode))
        yield

