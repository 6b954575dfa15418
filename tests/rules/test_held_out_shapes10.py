"""Shapes left over from the ninth held-out trial (udacity deep-learning-v2-pytorch and the
dragen1860 tutorials; docs/real-repos.md "Ninth run") and found by the tenth. Each test fails
on the code before its fix."""

from __future__ import annotations

from all_rules_support import rewrite as run


def test_every_loop_through_a_raw_weight_function_moves_its_batch():
    # dragen lesson26: hand-made weights got ``device=``, but the loops that call the function
    # reading them (through a misspelt loss name, so no loss was seen) kept CPU batches.
    source, result = run("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        rows = DataLoader(TensorDataset(torch.rand(12, 5), torch.randint(0, 2, (12,))), batch_size=3)
        weight, bias = torch.randn(2, 5, requires_grad=True), torch.zeros(2, requires_grad=True)


        def forward(v):
            return v @ weight.t() + bias


        judge = torch.nn.CrossEntropyLoss()
        opt = torch.optim.SGD([weight, bias], lr=0.1)
        for v, k in rows:
            score = judge(forward(v), k)
            opt.zero_grad()
            score.backward()
            opt.step()
        hits = 0
        for v, k in rows:
            hits += (forward(v).argmax(1) == k).sum()
    """)
    out = result.output
    assert "torch.randn(2, 5, requires_grad=True, device=device)" in out
    assert out.count("v, k = v.to(device), k.to(device)") == 2


def test_a_function_reading_cpu_weights_is_not_a_model():
    # Weights left on the CPU (no device anywhere to give them): the loops stay as written.
    source, result = run("""\
        import torch

        weight = torch.randn(2, 5, requires_grad=True)


        def forward(v):
            return v @ weight.t()


        for v in [torch.rand(3, 5)]:
            print(forward(v))
    """)
    assert ".to(" not in result.output


def test_a_cpu_then_gpu_timing_demo_keeps_its_first_tensor_on_the_cpu():
    # dragen lesson01: the first timing is the CPU run the program compares against; the
    # author moves the tensor later on purpose. Only the hard-coded CUDA device gets a fallback.
    source, result = run("""\
        import time
        import torch

        m = torch.rand(64, 64)
        start = time.perf_counter()
        torch.mm(m, m)
        print(m.device, time.perf_counter() - start)

        gpu = torch.device("cuda")
        m = m.to(gpu)
        start = time.perf_counter()
        torch.mm(m, m)
        print(m.device, time.perf_counter() - start)
    """)
    out = result.output
    assert "m = torch.rand(64, 64)\n" in out
    assert 'torch.device("cuda" if torch.cuda.is_available() else "cpu")' in out


def test_a_tensor_combined_with_another_before_its_move_still_gets_the_device():
    # Not a demo: the tensor meets a second tensor (which DM201 places) before the author's move.
    source, result = run("""\
        import torch

        m = torch.rand(4, 4)
        n = torch.rand(4, 4)
        print(torch.mm(m, n))
        dev = torch.device("cuda")
        m = m.to(dev)
    """)
    out = result.output
    assert "m = torch.rand(4, 4)\n" not in out


def test_generated_samples_shown_by_the_files_own_plot_function_go_to_the_cpu():
    # udacity MNIST GAN: samples of the moved generator reach ``ax.imshow`` through a list and
    # the notebook's own ``view_samples``; matplotlib converts them with NumPy.
    source, result = run("""\
        import torch
        from torch import nn
        import matplotlib.pyplot as plt


        def show(batches):
            fig, panels = plt.subplots(1, 2)
            for panel, pic in zip(panels, batches[-1]):
                pic = pic.detach()
                panel.imshow(pic.view(2, 3), cmap="gray")


        gen = nn.Linear(5, 6)
        code = torch.randn(2, 5)
        history = []
        for step in range(2):
            history.append(gen(code))
        show(history)
        plt.plot(gen(code).detach()[0])
    """)
    out = result.output
    assert "gen = nn.Linear(5, 6).to(device)" in out
    assert 'panel.imshow(pic.view(2, 3).cpu(), cmap="gray")' in out
    assert "plt.plot(gen(code).detach()[0].cpu())" in out


def test_a_numpy_array_plotted_gets_no_cpu_call():
    source, result = run("""\
        import numpy as np
        import torch
        import matplotlib.pyplot as plt

        net = torch.nn.Linear(2, 2)
        grid = np.zeros((4, 4))
        plt.imshow(grid.reshape(2, 8))
        plt.plot(np.arange(3), [1, 2, 3])
        print(net(torch.ones(1, 2)))
    """)
    assert ".cpu()" not in result.output
