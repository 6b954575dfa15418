"""The ``ast`` prefilter (analysis/candidates.py): files no rule may act on skip libcst entirely.

Each rule's ``may_apply`` must be a superset of what the rule finds: it may keep a file the
rule then leaves alone, never skip one where the rule fixes or reports something. Checked
here on a file each check skips and one it keeps, on every rule's own examples, and on the
engine's answers with and without the prefilter. ``benchmarks/scan_equivalence.py
--prefilter CORPUS`` asks the same of whole repositories.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from codemods import engine
from codemods.analysis.candidates import FileFacts
from codemods.analysis.project import FileRole, ProjectIndex
from codemods.config import Config
from codemods.rules import all_rules, rule_by_code

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
UNSAFE = Config(unsafe_fixes=True)

# Per rule: a file its check skips (nothing there it could act on), and one it keeps.
CASES = {
    "DM101": ("import torch\n\ndef f(x, device):\n    return x.to(device)\n",
              "import torch\nx = torch.ones(2).to(device)\n"),
    "DM102": ('import torch\nx = torch.ones(2).to("cpu")\n',
              'import torch\nx = torch.ones(2).to("cuda")\n'),
    "DM103": ("import torch\nx = torch.ones(2).to(torch.float16)\nok = torch.cuda.is_available()\n",
              "import torch\nx = torch.ones(2).cuda()\n"),
    "DM201": ("import torch\n\nclass Scheduler:\n    def step(self, n):\n        return torch.zeros(n)\n\n"
              "def helper(n):\n    return torch.arange(n)\n",
              "import torch\n\ndef main(n, device):\n    return torch.zeros(n)\n"),
    "DM202": ("import torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.fc = nn.Linear(2, 2)\n",
              "import torch.nn as nn\nmodel = nn.Linear(2, 2)\n"),
    "DM203": ("import torch\n\nclass Trainer:\n    def fit(self, loader, model):\n        for x in loader:\n"
              "            model(x)\n\ndef f():\n    for i in range(3):\n        print(i)\n",
              "import torch\n\ndef train(model, loader):\n    for x in loader:\n        model(x)\n"),
    "DM204": ("import torch\nx = torch.zeros(3)\ny = x.to('cpu')\nself_model.net.float()\n",
              "import torch\nx = torch.zeros(3)\nx.to('cpu')\n"),
    "DM301": ("import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self, n):\n"
              "        super().__init__()\n        self.n = n\n        self.w = nn.Parameter(torch.ones(n))\n",
              "import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.mask = torch.ones(3)\n"),
    "DM302": ("import torch\nstate = torch.save({}, 'x.pt')\nimport pickle\nd = pickle.load(open('f', 'rb'))\n",
              "import torch\nstate = torch.load('x.pt')\n"),
    "DM303": ("import torch\nx = torch.ones(2).numpy(force=True)\ny = torch.ones(2).detach().cpu().numpy()\n"
              "z = torch.ones(2).to(device='cpu')[0].data.numpy()\n",
              "import torch\nx = torch.ones(2).numpy()\n"),
    "DM304": ("import torch\nfrom torch import Tensor\n\ndef f(x: Tensor) -> Tensor:\n    return torch.FloatTensor([1.0]) + x\n",
              "import torch\nx = torch.cuda.FloatTensor(2)\n"),
    "DM305": ("import torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.sizes = [1, 2]\n",
              "import torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.layers = [nn.Linear(2, 2)]\n"),
    "DM401": ("import torch.nn as nn\nimport torch.nn.functional as F\n\nclass M(nn.Module):\n"
              "    def forward(self, x):\n        return F.relu(nn.ReLU()(x))\n",
              "import torch.nn as nn\n\nclass M(nn.Module):\n    def forward(self, x):\n        return nn.Linear(2, 2)(x)\n"),
    "DM402": ("import torch\ntorch.set_default_dtype(torch.float64)\n",
              "import torch\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')\n"),
    "DM403": ("import torch\nmodel.load_state_dict(torch.load('m.pt'))\n",
              "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nopt.load_state_dict(s)\n"),
    "DM404": ("import torch.nn as nn\nnet = nn.DataParallel(build())\n",
              "import torch.nn as nn\nnet = nn.DataParallel(model)\n"),
    # (an index a function binds itself reads only its own binding, not another function's .to(device);
    # .to(dtype=...) keeps a tensor where it is)
    "DM405": ("import torch\nbetas = torch.linspace(0, 1, 10)\n\ndef q(t):\n    return betas[t]\n\n"
              "def r(n, device):\n    t = torch.randint(0, 10, (n,)).to(device)\n    return t\n\n"
              "def s(args):\n    t = args[0]\n    k = torch.floor(betas).to(dtype=torch.long)\n    return betas[t] + betas[k]\n",
              "import torch\nbetas = torch.linspace(0, 1, 10)\nt = torch.randint(0, 10, (4,)).to(device)\nb = betas[t]\n"),
}


def _facts(source: str, role: FileRole | None = None) -> FileFacts:
    return FileFacts(ast.parse(source), source, role or FileRole())


def test_every_rule_has_its_own_check():
    for rule in all_rules():
        assert "may_apply" in vars(rule), f"{rule.CODE} does not say which files it may act on"
        assert rule.CODE in CASES


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_check_skips_a_file_and_keeps_another(code):
    rule = rule_by_code(code)
    skipped, kept = CASES[code]
    assert not (engine._triggered(rule, skipped) and rule.may_apply(_facts(skipped)))
    assert engine._triggered(rule, kept) and rule.may_apply(_facts(kept))


@pytest.mark.parametrize("code", sorted(CASES))
def test_a_skipped_file_is_truly_left_alone(code, monkeypatch):
    """The skip cases, run with the prefilter off: the rule finds nothing there."""
    monkeypatch.setenv(engine.NO_PREFILTER_ENV, "1")
    source = CASES[code][0]
    result = engine.transform_source(source, config=UNSAFE, rules=[rule_by_code(code)])
    assert result.output == source
    assert not [f for f in result.findings if f.code == code]


def test_a_project_model_from_another_file_keeps_the_file():
    source = "from models import Net\n\ndef main():\n    net = Net()\n    return net\n"
    rule = rule_by_code("DM202")
    assert not rule.may_apply(_facts(source))
    assert rule.may_apply(_facts(source, FileRole(model_names=frozenset({"Net"}))))


def test_qualified_names_follow_imports_as_libcst_does():
    facts = _facts("import torch.nn as nn\nfrom torch import zeros as z\nimport torch.utils.data\n"
                   "nn.Linear\nz\ntorch.utils.data.DataLoader\n")
    values = [statement.value for statement in facts.tree.body[3:]]
    assert "torch.nn.Linear" in facts.qnames(values[0])
    assert "torch.zeros" in facts.qnames(values[1])
    assert "torch.utils.data.DataLoader" in facts.qnames(values[2])


def test_a_default_or_decorator_is_read_in_the_enclosing_scope():
    rule = rule_by_code("DM101")
    assert rule.may_apply(_facts("import torch\n\ndef f(device=device):\n    return device\n"))
    assert rule.may_apply(_facts("import torch\n\ndef f():\n    global device\n    return device\n"))
    assert not rule.may_apply(_facts("import torch\n\ndef f():\n    device = 1\n    return device\n"))


def _rule_examples():
    for rule in all_rules():
        for kind in ("VALID", "INVALID"):
            for index, example in enumerate(getattr(rule, kind)):
                yield pytest.param(rule, example.code, id=f"{rule.CODE}-{kind.lower()}{index}")


@pytest.mark.parametrize("rule, source", list(_rule_examples()))
def test_the_prefilter_never_skips_a_file_where_a_rule_acts(rule, source, monkeypatch):
    """Every rule's VALID/INVALID example, that rule alone and all rules: wherever a rule
    records a fix or a finding, its own check keeps the file, and the engine's answer is the
    same with and without the prefilter."""
    role = ProjectIndex.build([("example.py", source)]).role_for("example.py")
    facts = _facts(source, role)
    for rules in ([rule], None):
        with_prefilter = engine.transform_source(source, "example.py", UNSAFE, rules=rules, role=role)
        monkeypatch.setenv(engine.NO_PREFILTER_ENV, "1")
        without = engine.transform_source(source, "example.py", UNSAFE, rules=rules, role=role)
        monkeypatch.delenv(engine.NO_PREFILTER_ENV)
        assert (with_prefilter.output, with_prefilter.findings) == (without.output, without.findings)
        if rules is not None and any(f.code == rule.CODE for f in without.findings):
            assert rule.may_apply(facts), f"{rule.CODE} acts on a file its own check would skip"


@pytest.mark.parametrize("path", EXAMPLES[::3], ids=lambda p: p.name)
def test_examples_answer_the_same_without_the_prefilter(path, monkeypatch):
    source = path.read_text()
    with_prefilter = engine.transform_source(source, str(path), Config())
    monkeypatch.setenv(engine.NO_PREFILTER_ENV, "1")
    without = engine.transform_source(source, str(path), Config())
    assert (with_prefilter.output, with_prefilter.findings) == (without.output, without.findings)


def test_a_file_no_rule_may_act_on_is_never_parsed_by_libcst(monkeypatch):
    def no_parse(source):
        raise AssertionError("libcst must not parse this file")

    monkeypatch.setattr(engine, "parse", no_parse)
    source = "import torch\n\ndef add(a, b):\n    return torch.add(a, b)\n"
    result = engine.transform_source(source, "lib.py", Config())
    assert result.output == source and not result.findings and result.skipped is None


def test_a_broken_file_still_gets_its_error():
    with pytest.raises(engine.SourceError) as error:
        engine.transform_source("import torch\ndef f(:\n", "bad.py", Config())
    assert error.value.message.startswith("cannot parse")
