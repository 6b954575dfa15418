"""Shapes found by the thirteenth held-out trial (Time-Series-Library, pytorch-GAT, pyGAT, ddim;
docs/real-repos.md "Thirteenth run"). Each test fails on the code before its fix."""

from __future__ import annotations

from all_rules_support import rewrite as run


def _codes(result) -> list[str]:
    return [f.code for f in result.findings if not f.fixed]


def test_a_list_whose_modules_are_registered_one_by_one_is_not_reported():
    # pyGAT: ``self.attentions = [...]`` then ``self.add_module(name, a)`` for each: DM305 said the
    # model does not see them (it does), and its fix would register each head twice.
    source, result = run("""\
        import torch
        import torch.nn as nn


        class Heads(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.heads = [nn.Linear(4, 4) for _ in range(n)]
                for i, head in enumerate(self.heads):
                    self.add_module("head_{}".format(i), head)
                self.more = [nn.Linear(4, 4) for _ in range(n)]
                for i in range(n):
                    setattr(self, f"more_{i}", self.more[i])

            def forward(self, x):
                return torch.cat([h(x) for h in self.heads + self.more], dim=1)
    """)
    assert "DM305" not in _codes(result) and result.output == source


def test_a_list_of_modules_without_tensors_is_not_reported():
    # Time-Series-Library's series_decomp_multi: a plain list of moving averages (``nn.AvgPool1d``
    # only): nothing to move, nothing for parameters() to miss.
    source, result = run("""\
        import torch
        import torch.nn as nn


        class Smooth(nn.Module):
            def __init__(self, k):
                super().__init__()
                self.k = k
                self.pool = nn.AvgPool1d(k, stride=1, padding=k // 2)

            def forward(self, x):
                return self.pool(x)[..., : x.shape[-1] - self.k + 1 + self.k // 2 * 2]


        class Weighted(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Linear(1, 1)

            def forward(self, x):
                return self.w(x)


        class MultiSmooth(nn.Module):
            def __init__(self, ks):
                super().__init__()
                self.parts = [Smooth(k) for k in ks]
                self.weights = [Weighted() for k in ks]

            def forward(self, x):
                return sum(p(x) for p in self.parts) / len(self.parts)
    """)
    found = [f for f in result.findings if f.code == "DM305"]
    assert [f.line for f in found] == [28]  # the list of Linear-holding modules is still reported


def test_cuda_on_a_sub_module_behind_a_device_type_test_is_not_reported():
    # Time-Series-Library's DWT decomposition: ``Filter().cuda() if self.device.type == 'cuda' else
    # Filter()`` runs on every machine.
    source, result = run("""\
        import torch
        import torch.nn as nn


        class Filter(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("w", torch.ones(1, 1, 3) / 3)

            def forward(self, x):
                return nn.functional.conv1d(x, self.w, padding=1)


        class Model(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.filt = Filter().cuda() if self.device.type == "cuda" else Filter()
                if str(device) == "cuda:0":
                    self.other = Filter().cuda()

            def forward(self, x):
                return self.filt(x)
    """)
    assert "DM103" not in _codes(result) and result.output == source


def test_a_checkpoint_part_kept_by_another_object_is_not_loaded_to_the_cpu():
    # ddim's runner: ``states = torch.load(path)``, the model and optimizer get theirs, and an EMA
    # helper (no module) keeps ``states[4]`` as its shadow and adds it to the parameters on the
    # GPU: ``map_location="cpu"`` made the first EMA update fail on a GPU machine.
    source, result = run("""\
        import torch
        import torch.nn as nn


        class EMAHelper:
            def __init__(self, mu):
                self.mu, self.shadow = mu, {}

            def load_state_dict(self, state):
                self.shadow = state


        class Runner:
            def __init__(self):
                self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

            def train(self):
                model = nn.Linear(2, 2).to(self.device)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                if self.device.type == "cuda":
                    ema_helper = EMAHelper(0.9)
                else:
                    ema_helper = None
                states = torch.load("ckpt.pth")
                model.load_state_dict(states[0])
                optimizer.load_state_dict(states[1])
                if ema_helper:
                    ema_helper.load_state_dict(states[4])

            def restore(self, model, optimizer):
                states = torch.load("ckpt.pth")
                model.load_state_dict(states["model"])
                optimizer.load_state_dict(states["optimizer"])
                return states["epoch"]
    """)
    out = result.output
    assert out.count('map_location="cpu"') == 1  # only ``restore``: its parts go into a model and an optimizer
    assert 'states = torch.load("ckpt.pth", map_location="cpu")\n        model.load_state_dict(states["model"])' in out


def test_a_branch_the_author_keeps_on_the_cpu_beside_one_placed_with_the_device_stays():
    # pytorch-GAT's loader: the small data set is built with ``device=device``, the large one is
    # kept on the CPU on purpose (moved batch by batch by the training loop); DM201 put the
    # whole large set on the GPU.
    source, result = run("""\
        import torch


        def load(name, device):
            if name == "small":
                x = torch.tensor([[1.0, 2.0]], device=device)
                return [x]
            elif name == "large":
                parts = []
                for i in range(3):
                    parts.append(torch.tensor([[float(i), 1.0]]))
                return parts
            noise = torch.randn(2, 2)
            return [noise]


        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = torch.nn.Linear(2, 1).to(device)
            for x in load("large", device):
                model(x.to(device))
    """)
    out = result.output
    assert "parts.append(torch.tensor([[float(i), 1.0]]))" in out
    assert "noise = torch.randn(2, 2, device=device)" in out  # not in another branch: placed as before


