"""Code that runs only where there is a GPU: the author's own fallback to the CPU.

``if torch.cuda.is_available(): x = x.cuda()``, the rest of a test after ``if not
torch.cuda.is_available(): return``, a ``@skipIf(not torch.cuda.is_available())`` test:
a hard-coded CUDA device there is correct code, neither a crash to fix nor one to report.
"""

from __future__ import annotations

from typing import Mapping

import libcst as cst
from libcst.metadata import ParentNodeProvider

from .names import qualified_names
from .tree import ancestors, code_of, nodes_of, walk


def gpu_only(metadata: Mapping, node: cst.CSTNode) -> bool:
    """Inside ``if <a GPU switch>:`` (``self.gpu_mode``, ``args.cuda``, ``use_gpu``, ``not args.use_cpu``,
    ``torch.cuda.is_available()``, ``x.is_cuda``) or the ``else`` of ``if args.use_cpu:``, below an
    early exit on one (``if not torch.cuda.is_available(): return``) or an ``assert`` of one, in a
    block that initialises apex's ``amp``, or in a test skipped without one (``@skipIf``)."""
    child: cst.CSTNode = node
    for parent in ancestors(metadata, node):
        if isinstance(parent, (cst.If, cst.IfExp, cst.While)) and _names_a_gpu(parent.test) \
                and child is not parent.test:
            return True
        if isinstance(parent, cst.If) and child is parent.orelse and _names_a_cpu(parent.test):
            return True  # ``if args.use_cpu: ... else: x = x.cuda()``
        if isinstance(parent, cst.FunctionDef) and any(_names_a_gpu(d.decorator) for d in parent.decorators):
            return True
        if isinstance(parent, cst.FunctionDef) and _gpu_twin_of_a_cpu_function(metadata, parent):
            return True  # ``def load_gpu(fp)`` beside ``def load_cpu(fp)``: the caller picks one (3DDFA)
        if isinstance(parent, (cst.IndentedBlock, cst.Module)):
            above = parent.body[: next((i for i, s in enumerate(parent.body) if s is child), 0)]
            if any(isinstance(s, cst.If) and s.orelse is None and _names_a_gpu(s.test) and _exits(s.body)
                   or _asserts_a_gpu(s) or _sets_the_cuda_device(s) or _imports_a_gpu_engine(s) for s in above):
                return True
            if isinstance(parent, cst.IndentedBlock) and any(_initialises_apex_amp(s) for s in parent.body):
                return True  # ``if half: model.to("cuda"); model, opt = amp.initialize(model, opt)``
        child = parent
    return False


def gpu_only_by_design(metadata: Mapping, node: cst.CSTNode) -> bool:
    """Code that needs a GPU by what it does, not by a switch: in a class (or, outside one, a
    function) that runs work on CUDA streams (``torch.cuda.Stream()``, timm's prefetching loader),
    or in a loop over ``torch.cuda.device_count()`` / under ``with torch.cuda.device(i):`` (a buffer
    per GPU, mixup-cifar10's efficient DenseNet), or handed straight to a wrapper that needs a GPU
    (``MMDistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()])``, apex's
    ``amp.initialize(model.cuda(), ...)``).
    It runs only where the program has GPUs."""
    holder = metadata[ParentNodeProvider].get(node)
    wrapper = metadata[ParentNodeProvider].get(holder) if isinstance(holder, cst.Arg) else None
    if isinstance(wrapper, cst.Call) and code_of(wrapper.func).endswith("amp.initialize"):
        return True
    if isinstance(wrapper, cst.Call) and code_of(wrapper.func).endswith("DistributedDataParallel") and any(
            a.keyword is not None and a.keyword.value == "device_ids" and "current_device" in code_of(a.value)
            for a in wrapper.args):
        return True  # ``device_ids=[torch.cuda.current_device()]``: the GPU a bare ``.cuda()`` chose
    if _below_set_device(metadata, node):
        return True
    for parent in ancestors(metadata, node):
        if isinstance(parent, cst.For) and any(
                isinstance(n, cst.Call) and "torch.cuda.device_count" in qualified_names(metadata, n.func)
                for n in walk(parent.iter)):
            return True
        if isinstance(parent, cst.With) and any(
                isinstance(item.item, cst.Call) and "torch.cuda.device" in qualified_names(metadata, item.item.func)
                for item in parent.items):
            return True
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            break
    ancestry = list(ancestors(metadata, node))
    holder = next((a for a in ancestry if isinstance(a, cst.ClassDef)), None) \
        or next((a for a in ancestry if isinstance(a, cst.FunctionDef)), None)
    return holder is not None and any(
        isinstance(n, cst.Call) and qualified_names(metadata, n.func) & _CUDA_STREAM_CALLS for n in walk(holder))


