"""In-process runner for benchmarks/real_repos.py: smoke tests of one file's models, or a README's code.

    python real_repos_runner.py modules REPO_ROOT - RESULTS.jsonl SPECS.json REL_PATH...
    python real_repos_runner.py readme REPO_ROOT REL_PATH RESULTS.jsonl
    python real_repos_runner.py notebook REPO_ROOT REL_PATH RESULTS.jsonl

It is run as a script, on the plain CPU or under ``devmod verify --simulate``. Every item (a model
class, a model factory, an author's ``test()`` function, a README code block) runs in its own
try/except under a time limit, and one JSON line per item goes to RESULTS.jsonl as soon as it is
known, so a run killed by its time limit still reports what it finished.

Model smoke tests: a class or factory that can be built without arguments (or with the arguments
the trial's config gives) is built, put in eval mode, and called once under ``torch.no_grad()``
with a small synthetic input. The first run (before the rewrite, plain CPU) probes a few input
shapes and writes the one that worked to SPECS.json; the other runs reuse it, so before and after
feed the same input. Where CUDA is available (the simulated one), each model is tried twice: left
where it was built with a CPU input (a library used on the CPU on a GPU machine must keep working),
and after ``.to("cuda")`` with the input on the GPU.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import json
import os
import re
import signal
import sys
import time
import tokenize
import traceback
from typing import Any, Callable

ITEM_SECONDS = int(os.environ.get("TRIAL_ITEM_TIMEOUT", "20"))
# Input shapes tried, in order, when a model's forward takes one tensor and no spec is configured.
CANDIDATES: list[dict[str, Any]] = [
    {"kind": "float", "shape": [2, 3, 32, 32]},
    {"kind": "float", "shape": [2, 1, 28, 28]},
    {"kind": "float", "shape": [2, 3, 64, 64]},
    {"kind": "long", "shape": [2, 8], "high": 10},
    {"kind": "float", "shape": [2, 8, 16]},
    {"kind": "float", "shape": [2, 16]},
    {"kind": "float", "shape": [2, 100]},
    {"kind": "float", "shape": [2, 3, 224, 224]},
]
FACTORY_NAME = re.compile(r"^[A-Z]|[Nn]et|[Mm]odel")
DEVICE_PATTERNS = (
    "same device", "not at the same device", "can't convert cuda", "should be either on cpu",
    "parameters and buffers on device", "weight type (torch.cuda", "Input type (torch.cuda",
    "Expected object of device type", "deserialize object on a CUDA device", "cannot pin 'torch.cuda",
)


class ItemTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise ItemTimeout(f"item ran past {ITEM_SECONDS} s")


def classify(exc: BaseException) -> str:
    if isinstance(exc, ItemTimeout):
        return "timeout"
    text = str(exc)
    return "device-error" if any(p in text for p in DEVICE_PATTERNS) else "error"


class Results:
    def __init__(self, path: str) -> None:
        self.path = path

    def run(self, name: str, fn: Callable[[], Any], seconds: int = ITEM_SECONDS) -> Any:
        """Run one item; record clean / device-error / error / timeout / skipped."""
        start = time.monotonic()
        record: dict[str, Any] = {"item": name}
        value = None
        signal.alarm(seconds)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                value = fn()
            record["kind"] = "clean"
        except Skip as skip:
            record.update(kind="skipped", message=str(skip))
        except BaseException as exc:  # an item's failure is data, not the runner's
            if isinstance(exc, KeyboardInterrupt):
                raise
            if isinstance(exc, SystemExit) and exc.code in (0, None):
                record["kind"] = "clean"
            else:
                record.update(kind=classify(exc), message=f"{type(exc).__name__}: {exc}"[:600],
                              where=_user_frame(exc))
        finally:
            signal.alarm(0)
        record["seconds"] = round(time.monotonic() - start, 2)
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        return value


class Skip(Exception):
    """The item cannot be run (needs arguments, no input shape fits): not part of the comparison."""


def _user_frame(exc: BaseException) -> str:
    root = os.environ.get("TRIAL_REPO_ROOT", "")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if root and f.filename.startswith(root)]
    if not frames:
        return ""
    f = frames[-1]
    return f"{os.path.relpath(f.filename, root)}:{f.lineno}: {(f.line or '').strip()[:160]}"


def import_file(root: str, rel: str):
    """Import REL_PATH as the module name the repository itself would use."""
    parts = rel[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    # the longest chain of packages (folders with __init__.py) that ends at the file
    start = len(parts) - 1
    while start > 0 and os.path.exists(os.path.join(root, *parts[:start], "__init__.py")):
        start -= 1
    if start == len(parts) - 1 and start > 0 and _relative_import(os.path.join(root, rel)):
        start -= 1  # ``from .sibling import x`` in a folder without __init__.py: a namespace package
    base = os.path.join(root, *parts[:start])
    for entry in (base, root):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    return importlib.import_module(".".join(parts[start:]))


def _relative_import(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree))


def required_params(fn: Callable) -> list[str]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return ["?"]
    return [p.name for p in sig.parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def make_input(spec: dict[str, Any], device: str):
    import torch

    gen = torch.Generator().manual_seed(0)
    if spec["kind"] == "long":
        value = torch.randint(0, spec.get("high", 10), spec["shape"], generator=gen)
    else:
        value = torch.randn(spec["shape"], generator=gen)
    return value.to(device)


def call_model(model, spec_list: list[dict[str, Any]], device: str):
    import torch

    args = [make_input(s, device) for s in spec_list]
    with torch.no_grad():
        return model(*args)


def smoke_items(root: str, rel: str, results: Results, specs: dict[str, Any], probing: bool,
                config: dict) -> None:
    """Smoke-test one file's models and test functions; items are named "REL::what"."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    outer = results.run
    results = type("Prefixed", (), {"run": staticmethod(lambda name, fn, seconds=ITEM_SECONDS:
                                                        outer(f"{rel}::{name}", fn, seconds))})()
    module = results.run("import", lambda: import_file(root, rel), seconds=60)
    if module is None:
        return
    kwargs_cfg: dict[str, dict] = config.get("kwargs", {})
    inputs_cfg: dict[str, list] = config.get("inputs", {})
    builders: list[tuple[str, Callable[[], Any]]] = []
    for name, obj in sorted(vars(module).items()):
        if getattr(obj, "__module__", None) != module.__name__ or name.startswith("_"):
            continue
        if inspect.isclass(obj) and issubclass(obj, nn.Module):
            kwargs = kwargs_cfg.get(name)
            if kwargs is None and required_params(obj.__init__)[1:]:
                continue
            builders.append((name, lambda obj=obj, kw=kwargs or {}: obj(**kw)))
        elif inspect.isfunction(obj) and not required_params(obj):
            if name == "test" or name.startswith("test_"):
                results.run(f"test:{name}", obj, seconds=int(config.get("test_timeout", ITEM_SECONDS)))
            elif FACTORY_NAME.search(name) and name not in ("main", "train", "run", "evaluate"):
                builders.append((name, obj))
    placements = ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
    for name, build in builders:
        for placement in placements:
            label = f"model:{name}" if placement == "cpu" else f"model:{name}>cuda"

            def item(name=name, build=build, placement=placement):
                model = build()
                if not isinstance(model, nn.Module):
                    raise Skip("not a module")
                model.eval()
                if placement != "cpu":
                    model = model.to(placement)
                chosen = inputs_cfg.get(name) or specs.get(f"{rel}::{name}")
                if chosen:
                    return call_model(model, chosen, placement)
                if not probing:
                    raise Skip("no input shape fits")
                forward = getattr(type(model), "forward", None)
                if forward is None or len(required_params(forward)) != 2:
                    raise Skip("forward does not take exactly one input")
                for cand in CANDIDATES:
                    try:
                        call_model(model, [cand], placement)
                    except ItemTimeout:
                        raise
                    except Exception:
                        continue
                    specs[f"{rel}::{name}"] = [cand]
                    return None
                raise Skip("no input shape fits")

            results.run(label, item)


