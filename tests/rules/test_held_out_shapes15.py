"""Shapes found by the fifteenth held-out trial (LTSF-Linear, pytorch-original-transformer,
pytorch-playground, pytorch-seq2seq, swav; docs/real-repos.md "Fifteenth run"). Each test fails on
the code before its fix."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from all_rules_support import rewrite as run

from codemods.config import Config
from codemods.driver import process_files


def _unfixed(result) -> list[str]:
    return [f.code for f in result.findings if not f.fixed]


def test_a_dev_data_set_is_not_the_device():
    # seq2seq's integration test: ``dev`` is the development data set; devmod wrote ``.to(dev)``.
    _, result = run("""\
        import torch

        dev = ["validation", "examples"]
        net = torch.nn.Linear(4, 2)
        if torch.cuda.is_available():
            net.cuda()
        print(net(torch.randn(3, 4)).shape, len(dev))
    """)
    assert not re.search(r"(\.to\(|device=)dev\)", result.output)
    assert "net.to(device)" in result.output


def test_an_object_with_its_own_cuda_method_keeps_it():
    # seq2seq's losses and LTSF's normalizers are plain objects with a ``cuda()`` that moves their
    # parts: ``meter.to(device)`` raised AttributeError, and the ``.cuda()`` inside was reported.
    source, result = run("""\
        import torch


        class Meter(object):
            def __init__(self):
                self.crit = torch.nn.NLLLoss()
                self.mean = torch.zeros(3)

            def cuda(self):
                self.crit.cuda()
                self.mean = self.mean.cuda()
                return self


        meter = Meter()
        if torch.cuda.is_available():
            meter.cuda()
        print(type(meter).__name__)
    """)
    assert result.output == source and not _unfixed(result)


def test_a_cuda_method_inherited_from_a_project_class_counts(tmp_path: Path):
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "losses.py").write_text(textwrap.dedent("""\
        import torch


        class Loss(object):
            def __init__(self):
                self.crit = torch.nn.NLLLoss()

            def cuda(self):
                self.crit.cuda()


        class Perplexity(Loss):
            pass
    """))
    train = tmp_path / "train.py"
    train.write_text(textwrap.dedent("""\
        import torch
        from losses import Perplexity

        loss = Perplexity()
        if torch.cuda.is_available():
            loss.cuda()
        print(torch.zeros(2))
    """))
    list(process_files([str(train), str(tmp_path / "losses.py")], Config(), "write", jobs=1))
    assert "if torch.cuda.is_available():\n    loss.cuda()\n" in train.read_text()


def test_a_load_in_the_authors_gpu_branch_stays():
    # seq2seq's Checkpoint.load: the CPU branch maps to the CPU already; "cpu" in the GPU branch
    # handed GPU batches a CPU model.
    source, result = run("""\
        import torch


        def restore(path):
            if torch.cuda.is_available():
                model = torch.load(path)
            else:
                model = torch.load(path, map_location=lambda storage, loc: storage)
            return model
    """)
    assert result.output == source


def test_a_tensor_loaded_in_a_program_that_keeps_cuda_per_rank_stays_as_loaded():
    # swav's queue: one process per GPU, ``.cuda()`` everywhere; the loaded queue meets the rank's
    # GPU tensors in ``torch.mm``. A checkpoint handed to ``load_state_dict`` still gets "cpu".
    _, result = run("""\
        import os
        import torch
        import torch.distributed as dist

        dist.init_process_group(backend="nccl")
        torch.cuda.set_device(dist.get_rank())
        model = torch.nn.Linear(8, 4).cuda()
        model.load_state_dict(torch.load("model.pth"))
        queue = None
        if os.path.isfile("queue.pth"):
            queue = torch.load("queue.pth")["queue"]
        if queue is None:
            queue = torch.zeros(16, 4).cuda()
        scores = torch.mm(model(torch.randn(2, 8).cuda()), queue.t())
    """)
    assert 'queue = torch.load("queue.pth")["queue"]\n' in result.output
    assert 'model.load_state_dict(torch.load("model.pth", map_location="cpu"))' in result.output


def test_a_forward_input_tested_for_a_list_gives_no_device():
    # swav's multi-crop ResNet: ``inputs`` is a list of crops; ``.to(inputs.device)`` raised.
    _, result = run("""\
        import torch
        import torch.nn as nn


        class MultiCrop(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, inputs):
                if not isinstance(inputs, list):
                    inputs = [inputs]
                return self.fc(torch.cat(inputs[0:2]).cuda(non_blocking=True))
    """)
    assert "inputs.device" not in result.output


def test_the_main_block_of_an_imported_file_imports_torch_for_its_device(tmp_path: Path):
    # pytorch-playground's cifar/model.py binds only ``nn``: the device defined in its main block
    # raised NameError.
    (tmp_path / "setup.py").write_text("")
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent("""\
        import torch.nn as nn
        from code import interact


        def net():
            return nn.Sequential(nn.Linear(3, 2))


        if __name__ == '__main__':
            model = net()
            interact(local=locals())
    """))
    (tmp_path / "train.py").write_text("import model\n\nnet = model.net()\nprint(net)\n")
    list(process_files([str(model), str(tmp_path / "train.py")], Config(), "write", jobs=1))
    text = model.read_text()
    assert "    import torch\n    device = torch.device(" in text


def test_a_file_that_binds_device_to_a_module_gets_another_name():
    # seq2seq's ``import torch.cuda as device``: an error for correct code made ``--check`` fail.
    _, result = run("""\
        import torch

        if torch.cuda.is_available():
            import torch.cuda as device
        else:
            import torch as device


        def start_tokens(n, sos):
            inputs = torch.LongTensor([sos] * n).view(n, 1)
            if torch.cuda.is_available():
                inputs = inputs.cuda()
            return inputs
    """)
    assert "torch_device = torch.device(" in result.output and "inputs.to(torch_device)" in result.output


def test_batches_of_a_loader_built_with_the_device_are_not_reported():
    # pytorch-original-transformer: torchtext's ``BucketIterator(..., device=device)`` yields batch
    # objects already on the device; DM203 and DM202 reported the correct loop.
    _, result = run("""\
        import torch
        from torch import nn


        class Batch:
            def __init__(self, src):
                self.src = src


        class DeviceIterator:
            def __init__(self, n, device):
                self.n, self.device = n, device

            def __iter__(self):
                for _ in range(self.n):
                    yield Batch(torch.randint(0, 4, (8,), device=self.device))


        def train(model, loader):
            for batch in loader:
                model(nn.functional.one_hot(batch.src, 4).float()).sum().backward()


        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = nn.Linear(4, 4).to(device)
            train(model, DeviceIterator(3, device))
    """)
    assert not _unfixed(result)


def test_a_model_beside_one_the_author_keeps_on_the_cpu_is_not_reported():
    # pytorch-original-transformer's playground: an all-CPU demo, one module built with
    # ``device="cpu"``; the other, sharing its data, was reported as held back.
    _, result = run("""\
        import torch
        from torch import nn


        class Smooth(nn.Module):
            def __init__(self, n, device):
                super().__init__()
                self.n, self.device = n, device

            def forward(self, t):
                return torch.full((t.shape[0], self.n), 0.1, device=self.device).scatter_(1, t, 0.7)


        class OneHot(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.n = n

            def forward(self, t):
                return torch.zeros((t.shape[0], self.n)).scatter_(1, t, 1.0)


        def show():
            smooth = Smooth(4, device="cpu")
            one_hot = OneHot(4)
            target = torch.tensor([[1], [2], [3], [0]])
            print(smooth(target).numpy(), one_hot(target).numpy())


        if __name__ == "__main__":
            show()
    """)
    assert "DM202" not in _unfixed(result)
