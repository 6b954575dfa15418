"""DM202 model-to-device: cases beyond the rule's own examples (which models, wrappers, no second move)."""

from __future__ import annotations

import textwrap

import pytest

from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules.model_to_device import ModelToDevice

HEADER = "import torch\nimport torch.nn as nn\n\n"


def run(code: str, all_rules: bool = False):
    code = textwrap.dedent(code)
    rules = None if all_rules else [ModelToDevice]
    result = transform_source(code, config=Config(), rules=rules)
    again = transform_source(result.output, config=Config(), rules=rules)
    assert again.output == result.output, "a second run must change nothing"
    return result


def in_function(code: str) -> str:
    """The body of ``def main(device):`` after DM202."""
    source = HEADER + "def main(device):\n" + textwrap.indent(textwrap.dedent(code), "    ")
    return textwrap.dedent(run(source).output.split("def main(device):\n", 1)[1])


@pytest.mark.parametrize("line, moved", [
    ("m = nn.Linear(3, 4)", True),
    ("m = nn.Sequential(nn.Linear(3, 4), nn.ReLU())", True),
    ("m = nn.LSTM(3, 4, batch_first=True)", True),
    ("m = torch.nn.Conv2d(1, 8, 3)", True),
    ("m = nn.CrossEntropyLoss()", False),
    ("m = nn.CrossEntropyLoss(weight=None)", False),
    ("m = nn.CrossEntropyLoss(weight=w)", True),
    ("m = nn.NLLLoss(w)", True),
    ("m = nn.BCEWithLogitsLoss(pos_weight=pw)", True),
    ("m = nn.MSELoss(reduction='sum')", False),
    ("m = nn.Parameter(torch.ones(3))", False),
    ("m = nn.ModuleList()", False),
    ("m = nn.Linear(3, 4, device=device)", False),
    ("m = nn.Linear(3, 4, **factory_kwargs)", False),
    ("m = nn.Linear(3, 4).to(device)", False),
    ("m = nn.Linear(3, 4).cuda()", False),
    ("m = nn.Linear(3, 4).double()", False),
    ("m = [nn.Linear(3, 4) for _ in range(2)]", False),
    ("m = make_model()", False),
])
def test_which_constructors_move(line, moved):
    out = in_function(line + "\n")
    assert (out != line + "\n") is moved, out
    if moved:
        assert out == line + ".to(device)\n"


@pytest.mark.parametrize("later", [
    "model.to(device)",
    "model = model.to(device)",
    "model.cuda()",
    "if torch.cuda.is_available():\n    model.to(device)",
    "model, opt = accelerator.prepare(model, opt)",
])
def test_no_second_move(later):
    code = f"model = nn.Linear(3, 4)\n{later}\n"
    assert in_function(code) == code


def test_moved_in_another_function_counts_for_a_global():
    code = HEADER + "model = nn.Linear(3, 4)\n\ndef train(device):\n    model.to(device)\n"
    assert run(code).output == code


@pytest.mark.parametrize("code", [
    # sub-modules move with their parent
    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(3, 4)\n"
    "        tmp = nn.Linear(4, 4)\n\n    def forward(self, x):\n        head = nn.Linear(4, 1)\n        return x\n",
    # Dataset code and other classes: no device there
    "from torch.utils.data import Dataset\n\nclass Data(Dataset):\n    def __init__(self):\n        enc = nn.Linear(3, 4)\n",
    "class Trainer:\n    def __init__(self):\n        local = nn.Linear(3, 4)\n",
    # a class attribute, evaluated at import time
    "class Cfg:\n    layer = nn.Linear(3, 4)\n",
])
def test_not_in_model_data_or_class_code(code):
    source = HEADER + code
    assert run(source).output == source


@pytest.mark.parametrize("line", [
    "tok = AutoTokenizer.from_pretrained('bert-base-uncased')",
    "cfg = AutoConfig.from_pretrained('bert-base-uncased')",
    "args = TrainingArguments('out')",
    "m = AutoModel.from_pretrained('big', device_map='auto')",
    "m = AutoModel.from_pretrained('big', load_in_4bit=True)",
])
def test_hugging_face_objects_that_must_not_move(line):
    source = ("import torch\nfrom transformers import AutoConfig, AutoModel, AutoTokenizer, TrainingArguments\n"
              + line + "\n")
    assert run(source).output == source


@pytest.mark.parametrize("line", [
    "m = AutoModelForSequenceClassification.from_pretrained('bert-base-uncased')",
    "m = timm.create_model('resnet50', pretrained=True)",
    "m = torchvision.models.resnet18(weights=None)",
    "m = tvm.resnet18()",
])
def test_model_factories_move(line):
    source = ("import torch\nimport timm\nimport torchvision\nimport torchvision.models as tvm\n"
              "from transformers import AutoModelForSequenceClassification\n\ndef main(device):\n    " + line + "\n")
    assert run(source).output.endswith(line + ".to(device)\n")


def test_torchvision_helpers_are_not_models():
    source = ("import torch\nimport torchvision\nweights = torchvision.models.ResNet18_Weights.DEFAULT\n"
              "names = torchvision.models.list_models()\n")
    assert run(source).output == source


