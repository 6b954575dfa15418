"""DM101 shared-device with the other rules: where the file's own device definition stands."""

from __future__ import annotations

import textwrap

from codemods.engine import transform_source


def run(code: str) -> tuple[str, list]:
    code = textwrap.dedent(code)
    result = transform_source(code)
    assert transform_source(result.output).output == result.output, "a second run must change nothing"
    return result.output, result.findings


def test_a_device_chosen_inside_an_if_is_not_hoisted_or_reused():
    # pytorch/examples super_resolution: the accelerator is used only with --accel. Hoisting the
    # definition would load the model onto the GPU while the input stays on the CPU.
    out, _ = run("""\
    import torch

    model = torch.load("model.pt")
    image = torch.zeros(1, 1, 8, 8)
    if use_accelerator:
        device = torch.accelerator.current_accelerator()
        model = model.to(device)
        image = image.to(device)
    out = model(image).cpu()
    """)
    assert 'model = torch.load("model.pt", map_location="cpu")' in out
    assert "image = torch.zeros(1, 1, 8, 8)\n" in out
    assert out.count("device = ") == 1 and "    device = torch.accelerator.current_accelerator()" in out


def test_a_device_defined_in_the_main_guard_is_still_the_shared_device():
    out, _ = run("""\
    import torch
    import torch.nn as nn

    if __name__ == "__main__":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(2, 2).to(device)
        x = torch.zeros(1, 2)
        print(model(x))
    """)
    assert "x = torch.zeros(1, 2, device=device)" in out
    assert out.count("device = torch.device(") == 1
