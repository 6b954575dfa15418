"""Explain a failed run: is it a device error, where in the user's code, and which devmod
rule would have prevented it.

The rule is a hint, worked out from the error message, the operands the simulation
recorded (``error.devmod_mismatch``), the ``nn.Module`` calls on the stack, and how the
CPU-side variable was made in the user's source (a factory call or a loop variable)."""

from __future__ import annotations

import ast
import functools
import os
import re
import sysconfig
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any, Callable, Iterable

DEVICE_ERROR_PATTERNS = (
    "Expected all tensors to be on the same device",
    "tensors are not at the same device",  # recurrent layers: "Input and hidden tensors are not ..."
    "can't convert cuda",
    "indices should be either on cpu or on the same device",
    "module must have its parameters and buffers on device",
    "should be the same or input should be a MKLDNN tensor",
    "and weight type (torch.cuda",
    "Input type (torch.cuda",
    "Torch not compiled with CUDA enabled",
    "Found no NVIDIA driver",
    "No CUDA GPUs are available",
    "Cannot access accelerator device when none is available",
    "deserialize object on a CUDA device",
    "Attempting to deserialize object on CUDA device",
    "Expected object of device type",
    "'lengths' argument should be a 1D CPU int64 tensor",
    "cannot pin 'torch.cuda",
    "invalid device ordinal",
    "Device index must not be negative",  # ``.to(x.get_device())`` with ``x`` on the CPU (-1)
    "invalid gradient at index",  # backward(grad) with grad on another device
    "and mask to be on the same device",  # masked_fill
    "device type for generator but found",  # a CPU generator for a CUDA factory (or the reverse)
    "Tensors of the same index must be on the same device",  # optimizers' foreach grouping
    "to have the same device as tensor for argument",  # checkSameGPU (cuDNN, some CUDA kernels)
    "to be on GPU (while checking arguments for",  # checkSameGPU: "Tensor for argument #2 'mat1' is on CPU, ..."
    "attempting to assign a gradient with device type",  # p.grad = g with g on another device
    "attempting to assign a gradient located on device with index",
)
# Fallback names; the rule registry is asked first so hints follow the catalogue.
RULE_NAMES = {
    "DM101": "shared-device", "DM102": "string-device", "DM103": "cuda-call", "DM104": "cuda-only-call",
    "DM201": "factory-device", "DM205": "device-index",
    "DM202": "model-to-device", "DM203": "batch-to-device", "DM204": "discarded-to", "DM301": "tensor-buffer",
    "DM302": "load-map-location", "DM303": "numpy-cpu", "DM304": "legacy-cuda", "DM305": "module-container",
    "DM401": "layer-in-forward", "DM403": "optimizer-state-order", "DM404": "dataparallel-order",
    "DM405": "cuda-index-cpu-tensor",
}
# DM104's calls (``torch.cuda.reset_peak_memory_stats`` fails with "no attribute '_cuda_...'").
_GPU_ONLY_CALL = re.compile(r"cuda\.(synchronize|reset_peak_memory_stats|reset_max_memory_\w+|"
                            r"reset_accumulated_memory_stats|ipc_collect)\(")
_NO_CUDA = ("Torch not compiled with CUDA", "Found no NVIDIA driver", "No CUDA GPUs are available",
            "Cannot access accelerator device")
_FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "linspace", "logspace",
    "eye", "tensor", "as_tensor", "from_numpy", "Tensor", "FloatTensor", "LongTensor", "DoubleTensor",
    "IntTensor", "BoolTensor", "ByteTensor", "HalfTensor", "tril", "triu", "normal", "bernoulli", "multinomial",
})
_DEVMOD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY_DIRS = tuple(sorted({os.path.abspath(p) for key in ("stdlib", "platstdlib", "purelib", "platlib")
                              if (p := sysconfig.get_paths().get(key))}))


@dataclass
class Diagnosis:
    rule: str = ""  # "DM203", or "" when no rule applies
    why: str = ""

    @property
    def rule_name(self) -> str:
        return rule_name(self.rule)


def rule_name(code: str) -> str:
    if not code:
        return ""
    try:
        from ..rules import rule_by_code

        rule = rule_by_code(code)
        if rule is not None:
            return rule.NAME
    except Exception:  # noqa: BLE001 - the registry is optional here (libcst missing, a rule bug)
        pass
    return RULE_NAMES.get(code, "")


