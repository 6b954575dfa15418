"""What a variable holds: a tensor from a factory, a model, a loss, a DataLoader.

Syntax only (no types), so each answer is "surely" or "don't know"; rules act on
"surely" and report or skip the rest.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Mapping

import libcst as cst

from .names import last_part, qualified_names
from .scopes import ClassFacts

MODEL_FACTORY_PREFIXES = ("torchvision.models.", "timm.create_model", "transformers.")
LOADER_CLASSES = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# torch.nn classes that are not models one moves on their own.
_NOT_MODELS = frozenset({"Parameter", "ParameterList", "ParameterDict", "Module", "ModuleList",
                         "ModuleDict", "Identity"})


@lru_cache(maxsize=1)
def tensor_factories() -> frozenset[str]:
    """Qualified names of the tensor factories listed in data/tensor_factories.txt."""
    text = resources.files("codemods").joinpath("data/tensor_factories.txt").read_text("utf-8")
    names = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return frozenset(f"torch.{n}" for n in names if n)


def factory_name(metadata: Mapping, node: cst.CSTNode) -> str | None:
    """``"torch.zeros"`` for a call of a tensor factory, else None."""
    if not isinstance(node, cst.Call):
        return None
    found = qualified_names(metadata, node.func) & tensor_factories()
    return next(iter(sorted(found)), None)


def is_torch_nn_class(metadata: Mapping, call: cst.Call) -> set[str]:
    return {n for n in qualified_names(metadata, call.func) if n.startswith("torch.nn.")
            and n.count(".") == 2 and n.rsplit(".", 1)[-1][:1].isupper()}


def is_loss_constructor(metadata: Mapping, call: cst.Call) -> bool:
    return any(n.endswith("Loss") for n in is_torch_nn_class(metadata, call))


def is_model_constructor(metadata: Mapping, call: cst.Call, facts: ClassFacts) -> bool:
    """``Net()`` for an nn.Module subclass of the file, ``nn.Linear(...)``, model factories."""
    if isinstance(call.func, cst.Name) and call.func.value in facts.model_classes:
        return True
    nn_classes = is_torch_nn_class(metadata, call)
    if nn_classes and not last_part(nn_classes) & _NOT_MODELS and not is_loss_constructor(metadata, call):
        return True
    names = qualified_names(metadata, call.func)
    if any(n.startswith(MODEL_FACTORY_PREFIXES) for n in names):
        return True
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "from_pretrained"


def is_loader_constructor(metadata: Mapping, call: cst.Call) -> bool:
    return bool(qualified_names(metadata, call.func) & LOADER_CLASSES)
