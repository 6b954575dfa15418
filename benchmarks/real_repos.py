"""Trial of devmod on real repositories: does a rewrite ever turn a working run into a failing one?

    python benchmarks/real_repos.py /work/scratch/repos/* --devmod-src /work/main \\
        --out /work/scratch/trial-out/main.json

For each repository folder (fetched elsewhere and never committed):

1. it is copied twice (before / after, without .git) and ``devmod apply`` rewrites the after copy,
   using the devmod of the checkout --devmod-src (point it at two worktrees to compare branches);
2. what can be run is collected: scripts (a ``__main__`` block or top-level code), each importable
   file that defines models (smoke test of every ``nn.Module`` class or model factory buildable
   without arguments, and the author's own zero-argument ``test()`` functions; see
   real_repos_runner.py) and the Python code blocks of README.md;
3. each is run before and after, on the plain CPU and under ``devmod verify --simulate`` (``--modes``;
   on a machine with a CUDA GPU, ``--modes gpu`` runs them plainly there, and ``--rewritten DIR``
   takes the after copies from a ``devmod apply`` made elsewhere when devmod's dependencies are
   missing there);
4. a table goes to stdout and a JSON file (every run's outcome, the full diff, devmod's findings)
   to --out.

A run is "ok" when it is clean or still running at its time limit (it did not fail). It is
**made worse** when it was ok before the rewrite and is not after, in the same mode; **made
better** the other way round. Per-repository settings (script arguments for tiny runs, files to
skip, setup code that writes small synthetic data files, extra model arguments) come from
benchmarks/real_repos.toml. benchmarks/stubs/ stands in for packages that would need the network
(torchvision's datasets, pytorch_fid). The repositories need their own light dependencies
(einops, ema-pytorch, accelerate, matplotlib, scipy, tqdm) installed next to devmod.

Optional: --verdicts FILE (JSON, {"<repo>:<hunk key>": "correct" | "harmless" | "wrong"}) adds a
reviewer's hunk counts to the table; hunk keys are printed in the JSON output.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import difflib
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STUBS = HERE / "stubs"
RUNNER = HERE / "real_repos_runner.py"
DEFAULT_CONFIG = HERE / "real_repos.toml"
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "build", "dist", ".ipynb_checkpoints"}
DEVICE_PATTERNS = (
    "same device", "not at the same device", "can't convert cuda", "should be either on cpu",
    "parameters and buffers on device", "weight type (torch.cuda", "Input type (torch.cuda",
    "Expected object of device type", "deserialize object on a CUDA device",
    "Torch not compiled with CUDA enabled", "Found no NVIDIA driver", "No CUDA GPUs are available",
)
OK = ("clean", "timeout")
# cpu: the plain run with no GPU visible; sim: under ``devmod verify --simulate``; gpu: the plain
# run on a machine with a real GPU (``--modes gpu`` there).
ALL_MODES = ("cpu", "sim", "gpu")
MODES = ("cpu", "sim")  # what this run does (``--modes``)
VERSIONS = ("before", "after")


@dataclass
class Runnable:
    """Something to run: a script, a file of models (smoke tests) or a README's code blocks."""
    kind: str            # "script" | "modules" | "readme" | "notebook"
    path: str            # relative to the repository root, with "/" ("*" for modules)
    args: list[str] = field(default_factory=list)
    cwd: str = ""        # relative to the repository root; "" is the script's own folder
    timeout: int = 60
    label: str = ""      # a script run with one of several argument sets: "path [args]"


@dataclass
class Outcome:
    kind: str            # clean | timeout | device-error | error | skipped
    message: str = ""
    where: str = ""
    seconds: float = 0.0


# ----------------------------------------------------------------------------- discovery

def python_files(root: Path, suffixes: tuple[str, ...] = (".py",)) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(suffixes):
                found.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return found


def _is_main_guard(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test))


