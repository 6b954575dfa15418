"""Shapes from the eighth held-out trial (detr, dino, 3D-ResNets, pytorch-transformer,
pytorch-a2c-ppo-acktr-gail, PyTorch-YOLOv3, efficient_densenet_pytorch, LLMs-from-scratch;
docs/real-repos.md). Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap

import pytest

from all_rules_support import rewrite as run

from codemods.engine import transform_source




def test_a_dict_of_outputs_is_no_device_source():
    # detr's matcher: forward(self, outputs, targets) gets the model's output dict; ``outputs.device``
    # raised AttributeError on every machine. Its CPU index tensors are deliberate.
    source, result = run("""\
        import torch
        from torch import nn


        class Matcher(nn.Module):
            @torch.no_grad()
            def forward(self, outputs, targets):
                logits = outputs["logits"].flatten(0, 1)
                order = torch.argsort(logits.sum(-1)).cpu().tolist()
                return torch.as_tensor(order, dtype=torch.int64)
    """)
    assert result.output == source and not result.findings


def test_a_batch_stacked_from_a_tensor_kept_on_the_cpu_moves_with_its_model():
    # LLMs-from-scratch ch03: ``inputs`` stays on the CPU (it fills a CPU buffer and its first
    # model is reported); ``batch`` is ``torch.stack`` of it. The model fed ``batch`` moved alone.
    source, result = run("""\
        import torch
        import torch.nn as nn

        inputs = torch.tensor([[0.4, 0.1], [0.5, 0.8]])
        anchor = inputs[1]
        scores = torch.empty(inputs.shape[0])
        for i, row in enumerate(inputs):
            scores[i] = torch.dot(row, anchor)
        print(scores)

        first = nn.Linear(2, 2)
        print(first(inputs))
        batch = torch.stack((inputs, inputs), dim=0)
        head = nn.Linear(2, 2)
        print(head(batch))
    """)
    out = result.output
    assert "inputs = torch.tensor([[0.4, 0.1], [0.5, 0.8]])\n" in out  # kept on the CPU
    assert "head = nn.Linear(2, 2).to(device)" in out
    assert "batch = torch.stack((inputs, inputs), dim=0).to(device)" in out  # moved with it


def test_a_tensor_handed_to_the_files_own_plotting_function_stays_on_the_cpu():
    # LLMs-from-scratch gpt_train.py: ``torch.linspace`` of epochs handed to ``plot_losses``, which
    # gives it to ``ax.plot`` (NumPy inside): on a GPU it failed after the whole training run.
    source, result = run("""\
        import matplotlib.pyplot as plt
        import torch


        def show(xs, ys):
            fig, ax = plt.subplots()
            ax.plot(xs, ys)
            fig.savefig("curve.png")


        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = torch.nn.Linear(2, 1).to(device)
            values = [model(torch.ones(1, 2, device=device)).item() for _ in range(3)]
            show(torch.linspace(0, 1, len(values)), values)
    """)
    assert result.output == source and not result.findings


def test_the_state_of_a_policy_loaded_onto_the_cpu_stays_with_it():
    # pytorch-a2c-ppo-acktr-gail enjoy.py: the policy is loaded with map_location="cpu" on purpose;
    # its hidden state, masks and observations were moved without it.
    source, result = run("""\
        import numpy as np
        import torch

        policy = torch.load("policy.pt", map_location="cpu", weights_only=False)
        hidden = torch.zeros(1, policy.hidden_size)
        masks = torch.zeros(1, 1)
        obs = torch.from_numpy(np.zeros((1, 4), dtype="float32"))
        for step in range(3):
            action, hidden = policy.act(obs, hidden, masks)
    """)
    assert result.output == source and not result.findings


def test_the_input_of_a_model_that_devmod_loads_onto_the_device_moves_with_it():
    # ``torch.load`` of a whole model gets ``map_location=device`` (DM302); its input stayed behind.
    source, result = run("""\
        import torch

        model = torch.load("model.pt")
        x = torch.randn(1, 4)
        print(model(x))
    """)
    assert 'model = torch.load("model.pt", map_location=device)' in result.output
    assert "x = torch.randn(1, 4, device=device)" in result.output


def test_cuda_after_a_project_helper_set_the_ranks_device_is_not_reported(tmp_path):
    # dino and detr: ``utils.init_distributed_mode`` calls ``torch.cuda.set_device(gpu)``; after it,
    # ``.cuda()`` and ``"cuda"`` are the rank's own GPU. 22 reports said "use the rank's device".
    from codemods.analysis.project import ProjectIndex

    helper = textwrap.dedent("""\
        import torch
        import torch.distributed as dist


        def init_distributed_mode(args):
            dist.init_process_group("nccl")
            torch.cuda.set_device(args.gpu)


        class Meter:
            def sync(self, count):
                t = torch.tensor([count], dtype=torch.float64, device="cuda")
                dist.all_reduce(t)
    """)
    script = textwrap.dedent("""\
        import torch
        import torch.distributed as dist
        import utils


        def main(args):
            utils.init_distributed_mode(args)
            model = torch.nn.Linear(2, 2).cuda()
            t = torch.zeros(2, device="cuda")
            dist.all_reduce(t)
    """)
    lone = script.replace("    utils.init_distributed_mode(args)\n", "    dist.init_process_group('nccl')\n")
    # the helper only after the first ``.cuda()``: that one still runs on GPU 0 in every rank
    early = script.replace("    utils.init_distributed_mode(args)\n    model = torch.nn.Linear(2, 2).cuda()\n",
                           "    model = torch.nn.Linear(2, 2).cuda()\n    utils.init_distributed_mode(args)\n")
    assert early != script
    files = {tmp_path / "utils.py": helper, tmp_path / "train.py": script, tmp_path / "lone.py": lone,
             tmp_path / "early.py": early}
    index = ProjectIndex.build([(str(path), text) for path, text in files.items()])
    for path, text in files.items():
        result = transform_source(text, str(path), role=index.role_for(str(path)))
        assert result.output == text
        if path.name == "lone.py":  # no set_device anywhere: every rank would use GPU 0, a true report
            assert {f.code for f in result.findings} == {"DM102", "DM103"}
        elif path.name == "early.py":
            assert [(f.code, f.line) for f in result.findings] == [("DM103", 7)]
        else:
            assert not result.findings, path.name


def test_cuda_under_an_is_cuda_test_in_library_code_stays(tmp_path):
    # pytorch-a2c-ppo-acktr-gail kfac.py: ``if is_cuda: a = a.cuda()`` in a library module got a
    # module-level global device of its own.
    from codemods.analysis.project import ProjectIndex

    library = textwrap.dedent("""\
        import torch


        def ones_like_rows(a):
            is_cuda = a.is_cuda
            a = torch.ones(a.size(0), 1)
            if is_cuda:
                a = a.cuda()
            return a
    """)
    script = "import torch\nfrom stats import ones_like_rows\n\nif __name__ == '__main__':\n" \
             "    print(ones_like_rows(torch.randn(4, 2)))\n"
    files = {tmp_path / "stats.py": library, tmp_path / "run.py": script}
    index = ProjectIndex.build([(str(path), text) for path, text in files.items()])
    result = transform_source(library, str(tmp_path / "stats.py"), role=index.role_for(str(tmp_path / "stats.py")))
    assert result.output == library and not result.findings


def test_a_cuda_tensor_type_under_an_is_cuda_test_is_not_reported():
    # dino utils.PCA: ``torch.cuda.FloatTensor(self.mean)`` runs only for a CUDA input.
    source, result = run("""\
        import torch


        class Centre:
            def __init__(self, mean):
                self.mean = mean

            def apply(self, x):
                if x.is_cuda:
                    return x - torch.cuda.FloatTensor(self.mean)
                return x - torch.FloatTensor(self.mean)
    """)
    assert result.output == source and not result.findings


def test_a_permutation_that_splits_a_dataset_stays_on_the_cpu():
    # efficient_densenet_pytorch demo.py: ``torch.randperm`` indices for ``Subset``; on the device,
    # every sample fetch would index with a CUDA tensor (and forked workers cannot touch CUDA).
    source, result = run("""\
        import torch
        from torch.utils.data import DataLoader, Subset, TensorDataset

        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            data = TensorDataset(torch.arange(20.0).view(10, 2), torch.arange(10))
            order = torch.randperm(len(data))
            train = Subset(data, order[:8])
            model = torch.nn.Linear(2, 3).to(device)
            for x, y in DataLoader(train, batch_size=4, num_workers=2):
                print(model(x.to(device)).shape, y)
    """)
    assert "order = torch.randperm(len(data))\n" in result.output


def test_a_mask_filled_element_by_element_on_the_host_and_moved_at_the_end_stays_there():
    # dino eval_video_segmentation.py: the mask is built on the CPU with one write per element and
    # moved once at the end; ``device=`` on the factory made every write a CUDA launch.
    source, result = run("""\
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        def band(n):
            mask = torch.zeros(n, n)
            for i in range(n):
                for j in range(max(0, i - 1), min(n, i + 2)):
                    mask[i, j] = 1
            mask = mask.reshape(n * n)
            return mask.to(device, non_blocking=True)


        if __name__ == "__main__":
            print(band(4).sum())
    """)
    assert "mask = torch.zeros(n, n)\n" in result.output


def test_a_repeated_device_in_a_branch_of_the_authors_choice_stays():
    # LLMs-from-scratch ch05.ipynb: ``if cuda: device = ... elif mps: ...``; dropping the repeated
    # definition left ``pass`` in the middle of the chain.
    source, result = run("""\
        import torch

        device = torch.device("cuda")
        x = torch.zeros(2, device=device)

        if torch.cuda.is_available():
            device = torch.device("cuda")
        elif torch.backends.mps.is_available():
            device = torch.device("mps")
        else:
            device = torch.device("cpu")
        print(x.to(device))
    """)
    assert result.output == source


def test_rows_a_collate_function_stacks_and_moves_at_the_end_stay_as_written():
    # LLMs-from-scratch ch07: each row is built on the host, the stacked batch moved once.
    source, result = run("""\
        import torch


        def collate(batch, pad=0, device="cpu"):
            longest = max(len(item) for item in batch)
            rows = []
            for item in batch:
                row = torch.tensor(item + [pad] * (longest - len(item)))
                rows.append(row)
            return torch.stack(rows).to(device)


        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            print(collate([[1, 2], [3]], device=device))
    """)
    assert result.output == source


def test_a_forward_input_iterated_row_by_row_is_still_the_device_source():
    # A second-pass probe: ``for row in x`` reads a tensor's rows; x stays the device source.
    source, result = run("""\
        import torch
        from torch import nn


        class Pool(nn.Module):
            def forward(self, x):
                outs = [row.sum(0) for row in x]
                for row in x:
                    outs.append(row.mean(0))
                w = torch.ones(len(outs))
                return torch.stack(outs) * w[:, None]
    """)
    assert "w = torch.ones(len(outs), device=x.device)" in result.output


def test_a_constant_scalar_tensor_read_as_an_operand_stays():
    # LLMs-from-scratch's GELU: ``torch.sqrt(torch.tensor(2.0 / torch.pi)) * (...)`` works with a
    # CUDA ``x`` as it is (a CPU scalar tensor is a valid input of a CUDA operation).
    source, result = run("""\
        import torch
        from torch import nn


        class GELU(nn.Module):
            def forward(self, x):
                return 0.5 * x * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) * x))


        class Scale(nn.Module):
            def forward(self, x):
                return torch.cat([x, torch.tensor(1.0).expand(1)])
    """)
    assert "torch.sqrt(torch.tensor(2.0 / torch.pi)) * x" in result.output
    assert "torch.tensor(1.0, device=x.device).expand(1)" in result.output  # expanded: no longer a scalar


@pytest.mark.parametrize("rebound", [False, True])
def test_a_batch_taken_with_next_moves_with_its_model(rebound):
    # LLMs-from-scratch ch02: ``inputs, targets = next(data_iter)`` fed an embedding that moved alone;
    # in the second pass, with ``data_iter`` bound twice.
    again = ("        batches = iter(DataLoader(TensorDataset(ids, ids), batch_size=4))\n"
             "        inputs, targets = next(batches)\n")
    source, result = run("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        ids = torch.randint(0, 50, (16, 4))
        batches = iter(DataLoader(TensorDataset(ids, ids), batch_size=8))
        inputs, targets = next(batches)
        embed = torch.nn.Embedding(50, 8)
""" + (again if rebound else "") + "        print(embed(inputs).shape)\n")
    out = result.output
    assert "embed = torch.nn.Embedding(50, 8).to(device)" in out
    assert "inputs, targets = next(batches)\ninputs, targets = inputs.to(device), targets.to(device)\n" \
        + ("print(embed" if rebound else "embed =") in out


def test_the_state_of_a_policy_unpacked_from_a_cpu_checkpoint_stays_with_it():
    # Second pass, a2c enjoy.py: ``policy, stats = torch.load(path, map_location="cpu")``.
    source, result = run("""\
        import torch

        policy, stats = torch.load("policy.pt", map_location="cpu", weights_only=False)
        hidden = torch.zeros(1, policy.hidden_size)
        masks = torch.zeros(1, 1)
        action, hidden = policy.act(torch.zeros(1, 4), hidden, masks)
    """)
    assert result.output == source and not result.findings
