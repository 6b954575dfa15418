"""`devmod apply --interactive`, driven through a real pseudo-terminal (pexpect), and the engine
hook under it: declining fixes through ``allow`` gives exactly what ``--select`` gives."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
PROMPT = r"Apply this fix \[y,n,a,d,q,\?\]\? "
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TRAIN = ("import torch\n\nmodel = Net().cuda()\nx = torch.zeros(3, device=\"cuda:0\")\n"
         "ckpt = torch.load(\"w.pt\")\n")
OTHER = "import torch\n\nnet = Net().cuda()\n"


def drive(keys: str, *paths: Path, expect_prompts: int | None = None) -> tuple[str, int]:
    """Run `devmod apply -i` in a terminal, answering each prompt with the next key."""
    child = pexpect.spawn(sys.executable, ["-m", "codemods", "apply", "-i", *map(str, paths)],
                          encoding="utf-8", timeout=120, dimensions=(50, 200))
    seen = 0
    for key in keys:
        child.expect(PROMPT)
        seen += 1
        child.send(key)
    index = child.expect([pexpect.EOF, PROMPT])
    assert index == 0, f"asked again after {seen} answers:\n{child.before}"
    child.close()
    return ANSI.sub("", child.before or ""), child.exitstatus


def select_output(source: str, codes: list[str]) -> str:
    return transform_source(source, "t.py", Config(select=tuple(codes))).output


def test_each_fix_is_a_coloured_hunk_with_rule_and_why(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    child = pexpect.spawn(sys.executable, ["-m", "codemods", "apply", "-i", str(path)], encoding="utf-8",
                          timeout=120)
    child.expect(PROMPT)
    first = child.before
    assert "\x1b[" in first  # coloured
    plain = ANSI.sub("", first)
    assert "DM103 cuda-call" in plain and "`.cuda()` -> `.to(device)`" in plain
    assert "prevents:" in plain and "with DM101: add the shared `device` variable" in plain
    assert "-model = Net().cuda()\n" in plain.replace("\r\n", "\n")
    assert "+model = Net().to(device)\n" in plain.replace("\r\n", "\n")
    child.send("?")
    child.expect(PROMPT)
    assert "skip this fix and the rest of this file" in child.before
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert path.read_text() == TRAIN  # nothing accepted: untouched


@pytest.mark.parametrize("keys, codes", [("yyy", ["DM103", "DM102", "DM302"]), ("nyn", ["DM102"]), ("nnn", [])])
def test_accepted_fixes_give_what_select_gives(tmp_path, keys, codes):
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    out, status = drive(keys, path)
    assert status == 0, out
    expected = select_output(TRAIN, codes) if codes else TRAIN
    assert path.read_text() == expected
    # idempotent: the same selection changes nothing more
    if codes:
        assert select_output(path.read_text(), codes) == path.read_text()
    assert f"{keys.count('n')} fix" in out or "n" not in keys


def test_d_skips_the_rest_of_the_file_and_a_accepts_everything_after(tmp_path):
    first, second, third = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    first.write_text(TRAIN)
    second.write_text(TRAIN)
    third.write_text(OTHER)
    # a.py: accept the first fix, skip the rest of the file; b.py: decline one, then all the rest.
    out, status = drive("yd" "na", first, second, third)
    assert status == 0, out
    assert first.read_text() == select_output(TRAIN, ["DM103"])
    assert second.read_text() == select_output(TRAIN, ["DM102", "DM302"])
    assert third.read_text() == select_output(OTHER, [])  # every fix, without being asked


def test_q_keeps_what_was_accepted_and_leaves_later_files(tmp_path):
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text(TRAIN)
    second.write_text(OTHER)
    out, status = drive("yq", first, second)
    assert status == 0, out
    assert first.read_text() == select_output(TRAIN, ["DM103"])
    assert second.read_text() == OTHER


def test_interactive_needs_a_terminal(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    result = subprocess.run([sys.executable, "-m", "codemods", "apply", "-i", str(path)], input="y\n",
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "needs a terminal" in result.stderr
    assert "Traceback" not in result.stderr and path.read_text() == TRAIN
    result = subprocess.run([sys.executable, "-m", "codemods", "apply", "-i", "--diff", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "cannot be combined" in result.stderr


# -- the engine hook: declining every fix of the rules outside S is --select S ------------------------

def _sources() -> list[tuple[str, str]]:
    # The rules' own examples, and two example scripts (a later-pass fix in 09, many rules in 20).
    found = [(p, (ROOT / "examples" / p).read_text())
             for p in ("09_mixed_tensors.py", "20_legacy_gan_idioms.py")]
    for rule in all_rules():  # each fixing rule's first example with a fix
        found += [(rule.CODE, ex.code) for ex in rule.INVALID if ex.expected is not None][:1]
    return found


def test_declining_through_allow_equals_select():
    rng = random.Random(7)  # a small fixed slice of subsets per source keeps this quick
    checked = 0
    for name, source in _sources():
        config = Config(unsafe_fixes=True)
        try:
            full = transform_source(source, name, config)
        except Exception:
            continue
        used = sorted({f.code for f in full.findings if f.fixed} - {"DM101"})
        if not used:
            continue
        for chosen in [rng.sample(used, rng.randint(1, len(used)))]:
            keep = set(chosen) | {"DM101"}
            got = transform_source(source, name, config, allow=lambda code, *_: code in keep).output
            want = transform_source(source, name, Config(select=tuple(chosen), unsafe_fixes=True)).output
            assert got == want, (name, chosen)
            checked += 1
    assert checked >= 10


def test_allow_sees_positions_in_the_file_as_read():
    """A fix made in a later pass (example 09's collapsed CUDA check) is asked at its original line."""
    source = (ROOT / "examples" / "09_mixed_tensors.py").read_text()
    asked = []
    transform_source(source, "09.py", Config(), allow=lambda *key: asked.append(key) or True)
    collapse = [k for k in asked if k[0] == "DM103"]
    assert collapse and collapse[0][1] == source.splitlines().index(
        next(line for line in source.splitlines() if line.startswith("second ="))) + 1
