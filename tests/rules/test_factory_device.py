"""DM201 factory-device: cases beyond the rule's own examples (signatures, layout, flow)."""

from __future__ import annotations

import textwrap

import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules.factory_device import FactoryDevice


def fix(code: str, all_rules: bool = False) -> str:
    code = textwrap.dedent(code)
    result = transform_source(code, config=Config(), rules=None if all_rules else [FactoryDevice])
    again = transform_source(result.output, config=Config(), rules=None if all_rules else [FactoryDevice])
    assert again.output == result.output, "a second run must change nothing"
    return result.output


def body(code: str) -> str:
    """The function body of ``def f(model, device):`` after DM201, for short assertions."""
    source = "import torch\n\ndef f(model, device):\n" + textwrap.indent(textwrap.dedent(code), "    ")
    return fix(source).split("def f(model, device):\n", 1)[1]


@pytest.mark.parametrize("line", [
    "x = torch.complex(a, b)",          # no device= in the signature
    "x = torch.polar(a, b)",
    "x = torch.normal(mean, std)",      # the tensor overload takes no device
    "x = torch.tensor(data, torch.float32)",  # extra positional: leave it to the author
    "x = torch.as_tensor(data, dtype)",
    "x = torch.zeros(3, **options)",   # may carry device= already
    "x = torch.tensor(*args)",
    "x = torch.randn(3, generator=g)",  # a CPU generator needs a CPU tensor
    "x = torch.zeros(3, out=buf)",
    "x = torch.empty(3, pin_memory=True)",
    "x = torch.zeros(3, device='cpu')",
    "x = torch.zeros(3).cuda()",        # DM103 turns it into .to(device), folded next pass
    "x = torch.zeros(3).float().to(device)",  # placed at the end of its chain: already right
    "x = torch.zeros(3).to(device, non_blocking=True)",
    "x = torch.zeros(3).to(other)",
    "x = torch.ones(3).cpu()",
    "x = torch.ones(3).float().numpy()",
    "x = torch.zeros_like(y)",
    # the user's own working move: folding it into device= gives the same tensor, so it is churn
    "x = torch.zeros(3).to(device)",
    "x = torch.eye(3).to(y.device)",
    "x = torch.eye(3).to(torch.device('cpu'))",
])
def test_left_alone(line):
    assert body(line + "\nreturn x\n") == textwrap.indent(line + "\nreturn x\n", "    ")


@pytest.mark.parametrize("line, expected", [
    ("x = torch.normal(0.0, 1.0, (3,))", "x = torch.normal(0.0, 1.0, (3,), device=device)"),
    ("x = torch.zeros(*shape)", "x = torch.zeros(*shape, device=device)"),
    ("x = torch.zeros(3).to(torch.float16)", "x = torch.zeros(3, device=device).to(torch.float16)"),
    ("x = torch.zeros(3).to(dtype=torch.long)", "x = torch.zeros(3, device=device).to(dtype=torch.long)"),
    ("x = torch.tensor([1, 2], dtype=torch.long)", "x = torch.tensor([1, 2], dtype=torch.long, device=device)"),
    ("x = torch.full((2,), 0.5)", "x = torch.full((2,), 0.5, device=device)"),
    ("x = torch.zeros(())", "x = torch.zeros((), device=device)"),
])
def test_fixed(line, expected):
    assert body(line + "\nreturn model(x)\n") == textwrap.indent(expected + "\nreturn model(x)\n", "    ")


def test_layouts_are_kept():
    code = """\
        import torch

        def f(device):
            a = torch.zeros(
                3,
                4
            )
            b = torch.zeros(3,
                            4)
            c = torch.zeros(
                3, 4,
            )
            d = torch.zeros(
                3)
            e = torch.zeros(  # comment
                3,
                4,
            )
            return a, b, c, d, e
        """
    assert fix(code) == textwrap.dedent("""\
        import torch

        def f(device):
            a = torch.zeros(
                3,
                4,
                device=device
            )
            b = torch.zeros(3,
                            4,
                            device=device)
            c = torch.zeros(
                3, 4, device=device,
            )
            d = torch.zeros(
                3,
                device=device)
            e = torch.zeros(  # comment
                3,
                4,
                device=device,
            )
            return a, b, c, d, e
        """)


def test_device_defined_later_in_the_function_is_not_used_early():
    code = """\
        import torch

        def main():
            a = torch.zeros(3)
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            b = torch.zeros(3)
            return a, b
        """
    out = fix(code)
    assert "a = torch.zeros(3)\n" in out
    assert "b = torch.zeros(3, device=device)\n" in out


