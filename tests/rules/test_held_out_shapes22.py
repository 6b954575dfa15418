"""Shapes found by the twenty-second held-out trial (docs/real-repos.md "Twenty-second run"). Each
test fails on the code before its fix (3b1a30a)."""

from __future__ import annotations

from pathlib import Path

from all_rules_support import rewrite as run

from codemods.config import Config
from codemods.driver import process_files


def test_a_forward_input_unpacked_as_a_tuple_gives_no_device():
    # WaveGlow's ``forward(self, forward_input)`` unpacks ``audio, spect = forward_input``; devmod wrote
    # ``.to(forward_input.device)``, and a tuple has no ``.device`` (every forward raised).
    _, result = run("""\
        import torch
        import torch.nn as nn


        class Coupler(nn.Module):
            def __init__(self, width=4):
                super().__init__()
                self.width = width
                self.pre = nn.Conv1d(2, 8, 1)

            def forward(self, pair):
                signal, context = pair
                width_t = torch.IntTensor([self.width])
                return self.pre(signal) * width_t.float()
    """)
    assert "pair.device" not in result.output


def test_a_model_given_new_weights_later_keeps_its_input_and_its_weights_on_the_cpu():
    # Conv-TasNet's ``test/learn_conv1d.py``: ``conv1d.weight.data = torch.randint(...)`` after it is
    # built. DM202 reports the model and moves nothing, but DM201 put the new weights on the device.
    _, result = run("""\
        import torch

        layer = torch.nn.Linear(4, 3, bias=False)
        feats = torch.randn(2, 4)
        layer.weight.data = torch.randn(layer.weight.size())
        print(layer(feats).shape)
    """)
    assert result.output == result.source
    assert [f.code for f in result.findings] == ["DM202"]


def test_a_second_model_fed_the_same_input_stays_with_the_held_back_one():
    # The same file's shape with a second model: ``signal`` meets the held-back ``front`` and ``back``;
    # devmod moved ``back`` and ``signal``, and ``front(signal)`` failed.
    _, result = run("""\
        import torch

        front = torch.nn.Linear(4, 4)
        back = torch.nn.Linear(4, 2)
        signal = torch.randn(3, 4)
        front.weight.data = torch.randn(front.weight.size())
        print(front(signal).shape, back(signal).shape)
    """)
    assert result.output == result.source
    assert sorted(f.message.split("`")[1] for f in result.findings) == ["back", "front"]


def test_a_model_fed_the_output_of_a_held_back_model_stays_too():
    # Conv-TasNet's demo: ``mixture_w = encoder(mixture)`` with ``encoder`` held back, then
    # ``decoder(mixture_w, est_mask)``: devmod moved ``decoder`` and ``est_mask`` only.
    _, result = run("""\
        import torch

        encoder = torch.nn.Linear(4, 4)
        encoder.weight.data = torch.randn(encoder.weight.size())
        mixture = torch.randn(2, 4)
        feats = encoder(mixture)
        decoder = torch.nn.Bilinear(4, 4, 2)
        mask = torch.randn(2, 4)
        print(decoder(feats, mask).shape)
    """)
    assert result.output == result.source
    assert {f.message.split("`")[1] for f in result.findings} == {"encoder", "decoder"}


def test_a_batch_from_a_plain_class_of_the_file_moves_with_the_model():
    # pytorch-normalizing-flows' notebook: ``d = DatasetMoons()`` whose ``sample(n)`` returns
    # ``torch.from_numpy(...)``; the model moved and ``x = d.sample(128)`` stayed on the CPU.
    _, result = run("""\
        import numpy as np
        import torch
        from torch import nn


        class Points:
            def draw(self, n):
                return torch.from_numpy(np.random.randn(n, 2).astype(np.float32))


        class Shift(nn.Module):
            def __init__(self):
                super().__init__()
                self.b = nn.Parameter(torch.zeros(2))

            def forward(self, x):
                return x + self.b


        points = Points()
        net = Shift()
        for step in range(3):
            batch = points.draw(8)
            print(net(batch).sum().item())
    """)
    assert "net = Shift().to(device)" in result.output
    assert "batch = points.draw(8).to(device)" in result.output


