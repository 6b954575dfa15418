"""Devices inside model methods that are not the forward pass, and tensors that must stay on the
CPU. Each case is a shape from the sixth real-repository run (issue 8, docs/real-repos.md); each
test fails on the code before its fix."""

from __future__ import annotations

import textwrap

from all_rules_support import run


def test_a_method_that_init_calls_keeps_its_device():
    # The priors are a plain attribute made at construction: on the parameters' device (still
    # the CPU then) ``model.to()`` would never move them. The author's global device works.
    source = """\
        import torch
        from torch import nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 4)
                self.priors = self.make_priors()

            def make_priors(self):
                return self.scaled(torch.FloatTensor([[0.5, 0.5, 0.1, 0.1]] * 3))

            def scaled(self, boxes):
                return (boxes * 2).to(device)

            def forward(self, x):
                return self.head(x)
    """
    out, reports = run(source)
    assert out == textwrap.dedent(source)
    assert not reports


def test_a_helper_method_takes_the_device_of_the_tensor_it_is_given():
    # ``next(self.parameters())`` raises StopIteration in a DataParallel replica.
    out, _ = run("""\
        import torch
        from torch import nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        class Decoder(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.n = n
                self.fc = nn.Linear(n, n)

            def onehot(self, chars):
                hot = torch.FloatTensor(chars.size(0), self.n).zero_().to(device)
                return hot.scatter_(1, chars.unsqueeze(1), 1)

            def forward(self, text):
                return self.fc(self.onehot(text))
    """)
    assert "hot = torch.FloatTensor(chars.size(0), self.n).zero_().to(chars.device)" in out
    assert "parameters()" not in out


def test_a_working_global_device_is_not_swapped_for_a_parameters_guess():
    out, reports = run("""\
        import torch
        from torch import nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def blank(self, rows):
                return torch.zeros(rows, 4).to(device)

            def forward(self, x):
                return self.fc(x)
    """)
    assert "return torch.zeros(rows, 4).to(device)" in out  # the same device, as the user wrote it
    assert "parameters()" not in out
    assert not reports


def test_a_checkpoint_tensor_that_goes_to_scipy_through_a_slice_stays_on_the_cpu():
    source = """\
        import torch
        from torch import nn
        from scipy import ndimage


        def np2th(w):
            return torch.from_numpy(w)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.pos = nn.Parameter(torch.zeros(1, 16, 4))

            def load_from(self, weights):
                with torch.no_grad():
                    posemb = np2th(weights["pos"])
                    if posemb.size() == self.pos.size():
                        self.pos.copy_(posemb)
                    else:
                        grid = posemb[0].reshape(2, 2, -1)
                        grid = ndimage.zoom(grid, (2, 2, 1), order=1)
                        self.pos.copy_(np2th(grid.reshape(1, 16, -1)))

            def forward(self, x):
                return x + self.pos
    """
    out, reports = run(source)
    assert out == textwrap.dedent(source)  # ``copy_`` copies across devices: nothing to move either
    assert not reports


def test_ctc_lengths_stay_where_they_are():
    # warp-ctc reads lengths and labels on the host; nn.CTCLoss copies CPU lengths itself.
    out, reports = run("""\
        import torch
        from torch import nn
        from warpctc_pytorch import CTCLoss

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        if __name__ == "__main__":
            baidu, ctc = False, True
            if baidu:
                criterion = CTCLoss()
            elif ctc:
                criterion = nn.CTCLoss(zero_infinity=True).to(device)
            else:
                criterion = nn.CrossEntropyLoss().to(device)
            model = nn.Linear(4, 5).to(device)
            preds = model(torch.randn(2, 7, 4).to(device)).log_softmax(2).permute(1, 0, 2)
            text, length = torch.IntTensor([1, 2, 3, 4]), torch.IntTensor([2, 2])
            preds_size = torch.IntTensor([preds.size(0)] * 2)
            criterion(preds, text, preds_size, length).backward()
            lengths = torch.full((2,), 7, dtype=torch.long)
            nn.functional.ctc_loss(preds, text, input_lengths=lengths, target_lengths=length)
    """)
    assert "preds_size = torch.IntTensor([preds.size(0)] * 2)\n" in out
    assert "lengths = torch.full((2,), 7, dtype=torch.long)\n" in out
    assert not any("preds_size" in f.message or "IntTensor" in f.message for f in reports)


def test_a_checkpoint_tensor_unpacked_into_parts_for_numpy_stays_on_the_cpu():
    source = """\
        import numpy as np
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.pos = nn.Parameter(torch.zeros(1, 5, 4))

            def load_from(self, weights):
                posemb = torch.from_numpy(weights["pos"])
                if posemb.size() != self.pos.size():
                    tok, grid = posemb[:, :1], posemb[0, 1:]
                    grid = np.resize(grid, (4, 4))
                    posemb = np.concatenate([tok, grid[None]], axis=1)
                    posemb = torch.from_numpy(posemb)
                self.pos.data = posemb.float()

            def forward(self, x):
                return x + self.pos
    """
    out, reports = run(source)
    assert 'posemb = torch.from_numpy(weights["pos"])\n' in out
    assert not reports


def test_torch_ctc_target_lengths_move_with_the_log_probs():
    # On a GPU, PyTorch's cuDNN CTC path divides the losses by the target lengths where they are:
    # CPU int32 ones fail (seen on an H200), so they move; input lengths stay, as ATen copies them.
    out, reports = run("""\
        import torch
        from torch import nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        if __name__ == "__main__":
            criterion = nn.CTCLoss()
            model = nn.Linear(4, 5).to(device)
            preds = model(torch.randn(7, 2, 4).to(device)).log_softmax(2)
            length = torch.IntTensor([2, 2])
            preds_size = torch.IntTensor([preds.size(0)] * 2)
            criterion(preds, torch.IntTensor([1, 2, 3, 4]).to(device), preds_size, length).backward()
    """)
    assert "length = torch.IntTensor([2, 2]).to(device)\n" in out
    assert "preds_size = torch.IntTensor([preds.size(0)] * 2)\n" in out


def test_a_table_the_author_builds_on_the_host_and_moves_once_done_stays_as_written():
    # Rotary tables are often built in float64 (which MPS lacks) or from shape data read on the
    # host, then moved in one step: placing each factory would move that work to the device.
    source = """\
        import torch
        from torch import nn


        class Rope(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.dim = dim

            def forward(self, x):
                freqs = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, dtype=torch.float64) / self.dim))
                pos = torch.arange(x.shape[1], dtype=torch.float64)
                table = torch.outer(pos, freqs).float()
                table = torch.cat([table.sin(), table.cos()], dim=-1)
                return x + table.to(x.device)
    """
    out, reports = run(source)
    assert out == textwrap.dedent(source)
    assert not reports
