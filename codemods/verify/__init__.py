"""`devmod verify`: run code on a GPU, or on a simulated one where there is none."""

from .simulate import SimulatedCuda, simulated_cuda

__all__ = ["SimulatedCuda", "simulated_cuda"]
