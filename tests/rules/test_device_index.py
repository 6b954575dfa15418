"""DM205 device-index: cases beyond the rule's own examples, and the fixed code run on the CPU."""

from __future__ import annotations

import textwrap
from functools import partial

import pytest
from all_rules_support import run_rule

from codemods.rules.device_index import DeviceIndex

run = partial(run_rule, DeviceIndex)


@pytest.mark.parametrize("code", [
    # the index used as a number too
    "import torch\n\ndef f(g, w):\n    dev = g.get_device()\n    if dev < 0:\n        return w\n    return w.to(dev)\n",
    # a parameter of the same name: two bindings
    "import torch\n\ndef f(g, w, dev=None):\n    dev = g.get_device()\n    return w.to(dev)\n",
    # CUDA calls take the index: they run only on a GPU anyway
    "import torch\n\ndef f(x, w):\n    return w.cuda(x.get_device())\n",
    # under a check for CUDA the index is valid
    "import torch\n\ndef f(x, w):\n    if torch.cuda.is_available():\n        w = w.to(x.get_device())\n    return w\n",
    # the second argument of .to is a dtype position, and a module-level name is not followed
    "import torch\nx = torch.zeros(2)\nd = x.get_device()\ny = torch.ones(2).to(d)\n",
    # ``self.get_device()``: a method of the class
    "import torch\n\nclass A:\n    def f(self, t):\n        return t.to(self.get_device())\n",
])
def test_left_alone(code):
    result = run(code)
    assert result.output == code
    assert not result.findings


def test_torch_device_of_an_index():
    code = "import torch\n\ndef f(x):\n    return torch.empty(2, device=torch.device(x.get_device()))\n"
    assert "device=torch.device(x.device)" in run(code).output


def test_a_forward_path_runs_on_the_cpu_after_the_fix():
    code = """\
        import torch
        import torch.nn as nn


        class Encoder(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.n = n
                self.fc = nn.Linear(2 * n, 3)

            def forward(self, ins):
                ids = torch.eye(self.n).repeat(ins.size(0), 1, 1).to(ins.get_device())
                return self.fc(torch.cat((ins, ids), -1))


        out = Encoder(4)(torch.randn(2, 4, 4))
        """
    before = textwrap.dedent(code)
    with pytest.raises(RuntimeError, match="Device index must not be negative"):
        exec(compile(before, "<before>", "exec"), {})
    result = run(code, all_rules=True)
    assert ".to(ins.device)" in result.output
    namespace: dict = {}
    exec(compile(result.output, "<after>", "exec"), namespace)
    assert tuple(namespace["out"].shape) == (2, 4, 3)