def test_a_tensor_attribute_unpacked_from_a_torch_function_becomes_a_buffer():
    # The same repository's Glow 1x1 convolution: ``P, L, U = torch.lu_unpack(...)`` then ``self.P = P``,
    # a plain tensor attribute that stayed on the CPU when the model moved.
    _, result = run("""\
        import torch
        from torch import nn


        class Mixer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                perm, low, up = torch.lu_unpack(*torch.linalg.lu_factor(torch.randn(dim, dim)))
                self.perm = perm
                self.low = nn.Parameter(low)

            def forward(self, x):
                return x @ (self.perm @ self.low)
    """)
    assert 'self.register_buffer("perm", perm, persistent=False)' in result.output


def test_a_sample_of_a_models_distribution_is_copied_to_the_cpu_for_matplotlib():
    # The notebook's ``p = model.prior.sample([128, 2]).squeeze()`` then ``plt.scatter(p[:, 0], ...)``:
    # the prior moved with the model, so the sample is on the GPU.
    _, result = run("""\
        import matplotlib.pyplot as plt
        import torch
        from torch import nn
        from torch.distributions import Normal


        class Flow(nn.Module):
            def __init__(self, prior):
                super().__init__()
                self.prior = prior
                self.b = nn.Parameter(torch.zeros(2))

            def forward(self, x):
                return self.prior.log_prob(x + self.b).sum()


        model = Flow(Normal(torch.zeros(2), torch.ones(2)))
        print(model(torch.randn(8, 2)).item())
        p = model.prior.sample([16]).squeeze()
        plt.scatter(p[:, 0], p[:, 1])
    """)
    assert "plt.scatter(p[:, 0].cpu(), p[:, 1].cpu())" in result.output


def test_a_flows_backward_takes_the_device_of_the_input_it_hands_to_its_layers():
    # The flows' ``backward(self, z)`` (an inverse pass, not autograd's): ``z`` goes to the model's own
    # layers, so ``torch.zeros(n)`` there belongs on ``z.device``; it was left on the CPU.
    _, result = run("""\
        import torch
        from torch import nn


        class Coupling(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.f = nn.Linear(dim // 2, dim // 2)

            def backward(self, z):
                log_det = torch.zeros(z.shape[0])
                lower, upper = z[:, :1], z[:, 1:]
                return torch.cat([lower, self.f(upper)], 1), log_det


        class Chain(nn.Module):
            def __init__(self, flows):
                super().__init__()
                self.flows = nn.ModuleList(flows)

            def backward(self, z):
                m, _ = z.shape
                log_det = torch.zeros(m)
                for flow in self.flows[::-1]:
                    z, ld = flow.backward(z)
                    log_det += ld
                return z, log_det
    """)
    assert result.output.count("device=z.device") == 2


def test_a_whole_model_moved_as_it_is_loaded_gets_a_map_location(tmp_path: Path):
    # The transformer tutorial's ``translate.py`` (imported by ``eval.py``): ``checkpoint = torch.load(f)``
    # then ``model = checkpoint["model"].to(device)``; a GPU checkpoint failed to load on a CPU machine.
    (tmp_path / "translate.py").write_text(
        "import torch\n\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
        "checkpoint = torch.load('ckpt.pth.tar')\nmodel = checkpoint['model'].to(device)\nmodel.eval()\n\n\n"
        "def translate(x):\n    return model(x.to(device))\n")
    (tmp_path / "evaluate.py").write_text("import torch\nfrom translate import translate\n\nprint(translate(torch.ones(2)))\n")
    reports = list(process_files([str(tmp_path / "translate.py"), str(tmp_path / "evaluate.py")], Config(), "diff", jobs=1))
    assert "+checkpoint = torch.load('ckpt.pth.tar', map_location=\"cpu\")" in reports[0].diff


def test_a_parameter_rebound_as_a_tensor_gives_no_device():
    # Guards the fix above (RL-Adventure's ``act(self, state)``, caught by the regression): ``state`` is an
    # observation turned into a tensor in the body, then handed to ``self.forward``; it has no device.
    _, result = run("""\
        import numpy as np
        import torch
        from torch import nn


        class Q(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x)

            def act(self, state):
                state = torch.FloatTensor(np.float32(state)).unsqueeze(0)
                return self.forward(state).argmax(1)
    """)
    assert "state.device" not in result.output


def test_a_cuda_string_above_the_torch_import_is_reported_not_converted():
    # Twenty-third run: adversarial-attacks-pytorch's demo notebook sets ``device = "cuda"`` in its first cell
    # and imports torch two cells later; ``torch.device(...)`` there stopped "Run all" with a NameError.
    _, result = run("""\
        import math

        scale = math.sqrt(4.0)
        device = "cuda"

        import torch

        net = torch.nn.Linear(3, 2).to(device)
        print(net(torch.randn(5, 3).to(device)) * scale)
    """)
    assert result.output == result.source
    assert [f.code for f in result.findings] == ["DM102"] and "imported only below" in result.findings[0].message


