"""Shapes found by the thirty-fourth held-out trial (docs/real-repos.md "Thirty-fourth run").
Each test fails on the code the run measured (8747145)."""

from __future__ import annotations

from all_rules_support import run


def test_a_cuda_default_read_as_a_string_stays_a_string():
    # convmixer's benchmark.py: ``def __init__(self, ..., device='cuda')`` then ``if 'cuda' in self.device:``;
    # DM102 made the default the shared torch.device (TypeError on every machine).
    out, _ = run("""\
        import time
        import torch
        import torch.nn as nn


        class Timer:
            def __init__(self, width, device='cuda'):
                self.device = device
                self.net = nn.Linear(width, width).to(device=self.device)
                self.fast = 'cuda' in self.device


        if __name__ == '__main__':
            print(Timer(8).fast)
    """)
    assert "def __init__(self, width, device='cuda'):" in out


def test_a_converter_model_from_a_library_factory_is_not_moved():
    # convmixer's convert_from_mxnet.py: ``target = create_model(name)`` only read for its parameter names,
    # filled with load_state_dict and saved; DM202 moved it (the saved .pth would hold CUDA tensors).
    out, _ = run("""\
        import numpy as np
        import torch
        from timm import create_model


        def port(name, arrays):
            target = create_model(name)
            new_state = {}
            for (key, value), arr in zip(target.named_parameters(), arrays):
                new_state[key] = torch.from_numpy(arr)
            target.load_state_dict(new_state)
            torch.save(target.state_dict(), name + ".pth")


        if __name__ == "__main__":
            port("tiny", [np.zeros((3, 4), dtype=np.float32)])
    """)
    assert "target = create_model(name)\n" in out


def test_a_model_run_only_through_its_collected_layers_is_not_moved():
    # T2T-ViT's visualization notebook: the model's conv layers are taken out with ``.children()`` and run
    # on a CPU image; DM202 moved the model (CUDA layers, CPU input).
    out, _ = run("""\
        import numpy as np
        import torch
        import torch.nn as nn


        def make_net():
            return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3))


        net = make_net()
        convs = []
        for part in list(net.children()):
            if type(part) == nn.Conv2d:
                convs.append(part)

        picture = torch.from_numpy(np.random.rand(1, 3, 16, 16).astype(np.float32))
        maps = [convs[0](picture)]
        for k in range(1, len(convs)):
            maps.append(convs[k](maps[-1]))
        print([m.shape for m in maps])
    """)
    assert "net = make_net()\n" in out


def test_a_class_own_cuda_method_on_a_batch_is_not_reported():
    # edge-connect: ``self.cuda(*items)`` of a plain class whose ``cuda`` does ``.to(config.DEVICE)``
    # (4 false DM103 "`.cuda(index)` puts this on that GPU").
    _, open_findings = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset


        class Runner:
            def __init__(self, dev):
                self.dev = dev
                self.net = nn.Linear(4, 2).to(dev)

            def train(self):
                loader = DataLoader(TensorDataset(torch.randn(6, 4), torch.tensor([0, 1, 0, 1, 0, 1])), batch_size=3)
                for items in loader:
                    feats, labels = self.cuda(*items)
                    nn.functional.cross_entropy(self.net(feats), labels).backward()

            def cuda(self, *args):
                return (item.to(self.dev) for item in args)


        if __name__ == "__main__":
            Runner(torch.device("cuda" if torch.cuda.is_available() else "cpu")).train()
    """)
    assert not [f for f in open_findings if f.code == "DM103"]
