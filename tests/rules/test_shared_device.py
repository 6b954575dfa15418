"""DM101 shared-device with the other rules: where the file's own device definition stands."""

from __future__ import annotations

import textwrap

import pytest

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


def test_distributed_files_get_no_global_device():
    # Each rank has its own GPU: a global `cuda` device would put every rank on GPU 0.
    out, findings = run("""\
    import torch
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    def train(rank):
        model = nn.Linear(2, 2)
        ddp = DDP(model.cuda(), device_ids=[rank])
        checkpoint = torch.load("ckpt.pt")
        return ddp(torch.randn(4, 2))
    """)
    assert "device = torch.device(" not in out
    assert "model.cuda()" in out and "torch.randn(4, 2)" in out
    assert 'torch.load("ckpt.pt", map_location="cpu")' in out
    assert any(f.code == "DM103" and "torch.distributed" in f.message for f in findings)


def test_an_if_else_that_always_defines_the_device_is_reused_below_it():
    # pytorch/examples word_language_model: the device is picked in an if/else; a whole-model
    # torch.load must land on it, and code above the block has no device yet.
    out, _ = run("""\
    import torch
    import torch.nn as nn

    x = torch.zeros(3)
    if torch.accelerator.is_available():
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    model = torch.load("m.pt", weights_only=False)
    y = model(x.to(device)) + torch.ones(1)
    """)
    assert "x = torch.zeros(3)\n" in out
    assert 'torch.load("m.pt", weights_only=False, map_location=device)' in out
    assert "torch.ones(1, device=device)" in out
    assert out.count("device = ") == 2  # both branches stay as written


def test_the_device_goes_after_the_torch_import_above_its_first_use():
    # A second torch import below the first use (a notebook imports as it goes) once put the
    # anchor after it: DM101 reported a false "used before torch is imported" while the other
    # fixes wrote `device` anyway (NameError).
    out, findings = run("""\
    import torch
    x = torch.ones(2).cuda()
    import torch.nn.functional as F
    y = F.relu(x)
    """)
    assert out.startswith('import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                          "x = torch.ones(2, device=device)\n")
    assert not [f for f in findings if not f.fixed]
    exec(compile(out, "<rewritten>", "exec"), {})  # runs on the CPU: `device` is bound where it is read


UNDEFINABLE = {
    # torch itself is imported only below the use (`from torch import nn` binds no `torch`)
    "torch imported below": ("from torch import nn\nlayer = nn.Linear(2, 2).cuda()\nimport torch\n",
                             "no module-level `import torch` comes before it"),
    # torch is imported inside the function only
    "torch imported in a function": ("import numpy as np\n\n\ndef main():\n    import torch\n"
                                     "    return torch.ones(2).cuda()\n\n\nmain()\n",
                                     "no module-level `import torch` comes before it"),
    # the file's own definition comes later and reads a variable: it cannot move up
    "definition below, not movable": ('import torch\nx = torch.ones(2).cuda()\nuse_gpu = torch.cuda.is_available()\n'
                                      'device = torch.device("cuda" if use_gpu else "cpu")\ny = x.to(device)\n',
                                      "its definition comes later and cannot move up"),
}


@pytest.mark.parametrize("code, reason", UNDEFINABLE.values(), ids=UNDEFINABLE)
def test_no_fix_writes_the_device_where_dm101_cannot_define_it(code, reason):
    out, findings = run(code)
    assert out == code, "a fix using `device` where it is never bound turns working code into a NameError"
    withheld = [f for f in findings if f.code == "DM103"]
    assert withheld and not any(f.fixed for f in findings)
    assert all(f"`device` cannot be defined above this line ({reason})" in f.message for f in withheld)


def test_a_function_called_above_a_later_torch_import_gets_the_device_in_one_fix():
    # The file calls ``run()`` (which reads the device) before its second torch import: the new
    # definition goes above that call at once, not below the import and then moved up by a
    # second pass (which reported a "move" fix the user never needed, and cost a pass).
    out, findings = run("""\
    import torch

    def run():
        return torch.ones(2).cuda()

    print(run())
    from torch import nn
    layer = nn.Linear(2, 2)
    """)
    assert out.index("device = torch.device(") < out.index("def run():")
    assert [f.message for f in findings if f.code == "DM101"] == ["add the shared `device` variable"]
