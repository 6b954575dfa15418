"""Stand-in for torchvision in the real-repositories trial (no network, random data)."""

from . import datasets, models, transforms, utils

__version__ = "0.0.0+trial-stub"
__all__ = ["datasets", "models", "transforms", "utils"]
