"""Shapes found by the nineteenth held-out trial and those the earlier runs left open
(docs/real-repos.md "Nineteenth run"). Each test fails on the code before its fix."""

from __future__ import annotations

from all_rules_support import rewrite as run


def _unfixed(result) -> list[str]:
    return [f.code for f in result.findings if not f.fixed]


def test_a_hook_on_a_part_compares_its_output_with_a_list_of_references():
    # pretrained-models' ``resnet152_load.py``: hooks on ``net.conv1`` compare each output with
    # ``netoutputs[i]``, loaded with Lua's loader and kept in a list. Moving the model and its input
    # left the references on the CPU beside outputs on the GPU.
    _, result = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.serialization import load_lua


        references = []
        for i in range(2):
            references.append(load_lua("ref%d.t7" % i))

        net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        net[0].register_forward_hook(lambda mod, inp, output: print(torch.dist(output, references[0])))
        x = torch.ones(1, 4)
        y = net(x)
    """)
    assert "device" not in result.output
    assert _unfixed(result) == ["DM202"]
    assert "an element of `references` (line 8)" in result.findings[0].message


def test_a_list_of_references_that_moves_moves_with_its_model():
    # the same shape with references devmod can place: the whole group moves.
    _, result = run("""\
        import torch
        import torch.nn as nn


        references = []
        for i in range(2):
            references.append(torch.ones(4))

        net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        net[1].register_forward_hook(lambda mod, inp, output: print(torch.dist(output, references[0])))
        y = net(torch.ones(1, 4))
    """)
    assert "torch.ones(4, device=device)" in result.output
    assert "torch.ones(1, 4, device=device)" in result.output
    assert _unfixed(result) == []
