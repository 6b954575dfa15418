"""Ops whose device check is not TensorIterator's, so a 0-dim CPU tensor gets no exemption and
the error has other words.

Most ATen kernels outside TensorIterator get the device check PyTorch's code generator writes
into their CUDA wrapper (``c10::impl::check_and_update_common_device``): the first tensor
argument fixes the device and the first one that differs is named::

    Expected all tensors to be on the same device, but got index is on cpu, different from
    other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)

``masked_fill`` checks its mask itself. Each handler lists the ATen op a call reaches and its
tensor arguments in ATen's order; the simulation then checks them the same way.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from .virtual_devices import CPU, collect_tensors, tensors_in, uniform_device

WRAPPER_MISMATCH = ("Expected all tensors to be on the same device, but got {name} is on {device}, different from "
                    "other tensors on {common} (when checking argument in method {method})")
MISMATCH = "Expected all tensors to be on the same device, but found at least two devices, {0} and {1}!"
MASK_MISMATCH = "expected self and mask to be on the same device, but got mask on {0} and self on {1}"
SAME_INDEX = ("Tensors of the same index must be on the same device and the same dtype except `step` tensors that "
              "can be CPU and float32/64, and optimizer states that can be bfloat16 for mixed-precision training")
_T = torch.Tensor
Named = Sequence[tuple[str, Any]]


def check_wrapper(mode: Any, func: Callable, method: str, named: Named) -> str:
    """The generated CUDA wrapper's check: every defined tensor argument on the first one's device."""
    __tracebackhide__ = True
    known = mode.table._devices  # the table's lookup, inlined (cat of a batch checks every sample)
    common = None
    for name, tensor in named:
        if not isinstance(tensor, _T):
            continue
        entry = known.get(id(tensor))
        device = entry[1] if entry is not None and entry[0]() is tensor else CPU
        if common is None:
            common = device
        elif device != common:
            message = WRAPPER_MISMATCH.format(name=name, device=device, common=common,
                                              method=f"wrapper_CUDA_{method}")
            tensors = [t for _, t in named if isinstance(t, torch.Tensor)]
            raise mode.mismatch(func, tensors, message, (common, device))
    return common or CPU


def _run(mode: Any, func: Callable, args: tuple, kwargs: dict, method: str | None, named: Named) -> Any:
    """Check like the wrapper, then run as an ordinary op (for the result's device and the
    parameter statistics). ``method=None``: ATen takes another route; the generic check decides."""
    __tracebackhide__ = True
    if method is not None:
        common = check_wrapper(mode, func, method, named)
        if kwargs.get("out") is None:
            # Every tensor argument passed the wrapper's check (stricter than TensorIterator's, which
            # generic would repeat): run it straight away, unless some tensor was not among ``named``.
            inputs = collect_tensors(args, [])
            if kwargs:
                collect_tensors(kwargs, inputs)
            if len(inputs) == sum(1 for _, tensor in named if isinstance(tensor, _T)):
                return mode.finish(func, args, kwargs, common, inputs)
    return mode.generic(func, args, kwargs)


def _arg(args: tuple, kwargs: dict, index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)


# -- the handlers ------------------------------------------------------------------------------
def _cat(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """cat, and stack / hstack / vstack, which reach ATen's ``cat``."""
    __tracebackhide__ = True
    tensors = _arg(args, kwargs, 0, "tensors")
    if isinstance(tensors, (list, tuple)) and kwargs.get("out") is None:
        # The collate function stacks every batch: one pass over the tensors, no names unless one differs.
        found = collect_tensors(tensors, [])
        common = uniform_device(mode.table._devices, found) if found else CPU
        if common is not None:  # all on one device: nothing to name
            return mode.finish(func, args, kwargs, common, found)
    return _run(mode, func, args, kwargs, "cat", [("tensors", t) for t in tensors_in(tensors)])


