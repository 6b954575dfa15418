"""The simulated GPU against known PyTorch behaviour, and the `devmod verify` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from click.testing import CliRunner  # noqa: E402

from codemods.cli import main  # noqa: E402
from codemods.verify import simulated_cuda  # noqa: E402

MISMATCH = "Expected all tensors to be on the same device"


@pytest.fixture
def sim():
    with simulated_cuda() as mode:
        yield mode


def test_cuda_api_looks_like_one_gpu_and_is_restored(sim):
    assert torch.cuda.is_available() and torch.cuda.device_count() == 1
    torch.cuda.synchronize(), torch.cuda.manual_seed(0), torch.cuda.empty_cache(), torch.cuda.set_device(0)
    assert torch.cuda.memory_allocated() == 0


def test_simulation_is_undone_on_exit():
    with simulated_cuda():
        pass
    assert not torch.cuda.is_available()
    assert torch.randn(2).device.type == "cpu"


@pytest.mark.parametrize("case", ["linear", "conv", "embedding", "cat", "matmul", "add", "loss_weight", "functional"])
def test_mixing_devices_raises(sim, case):
    x = torch.randn(4, 3, device="cuda")
    ops = {
        "linear": lambda: nn.Linear(3, 2).cuda()(torch.randn(4, 3)),
        "conv": lambda: nn.Conv2d(1, 2, 3).to("cuda")(torch.randn(1, 1, 5, 5)),
        "embedding": lambda: nn.Embedding(10, 4).cuda()(torch.tensor([1, 2])),
        "cat": lambda: torch.cat([x, torch.randn(4, 3)]),
        "matmul": lambda: x @ torch.randn(3, 2),
        "add": lambda: x + torch.ones(4, 3),
        "loss_weight": lambda: nn.CrossEntropyLoss(weight=torch.ones(3))(x, torch.tensor([0, 1, 2, 0], device="cuda")),
        "functional": lambda: nn.functional.mse_loss(x, torch.zeros(4, 3)),
    }
    with pytest.raises(RuntimeError, match=MISMATCH):
        ops[case]()


def test_rnn_hidden_state_on_the_cpu_raises_like_pytorch(sim):
    lstm = nn.LSTM(3, 5).cuda()
    with pytest.raises(RuntimeError, match="Input and hidden tensors are not at the same device"):
        lstm(torch.randn(2, 1, 3, device="cuda"), (torch.zeros(1, 1, 5), torch.zeros(1, 1, 5)))


def test_allowed_mixes_do_not_raise(sim):
    x = torch.randn(4, 3, device="cuda")
    x + torch.tensor(2.0)                      # 0-dim CPU tensors mix freely
    x[torch.tensor([0, 1])]                    # CPU indices into a GPU tensor
    y = torch.empty(4, 3)
    y.copy_(x)                                 # a copy across devices
    assert x.cpu().device.type == "cpu" and x.to("cpu").numpy().shape == (4, 3)
    assert x.item if x.numel() else True


def test_index_on_the_gpu_into_a_cpu_tensor_raises(sim):
    with pytest.raises(RuntimeError, match="indices should be either on cpu"):
        torch.randn(5)[torch.tensor([0], device="cuda")]


def test_numpy_on_a_gpu_tensor_raises_typeerror(sim):
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        torch.ones(2, device="cuda").numpy()


def test_devices_are_reported_like_pytorch(sim):
    x = torch.zeros(2).cuda()
    assert x.device == torch.device("cuda:0") and x.is_cuda and x.get_device() == 0
    assert torch.zeros_like(x).is_cuda and x.new_zeros(3).is_cuda and not torch.zeros(2).is_cuda


def test_a_correctly_placed_training_loop_runs_clean(sim, tmp_path):
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randint(0, 2, (32,))), batch_size=8,
                        pin_memory=True)
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    checkpoint = torch.load(path, map_location=device)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    assert sim.stats.param_devices == {"cuda:0"}
    assert all(p.grad.is_cuda for p in model.parameters())


def _script(tmp_path, body: str):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


BUGGY = """
    import torch
    import torch.nn as nn
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(3, 1).to(device)
    batch = torch.randn(4, 3)
    print(model(batch))
"""


def test_verify_reports_a_device_error_at_the_users_line(tmp_path):
    path = _script(tmp_path, BUGGY)
    result = CliRunner().invoke(main, ["verify", "--simulate", str(path)])
    assert result.exit_code == 3
    assert f"{path}:7: device error" in result.output
    assert "print(model(batch))" in result.output and "hint: devmod rule" in result.output


def test_verify_exit_codes_and_json(tmp_path):
    clean = _script(tmp_path, "import torch\nprint(torch.ones(1, device='cuda').is_cuda)\n")
    result = CliRunner().invoke(main, ["verify", "--simulate", "--json", str(clean)])
    assert result.exit_code == 0 and json.loads(result.stdout)["kind"] == "clean"
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nraise ValueError('not a device problem')\n")
    assert CliRunner().invoke(main, ["verify", "--simulate", str(broken)]).exit_code == 1
    missing = CliRunner().invoke(main, ["verify", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2 and "Traceback" not in missing.output


def test_verify_real_without_a_gpu_is_a_usage_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = CliRunner().invoke(main, ["verify", "--real", str(_script(tmp_path, BUGGY))])
    assert result.exit_code == 2 and "--real needs a CUDA GPU" in result.output


def test_verify_compare_fixes_a_copy_and_leaves_the_original(tmp_path):
    path = _script(tmp_path, BUGGY)
    before = path.read_bytes()
    proc = subprocess.run([sys.executable, "-m", "codemods", "verify", "--simulate", "--compare", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].split()[:3] == ["before", "simulated", "device-error"]
    assert lines[2].split()[:3] == ["after", "simulated", "clean"]
    assert path.read_bytes() == before


pytest_plugins = ["pytester"]


def test_pytest_plugin_shows_device_bugs_in_cpu_only_ci(pytester):
    pytester.makepyfile(test_model="""
        import torch
        def test_forward():
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = torch.nn.Linear(2, 1).to(device)
            model(torch.randn(3, 2))
    """)
    assert pytester.runpytest_subprocess("-p", "codemods.pytest_plugin").ret == 0
    result = pytester.runpytest_subprocess("-p", "codemods.pytest_plugin", "--simulate-cuda")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*Expected all tensors to be on the same device*"])