def _below_set_device(metadata: Mapping, node: cst.CSTNode) -> bool:
    """A bare ``net.cuda()`` below ``torch.cuda.set_device(rank)`` in its function: it goes to the GPU
    the author chose for this process, which a device variable of the function need not name (a
    per-rank ``DistributedDataParallel`` set-up)."""
    if not (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "cuda"):
        return False
    child: cst.CSTNode = node
    for parent in ancestors(metadata, node):
        if isinstance(parent, cst.IndentedBlock):
            above = parent.body[: next((i for i, s in enumerate(parent.body) if s is child), 0)]
            if any(_sets_the_cuda_device(s) for s in above):
                return True
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            return False
        child = parent
    return False


_CUDA_STREAM_CALLS = frozenset({"torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.current_stream"})


def in_cuda_available_branch(metadata: Mapping, node: cst.CSTNode) -> bool:
    """In the body of ``if torch.cuda.is_available():`` itself (stricter than ``gpu_only``: no
    other switch, no early exit), where the author's ``else`` usually handles the CPU."""
    child: cst.CSTNode = node
    for parent in ancestors(metadata, node):
        if isinstance(parent, cst.If) and child is parent.body and is_cuda_available_call(metadata, parent.test):
            return True
        child = parent
    return False


def is_cuda_available_call(metadata: Mapping, expr: cst.CSTNode) -> bool:
    """``torch.cuda.is_available()``."""
    return isinstance(expr, cst.Call) and "torch.cuda.is_available" in qualified_names(metadata, expr.func)


def _names_a_gpu(expr: cst.CSTNode) -> bool:
    """Does ``expr`` read a GPU switch (any name or attribute with ``gpu`` or ``cuda`` in it), or
    compare with a CUDA device's name (``self.device.type == 'cuda'``, ``str(device) == 'cuda:0'``)?"""
    for node in walk(expr):
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not) \
                and _names_a_cpu(node.expression):
            return True  # ``if not args.use_cpu:`` (Pointnet2's scripts)
        if isinstance(node, cst.Comparison) and any(
                isinstance(side, cst.SimpleString) and isinstance(side.evaluated_value, str)
                and (side.evaluated_value.split(":")[0] == "cuda" or side.evaluated_value.lower() == "gpu")
                for side in (node.left, *(target.comparator for target in node.comparisons))):
            return True
        if isinstance(node, cst.Comparison) and _device_ids_against_none(node):
            return True  # ``if self.device_id == None: <CPU> else: <split over the GPUs listed>`` (face.evoLVe)
        if isinstance(node, cst.Subscript) and any(  # ``if cfg['use_gpu']:``, ``config['cuda']``
                isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.SimpleString)
                and isinstance(e.slice.value.evaluated_value, str)
                and any(w in e.slice.value.evaluated_value.lower() for w in ("gpu", "cuda")) for e in node.slice):
            return True
        name = node.value if isinstance(node, cst.Name) else (
            node.attr.value if isinstance(node, cst.Attribute) else "")
        if "gpu" in name.lower() or "cuda" in name.lower():
            return True
    return False


def _device_ids_against_none(comparison: cst.Comparison) -> bool:
    """``device_id is None``, ``self.device_ids != None``: GPU ids the caller may leave out, the
    author's switch between a CPU run and a run on the GPUs listed."""
    sides = (comparison.left, *(target.comparator for target in comparison.comparisons))
    names = [s.value if isinstance(s, cst.Name) else s.attr.value if isinstance(s, cst.Attribute) else None
             for s in sides]
    return len(sides) == 2 and "None" in names \
        and any(n is not None and "device_id" in n.lower() for n in names)


_GPU_ENGINES = ("torch2trt", "tensorrt", "pycuda", "cupy")


