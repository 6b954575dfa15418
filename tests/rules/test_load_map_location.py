"""DM302 load-map-location: cases beyond the rule's own examples."""

from __future__ import annotations

import textwrap

import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules.load_map_location import LoadMapLocation


def fix(code: str, all_rules: bool = False) -> str:
    code = textwrap.dedent(code)
    rules = None if all_rules else [LoadMapLocation]
    result = transform_source(code, config=Config(), rules=rules)
    assert transform_source(result.output, config=Config(), rules=rules).output == result.output
    return result.output


@pytest.mark.parametrize("line", [
    'torch.load("a.pt", map_location="cuda:0")',    # a string device: DM102's job
    'torch.load("a.pt", "cpu")',                    # positional map location
    'torch.load("a.pt", map_location=lambda s, l: s)',
    'torch.load("a.pt", **kwargs)',                  # may carry map_location
    'torch.jit.load("a.pt")',
    'np.load("a.npy")',
])
def test_dm302_left_alone(line):
    code = f"import numpy as np\nimport torch\nstate = {line}\n"
    assert fix(code) == code


def test_dm302_keeps_weights_only_and_layout():
    code = """\
    import torch

    def restore(path, device):
        return torch.load(
            path,
            weights_only=True,
        )
    """
    assert fix(code) == textwrap.dedent("""\
    import torch

    def restore(path, device):
        return torch.load(
            path,
            weights_only=True,
            map_location=device,
        )
    """)


def test_dm302_device_defined_later_in_the_function_is_not_used():
    code = """\
    import torch

    def main(model):
        state = torch.load("a.pt")
        device = torch.device("cuda")
        model.load_state_dict(state)
        return model.to(device)
    """
    assert 'torch.load("a.pt", map_location="cpu")' in fix(code)


def test_dm302_tensors_used_as_loaded_keep_where_they_were_saved():
    # Run 31 (attention-transfer): a teacher's weights restored as a plain dict of tensors and used as
    # a function's parameters beside the student's on the GPU: on the CPU they would meet them.
    code = """\
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")

    def distill(student, x, path):
        saved = torch.load(path)
        teacher = {k: v.detach() for k, v in saved["weights"].items()}
        return forward(x, student) - forward(x, teacher)

    def resume(model, optimizer, path):
        ckpt = torch.load(path)
        model.load_state_dict({k[7:]: v for k, v in ckpt["model"].items()})
        for name, tensor in model.named_parameters():
            tensor.data.copy_(ckpt["params"][name])
        optimizer.load_state_dict(ckpt["optimizer"])
        return ckpt["epoch"], ckpt.get("best_acc", 0)

    def restore(model, path):
        checkpoint = torch.load(path)
        if isinstance(checkpoint, dict) and "state_dict" in checkpoint:
            renamed = {}
            for key, value in checkpoint["state_dict"].items():
                if key.startswith("module."):
                    key = key[7:]
                renamed[key] = value
            model.load_state_dict(renamed)

    def widen(model, path):
        weights = torch.load(path)
        for key, weight in weights.items():
            current = model.state_dict()[key]
            if weight.size() != current.size():
                weight = torch.cat((weight, current[len(weight):]))
            current.copy_(weight)
    """
    out = fix(code)
    assert "saved = torch.load(path)\n" in out
    assert 'ckpt = torch.load(path, map_location="cpu")\n' in out
    assert 'checkpoint = torch.load(path, map_location="cpu")\n' in out
    assert "weights = torch.load(path)\n" in out  # concatenated with the model's own weights


def test_dm302_from_import_and_alias():
    code = "from torch import load\nimport torch as th\nstate = load('a.pt')\n"
    out = fix(code)
    assert "state = load('a.pt', map_location=device)\n" in out
    assert 'device = th.device("cuda" if th.cuda.is_available() else "cpu")' in out


def test_dm302_model_method_uses_cpu():
    code = """\
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def load(self, path):
            self.load_state_dict(torch.load(path))
    """
    assert 'torch.load(path, map_location="cpu")' in fix(code, all_rules=True)


def test_dm302_library_code_loads_to_the_cpu_and_gets_no_global_device():
    """A loading helper in a file other project files import is library code: the CPU (or the
    function's own device parameter), never a new module-level ``device``."""
    from codemods.analysis.project import FileRole
    code = textwrap.dedent("""\
    import torch


    def load_pretrained_weights(model, weights_path):
        model.load_state_dict(torch.load(weights_path))


    def restore(model, path, device):
        model.load_state_dict(torch.load(path))
    """)
    out = transform_source(code, config=Config(), role=FileRole(imported=True)).output
    assert "device = torch.device" not in out
    assert "torch.load(weights_path, map_location=\"cpu\")" in out
    assert "torch.load(path, map_location=device)" in out
    # the same helper in a lone script is driver code's business, as before
    script = transform_source(code, config=Config()).output
    assert "torch.load(weights_path, map_location=device)" in script
