"""Shapes found by the nineteenth held-out trial and those the earlier runs left open
(docs/real-repos.md "Nineteenth run"). Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import rewrite as run

from codemods.config import Config
from codemods.driver import process_files


def _unfixed(result) -> list[str]:
    return [f.code for f in result.findings if not f.fixed]


def test_a_hook_on_a_part_compares_its_output_with_a_list_of_references():
    # pretrained-models' ``resnet152_load.py``: hooks on ``net.conv1`` compare each output with
    # ``netoutputs[i]``, loaded with Lua's loader and kept in a list. Moving the model and its input
    # left the references on the CPU beside outputs on the GPU.
    _, result = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.serialization import load_lua


        references = []
        for i in range(2):
            references.append(load_lua("ref%d.t7" % i))

        net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        net[0].register_forward_hook(lambda mod, inp, output: print(torch.dist(output, references[0])))
        x = torch.ones(1, 4)
        y = net(x)
    """)
    assert "device" not in result.output
    assert _unfixed(result) == ["DM202"]
    assert "an element of `references` (line 8)" in result.findings[0].message


def test_a_list_of_references_that_moves_moves_with_its_model():
    # the same shape with references devmod can place: the whole group moves.
    _, result = run("""\
        import torch
        import torch.nn as nn


        references = []
        for i in range(2):
            references.append(torch.ones(4))

        net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        net[1].register_forward_hook(lambda mod, inp, output: print(torch.dist(output, references[0])))
        y = net(torch.ones(1, 4))
    """)
    assert "torch.ones(4, device=device)" in result.output
    assert "torch.ones(1, 4, device=device)" in result.output
    assert _unfixed(result) == []


def test_a_tensor_made_only_for_its_shape_keeps_its_device():
    # thop's counting hooks: ``torch.zeros(size).numel()`` reads only a shape; ``device=y.device``
    # allocated a GPU tensor per call in device-correct library code.
    _, result = run("""\
        import torch


        def count_conv(m, x, y: torch.Tensor):
            kernel_ops = torch.zeros(m.weight.size()[2:]).numel()
            m.total_ops += int(kernel_ops * y.numel())
    """)
    assert result.output == result.source


def test_a_model_output_returned_by_a_function_meets_its_callers_target():
    # practical-pytorch's REINFORCE: ``select`` returns ``policy(state)``; its caller compares the
    # value with ``torch.Tensor([reward])`` through ``mse = nn.MSELoss()``. The policy and its state
    # moved and the legacy target stayed on the CPU.
    _, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn

        policy = nn.Linear(3, 1)
        mse = nn.MSELoss()


        def select(state):
            state = torch.from_numpy(state).float()
            return policy(state)


        loss = 0
        for reward in [1.0, 0.5]:
            value = select(np.zeros(3))
            loss += mse(value, torch.Tensor([reward]))
        loss.backward()
    """)
    assert "policy = nn.Linear(3, 1).to(device)" in result.output
    assert "mse(value, torch.Tensor([reward]).to(device))" in result.output


def test_a_hidden_state_from_a_model_method_in_another_file_moves_with_the_model(tmp_path: Path):
    # practical-pytorch's char-rnn: ``hidden = rnn.init_hidden()`` builds ``torch.zeros(...)`` in
    # the model file (library code, left alone). The model and the input moved; the hidden state
    # stayed on the CPU.
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "model.py").write_text(textwrap.dedent("""\
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x, h):
                return self.fc(x) + h

            def init_hidden(self, rows=1):
                return torch.zeros(rows, 2)
    """))
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        import torch
        from model import Net

        net = Net()
        for step in range(3):
            h = net.init_hidden()
            out = net(torch.randn(1, 4), h)
    """))
    reports = list(process_files([str(script), str(tmp_path / "model.py")], Config(), "diff", jobs=1))
    assert "+    h = net.init_hidden().to(device)" in reports[0].diff
    assert "+net = Net().to(device)" in reports[0].diff
    assert not reports[1].changed


def test_batches_handed_in_by_an_unpacked_call_hold_the_model_back():
    # practical-pytorch's notebooks: ``train(*random_pair())``. The model moved and the pair
    # stayed on the CPU.
    _, result = run("""\
        import torch
        import torch.nn as nn


        def random_pair():
            return torch.zeros(3, 1, 2), torch.zeros(1, 2)


        def train(inp, target):
            out = rnn(inp[0])
            return criterion(out, target)


        rnn = nn.Linear(2, 2)
        criterion = nn.MSELoss()
        for epoch in range(3):
            print(train(*random_pair()))
    """)
    assert "to(device)" not in result.output
    assert _unfixed(result) == ["DM202"]
    assert "`inp` (line 9) is given by `*random_pair()` (line 17)" in result.findings[-1].message


