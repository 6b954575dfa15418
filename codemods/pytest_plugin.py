"""Run a test suite on a simulated GPU: ``pytest -p codemods.pytest_plugin --simulate-cuda``.

Device bugs stay invisible on CPU-only CI because ``torch.cuda.is_available()`` is False
there; under the simulation it is True and mixing devices raises as on a GPU. The
simulation is switched on before conftest.py files and test modules are imported (module-level
``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`` sees the GPU)
and off when the session ends; Python subprocesses the tests start get it too (the startup hook
``devmod verify`` uses). Without ``--simulate-cuda`` the plugin does nothing and never imports
torch.

The ``devmod_cuda`` fixture gives a test the active simulation (``None`` without the
flag), e.g. ``assert devmod_cuda.stats.param_devices == {"cuda:0"}``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

_STACK = pytest.StashKey[contextlib.ExitStack]()
_SIM = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("devmod")
    group.addoption("--simulate-cuda", action="store_true", default=False,
                    help="run the tests on a simulated cuda:0 (devmod verify's simulation): "
                         "torch.cuda.is_available() is True and mixing devices raises")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    # Before conftest.py files run: their module-level `torch.cuda.is_available()` must see the GPU.
    if getattr(early_config.known_args_namespace, "simulate_cuda", False):
        _start(early_config)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("simulate_cuda", default=False) and _STACK not in config.stash:
        _start(config)


def _start(config: pytest.Config) -> None:
    from .verify.simulate import simulated_cuda

    from .verify.runner import child_environment

    stack = contextlib.ExitStack()
    stack.enter_context(child_environment(True, None, no_bytecode=False))  # subprocesses see the GPU too
    config.stash[_SIM] = stack.enter_context(simulated_cuda())
    config.stash[_STACK] = stack


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = config.stash.get(_STACK, None)
    if stack is not None:
        del config.stash[_STACK]
        stack.close()


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("simulate_cuda", default=False):
        return "devmod: tests run on a simulated cuda:0 (torch.cuda.is_available() is True)"
    return None


@pytest.fixture
def devmod_cuda(request: pytest.FixtureRequest) -> Any:
    """The active simulation (``SimulatedCuda``), or None when ``--simulate-cuda`` is off."""
    return request.config.stash.get(_SIM, None)