def readme_blocks(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"```(?:python|py)\s*\n(.*?)```", text, re.DOTALL)]


def readme_items(root: str, rel: str, results: Results, config: dict) -> None:
    text = open(os.path.join(root, rel), encoding="utf-8").read()
    replace = config.get("readme_replace", [])
    skip = set(config.get("readme_skip", []))
    if root not in sys.path:
        sys.path.insert(0, root)
    for n, block in enumerate(readme_blocks(text), 1):
        for old, new in replace:
            block = block.replace(old, new)
        try:
            ast.parse(block)
        except SyntaxError:
            continue  # shell sessions and fragments are not code a user could run
        if n in skip:
            continue

        def item(block=block, n=n):
            code = compile(block, f"{rel}#block{n}", "exec")
            exec(code, {"__name__": "__readme__"})

        results.run(f"readme:{n}", item, seconds=int(config.get("readme_timeout", ITEM_SECONDS)))


def notebook_code(path: str) -> str:
    """A notebook's code cells as one script; IPython magics and shell lines are left out.
    Without nbformat (a GPU machine with only torch), a version-4 notebook is read as JSON."""
    try:
        import nbformat
    except ImportError:
        with open(path, encoding="utf-8") as handle:
            cells = [(c.get("cell_type"), c.get("source", "")) for c in json.load(handle).get("cells", [])]
    else:
        cells = [(c.cell_type, c.source) for c in nbformat.read(path, as_version=4).cells]
    chunks = []
    for n, (kind, source) in enumerate(cells):
        if kind != "code":
            continue
        source = source if isinstance(source, str) else "".join(source)
        chunks.append(f"# cell {n}\n" + "\n".join(_without_magics(source.splitlines())))
    return "\n\n".join(chunks) + "\n"