def test_the_input_of_a_model_from_an_unmoved_dict_of_models_stays():
    # pytorch-OpCounter's benchmark: ``for name, model in models.items(): model(x)``; only ``x`` moved.
    _, result = run("""\
        import torch
        import torch.nn as nn

        models = {"a": nn.Linear(4, 2), "b": nn.Sequential(nn.Linear(4, 2))}
        for name, model in models.items():
            x = torch.randn(3, 4)
            print(name, model(x).shape)
    """)
    assert result.output == result.source


def test_a_method_called_before_its_model_moves_takes_no_device_from_its_parameters():
    # practical-pytorch's seq2seq: ``hidden = enc.init_hidden()`` runs before ``enc.cuda()``; the
    # method's ``hidden.cuda()`` became a move to the parameters' device, still the CPU there.
    _, result = run("""\
        import torch
        import torch.nn as nn


        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(4, 4)

            def forward(self, x, hidden):
                return self.gru(x, hidden)

            def init_hidden(self):
                return torch.zeros(1, 1, 4).cuda()


        enc = Encoder()
        hidden = enc.init_hidden()
        x = torch.zeros(3, 1, 4).cuda()
        enc.cuda()
        out, hidden = enc(x, hidden)
    """)
    assert "parameters()" not in result.output
    assert "before it moves the model" in " ".join(f.message for f in result.findings if not f.fixed)


def test_an_accumulator_of_values_brought_to_the_host_stays_there():
    # practical-pytorch's seq2seq ``evaluate``: ``attn[i] += out.cpu().data``; ``attn`` got
    # ``device=device`` and the in-place sum mixed devices.
    _, result = run("""\
        import torch
        import torch.nn as nn

        USE_CUDA = True
        model = nn.Linear(3, 3)
        if USE_CUDA:
            model.cuda()


        def evaluate(n=4):
            x = torch.randn(1, 3)
            if USE_CUDA:
                x = x.cuda()
            attn = torch.zeros(n, 3)
            for i in range(n):
                attn[i] += model(x).squeeze(0).cpu().data
            return attn


        print(evaluate().numpy())
    """)
    assert "torch.zeros(n, 3)\n" in result.output


def test_a_sum_over_a_loader_that_feeds_no_model_stays_on_the_cpu():
    # deep-person-reid's attribute recognition: ``weights += y.sum(0)`` over the loader's CPU
    # batches; ``weights`` got ``device=device``.
    _, result = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.ones(8, 3)), batch_size=4)
        weights = torch.zeros(3)
        for _, y in loader:
            weights += y.sum(0)
        criterion = nn.BCEWithLogitsLoss(weight=weights)
        model = nn.Linear(4, 3).cuda()
        criterion.cuda()
        for x, y in loader:
            criterion(model(x.cuda()), y.cuda()).backward()
    """)
    assert "weights = torch.zeros(3)\n" in result.output


def test_a_loaded_model_run_by_library_code_keeps_its_load(tmp_path: Path):
    # practical-pytorch's char-rnn ``generate.py``: ``decoder = torch.load(path)`` handed to its
    # own ``generate``, which ``train.py`` imports (library code, given no device). The load got
    # ``map_location=device`` and met the CPU input ``generate`` makes.
    (tmp_path / "setup.py").write_text("")
    script = tmp_path / "generate.py"
    script.write_text(textwrap.dedent("""\
        import sys
        import torch


        def generate(decoder, n=3):
            x = torch.zeros(1, 2)
            for _ in range(n):
                x = decoder(x)
            return x


        if __name__ == "__main__":
            decoder = torch.load(sys.argv[1], weights_only=False)
            print(generate(decoder))
    """))
    (tmp_path / "train.py").write_text("import torch\nfrom generate import generate\n\n"
                                       "print(generate(torch.nn.Linear(2, 2)))\n")
    reports = list(process_files([str(script)], Config(), "diff", jobs=1))
    assert not reports[0].changed


def test_a_package_module_with_a_demo_keeps_its_device_in_the_demo(tmp_path: Path):
    # pytorch-OpCounter's ``thop/fx_profile.py``: library code with a ``__main__`` demo; the
    # shared device went to the module's top, between its imports.
    package = tmp_path / "pkg"
    package.mkdir()
    (tmp_path / "setup.py").write_text("")
    (package / "__init__.py").write_text("")
    module = package / "profiler.py"
    module.write_text(textwrap.dedent("""\
        import torch
        import torch.nn as nn


        def count(mod, inp):
            mod(inp)
            return sum(p.numel() for p in mod.parameters())


        if __name__ == "__main__":
            net = nn.Linear(5, 3)
            print(count(net, torch.randn(2, 5)))
    """))
    reports = list(process_files([str(module)], Config(), "diff", jobs=1))
    assert '+    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in reports[0].diff
    assert "+device" not in reports[0].diff


def test_a_gpu_list_set_after_the_authors_own_check_is_no_reason_to_report():
    # deep-person-reid's scripts: ``use_gpu = torch.cuda.is_available()`` comes before
    # ``os.environ["CUDA_VISIBLE_DEVICES"] = ...``; devmod said the file sets the list after the
    # line it could not fix (two false reports). The DataParallel wrap keeps its guard.
    _, result = run("""\
        import os
        import torch
        import torch.nn as nn


        def main(gpus):
            use_gpu = torch.cuda.is_available()
            if use_gpu and gpus:
                os.environ["CUDA_VISIBLE_DEVICES"] = gpus
            model = nn.Linear(4, 2)
            if use_gpu:
                model = nn.DataParallel(model).cuda()
            return model
    """)
    assert _unfixed(result) == []
    assert "    if use_gpu:\n        model = nn.DataParallel(model).to(device)" in result.output


def test_a_batch_run_through_a_model_method_in_a_helper_moves_with_the_model():
    # dlrm's ``tools/visualize.py``: the model moved in the main block, and the helper it is
    # handed to runs ``net.apply_mlp(X, net.bot)`` on the loader's CPU batch.
    _, result = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.bot = nn.Linear(4, 2)

            def apply_mlp(self, x, layer):
                return layer(x)


        def inspect(net, loader):
            for (X,) in loader:
                print(net.apply_mlp(X, net.bot).detach().cpu().numpy())


        if __name__ == "__main__":
            net = Net()
            inspect(net, DataLoader(TensorDataset(torch.randn(3, 4)), batch_size=3))
    """)
    assert "X = X.to(device)" in result.output
    assert "net = Net().to(device)" in result.output


