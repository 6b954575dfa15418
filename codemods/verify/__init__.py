"""`devmod verify`: run code on a GPU, or on a simulated ``cuda:0`` where there is none.

Public API::

    from codemods.verify import simulated_cuda, run_script

    with simulated_cuda() as sim:      # torch.cuda.is_available() is True in here
        train()
    sim.stats.param_devices            # {"cuda:0"}

    outcome = run_script("train.py", argv=["--epochs", "1"], simulate=True)
    outcome.kind, outcome.location, outcome.rule   # "device-error", ("train.py", 31), "DM203"

Importing this package does not import torch; the functions do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .runner import RunOutcome, run_script
    from .simulate import SimulatedCuda, Stats, simulated_cuda

__all__ = ["RunOutcome", "SimulatedCuda", "Stats", "run_script", "simulated_cuda"]


def __getattr__(name: str) -> Any:
    # Lazy: `devmod apply` imports the CLI (and with it this package) and must not pay for torch.
    if name in ("RunOutcome", "run_script"):
        from . import runner
        return getattr(runner, name)
    if name in ("SimulatedCuda", "Stats", "simulated_cuda"):
        from . import simulate
        return getattr(simulate, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
