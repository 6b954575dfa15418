"""DM203 batch-to-device: cases beyond the rule's own examples (loaders, batch shapes, no second move)."""

from __future__ import annotations

import textwrap
import warnings

import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules.batch_to_device import BatchToDevice


def run(code: str, all_rules: bool = False):
    code = textwrap.dedent(code)
    rules = None if all_rules else [BatchToDevice]
    result = transform_source(code, config=Config(), rules=rules)
    again = transform_source(result.output, config=Config(), rules=rules)
    assert again.output == result.output, "a second run must change nothing"
    return result


def loop(header: str, body: str, params: str = "model, loader, device") -> tuple[str, list]:
    """Run DM203 on ``def f(<params>):`` holding ``for <header>:`` and ``body``; the loop body back."""
    source = (f"import torch\n\ndef f({params}):\n    for {header}:\n"
              + textwrap.indent(textwrap.dedent(body), "        "))
    result = run(source)
    out = result.output.split(f"for {header}:\n", 1)[1]
    return textwrap.dedent(out), [f for f in result.findings if f.code == "DM203"]


@pytest.mark.parametrize("header", [
    "x, y in loader",
    "x, y in iter(loader)",
    "i, (x, y) in enumerate(loader)",
    "i, (x, y) in enumerate(loader, start=1)",
    "x, y in tqdm(loader, desc='train')",
    "i, (x, y) in enumerate(tqdm(loader))",
    "(x, y) in loader",
    "[x, y] in loader",
])
def test_tuple_batches(header):
    out, _ = loop(header, "model(x)\n")
    assert out == "x, y = x.to(device), y.to(device)\nmodel(x)\n"


@pytest.mark.parametrize("params", ["model, train_loader, device", "model, dl, device", "model, val_dl, device",
                                    "model, data: DataLoader, device", "model, loader: torch.utils.data.DataLoader, device"])
def test_loader_parameters(params):
    name = params.split(", ")[1].split(":")[0]
    out, _ = loop(f"x, y in {name}", "model(x)\n", params)
    assert out.startswith("x, y = x.to(device), y.to(device)\n")


@pytest.mark.parametrize("params, iterable", [
    ("model, data, device", "data"),            # a parameter not named like a loader
    ("model, loader, device", "loader.dataset"),  # an attribute
    ("model, loader, device", "zip(a, b)"),
    ("model, loader, device", "range(3)"),
])
def test_not_loaders(params, iterable):
    out, findings = loop(f"x, y in {iterable}", "model(x)\n", params)
    assert out == "model(x)\n" and not findings


def test_loader_assigned_from_aliases_and_factories():
    source = ("import torch\nimport torch.utils.data as tud\nfrom torch.utils.data import DataLoader as DL\n\n"
              "def main(device):\n    a = DL(ds)\n    b = tud.DataLoader(ds)\n    train_loader = get_train_loader()\n"
              "    for x in a:\n        model(x)\n    for x in b:\n        model(x)\n"
              "    for x, y in train_loader:\n        model(x)\n    for x, y in DL(ds):\n        model(x)\n")
    out = run(source).output
    assert out.count("x = x.to(device)\n") == 2 and out.count("x, y = x.to(device), y.to(device)\n") == 2


def test_dict_batches():
    for use in ('model(batch["x"])', "model(**batch)", "model(batch.get('x'))",
                "for k, v in batch.items():\n    model(v)"):
        out, _ = loop("batch in loader", use + "\n")
        assert out.startswith("batch = {k: v.to(device) for k, v in batch.items()}\n"), use


