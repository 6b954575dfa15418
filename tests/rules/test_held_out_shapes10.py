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
        n = torch.rand(64, 64)
        start = time.perf_counter()
        torch.mm(m, m)
        torch.mm(m, n)
        print(m.device, time.perf_counter() - start)

        gpu = torch.device("cuda")
        m = m.to(gpu)
        n = n.to(gpu)
        start = time.perf_counter()
        torch.mm(m, m)
        print(m.device, time.perf_counter() - start)
    """)
    out = result.output
    assert "m = torch.rand(64, 64)\n" in out and "n = torch.rand(64, 64)\n" in out
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


# -- tenth run (nerf-pytorch, minDiffusion, ESRGAN, pytorch-deep-learning, mae, imagen-pytorch,
#    pytorch-wgan, pytorch-image-classification) --------------------------------------------

def test_a_model_kept_on_the_cpu_keeps_its_batches():
    # pytorch-deep-learning 03: ``model_0.to("cpu")  # on purpose``; the loop's batch moved alone.
    source, result = run("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        device = "cuda" if torch.cuda.is_available() else "cpu"
        feed = DataLoader(TensorDataset(torch.rand(6, 3), torch.randint(0, 2, (6,))), batch_size=2)
        rows = [(torch.rand(2, 3), torch.randint(0, 2, (2,)))]
        baseline = nn.Linear(3, 2)
        baseline.to("cpu")
        for a, b in feed:
            print(nn.functional.cross_entropy(baseline(a), b))
        for a, b in rows:
            print(baseline(a))
    """)
    assert result.output == source


def test_a_loop_function_given_a_cpu_kept_model_keeps_its_batches():
    # pytorch-deep-learning 03 ``eval_model(model_0, ...)``; the moved batch also named a
    # ``device`` defined only below the first call (a NameError on every machine).
    source, result = run("""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        feed = DataLoader(TensorDataset(torch.rand(6, 3), torch.randint(0, 2, (6,))), batch_size=2)


        def judge(model, data_loader):
            for a, b in data_loader:
                score = nn.functional.cross_entropy(model(a), b)
            return score.item()


        first = nn.Linear(3, 2)
        first.to("cpu")
        print(judge(first, feed))
        device = "cuda" if torch.cuda.is_available() else "cpu"
        second = nn.Linear(3, 2).to(device)
        for a, b in feed:
            a, b = a.to(device), b.to(device)
            print(second(a))
    """)
    assert result.output == source


def test_a_conversion_script_loads_to_the_cpu():
    # ESRGAN net_interp.py / transer_RRDB_models.py: load, mix or rename, save. Loaded onto the
    # GPU, the saved file would need a GPU to load.
    source, result = run("""\
        import torch

        dev = torch.device("cuda")
        left = torch.load("left.pth")
        right = torch.load("right.pth")
        torch.save({k: (left[k] + right[k]) / 2 for k in left}, "mid.pth")
    """)
    out = result.output
    assert out.count('map_location="cpu"') == 2


def test_a_tensor_shown_in_an_f_string_may_move_with_its_model():
    # pytorch-deep-learning 03 cells 74/79/88: ``print(f"...{test_image}")`` was taken for a
    # use that needs the CPU, and DM202 reported correct code (--check failed).
    source, result = run("""\
        import torch
        from torch import nn

        device = "cuda" if torch.cuda.is_available() else "cpu"
        pic = torch.rand(3, 6, 6)
        print(f"values: {pic}")
        pool = nn.Conv2d(3, 2, 3)
        print(pool(pic.unsqueeze(0)).shape)
    """)
    assert not [f for f in result.findings if not f.fixed]
    assert "pool = nn.Conv2d(3, 2, 3).to(device)" in result.output


def test_an_input_for_a_model_from_an_unknown_factory_stays(tmp_path):
    # mae demo notebook: ``model = prepare_model(...)`` (``getattr(models_mae, arch)()`` inside)
    # is never moved, so ``x = torch.tensor(img)`` in the function that runs it stays too.
    source, result = run("""\
        import numpy as np
        import torch
        import zoo


        def build(name):
            return getattr(zoo, name)()


        def infer(pic, net):
            t = torch.tensor(pic)
            return net(t.float())


        pic = np.ones((2, 3))
        net = build("small")
        print(infer(pic, net))
    """)
    assert result.output == source


def test_an_input_reshaped_before_the_unknown_model_stays_too():
    # The real mae cell: the input goes through ``x = x.unsqueeze(0)`` and ``torch.einsum`` first.
    source, result = run("""\
        import numpy as np
        import torch
        import zoo


        def build(name):
            net = getattr(zoo, name)()
            net.load_state_dict(torch.load("w.pth", map_location="cpu"))
            return net


        def infer(pic, net):
            t = torch.tensor(pic)
            t = t.unsqueeze(dim=0)
            t = torch.einsum("nhwc->nchw", t)
            return net(t.float())


        pic = np.ones((2, 2, 3))
        first = build("small")
        print(infer(pic, first))
    """)
    assert result.output == source


