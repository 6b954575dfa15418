"""Base classes that make a class a model, shared by the cheap ``ast`` pass and the libcst analysis."""

NN_MODULE_BASES = frozenset({
    "torch.nn.Module", "torch.nn.modules.module.Module",
    # containers subclassed as models (``class Block(nn.Sequential)``)
    "torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict",
    "torch.nn.modules.container.Sequential", "torch.nn.modules.container.ModuleList",
    "torch.nn.modules.container.ModuleDict",
})
