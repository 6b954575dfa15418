"""What a variable holds: a tensor from a factory, a model, a loss, a DataLoader.

Syntax only (no types), so each answer is "surely" or "don't know"; rules act on
"surely" and report or skip the rest.
"""

from __future__ import annotations

import re
from typing import Mapping

import libcst as cst

from .factory_names import tensor_factories
from .names import dotted, keyword, last_part, qualified_names
from .scopes import ClassFacts
from .tree import nodes_of, walk

MODEL_FACTORY_PREFIXES = ("torchvision.models.", "timm.create_model", "transformers.")
LOADER_CLASSES = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# torch.nn classes that are not models one moves on their own.
_NOT_MODELS = frozenset({"Parameter", "ParameterList", "ParameterDict", "Module", "ModuleList",
                         "ModuleDict", "Identity"})


# Tensors made from host memory, and the legacy CPU constructors (``torch.FloatTensor([[...]])``,
# ``torch.LongTensor(labels)``): always on the CPU, with no ``device=`` parameter.
HOST_MAKERS = frozenset({"torch.from_numpy", "torch.Tensor", *(f"torch.{kind}Tensor" for kind in (
    "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool"))})

# torch.nn classes without parameters or buffers of their own, as usually built (containers too:
# what they hold is built elsewhere).
PARAMETER_FREE = re.compile(
    r"(ReLU6?|LeakyReLU|ELU|SELU|CELU|GELU|SiLU|Mish|Sigmoid|Tanh|Hardtanh|Hardsigmoid|Hardswish|"
    r"Hardshrink|Softshrink|Tanhshrink|Softplus|Softsign|Softmax2?d?|LogSoftmax|Softmin|LogSigmoid|"
    r"Threshold|RReLU|GLU|Flatten|Unflatten|Identity|\w*Dropout\w*|\w*Pool\dd|MaxUnpool\dd|"
    r"Upsample\w*|PixelShuffle|PixelUnshuffle|ChannelShuffle|\w*Pad\dd|CosineSimilarity|"
    r"PairwiseDistance|Fold|Unfold|Sequential|ModuleList|ModuleDict|Parameter|ParameterList|ParameterDict|Module)")
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "Module", "Parameter", "ParameterList",
                         "ParameterDict"})
_INSTANCE_NORM = re.compile(r"(Lazy)?InstanceNorm\dd")


def layer_has_state(names: set[str], call: cst.Call) -> bool:
    """``nn.Linear`` yes; ``nn.ReLU``, ``nn.Sequential`` no; ``nn.InstanceNorm2d`` only with
    ``affine=True`` / ``track_running_stats=True``. ``names`` are the class's last parts."""
    if any(PARAMETER_FREE.fullmatch(n) for n in names):
        return False
    if any(_INSTANCE_NORM.fullmatch(n) for n in names):
        return any(keyword(call, k) is not None for k in ("affine", "track_running_stats"))
    return True


def holds_no_tensors(metadata: Mapping, call: cst.Call, facts: ClassFacts | None = None, depth: int = 0) -> bool:
    """``nn.NLLLoss()``, ``nn.LogSoftmax(dim=1)``: a torch.nn module that surely has no parameter
    or buffer, so ``.cuda()`` / ``.to()`` on it moves nothing and cannot fail on any machine.
    Containers are not (they hold what they are given), nor losses given a weight. With
    ``facts``, also a module class of the file that keeps only such modules and plain values
    (a moving average around ``nn.AvgPool1d``)."""
    if facts is not None and isinstance(call.func, cst.Name) and call.func.value in facts.classes:
        return depth < 4 and _class_holds_no_tensors(metadata, facts.classes[call.func.value], facts, depth + 1)
    names = last_part(is_torch_nn_class(metadata, call))
    if not names or names & _CONTAINERS:
        return False
    if is_loss_constructor(metadata, call):
        return loss_weight_argument(metadata, call) is None
    return not layer_has_state(names, call)




# Calls that give a module a parameter, a buffer or a sub-module of any kind
_REGISTERING = frozenset({"register_buffer", "register_parameter", "add_module", "register_module", "setattr",
                          "Parameter", "ParameterList", "ParameterDict"})