def _without_magics(lines: list[str]) -> list[str]:
    """Drop ``%magic`` and ``!shell`` lines, but not a line inside an open statement that
    starts with ``%`` (``"%d" % (n,\n     % x)``, string formatting continued in brackets)."""
    kept: list[str] = []
    for line in lines:
        if line.lstrip().startswith(("%", "!")) and not _open_statement(kept):
            continue
        shell = _SHELL_ASSIGNMENT.match(line)
        if shell and not _open_statement(kept):
            line = f"{shell.group(1)} = []"  # ``files = !ls``: IPython gives a list of output lines
        kept.append(line)
    return kept


_SHELL_ASSIGNMENT = re.compile(r"^(\s*[A-Za-z_][\w.]*)\s*=\s*!")


def _open_statement(lines: list[str]) -> bool:
    try:
        for _ in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            pass
    except tokenize.TokenError:
        return True  # EOF inside brackets or a continued line
    except (IndentationError, SyntaxError):
        return False
    return bool(lines) and lines[-1].rstrip().endswith("\\")


def notebook_item(root: str, rel: str, results: Results, config: dict) -> None:
    """Run a notebook top to bottom in its own folder, as "Run all" would; one item."""
    path = os.path.join(root, rel)
    folder = os.path.dirname(path)
    os.chdir(folder)
    sys.path.insert(0, folder)

    def item():
        code = compile(notebook_code(path), path, "exec")
        exec(code, {"__name__": "__main__"})

    results.run("notebook", item, seconds=int(config.get("notebook_timeout", 10 ** 6)))


def main(argv: list[str]) -> int:
    mode, root, rel, results_path = argv[:4]
    config = json.loads(os.environ.get("TRIAL_RUN_CONFIG", "{}"))
    # the runner's own folder must not shadow the repository's modules
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    os.environ["TRIAL_REPO_ROOT"] = root
    os.chdir(root)
    signal.signal(signal.SIGALRM, _on_alarm)
    import torch

    torch.set_num_threads(1)
    results = Results(results_path)
    if mode == "modules":
        specs_path, files = argv[4], argv[5:]
        probing = not os.path.exists(specs_path)
        specs = {} if probing else json.load(open(specs_path, encoding="utf-8"))
        for rel in files:
            smoke_items(root, rel, results, specs, probing, config)
            if probing:  # after every file, so a runner cut short still leaves what it found
                with open(specs_path, "w", encoding="utf-8") as out:
                    json.dump(specs, out)
    elif mode == "readme":
        readme_items(root, rel, results, config)
    elif mode == "notebook":
        notebook_item(root, rel, results, config)
    else:
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
