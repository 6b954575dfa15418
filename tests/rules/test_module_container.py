"""DM305 module-container: an unsafe fix, and which containers qualify."""

from __future__ import annotations

import textwrap

import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules.module_container import ModuleContainer


def run(code: str, unsafe: bool = True):
    code = textwrap.dedent(code)
    config = Config(unsafe_fixes=unsafe)
    result = transform_source(code, config=config, rules=[ModuleContainer])
    assert transform_source(result.output, config=config, rules=[ModuleContainer]).output == result.output
    return code, result


def init(line: str, extra: str = "", head: str = "import torch\nimport torch.nn as nn\n") -> str:
    return (head + "\nclass M(nn.Module):\n    def __init__(self, blocks):\n        super().__init__()\n"
            f"        {line}\n" + extra)


def test_dm305_reported_with_its_code_without_unsafe_fixes():
    code, result = run(init("self.layers = [nn.Linear(2, 2), nn.ReLU()]"), unsafe=False)
    assert result.output == code
    (finding,) = [f for f in result.findings if f.code == "DM305"]
    assert not finding.fixed and finding.replacement == "self.layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])"


@pytest.mark.parametrize("line, expected", [
    ("self.heads = {f'h{i}': nn.Linear(2, 2) for i in range(3)}",
     "self.heads = nn.ModuleDict({f'h{i}': nn.Linear(2, 2) for i in range(3)})"),
    ("self.heads = {str(i): nn.Linear(2, 2) for i in range(3)}",
     "self.heads = nn.ModuleDict({str(i): nn.Linear(2, 2) for i in range(3)})"),
])
def test_dm305_fixed(line, expected):
    code, result = run(init(line))
    assert result.output == init(expected)


@pytest.mark.parametrize("line, extra", [
    ("self.masks = [torch.ones(2) for _ in range(3)]", ""),          # tensors
    ("self.layers = [nn.Linear(2, 2), blocks[0]]", ""),              # unknown element
    ("self.heads = {'a.b': nn.Linear(2, 2)}", ""),                   # dots are not allowed in names
    ("self.heads = {name: nn.Linear(2, 2) for name in blocks}", ""),  # keys of unknown kind
    ("self.heads = {f'{x}': nn.Linear(2, 2) for x in blocks}", ""),
    ("self.heads = {'a': nn.Linear(2, 2)}", "\n    def get(self):\n        return self.heads.get('a')\n"),
    ("self.layers = [nn.Linear(2, 2)]", "\n    def reset(self):\n        self.layers = []\n"),
    ("self.layers = [nn.Linear(2, 2)]", "\n    def more(self):\n        return [nn.ReLU()] + self.layers\n"),
    ("self.layers = []", "        self.layers.append(blocks[0])\n"),   # appends something unknown
    ("self.layers = []", ""),                                          # nothing appended
    ("self.loss = [nn.MSELoss()]", ""),                                # losses are not models here
])
def test_dm305_left_alone(line, extra):
    code, result = run(init(line, extra))
    assert result.output == code
    assert not [f for f in result.findings if f.code == "DM305"]


def test_dm305_uses_the_files_spelling_of_torch_nn():
    head = "import torch\nfrom torch import nn as tnn\n"
    code, result = run(init("self.layers = [tnn.Linear(2, 2)]", head=head).replace("nn.Module", "tnn.Module"))
    assert "self.layers = tnn.ModuleList([tnn.Linear(2, 2)])" in result.output
    code, result = run("import torch as th\n\nclass M(th.nn.Module):\n    def __init__(self):\n"
                       "        super().__init__()\n        self.layers = [th.nn.Linear(2, 2)]\n")
    assert "self.layers = th.nn.ModuleList([th.nn.Linear(2, 2)])" in result.output


def test_a_list_of_tokenizers_is_not_a_module_list():
    code = """\
import torch.nn as nn
from transformers import AutoTokenizer


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokenizers = [AutoTokenizer.from_pretrained("a"), AutoTokenizer.from_pretrained("b")]
"""
    result = transform_source(code, config=Config(unsafe_fixes=True), rules=[ModuleContainer])
    assert result.output == code


def test_a_dict_read_only_to_pick_the_registered_backbone_is_left_alone():
    # SimCLR's shape: the dict is a lookup table for __init__; what forward uses is registered
    # as ``self.backbone``. A ModuleDict would register (and move, and save) the unused nets.
    code = """\
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.nets = {"small": nn.Linear(4, 4), "large": nn.Linear(4, 4)}
        self.backbone = self._pick(name)

    def _pick(self, name):
        return self.nets[name]

    def forward(self, x):
        return self.backbone(x)
"""
    result = transform_source(code, config=Config(unsafe_fixes=False), rules=[ModuleContainer])
    assert result.output == code and not result.findings
    used = code.replace("return self.backbone(x)", "return self.nets['small'](x)")
    assert [f.code for f in transform_source(used, config=Config(), rules=[ModuleContainer]).findings] == ["DM305"]
