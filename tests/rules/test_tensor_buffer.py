"""DM301 tensor-buffer: cases beyond the rule's own examples."""

from __future__ import annotations

import textwrap

import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules.tensor_buffer import TensorBuffer

HEAD = "import torch\nimport torch.nn as nn\n\n"


def run(code: str, all_rules: bool = False):
    code = HEAD + textwrap.dedent(code)
    rules = None if all_rules else [TensorBuffer]
    result = transform_source(code, config=Config(), rules=rules)
    assert transform_source(result.output, config=Config(), rules=rules).output == result.output
    return code, result


@pytest.mark.parametrize("code", [
    # assigned again outside __init__ (a buffer only takes tensors)
    """
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.state = torch.zeros(3)

        def reset(self):
            self.state = None
    """,
    # a subclass in the same file assigns it too
    """
    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.arange(10)

    class Child(Base):
        def __init__(self):
            super().__init__()
            self.table = [1, 2]
    """,
    # before super().__init__(): register_buffer would raise
    """
    class M(nn.Module):
        def __init__(self):
            self.mask = torch.ones(3)
            super().__init__()
    """,
    # super().__init__() only inside an if
    """
    class M(nn.Module):
        def __init__(self, flag):
            if flag:
                super().__init__()
            self.mask = torch.ones(3)
    """,
    # a property of the same name: register_buffer raises KeyError
    """
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.ones(1)

        @property
        def scale_value(self):
            return 1

        scale = None
    """,
    # not surely a tensor
    """
    class M(nn.Module):
        def __init__(self, table):
            super().__init__()
            self.table = table
            self.sizes = [torch.ones(2), torch.ones(3)]
            self.w = nn.Parameter(torch.randn(3))
    """,
    # tuple targets and augmented assignment count as assignments
    """
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.ones(3)
            self.a += 1
    """,
    # already a buffer name
    """
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mask", None)
            self.mask = torch.ones(3)
    """,
])
def test_dm301_left_alone(code):
    source, result = run(code)
    assert result.output == source
    assert not [f for f in result.findings if f.code == "DM301"]


def test_dm301_positional_encoding_table_becomes_a_buffer():
    source, result = run("""
    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, max_len=5000):
            super().__init__()
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len).unsqueeze(1)
            pe[:, 0::2] = torch.sin(position)
            self.pe = pe.unsqueeze(0)  # (1, max_len, d_model)

        def forward(self, x):
            return x + self.pe[:, : x.size(1)]
    """)
    assert ('        self.register_buffer("pe", pe.unsqueeze(0), persistent=False)  # (1, max_len, d_model)\n'
            in result.output)


def test_dm301_device_parameter_kept_and_all_rules_agree():
    source, result = run("""
    class Attn(nn.Module):
        def __init__(self, n, device=None):
            super().__init__()
            self.bias = torch.tril(torch.ones(n, n, device=device)).view(1, 1, n, n)

        def forward(self, x):
            return x.masked_fill(self.bias == 0, 0.0)
    """, all_rules=True)
    assert ('self.register_buffer("bias", torch.tril(torch.ones(n, n, device=device)).view(1, 1, n, n), '
            'persistent=False)') in result.output
    assert "device = torch.device" not in result.output


def test_dm301_suppressed_line_stays():
    source, result = run("""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.mask = torch.ones(3)  # devmod: ignore[DM301]
    """)
    assert result.output == source


def test_an_attribute_set_to_a_builtin_is_left_alone():
    # libcst lists a builtin as a binding without a node: it must read as "don't know", not crash.
    code = (
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.activation = abs\n"
        "        self.reader = input\n"
    )
    assert transform_source(code).output == code
