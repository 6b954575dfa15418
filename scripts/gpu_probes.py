"""Run every probe of tests/verify/probes on a real CUDA GPU and record what happened.

Each probe states the outcome PyTorch's rules predict (`# expect: ok|device-error`), the rule,
and often the exact message. On a machine with a GPU, from the repository root:

    python scripts/gpu_probes.py                       # writes tests/verify/probes/GPU_RESULTS.md
    python scripts/gpu_probes.py --out results.md --json results.json

Each probe runs in a fresh process through `python -m codemods.verify.runner` without
`--simulate` (so on the real GPU, classified by the same `is_device_error` that `devmod verify`
uses, child processes included). Probes that need more GPUs than the machine has are skipped.
Where the GPU disagrees with a probe's header, the GPU wins: fix the probe, then the simulation.
Exit status: 0 when every probe that ran matched its header, 1 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBES = os.path.join(ROOT, "tests", "verify", "probes")


def header(path: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.startswith("# "):
                break
            key, _, value = line[2:].partition(":")
            fields[key.strip()] = value.strip()
    return fields


def run_probe(path: str) -> dict:
    handle, result = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    try:
        proc = subprocess.run([sys.executable, "-m", "codemods.verify.runner", "--result", result, path],
                              capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
        with open(result, encoding="utf-8") as stream:
            text = stream.read()
        if not text:
            return {"kind": "crashed", "message": (proc.stderr or proc.stdout).strip()[-500:], "mode": "?"}
        return json.loads(text)
    finally:
        os.unlink(result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(PROBES, "GPU_RESULTS.md"), help="markdown results file")
    parser.add_argument("--json", dest="json_out", help="also write the results as JSON")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="probes run at once, each in its own process (default: one per CPU)")
    options = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_probes: no CUDA GPU here (torch.cuda.is_available() is False); nothing to record",
              file=sys.stderr)
        return 2
    gpus = torch.cuda.device_count()
    names = sorted(name for name in os.listdir(PROBES) if name.endswith(".py"))
    fields = {name: header(os.path.join(PROBES, name)) for name in names}
    runnable = [name for name in names if int(fields[name].get("gpus", "1")) <= gpus]
    # Each probe is its own process, so running them side by side changes no outcome.
    with concurrent.futures.ThreadPoolExecutor(max(1, options.jobs)) as pool:
        outcomes = dict(zip(runnable, pool.map(lambda n: run_probe(os.path.join(PROBES, n)), runnable)))
    rows, mismatches = [], 0
    for name in names:
        expected = {"ok": "clean", "device-error": "device-error"}[fields[name]["expect"]]
        if name not in outcomes:
            rows.append({"probe": name, "expected": expected,
                         "real": f"skipped (needs {fields[name]['gpus']} GPUs)",
                         "outcome_ok": None, "message_ok": None, "message": ""})
            continue
        outcome = outcomes[name]
        message = outcome.get("message", "").split(": ", 1)[-1]
        outcome_ok = outcome.get("kind") == expected
        message_ok = None if "message" not in fields[name] else message == fields[name]["message"]
        mismatches += (not outcome_ok) + (message_ok is False)
        rows.append({"probe": name, "expected": expected, "real": outcome.get("kind"), "outcome_ok": outcome_ok,
                     "message_ok": message_ok, "message": message, "rule": fields[name].get("rule", "")})
        print(f"{name}: expected {expected}, got {outcome.get('kind')}"
              f"{'' if message_ok in (None, True) else ' (message differs)'}", file=sys.stderr)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(0), "gpus": gpus,
            "torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}
    with open(options.out, "w", encoding="utf-8") as handle:
        handle.write("# Device-rule probes on a real GPU\n\n")
        for key, value in meta.items():
            handle.write(f"- {key}: {value}\n")
        handle.write("- how: `python scripts/gpu_probes.py` (each probe through `python -m codemods.verify.runner`)\n\n")
        handle.write("| probe | expected | real CUDA | outcome matches | message matches | real message |\n")
        handle.write("| --- | --- | --- | --- | --- | --- |\n")
        for row in rows:
            mark = {True: "yes", False: "**no**", None: "-"}
            text = row["message"].replace("|", "\\|")[:200]
            handle.write(f"| {row['probe']} | {row['expected']} | {row['real']} | {mark[row['outcome_ok']]} | "
                         f"{mark[row['message_ok']]} | {text} |\n")
    if options.json_out:
        with open(options.json_out, "w", encoding="utf-8") as handle:
            json.dump({"meta": meta, "probes": rows}, handle, indent=2)
    print(f"gpu_probes: {len(rows)} probes, {mismatches} disagreement(s); written to {options.out}", file=sys.stderr)
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
