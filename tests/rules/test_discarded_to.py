"""DM204 discarded-to: cases beyond the rule's own examples."""

from __future__ import annotations

import textwrap

import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules.discarded_to import DiscardedTo


def run(code: str, all_rules: bool = False):
    code = textwrap.dedent(code)
    result = transform_source(code, config=Config(), rules=None if all_rules else [DiscardedTo])
    again = transform_source(result.output, config=Config(), rules=None if all_rules else [DiscardedTo])
    assert again.output == result.output, "a second run must change nothing"
    return result


@pytest.mark.parametrize("code", [
    # parameters and attributes: unknown
    "import torch\n\ndef f(x: torch.Tensor, device):\n    x.to(device)\n",
    "import torch\n\nclass A:\n    def go(self, device):\n        self.buf.to(device)\n",
    # a model built from a class of the file, a torch.nn layer
    "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n\nnet = Net()\nnet.to('cpu')\nnet.half()\n",
    # the whole batch of a loop (could be a custom object), and the enumerate counter
    "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader([])\n"
    "for batch in loader:\n    batch.to('cpu')\nfor i, b in enumerate(loader):\n    b.to('cpu')\n",
    # a loop over something that is not a DataLoader
    "import torch\nfor x, y in pairs:\n    x.to('cpu')\n",
    # not a conversion
    "import torch\nx = torch.zeros(3)\nx.add_(1)\nx.numpy()\n",
    # the result is used
    "import torch\nx = torch.zeros(3)\nprint(x.to('cpu'))\n",
    # a global tensor inside a function: assigning would make it local
    "import torch\nx = torch.zeros(3)\n\ndef f():\n    x.to('cpu')\n",
])
def test_left_alone(code):
    result = run(code)
    assert result.output == code
    assert not [f for f in result.findings if f.code == "DM204"]


def test_every_binding_a_tensor():
    code = """\
        import torch

        def f(device):
            x = torch.zeros(3)
            x += 1
            x = x.float()
            x: torch.Tensor = torch.ones(3)
            x.to(device)
            return x
        """
    assert "    x = x.to(device)\n" in run(code).output


def test_loader_parameter_and_nested_unpacking():
    code = """\
        import torch

        def evaluate(model, val_loader, device):
            for step, ((x, mask), y) in enumerate(val_loader):
                x.to(device)
                mask.bool()
                y.to(device).long()
                step.to(device)
        """
    out = run(code).output
    assert "x = x.to(device)\n" in out
    assert "mask = mask.bool()\n" in out
    assert "y = y.to(device).long()\n" in out
    assert "step.to(device)\n" in out and "step = step" not in out


def test_suite_and_semicolon_and_comment():
    code = """\
        import torch
        x = torch.zeros(3)
        if True: x.to('cpu')  # move
        y = torch.ones(2); y.float(); print(y)
        """
    assert run(code).output == textwrap.dedent("""\
        import torch
        x = torch.zeros(3)
        if True: x = x.to('cpu')  # move
        y = torch.ones(2); y = y.float(); print(y)
        """)


def test_suppressed():
    code = "import torch\nx = torch.zeros(3)\nx.to('cpu')  # noqa: DM204\n"
    result = run(code)
    assert result.output == code and not result.findings


def test_reports_data_for_numpy():
    code = "import torch\nx = torch.zeros(3)\nx.to('cpu')\nv = x.numpy()\n"
    result = run(code)
    assert result.output == code
    assert [f.code for f in result.open_findings] == ["DM204"]


def test_with_all_rules_cuda_becomes_an_assignment():
    code = """\
        import torch

        def train(model, device):
            x = torch.randn(4, 3)
            x.cuda()
            return model(x)
        """
    out = run(code, all_rules=True).output
    assert "    x = torch.randn(4, 3, device=device)\n    x = x.to(device)\n" in out