def test_a_loop_that_feeds_no_model_is_left_alone():
    # Data statistics on the CPU: the caller may call .numpy() on the result.
    source = textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def mean_of(loader):
            total = torch.zeros(4)
            for x, _ in loader:
                total += x.sum(0)
            return total

        if __name__ == "__main__":
            loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.zeros(8)), batch_size=4)
            model = torch.nn.Linear(4, 1).cuda()
            print(mean_of(loader).numpy())
        """)
    out = run(source, all_rules=True).output
    assert "total = torch.zeros(4)\n" in out and "x.to(" not in out


def test_tensor_batch():
    out, _ = loop("batch in loader", "out = model(batch)\nn = batch.size(0)\n")
    assert out.startswith("batch = batch.to(device)\n")


@pytest.mark.parametrize("body, expected", [
    ("x, y = batch\nmodel(x)\n", "x, y = batch\nx, y = x.to(device), y.to(device)\nmodel(x)\n"),
    ("opt.zero_grad()\nx = batch[0]\ny = batch[1]\nmodel(x)\n",
     "opt.zero_grad()\nx = batch[0]\ny = batch[1]\nx, y = x.to(device), y.to(device)\nmodel(x)\n"),
    ("x, y = batch[0], batch[1]\nmodel(x)\n", "x, y = batch[0], batch[1]\nx, y = x.to(device), y.to(device)\nmodel(x)\n"),
])
def test_unpacked_in_the_body(body, expected):
    out, _ = loop("batch in loader", body)
    assert out == expected


@pytest.mark.parametrize("body", [
    "model(batch.images)\n",                       # a custom batch object
    "loss = step(model, batch)\n",                 # nothing says what it is
    "out = model(batch[0])\nloss = f(out, batch[1])\n",  # indexed all over the body
    "x, *rest = batch\nmodel(x)\n",                # starred unpacking
    "print(batch['x'])\nmodel(batch)\n",           # mixed: dict and tensor
])
def test_unrecognised_batches_are_reported(body):
    out, findings = loop("batch in loader", body)
    assert out == textwrap.dedent(body)
    assert findings and not findings[0].fixed


def test_nested_targets_are_reported():
    out, findings = loop("(x, y), z in loader", "model(x)\n")
    assert out == "model(x)\n" and findings and not findings[0].fixed


def test_one_line_loop_is_reported():
    source = "import torch\n\ndef f(model, loader, device):\n    for x, y in loader: model(x)\n"
    result = run(source)
    assert result.output == source and [f for f in result.findings if f.code == "DM203"]


@pytest.mark.parametrize("body", [
    "x = x.to(device)\nmodel(x)\n",
    "x, y = x.cuda(), y.cuda()\nmodel(x)\n",
    "model(x.to(device))\n",
    "x, y = to_device((x, y), device)\nmodel(x)\n",
    "x = [t.to(device) for t in x]\nmodel(x)\n",
    "x, y = move_to_cuda(x), y\nmodel(x)\n",
])
def test_already_moved(body):
    out, findings = loop("x, y in loader", body)
    assert out == textwrap.dedent(body) and not findings


def test_already_moved_after_unpacking():
    body = "x, y = batch\nx, y = x.to(device), y.to(device)\nmodel(x)\n"
    assert loop("batch in loader", body)[0] == body


def test_pin_memory_gives_non_blocking():
    source = ("import torch\nfrom torch.utils.data import DataLoader\n\ndef main(device):\n"
              "    loader = DataLoader(ds, pin_memory=use_cuda)\n    for x, y in loader:\n        model(x)\n"
              "    plain = DataLoader(ds, pin_memory=False)\n    for x, y in plain:\n        model(x)\n")
    out = run(source).output
    assert "x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n" in out
    assert "x, y = x.to(device), y.to(device)\n" in out


def test_packed_lengths_stay_on_the_cpu():
    out, _ = loop("x, y, lengths in loader",
                  "packed = nn.utils.rnn.pack_padded_sequence(x, lengths=lengths)\nmodel(packed)\n")
    assert out.startswith("x, y = x.to(device), y.to(device)\n")
    source = ("import torch\nfrom torch.nn.utils.rnn import pack_padded_sequence\n\n"
              "def f(model, loader, device):\n    for x, x_len in loader:\n        model(x, x_len)\n")
    assert "        x = x.to(device)\n        model(x, x_len)\n" in run(source).output


def test_file_names_stay_as_they_are():
    out, _ = loop("images, masks, paths in loader", "out = model(images)\nsave(out, paths)\n")
    assert out.startswith("images, masks = images.to(device), masks.to(device)\n")


def test_detection_targets_are_reported():
    out, findings = loop("images, targets in loader", "model(images)\nfor t in targets:\n    print(t['boxes'])\n")
    assert findings and out.startswith("model(images)")


@pytest.mark.parametrize("code", [
    # a model method, a Dataset, another class, a collate function: no rewrite there
    "import torch.nn as nn\n\nclass Net(nn.Module):\n    def fit(self, loader):\n        for x, y in loader:\n"
    "            self(x)\n",
    "from torch.utils.data import Dataset\n\nclass D(Dataset):\n    def __init__(self, loader):\n"
    "        for x, y in loader:\n            self.n = x.size(0)\n",
    "class Trainer:\n    def fit(self, loader):\n        for x, y in loader:\n            self.model(x)\n",
    # Accelerate places batches itself
    "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
    "model, loader = accelerator.prepare(model, loader)\nfor x, y in loader:\n    model(x)\n",
    # a list of tensors already on the device
    "def f(model, device):\n    samples = [torch.randn(1, 4, device=device) for _ in range(3)]\n"
    "    for s in samples:\n        model(s)\n",
])
def test_left_alone(code):
    source = "import torch\n" + code
    result = run(source)
    assert result.output == source and not [f for f in result.findings if f.code == "DM203"]


def test_comments_and_indentation_kept():
    source = ("import torch\n\ndef f(model, loader, device):\n    for x, y in loader:  # batches\n"
              "        # forward pass\n        out = model(x)  # logits\n\n        loss = out.sum()\n")
    assert run(source).output == source.replace(
        "  # batches\n", "  # batches\n        x, y = x.to(device), y.to(device)\n")


def test_global_loader_in_a_function_uses_the_shared_device():
    source = ("import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\n\n"
              "def train(model):\n    for x, y in loader:\n        model(x)\n\n"
              "if __name__ == \"__main__\":\n    train(net)\n")
    out = run(source).output
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in out
    assert "        x, y = x.to(device), y.to(device)\n" in out


def test_a_function_no_driver_code_calls_is_left_alone():
    # Library code: whoever calls train() decides where the model and the batches live.
    source = ("import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\n\n"
              "def train(model):\n    for x, y in loader:\n        model(x)\n")
    assert run(source).output == source


def test_script_with_all_rules():
    source = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x)

        def train(model, loader, optimizer, device):
            for x, y in loader:
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()

        def main():
            data = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
            loader = DataLoader(data, batch_size=4, pin_memory=True)
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            train(model, loader, optimizer, device)
            for x, y in loader:
                print(model(x).argmax(1) == y)

        if __name__ == "__main__":
            main()
        """)
    out = run(source, all_rules=True).output
    assert "    model = Net().to(device)\n" in out
    assert "        x, y = x.to(device), y.to(device)\n        optimizer.zero_grad()" in out
    assert "        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n" in out
    assert "torch.randn(16, 4)," in out  # dataset tensors stay on the CPU
    with warnings.catch_warnings():  # pin_memory without an accelerator warns
        warnings.simplefilter("ignore")
        exec(compile(out, "<devmod>", "exec"), {"__name__": "__main__"})


@pytest.mark.parametrize("kind", ["VALID", "INVALID"])
def test_examples_with_all_rules(kind):
    for example in getattr(BatchToDevice, kind):
        result = run(example.code, all_rules=True)
        if kind == "VALID":
            assert not [f for f in result.findings if f.code == "DM203"]
        else:
            assert [f for f in result.findings if f.code == "DM203"]


def test_a_dict_batch_whose_parts_are_each_moved_is_left_alone():
    # Pytorch-UNet's loops: the parts are taken out by key, then each moved in keyword form.
    code = """\
        import torch
        import torch.nn.functional as F


        def evaluate(net, dataloader, device):
            for batch in dataloader:
                image, mask_true = batch['image'], batch['mask']
                image = image.to(device=device, dtype=torch.float32)
                mask_true = mask_true.to(device=device, dtype=torch.long)
                print(F.cross_entropy(net(image), mask_true))
        """
    assert run(code).output == textwrap.dedent(code)
    one_moved = code.replace("mask_true = mask_true.to(device=device, dtype=torch.long)", "pass")
    assert "batch = {k: v.to(device) for k, v in batch.items()}" in run(one_moved).output