def _mm(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    return _run(mode, func, args, kwargs, "mm", [("self", args[0]), ("mat2", _arg(args, kwargs, 1, "mat2"))])


def _bmm(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    return _run(mode, func, args, kwargs, "bmm", [("self", args[0]), ("mat2", _arg(args, kwargs, 1, "mat2"))])


def _addmm(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    return _run(mode, func, args, kwargs, "addmm", [("self", args[0]), ("mat1", _arg(args, kwargs, 1, "mat1")),
                                                   ("mat2", _arg(args, kwargs, 2, "mat2"))])


def _matmul_route(first: Any, second: Any) -> tuple[str | None, Named]:
    """Which kernel ``matmul`` folds into: 2-D (or N-D) @ 2-D is ``mm``, 3-D @ 3-D is ``bmm``."""
    if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)):
        return None, ()
    if first.dim() >= 2 and second.dim() == 2:
        return "mm", [("self", first), ("mat2", second)]
    if first.dim() == 3 and second.dim() == 3:
        return "bmm", [("self", first), ("mat2", second)]
    return None, ()


def _matmul(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    first, second = args[0], _arg(args, kwargs, 1, "other")
    if func is _T.__rmatmul__:
        first, second = second, first
    method, named = _matmul_route(first, second)
    return _run(mode, func, args, kwargs, method, named)


def _linear(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``F.linear``: ``addmm(bias, input, weight.t())`` for 2-D and contiguous 3-D input with a
    bias; otherwise ``matmul(input, weight.t())`` (then ``+ bias``)."""
    data, weight = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "weight")
    bias = _arg(args, kwargs, 2, "bias")
    if isinstance(data, torch.Tensor) and bias is not None and (data.dim() == 2 or
                                                                 (data.dim() == 3 and data.is_contiguous())):
        return _run(mode, func, args, kwargs, "addmm", [("self", bias), ("mat1", data), ("mat2", weight)])
    if isinstance(weight, torch.Tensor) and weight.dim() == 2:
        method, named = _matmul_route(data, weight)
        if method is not None:
            check_wrapper(mode, func, method, named)
    return mode.generic(func, args, kwargs)


def _index_select(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    return _run(mode, func, args, kwargs, "_index_select",
                [("self", args[0]), ("index", _arg(args, kwargs, 2, "index"))])


def _embedding(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``F.embedding(input, weight)`` and ``torch.embedding(weight, input)``: ``weight.index_select(0, input)``."""
    if func is torch.embedding:
        weight, indices = args[0], _arg(args, kwargs, 1, "indices")
    else:
        indices, weight = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "weight")
    return _run(mode, func, args, kwargs, "_index_select", [("self", weight), ("index", indices)])


def _gather(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    return _run(mode, func, args, kwargs, "gather", [("self", args[0]), ("index", _arg(args, kwargs, 2, "index"))])


def _scatter(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """scatter / scatter_add / scatter_reduce, in place or not: ``self``, ``index``, ``src``."""
    name = func.__name__  # scatter, scatter_, scatter_add, scatter_add_, scatter_reduce, scatter_reduce_
    index = _arg(args, kwargs, 2, "index")
    source = _arg(args, kwargs, 3, "src")
    if source is None:
        source = kwargs.get("value")
    if name.startswith("scatter_add"):
        method = name
    elif name.startswith("scatter_reduce"):
        method = f"{name}_two"
    else:
        overload = "src" if isinstance(source, torch.Tensor) else "value"
        if kwargs.get("reduce") is not None or len(args) > 4:
            overload = "reduce" if overload == "src" else "value_reduce"
        method = f"{name}_{overload}"
    named = [("self", args[0]), ("index", index)]
    if isinstance(source, torch.Tensor):
        named.append(("src", source))
    return _run(mode, func, args, kwargs, method, named)


def _layer_norm(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    data = _arg(args, kwargs, 0, "input")
    weight, bias = _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")
    return _run(mode, func, args, kwargs, "_native_layer_norm", [("input", data), ("weight", weight),
                                                                 ("bias", bias)])


def _nll_loss(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``F.cross_entropy`` / ``F.nll_loss`` with class-index targets reach ``nll_loss_forward``
    (``nll_loss2d_forward`` for images): ``self``, ``target``, ``weight``."""
    data, target = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "target")
    weight = _arg(args, kwargs, 2, "weight")
    method = None
    if isinstance(data, torch.Tensor) and isinstance(target, torch.Tensor) and not target.is_floating_point():
        method = "nll_loss_forward" if data.dim() <= 2 else "_nll_loss2d_forward"
    return _run(mode, func, args, kwargs, method, [("self", data), ("target", target), ("weight", weight)])


def _masked_fill(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``masked_fill(_)``: the mask must be on the tensor's device, even a 0-dim one; a 0-dim
    value tensor is read as a number and may be anywhere."""
    __tracebackhide__ = True
    base, mask = args[0], _arg(args, kwargs, 1, "mask")
    value = _arg(args, kwargs, 2, "value")
    if isinstance(mask, torch.Tensor):
        own, other = mode.table.of(base), mode.table.of(mask)
        if own != other:
            raise mode.mismatch(func, [base, mask], MASK_MISMATCH.format(other, own), (own, other))
    result = func(*args, **kwargs)
    inputs = [base, mask] + ([value] if isinstance(value, torch.Tensor) else [])
    mode.mark_result(result, mode.table.of(base), inputs)
    return result


def _broadcast_tensors(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``broadcast_tensors`` does no device check: each output is a view of its input, on its
    device (a broadcast CPU scalar becomes a rank >= 1 CPU tensor, no longer exempt)."""
    inputs = list(tensors_in(args))
    results = func(*args, **kwargs)
    for source, result in zip(inputs, results):
        mode.table.set(result, mode.table.of(source))
    return results


def _broadcasting_loss(mode: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
    """mse / l1 / smooth_l1 / huber loss broadcast input and target first: a 0-dim CPU target of a
    larger input is then a rank >= 1 CPU tensor, no longer exempt (TensorIterator's message)."""
    __tracebackhide__ = True
    data, target = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "target")
    if isinstance(data, torch.Tensor) and isinstance(target, torch.Tensor) and data.shape != target.shape:
        devices = [mode.table.of(data), mode.table.of(target)]
        if devices[0] != devices[1]:
            common = devices[0] if devices[0] != CPU else devices[1]
            other = devices[1] if common == devices[0] else devices[0]
            raise mode.mismatch(func, [data, target], MISMATCH.format(common, other), (common, other))
    return mode.generic(func, args, kwargs)


def group_tensors_check(mode: Any, tensorlistlist: Sequence[Sequence[Any]]) -> None:
    """``_group_tensors_by_device_and_dtype`` (optimizers' foreach path): tensors at the same index
    of every list share the first list's device, except CPU float tensors (``step`` counters)."""
    if not tensorlistlist:
        return
    known = mode.table._devices
    if _lists_agree(known, tensorlistlist):
        return
    first = [_device_in(known, lead) for lead in tensorlistlist[0]]
    for other in tensorlistlist[1:]:
        for lead, own, tensor in zip(tensorlistlist[0], first, other):
            if own is None or not isinstance(tensor, _T):
                continue
            theirs = _device_in(known, tensor)
            # ATen lets any CPU float32/64 tensor through here (it takes them for `step` counters);
            # such state then fails in the foreach op itself.
            if own != theirs and not (theirs == CPU and tensor.dtype in (torch.float32, torch.float64)):
                raise mode.mismatch(torch._C._group_tensors_by_device_and_dtype, [lead, tensor], SAME_INDEX,
                                    (own, theirs))


def _lists_agree(known: dict, tensorlistlist: Sequence[Sequence[Any]]) -> bool:
    """The usual case of :func:`group_tensors_check`, list by list: every list on the first list's
    device, or CPU float tensors only (``step`` counters)."""
    lead = uniform_device(known, [t for t in tensorlistlist[0] if isinstance(t, _T)])
    if lead is None:
        return False
    for tensors in tensorlistlist[1:]:
        present = [t for t in tensors if isinstance(t, _T)]
        if not present:
            continue
        device = uniform_device(known, present)
        if device != lead and not (device == CPU and all(t.dtype in _STEP_DTYPES for t in present)):
            return False
    return True


_STEP_DTYPES = frozenset({torch.float32, torch.float64})


def _device_in(known: dict, tensor: Any) -> str | None:
    """The table's lookup for a tensor (None for anything else), inlined from ``DeviceTable.of``."""
    if not isinstance(tensor, _T):
        return None
    entry = known.get(id(tensor))
    return entry[1] if entry is not None and entry[0]() is tensor else CPU


def _functions(names: Sequence[str], *owners: Any) -> list[Callable]:
    return [getattr(owner, name) for owner in owners for name in names if hasattr(owner, name)]


HANDLERS: dict[Callable, Callable] = {}
HANDLERS.update(dict.fromkeys(_functions(("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack",
                                          "column_stack", "row_stack"), torch), _cat))
HANDLERS.update(dict.fromkeys(_functions(("mm",), torch, _T), _mm))
HANDLERS.update(dict.fromkeys(_functions(("bmm",), torch, _T), _bmm))
HANDLERS.update(dict.fromkeys(_functions(("addmm",), torch, _T), _addmm))
HANDLERS.update(dict.fromkeys(_functions(("matmul",), torch, _T) + _functions(("__matmul__", "__rmatmul__"), _T),
                              _matmul))
HANDLERS.update(dict.fromkeys(_functions(("linear",), torch._C._nn, torch.nn.functional), _linear))
HANDLERS.update(dict.fromkeys(_functions(("index_select",), torch, _T), _index_select))
HANDLERS.update(dict.fromkeys(_functions(("embedding",), torch, torch.nn.functional), _embedding))
HANDLERS.update(dict.fromkeys(_functions(("gather",), torch, _T), _gather))
HANDLERS.update(dict.fromkeys(_functions(("scatter", "scatter_add", "scatter_reduce"), torch, _T)
                              + _functions(("scatter_", "scatter_add_", "scatter_reduce_"), _T), _scatter))
HANDLERS.update(dict.fromkeys(_functions(("layer_norm",), torch, torch.nn.functional), _layer_norm))
HANDLERS.update(dict.fromkeys(_functions(("cross_entropy", "nll_loss"), torch.nn.functional), _nll_loss))
HANDLERS.update(dict.fromkeys(_functions(("broadcast_tensors",), torch, torch.functional), _broadcast_tensors))
HANDLERS.update(dict.fromkeys(_functions(("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"),
                                         torch.nn.functional), _broadcasting_loss))
HANDLERS.update(dict.fromkeys(_functions(("masked_fill",), torch, _T) + _functions(("masked_fill_",), _T),
                              _masked_fill))