# checkSameGPU names two GPU ordinals: "...; but device 0 does not equal 1 (while checking arguments for ...)"
_SAME_GPU = re.compile(r"but device (\d+) does not equal (\d+)")


def is_device_error(exc: BaseException) -> bool:
    if hasattr(exc, "devmod_mismatch"):
        return True
    text = str(exc)
    return isinstance(exc, (RuntimeError, TypeError, AssertionError, ValueError)) and \
        any(p in text for p in DEVICE_ERROR_PATTERNS)


def devices_in(message: str) -> list[str]:
    """``cuda:0`` and ``cpu`` named in an error message, GPU first."""
    found = set(re.findall(r"\b(cuda(?::\d+)?|cpu)\b", message))
    return sorted(found, reverse=True)


# -- where in the user's code --------------------------------------------------------------
def is_user_file(path: str) -> bool:
    """Not torch, not devmod, not the standard library or an installed package."""
    if not path or path.startswith("<"):
        return False
    path = os.path.abspath(path)
    if path.startswith(_DEVMOD_DIR + os.sep) or "site-packages" in path or "dist-packages" in path:
        return False
    return not any(path.startswith(d + os.sep) for d in _LIBRARY_DIRS)


def frames(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return out


def user_frame(tb: TracebackType | None) -> tuple[FrameType | None, str, int, str]:
    """The innermost frame in the user's own files: (frame, path, line, source line)."""
    import linecache

    for frame, line in reversed(frames(tb)):
        path = frame.f_code.co_filename
        if is_user_file(path):
            return frame, path, line, linecache.getline(path, line).strip()
    return None, "", 0, ""


# -- which rule ---------------------------------------------------------------------------
def diagnose(exc: BaseException, device_of: Callable[[Any], str]) -> Diagnosis:
    """The devmod rule that fixes ``exc`` (a device error), with a one-line reason."""
    message = str(exc)
    frame, _, _, source = user_frame(exc.__traceback__)
    if "can't convert cuda" in message:
        return Diagnosis("DM303", "`.numpy()` needs a CPU tensor: call `.cpu()` first")
    if "deserialize object on" in message:
        return Diagnosis("DM302", "the checkpoint holds GPU tensors: load it with `map_location=device`")
    if _GPU_ONLY_CALL.search(source) and (any(p in message for p in _NO_CUDA) or "no attribute '_cuda_" in message):
        return Diagnosis("DM104", "a GPU-only wait or reset on a machine without a GPU: run it only where "
                                  "CUDA is available")
    if any(p in message for p in _NO_CUDA):
        if re.search(r"""["']cuda""", source):
            return Diagnosis("DM102", "a hard-coded \"cuda\" device on a machine without one")
        return Diagnosis("DM103", "`.cuda()` / CUDA-only calls on a machine without a GPU")
    if "Device index must not be negative" in message:
        return Diagnosis("DM205", "`x.get_device()` is -1 for a CPU tensor: pass `x.device` as the device")
    if "module must have its parameters and buffers" in message:
        return Diagnosis("DM404", "move the model to the device before wrapping it in DataParallel")
    if "indices should be either on cpu" in message:
        return Diagnosis("DM405", "a CPU tensor (a lookup table, a noise schedule) indexed with GPU indices: "
                                  "make it a buffer or create it on the device")
    if "'lengths' argument" in message:
        return Diagnosis("", "`pack_padded_sequence` lengths must stay on the CPU")
    if "cannot pin" in message:
        return Diagnosis("", "keep Dataset / collate_fn output on the CPU and move each batch in the loop")
    if "invalid gradient at index" in message:
        return Diagnosis("", "the gradient given to `backward()` must be on the output's device: "
                             "make it with `torch.ones_like(y)` or `device=y.device`")
    if "attempting to assign a gradient" in message:
        return Diagnosis("", "a gradient assigned to `.grad` must be on its tensor's device: "
                             "`p.grad = g.to(p.device)`")
    if "device type for generator" in message:
        return Diagnosis("", "a `torch.Generator` must be on the device of the tensors it fills: "
                             "`torch.Generator(device=device)`")
    if "Tensors of the same index" in message:
        return Diagnosis("DM403", "the optimizer state is on another device than the parameters: move the "
                                  "model before building the optimizer and loading its state")
    gpus = {d for d in devices_in(message) if d.startswith("cuda")}
    same_gpu = _SAME_GPU.search(message)
    if same_gpu:
        gpus |= {f"cuda:{same_gpu.group(1)}", f"cuda:{same_gpu.group(2)}"}
    if len(gpus) > 1:
        return Diagnosis("", f"the tensors are on two different GPUs ({' and '.join(sorted(gpus))}): put them on one "
                             "device, e.g. `.to(x.device)`")
    if "and mask to be on the same device" in message:
        return Diagnosis("DM201", "the mask is on another device than the tensor it fills: create it with "
                                  "`device=x.device`")
    return _mismatch(exc, frame, device_of)


def _mismatch(exc: BaseException, frame: FrameType | None, device_of: Callable[[Any], str]) -> Diagnosis:
    import torch

    info = getattr(exc, "devmod_mismatch", None)
    stack = frames(exc.__traceback__)
    # Only optimizer code below the user's innermost frame: an LBFGS closure runs user code
    # from inside ``optimizer.step`` and its mismatches are the user's own.
    below_user = stack[next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] is frame), -1) + 1:]
    if any(isinstance(f.f_locals.get("self"), torch.optim.Optimizer) for f, _ in below_user):
        return Diagnosis("DM403", "the optimizer state is on another device than the parameters: move the "
                                  "model before building the optimizer and loading its state")
    modules = _modules_on_stack(stack)
    call_args, caller = _outermost_module_call(stack)
    operands = info.operands if info else _real_operands(stack, modules, device_of)
    cpu_side = [t for t, d in operands if d == "cpu"] if any(d != "cpu" for _, d in operands) else []

    def owned(tensor: Any, kinds: Iterable[str]) -> bool:
        return any(any(tensor is v for kind in kinds for v in getattr(m, kind, {}).values()) for m in modules)

    cpu_params = [t for t in cpu_side if isinstance(t, torch.nn.Parameter) or owned(t, ("_parameters", "_buffers"))]
    if cpu_params and modules and _params_on(modules, device_of) == {"cuda:0"}:
        # The outer model moved, these weights did not: they are not registered with it.
        if _in_plain_container(modules, cpu_params):
            return Diagnosis("DM305", "sub-modules kept in a Python list/dict do not move with the model: "
                                      "use nn.ModuleList / nn.ModuleDict")
        if not any(p is q for p in cpu_params for q in modules[0].parameters()):
            return Diagnosis("DM401", "a layer built inside `forward` stays on the CPU: build it in `__init__`")
    if cpu_params or (not info and _params_on(modules, device_of) == {"cpu"}):
        return Diagnosis("DM202", "the model (or a loss with a weight tensor) is still on the CPU: "
                                  "move it with `.to(device)`")
    if any(owned(t, ("__dict__",)) for t in cpu_side):
        return Diagnosis("DM301", "a plain tensor attribute of the module does not move with `.to(device)`: "
                                  "register it as a buffer")
    batch = [t for t in call_args if device_of(t) == "cpu" and getattr(t, "dim", lambda: 1)() > 0]
    if batch and caller is not None:
        return _by_origin(_origin(caller, batch), default="DM203")
    origin = _origin(frame, cpu_side) if frame is not None and cpu_side else ""
    if modules:
        if origin == "factory" or not cpu_side:
            return Diagnosis("DM201", "a tensor created inside `forward` (or a helper) has no `device=`: "
                                      "use `device=x.device`")
        # Only what the run shows: which tensor is on the CPU, not a guess at how it got there.
        others = sorted({d for _, d in operands if d != "cpu"})
        return Diagnosis("", f"inside the model a CPU tensor meets tensors on {' and '.join(others)}: its "
                             "inputs, buffers and the tensors it makes must share one device "
                             "(`.to(x.device)` / `device=x.device`)")
    return _by_origin(origin, default="DM201")


