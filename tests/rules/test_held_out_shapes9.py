"""Shapes from the ninth held-out trial (CLIP, whisper, segment-anything, stylegan2-pytorch,
build-nanogpt, Machine-Learning-Collection, deep-learning-v2-pytorch, TCN; docs/real-repos.md).
Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import rewrite as run

from codemods.analysis.project import ProjectIndex
from codemods.engine import transform_source


def _project(files: dict[Path, str]) -> dict[str, object]:
    """Every file's result, each read with the whole project's index."""
    index = ProjectIndex.build([(str(path), text) for path, text in files.items()])
    return {path.name: transform_source(text, str(path), role=index.role_for(str(path)))
            for path, text in files.items()}


def test_cuda_in_a_model_file_follows_the_input_not_a_new_global(tmp_path):
    # stylegan2 swagan.py: ``torch.zeros(...).float().cuda()`` in a helper of a model file that
    # train.py imports became ``.to(device)`` on a module-level device of the model file's own.
    nets = textwrap.dedent("""\
        import torch
        from torch import nn


        def upsample(x):
            b, c, h, w = x.size()
            out = torch.zeros([b, c // 4, 2 * h, 2 * w]).float().cuda()
            out[:, :, 0::2, 0::2] = x[:, : c // 4]
            return out


        def table():
            return torch.arange(4).cuda()


        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)

            def forward(self, x):
                return self.lin(x)
    """)
    script = textwrap.dedent("""\
        import torch
        from nets import Gen

        if __name__ == "__main__":
            device = "cuda"
            g = Gen().to(device)
            print(g(torch.ones(1, 4, device=device)))
    """)
    results = _project({tmp_path / "nets.py": nets, tmp_path / "train.py": script})
    out = results["nets.py"].output
    assert "torch.zeros([b, c // 4, 2 * h, 2 * w]).float().to(x.device)" in out
    assert "\ndevice =" not in out and "return torch.arange(4).cuda()" in out
    # the helper with no tensor to follow is reported, with the reason: it is library code
    [finding] = results["nets.py"].open_findings
    assert finding.code == "DM103" and finding.line == 13 and "other project files import it" in finding.message
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in results["train.py"].output


def test_a_distributed_helper_module_keeps_its_cuda_collectives(tmp_path):
    # stylegan2 distributed.py: NCCL collectives on ``.to("cuda")`` (the rank's GPU, set by the
    # training script) got a module-level global device; ``from torch import distributed`` was not
    # read as a distributed program.
    helper = textwrap.dedent("""\
        import pickle

        import torch
        from torch import distributed as dist


        def all_gather(data):
            world = dist.get_world_size()
            tensor = torch.ByteTensor(torch.ByteStorage.from_buffer(pickle.dumps(data))).to("cuda")
            sizes = [torch.IntTensor([0]).to("cuda") for _ in range(world)]
            dist.all_gather(sizes, torch.IntTensor([tensor.numel()]).to("cuda"))
            return sizes
    """)
    script = "import torch\nfrom dist_utils import all_gather\n\nif __name__ == '__main__':\n" \
             "    torch.cuda.set_device(0)\n    print(all_gather([1]))\n"
    results = _project({tmp_path / "dist_utils.py": helper, tmp_path / "train.py": script})
    assert results["dist_utils.py"].output == helper and not results["dist_utils.py"].findings


def test_a_parameter_made_into_a_tensor_is_no_device_source():
    # stylegan2 model.py make_kernel: ``k = torch.tensor(k)`` of a kernel *list*, then ``k.ndim``
    # of the new tensor; ``device=k.device`` on the list raised AttributeError in every model build.
    source, result = run("""\
        import torch
        from torch import nn


        def make_kernel(k):
            k = torch.tensor(k, dtype=torch.float32)
            if k.ndim == 1:
                k = k[None, :] * k[:, None]
            k /= k.sum()
            return k


        def as_kernel(k):
            k = torch.as_tensor(k, dtype=torch.float32)
            return k[None, :] * k[:, None] if k.ndim == 1 else k


        class Blur(nn.Module):
            def __init__(self, kernel=(1, 3, 3, 1)):
                super().__init__()
                self.register_buffer("kernel", make_kernel(list(kernel)))

            def forward(self, x):
                return x * self.kernel.sum()


        if __name__ == "__main__":
            print(Blur()(torch.ones(2)))
    """)
    assert result.output == source and not result.findings


def test_what_a_converter_only_saves_stays_on_the_cpu():
    # stylegan2 convert_weight.py: models built only for their ``state_dict()`` templates, and an
    # average the author moves where it is used, got ``.to(device)`` before ``torch.save``: on a GPU
    # machine the checkpoint then held CUDA tensors.
    source, result = run("""\
        import numpy as np
        import torch
        from torch import nn

        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = nn.Linear(4, 4)
            avg = torch.from_numpy(np.zeros(4, dtype="float32"))
            extra = nn.Linear(4, 2)
            state = extra.state_dict()
            torch.save({"net": net.state_dict(), "avg": avg, "extra": state}, "converted.pt")
            net = net.to(device)
            with torch.no_grad():
                out = net(torch.ones(1, 4).to(device) + avg.to(device))
            print(out.shape)
    """)
    assert result.output == source and not result.findings


def test_a_batch_taken_by_hand_moves_even_when_a_loop_reuses_its_names():
    # udacity intro-to-pytorch and autoencoder notebooks: ``images, labels = next(iter(loader))``
    # (or ``dataiter.next()``, torch < 1.13) before or after ``for images, labels in loader``; the
    # model moved, the by-hand batch did not.
    source, result = run("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
        criterion = nn.NLLLoss()

        model = nn.Sequential(nn.Linear(4, 2), nn.LogSoftmax(dim=1))
        images, labels = next(iter(loader))
        print(criterion(model(images), labels))

        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for images, labels in loader:
            optimizer.zero_grad()
            criterion(model(images), labels).backward()
            optimizer.step()

        dataiter = iter(loader)
        images, labels = dataiter.next()
        print(model(images).shape)
    """)
    out = result.output
    assert out.count("images, labels = images.to(device), labels.to(device)") == 3
    assert ".to(device)" in out.split("images, labels = next(iter(loader))")[1].split("\n")[1]


def test_a_batch_handed_to_numpy_keeps_its_model_on_the_cpu():
    # udacity denoising autoencoder: ``noisy = np.clip(images + noise, 0., 1.)`` fed to the model.
    # NumPy reads a CUDA tensor as an array and fails, so the group stays and is reported; a noise
    # tensor built with ``*images.shape`` no longer counts as moving the batch.
    source, result = run("""\
        import numpy as np
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(torch.rand(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
        model = nn.Linear(4, 4)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for data in loader:
            images, _ = data
            noisy = images + 0.5 * torch.randn(*images.shape)
            noisy = np.clip(noisy, 0., 1.)
            optimizer.zero_grad()
            loss = ((model(noisy) - images) ** 2).mean()
            loss.backward()
            optimizer.step()
    """)
    assert result.output == source
    [finding] = result.findings
    assert finding.code == "DM202" and "NumPy (`np.clip`)" in finding.message
    # without NumPy in the loop, the batch moves with the model (the noise is built on the device)
    _, moved = run(source.replace("    noisy = np.clip(noisy, 0., 1.)\n", ""))
    assert "    images = images.to(device)\n    noisy = images + 0.5 * torch.randn(*images.shape, device=device)" \
        in moved.output


def test_a_batch_read_through_data_is_a_plain_tensor():
    # udacity mnist-mlp and batch-norm: ``label = target.data[i]`` in a per-class accuracy loop was
    # read as a custom batch object: a false report, and ``--check`` failed on correct code.
    source, result = run("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
        model = nn.Linear(4, 2)
        class_correct = [0.0, 0.0]
        for data, target in loader:
            correct = model(data).argmax(1).eq(target)
            for i in range(data.size(0)):
                label = target.data[i]
                class_correct[label] += correct[i].item()
        print(class_correct)
    """)
    assert not result.open_findings
    assert "model = nn.Linear(4, 2).to(device)" in result.output
    assert "    data, target = data.to(device), target.to(device)" in result.output


def test_a_whole_model_reloaded_in_the_same_run_gets_no_cpu_map_location():
    # TCN word_cnn_test.py and udacity's helper.load_model: ``model = torch.load(f)`` of a model the
    # run saved on its own device, then fed data on that device; ``map_location="cpu"`` put it on the
    # CPU next to CUDA data.
    source, result = run("""\
        import argparse
        import torch
        from torch import nn

        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_false")
        args = parser.parse_args()
        model = nn.Linear(4, 2)
        data = torch.randn(3, 4)
        if args.cuda:
            model.cuda()
            data = data.cuda()
        with open("model.pt", "wb") as f:
            torch.save(model, f)
        with open("model.pt", "rb") as f:
            model = torch.load(f, weights_only=False)
        print(model(data))


        def load_model(path):
            return torch.load(path, weights_only=False)
    """)
    assert "map_location" not in result.output


def test_labels_for_a_cpu_helper_stay_and_the_rest_of_the_batch_moves(tmp_path):
    # Deep-Learning-with-PyTorch-Tutorials lesson05: ``one_hot(y)`` builds ``torch.LongTensor(label)``
    # on the CPU. DM201 moved its result, which then counted as moving ``y``, and ``x`` stayed on the
    # CPU beside the moved model. Also shape 09: ``torch.randn(x.size(0), 4, device=device)`` is no move of ``x``.
    helper = textwrap.dedent("""\
        import torch


        def one_hot(label, depth=3):
            out = torch.zeros(label.size(0), depth)
            idx = torch.LongTensor(label).view(-1, 1)
            out.scatter_(dim=1, index=idx, value=1)
            return out
    """)
    script = textwrap.dedent("""\
        import torch
        from torch import nn
        import torch.nn.functional as F
        from torch.utils.data import DataLoader, TensorDataset
        from utils import one_hot

        loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,))), batch_size=4)
        net = nn.Linear(4, 3)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
        for batch_idx, (x, y) in enumerate(loader):
            noise = torch.randn(x.size(0), 4)
            out = net(x + noise)
            loss = F.mse_loss(out, one_hot(y))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """)
    out = _project({tmp_path / "utils.py": helper, tmp_path / "train.py": script})["train.py"].output
    assert "    x = x.to(device)\n    noise = torch.randn(x.size(0), 4, device=device)" in out
    assert "one_hot(y).to(device)" in out and "y.to(device)" not in out


def test_models_handed_in_a_list_to_a_loop_in_another_file_stay(tmp_path):
    # udacity weight-initialization: ``helpers.compare([(model_a, "default"), ...], loader)`` runs each
    # model on CPU batches in ``helpers.py``. Handed directly, devmod left and reported them; in a
    # list of pairs they moved, and the helper's loop fed them CPU batches.
    helpers = textwrap.dedent("""\
        import torch


        def _evaluate(model, loader):
            total = 0.0
            for data, target in loader:
                total += torch.nn.functional.cross_entropy(model(data), target).item()
            return total


        def compare(model_list, loader):
            for model, label in model_list:
                print(label, _evaluate(model, loader))
    """)
    notebook = textwrap.dedent("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset
        import helpers

        loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
        model_a = nn.Linear(4, 2)
        model_b = nn.Linear(4, 2)
        model_list = [(model_a, "default"), (model_b, "zeros")]
        helpers.compare(model_list, loader)
    """)
    results = _project({tmp_path / "helpers.py": helpers, tmp_path / "run.py": notebook})
    assert results["run.py"].output == notebook
    assert [(f.code, f.line) for f in results["run.py"].findings] == [("DM202", 7), ("DM202", 8)]
    assert "in a list" in results["run.py"].findings[0].message
    # the course's own helper iterates ``enumerate(model_list)``
    enumerated = helpers.replace("for model, label in model_list:", "for i, (model, label) in enumerate(model_list):")
    assert enumerated != helpers
    results = _project({tmp_path / "helpers.py": enumerated, tmp_path / "run.py": notebook})
    assert [(f.code, f.line) for f in results["run.py"].findings] == [("DM202", 7), ("DM202", 8)]