def file_shape(source: str) -> dict[str, bool]:
    """What a file offers: a script to run, models or test functions to smoke-test."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {"script": False, "module": False}
    main_guard = any(_is_main_guard(n) for n in tree.body)
    # top-level code that does work (calls, loops), beyond definitions, imports and constants
    top_work = any(isinstance(n, (ast.For, ast.While, ast.With)) or
                   (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)) for n in tree.body)
    defines = any(isinstance(n, (ast.ClassDef, ast.FunctionDef)) for n in tree.body)
    return {"script": main_guard or top_work, "module": defines and "torch" in source and not top_work}


def discover(root: Path, cfg: dict[str, Any], timeout: int) -> list[Runnable]:
    skip = cfg.get("skip", [])
    scripts_cfg: dict[str, dict] = cfg.get("scripts", {})
    found: list[Runnable] = []
    modules: list[str] = []
    for rel in python_files(root):
        if any(fnmatch.fnmatch(rel, pat) for pat in skip):
            continue
        name = rel.rsplit("/", 1)[-1]
        if name in ("setup.py", "conftest.py") or name.startswith("test_"):
            continue
        shape = file_shape((root / rel).read_text(encoding="utf-8", errors="replace"))
        if shape["script"]:
            sc = scripts_cfg.get(rel, {})
            if sc.get("skip"):
                continue
            variants = sc.get("variants") or [sc.get("args", [])]
            for args in variants:
                label = f"{rel} {' '.join(args)}" if len(variants) > 1 else ""
                found.append(Runnable("script", rel, list(args), sc.get("cwd", cfg.get("cwd", "")),
                                      int(sc.get("timeout", timeout)), label))
        if shape["module"] or (shape["script"] and rel in cfg.get("also_smoke", [])):
            modules.append(rel)
    if modules:  # one process per run for all of a repository's model files: start-up is the cost
        found.append(Runnable("modules", "*", modules,
                              timeout=int(cfg.get("modules_timeout", 60 + 20 * len(modules)))))
    for rel in python_files(root, (".ipynb",)):
        if not any(fnmatch.fnmatch(rel, pat) for pat in skip):
            found.append(Runnable("notebook", rel, timeout=int(cfg.get("notebook_timeout", timeout))))
    readme = cfg.get("readme", "README.md")
    if readme and (root / readme).is_file() and "```python" in (root / readme).read_text(errors="replace"):
        found.append(Runnable("readme", readme, timeout=int(cfg.get("readme_process_timeout", 6 * timeout))))
    return found


# ----------------------------------------------------------------------------- copying and rewriting

def copy_repo(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))


def run_setup(root: Path, code: str, env: dict[str, str]) -> None:
    if code:
        subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True, timeout=120,
                       stdout=subprocess.DEVNULL)


def apply_devmod(after: Path, env: dict[str, str]) -> dict[str, Any]:
    """`devmod apply` on the after copy; devmod's JSON report (findings per file) and its summary."""
    proc = subprocess.run([sys.executable, "-m", "codemods", "apply", "-j", "1", "--format", "json", "."],
                          cwd=after, env=env, capture_output=True, text=True, timeout=1800)
    try:
        files = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        files = []
    summary = (proc.stderr.strip().splitlines() or [""])[-1]
    return {"exit": proc.returncode, "summary": summary, "files": files,
            "stderr_tail": proc.stderr[-2000:] if proc.returncode not in (0, 1) else ""}


