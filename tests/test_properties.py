"""Properties of the engine on generated code: it never crashes, its output parses, it settles.

Two sources of programs:
- ``hypothesmith.from_grammar()``: arbitrary valid Python (with ``import torch`` on top so
  the engine does not skip it) — finds crashes on syntax the rules never expected;
- ``torch_programs()``: programs BUILT from the shapes the rules fix (``.cuda()``,
  ``"cuda:0"`` devices, factories in functions and ``forward``, DataLoader loops with tuple
  and dict batches, model constructors, ``torch.load``, ``.numpy()``), so rules really fire.

For every program: ``transform_source`` raises nothing but ``SourceError``, its output
parses (libcst and CPython), and a second run changes nothing.
"""

from __future__ import annotations

import ast
import os

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from codemods.config import Config
from codemods.engine import SourceError, transform_source

# The engine costs ~0.5-1 s on a small file, so counts are kept low for the default run;
# DEVMOD_HYPOTHESIS_SCALE=10 python -m pytest tests/test_properties.py searches harder.
SCALE = max(1, int(os.environ.get("DEVMOD_HYPOTHESIS_SCALE", "1")))


def examples(count: int) -> int:
    return count * SCALE


CONFIGS = (Config(), Config(unsafe_fixes=True), Config(device_name="dev", device_style="cuda-mps"))