def test_a_second_model_under_the_same_name_moves_with_its_loop_batch():
    # udacity Part 3 cell 30 (second pass): the first ``model``'s group stays (reported); the second
    # ``model`` moved, but its loop's batch did not: the loop asked about every binding of the name.
    source, result = run("""\
        import torch
        from torch import nn, optim
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
        criterion = nn.NLLLoss()

        model = nn.Sequential(nn.Linear(4, 2), nn.LogSoftmax(dim=1))
        images, labels = next(iter(loader))
        images.resize_(4, 4)
        loss = criterion(model(images), labels)

        model = nn.Sequential(nn.Linear(4, 2), nn.LogSoftmax(dim=1))
        optimizer = optim.SGD(model.parameters(), lr=0.01)
        for images, labels in loader:
            optimizer.zero_grad()
            criterion(model(images), labels).backward()
            optimizer.step()
    """)
    out = result.output
    assert out.count(".to(device)") == 3  # the second model, and its loop's images and labels
    assert "    images, labels = images.to(device), labels.to(device)" in out
    assert [f.code for f in result.open_findings] == ["DM202"]


def test_a_value_taken_from_a_batch_by_hand_moves_with_its_model():
    # udacity Parts 4 and 5, Simple_Autoencoder (second pass): ``img = images[0].view(1, 784)`` of
    # ``images, labels = next(dataiter)``, fed to ``model.forward(img)``; the model moved, ``img`` did not.
    source, result = run("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(torch.rand(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
        model = nn.Sequential(nn.Linear(4, 2), nn.LogSoftmax(dim=1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.nll_loss(model(images), labels).backward()
            optimizer.step()

        dataiter = iter(loader)
        images, labels = next(dataiter)
        img = images[0].view(1, 4)
        with torch.no_grad():
            output = model.forward(img)
        print(torch.exp(output).numpy())
    """)
    assert "img = images[0].view(1, 4).to(device)" in result.output
    assert "print(torch.exp(output).cpu().numpy())" in result.output