def _reviewable_lines(path: Path) -> list[str]:
    """A file's lines as a reviewer reads them: a notebook's code cells, not its JSON."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text).get("cells", [])
        except json.JSONDecodeError:
            return text.splitlines(keepends=True)
        out: list[str] = []
        for n, cell in enumerate(cells):
            if cell.get("cell_type") == "code":
                src = cell.get("source", "")
                src = "".join(src) if isinstance(src, list) else src
                out += [f"# %% cell {n}\n", *(l + "\n" for l in src.splitlines())]
        return out
    return text.splitlines(keepends=True)


def repo_diff(before: Path, after: Path) -> tuple[str, list[dict[str, Any]]]:
    """The full unified diff and its hunks, each with a key stable across line-number shifts."""
    chunks: list[str] = []
    hunks: list[dict[str, Any]] = []
    for rel in python_files(after, (".py", ".ipynb")):
        new = _reviewable_lines(after / rel)
        old = _reviewable_lines(before / rel)
        if old == new:
            continue
        lines = list(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}"))
        chunks.append("".join(line if line.endswith("\n") else line + "\n" for line in lines))
        current: list[str] = []
        for line in lines[2:] + ["@@END"]:
            if line.startswith("@@") and current:
                body = "".join(l for l in current[1:] if l[:1] in "+-")
                key = f"{rel}:{hashlib.sha1(body.encode()).hexdigest()[:10]}"
                hunks.append({"key": key, "file": rel, "header": current[0].strip(), "text": "".join(current)})
                current = []
            current.append(line)
    return "".join(chunks), hunks


# ----------------------------------------------------------------------------- running

def base_env(devmod_src: Path, extra_paths: list[str], env_cfg: dict[str, str], tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CUDA"))}
    env.update({
        "PYTHONPATH": os.pathsep.join([str(STUBS), *extra_paths, str(devmod_src)]),
        "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
        "PATH": os.pathsep.join([str(STUBS / "bin"), os.environ.get("PATH", "")]),
        "TORCH_HOME": str(tmp / "torch-home"), "MPLCONFIGDIR": str(tmp / "mpl"), "PYTHONDONTWRITEBYTECODE": "1",
    })
    own_path = env["PYTHONPATH"]
    env.update({k: str(v) for k, v in env_cfg.items()})
    if "PYTHONPATH" in env_cfg:
        # The settings' paths (stand-ins for a repository's dependencies) come after the devmod under
        # test, never instead of it: a settings file that names another checkout's ``codemods``
        # silently ran that devmod (found in the eighth run's second pass).
        env["PYTHONPATH"] = os.pathsep.join([str(devmod_src), str(env_cfg["PYTHONPATH"]), own_path])
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_process(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int) -> tuple[int | None, str, str, float]:
    """Run in a new session so a time limit also ends DataLoader workers; rc None means timed out."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        rc = None
    _kill_group(proc)  # leftovers (workers) of a finished run
    return rc, out, err, round(time.monotonic() - start, 2)


def _last_error_line(text: str) -> str:
    lines = [l for l in text.strip().splitlines() if l.strip()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception|Interrupt)\b", line.strip()) or "Error:" in line:
            return line.strip()[:400]
    return (lines[-1].strip()[:400] if lines else "")


def run_script(r: Runnable, root: Path, mode: str, env: dict[str, str]) -> dict[str, Outcome]:
    cwd = root / (r.cwd if r.cwd else os.path.dirname(r.path))
    script = str(root / r.path)
    if mode != "sim":
        cmd = [sys.executable, script, *r.args]
    else:
        cmd = [sys.executable, "-m", "codemods", "verify", "--simulate", "--json", script, "--", *r.args]
    rc, out, err, secs = run_process(cmd, cwd, env, r.timeout)
    if rc is None:
        return {"script": Outcome("timeout", f"still running after {r.timeout} s", seconds=secs)}
    if mode == "sim":
        report = None
        for line in reversed(out.strip().splitlines()):
            if line.startswith("{"):
                try:
                    report = json.loads(line)
                    break
                except json.JSONDecodeError:
                    continue
        if report is None:  # the JSON object may span lines
            try:
                report = json.loads(out[out.index("{"):]) if "{" in out else None
            except json.JSONDecodeError:
                report = None
        if report is not None:
            where = f"{report.get('path') or ''}:{report.get('line') or ''}: {(report.get('source_line') or '').strip()}"
            kind = report.get("kind", "error")
            message = (report.get("message") or "")[:400] or _last_error_line(err)
            if kind == "clean":
                return {"script": Outcome(kind, seconds=secs)}
            return {"script": Outcome(kind, message, where, secs)}
    if rc == 0:
        return {"script": Outcome("clean", seconds=secs)}
    message = _last_error_line(err)
    kind = "device-error" if any(p in err for p in DEVICE_PATTERNS) else "error"
    return {"script": Outcome(kind, message, seconds=secs)}


