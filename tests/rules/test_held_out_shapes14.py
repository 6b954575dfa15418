"""Shapes found by the fourteenth held-out trial (probes written beside DDPM-Pytorch, pytorch-semseg
and PyTorch-ENet; docs/real-repos.md "Fourteenth run"). Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import rewrite as run

from codemods.config import Config
from codemods.driver import process_files


def _project(folder: Path, files: dict[str, str]) -> dict[str, str]:
    """Rewrite ``files`` as one project; the new text of each file."""
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    paths = [str(folder / name) for name in files]
    reports = list(process_files(paths, Config(), "write", jobs=1))
    assert not any(r.error for r in reports)
    assert not any(r.changed for r in process_files(paths, Config(), "check", jobs=1)), "a second run changes nothing"
    return {name: (folder / name).read_text() for name in files}


def test_a_forward_input_made_into_a_tensor_there_gives_no_device():
    # ``forward(self, sizes, t)`` with ``sizes`` a list of ints: ``sizes.device`` raised AttributeError.
    _, result = run("""\
        import torch
        import torch.nn as nn


        class Grow(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)

            def forward(self, sizes, t):
                n = torch.as_tensor(sizes).sum()
                return self.lin(torch.ones(int(n), 4)) * t
    """)
    assert "sizes.device" not in result.output
    assert "torch.ones(int(n), 4, device=next(self.parameters()).device)" in result.output


def test_a_tensor_in_a_dict_handed_to_a_model_built_right_there_stays_with_it():
    # ``Tok()({"ids": torch.zeros(...)})``: the model is built on the CPU in that call; moving the
    # tensor inside the dict alone broke a call that worked (as a plain argument it already stayed).
    source, result = run("""\
        import torch
        import torch.nn as nn


        class Tok(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(10, 4)

            def forward(self, batch):
                return self.emb(batch["ids"])


        if __name__ == "__main__":
            print(Tok()({"ids": torch.zeros(2, 3, dtype=torch.long)}).shape)
    """)
    assert result.output == source


def test_a_checkpoint_tensor_returned_to_the_caller_keeps_its_device(tmp_path):
    # The helper loads the weights into the model and returns a statistic of the checkpoint, which
    # the caller subtracts from its input on the GPU: restored to the CPU it failed there. A helper
    # that returns only bookkeeping (the epoch) still gets ``map_location="cpu"``.
    out = _project(tmp_path, {
        "ckpt_io.py": """\
            import torch


            def restore(model, path):
                state = torch.load(path)
                model.load_state_dict(state["weights"])
                return state["mean"]


            def resume(model, path):
                state = torch.load(path)
                model.load_state_dict(state["weights"])
                return state["epoch"], state["best_score"]
        """,
        "run.py": """\
            import torch
            import torch.nn as nn
            import ckpt_io

            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = nn.Linear(3, 3).to(device)
            mean = ckpt_io.restore(net, "c.pt")
            epoch, best = ckpt_io.resume(net, "c.pt")
            print(net(torch.randn(2, 3, device=device) - mean))
        """})
    assert "    state = torch.load(path)\n    model.load_state_dict(state[\"weights\"])\n    return state[\"mean\"]" \
        in out["ckpt_io.py"]
    assert out["ckpt_io.py"].count('torch.load(path, map_location="cpu")') == 1


def test_a_tensor_loaded_onto_a_model_in_its_own_method_keeps_its_device():
    # ``self.scale = torch.load(path)`` in a model's method replaces a buffer that ``model.to()``
    # placed: restored to the CPU, forward met it beside GPU weights. ``load_state_dict`` of the
    # same file still gets ``"cpu"`` (it copies to where the parameters are).
    _, result = run("""\
        import torch
        import torch.nn as nn


        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)
                self.register_buffer("scale", torch.ones(2))

            def load_scale(self, path):
                self.scale = torch.load(path)

            def load_weights(self, path):
                self.load_state_dict(torch.load(path))

            def forward(self, x):
                return self.fc(x) * self.scale
    """)
    assert "        self.scale = torch.load(path)\n" in result.output
    assert '        self.load_state_dict(torch.load(path, map_location="cpu"))\n' in result.output