def check_engine(source: str, config: Config) -> None:
    """The three properties; a SourceError is an allowed outcome (the file is left alone)."""
    try:
        first = transform_source(source, "generated.py", config)
    except SourceError:
        return
    output = first.output
    cst.parse_module(output)
    compile(output, "generated.py", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    second = transform_source(output, "generated.py", config)
    assert second.output == output, "a second run changed the output"
    assert not second.fix_counts, f"a second run still fixed {dict(second.fix_counts)}"


# -- arbitrary Python --------------------------------------------------------------------------------

def _libcst_parses(source: str) -> bool:
    try:
        cst.parse_module(source)
        return True
    except Exception:  # libcst rejects some valid Python hypothesmith generates
        return False


arbitrary_torch_python = hypothesmith.from_grammar().map(lambda code: "import torch\n" + code).filter(_libcst_parses)


@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(source=arbitrary_torch_python)
def test_arbitrary_python_never_crashes_the_engine(source):
    check_engine(source, Config())


# -- programs built from the shapes the rules fix -------------------------------------------------

NAMES = st.sampled_from(["x", "y", "inputs", "target", "h", "feats", "w"])
MODELS = st.sampled_from(["Net()", "nn.Linear(4, 2)", "MyModel(cfg)", "nn.Sequential(nn.Linear(4, 4), nn.ReLU())",
                          "torchvision.models.resnet18()", "nn.LSTM(8, 16)"])
DEVICES = st.sampled_from(['"cuda:0"', '"cuda"', "'cuda:1'", 'torch.device("cuda:0")', '"cpu"'])
FACTORIES = st.sampled_from(["torch.zeros(2, 3)", "torch.ones(4)", "torch.randn(batch, 8)", "torch.arange(10)",
                             "torch.tensor([1.0, 2.0])", "torch.eye(3)", "torch.full((2,), 0.5)",
                             "torch.zeros_like(x)", "torch.empty(3, dtype=torch.long)"])
CUDA_SUFFIX = st.sampled_from([".cuda()", ".cuda(non_blocking=True)", ".cuda(0)", ".to('cuda')", ".cuda().float()"])


@st.composite
def module_statement(draw) -> str:
    name, other = draw(NAMES), draw(NAMES)
    kind = draw(st.integers(0, 13))
    if kind == 0:
        return f"model = {draw(MODELS)}{draw(CUDA_SUFFIX)}\n"
    if kind == 1:
        return f"{name} = {draw(FACTORIES)}\n"
    if kind == 2:
        return f"{name} = {draw(FACTORIES)[:-1]}, device={draw(DEVICES)})\n".replace("(, ", "(")
    if kind == 3:
        return f"{name} = {other}.to({draw(DEVICES)})\n"
    if kind == 4:
        return f"{name} = {other}{draw(CUDA_SUFFIX)}\n"
    if kind == 5:
        return f"state = torch.load({draw(st.sampled_from(['path', repr('ckpt.pt'), 'args.ckpt']))})\n"
    if kind == 6:
        return f"arr = {name}.{draw(st.sampled_from(['numpy()', 'detach().numpy()', 'cpu().numpy()']))}\n"
    if kind == 7:
        return "if torch.cuda.is_available():\n    model = model.cuda()\n"
    if kind == 8:
        return f"criterion = nn.CrossEntropyLoss(weight={draw(FACTORIES)})\n"
    if kind == 9:
        return "model = nn.DataParallel(model).cuda()\n"
    if kind == 10:
        return f"optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    if kind == 11:
        return f"{name} = torch.from_numpy(arr){draw(CUDA_SUFFIX)}\n"
    if kind == 12:
        return f"print({name}.shape)  # keep this comment\n"
    return f"model.load_state_dict(torch.load('m.pt', map_location={draw(DEVICES)}))\n"


@st.composite
def loop(draw) -> str:
    shape = draw(st.sampled_from(["tuple", "dict", "single", "enumerate"]))
    header = {"tuple": "for x, y in loader:", "dict": "for batch in loader:",
              "single": "for x in loader:", "enumerate": "for i, (x, y) in enumerate(loader):"}[shape]
    body = {"tuple": ["out = model(x)", "loss = criterion(out, y)"],
            "dict": ['out = model(batch["x"])', 'loss = criterion(out, batch["y"])'],
            "single": ["out = model(x)", "loss = out.sum()"],
            "enumerate": ["out = model(x)", "loss = criterion(out, y)"]}[shape]
    extra = draw(st.lists(st.sampled_from([
        "x = x.cuda()", "y = y.to('cuda:0')", "noise = torch.randn(4)", "optimizer.zero_grad()",
        "loss.backward()", "print(loss.item())", "preds = out.argmax(1).numpy()",
    ]), max_size=3))
    lines = [header] + ["    " + line for line in extra[: len(extra) // 2] + body + extra[len(extra) // 2:]]
    loader = draw(st.sampled_from(["loader = DataLoader(dataset, batch_size=8)\n",
                                   "loader = torch.utils.data.DataLoader(ds, shuffle=True)\n", ""]))
    return loader + "\n".join(lines) + "\n"


@st.composite
def function(draw) -> str:
    name = draw(NAMES)
    param = draw(st.sampled_from(["x", "batch", "device", "inputs"]))
    stmts = draw(st.lists(st.sampled_from([
        f"z = {draw(FACTORIES)}", "z = torch.zeros(3, device='cuda:0')", f"m = {draw(MODELS)}.cuda()",
        f"{name} = {param}.cuda()", "mask = torch.ones(4).bool()", "return z",
    ]), min_size=1, max_size=4))
    return f"def step_{draw(st.integers(0, 9))}({param}):\n" + "".join(f"    {s}\n" for s in stmts)


@st.composite
def model_class(draw) -> str:
    init = draw(st.lists(st.sampled_from([
        "self.fc = nn.Linear(4, 4)", "self.mask = torch.ones(4)", "self.scale = torch.tensor(2.0).cuda()",
        "self.register_buffer('pos', torch.arange(8))", "self.h = torch.zeros(1, 1, 16, device='cuda:0')",
    ]), min_size=1, max_size=3))
    forward = draw(st.lists(st.sampled_from([
        "noise = torch.randn(x.shape)", "h = torch.zeros(1, x.size(0), 16)", "x = x + self.mask",
        "x = x.cuda()", "idx = torch.arange(x.size(1)).cuda()", "x = self.fc(x)",
    ]), min_size=1, max_size=3))
    base = draw(st.sampled_from(["nn.Module", "torch.nn.Module"]))
    return (f"class Net({base}):\n    def __init__(self):\n        super().__init__()\n"
            + "".join(f"        {s}\n" for s in init)
            + "\n    def forward(self, x):\n" + "".join(f"        {s}\n" for s in forward) + "        return x\n")


@st.composite
def dataset_class(draw) -> str:
    body = draw(st.sampled_from(["return torch.zeros(3).cuda()", "return self.data[i].to('cuda:0')",
                                 "return torch.tensor(self.rows[i])"]))
    return ("class Rows(Dataset):\n    def __len__(self):\n        return 10\n\n"
            f"    def __getitem__(self, i):\n        {body}\n")


HEADERS = st.sampled_from([
    "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, Dataset\n",
    "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader, Dataset\nimport torchvision\n",
    "# -*- coding: utf-8 -*-\n\"\"\"Training script.\"\"\"\nimport os\nimport torch\nimport torch.nn as nn\n"
    "from torch.utils.data import DataLoader, Dataset\n",
    "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, Dataset\n"
    "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
])


@st.composite
def torch_programs(draw) -> str:
    parts = draw(st.lists(st.one_of(module_statement(), loop(), function(), model_class(), dataset_class()),
                          min_size=1, max_size=5))
    main_guard = draw(st.booleans())
    body = "\n".join(parts)
    if main_guard:
        body = "def main():\n" + "".join(("    " + line if line.strip() else line)
                                          for line in body.splitlines(keepends=True)) + \
            "\n\nif __name__ == '__main__':\n    main()\n"
    return draw(HEADERS) + "\n" + body


def test_the_builder_produces_valid_python_that_rules_fix():
    """The strategy is worth running only if its programs parse and get rewritten."""
    programs = []

    @settings(max_examples=10, deadline=None, database=None)
    @given(torch_programs())
    def collect(source):
        programs.append(source)

    collect()
    for source in programs:
        ast.parse(source)
    fired = sum(transform_source(source, "gen.py").changed for source in programs[:3])
    assert fired >= 1


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=torch_programs(), config=st.sampled_from(CONFIGS))
def test_torch_programs_are_rewritten_safely_and_idempotently(source, config):
    compile(source, "generated.py", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    check_engine(source, config)


@settings(max_examples=examples(3), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=torch_programs())
def test_crlf_programs_settle_too(source):
    crlf = source.replace("\n", "\r\n")
    try:
        result = transform_source(crlf, "generated.py")
    except SourceError:
        return
    assume(result.changed)
    assert "\n" not in result.output.replace("\r\n", "")
    assert transform_source(result.output, "generated.py").output == result.output