def run_in_runner(r: Runnable, root: Path, mode: str, env: dict[str, str], work: Path,
                  tag: str, specs: Path | None, run_cfg: dict[str, Any]) -> dict[str, Outcome]:
    results = work / f"{tag}.jsonl"
    results.unlink(missing_ok=True)
    args = [r.kind, str(root), r.path, str(results)] + ([str(specs), *r.args] if specs else [])
    if mode != "sim":
        cmd = [sys.executable, str(RUNNER), *args]
    else:
        cmd = [sys.executable, "-m", "codemods", "verify", "--simulate", str(RUNNER), "--", *args]
    env = dict(env, TRIAL_RUN_CONFIG=json.dumps(run_cfg))
    rc, out, err, secs = run_process(cmd, root, env, r.timeout)
    items: dict[str, Outcome] = {}
    if results.exists():
        for line in results.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            items[rec["item"]] = Outcome(rec["kind"], rec.get("message", ""), rec.get("where", ""),
                                         rec.get("seconds", 0.0))
    if r.kind == "notebook" and "notebook" not in items:  # one item, whatever ended the process
        items["notebook"] = (Outcome("timeout", f"still running after {r.timeout} s", seconds=secs) if rc is None
                             else Outcome("error", _last_error_line(err), seconds=secs))
    elif rc is None:
        items["(runner)"] = Outcome("timeout", f"runner still running after {r.timeout} s", seconds=secs)
    elif rc != 0 and not items:
        items["(runner)"] = Outcome("error", _last_error_line(err), seconds=secs)
    return items


@dataclass
class RepoResult:
    name: str
    commit: str
    devmod: dict[str, Any]
    diff: str
    hunks: list[dict[str, Any]]
    runnables: list[dict[str, Any]]
    runs: dict[str, dict[str, dict[str, dict[str, Any]]]]   # item -> "version/mode" -> outcome
    seconds: float = 0.0