def test_a_functions_own_device_is_used_where_no_module_level_device_can_go():
    # Twenty-third run: pytorch-msssim's training script sets ``CUDA_VISIBLE_DEVICES`` in ``main`` and then its
    # own ``device``; ``torch.load(ckpt)`` below it was reported ("`device` cannot be defined above this line")
    # instead of getting ``map_location=device``.
    _, result = run("""\
        import os
        import torch
        import torch.nn as nn


        def main(ckpt, gpu_id="0"):
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu_id
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = nn.Linear(4, 2).to(device)
            net.load_state_dict(torch.load(ckpt))
            print(net(torch.randn(3, 4).to(device)).sum().item())


        if __name__ == "__main__":
            main("net.pt")
    """)
    assert "torch.load(ckpt, map_location=device)" in result.output
    assert result.findings and all(f.fixed for f in result.findings)


def test_a_legacy_tensor_filled_in_place_moves_with_its_model_after_the_fill():
    # Twenty-third run: transformer-xl's sampler demo, ``ids = torch.LongTensor(3, 4).random_(0, 50)`` fed to an
    # embedding devmod moved; the ids stayed on the CPU. They move after the fill (the same random numbers).
    _, result = run("""\
        import torch
        from torch import nn

        if __name__ == '__main__':
            ids = torch.LongTensor(3, 4).random_(0, 50)
            table = nn.Embedding(50, 8)
            print(table(ids).sum().item())
    """)
    assert "ids = torch.LongTensor(3, 4).random_(0, 50).to(device)" in result.output
    assert "table = nn.Embedding(50, 8).to(device)" in result.output


def test_host_tensors_handed_to_a_function_with_the_model_move_with_it():
    # The same demo's real shape: ``pick_scores(table, offsets, ids, feats)``, a function of the file that runs
    # the model on the tensors handed to it beside the model; only the model moved.
    _, result = run("""\
        import torch
        from torch import nn


        def pick_scores(table, ids, feats):
            return (table(ids) * feats).sum(-1)


        if __name__ == '__main__':
            ids = torch.LongTensor(3, 4).random_(0, 50)
            table = nn.Embedding(50, 8)
            feats = torch.Tensor(3, 4, 8).normal_()
            print(pick_scores(table, ids, feats).sum().item())
    """)
    assert "feats = torch.Tensor(3, 4, 8).normal_().to(device)" in result.output
    assert "ids = torch.LongTensor(3, 4).random_(0, 50).to(device)" in result.output


def test_the_cuda_calls_of_a_cuda_stream_prefetcher_are_not_reported():
    # Twenty-third run: gen-efficientnet-pytorch's prefetching loader (library code) runs its copies on a side
    # CUDA stream and is used only when the program asked for a GPU; its four ``.cuda()`` were reported.
    _, result = run("""\
        import torch


        class GpuFeeder:
            def __init__(self, batches):
                self.batches = batches
                self.center = torch.tensor([0.5, 0.5, 0.5]).cuda().view(1, 3, 1, 1)

            def __iter__(self):
                side = torch.cuda.Stream()
                for images, labels in self.batches:
                    with torch.cuda.stream(side):
                        images = images.cuda(non_blocking=True).float().sub_(self.center)
                        labels = labels.cuda(non_blocking=True)
                    torch.cuda.current_stream().wait_stream(side)
                    yield images, labels
    """)
    assert result.output == result.source and result.findings == []


def test_a_whole_model_loaded_and_moved_a_line_later_gets_a_map_location():
    # Twenty-third run: transformer-xl's ``eval.py`` (its device from ``--cuda``): ``model = torch.load(f)``,
    # ``model.backward_compatible()``, then ``model = model.to(device)``; no map location, so a GPU-saved model
    # failed to load on a machine without one.
    _, result = run("""\
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", action="store_true")
        args = parser.parse_args()
        device = torch.device("cuda" if args.cuda else "cpu")
        with open("model.pt", "rb") as f:
            model = torch.load(f)
        model.backward_compatible()
        model = model.to(device)
        model.eval()
        print(model(torch.ones(2, 3, device=device)))
    """)
    assert 'model = torch.load(f, map_location="cpu")' in result.output