def test_a_tensor_for_the_files_own_plot_helper_stays_on_the_cpu():
    # mae demo notebook cell 7: ``show_image(torch.tensor(img))`` where ``show_image`` multiplies by
    # a NumPy array inside ``torch.clip`` and hands the result to ``plt.imshow``.
    source, result = run("""\
        import numpy as np
        import torch
        import matplotlib.pyplot as plt

        scale = np.array([0.5, 0.5, 0.5])


        def show(pic):
            plt.imshow(torch.clamp(pic * scale * 255, 0, 255).int())


        raw = np.zeros((4, 4, 3))
        show(torch.tensor(raw))
        layer = torch.nn.Linear(3, 3)
        print(layer(torch.tensor(raw).float()))
    """)
    assert "show(torch.tensor(raw))\n" in result.output
    assert "layer = torch.nn.Linear(3, 3).to(device)" in result.output


def test_a_weight_donor_is_neither_moved_nor_reported():
    # pytorch-image-classification 4_vgg: the new head of a model used only as a ``state_dict()``
    # source was moved alone (half a model on the GPU), then DM202 reported that model (second
    # pass: also when the notebook prints it first).
    source, result = run("""\
        import torch
        import torch.nn as nn
        import torchvision.models as models

        source_net = models.vgg11_bn()
        print(source_net)
        head = nn.Linear(source_net.classifier[-1].in_features, 10)
        source_net.classifier[-1] = head
        weights = source_net.state_dict()
        other = models.vgg11_bn()
        other.classifier[-1] = nn.Linear(4, 2)
        spare = other.state_dict()
    """)
    assert result.output == source
    assert not [f for f in result.findings if not f.fixed]


def test_a_cuda_type_chosen_by_the_callers_switch_is_not_reported(tmp_path):
    # pytorch-wgan inception_score.py: ``if cuda: dtype = torch.cuda.FloatTensor`` with ``cuda`` a
    # parameter; ``.type(dtype)`` runs on CUDA only when the caller asks for it.
    from codemods.analysis.project import ProjectIndex
    from codemods.engine import transform_source
    import textwrap
    helper = textwrap.dedent("""\
        import torch
        from torch import nn


        def score(imgs, cuda=True):
            if cuda:
                kind = torch.cuda.FloatTensor
            else:
                kind = torch.FloatTensor
            net = nn.Linear(4, 2).type(kind)
            return net(imgs.type(kind))
    """)
    script = "import torch\nfrom helper import score\nprint(score(torch.ones(1, 4), cuda=False))\n"
    index = ProjectIndex.build([(str(tmp_path / "helper.py"), helper), (str(tmp_path / "run.py"), script)])
    result = transform_source(helper, str(tmp_path / "helper.py"), role=index.role_for(str(tmp_path / "helper.py")))
    assert result.output == helper
    assert not [f for f in result.findings if not f.fixed]


# -- eleventh run (nn-zero-to-hero, WassersteinGAN) ------------------------------------------

def test_tensors_beside_generator_drawn_weights_stay_on_the_cpu():
    # makemore notebooks: ``C = torch.randn(..., generator=g)`` stays on the CPU (a CPU generator);
    # ``bngain = torch.ones(...)`` in the same cell got ``device=`` and met ``C`` and ``W1`` half-moved.
    source, result = run("""\
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        g = torch.Generator().manual_seed(1)
        table = torch.randn((10, 4), generator=g)
        weight = torch.randn((8, 5), generator=g)
        gain = torch.ones((1, 5))
        rows = torch.randint(0, 10, (3, 2), generator=g)
        hidden = table[rows].view(3, -1) @ weight
        print(gain * hidden)
    """)
    assert result.output == source


def test_a_cuda_type_in_an_isinstance_test_is_not_reported():
    # WassersteinGAN models: ``isinstance(x.data, torch.cuda.FloatTensor) and self.ngpu > 1``
    # places nothing; DM304 reported it six times.
    source, result = run("""\
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self, ngpu):
                super().__init__()
                self.ngpu = ngpu
                self.body = nn.Linear(4, 2)

            def forward(self, x):
                if isinstance(x.data, torch.cuda.FloatTensor) and self.ngpu > 1:
                    return nn.parallel.data_parallel(self.body, x, range(self.ngpu))
                return self.body(x)
    """)
    assert not [f for f in result.findings if not f.fixed]