def test_a_cuda_device_given_to_a_block_that_takes_its_input_device_is_not_reported():
    # Time-Series-Library's MICN: ``SeasonalPrediction(..., device=torch.device('cuda:0'))`` hands
    # it to ``MIC``, whose ``forward`` sets ``self.device = src.device`` before anything reads
    # it (also in the helper it calls): the CUDA device places nothing. DM102 reported it.
    source, result = run("""\
        import torch
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, dim, device="cuda"):
                super().__init__()
                self.device = device
                self.lin = nn.Linear(dim, dim)

            def pad(self, x):
                return torch.zeros(x.shape[0], 1, device=self.device)

            def forward(self, x):
                self.device = x.device
                return torch.cat([self.pad(x), self.lin(x)], dim=1)


        class Stack(nn.Module):
            def __init__(self, dim, device="cuda"):
                super().__init__()
                self.blocks = nn.ModuleList([Block(dim, device=device) for _ in range(2)])

            def forward(self, x):
                return self.blocks[0](x)


        class Placed(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.lin = nn.Linear(4, 4)

            def forward(self, x):
                return self.lin(x) + torch.ones(4, device=self.device)


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.stack = Stack(4, device=torch.device("cuda:0"))
                self.placed = Placed(device=torch.device("cuda:0"))

            def forward(self, x):
                return self.placed(self.stack(x)[:, :4])
    """)
    reports = [f.line for f in result.findings if f.code == "DM102" and not f.fixed]
    assert reports == [42]  # ``Placed`` reads it in forward: still reported


def test_samples_appended_to_lists_that_feed_a_loader_stay_on_the_cpu():
    # pytorch-GAT's PPI notebook: the loader takes ``device`` but keeps every graph on the CPU;
    # the tensors go to lists (``edges.append(edge_index)``) that a DataLoader serves, and an edge
    # index rebound as ``e - e.min()`` is plotted with ``.numpy()``. DM201 put them on the GPU.
    source, result = run("""\
        import torch
        from torch.utils.data import DataLoader


        class GraphDataLoader(DataLoader):
            def __init__(self, feats, edges, batch_size=1):
                super().__init__(list(zip(feats, edges)), batch_size=batch_size)


        def load(n, device):
            feats, edges = [], []
            for i in range(n):
                edge_index = torch.tensor([[0, 1], [1, 0]], dtype=torch.long).transpose(0, 1).contiguous()
                edge_index = edge_index - edge_index.min()
                edges.append(edge_index)
                feats.append(torch.tensor([float(i)], dtype=torch.float))
                if n > 5:
                    print(edge_index.numpy())
            return GraphDataLoader(feats[0:2], edges[0:2], batch_size=1)
    """)
    out = result.output
    assert "dtype=torch.long).transpose(0, 1)" in out and "feats.append(torch.tensor([float(i)], dtype=torch.float))" in out


def test_a_table_indexed_with_indices_from_topk_is_made_on_the_input_device():
    # Time-Series-Library's ETSformer: ``f = fft.rfftfreq(t)`` indexed with ``topk`` indices of the
    # input's spectrum, then moved: indexing a CPU tensor with GPU indices fails before the move.
    # verify named DM405 for it while apply changed nothing.
    source, result = run("""\
        import torch
        import torch.fft as fft
        import torch.nn as nn


        class Season(nn.Module):
            def forward(self, x):
                x_freq = fft.rfft(x, dim=1)
                f = fft.rfftfreq(x.shape[1])
                _, idx = torch.topk(x_freq.abs(), 2, dim=1)
                g = torch.arange(x.shape[1]) / x.shape[1]
                return f[idx].to(x.device) * x_freq.abs().gather(1, idx) + g[:2].to(x.device)
    """)
    out = result.output
    assert "f = fft.rfftfreq(x.shape[1], device=x.device)" in out
    assert "g = torch.arange(x.shape[1]) / x.shape[1]" in out  # sliced with constants, then moved: as written


def test_samples_that_every_caller_moves_one_by_one_stay_on_the_cpu():
    # The second pass's reduction of pytorch-GAT's PPI loader: the function takes ``device`` but
    # returns CPU samples, and its caller moves each one (``model(x.to(device))``).
    source, result = run("""\
        import torch


        def load_data(name, device):
            if name == "ppi":
                feats = []
                for i in range(3):
                    feats.append(torch.tensor([[float(i), 1.0]], dtype=torch.float))
                return feats
            raise ValueError(name)


        def batches(device):
            return [torch.tensor([[float(i), 1.0]]) for i in range(3)]


        def table(device):
            return [torch.arange(3)]


        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = torch.nn.Linear(2, 1).to(device)
            for x in load_data("ppi", device):
                model(x.to(device))
            for x in batches(device):
                model(x.to(device))
            print(table(device)[0] + torch.ones(3, device=device))
    """)
    out = result.output
    assert "feats.append(torch.tensor([[float(i), 1.0]], dtype=torch.float))" in out
    assert "return [torch.tensor([[float(i), 1.0]]) for i in range(3)]" in out
    assert "return [torch.arange(3, device=device)]" in out  # its caller uses it as it is: placed as before