def test_a_torch_function_of_cpu_tensors_gets_no_cpu_copy():
    # Twenty-third run, a harmless hunk on device-correct code: torchattacks' demo ``img = make_grid(x.cpu().data)``
    # then ``img.numpy()`` got ``.cpu()``; a torch(vision) function of CPU tensors gives a CPU tensor.
    _, result = run("""\
        import matplotlib.pyplot as plt
        import torch
        import torchvision

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net = torch.nn.Linear(4, 4).to(device)
        x = net(torch.randn(2, 4, device=device))
        img = torchvision.utils.make_grid(x.cpu().data)
        plt.imshow(img.numpy())
        print(torch.sigmoid(x.cpu()).numpy())


        def imshow(img, title):
            img = torchvision.utils.make_grid(img.cpu().data, normalize=True)
            plt.imshow(img.numpy())
            plt.title(title)
    """)
    assert result.output == result.source


def test_a_model_built_on_an_explicit_cpu_device_stays_there():
    # Twenty-fourth run: pytorch_GAN_zoo's ``save_feature_extractor.py`` builds ``LossTexture(torch.device("cpu"),
    # ...)`` only to save it; devmod moved it to the GPU (the saved file then needs one to load).
    _, result = run("""\
        import sys
        import torch
        import torch.nn as nn


        class Extractor(nn.Module):
            def __init__(self, place, width):
                super().__init__()
                self.body = nn.Linear(width, width).to(place)

            def forward(self, x):
                return self.body(x)


        if __name__ == "__main__":
            net = Extractor(torch.device("cpu"), 4)
            print(net(torch.ones(1, 4)))
            torch.save({"net": net}, sys.argv[1])
    """)
    assert result.output == result.source and result.findings == []


def test_a_batch_unpacked_and_moved_in_two_places_is_not_reported():
    # Twenty-fourth run: GAN_zoo's ``nn_score.py`` unpacks ``pair`` at the top of the loop and again in a nested
    # validation loop (whose own variable is unused), moving both parts each time: two false DM203 reports.
    _, result = run("""\
        import torch
        import torch.nn as nn


        def fit(train_set, val_set):
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = nn.Linear(3, 2).to(device)
            for step, pair in enumerate(torch.utils.data.DataLoader(train_set, batch_size=4)):
                xs, ys = pair
                xs, ys = xs.to(device), ys.to(device)
                nn.functional.cross_entropy(net(xs), ys).backward()
                if step % 10 == 0:
                    for unused in torch.utils.data.DataLoader(val_set, batch_size=4):
                        xs, ys = pair
                        xs, ys = xs.to(device), ys.to(device)
                        print(nn.functional.cross_entropy(net(xs), ys).item())
    """)
    assert result.findings == []


def test_a_batch_fed_only_to_data_parallel_is_not_reported():
    # Twenty-fourth run: GAN_zoo's feature extraction unpacks its batch in two branches and hands it only to an
    # ``nn.DataParallel`` wrapper, which scatters CPU inputs to its GPUs itself: a false DM203 report.
    _, result = run("""\
        import torch
        import torch.nn as nn


        def embed_all(net, data):
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            wrapped = nn.DataParallel(net).to(device).eval()
            feats = []
            for item in torch.utils.data.DataLoader(data, batch_size=4):
                if len(item) == 3:
                    xs, ys, extra = item
                else:
                    xs, ys = item
                feats.append(wrapped(xs).detach().cpu())
            return torch.cat(feats)
    """)
    assert result.findings == []


def test_a_model_moved_by_a_helper_named_for_it_is_placed(tmp_path: Path):
    # Twenty-fourth run: PyTorch-RL moves its nets with its own ``to_device(device, policy_net, value_net)``;
    # devmod did not see the move and reported the models (handed to another file's loop) as left behind.
    (tmp_path / "helpers.py").write_text("def send_all(dev, *things):\n    return [t.to(dev) for t in things]\n")
    (tmp_path / "stepper.py").write_text(
        "def fit_step(net, opt, xs, ys):\n    loss = (net(xs) - ys).pow(2).mean()\n    opt.zero_grad()\n"
        "    loss.backward()\n    opt.step()\n")
    (tmp_path / "run.py").write_text(
        "import numpy as np\nimport torch\nimport torch.nn as nn\nfrom helpers import send_all\nfrom stepper import fit_step\n\n"
        "dev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nnet = nn.Linear(4, 1)\nsend_all(dev, net)\n"
        "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "xs = torch.from_numpy(np.random.randn(8, 4)).float().to(dev)\n"
        "ys = torch.from_numpy(np.random.randn(8, 1)).float().to(dev)\nfit_step(net, opt, xs, ys)\n")
    reports = list(process_files([str(tmp_path / n) for n in ("run.py", "helpers.py", "stepper.py")], Config(),
                                 "diff", jobs=1))
    assert not any(r.changed or r.findings for r in reports)