def _class_holds_no_tensors(metadata: Mapping, klass: cst.ClassDef, facts: ClassFacts, depth: int) -> bool:
    """A direct ``nn.Module`` subclass whose every ``self.<attr> = value`` keeps a module without
    tensors or a plain value (a number, a string, a parameter never called as a module)."""
    if not klass.bases or any(qualified_names(metadata, base.value) != {"torch.nn.Module"} or base.keyword
                              for base in klass.bases):
        return False
    calls = nodes_of(klass, cst.Call)
    if any((c.func.attr.value if isinstance(c.func, cst.Attribute) else getattr(c.func, "value", "")) in _REGISTERING
           for c in calls):
        return False
    called = {c.func.attr.value for c in calls if isinstance(c.func, cst.Attribute) and dotted(c.func.value) == "self"}
    for node in nodes_of(klass, cst.Assign, cst.AnnAssign, cst.AugAssign):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) \
                    and target.value.value == "self" and node.value is not None \
                    and not _plain_value(metadata, node.value, facts, depth, target.attr.value in called):
                return False
            if not isinstance(target, (cst.Name, cst.Attribute)):
                return False  # ``self.a, self.b = ...``: not read further
    return True


def _plain_value(metadata: Mapping, value: cst.BaseExpression, facts: ClassFacts, depth: int, called: bool) -> bool:
    """A value that adds no tensor to a module: a tensor-less module, a literal, arithmetic, or a
    name that is never called as a module (``self.k = k``)."""
    if isinstance(value, cst.Call):
        return holds_no_tensors(metadata, value, facts, depth)
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(value, (cst.Name, cst.Attribute)):
        return not called
    if isinstance(value, cst.BinaryOperation):
        return all(_plain_value(metadata, side, facts, depth, called) for side in (value.left, value.right))
    if isinstance(value, cst.UnaryOperation):
        return _plain_value(metadata, value.expression, facts, depth, called)
    if isinstance(value, (cst.Tuple, cst.List)):
        return all(isinstance(e, cst.Element) and _plain_value(metadata, e.value, facts, depth, called)
                   for e in value.elements)
    return False


def factory_name(metadata: Mapping, node: cst.CSTNode) -> str | None:
    """``"torch.zeros"`` for a call of a tensor factory, else None."""
    if not isinstance(node, cst.Call):
        return None
    found = qualified_names(metadata, node.func) & tensor_factories()
    return next(iter(sorted(found)), None)


def is_torch_nn_class(metadata: Mapping, call: cst.Call) -> set[str]:
    """``{"torch.nn.Linear"}`` for ``nn.Linear(...)``; nothing for calling an instance,
    ``nn.CrossEntropyLoss()(out, y)``, which computes a value and builds nothing."""
    if isinstance(call.func, cst.Call):
        return set()
    return {n for n in qualified_names(metadata, call.func) if n.startswith("torch.nn.")
            and n.count(".") == 2 and n.rsplit(".", 1)[-1][:1].isupper()}


def is_loss_constructor(metadata: Mapping, call: cst.Call) -> bool:
    return any(n.endswith("Loss") for n in is_torch_nn_class(metadata, call))


def is_model_constructor(metadata: Mapping, call: cst.Call, facts: ClassFacts) -> bool:
    """``Net()`` for an nn.Module subclass of the file, ``nn.Linear(...)``, model factories."""
    if isinstance(call.func, cst.Name) and call.func.value in facts.model_classes:
        return True
    if isinstance(call.func, cst.Attribute) and dotted(call.func) in facts.model_classes:
        return True  # ``nets.Stepper(8)``: a model class named through a project module
    nn_classes = is_torch_nn_class(metadata, call)
    if nn_classes and not last_part(nn_classes) & _NOT_MODELS and not is_loss_constructor(metadata, call):
        return True
    names = qualified_names(metadata, call.func)
    if any(n.startswith(MODEL_FACTORY_PREFIXES) for n in names):
        return True
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "from_pretrained"


def is_loader_constructor(metadata: Mapping, call: cst.Call) -> bool:
    return bool(qualified_names(metadata, call.func) & LOADER_CLASSES)


# -- models, wrappers and losses as DM202 sees them -------------------------------------------
DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                           "torch.nn.parallel.data_parallel.DataParallel"})
DISTRIBUTED_DATA_PARALLEL = frozenset({"torch.nn.parallel.DistributedDataParallel",
                                       "torch.nn.parallel.distributed.DistributedDataParallel",
                                       "torch.nn.DistributedDataParallel"})
