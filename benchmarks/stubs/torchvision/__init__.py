"""Stand-in for torchvision in the real-repositories trial (no network, random data).

Where the real torchvision is installed, its other submodules (``torchvision.ops``, which timm
imports) are found through it: this package's path ends with the real package's folder.
"""

import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_real = importlib.machinery.PathFinder.find_spec(
    "torchvision", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _real is not None and _real.submodule_search_locations:
    __path__ = [*__path__, *_real.submodule_search_locations]


def real_attribute(module: str, name: str):
    """``name`` from the real ``torchvision.<module>``, for what a stand-in module lacks
    (``torchvision.utils._log_api_usage_once``, which the real ``ops`` import)."""
    for folder in __path__[1:]:
        for path in (os.path.join(folder, module + ".py"), os.path.join(folder, module, "__init__.py")):
            if os.path.exists(path):
                key = f"torchvision._real_{module}"
                if key not in sys.modules:
                    spec = importlib.util.spec_from_file_location(
                        key, path, submodule_search_locations=[os.path.dirname(path)] if path.endswith("__init__.py") else None)
                    loaded = importlib.util.module_from_spec(spec)
                    loaded.__package__ = "torchvision" if path.endswith(module + ".py") else key
                    sys.modules[key] = loaded
                    spec.loader.exec_module(loaded)
                return getattr(sys.modules[key], name)
    raise AttributeError(f"module 'torchvision.{module}' has no attribute '{name}'")

from . import datasets, models, transforms, utils  # noqa: E402

__version__ = "0.0.0+trial-stub"
__all__ = ["datasets", "models", "transforms", "utils"]