def test_defaults_and_decorators_run_at_def_time():
    code = """\
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x, bias=torch.zeros(3)):
                return x + bias

        def train(model, device, h0=torch.zeros(2)):
            return model(h0)
        """
    assert fix(code) == textwrap.dedent(code)


def test_cpu_side_uses():
    code = """\
        import numpy as np
        import torch
        from torch.utils.data import DataLoader, random_split

        def prepare(device):
            table = torch.arange(10)
            picked = torch.randn(10)[table]
            idx = torch.randperm(100)
            parts = random_split(range(100), [50, 50], generator=None)
            order = torch.randint(0, 10, (5,))
            arr = np.asarray(order)
            xs = [torch.randn(3) for _ in range(4)]
            loader = DataLoader(xs, batch_size=2)
            weights = torch.ones(3).tolist()
            return picked, idx.sort(), parts, arr, loader, weights
        """
    out = fix(code)
    for kept in ("torch.arange(10)\n", "torch.randint(0, 10, (5,))\n",
                 "[torch.randn(3) for _ in range(4)]", "torch.ones(3).tolist()"):
        assert kept in out
    assert "picked = torch.randn(10, device=device)[table]" in out
    assert "idx = torch.randperm(100, device=device)\n" in out


def test_other_classes_data_callbacks_and_nested_functions():
    code = """\
        import torch
        from torch.utils.data import DataLoader

        class Helper:
            def make(self):
                return torch.zeros(3)

        def collate(batch):
            return torch.stack(batch), torch.zeros(len(batch))

        loader = DataLoader([], collate_fn=collate)

        def train(model, dev):
            def helper(n):
                return torch.ones(n)
            return model(helper(3))
        """
    out = fix(code)
    assert "return torch.zeros(3)\n" in out
    assert "torch.zeros(len(batch))" in out
    assert "torch.ones(n, device=" in out  # a closure in training code gets a device too


def test_suppression_comment():
    code = "import torch\nx = torch.zeros(3)  # devmod: ignore[DM201]\n"
    assert fix(code) == code


def test_all_rules_on_a_small_training_script():
    code = """\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        X = torch.randn(64, 3)
        y = torch.randn(64, 1)
        loader = DataLoader(TensorDataset(X, y), batch_size=8)
        model = nn.Linear(3, 1)

        for xb, yb in loader:
            noise = torch.randn(xb.size(0), 3)
            loss = ((model(xb + noise) - yb) ** 2).mean()
        """
    out = fix(code, all_rules=True)
    assert "X = torch.randn(64, 3)\n" in out and "y = torch.randn(64, 1)\n" in out
    assert "noise = torch.randn(xb.size(0), 3, device=device)" in out


def test_static_and_class_methods_of_a_module_have_no_self_to_ask():
    code = """\
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        @staticmethod
        def mask(n):
            return torch.ones(n, n)

        @classmethod
        def table(cls, n):
            return torch.arange(n)

        def scale(me, n):
            return torch.ones(n)
    """
    out = fix(code)
    assert "return torch.ones(n, n)\n" in out
    assert "return torch.arange(n)\n" in out
    assert "torch.ones(n, device=next(me.parameters()).device)" in out