def test_a_nested_batch_the_author_moves_is_not_reported():
    # Found by the regression of the model-method change (barlowtwins): ``model.forward(y1, y2)``
    # now runs the model, and the loop's nested ``((y1, y2), _)`` was reported as unmovable though
    # the author moves both halves.
    _, result = run("""\
        import torch


        def train(model, loader, gpu):
            for step, ((y1, y2), _) in enumerate(loader):
                y1 = y1.cuda(gpu, non_blocking=True)
                y2 = y2.cuda(gpu, non_blocking=True)
                loss = model.forward(y1, y2)
    """)
    assert not [f for f in result.findings if f.code == "DM203"]


def test_the_items_of_a_dataset_that_places_them_are_not_moved_again():
    # Found by the same regression (whisper's LibriSpeech notebook): ``__getitem__`` moves each
    # item to ``self.device``; ``model.decode(mels, options)`` gained ``mels = mels.to(DEVICE)``.
    _, result = run("""\
        import torch

        DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


        class Clips(torch.utils.data.Dataset):
            def __init__(self, device=DEVICE):
                self.device = device

            def __len__(self):
                return 4

            def __getitem__(self, i):
                return torch.zeros(3).to(self.device), "text"


        loader = torch.utils.data.DataLoader(Clips(), batch_size=2)
        model = torch.nn.Linear(3, 3).to(DEVICE)
        for clips, texts in loader:
            print(model.decode(clips, None))
    """)
    assert "clips = clips.to" not in result.output


def test_items_of_an_unknown_iterable_handed_on_with_the_model_hold_it_back(tmp_path: Path):
    # dlrm's ``tools/visualize.py`` as the rerun found it: the model moves in the main block and is
    # handed on through two functions to ``for j, (X, T) in enumerate(data_ld): wrap(net, X, T)``,
    # over loaders another module makes; nothing moved the items.
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "netmod.py").write_text(textwrap.dedent("""\
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.bot = nn.Linear(4, 2)

            def apply_mlp(self, x, layer):
                return layer(x)
    """))
    script = tmp_path / "vis.py"
    script.write_text(textwrap.dedent("""\
        import torch
        import data_utils
        from netmod import Net


        def wrap(net, X, T):
            return net.apply_mlp(X, net.bot)[0].detach().cpu().numpy()


        def analyze(net, train_ld):
            out = []
            for j, (X, T) in enumerate(train_ld):
                out.append(wrap(net, X, T))
            return out


        if __name__ == "__main__":
            net = Net()
            train_ld = data_utils.make_loaders()
            print(analyze(net=net, train_ld=train_ld))
    """))
    reports = list(process_files([str(script)], Config(), "diff", jobs=1))
    assert not reports[0].changed
    assert [f.code for f in reports[0].findings if not f.fixed] == ["DM202"]
    assert "hands its items with the model to `wrap`" in reports[0].findings[-1].message
