"""Which devmod rule the report names for each kind of device error."""

from __future__ import annotations

import pytest
from verify_support import write

torch = pytest.importorskip("torch")

from codemods.verify.diagnose import diagnose, rule_name  # noqa: E402
from codemods.verify.runner import run_script  # noqa: E402

HEAD = """\
import torch
import torch.nn as nn
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""

CASES = {
    "DM202": ("model = nn.Linear(3, 1)\nx = torch.randn(4, 3).to(device)\nmodel(x)\n", 6),
    "DM203": ("from torch.utils.data import DataLoader, TensorDataset\n"
              "model = nn.Linear(3, 1).to(device)\n"
              "for x, y in DataLoader(TensorDataset(torch.randn(8, 3), torch.randn(8, 1)), batch_size=4):\n"
              "    loss = nn.functional.mse_loss(model(x), y)\n", 7),
    "DM201": ("class Net(nn.Module):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.fc = nn.Linear(3, 3)\n"
              "    def forward(self, x):\n"
              "        mask = torch.ones(x.shape[-1])\n"
              "        return self.fc(x) * mask\n"
              "Net().to(device)(torch.randn(2, 3, device=device))\n", 10),
    "DM301": ("class Scale(nn.Module):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.scale = torch.ones(3)\n"
              "    def forward(self, x):\n"
              "        return x * self.scale\n"
              "Scale().to(device)(torch.randn(2, 3, device=device))\n", 9),
    "DM305": ("class Stack(nn.Module):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.first = nn.Linear(3, 3)\n"
              "        self.layers = [nn.Linear(3, 3), nn.Linear(3, 3)]\n"
              "    def forward(self, x):\n"
              "        x = self.first(x)\n"
              "        for layer in self.layers:\n"
              "            x = layer(x)\n"
              "        return x\n"
              "Stack().to(device)(torch.randn(2, 3, device=device))\n", 12),
    "DM401": ("class Late(nn.Module):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.fc = nn.Linear(3, 3)\n"
              "    def forward(self, x):\n"
              "        head = nn.Linear(3, 1)\n"
              "        return head(self.fc(x))\n"
              "Late().to(device)(torch.randn(2, 3, device=device))\n", 10),
    "DM204": ("model = nn.Linear(3, 1).to(device)\nx = torch.randn(4, 3)\nx.to(device)\nmodel(x)\n", 7),
    "DM405": ("schedule = torch.linspace(0, 1, 10)\nsteps = torch.randint(0, 10, (4,), device=device)\n"
              "noise = schedule[steps]\n", 6),
    "DM403": ("model = nn.Linear(3, 1)\noptimizer = torch.optim.Adam(model.parameters())\n"
              "model(torch.randn(2, 3)).sum().backward()\noptimizer.step()\n"
              "state = optimizer.state_dict()\n"
              "optimizer = torch.optim.Adam(model.parameters())\noptimizer.load_state_dict(state)\n"
              "model.to(device)\nmodel(torch.randn(2, 3, device=device)).sum().backward()\noptimizer.step()\n", 13),
    "DM303": ("scores = torch.randn(3, device=device)\nprint(scores.numpy())\n", 5),
}


@pytest.mark.parametrize("rule", list(CASES))
def test_simulated_device_errors_name_the_rule_that_fixes_them(tmp_path, rule):
    body, line = CASES[rule]
    script = write(tmp_path, HEAD + body)
    outcome = run_script(script, simulate=True)
    assert outcome.kind == "device-error", outcome.traceback
    assert (outcome.rule, outcome.line) == (rule, line), (outcome.why, outcome.traceback)
    assert outcome.rule_name == rule_name(rule) != ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
@pytest.mark.parametrize("body, rule", [
    ("x = torch.zeros(3).cuda()\n", "DM103"),
    ("x = torch.zeros(3, device='cuda')\n", "DM102"),
    ("x = torch.zeros(3)\ntorch.cuda.synchronize()\n", "DM104"),
])
def test_gpu_only_code_on_a_cpu_only_machine(tmp_path, body, rule):
    outcome = run_script(write(tmp_path, "import torch\n" + body), simulate=False)
    assert outcome.mode == "cpu" and outcome.kind == "device-error" and outcome.rule == rule
    assert "Torch not compiled with CUDA enabled" in outcome.message


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_a_device_index_of_a_cpu_tensor_names_dm205(tmp_path):
    body = "x = torch.zeros(3)\ny = torch.ones(3).to(x.get_device())\n"
    outcome = run_script(write(tmp_path, "import torch\n" + body), simulate=False)
    assert (outcome.kind, outcome.rule, outcome.line) == ("device-error", "DM205", 3), outcome.traceback


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_a_gpu_checkpoint_loaded_on_a_cpu_only_machine(tmp_path):
    checkpoint = tmp_path / "gpu.pt"
    save = write(tmp_path, f"import torch\ntorch.save({{'w': torch.ones(2, device='cuda')}}, {str(checkpoint)!r})\n",
                 name="save.py")
    assert run_script(save, simulate=True).kind == "clean"
    load = write(tmp_path, f"import torch\nstate = torch.load({str(checkpoint)!r})\n", name="load.py")
    outcome = run_script(load, simulate=False)
    assert outcome.kind == "device-error" and outcome.rule == "DM302" and outcome.line == 2
    assert run_script(load, simulate=True).kind == "clean"  # on a (simulated) GPU it loads


@pytest.mark.parametrize("rule", ["DM301", "DM202", "DM203"])
def test_hints_without_the_simulations_record(tmp_path, rule):
    """On a real GPU the error carries no record of its operands: frames must do."""
    bodies = {
        "DM301": CASES["DM301"][0],
        "DM202": "loss = nn.CrossEntropyLoss(weight=torch.ones(3))\n"
                 "loss(torch.randn(4, 3, device=device), torch.tensor([0, 1, 2, 0], device=device))\n",
        "DM203": CASES["DM203"][0],
    }
    from codemods.verify.simulate import simulated_cuda

    namespace: dict = {}
    with simulated_cuda() as sim, pytest.raises(RuntimeError) as caught:
        exec(compile(HEAD + bodies[rule], str(write(tmp_path, HEAD + bodies[rule])), "exec"), namespace)
    del caught.value.devmod_mismatch
    assert diagnose(caught.value, sim.device_of).rule == rule


def test_message_only_hints():
    cpu = lambda tensor: "cpu"  # noqa: E731
    assert diagnose(RuntimeError("module must have its parameters and buffers on device cuda:0 (device_ids[0]) "
                                 "but found one of them on device: cpu"), cpu).rule == "DM404"
    assert diagnose(RuntimeError("Attempting to deserialize object on a CUDA device but "
                                 "torch.cuda.is_available() is False."), cpu).rule == "DM302"


def test_a_mismatch_in_an_lbfgs_closure_is_the_users_not_the_optimizers(tmp_path):
    # The closure runs user code from inside optimizer.step: that frame is no DM403 evidence.
    script = write(tmp_path, HEAD + (
        "model = nn.Linear(3, 1).to(device)\n"
        "optimizer = torch.optim.LBFGS(model.parameters())\n"
        "inputs = torch.randn(4, 3)\n"
        "def closure():\n"
        "    optimizer.zero_grad()\n"
        "    loss = model(inputs).sum()\n"
        "    loss.backward()\n"
        "    return loss\n"
        "optimizer.step(closure)\n"))
    outcome = run_script(script, simulate=True)
    assert outcome.kind == "device-error" and outcome.line == 9
    assert outcome.rule != "DM403", outcome.why
