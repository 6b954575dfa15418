"""Shapes found by the twelfth held-out trial (RL-Adventure, CUT, a PyTorch tutorial collection,
facenet-pytorch; docs/real-repos.md "Twelfth run"). Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap

from all_rules_support import rewrite as run


def test_factories_beside_a_tensor_brought_to_the_cpu_stay_there():
    # RL-Adventure categorical DQN: ``dist = self(x).data.cpu()`` then ``dist * torch.linspace(...)``;
    # the linspace got the model's device and every act() failed on a GPU.
    source, result = run("""\
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def act(self, x):
                dist = self.fc(x).data.cpu()
                dist = dist * torch.linspace(0, 1, 3)
                return dist.sum(1)


        def project(model, x):
            d = model.fc(x).data.cpu() * torch.linspace(-1, 1, 3)
            out = torch.zeros(d.size())
            out.view(-1).index_add_(0, torch.arange(d.numel()), d.view(-1))
            return out


        net = Net().cuda()
        print(net.act(torch.ones(1, 4).cuda()), project(net, torch.ones(2, 4).cuda()))
    """)
    out = result.output
    assert "torch.linspace(0, 1, 3)\n" in out and "torch.linspace(-1, 1, 3)\n" in out
    assert "torch.zeros(d.size())\n" in out and "torch.arange(d.numel())," in out


def test_a_numpy_result_is_plotted_as_it_is():
    # A tutorial's ``predicted = model(X).detach().numpy()`` then ``plt.plot(x, predicted)``:
    # DM303 wrote ``predicted.cpu()`` on a NumPy array (AttributeError on every machine).
    source, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn
        import matplotlib.pyplot as plt

        xs = np.random.rand(20, 1).astype(np.float32)
        X = torch.from_numpy(xs)
        model = nn.Linear(1, 1)
        predicted = model(X).detach().numpy()
        plt.plot(xs, predicted, 'b')
    """)
    assert "plt.plot(xs, predicted, 'b')" in result.output


def test_a_target_compared_with_the_output_by_a_method_moves_with_it():
    # ``pred.eq(y_test)``: the model and its input moved, the target did not.
    source, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn

        a = np.random.rand(8, 3).astype(np.float32)
        b = (np.random.rand(8) > 0.5).astype(np.float32)
        X_test = torch.from_numpy(a)
        y_test = torch.from_numpy(b)
        y_test = y_test.view(y_test.shape[0], 1)
        model = nn.Linear(3, 1)
        with torch.no_grad():
            pred = torch.sigmoid(model(X_test)).round()
            print(pred.eq(y_test).sum().item())
    """)
    out = result.output
    target_line = next(line for line in out.splitlines() if line.startswith("y_test = y_test"))
    moved = ("X_test = torch.from_numpy(a).to(device)" in out, target_line.endswith(".to(device)"))
    assert moved in ((True, True), (False, False)), out


def test_a_loss_target_kept_on_the_cpu_keeps_its_partner_there():
    # ``loss(Y_pred, Y)`` and ``Y.item()``: Y stays on the CPU (read as a number), so Y_pred must too.
    source, result = run("""\
        import torch
        import torch.nn as nn

        loss = nn.CrossEntropyLoss()
        Y = torch.tensor([0])
        Y_pred = torch.tensor([[2.0, 1.0, 0.1]])
        print(loss(Y_pred, Y).item())
        print(Y.item())
    """)
    assert result.output == source


def test_a_loader_that_collates_into_lists_is_not_moved():
    # facenet perf test: ``collate_fn`` returns lists of images; ``x = x.to(device)`` fails on a list.
    source, result = run("""\
        import torch
        from torch.utils.data import DataLoader


        def collate_list(batch):
            return [b[0] for b in batch], [b[1] for b in batch]


        class Detector:
            def __init__(self, device):
                self.device = device

            def __call__(self, imgs):
                return [torch.as_tensor(i, device=self.device).sum() for i in imgs]


        def main():
            device = 'cuda' if torch.cuda.is_available() else 'cpu'
            det = Detector(device=device)
            data = [(torch.rand(3, 4, 4), 0) for _ in range(4)]
            out = []
            for x, _ in DataLoader(data, batch_size=2, collate_fn=collate_list):
                out.extend(det(x))
            print(len(out))


        if __name__ == '__main__':
            main()
    """)
    assert result.output == source


def test_a_module_without_tensors_is_no_group():
    # ``sm = nn.Softmax(dim=0); sm(x)`` and ``F.leaky_relu(x)``: DM202 reported it (5 false reports).
    source, result = run("""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        x = torch.tensor([-1.0, 1.0, 2.0])
        sm = nn.Softmax(dim=0)
        print(sm(x))
        print(F.leaky_relu(x))
    """)
    assert not [f for f in result.findings if not f.fixed]
    assert "nn.Softmax(dim=0)\n" in result.output


# facenet's MTCNN in small: on the CPU by its own default, and it converts its (PIL) input itself
_SELF_PLACING = """\
import numpy as np
import torch
import torch.nn as nn