def test_modules_of_a_plain_list_registered_parameter_by_parameter_are_not_reported():
    # Twenty-fourth run: pytorch_RVAE's highway keeps its layers in a plain list and registers each of their
    # parameters with ``register_parameter``; ``.to()`` reaches them. The DM305 report (and its unsafe fix,
    # which would rename every state_dict key) was false.
    _, result = run("""\
        import torch
        import torch.nn as nn


        class GatedStack(nn.Module):
            def __init__(self, width, depth):
                super().__init__()
                self.depth = depth
                self.blocks = [nn.Linear(width, width) for _ in range(depth)]
                for k, block in enumerate(self.blocks):
                    for j, p in enumerate(block.parameters()):
                        self.register_parameter("block_{}_{}".format(k, j), p)

            def forward(self, x):
                for k in range(self.depth):
                    x = torch.relu(self.blocks[k](x))
                return x
    """)
    assert result.findings == []


def test_a_buffer_made_once_per_gpu_is_not_reported():
    # Twenty-fourth run: mixup-cifar10's efficient DenseNet makes one shared buffer on each GPU
    # (``for i in range(torch.cuda.device_count()): with torch.cuda.device(i): ... .cuda()``): GPU-only by design.
    _, result = run("""\
        import torch


        def make_buffers(numel=256):
            buffers = []
            for gpu in range(torch.cuda.device_count()):
                with torch.cuda.device(gpu):
                    buffers.append(torch.empty(numel).cuda())
            return buffers
    """)
    assert result.output == result.source and result.findings == []


def test_a_list_of_ids_whose_items_go_into_a_set_gives_no_device():
    # Twenty-fifth run: graphsage's aggregator ``forward(self, nodes, to_neighs)`` takes a Python list of node
    # ids (``set([nodes[i]])``); devmod wrote ``.to(nodes.device)``, an AttributeError on every call.
    _, result = run("""\
        import torch
        import torch.nn as nn


        class NeighbourMean(nn.Module):
            def __init__(self, table):
                super().__init__()
                self.table = table

            def forward(self, ids, neighbours):
                groups = [set(ns) | set([ids[k]]) for k, ns in enumerate(neighbours)]
                uniq = sorted(set.union(*groups))
                return self.table(torch.LongTensor(uniq)).mean(0)
    """)
    assert "ids.device" not in result.output


def test_a_model_whose_forward_makes_tensors_devmod_cannot_place_stays_with_its_data():
    # The same shape run by the file's demo: moving the model would leave ``torch.LongTensor(uniq)`` of its
    # forward on the CPU; the model and its data stay, reported.
    _, result = run("""\
        import torch
        import torch.nn as nn


        class NeighbourMean(nn.Module):
            def __init__(self, table):
                super().__init__()
                self.table = table

            def forward(self, ids, neighbours):
                groups = [set(ns) | {ids[k]} for k, ns in enumerate(neighbours)]
                uniq = sorted(set.union(*groups))
                return self.table(torch.LongTensor(uniq)).mean(0)


        if __name__ == "__main__":
            agg = NeighbourMean(nn.Embedding(10, 4))
            print(agg([1, 2], [{4, 5}, {6}]).shape)
    """)
    assert result.output == result.source
    assert [f.code for f in result.findings] == ["DM202"] and "NeighbourMean" in result.findings[0].message


def test_a_new_layer_the_author_moves_behind_a_switch_is_not_moved_where_it_is_built():
    # Twenty-fifth run: pytorch-pruning's ``prune_vgg16_conv_layer(model, ..., use_cuda=False)`` builds new layers
    # and moves them only ``if use_cuda:``; devmod added ``.to(device)`` where they are built, so a GPU machine
    # mixed devices in a model the caller keeps on the CPU.
    _, result = run("""\
        import torch


        def shrink_first(net, keep, use_gpu=False):
            net[2] = torch.nn.Linear(keep, net[2].out_features)
            if use_gpu:
                net[2] = net[2].cuda()
            return net


        if __name__ == '__main__':
            net = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(8, 2))
            net = shrink_first(net, 5)
            print(net(torch.randn(3, 4)).shape)
    """)
    assert "torch.nn.Linear(keep, net[2].out_features)\n" in result.output