def test_arithmetic_with_numbers_keeps_a_dataset_tensor_on_the_cpu():
    out = fix("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(TensorDataset(torch.rand(24, 6) * 2 - 1), batch_size=8)
    data = -torch.randn(10, 3) / 2.0
    dataset = TensorDataset(data)
    shifted = torch.randn(10, 3) + offset
    """)
    assert "TensorDataset(torch.rand(24, 6) * 2 - 1)" in out
    assert "data = -torch.randn(10, 3) / 2.0\n" in out
    # arithmetic with a variable may meet a GPU tensor: the factory gets the device
    assert "shifted = torch.randn(10, 3, device=device) + offset" in out


def test_from_numpy_in_device_code_is_moved():
    out = fix("""\
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.utils.data import TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(1, 1).to(device)
    features = np.ones((4, 1), dtype=np.float32)
    for _ in range(2):
        inputs = torch.from_numpy(features)
        loss = model(inputs).sum()
    predicted = model(torch.from_numpy(features)).detach().cpu().numpy()
    moved = torch.from_numpy(features).float().to(device)
    data = TensorDataset(torch.from_numpy(features))
    """)
    assert "inputs = torch.from_numpy(features).to(device)\n" in out
    assert "model(torch.from_numpy(features).to(device)).detach()" in out
    assert "moved = torch.from_numpy(features).float().to(device)\n" in out
    assert "TensorDataset(torch.from_numpy(features))" in out


def test_from_numpy_in_a_dataset_stays_on_the_cpu():
    code = """\
    import torch
    from torch.utils.data import Dataset

    class Arrays(Dataset):
        def __getitem__(self, i):
            return torch.from_numpy(self.rows[i])
    """
    assert fix(code) == textwrap.dedent(code)


def test_from_numpy_follows_its_own_binding_only():
    out = fix("""\
    import numpy as np
    import torch
    import torch.nn as nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(2, 2).to(device)
    criterion = nn.MSELoss()
    y = torch.randn(4, 2)
    loss = criterion(model(torch.randn(4, 2)), y)
    y = torch.from_numpy(np.ones((2, 2)))
    z = y.numpy()
    w = torch.from_numpy(np.ones((2, 2)))
    print(w.sum())
    """)
    assert "y = torch.from_numpy(np.ones((2, 2)))\n" in out
    assert "w = torch.from_numpy(np.ones((2, 2)))\n" in out


def test_a_move_at_the_end_of_a_chain_places_the_factory():
    code = """\
    import torch

    def decode(model, device):
        ys = torch.ones(1, 1).fill_(3).type(torch.long).to(device)
        return model(ys)
    """
    assert fix(code) == textwrap.dedent(code)


def test_a_later_rebinding_does_not_decide_for_an_earlier_tensor():
    # Found on yunjey/pytorch-tutorial: `y` is reused for a NumPy round trip further down.
    out = fix("""\
    import numpy as np
    import torch
    import torch.nn as nn

    x = torch.randn(10, 3)
    y = torch.randn(10, 2)
    linear = nn.Linear(3, 2).to(device)
    loss = nn.MSELoss()(linear(x), y)
    y = torch.from_numpy(np.zeros(2))
    z = y.numpy()
    """)
    assert "y = torch.randn(10, 2, device=device)" in out
    assert "y = torch.from_numpy(np.zeros(2))\n" in out


def test_host_data_used_by_a_model_inside_a_function_is_moved():
    out = fix("""\
    import numpy as np
    import torch
    import torch.nn as nn

    x = torch.from_numpy(np.zeros((8, 4), "float32"))
    model = nn.Linear(4, 1).to(device)

    def closure():
        return model(x).sum()
    """)
    assert 'x = torch.from_numpy(np.zeros((8, 4), "float32")).to(device)' in out


def test_a_tensor_whose_size_slices_an_array_is_not_an_index():
    out = fix("""\
    import numpy as np
    import torch
    import torch.nn as nn

    x = torch.randn(8, 4)
    model = nn.Linear(4, 1).to(device)
    out = model(x)
    y = np.zeros(10)[x.shape[0]:]
    z = np.zeros(10)[: x.size(0)]
    """)
    assert "x = torch.randn(8, 4, device=device)" in out


def test_a_tensor_the_author_moves_a_few_lines_later_is_left_as_written():
    out = fix("""\
    import torch

    images = torch.rand(2, 3, 8, 8)
    images = (images - images.mean()) / images.std()
    images = images.to(device)
    noise = torch.rand(2, 3)
    noise = noise * scale
    noise = noise.to(device)
    first = torch.rand(3)
    print(first.sum())
    first = first.to(device)
    """)
    assert "images = torch.rand(2, 3, 8, 8)\n" in out
    # combined with another variable before the move: it may meet the device there
    assert "noise = torch.rand(2, 3, device=device)" in out
    # used on its own before the move: placed where it is made
    assert "first = torch.rand(3, device=device)" in out


def test_a_tensor_converted_to_numpy_on_the_next_line_stays_on_the_cpu():
    out = fix("""\
    import torch

    y = torch.randn(3)
    y = y.numpy()
    """)
    assert "y = torch.randn(3)\n" in out


def test_a_module_whose_sub_module_may_hold_only_buffers_asks_its_own_buffer():
    # ``self.spec`` holds only a buffer, so ``next(self.parameters())`` would raise
    # StopIteration; the buffer this module registers moves with ``model.to()`` and is sure to exist.
    out = fix("""\
        import torch
        import torch.nn as nn

        class Spectrum(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("window", torch.ones(6))

        class Mel(nn.Module):
            def __init__(self):
                super().__init__()
                self.spec = Spectrum()
                self.register_buffer("basis", torch.rand(4, 6))

            def offsets(self):
                return torch.arange(4)
    """)
    assert "return torch.arange(4, device=self.basis.device)" in out


def test_a_helper_computed_from_its_tensor_argument_is_not_host_data(tmp_path):
    # ``halves(x)`` returns ``torch.split(x, ...)``, a tuple on x's device; ``log_floor(x)`` is
    # computed from x; ``sample(m, v)`` is ``torch.normal(m, std)``, on m's device: no result is
    # moved where a model method uses it.
    from codemods.driver import process_files
    (tmp_path / "pyproject.toml").write_text("")
    ops = tmp_path / "ops.py"
    ops.write_text("import torch\n\n\ndef halves(x, n):\n    return torch.split(x, n, dim=1)\n\n\n"
                   "def log_floor(x, floor=1e-5):\n    return torch.log(torch.clamp(x, min=floor))\n\n\n"
                   "def sample(mean, var):\n    return torch.normal(mean, var.sqrt())\n")
    net = tmp_path / "net.py"
    net.write_text(textwrap.dedent("""\
        import torch
        import torch.nn as nn
        from ops import halves, log_floor, sample

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(2, 2, 1)

            def forward(self, x):
                a, b = halves(x, 2)
                return log_floor(torch.cat([a, self.conv(b)], dim=1))

            def generate(self, start):
                out = self.conv(start)
                return sample(out, out.abs())
        """))
    report = next(r for r in process_files([str(net), str(ops)], Config(), "diff", jobs=1) if r.path.endswith("net.py"))
    assert ".to(" not in report.diff


def test_inputs_of_a_model_the_author_pinned_to_the_cpu_stay():
    out = fix("""\
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, device="cuda"):
                super().__init__()
                self.lin = nn.Linear(4, 2)

            def forward(self, x):
                return self.lin(x)

        if __name__ == "__main__":
            net = Net(device="cpu")
            cpu_net = nn.Linear(4, 2).cpu()
            print(net(torch.randn(3, 4)), cpu_net(torch.randn(3, 4)))
    """)
    assert "torch.randn(3, 4, device" not in out


def test_a_probe_used_only_above_the_files_own_device_is_not_reported():
    source = """\
        import torch
        import torch.nn as nn

        net = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
        X = torch.randn(1, 8)
        for layer in net:
            X = layer(X)

        def try_gpu():
            return torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")

        device = try_gpu()
        net = net.to(device)
        print(net(torch.randn(3, 8).to(device)).shape)
    """
    result = transform_source(textwrap.dedent(source), config=Config())
    assert "X = torch.randn(1, 8)\n" in result.output
    assert not [f for f in result.findings if not f.fixed]


def test_factories_computed_with_a_cpu_tensor_devmod_leaves_stay_beside_it():
    # ``W`` is drawn from a distribution (a CPU tensor devmod does not move) and ``K`` is a
    # legacy constructor that feeds no model: the factories they are computed with stay too.
    out = fix("""\
        import torch
        from torch.distributions import Normal

        W = Normal(0, 0.01).sample((4, 3))
        b = torch.zeros(3)

        def affine(X):
            return torch.matmul(X, W) + b

        def scale(X, K):
            return X * K

        X = torch.rand(2, 4)
        K = torch.Tensor([[2.0]])
        print(affine(X).shape, scale(torch.ones(2, 2), K))
        head = torch.nn.Linear(3, 1)
        print(head(affine(X)))
    """, all_rules=True)
    assert "b = torch.zeros(3)\n" in out and "X = torch.rand(2, 4)\n" in out
    assert "scale(torch.ones(2, 2), K)" in out


def test_an_input_handed_over_beside_a_model_built_right_there_stays():
    out = fix("""\
        import torch
        import torch.nn as nn

        def head(channels, outputs):
            return nn.Conv2d(channels, outputs, kernel_size=3, padding=1)

        def run(x, block):
            return block(x)

        if __name__ == "__main__":
            print(run(torch.zeros((2, 8, 4, 4)), head(8, 5)).shape)
            net = nn.Linear(2, 2)
            print(net(torch.ones(1, 2)))
    """, all_rules=True)
    assert "torch.zeros((2, 8, 4, 4))," in out
    assert "net(torch.ones(1, 2, device=device))" in out


def test_only_devmods_own_move_is_folded():
    """cleanrl's rollout buffers, ``torch.zeros(...).to(device)`` in driver code, already work: the
    fold into ``device=`` was churn in 32 hunks. The ``.to(device)`` that DM302 writes for a
    ``.cuda()`` in the first pass is devmod's own, and the next pass folds it."""
    out = fix("""\
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def rollout(steps, envs):
            rewards = torch.zeros((steps, envs)).to(device)
            values = torch.zeros(steps).cuda()
            return rewards, values
        """, all_rules=True)
    assert "rewards = torch.zeros((steps, envs)).to(device)\n" in out
    assert "values = torch.zeros(steps, device=device)\n" in out