class Detector(nn.Module):
    def __init__(self, device=None):
        super().__init__()
        self.conv = nn.Conv2d(3, 1, 3)
        self.device = torch.device('cpu') if device is None else device
        self.to(self.device)

    def detect(self, img):
        x = torch.as_tensor(np.asarray(img), device=self.device, dtype=torch.float32)
        return self.conv(x.permute(2, 0, 1)[None]).amax().item()
"""


def test_a_model_that_places_itself_is_neither_moved_nor_reported():
    # facenet MTCNN-style: ``self.to(self.device)`` in __init__ with a CPU default; its input is a
    # PIL image that it converts itself. DM202 reported the group (3 false reports).
    source, result = run(_SELF_PLACING + textwrap.dedent("""\

        from PIL import Image

        det = Detector()
        print(det.detect(Image.new('RGB', (16, 16))))
    """))
    assert result.output == source
    assert not [f for f in result.findings if not f.fixed]


def test_a_model_that_is_only_saved_stays_on_the_cpu():
    # ``torch.save(model, FILE)`` of a model that never runs: moving it saved CUDA tensors.
    source, result = run("""\
        import torch
        import torch.nn as nn

        model = nn.Linear(6, 1)
        torch.save(model, "model.pth")
        print(model)
    """)
    assert "nn.Linear(6, 1)\n" in result.output


def test_a_model_that_builds_its_parts_when_it_first_runs():
    # CUT's PatchSampleF: ``setattr(self, "mlp_%d" % i, mlp)`` in a method forward calls once.
    # DM401 reported it, and moving the model before its first run left the new parts on the CPU.
    source, result = run("""\
        import torch
        import torch.nn as nn


        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.built = False

            def create_mlp(self, feats):
                for i, f in enumerate(feats):
                    mlp = nn.Sequential(nn.Linear(f.shape[1], 4), nn.ReLU())
                    setattr(self, "mlp_%d" % i, mlp)
                self.built = True

            def forward(self, feats):
                if not self.built:
                    self.create_mlp(feats)
                return [getattr(self, "mlp_%d" % i)(f) for i, f in enumerate(feats)]


        h = Head()
        print([o.shape for o in h([torch.randn(2, 3)])])
    """)
    assert result.output == source
    assert not [f for f in result.findings if not f.fixed]


def test_a_pass_through_variable_wrapper_is_not_reported():
    # RL-Adventure: ``Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if
    # USE_CUDA else autograd.Variable(*args, **kwargs)``: 18 DM304 reports of correct code.
    source, result = run("""\
        import torch
        import torch.autograd as autograd

        USE_CUDA = torch.cuda.is_available()
        Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)

        print(Variable(torch.ones(2)) + 1)
    """)
    assert not [f for f in result.findings if not f.fixed]


def test_a_report_after_a_fix_points_at_the_users_line():
    # RL-Adventure: reports were placed in the rewritten text (two lines lower, below the added
    # device definition), so --check and --diff named a line the user's file does not have.
    source, result = run("""\
        import torch
        m = torch.nn.Linear(2, 2).cuda()
        x = torch.ones(3).cuda(1)
    """)
    [report] = [f for f in result.findings if not f.fixed]
    assert (report.line, report.column) == (3, 5)
    assert source.splitlines()[report.line - 1].startswith("x = torch.ones(3).cuda(1)")


def test_a_loss_target_kept_on_the_cpu_and_rebound_later_keeps_its_partner_there():
    # The tutorial binds ``Y`` again further down; the real-GPU rerun caught the first ``Y``
    # left on the CPU while its prediction moved ("target is on cpu").
    source, result = run("""\
        import torch
        import torch.nn as nn

        loss = nn.CrossEntropyLoss()
        Y = torch.tensor([0])
        Y_pred = torch.tensor([[2.0, 1.0, 0.1]])
        print(loss(Y_pred, Y).item(), Y.item())
        Y = torch.tensor([2, 0, 1])
        Y_pred = torch.tensor([[0.1, 1.0, 2.1], [2.0, 1.0, 0.1], [0.1, 3.0, 0.1]])
        print(loss(Y_pred, Y).item())
    """)
    out = result.output
    assert "Y_pred = torch.tensor([[2.0, 1.0, 0.1]])\n" in out


def test_a_model_that_places_itself_on_the_drivers_device_still_gets_its_input_moved():
    # The other side of the facenet fix: ``Net(device)`` goes to the driver's device, so the
    # input must follow it.
    source, result = run("""\
        import torch
        import torch.nn as nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        class Net(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.to(device)

            def forward(self, x):
                return self.fc(x)


        net = Net(device)
        x = torch.randn(3, 4)
        print(net(x))
    """)
    assert "x = torch.randn(3, 4, device=device)" in result.output


# -- the second pass (facenet, pytorchTutorial) ------------------------------------------------

def _project(tmp_path, files: dict[str, str], target: str):
    import textwrap
    from codemods.analysis.project import ProjectIndex
    from codemods.engine import transform_source
    sources = [(str(tmp_path / name), textwrap.dedent(text)) for name, text in files.items()]
    index = ProjectIndex.build(sources)
    path = str(tmp_path / target)
    source = dict(sources)[path]
    return source, transform_source(source, path, role=index.role_for(path))


# facenet's collate (lists of PIL images) and the loop of its tests/perf_test.py, as the tests use them
_COLLATE_PIL = """\
    def collate_pil(x):
        out_x, out_y = [], []
        for xx, yy in x:
            out_x.append(xx)
            out_y.append(yy)
        return out_x, out_y
"""
_PERF_LOOP = """

    def main():
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
        det = Detector(device=device)
        data = [(torch.rand(3, 4, 4), 0) for _ in range(4)]
        out = []
        for x, _ in DataLoader(data, batch_size=2, collate_fn=training.collate_pil):
            out.extend(det(x))
        print(len(out))


    if __name__ == '__main__':
        main()
"""


def test_a_loader_with_an_imported_collate_that_returns_lists_is_not_moved(tmp_path):
    # facenet tests/perf_test.py: ``collate_fn=training.collate_pil`` (lists of PIL images).
    source, result = _project(tmp_path, {
        "training.py": _COLLATE_PIL,
        "perf.py": textwrap.dedent("""\
            import torch
            from torch.utils.data import DataLoader
            import training
            from detect import Detector
""") + textwrap.dedent(_PERF_LOOP),
        "detect.py": """\
            import torch


            class Detector:
                def __init__(self, device):
                    self.device = device

                def __call__(self, imgs):
                    return [torch.as_tensor(i, device=self.device).sum() for i in imgs]
        """}, "perf.py")
    assert result.output == source


def test_an_imported_model_class_that_places_itself_is_not_reported(tmp_path):
    # facenet tests/actions_test.py: ``MTCNN(keep_all=True)`` from models/mtcnn.py sits on the CPU
    # by its own default and converts the PIL images it is given; DM202 reported it 3 times.
    source, result = _project(tmp_path, {
        "models/__init__.py": "",
        "models/detlib.py": _SELF_PLACING,
        "check.py": """\
            import torch
            from PIL import Image
            from models.detlib import Detector

            det = Detector()
            img = Image.new('RGB', (16, 16))
            print(det.detect(img))
        """}, "check.py")
    assert result.output == source
    assert not [f for f in result.findings if not f.fixed]


def test_a_model_whose_parameters_are_printed_then_saved_is_not_moved():
    # pytorchTutorial 17_save_load.py: ``for param in model.parameters(): print(param)`` and
    # ``torch.save(model, FILE)``: the model never runs; moving it saved CUDA tensors.
    source, result = run("""\
        import torch
        import torch.nn as nn

        model = nn.Linear(6, 1)
        for param in model.parameters():
            print(param)
        torch.save(model, "model.pth")
    """)
    assert "nn.Linear(6, 1)\n" in result.output


def test_a_collate_of_the_project_imported_under_its_installed_name_is_recognised(tmp_path):
    # facenet installs its root folder as ``facenet_pytorch`` (setup.py ``package_dir``), and its test
    # does ``from facenet_pytorch import MTCNN, training``: the import does not resolve to the folder,
    # but ``collate_pil`` is the project's own function that returns lists.
    source, result = _project(tmp_path, {
        "models/__init__.py": "",
        "models/training.py": _COLLATE_PIL,
        "tests/perf.py": textwrap.dedent("""\
            import torch
            from torch.utils.data import DataLoader
            from facenet_like import Detector, training
""") + textwrap.dedent(_PERF_LOOP)}, "tests/perf.py")
    assert result.output == source
