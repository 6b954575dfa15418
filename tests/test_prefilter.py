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
    "DM104": ("import torch\nwait = torch.cuda.synchronize\nprint(torch.cuda.max_memory_allocated())\n",
              "import torch\ntorch.cuda.synchronize()\n"),
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
    "DM205": ("import torch\nx = torch.zeros(3)\nsame = x.get_device() == 0\nself.get_device()\n",
              "import torch\nx = torch.zeros(3)\ny = torch.ones(3).to(x.get_device())\n"),
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


# Narrower checks, each a file the rule leaves alone that its check used to keep:
# (source, role, whether the text is the user's own, rule)
NARROWED = {
    # a factory its own chain already places (``.cuda()``, ``.to(device=...)``, ``.float().to(d)``)
    "placed in its chain": ("import torch\n\ndef main(n, device):\n    a = torch.zeros(n).float().to(device)\n"
                            "    b = torch.ones(n).cuda()\n    c = torch.arange(n).to(device=device)\n"
                            "    d = torch.ones(n).view(1, -1).to(a.device)\n    return a, b, c, d\n",
                            FileRole(), True, "DM201"),
    # the user's own ``torch.zeros(n).to(device)`` is kept as written (the first pass)
    "the user's own .to": ("import torch\n\ndef main(n, device):\n    return torch.zeros(n).to(device)\n",
                           FileRole(), True, "DM201"),
    # a model built in a file others import: no device there, and no DataParallel to report
    "library model": ("import torch.nn as nn\n\ndef build():\n    model = nn.Linear(2, 2)\n    return model\n",
                      FileRole(imported=True), True, "DM202"),
    # a parameter, or a name the function never binds, is never surely a tensor
    "parameter or outer name": ("import torch\ny = torch.zeros(2)\n\ndef f(x, net):\n    x.to('cpu')\n"
                                "    y.float()\n    net.half()\n",
                                FileRole(), True, "DM204"),
}


@pytest.mark.parametrize("case", sorted(NARROWED))
def test_a_narrowed_check_skips_what_the_rule_leaves_alone(case, monkeypatch):
    source, role, user_text, code = NARROWED[case]
    rule = rule_by_code(code)
    assert not rule.may_apply(FileFacts(ast.parse(source), source, role, user_text=user_text))
    monkeypatch.setenv(engine.NO_PREFILTER_ENV, "1")
    result = engine.transform_source(source, config=UNSAFE, rules=[rule], role=role)
    assert result.output == source
    assert not [f for f in result.findings if f.code == code]


def test_a_fix_of_an_earlier_pass_may_be_folded():
    """After DM302 made ``.cuda()`` a ``.to(device)``, the fold is devmod's own: the check keeps it."""
    source = NARROWED["the user's own .to"][0]
    facts = FileFacts(ast.parse(source), source, FileRole(), user_text=False)
    assert rule_by_code("DM201").may_apply(facts)


def test_a_library_file_with_dataparallel_keeps_the_model_check():
    source = ("import torch.nn as nn\n\ndef build():\n    model = nn.parallel.DistributedDataParallel(nn.Linear(2, 2))\n"
              "    return model\n")
    facts = FileFacts(ast.parse(source), source, FileRole(imported=True), user_text=True)
    assert rule_by_code("DM202").may_apply(facts)


def test_a_layer_built_outside_the_forward_path_keeps_no_file():
    """DM401 reports only in ``forward`` and what it calls: a ``fuse_projections()`` that builds
    layers on request is construction code of its own."""
    source = ("import torch.nn as nn\n\nclass M(nn.Module):\n    def forward(self, x):\n        return self.inner(x)\n\n"
              "    def inner(self, x):\n        return x\n\n    def fuse(self):\n        self.qkv = nn.Linear(4, 12)\n")
    rule = rule_by_code("DM401")
    assert not rule.may_apply(_facts(source))
    assert rule.may_apply(_facts(source.replace("return x\n", "return nn.Linear(4, 4)(x)\n")))


def test_a_conditional_with_different_branches_keeps_no_cuda_check():
    source = "import torch\nx = torch.ones(2)\ny = x.to('cuda') if torch.cuda.is_available() else x\n"
    rule = rule_by_code("DM103")
    assert not rule.may_apply(_facts(source))
    assert rule.may_apply(_facts(source.replace("else x", "else x.to('cuda')")))


def test_a_library_default_device_keeps_no_file():
    """A ``device="cuda"`` default in a file others import is its callers' to override."""
    source = 'import torch\n\ndef mask(n, device="cuda", *, dev="cuda:0"):\n    return n\n'
    rule = rule_by_code("DM102")
    assert not rule.may_apply(FileFacts(ast.parse(source), source, FileRole(imported=True)))
    assert rule.may_apply(FileFacts(ast.parse(source), source, FileRole()))
    assert not rule.may_apply(_facts(source.replace("device=", "size=").replace("dev=", "k=")))


def test_a_name_bound_to_a_model_keeps_no_discarded_to_check():
    """``model = cls.from_config(c)`` then ``model.to(dtype)``: a module moves in place (DM204 leaves it)."""
    source = ("import torch\n\ndef build(cls, c, dtype):\n    model = cls.from_config(c)\n    model.to(dtype)\n"
              "    net = Net(4).float()\n    net.half()\n    return model, net\n")
    rule = rule_by_code("DM204")
    assert not rule.may_apply(_facts(source))
    assert rule.may_apply(_facts(source.replace("cls.from_config(c)", "torch.zeros(c)")))