def git_commit(path: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def trial_repo(src: Path, devmod_src: Path, cfg: dict[str, Any], jobs: int, timeout: int,
               log, rewritten: Path | None = None) -> RepoResult:
    """``rewritten``: a copy of ``src`` that ``devmod apply`` already rewrote (on a machine with
    devmod's dependencies) to use as the after copy, instead of rewriting here."""
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f"trial-{src.name}-"))
    try:
        roots = {v: tmp / v / src.name for v in VERSIONS}
        for v in VERSIONS:
            roots[v].parent.mkdir(parents=True)
            copy_repo(rewritten if v == "after" and rewritten is not None else src, roots[v])
        extra = [str(roots["before"] / p) for p in cfg.get("pythonpath", [])]
        envs = {v: base_env(devmod_src, [str(roots[v] / p) for p in cfg.get("pythonpath", [])],
                            cfg.get("env", {}), tmp) for v in VERSIONS}
        del extra
        report = apply_devmod(roots["after"], envs["after"]) if rewritten is None else \
            {"exit": 0, "summary": f"rewritten elsewhere ({rewritten})", "files": [], "stderr_tail": ""}
        diff, hunks = repo_diff(roots["before"], roots["after"])
        log(f"{src.name}: {report['summary']}")
        for v in VERSIONS:
            run_setup(roots[v], cfg.get("setup", ""), envs[v])
        runnables = discover(roots["before"], cfg, timeout)
        run_cfg = {k: cfg[k] for k in ("kwargs", "inputs", "readme_replace", "readme_skip", "readme_timeout",
                                        "test_timeout") if k in cfg}
        work = tmp / "work"
        work.mkdir()
        runs: dict[str, dict[str, dict[str, Any]]] = {}

        def one(r: Runnable, v: str, mode: str) -> None:
            tag = f"{r.kind}-{r.path.replace('/', '_')}-{abs(hash(r.label))}-{v}-{mode}"
            env = dict(envs[v], CUDA_VISIBLE_DEVICES="") if mode == "cpu" else envs[v]
            if r.kind == "script":
                items = run_script(r, roots[v], mode, env)
            else:
                specs = work / "specs.json" if r.kind == "modules" else None
                items = run_in_runner(r, roots[v], mode, env, work, tag, specs, run_cfg)
            for item, outcome in items.items():
                name = {"script": r.label or r.path, "modules": item}.get(r.kind, f"{r.path}::{item}")
                runs.setdefault(name, {})[f"{v}/{mode}"] = asdict(outcome)

        # devmod changed nothing: the after copy is the before copy, its runs would be the same
        versions = VERSIONS if hunks else ("before",)
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            # the first run (before, first mode) of a models file probes input shapes the others reuse
            first = [pool.submit(one, r, "before", MODES[0]) for r in runnables if r.kind == "modules"]
            rest = [pool.submit(one, r, v, m) for r in runnables for v in versions for m in MODES
                    if r.kind != "modules"]
            for f in first:
                f.result()
            rest += [pool.submit(one, r, v, m) for r in runnables if r.kind == "modules"
                     for v in versions for m in MODES if (v, m) != ("before", MODES[0])]
            for f in rest:
                f.result()
        if not hunks:
            for by_run in runs.values():
                by_run.update({k.replace("before/", "after/"): v for k, v in list(by_run.items())})
        return RepoResult(src.name, git_commit(src), report, diff, hunks, [asdict(r) for r in runnables],
                          dict(sorted(runs.items())), round(time.monotonic() - started, 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- comparison and table

def compare(result: RepoResult) -> dict[str, Any]:
    """Per repository: cases, ok before/after, made worse/better (a case is an item in one mode)."""
    counts = {"scripts": 0, "smoke": 0, "readme": 0, "notebooks": 0, "cases": 0, "ok_before": 0, "ok_after": 0,
              "worse": [], "better": [], "new_device_errors": []}
    for item, by_run in result.runs.items():
        if item.endswith("::import") or item.endswith("(runner)"):
            pass
        kinds_seen = False
        for mode in ALL_MODES:
            b, a = by_run.get(f"before/{mode}"), by_run.get(f"after/{mode}")
            if b is None or b["kind"] == "skipped" or a is None:
                continue
            if a["kind"] == "skipped":
                a = dict(a, kind="error", message="skipped after the rewrite: " + a.get("message", ""))
            kinds_seen = True
            counts["cases"] += 1
            ok_b, ok_a = b["kind"] in OK, a["kind"] in OK
            counts["ok_before"] += ok_b
            counts["ok_after"] += ok_a
            case = {"item": item, "mode": mode, "before": b, "after": a}
            if ok_b and not ok_a:
                counts["worse"].append(case)
            elif ok_a and not ok_b:
                counts["better"].append(case)
            if a["kind"] == "device-error" and b["kind"] != "device-error":
                counts["new_device_errors"].append(case)
        if kinds_seen:
            key = ("scripts" if "::" not in item else "readme" if "::readme:" in item
                   else "notebooks" if item.endswith("::notebook") else "smoke")
            counts[key] += 1
    return counts


def verdict_counts(result: RepoResult, verdicts: dict[str, str]) -> dict[str, int]:
    out = {"correct": 0, "harmless": 0, "wrong": 0, "unreviewed": 0}
    for h in result.hunks:
        out[verdicts.get(f"{result.name}:{h['key']}", "unreviewed")] += 1
    return out


def findings_not_fixed(result: RepoResult) -> list[dict[str, Any]]:
    return [dict(f, path=entry["path"]) for entry in result.devmod.get("files", [])
            for f in entry.get("findings", []) if not f.get("fixed")]


def print_table(results: list[RepoResult], verdicts: dict[str, str], out=sys.stdout) -> None:
    head = ["repository", "commit", "scripts", "smoke", "readme", "notebooks", "cases", "ok before", "ok after",
            "made worse", "made better", "hunks", "reports", "errors"]
    if verdicts:
        head += ["correct", "harmless", "wrong"]
    rows = []
    total = [0] * (len(head) - 2)
    for res in results:
        c = compare(res)
        errors = sum(1 for entry in res.devmod.get("files", []) if entry.get("error"))
        row = [c["scripts"], c["smoke"], c["readme"], c["notebooks"], c["cases"], c["ok_before"], c["ok_after"],
               len(c["worse"]), len(c["better"]), len(res.hunks), len(findings_not_fixed(res)), errors]
        if verdicts:
            v = verdict_counts(res, verdicts)
            row += [v["correct"], v["harmless"], v["wrong"]]
        total = [t + x for t, x in zip(total, row)]
        rows.append([res.name, res.commit[:10], *row])
    rows.append(["total", "", *total])
    print("| " + " | ".join(head) + " |", file=out)
    print("|" + "---|" * len(head), file=out)
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repos", nargs="*", type=Path, help="repository folders (fetched elsewhere)")
    ap.add_argument("--from-json", nargs="+", type=Path, metavar="JSON",
                    help="print the table of earlier trials' JSON reports (later files win per repository)")
    ap.add_argument("--devmod-src", type=Path, default=HERE.parent,
                    help="checkout whose devmod rewrites and verifies (default: this one)")
    ap.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="per-repository settings (TOML)")
    ap.add_argument("--out", type=Path, help="write the JSON report here")
    ap.add_argument("--verdicts", type=Path, help="a reviewer's hunk verdicts (JSON) to count")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="runs at the same time (default 2)")
    ap.add_argument("--timeout", type=int, default=45, help="seconds per script run (default 45)")
    ap.add_argument("--rewritten", type=Path, metavar="DIR",
                    help="DIR/<repository name> is that repository already rewritten by devmod apply elsewhere: "
                         "use it as the after copy (for a GPU machine without devmod's dependencies)")
    ap.add_argument("--modes", default="cpu,sim",
                    help="how each case runs, comma-separated: cpu (no GPU visible), sim (devmod verify "
                         "--simulate), gpu (plain, on a machine with a real GPU); default cpu,sim")
    args = ap.parse_args(argv)
    global MODES
    MODES = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if not MODES or set(MODES) - set(ALL_MODES):
        ap.error(f"--modes {args.modes}: choose from {', '.join(ALL_MODES)}")
    if "gpu" in MODES and subprocess.run([sys.executable, "-c", "import sys, torch; "
                                          "sys.exit(not torch.cuda.is_available())"]).returncode != 0:
        ap.error("--modes gpu: this Python's torch sees no CUDA GPU")
    if not args.from_json and not (args.devmod_src / "codemods" / "__init__.py").is_file():
        ap.error(f"--devmod-src {args.devmod_src}: no codemods package there")
    config = tomllib.loads(args.config.read_text()) if args.config.is_file() else {}
    verdicts = json.loads(args.verdicts.read_text()) if args.verdicts and args.verdicts.is_file() else {}
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    if args.from_json:
        loaded: dict[str, RepoResult] = {}
        for path in args.from_json:
            for r in json.loads(path.read_text())["repos"]:
                loaded[r["name"]] = RepoResult(**{k: r[k] for k in RepoResult.__dataclass_fields__})
        print_table(list(loaded.values()), verdicts)
        return 0
    if not args.repos:
        ap.error("give repository folders, or --from-json")
    results = []
    for repo in args.repos:
        if not repo.is_dir():
            ap.error(f"{repo}: not a folder")
        cfg = config.get("repo", {}).get(repo.name, {})
        log(f"== {repo.name}")
        rewritten = (args.rewritten / repo.name).resolve() if args.rewritten else None
        if rewritten is not None and not rewritten.is_dir():
            ap.error(f"--rewritten: no {rewritten}")
        res = trial_repo(repo.resolve(), args.devmod_src.resolve(), cfg, args.jobs, args.timeout, log, rewritten)
        c = compare(res)
        log(f"{repo.name}: {c['cases']} cases, made worse {len(c['worse'])}, made better {len(c['better'])}, "
            f"{res.seconds} s")
        results.append(res)
        if args.out:  # written after every repository, so a long trial can be read while it runs
            args.out.parent.mkdir(parents=True, exist_ok=True)
            payload = {"devmod_src": str(args.devmod_src), "devmod_commit": git_commit(args.devmod_src),
                       "repos": [dict(asdict(r), comparison=compare(r), not_fixed=findings_not_fixed(r))
                                 for r in results]}
            args.out.write_text(json.dumps(payload, indent=1))
    print_table(results, verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
