"""DM103 cuda-call: CUDA checks that lose their meaning once everything uses the shared device."""

from __future__ import annotations

import textwrap

from codemods.engine import transform_source


def test_a_conditional_expression_with_identical_branches_collapses():
    code = textwrap.dedent("""\
    import torch

    a = torch.ones(3).to("cuda") if torch.cuda.is_available() else torch.ones(3)
    b = torch.ones(3, device="cpu") if torch.cuda.is_available() else torch.ones(3, device="cpu")
    """)
    out = transform_source(code).output
    assert "a = torch.ones(3, device=device)\n" in out
    # identical branches without the shared device are the author's: left as written
    assert 'b = torch.ones(3, device="cpu") if torch.cuda.is_available() else torch.ones(3, device="cpu")' in out
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in out
    assert transform_source(out).output == out