# ``X.from_pretrained`` also builds tokenizers, configs, processors and schedulers: no ``.to``.
_NOT_MODEL_WORDS = ("Tokenizer", "Config", "Processor", "Extractor", "Scheduler", "Arguments", "Trainer")
# torchvision.models functions that return weights or names, not modules.
_TORCHVISION_NON_MODELS = frozenset({"list_models", "get_model_weights", "get_weight", "get_model_builder"})
# Keywords that already place (or dispatch) what a constructor builds: a ``.to`` would be redundant or fail.
PLACING_KEYWORDS = ("device", "device_map", "load_in_8bit", "load_in_4bit", "quantization_config")
# Losses whose first positional parameter is the ``weight`` tensor.
_WEIGHT_FIRST_LOSSES = frozenset({"CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss",
                                  "MultiLabelSoftMarginLoss"})
_MODEL_NAME_WORDS = ("model", "net", "encoder", "decoder", "generator", "discriminator", "classifier",
                     "critic", "policy", "backbone")


def wrapper_kind(metadata: Mapping, call: cst.Call) -> str | None:
    """``"dp"`` for ``nn.DataParallel(...)``, ``"ddp"`` for ``DistributedDataParallel(...)``, else None."""
    names = qualified_names(metadata, call.func)
    if names & DATA_PARALLEL:
        return "dp"
    if names & DISTRIBUTED_DATA_PARALLEL:
        return "ddp"
    return None


def builds_model(metadata: Mapping, call: cst.Call, facts: ClassFacts) -> bool:
    """A stricter ``is_model_constructor``: the call itself builds a module that has ``.to``.

    Excludes method chains on a model (``Net().to(device)``: qualified names of
    ``torchvision.models.resnet18().to`` still start with ``torchvision.models.``),
    tokenizers/configs from ``from_pretrained``, ``transformers`` helpers that are not
    models (``TrainingArguments``) and torchvision's weight/name helpers.
    """
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        return False  # ``X(...).method(...)``
    if not is_model_constructor(metadata, call, facts):
        return False
    if isinstance(func, cst.Name) and func.value in facts.model_classes or is_torch_nn_class(metadata, call) \
            or isinstance(func, cst.Attribute) and dotted(func) in facts.model_classes:
        return True
    spelled = {dotted(func) or ""} | qualified_names(metadata, func)
    if any(word in part for name in spelled for part in name.split(".")[-2:] for word in _NOT_MODEL_WORDS):
        return False
    if any(n.startswith("torchvision.models.") and n.rsplit(".", 1)[-1] in _TORCHVISION_NON_MODELS
           or n.startswith("torchvision.models.") and n.endswith("_Weights") for n in spelled):
        return False
    transformers = {n for n in spelled if n.startswith("transformers.")}
    if transformers and not any(_transformers_model(n) for n in transformers):
        return False
    return True


def _transformers_model(name: str) -> bool:
    """``transformers.AutoModelForX.from_pretrained`` / ``transformers.BertModel(...)``."""
    parts = name.split(".")
    cls = parts[-2] if parts[-1] in ("from_pretrained", "from_config") else parts[-1]
    return "Model" in cls or "For" in cls


def places_itself(call: cst.Call) -> bool:
    """The constructor already puts (or dispatches) the module somewhere: ``device=``,
    ``device_map=``, quantised loading, or ``**kwargs`` that may carry a device."""
    for arg in call.args:
        if arg.star == "**":
            return True
        if arg.keyword is not None and arg.keyword.value in PLACING_KEYWORDS and not (
                isinstance(arg.value, cst.Name) and arg.value.value in ("None", "False")):
            return True
    return False


