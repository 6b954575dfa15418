"""DM303 numpy-cpu: which receivers count as torch tensors."""

from __future__ import annotations

import textwrap

import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules.numpy_cpu import NumpyCpu

HEAD = ("import numpy as np\nimport tensorflow as tf\nimport torch\nimport torch.nn.functional as F\n"
        "from torch.utils.data import DataLoader\n\nmodel = torch.nn.Linear(3, 2)\nloader = DataLoader(data)\n")


def fix(code: str) -> str:
    code = HEAD + textwrap.dedent(code)
    result = transform_source(code, config=Config(), rules=[NumpyCpu])
    assert transform_source(result.output, config=Config(), rules=[NumpyCpu]).output == result.output
    return result.output[len(HEAD):]


@pytest.mark.parametrize("line, expected", [
    ("a = F.softmax(out, dim=1).numpy()", "a = F.softmax(out, dim=1).cpu().numpy()"),
    ("a = torch.sigmoid(out).numpy()", "a = torch.sigmoid(out).cpu().numpy()"),
    ("a = model(x).numpy()", "a = model(x).cpu().numpy()"),
    ("a = model(x).data[0].numpy()", "a = model(x).data[0].cpu().numpy()"),
    ("a = out.detach().numpy()", "a = out.detach().cpu().numpy()"),
    ("a = out.float().numpy()", "a = out.float().cpu().numpy()"),
    ("a = out.argmax(1).numpy()", "a = out.argmax(1).cpu().numpy()"),
])
def test_dm303_fixed(line, expected):
    assert fix(line + "\n") == expected + "\n"


@pytest.mark.parametrize("line", [
    "a = tf.constant([1.0]).numpy()",        # TensorFlow
    "a = frame.numpy()",                     # unknown object
    "a = helper(x).numpy()",                 # unknown function
    "a = out.cpu().detach().numpy()",        # already on the CPU
    "a = out.detach().to('cpu').numpy()",
    "a = out.detach().to(device='cpu').numpy()",
    "a = out.detach().to(torch.device('cpu')).numpy()",
    "a = out.detach().numpy(force=True)",   # copies itself
    "a = torch.load('x.pt').numpy()",        # anything can come out of a pickle
])
def test_dm303_left_alone(line):
    assert fix(line + "\n") == line + "\n"


def test_dm303_loader_batches_and_names():
    code = """\
    for xb, yb in loader:
        print(xb.numpy(), yb[0].numpy())
    pred = model(x)
    host = pred.cpu()
    print(pred.numpy(), host.numpy())
    """
    assert fix(code) == textwrap.dedent("""\
    for xb, yb in loader:
        print(xb.cpu().numpy(), yb[0].cpu().numpy())
    pred = model(x)
    host = pred.cpu()
    print(pred.cpu().numpy(), host.numpy())
    """)


def test_dm303_model_parameter_of_unknown_kind_is_left_alone():
    code = "def predict(model, x):\n    return model(x).numpy()\n"  # could be a Keras model
    assert fix(code) == code


def test_a_parameter_every_caller_fills_with_a_cpu_made_tensor_needs_no_copy():
    code = textwrap.dedent("""\
        import numpy as np
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        def show(alphas, scale=1):
            for t in range(alphas.size(0)):
                current = alphas[t, :]
                print(np.round(current.numpy() * scale, 3))


        def show_all(weights):
            print(weights.numpy())


        if __name__ == "__main__":
            model = torch.nn.Linear(4, 3).to(device)
            alphas = model(torch.randn(2, 4, device=device)).softmax(-1).tolist()
            alphas = torch.FloatTensor(alphas)
            show(alphas)
            show(scale=2, alphas=torch.FloatTensor([[1.0]]))
            show_all(model.weight.detach())
    """)
    out = transform_source(code).output
    assert "current.numpy() * scale" in out  # both callers hand it a legacy-constructed CPU tensor
    assert "print(weights.cpu().numpy())" in out  # a model's weights may be on the GPU
