"""The parts of ``torch.cuda`` and ``torch.accelerator`` a script calls, answered as a
machine with one GPU would answer them (nothing is ever pending, no memory is in use)."""

from __future__ import annotations

import contextlib
import time
import types
from typing import Any, Iterator

import torch

from .virtual_devices import gpu_count

GPU_NAME = "Simulated CUDA GPU (devmod)"
TOTAL_MEMORY = 80 * 2**30


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


def _true(*args: Any, **kwargs: Any) -> bool:
    return True


def _false(*args: Any, **kwargs: Any) -> bool:
    return False


def _properties(*args: Any, **kwargs: Any) -> Any:
    return types.SimpleNamespace(name=GPU_NAME, major=9, minor=0, total_memory=TOTAL_MEMORY,
                                 multi_processor_count=132, is_integrated=False, is_multi_gpu_board=False,
                                 L2_cache_size=50 * 2**20, uuid="GPU-devmod-simulated")


class Stream:
    """Stands in for ``torch.cuda.Stream``: work is never pending."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = torch.device("cuda:0")
        self.priority = priority

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def wait_stream(self, other: Any) -> None:
        return None

    def wait_event(self, event: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def is_capturing(self) -> bool:
        return False

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class Event:
    """Stands in for ``torch.cuda.Event``; ``elapsed_time`` reports host time in milliseconds."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                 **kwargs: Any) -> None:
        self.enable_timing = enable_timing
        self._time: float | None = None

    def record(self, stream: Any = None) -> None:
        self._time = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def wait(self, stream: Any = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, end_event: Event) -> float:
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0


@contextlib.contextmanager
def _context(*args: Any, **kwargs: Any) -> Iterator[None]:
    yield


class _DeviceContext:
    """``with torch.cuda.device(0):``: there is only one device to switch to."""

    def __init__(self, device: Any = None) -> None:
        self.idx = 0

    def __enter__(self) -> _DeviceContext:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _memory_summary(*args: Any, **kwargs: Any) -> str:
    return f"|  {GPU_NAME}: memory is not simulated (devmod verify); all counters read 0.  |\n"


CUDA_FUNCTIONS: dict[str, Any] = {
    "is_available": _true, "device_count": lambda: gpu_count(), "current_device": _zero, "is_initialized": _true,
    "init": _noop, "_lazy_init": _noop,
    "get_device_name": lambda *a, **k: GPU_NAME, "get_device_capability": lambda *a, **k: (9, 0),
    "get_device_properties": _properties, "get_arch_list": lambda: ["sm_90"],
    "synchronize": _noop, "set_device": _noop, "empty_cache": _noop, "ipc_collect": _noop,
    "manual_seed": _noop, "manual_seed_all": _noop, "seed": _noop, "seed_all": _noop,
    "initial_seed": lambda: torch.initial_seed(),
    "get_rng_state": lambda *a, **k: torch.get_rng_state(), "get_rng_state_all": lambda: [torch.get_rng_state()],
    "set_rng_state": _noop, "set_rng_state_all": _noop,
    "memory_allocated": _zero, "max_memory_allocated": _zero, "memory_reserved": _zero,
    "max_memory_reserved": _zero, "memory_cached": _zero, "max_memory_cached": _zero,
    "reset_peak_memory_stats": _noop, "reset_max_memory_allocated": _noop, "reset_max_memory_cached": _noop,
    "reset_accumulated_memory_stats": _noop, "memory_stats": lambda *a, **k: {},
    "memory_summary": _memory_summary, "mem_get_info": lambda *a, **k: (TOTAL_MEMORY, TOTAL_MEMORY),
    "set_per_process_memory_fraction": _noop, "utilization": _zero,
    "is_current_stream_capturing": _false, "is_bf16_supported": _true,
    "current_stream": lambda *a, **k: Stream(), "default_stream": lambda *a, **k: Stream(),
    "set_stream": _noop, "stream": lambda *a, **k: _context(), "Stream": Stream, "Event": Event,
    "device": _DeviceContext, "device_of": _DeviceContext,
}

ACCELERATOR_FUNCTIONS: dict[str, Any] = {
    "is_available": _true, "current_accelerator": lambda *a, **k: torch.device("cuda"),
    "device_count": lambda: gpu_count(), "current_device_index": _zero, "current_device_idx": _zero,
    "set_device_index": _noop, "set_device_idx": _noop, "synchronize": _noop,
    "current_stream": lambda *a, **k: Stream(), "set_stream": _noop,
}