def test_data_parallel_in_the_same_block_moves_the_wrapper_once():
    code = "model = nn.Linear(3, 4)\nmodel = nn.DataParallel(model)\n"
    assert in_function(code) == "model = nn.Linear(3, 4)\nmodel = nn.DataParallel(model).to(device)\n"


def test_data_parallel_of_a_constructor():
    assert in_function("model = nn.DataParallel(nn.Linear(3, 4))\n") == \
        "model = nn.DataParallel(nn.Linear(3, 4)).to(device)\n"


def test_conditional_data_parallel_moves_the_model_instead():
    code = "model = nn.Linear(3, 4)\nif torch.cuda.device_count() > 1:\n    model = nn.DataParallel(model)\n"
    assert in_function(code) == code.replace("nn.Linear(3, 4)\n", "nn.Linear(3, 4).to(device)\n", 1)


@pytest.mark.parametrize("code", [
    "model = nn.Linear(3, 4).to(device)\nmodel = nn.DataParallel(model)\n",
    "model = nn.Linear(3, 4)\nmodel.to(device)\nmodel = nn.DataParallel(model)\n",
    "model = nn.Linear(3, 4)\nmodel = nn.DataParallel(model)\nmodel.to(device)\n",
    "net = nn.DataParallel(model)\n",  # wraps something built elsewhere
])
def test_data_parallel_already_moved(code):
    assert in_function(code) == code


def test_data_parallel_on_chosen_gpus_is_left_to_dm404():
    code = "model = nn.Linear(3, 4)\nmodel = nn.DataParallel(model, device_ids=[1, 2])\n"
    assert in_function(code) == code
    code = "model = nn.Linear(3, 4)\nmodel = nn.DataParallel(model, device_ids=[0, 1])\n"
    assert in_function(code).endswith("device_ids=[0, 1]).to(device)\n")
    source = (HEADER + "def main(device, gpus):\n    model = nn.Linear(3, 4)\n    if gpus:\n"
              "        model = nn.DataParallel(model, device_ids=gpus)\n")
    result = run(source)
    assert result.output == source and [f for f in result.findings if f.code == "DM202" and not f.fixed]


def test_distributed_data_parallel_is_reported_not_rewritten():
    source = (HEADER + "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
              "def worker(rank):\n    model = nn.Linear(3, 4)\n    model = DDP(model, device_ids=[rank])\n")
    result = run(source)
    assert result.output == source
    assert [f.line for f in result.findings if f.code == "DM202" and not f.fixed] == [7]


def test_loss_weight_already_on_the_device():
    code = "w = torch.tensor([1.0, 2.0], device=device)\nloss = nn.CrossEntropyLoss(weight=w)\n" \
           "loss2 = nn.CrossEntropyLoss(weight=w2.to(device))\n"
    assert in_function(code) == code


def test_all_rules_move_the_weight_once():
    """DM201 puts the weight tensor on the device; DM202 then leaves the loss alone."""
    source = HEADER + "def main(device):\n    w = torch.tensor([1.0, 2.0])\n    loss = nn.CrossEntropyLoss(weight=w)\n"
    out = run(source, all_rules=True).output
    assert "torch.tensor([1.0, 2.0], device=device)" in out
    assert "nn.CrossEntropyLoss(weight=w)\n" in out


def test_annotated_assignment_and_main_block():
    source = HEADER + 'if __name__ == "__main__":\n    model: nn.Module = nn.Linear(3, 4)\n'
    assert "model: nn.Module = nn.Linear(3, 4).to(device)\n" in run(source).output


def test_suppression_comment():
    source = HEADER + "model = nn.Linear(3, 4)  # devmod: ignore[DM202]\n"
    assert run(source).output == source


@pytest.mark.parametrize("kind", ["VALID", "INVALID"])
def test_examples_with_all_rules(kind):
    """Every example also behaves when all rules run together: parses, settles, VALID stays."""
    for example in getattr(ModelToDevice, kind):
        result = run(example.code, all_rules=True)
        if kind == "VALID":
            assert not [f for f in result.findings if f.code == "DM202"]
        elif example.expected is not None:
            assert [f for f in result.findings if f.code == "DM202" and f.fixed]


def test_a_replaced_head_moves_with_the_model():
    # Fine-tuning: `.to(device)` on the constructor alone would leave the new head on the CPU.
    code = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    import torchvision

    model = torchvision.models.resnet18()
    model.fc = nn.Linear(model.fc.in_features, 10)
    model.classifier[1] = nn.Linear(4, 2)
    """)
    out = transform_source(code).output
    assert "model = torchvision.models.resnet18().to(device)" in out
    assert "model.fc = nn.Linear(model.fc.in_features, 10).to(device)" in out
    assert "model.classifier[1] = nn.Linear(4, 2).to(device)" in out
    assert transform_source(out).output == out


def test_a_model_given_a_part_that_is_not_built_there_is_reported():
    code = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(3, 3))
    model.head = shared_head
    """)
    result = transform_source(code)
    assert "model = nn.Sequential(nn.Linear(3, 3))\n" in result.output
    assert any(f.code == "DM202" and not f.fixed and "new parts" in f.message for f in result.findings)