def loss_weight_argument(metadata: Mapping, call: cst.Call) -> cst.Arg | None:
    """The ``weight=`` / ``pos_weight=`` tensor of a loss constructor (also ``CrossEntropyLoss(w)``)."""
    if not is_loss_constructor(metadata, call):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in ("weight", "pos_weight"):
            if not (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
                return arg
    first = next((a for a in call.args if a.keyword is None and not a.star), None)
    if first is not None and last_part(is_torch_nn_class(metadata, call)) & _WEIGHT_FIRST_LOSSES:
        if not (isinstance(first.value, cst.Name) and first.value.value == "None"):
            return first
    return None


def looks_like_model_name(name: str) -> bool:
    """``model``, ``net``, ``self.encoder``, ``G``-style names aside: callee names that are models."""
    last = name.rsplit(".", 1)[-1].lower()
    return any(word in last for word in _MODEL_NAME_WORDS)


def model_variables(metadata: Mapping, module: cst.Module, facts: ClassFacts) -> set[str]:
    """Names assigned from a model constructor (or a DataParallel wrapper) anywhere in the file."""
    # Asked by most rules and by the device lookup, each with the same tree and facts.
    return set(facts.remembered("model_variables", module, lambda: _model_variables(metadata, module, facts)))


def _model_variables(metadata: Mapping, module: cst.Module, facts: ClassFacts) -> set[str]:
    found: set[str] = set()
    for node in nodes_of(module, cst.Assign):
        if isinstance(node.value, cst.Call):
            call = node.value
            while isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call):
                call = call.func.value  # ``Net().to(device)``
            if builds_model(metadata, call, facts) or wrapper_kind(metadata, call):
                found |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
    return found


def raw_weight_functions(module: cst.Module) -> set[str]:
    """Top-level functions that read a module-level tensor created on the device
    (``w1 = torch.randn(200, 784, requires_grad=True, device=device)``, the raw weights of a
    hand-written network): calling one runs a model, so its inputs meet the device."""
    placed: set[str] = set()
    for statement in module.body:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    placed |= _placed_targets(target.target, small.value)
    if not placed:
        return set()
    found: set[str] = set()
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef):
            params = {p.name.value for p in statement.params.params}
            if any(isinstance(n, cst.Name) and n.value in placed and n.value not in params
                   for n in walk(statement.body)):
                found.add(statement.name.value)
    return found


def _placed_targets(target: cst.BaseExpression, value: cst.BaseExpression) -> set[str]:
    """The names bound to a call with ``device=`` (``w, b = torch.randn(..., device=d), ...``)."""
    if isinstance(target, cst.Name):
        return {target.value} if isinstance(value, cst.Call) and keyword(value, "device") is not None else set()
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
            and len(target.elements) == len(value.elements):
        return {name for t, v in zip(target.elements, value.elements) for name in _placed_targets(t.value, v.value)}
    return set()


def is_model_callee(func: cst.BaseExpression, models: set[str]) -> bool:
    """``model(x)``, ``self.encoder(x)``: a call of a known model variable or a model-like name."""
    name = dotted(func)
    return bool(name) and (name in models or looks_like_model_name(name))


def is_model_method_call(func: cst.BaseExpression, models: set[str]) -> bool:
    """``agent.get_action_and_value(obs)``: a method of a known model that runs it on data (not
    ``nn.Module``'s own API, not saving or printing)."""
    return isinstance(func, cst.Attribute) and func.attr.value not in MODULE_API \
        and not func.attr.value.startswith(_NOT_RUNNING) and is_model_callee(func.value, models)


# ``nn.Module``'s own API: calling one of these on a model is not running it on data.
MODULE_API = frozenset({"to", "cuda", "cpu", "train", "eval", "parameters", "named_parameters", "state_dict",
                         "load_state_dict", "zero_grad", "modules", "children", "named_modules", "named_children",
                         "apply", "half", "float", "double", "bfloat16", "type", "register_buffer",
                         "register_parameter", "requires_grad_", "share_memory", "buffers", "named_buffers",
                         "add_module", "extra_repr", "to_empty", "register_forward_hook", "get_submodule",
                        "register_module", "append", "extend", "insert"})  # container building
_NOT_RUNNING = ("save", "load", "push", "export", "print")  # ``model.save_pretrained(path)``


def is_model_method_call(func: cst.BaseExpression, models: set[str]) -> bool:
    """``policy.act(obs)``, ``model.v(x)``: one of a model's own forward paths, not its module API."""
    return isinstance(func, cst.Attribute) and func.attr.value not in MODULE_API \
        and not func.attr.value.startswith(_NOT_RUNNING) and is_model_callee(func.value, models)


def is_loss_callee(func: cst.BaseExpression) -> bool:
    """``criterion(out, y)``, ``loss_fn(out, y)``, ``nn.MSELoss()(out, y)``: its inputs meet the
    model's output."""
    if isinstance(func, cst.Call):
        func = func.func
    name = dotted(func)
    last = name.rsplit(".", 1)[-1].lower() if name else ""
    return any(word in last for word in ("loss", "criterion", "cross_entropy", "nll"))
