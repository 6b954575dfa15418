"""Torch calls whose device rules differ from "all inputs on one device, result there too":
moves (``.to``, ``.cuda``, ``.cpu``, ``.type``), the host-only calls (``.numpy()``), indexing,
``x.new_*``, recurrent layers, packed sequences, autograd and printing.

Each handler takes ``(mode, func, args, kwargs)`` and runs with the mode switched off,
so the ``func(...)`` it calls is the plain CPU operation."""

from __future__ import annotations

import re
from typing import Any, Callable

import torch

from .virtual_devices import CPU, CUDA, normalize, normalize_known, tensors_in

NUMPY_ON_CUDA = ("can't convert {0} device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                 "to host memory first.")
INDEX_ON_OTHER_DEVICE = "indices should be either on cpu or on the same device as the indexed tensor (cpu)"
RNN_MISMATCH = "Input and {0} tensors are not at the same device, found input tensor at {1} and {0} tensor at {2}"
LENGTHS_ON_CUDA = "'lengths' argument should be a 1D CPU int64 tensor, but got {0}D {1} {2} tensor"
INVALID_GRADIENT = "invalid gradient at index {0} - expected device {1} but got {2}"
_T = torch.Tensor
_OTHER_BACKEND = frozenset({"meta", "mps", "xpu", "hpu", "xla", "lazy", "mtia", "privateuseone", "ipu", "vulkan"})
_LEGACY_DTYPES = {"FloatTensor": torch.float32, "DoubleTensor": torch.float64, "HalfTensor": torch.float16,
                  "LongTensor": torch.int64, "IntTensor": torch.int32, "ShortTensor": torch.int16,
                  "ByteTensor": torch.uint8, "CharTensor": torch.int8, "BoolTensor": torch.bool,
                  "BFloat16Tensor": torch.bfloat16}
_LEGACY_NAMES = {dtype: name for name, dtype in _LEGACY_DTYPES.items()}


# -- moves ----------------------------------------------------------------------------------
def _other_backend(device: Any) -> bool:
    """``.to("meta")`` and friends: left to PyTorch itself."""
    if isinstance(device, str):
        return device.split(":")[0] in _OTHER_BACKEND
    return isinstance(device, torch.device) and device.type in _OTHER_BACKEND


_DEVICE_TYPES = frozenset({str, torch.device})
_MOVE_OPTIONS = frozenset({"non_blocking", "copy"})


def move(mode: Any, tensor: torch.Tensor, target: str | None, dtype: torch.dtype | None = None,
         non_blocking: bool = False, copy: bool = False, memory_format: Any = None) -> torch.Tensor:
    """``tensor`` on the virtual ``target``: a copy when the device changes, as on a GPU."""
    source = mode.table.of(tensor)
    moving = target is not None and target != source
    options: dict[str, Any] = {}
    if dtype is not None:
        options["dtype"] = dtype
    if memory_format is not None:
        options["memory_format"] = memory_format
    if not (options or moving or copy):
        return tensor
    result = _T.to(tensor, tensor.device, non_blocking=bool(non_blocking), copy=bool(copy or moving), **options)
    if result is not tensor:
        mode.table.set(result, target or source)
    return result


def _to(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """Every signature of ``Tensor.to``: (device, dtype, non_blocking, copy), (dtype, ...), (other, ...)."""
    if len(args) == 2 and type(args[1]) in _DEVICE_TYPES and (not kwargs or _MOVE_OPTIONS.issuperset(kwargs)):
        # The common call, `x.to(device)` or `x.to(device, non_blocking=True)`: a no-op when x is
        # there already (also on a GPU).
        tensor, device = args
        if _other_backend(device):
            return func(*args, **kwargs)
        target = normalize_known(device)
        copy = kwargs.get("copy", False) if kwargs else False
        if not copy and mode.table.of(tensor) == target:
            return tensor
        return move(mode, tensor, target, None, kwargs.get("non_blocking", False) if kwargs else False, copy)
    tensor, rest = args[0], list(args[1:])
    device: Any = None
    dtype = None
    target = None
    if rest and isinstance(rest[0], torch.Tensor):
        other = rest.pop(0)
        target, dtype = mode.table.of(other), other.dtype
    elif rest and isinstance(rest[0], (str, int, torch.device)) and not isinstance(rest[0], bool):
        device = rest.pop(0)
    elif rest and rest[0] is None:  # t.to(None, torch.float16): Module.to(dtype) calls it this way
        rest.pop(0)
    if rest and isinstance(rest[0], torch.dtype):
        dtype = rest.pop(0)
    non_blocking = rest.pop(0) if rest else kwargs.get("non_blocking", False)
    copy = rest.pop(0) if rest else kwargs.get("copy", False)
    if kwargs.get("device") is not None:
        device = kwargs["device"]
    if kwargs.get("dtype") is not None:
        dtype = kwargs["dtype"]
    if device is not None:
        if _other_backend(device):
            return func(*args, **kwargs)
        target = normalize(device)
    return move(mode, tensor, target, dtype, non_blocking, copy, kwargs.get("memory_format"))


def _cuda(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    device = args[1] if len(args) > 1 else kwargs.get("device")
    non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
    return move(mode, args[0], normalize(device if device is not None else "cuda"), None, non_blocking,
                False, kwargs.get("memory_format"))


def _cpu(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    return move(mode, args[0], CPU, memory_format=kwargs.get("memory_format"))


def _type(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``x.type()`` names the CUDA type; ``x.type(torch.cuda.FloatTensor)`` moves."""
    tensor = args[0]
    wanted = args[1] if len(args) > 1 else kwargs.get("dtype")
    if wanted is None:
        name = func(*args, **kwargs)
        return name.replace("torch.", "torch.cuda.", 1) if mode.table.of(tensor) != CPU else name
    if isinstance(wanted, torch.dtype):
        return move(mode, tensor, None, wanted)
    name = wanted if isinstance(wanted, str) else getattr(wanted, "legacy_name", None) or \
        f"{getattr(wanted, '__module__', '')}.{getattr(wanted, '__name__', '')}"
    dtype = _LEGACY_DTYPES.get(name.rsplit(".", 1)[-1])
    if dtype is None:
        result = func(*args, **kwargs)
        mode.mark_result(result, mode.table.of(tensor), [tensor])
        return result
    return move(mode, tensor, CUDA if ".cuda." in f".{name}" else CPU, dtype)


def _type_as(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    other = args[1] if len(args) > 1 else kwargs["other"]
    return move(mode, args[0], mode.table.of(other), other.dtype)


# -- calls that only exist on one side -------------------------------------------------------
def _numpy(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    force = args[1] if len(args) > 1 else kwargs.get("force", False)
    device = mode.table.of(args[0])
    if device != CPU and not (func is _T.numpy and force):
        raise TypeError(NUMPY_ON_CUDA.format(device))
    return func(*args, **kwargs)


def _get_device(mode: Any, func: Callable, args: tuple, kwargs: dict) -> int:
    device = mode.table.of(args[0])
    return int(device.split(":")[1]) if device != CPU else func(*args, **kwargs)


def _record_stream(mode: Any, func: Callable, args: tuple, kwargs: dict) -> None:
    return None  # one simulated stream: nothing to record


# -- results that follow one tensor, whatever the others are ---------------------------------
def _follow_self(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``x.new_zeros(...)``, ``x.view_as(other)``: ``x``'s device (or ``device=``); other tensors
    only give values or a shape."""
    device = kwargs.get("device")
    target = mode.table.of(args[0])
    if device is not None:
        target = normalize(device)
        if target != CPU:
            kwargs = {**kwargs, "device": "cpu"}
    result = func(*args, **kwargs)
    mode.mark_result(result, target, [args[0]])
    return result


def _unchecked(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """Calls PyTorch allows across devices (``copy_``, pickling, deepcopy ...); new tensors
    follow the first argument."""
    result = func(*args, **kwargs)
    if args and isinstance(args[0], torch.Tensor):
        mode.mark_result(result, mode.table.of(args[0]), [args[0]])
    return result


_SUFFIX = re.compile(r", (?=[a-z_]+=)")


def _repr(mode: Any, func: Callable, args: tuple, kwargs: dict) -> str:
    text = func(*args, **kwargs)
    device = mode.table.of(args[0])
    if device != CPU and "device=" not in text:
        # Real CUDA tensors print `device='cuda:0'` as the first suffix.
        found = _SUFFIX.search(text)
        cut = found.start() if found else len(text) - 1
        text = f"{text[:cut]}, device='{device}'{text[cut:]}"
    return text


# -- autograd -------------------------------------------------------------------------------
def _backward(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """A graph may span devices (``x.to("cuda")`` is differentiable), but a gradient handed to
    ``backward`` must be on its output's device (the autograd engine moves only 0-dim ones)."""
    if func is _T.backward:
        outputs, grads = args[0], args[1] if len(args) > 1 else kwargs.get("gradient")
    else:
        outputs = args[0] if args else kwargs.get("tensors")
        grads = args[1] if len(args) > 1 else kwargs.get("grad_tensors")
    _check_gradients(mode, func, outputs, grads)
    return func(*args, **kwargs)


def _check_gradients(mode: Any, func: Callable, outputs: Any, grads: Any) -> None:
    if grads is None:
        return
    outputs = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs or ())
    grads = [grads] if isinstance(grads, torch.Tensor) else list(grads)
    for index, (output, grad) in enumerate(zip(outputs, grads)):
        if isinstance(grad, torch.Tensor) and isinstance(output, torch.Tensor) and grad.dim() > 0:
            expected, got = mode.table.of(output), mode.table.of(grad)
            if expected != got:
                raise mode.mismatch(func, [output, grad], INVALID_GRADIENT.format(index, expected, got),
                                    (expected, got))


def _autograd_grad(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """Each gradient lives where its input does."""
    grads = args[2] if len(args) > 2 else kwargs.get("grad_outputs")
    _check_gradients(mode, func, args[0] if args else kwargs.get("outputs"), grads)
    result = func(*args, **kwargs)
    inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
    inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs or ())
    for grad, source in zip(result, inputs):
        if isinstance(grad, torch.Tensor) and isinstance(source, torch.Tensor):
            mode.table.set(grad, mode.table.of(source))
    return result


# -- indexing -------------------------------------------------------------------------------
def _check_indices(mode: Any, func: Callable, base: torch.Tensor, index: Any) -> str:
    """CPU indices into a GPU tensor are fine; GPU indices into a CPU tensor are not."""
    base_device = mode.table.of(base)
    if base_device == CPU and not isinstance(index, (int, slice)):
        for tensor in tensors_in(index):
            if tensor.dim() > 0 and mode.table.of(tensor) != CPU:
                raise mode.mismatch(func, [base, tensor], INDEX_ON_OTHER_DEVICE)
    return base_device


def _getitem(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    base, index = args[0], args[1]
    entry = mode.table._devices.get(id(base))
    if entry is None or entry[0]() is not base:
        # A CPU tensor (a dataset's, say): its pieces stay on the CPU, the table's default.
        if not isinstance(index, (int, slice)):
            _check_indices(mode, func, base, index)
        return func(*args, **kwargs)
    result = func(*args, **kwargs)
    mode.mark_result(result, entry[1], [base])
    return result


def _setitem(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``x[i] = v``: any index device is accepted (PyTorch moves them); with tensor indices
    the values must be on ``x``'s device, unless they are a 0-dim scalar."""
    base, index, value = args[0], args[1], args[2] if len(args) > 2 else None
    _check_put(mode, func, base, index, value)
    return func(*args, **kwargs)


def _index_put(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    indices = args[1] if len(args) > 1 else kwargs.get("indices")
    values = args[2] if len(args) > 2 else kwargs.get("values")
    _check_put(mode, func, args[0], indices, values)
    result = func(*args, **kwargs)
    mode.mark_result(result, mode.table.of(args[0]), [args[0]])
    return result


def _check_put(mode: Any, func: Callable, base: torch.Tensor, index: Any, value: Any) -> None:
    advanced = any(t.dim() > 0 for t in tensors_in(index))
    if advanced and isinstance(value, torch.Tensor) and value.dim() > 0:
        own, other = mode.table.of(base), mode.table.of(value)
        if own != other:
            # index_put's TensorIterator: the written tensor comes first unless it is the CPU one.
            pair = (own, other) if own != CPU else (other, own)
            raise mode.mismatch(func, [base, value], None, pair)


# -- convolutions ----------------------------------------------------------------------------
def _conv(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """A GPU input with CPU weights fails in cuDNN's type check, with its own message."""
    data = args[0] if args else kwargs.get("input")
    weight = args[1] if len(args) > 1 else kwargs.get("weight")
    if isinstance(weight, torch.Tensor) and mode.table.of(data) != CPU and mode.table.of(weight) == CPU:
        raise mode.mismatch(func, [data, weight], f"Input type ({legacy_name(data, True)}) and weight type "
                                                  f"({legacy_name(weight, False)}) should be the same")
    return mode.generic(func, args, kwargs)


def legacy_name(tensor: torch.Tensor, cuda: bool) -> str:
    """``torch.cuda.FloatTensor``: how PyTorch names a tensor's type in its messages."""
    name = _LEGACY_NAMES.get(tensor.dtype, "Tensor")
    return f"torch.cuda.{name}" if cuda else f"torch.{name}"


# -- recurrent layers -----------------------------------------------------------------------
def _rnn(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``_VF.lstm/gru/rnn_*``: PyTorch checks hidden state, then weights, against the input,
    with its own message. Packed input carries CPU ``batch_sizes``, which must stay there."""
    data = args[0]
    packed = isinstance(args[1], torch.Tensor) and args[1].dtype == torch.int64
    hidden, params = (args[2], args[3]) if packed else (args[1], args[2])
    device = mode.table.of(data)
    for role, tensors in (("hidden", hidden), ("parameter", params)):
        for tensor in tensors_in(tensors):
            other = mode.table.of(tensor)
            if other != device:
                message = RNN_MISMATCH.format(role, device, other)
                raise mode.mismatch(func, [data, *tensors_in(hidden), *tensors_in(params)], message)
    if any(isinstance(t, torch.nn.Parameter) for t in tensors_in(params)):
        mode.stats.param_devices.add(device)
    result = func(*args, **kwargs)
    mode.mark_result(result, device, [])
    return result


def _pack_padded(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    data, lengths = args[0], args[1]
    if mode.table.of(lengths) != CPU:
        # Worded as ATen does; the Python wrapper has already made the lengths int64.
        dtype = {torch.int64: "Long", torch.int32: "Int"}.get(lengths.dtype, str(lengths.dtype))
        raise mode.mismatch(func, [data, lengths],
                            LENGTHS_ON_CUDA.format(lengths.dim(), mode.table.of(lengths), dtype))
    packed, batch_sizes = func(*args, **kwargs)
    mode.table.set(packed, mode.table.of(data))
    mode.table.set(batch_sizes, CPU)  # batch sizes live on the CPU, also on a GPU machine
    return packed, batch_sizes


def _pad_packed(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    padded, lengths = func(*args, **kwargs)
    mode.table.set(padded, mode.table.of(args[0]))
    mode.table.set(lengths, CPU)
    return padded, lengths


def _ctc_loss(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``torch.ctc_loss`` (behind ``nn.CTCLoss``): ATen copies the lengths to the CPU and moves
    the targets to the log-probs' device itself (LossCTC.cpp), so mostly only the log-probs place
    it. One exception, seen on an H200 (PyTorch 2.11, cuDNN 9.19): where the cuDNN kernel is
    eligible (float32 log-probs on the GPU, blank 0, 1-D int32 targets, int32 length tensors,
    cuDNN on), the "mean" reduction divides the GPU losses by the target lengths as they are,
    so CPU target lengths fail there."""
    names = ("log_probs", "targets", "input_lengths", "target_lengths", "blank", "reduction")
    given = {**dict(zip(names, args)), **kwargs}
    log_probs, targets = given.get("log_probs"), given.get("targets")
    input_lengths, target_lengths = given.get("input_lengths"), given.get("target_lengths")
    device = mode.table.of(log_probs)
    if (device != CPU and given.get("reduction", "mean") in ("mean", 1) and given.get("blank", 0) == 0
            and torch.backends.cudnn.enabled and log_probs.dtype == torch.float32 and log_probs.dim() == 3
            and isinstance(targets, torch.Tensor) and targets.dim() == 1 and targets.dtype == torch.int32
            and all(isinstance(t, torch.Tensor) and t.dtype == torch.int32 for t in (input_lengths, target_lengths))
            and mode.table.of(target_lengths) == CPU):
        raise mode.mismatch(func, [log_probs, target_lengths], pair=(device, CPU))
    result = func(*args, **kwargs)
    mode.mark_result(result, device, [log_probs])
    return result


def _functions(*names: str, owner: Any = _T) -> list[Callable]:
    return [getattr(owner, name) for name in names if hasattr(owner, name)]


HANDLERS: dict[Callable, Callable] = {
    _T.to: _to, _T.cuda: _cuda, _T.cpu: _cpu, _T.type: _type, _T.type_as: _type_as,
    _T.numpy: _numpy, _T.__array__: _numpy, _T.get_device: _get_device, _T.record_stream: _record_stream,
    _T.__repr__: _repr, _T.__getitem__: _getitem, _T.__setitem__: _setitem,
    _T.backward: _backward, torch.autograd.backward: _backward, torch.autograd.grad: _autograd_grad,
    torch._pack_padded_sequence: _pack_padded, torch._pad_packed_sequence: _pad_packed,
}
HANDLERS.update(dict.fromkeys(_functions("index_put_", "index_put") + _functions("index_put", owner=torch),
                              _index_put))
HANDLERS.update(dict.fromkeys(_functions("lstm", "gru", "rnn_tanh", "rnn_relu", owner=torch), _rnn))
HANDLERS.update(dict.fromkeys(_functions("ctc_loss", owner=torch) + _functions("ctc_loss", owner=torch.nn.functional),
                              _ctc_loss))
HANDLERS.update(dict.fromkeys(_functions("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                         "conv_transpose3d", owner=torch), _conv))
HANDLERS.update(dict.fromkeys(_functions(
    "new_tensor", "new_zeros", "new_ones", "new_empty", "new_full", "new_empty_strided", "new",
    "view_as", "expand_as", "reshape_as", "resize_as_"), _follow_self))
HANDLERS.update(dict.fromkeys(_functions(
    "copy_", "set_", "is_set_to", "__deepcopy__", "__reduce_ex__", "__setstate__", "__format__")
    + _functions("is_same_size", "result_type", "_has_compatible_shallow_copy_type", owner=torch), _unchecked))

from .device_checks import HANDLERS as _OWN_CHECKS  # noqa: E402  (ops with their own device check)

HANDLERS.update(_OWN_CHECKS)
