"""A simulated ``cuda:0`` on a CPU-only PyTorch, built on ``TorchFunctionMode``.

Every tensor carries a virtual device (``cpu`` or ``cuda:0``) in a side table while its
data stays on the CPU. Every torch call passes through :class:`SimulatedCuda`, which
checks that the tensors it receives agree on a device (with PyTorch's own exceptions:
0-dim CPU tensors, CPU indices into GPU tensors, copies), raises PyTorch's error when
they do not, and gives the result the device the real call would have. The rest of
the machine (``torch.cuda.*``, ``torch.save``/``load``, DataParallel, ...) is patched
by :mod:`.torch_patches` for as long as the simulation is active.
See docs/verify.md for what it covers and what it cannot model.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _device

from .virtual_devices import (CPU, CUDA, DeviceTable, collect_tensors, gpu_count_from_environment, normalize,
                              set_gpu_count, tensors_in)

MISMATCH = "Expected all tensors to be on the same device, but found at least two devices, {0} and {1}!"
GENERATOR_MISMATCH = "Expected a '{0}' device type for generator but found '{1}'"
GRAD_DEVICE_TYPE = ("attempting to assign a gradient with device type '{0}' to a tensor with device type '{1}'. "
                    "Please ensure that the gradient and the tensor are on the same device")
GRAD_DEVICE_INDEX = ("attempting to assign a gradient located on device with index '{0}' to a tensor located on "
                     "device with index '{1}'. Please ensure that the gradient and the tensor are on the same device")
_Parameter = torch.nn.Parameter
_Tensor = torch.Tensor
_ref = weakref.ref
_PLAIN_TENSOR = frozenset({_Tensor})
_DEVICE_OBJECTS: dict[str, torch.device] = {}


def _device_object(name: str) -> torch.device:
    found = _DEVICE_OBJECTS.get(name)
    if found is None:
        found = _DEVICE_OBJECTS[name] = torch.device(name)
    return found


_IN_PLACE: dict[Any, bool] = {}
# Attributes that are not tensors and do not depend on the device: answered by PyTorch directly.
_PLAIN_ATTRIBUTES = frozenset({"shape", "dtype", "requires_grad", "is_leaf", "ndim", "layout", "names",
                               "is_sparse", "is_quantized", "is_meta", "is_nested", "grad_fn", "_version",
                               "output_nr", "itemsize", "nbytes", "is_mkldnn"})


def in_place(func: Callable) -> bool:
    """``add_``, ``x += y`` (``__iadd__``): ops that write into their first argument."""
    found = _IN_PLACE.get(func)
    if found is None:
        name = getattr(func, "__name__", "") or ""
        if name.startswith("__"):
            found = name.startswith("__i") and name[3:-2] in _IN_PLACE_DUNDERS
        else:
            found = name.endswith("_")
        _IN_PLACE[func] = found
    return found


_IN_PLACE_DUNDERS = frozenset({"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
                               "lshift", "rshift", "matmul", "div"})


def _is_output(tensor: torch.Tensor, outputs: Any) -> bool:
    if outputs is None:
        return False
    if outputs is tensor:
        return True
    return isinstance(outputs, (tuple, list)) and any(o is tensor or _is_output(tensor, o) for o in outputs)


@dataclass
class Stats:
    """What a run touched. ``param_devices``: the virtual devices that ``nn.Parameter``s were on
    when they took part in an operation with other tensors (a forward pass, say)."""

    param_devices: set[str] = field(default_factory=set)
    ops: int = 0
    device_errors: int = 0


@dataclass
class Mismatch:
    """Why an operation failed; attached to the raised error as ``error.devmod_mismatch``."""

    op: str
    devices: tuple[str, str]
    operands: list[tuple[torch.Tensor, str]]


def op_name(func: Callable) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)


class SimulatedCuda(TorchFunctionMode):
    """The torch function mode behind :func:`simulated_cuda`. ``table`` holds the virtual
    devices, ``stats`` what the run did."""

    def __init__(self) -> None:
        super().__init__()
        self.table = DeviceTable()
        self.stats = Stats()
        self.default_device = CPU  # torch.set_default_device("cuda") under the simulation sets this

    def device_of(self, tensor: torch.Tensor) -> str:
        return self.table.of(tensor)

    # -- the dispatcher ------------------------------------------------------------------
    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        __tracebackhide__ = True  # pytest shows the user's line, not this one
        self.stats.ops += 1
        route = _ROUTES.get(func)
        if route is None:
            route = _route(func)
        if route is not _OP and route is not _OP_IN_PLACE:
            return route(self, func, args, kwargs or {})
        if kwargs:
            return self.generic(func, args, kwargs)
        # The most common calls: an ordinary op, no keyword arguments, tensors straight in args
        # (a flat scan; only a list or tuple of tensors, as in cat or the foreach ops, goes deeper).
        inputs = []
        for arg in args:
            if isinstance(arg, _Tensor):
                inputs.append(arg)
            elif isinstance(arg, (list, tuple, dict)):
                collect_tensors(arg, inputs)
        if not inputs:
            return func(*args)  # torch.is_grad_enabled(), torch._C._set_grad_enabled(False) ...
        if len(inputs) == 1:
            # One tensor: nothing to disagree with, and no parameter statistics (they need two).
            tensor = inputs[0]
            known = self.table._devices
            entry = known.get(id(tensor))
            device = entry[1] if entry is not None and entry[0]() is tensor else CPU
            result = func(*args)
            if isinstance(result, _Tensor):
                if result is not tensor:
                    if device is not CPU:  # DeviceTable.set, inlined
                        known[id(result)] = (_ref(result), device)
                        if len(known) > self.table.sweep_at:
                            self.table.sweep()
                    elif id(result) in known:
                        del known[id(result)]
            elif isinstance(result, (tuple, list)):
                self.mark_result(result, device, inputs)
            return result
        if route is _OP_IN_PLACE:
            common = self.check(func, inputs, args[0])
            result = func(*args)
            if result is not args[0]:  # add_, x += y, _foreach_add_(list, ...) return what they wrote
                self.mark_result(result, common, inputs)
            return result
        common = self.check(func, inputs)
        result = func(*args)
        self.mark_result(result, common, inputs)
        return result

    def generic(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """An ordinary op: inputs must agree (TensorIterator's rule, see :meth:`check`); the result
        lands where the inputs are, or on ``device=`` for factories."""
        __tracebackhide__ = True
        target = None
        outputs: Any = None
        if kwargs:
            device = kwargs.get("device")
            outputs = kwargs.get("out")
        else:
            device = None
        constructor = func in (_CONSTRUCTORS or constructors())
        if device is not None:
            target = normalize(device)
            if target != CPU:
                kwargs = {**kwargs, "device": "cpu"}
        elif constructor:
            target = self.default_target()
            if target is not None and target != CPU:
                kwargs = {**kwargs, "device": "cpu"}
        inputs = collect_tensors(args, [])
        if kwargs:
            collect_tensors(kwargs, inputs)
        if constructor:
            # torch.tensor([...]) reads values, so tensors inside it don't decide the device;
            # torch.tensor(t) / as_tensor(t) copy t and stay where it is. linspace / arange / full
            # read a tensor argument as a number (``.item()``) and build on the default device.
            common = self.table.of(args[0]) if args and isinstance(args[0], torch.Tensor) \
                and getattr(func, "__name__", "") in _COPYING_CONSTRUCTORS else CPU
        else:
            if in_place(func) and args and isinstance(args[0], torch.Tensor):
                outputs = args[0] if outputs is None else (args[0], outputs)
            common = self.check(func, inputs, outputs) if inputs else CPU
        if kwargs and kwargs.get("generator") is not None:
            self.check_generator(func, kwargs["generator"], target or common)
        result = func(*args, **kwargs)
        if constructor and target is not None and target != common and args and result is args[0]:
            # ``as_tensor(t, device=d)`` / ``asarray`` of a tensor on another device is a copy there
            # (``t.to(d)``); on the one real CPU it came back as ``t`` itself
            result = result.clone()
        self.mark_result(result, target or common, inputs)
        return result

    def finish(self, func: Callable, args: tuple, kwargs: dict, common: str, inputs: list[torch.Tensor]) -> Any:
        """Run an op whose tensors (``inputs``: every tensor in its arguments, no ``out=``) were all
        found on ``common`` by a check at least as strict as TensorIterator's: the parameter
        statistics and the result's device, as :meth:`generic` would do them."""
        self.note_parameters(func, inputs, common)
        result = func(*args, **kwargs)
        self.mark_result(result, common, inputs)
        return result

    def note_parameters(self, func: Callable, inputs: list[torch.Tensor], device: str) -> None:
        """``stats.param_devices``: parameters working with other tensors, all on ``device``."""
        if len(inputs) > 1 and not _PLAIN_TENSOR.issuperset(map(type, inputs)):
            for tensor in inputs:
                # Parameter's metaclass makes isinstance a Python call: only for other subclasses.
                cls = type(tensor)
                if cls is _Parameter or (cls is not _Tensor and isinstance(tensor, _Parameter)):
                    if not in_place(func):
                        # In-place ops on parameters are initialisation and optimizer steps, not the model at work.
                        self.stats.param_devices.add(device)
                    return

    def check_generator(self, func: Callable, generator: Any, device: str) -> None:
        """ATen's ``check_generator``: a CUDA kernel needs a CUDA generator and a CPU one a CPU one."""
        __tracebackhide__ = True
        wanted = "cpu" if device == CPU else "cuda"
        found = "cpu" if self.table.of(generator) == CPU else "cuda"
        if wanted != found:
            self.stats.device_errors += 1
            error = RuntimeError(GENERATOR_MISMATCH.format(wanted, found))
            error.devmod_mismatch = Mismatch(op_name(func), (device, self.table.of(generator)), [])  # type: ignore
            raise error

    def default_target(self) -> str | None:
        """``torch.set_default_device("cuda")`` or ``with torch.device("cuda"):``."""
        if self.default_device != CPU:
            return self.default_device
        current = _device.CURRENT_DEVICE
        if current is not None and current.type == "cuda":
            return normalize(current)
        return None

    def mark_result(self, result: Any, device: str, inputs: list[torch.Tensor]) -> None:
        """Give new result tensors ``device``; a returned input (in-place ops, no-op views)
        keeps its own."""
        if isinstance(result, _Tensor):
            if device == CPU and id(result) not in self.table._devices:
                return  # CPU is the table's default: nothing to record
            for tensor in inputs:
                if tensor is result:
                    return
            self.table.set(result, device)
        elif isinstance(result, (tuple, list)):
            # DeviceTable.set, inlined: _foreach_* ops return a list per call.
            seen = {id(t) for t in inputs}
            table = self.table
            known = table._devices
            gpu = device != CPU
            for tensor in collect_tensors(result, []):
                key = id(tensor)
                if key in seen:
                    continue
                if gpu:
                    known[key] = (_ref(tensor), device)
                elif key in known:
                    del known[key]
            if len(known) > table.sweep_at:
                table.sweep()

    def check(self, func: Callable, inputs: list[torch.Tensor], outputs: Any = None) -> str:
        """The device ``func`` runs on; raises PyTorch's error when its inputs disagree.

        TensorIterator's rule: the common device is the first non-CPU one; every other tensor
        must be on it, except a 0-dim CPU tensor used as an INPUT (a CPU scalar). An output
        (``outputs``: the tensor an in-place op writes, ``out=``) never gets that exemption."""
        __tracebackhide__ = True
        # The usual case first, in one pass: every tensor on one device. Anything else (a second
        # device, a CPU scalar) takes the full rule below.
        known = self.table._devices  # the table's lookup, inlined: this runs for nearly every call
        first = None
        params = False
        for tensor in inputs:
            entry = known.get(id(tensor))
            device = entry[1] if entry is not None and entry[0]() is tensor else CPU
            if first is None:
                first = device
            elif device != first:
                break
            cls = type(tensor)
            if cls is not _Tensor and (cls is _Parameter or isinstance(tensor, _Parameter)):
                params = True
        else:
            if first is None:
                return CPU
            if params and len(inputs) > 1 and not in_place(func):
                # In-place ops on parameters are initialisation and optimizer steps, not the model at work.
                self.stats.param_devices.add(first)
            return first
        return self._check_mixed(func, inputs, outputs)

    def _check_mixed(self, func: Callable, inputs: list[torch.Tensor], outputs: Any) -> str:
        __tracebackhide__ = True
        known = self.table._devices
        devices = []
        common = CPU
        for tensor in inputs:
            entry = known.get(id(tensor))
            if entry is not None and entry[0]() is tensor:
                device = entry[1]
                if common is CPU:
                    common = device
            else:
                device = CPU
            devices.append(device)
        several = len(inputs) > 1
        if several and common != CPU:
            for tensor, device in zip(inputs, devices):
                if device != common and not (device == CPU and tensor.dim() == 0
                                             and not _is_output(tensor, outputs)):
                    raise self.mismatch(func, inputs, MISMATCH.format(common, device), (common, device))
        if several:
            param_devices = None
            for tensor, device in zip(inputs, devices):
                cls = type(tensor)
                if cls is not _Tensor and (cls is _Parameter or isinstance(tensor, _Parameter)):
                    param_devices = param_devices or set()
                    param_devices.add(device)
            if param_devices and not in_place(func):
                # In-place ops on parameters are initialisation and optimizer steps, not the model at work.
                self.stats.param_devices |= param_devices
        return common

    def mismatch(self, func: Callable, inputs: list[torch.Tensor], message: str | None = None,
                 pair: tuple[str, str] | None = None) -> RuntimeError:
        """PyTorch's error for mixed devices, carrying what devmod needs to explain it."""
        operands = [(t, self.table.of(t)) for t in inputs]
        if pair is None:
            devices = sorted({d for _, d in operands}, reverse=True)  # "cuda:0" first, as PyTorch mostly prints
            pair = (devices[0], devices[1]) if len(devices) > 1 else (devices[0], devices[0])
        error = RuntimeError(message or MISMATCH.format(*pair))
        error.devmod_mismatch = Mismatch(op_name(func), pair, operands)  # type: ignore[attr-defined]
        self.stats.device_errors += 1
        return error

@contextlib.contextmanager
def simulated_cuda(gpus: int | None = None) -> Iterator[SimulatedCuda]:
    """Run the block on a simulated ``cuda:0`` (``gpus``: how many GPUs the machine has; default
    ``$DEVMOD_SIMULATED_GPUS`` or 1): ``torch.cuda.is_available()`` is True, tensors
    carry a virtual device, mixing devices raises. Everything is restored on exit, also when
    the block raises. ``sim.stats.param_devices`` tells where the model's parameters worked::

        with simulated_cuda() as sim:
            train()
        assert sim.stats.param_devices == {"cuda:0"}

    Nested inside an active simulation (a test calling it under the pytest plugin, say) it
    yields the active one.
    """
    from .torch_patches import patched_torch

    if _ACTIVE:
        yield _ACTIVE[-1]
        return
    set_gpu_count(gpus if gpus is not None else gpu_count_from_environment())
    mode = SimulatedCuda()
    with patched_torch(mode), mode:
        _ACTIVE.append(mode)
        try:
            yield mode
        finally:
            _ACTIVE.pop()


_ACTIVE: list[SimulatedCuda] = []


_CONSTRUCTORS: frozenset | None = None
# Constructors whose first argument is the data itself: a tensor given there keeps its device.
_COPYING_CONSTRUCTORS = frozenset({"tensor", "as_tensor", "asarray", "nested_tensor", "sparse_coo_tensor",
                                   "sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor",
                                   "sparse_bsc_tensor", "sparse_compressed_tensor"})


def constructors() -> frozenset:
    """Factories that take ``device=`` (PyTorch's own list, used by ``torch.device`` contexts)."""
    global _CONSTRUCTORS
    if _CONSTRUCTORS is None:
        _CONSTRUCTORS = frozenset(_device._device_constructors())
    return _CONSTRUCTORS


# -- routes: which branch of the dispatcher a torch function takes ------------------------------
# It depends on the function alone, so it is worked out once per function and kept in a dict keyed
# by it (a property's ``__get__`` wrapper is a new object per access, but equal per attribute).
_ROUTES: dict[Any, Callable] = {}


def _OP(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    """An ordinary op (TensorIterator's rule); inlined in the dispatcher, this is its marker."""
    return mode.generic(func, args, kwargs)


def _OP_IN_PLACE(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    """An ordinary op that writes into its first argument; inlined in the dispatcher too."""
    return mode.generic(func, args, kwargs)


def _route(func: Callable) -> Callable:
    name = getattr(func, "__name__", None)
    route = HANDLERS.get(func)
    if route is None and name in ("__get__", "__set__"):
        attribute = getattr(getattr(func, "__self__", None), "__name__", "")  # Python properties have none
        if name == "__get__":
            route = _GETTERS.get(attribute, _get_tensor)
        else:
            route = _SETTERS.get(attribute, _set_plain)
    if route is None:
        if func in constructors():
            route = SimulatedCuda.generic
        else:
            route = _OP_IN_PLACE if in_place(func) else _OP
    try:
        _ROUTES[func] = route
    except TypeError:  # an unhashable callable: decided again next time
        pass
    return route


# -- tensor attributes ------------------------------------------------------------------------
def _get_plain(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    return func(*args)


def _get_device(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    device = mode.table.of(args[0])
    return func(*args) if device == CPU else _device_object(device)


def _get_is_cuda(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    return mode.table.of(args[0]) != CPU


def _get_is_cpu(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    return mode.table.of(args[0]) == CPU and func(*args)


def _get_tensor(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    """.grad (made by autograd outside the mode), .data, .T, .mT, .real ...: tensors the mode
    never saw, on their owner's device."""
    value = func(*args)
    if isinstance(value, _Tensor):
        known = mode.table._devices
        entry = known.get(id(value))
        if entry is None or entry[0]() is not value:  # not known yet
            owner = args[0]
            entry = known.get(id(owner))
            if entry is not None and entry[0]() is owner:  # the owner is on a GPU
                mode.table.set(value, entry[1])
    return value


def _set_plain(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    return func(*args)


def _set_grad(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``p.grad = g``: the gradient must be on its tensor's device (``THPVariable_set_grad``, which
    checks the dtype first: with another dtype the real setter decides, and the device is not checked)."""
    __tracebackhide__ = True
    owner, grad = args[0], args[1]
    if isinstance(grad, _Tensor) and grad is not owner and grad.dtype == owner.dtype:
        own, theirs = mode.table.of(owner), mode.table.of(grad)
        if own != theirs:
            own_type, their_type = own.partition(":")[0], theirs.partition(":")[0]
            if own_type != their_type:
                message = GRAD_DEVICE_TYPE.format(their_type, own_type)
            else:
                message = GRAD_DEVICE_INDEX.format(theirs.partition(":")[2], own.partition(":")[2])
            raise mode.mismatch(func, [owner, grad], message, (own, theirs))
    return func(*args)


def _set_data(mode: SimulatedCuda, func: Callable, args: tuple, kwargs: dict) -> Any:
    result = func(*args)
    if isinstance(args[1], _Tensor):
        mode.table.set(args[0], mode.table.of(args[1]))  # Module.to moves parameters with `p.data = ...`
    return result


_GETTERS: dict[str, Callable] = {"device": _get_device, "is_cuda": _get_is_cuda, "is_cpu": _get_is_cpu}
_GETTERS.update(dict.fromkeys(_PLAIN_ATTRIBUTES, _get_plain))
_SETTERS: dict[str, Callable] = {"data": _set_data, "grad": _set_grad}

from .tensor_ops import HANDLERS  # noqa: E402  (the handlers need the class above)