def _initialises_apex_amp(statement: cst.CSTNode) -> bool:
    """``model, opt = amp.initialize(model, opt, "O1")`` as a statement of the block: apex's mixed
    precision needs CUDA, so the block runs only on a GPU."""
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(n, cst.Call) and code_of(n.func).endswith("amp.initialize") for n in walk(statement))


def _imports_a_gpu_engine(statement: cst.CSTNode) -> bool:
    """``from torch2trt import TRTModule`` above in the same block (ProxylessNAS's evaluators): what
    follows runs a TensorRT engine, which needs a GPU."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.ImportFrom) and small.module is not None:
            if code_of(small.module).split(".")[0] in _GPU_ENGINES:
                return True
        if isinstance(small, cst.Import) and any(code_of(a.name).split(".")[0] in _GPU_ENGINES for a in small.names):
            return True
    return False


def _sets_the_cuda_device(statement: cst.CSTNode) -> bool:
    """``torch.cuda.set_device(gpu_ids[0])`` as a statement of its own: nothing below runs without a
    GPU, and a bare ``.cuda()`` there goes to the device it set (3DDFA's benchmark helpers)."""
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
        and (code_of(small.value.func) == "torch.cuda.set_device" or code_of(small.value.func).endswith(".cuda.set_device"))
        for small in statement.body)


def _gpu_twin_of_a_cpu_function(metadata: Mapping, function: cst.FunctionDef) -> bool:
    """A function named for the GPU next to its CPU twin (``_load_gpu`` and ``_load_cpu``), or told
    which GPU to use by a parameter named for it."""
    name = function.name.value
    lower = name.lower()
    word = "gpu" if "gpu" in lower else "cuda" if "cuda" in lower else None
    holder = metadata[ParentNodeProvider].get(function)
    if word is None or not isinstance(holder, (cst.Module, cst.IndentedBlock)):
        return False
    params = function.params
    if any(word in p.name.value.lower() for p in (*params.posonly_params, *params.params, *params.kwonly_params)):
        return True  # ``reserve_gpu_memory(gpu_index, mb)``: told which GPU to work on (ProxylessNAS)
    start = lower.index(word)
    twin = (name[:start] + ("CPU" if name[start:start + len(word)].isupper() else "cpu")
            + name[start + len(word):])
    return any(isinstance(s, cst.FunctionDef) and s.name.value == twin for s in holder.body)


def _asserts_a_gpu(statement: cst.CSTNode) -> bool:
    """``assert torch.cuda.is_available()``: nothing below runs without a GPU (DeepLabv3's main)."""
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Assert) and _names_a_gpu(small.test)
        and not any(isinstance(n, cst.UnaryOperation) and isinstance(n.operator, cst.Not) for n in walk(small.test))
        for small in statement.body)


def _names_a_cpu(expr: cst.CSTNode) -> bool:
    """A CPU switch: the test is one name or attribute with ``cpu`` in it (``args.use_cpu``), or an
    equality with the CPU device (``x.device == torch.device('cpu')``, ``x.device.type == 'cpu'``)."""
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1 \
            and isinstance(expr.comparisons[0].operator, (cst.Equal, cst.Is)):
        sides = (expr.left, expr.comparisons[0].comparator)
        return any(code_of(side).replace('"', "'") in ("'cpu'", "torch.device('cpu')") for side in sides)
    name = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
    return "cpu" in name.lower()


def _exits(body: cst.BaseSuite) -> bool:
    """The block leaves: ``return``, ``raise``, ``continue``, ``break``, or a test skip."""
    if isinstance(body, cst.SimpleStatementSuite):
        smalls = list(body.body)
    else:
        last = body.body[-1] if isinstance(body, cst.IndentedBlock) and body.body else None
        smalls = list(last.body) if isinstance(last, cst.SimpleStatementLine) else []
    final = smalls[-1] if smalls else None
    if isinstance(final, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
        return True
    return isinstance(final, cst.Expr) and isinstance(final.value, cst.Call) \
        and code_of(final.value.func).rsplit(".", 1)[-1] in ("skip", "skipTest", "exit")


def sets_default_device(metadata: Mapping, module: cst.Module) -> bool:
    """Does the file call ``torch.set_default_device(...)``? Then its factories and the models
    it builds afterwards already land on that device (cleanrl's ppo_trxl): nothing to add."""
    return any("torch.set_default_device" in qualified_names(metadata, n.func)
               for n in nodes_of(module, cst.Call))