def test_ids_handed_to_a_function_with_their_model_do_not_hold_the_group_back():
    # Twenty-fifth run: outlier-exposure's demo (a CPU demo) reported its embedding as held back because the ids
    # are also handed, with the embedding, to a function of the file; they meet there, so both move.
    _, result = run("""\
        import numpy as np
        import torch


        def scaled_lookup(table, ids, factor=0.5):
            return torch.nn.functional.embedding(ids, table.weight * factor)


        if __name__ == '__main__':
            table = torch.nn.Embedding(20, 3)
            ids = torch.LongTensor(np.random.randint(0, 20, size=(2, 5)))
            print(table(ids).shape, scaled_lookup(table, ids).shape)
    """)
    assert not [f for f in result.findings if not f.fixed]
    assert "table = torch.nn.Embedding(20, 3).to(device)" in result.output


def test_a_cuda_call_in_a_parameter_default_is_reported_not_given_a_parameters_device(tmp_path: Path):
    # Twenty-sixth run: pytorch-pose's ``def color_normalize(x, mean=torch.Tensor([...]).cuda(), ...)`` became
    # ``.to(x.device)``; a default runs when the function is defined, so importing the package raised NameError.
    (tmp_path / "overlay.py").write_text(
        "import torch\n\n\ndef shade(frames, offset=torch.Tensor([0.1, 0.2, 0.3]).cuda()):\n"
        "    return frames[:frames.size(0)] + offset.view(3, 1, 1)\n")
    (tmp_path / "run.py").write_text(
        "import torch\nfrom overlay import shade\n\nprint(shade(torch.rand(3, 2, 2)).shape)\n")
    reports = list(process_files([str(tmp_path / "overlay.py"), str(tmp_path / "run.py")], Config(), "diff", jobs=1))
    assert not reports[0].changed
    assert "parameter default" in reports[0].findings[0].message


def test_numpy_arrays_and_pil_images_give_no_device():
    # Twenty-sixth run: pytorch-pose's ``fliplr(x)`` hands ``x`` to NumPy and torchcv's transforms take a PIL image
    # (``w, h = img.size``); devmod wrote ``device=x.device`` / ``device=img.device`` (7 hunks).
    _, result = run("""\
        import random

        import numpy as np
        import torch


        def fliplr(x):
            if x.ndim == 3:
                x = np.transpose(np.fliplr(np.transpose(x, (0, 2, 1))), (0, 2, 1))
            return torch.zeros(x.shape[0]), x


        def jitter(picture, boxes, lo=0.8, hi=1.2):
            w, h = picture.size
            s = random.uniform(lo, hi)
            picture = picture.resize((int(w * s), int(h * s)))
            return picture, boxes * torch.tensor([s, s, s, s])
    """)
    assert ".device" not in result.output


def test_a_factory_cast_to_a_cpu_type_stays_on_the_cpu():
    # Twenty-sixth run: semi-supervised-pytorch's ``enumerate_discrete`` builds
    # ``(torch.ones(n, 1) * cls).type(torch.LongTensor)`` and ``torch.zeros(...)`` returned as ``.type(torch.LongTensor)``
    # and moves the result itself at the end; devmod put both factories on ``x.device``, and ``scatter_`` mixed devices.
    _, result = run("""\
        import torch


        def label_rows(ref, n_cls):
            def one_block(count, cls):
                idx = (torch.ones(count, 1) * cls).type(torch.LongTensor)
                rows = torch.zeros((count, n_cls))
                rows.scatter_(1, idx, 1)
                return rows.type(torch.LongTensor)

            out = torch.cat([one_block(ref.size(0), c) for c in range(n_cls)])
            if ref.is_cuda:
                out = out.cuda()
            return out.float()
    """)
    assert "device=" not in result.output


def test_the_input_of_a_method_of_an_unknown_unmoved_model_is_not_placed():
    # Twenty-sixth run: semi-supervised-pytorch's notebooks import their model class through a package on
    # ``sys.path`` that devmod cannot resolve, never move it, and call ``model.sample(torch.randn(16, 32))``;
    # devmod placed the input alone.
    _, result = run("""\
        import sys
        import torch
        sys.path.append("../lib")
        from nets import Coder

        model = Coder()
        model.eval()
        print(model.sample(torch.randn(2, 4)).shape)
    """)
    assert result.output == result.source
