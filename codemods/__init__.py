"""devmod: puts every PyTorch tensor, model and batch on one shared device."""

__version__ = "0.1.0"