def _real_operands(stack: list[tuple[FrameType, int]], modules: list[Any],
                   device_of: Callable[[Any], str]) -> list[tuple[Any, str]]:
    """A real GPU does not say which tensors clashed: take those in the innermost Python
    frames and the innermost module's own tensors."""
    import torch

    from .virtual_devices import tensors_in

    candidates: list[Any] = []
    for frame, _ in stack[-2:]:
        candidates.extend(tensors_in(list(frame.f_locals.values())))
    if modules:
        inner = modules[-1]
        candidates.extend(inner.parameters(recurse=False))
        candidates.extend(inner.buffers(recurse=False))
        candidates.extend(v for v in vars(inner).values() if isinstance(v, torch.Tensor))
    unique = {id(t): t for t in candidates}
    return [(t, device_of(t)) for t in unique.values()]


def _by_origin(origin: str, default: str) -> Diagnosis:
    if origin == "discarded":
        return Diagnosis("DM204", "`x.to(device)` returns a new tensor; its result was thrown away: "
                                  "`x = x.to(device)`")
    if origin == "factory" or (not origin and default == "DM201"):
        return Diagnosis("DM201", "a tensor is created without `device=`")
    return Diagnosis("DM203", "the batch stays on the CPU while the model is on the GPU: move it with "
                              "`.to(device)`")


def _in_plain_container(modules: list[Any], params: list[Any]) -> bool:
    import torch

    for module in modules:
        for value in vars(module).values():
            items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
            for item in items:
                if isinstance(item, torch.nn.Module) and any(p is q for p in params for q in item.parameters()):
                    return True
    return False


def _modules_on_stack(stack: list[tuple[FrameType, int]]) -> list[Any]:
    import torch

    found: list[Any] = []
    for frame, _ in stack:
        owner = frame.f_locals.get("self")
        if isinstance(owner, torch.nn.Module) and not any(owner is m for m in found):
            found.append(owner)
    return found


def _outermost_module_call(stack: list[tuple[FrameType, int]]) -> tuple[list[Any], FrameType | None]:
    """The tensors passed to the outermost ``module(...)`` call and the frame that made it."""
    from .virtual_devices import tensors_in

    previous = None
    for frame, _ in stack:
        if frame.f_code.co_name in ("_wrapped_call_impl", "_call_impl") and \
                frame.f_code.co_filename.endswith(os.path.join("nn", "modules", "module.py")):
            args, kwargs = frame.f_locals.get("args", ()), frame.f_locals.get("kwargs", {})
            caller = previous if previous is not None and is_user_file(previous.f_code.co_filename) else None
            return list(tensors_in((args, kwargs))), caller
        previous = frame
    return [], None


def _params_on(modules: list[Any], device_of: Callable[[Any], str]) -> set[str]:
    devices: set[str] = set()
    for module in modules[:1]:
        devices |= {device_of(p) for p in module.parameters()}
    return devices


def _origin(frame: FrameType, tensors: list[Any]) -> str:
    """How the frame's variables holding ``tensors`` were made: "discarded" (``x.to(device)``
    alone on a line), "factory", "loop" (a loop variable or unpacked from one) or ""."""
    names = {name for name, value in frame.f_locals.items() if any(value is t for t in tensors)}
    tree = _parse(frame.f_code.co_filename) if names else None
    if tree is None:
        return ""
    scope = _scope_at(tree, frame.f_lineno)
    loop_names: set[str] = set()
    factory = False
    for node in ast.walk(scope):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Attribute) and node.value.func.attr in ("to", "cuda") and \
                isinstance(node.value.func.value, ast.Name) and node.value.func.value.id in names:
            return "discarded"
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets = _bound(node.target)
            loop_names |= targets
            for statement in (n for s in getattr(node, "body", []) for n in ast.walk(s)):
                if isinstance(statement, ast.Assign) and _bound_value_uses(statement.value, targets):
                    for target in statement.targets:
                        loop_names |= _bound(target)
        if isinstance(node, ast.Assign) and any(n in _bound(t) for t in node.targets for n in names):
            factory = factory or _is_factory_call(node.value)
    if factory:
        return "factory"
    return "loop" if names & loop_names else ""


@functools.lru_cache(maxsize=32)
def _parse(path: str) -> ast.AST | None:
    try:
        with open(path, "rb") as handle:
            return ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _scope_at(tree: ast.AST, line: int) -> ast.AST:
    best = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is tree or node.lineno >= best.lineno:  # type: ignore[attr-defined]
                best = node
    return best


def _bound(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _bound_value_uses(value: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(value))


def _is_factory_call(value: ast.AST) -> bool:
    """``torch.randn(...)``, ``torch.zeros(...).float()``, ``Variable(Tensor(...))``: a factory
    without ``device=`` along the call chain."""
    node: ast.AST | None = value
    while isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _FACTORIES and not any(k.arg == "device" for k in node.keywords):
            return True
        if name == "Variable" and node.args:
            node = node.args[0]
        else:
            node = func.value if isinstance(func, ast.Attribute) else None
    return False
