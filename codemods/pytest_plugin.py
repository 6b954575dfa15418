"""Run a test suite on the simulated GPU: ``pytest -p codemods.pytest_plugin --simulate-cuda``.

Device bugs stay invisible on CPU-only CI because ``torch.cuda.is_available()`` is
False there; under the simulation it is True and mixing devices raises as on a GPU.
Without ``--simulate-cuda`` the plugin does nothing.
"""

from __future__ import annotations

import contextlib

import pytest

_STACK = pytest.StashKey[contextlib.ExitStack]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("devmod")
    group.addoption("--simulate-cuda", action="store_true", default=False,
                    help="run the tests with a simulated cuda:0 (devmod verify's simulation)")


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("simulate_cuda", default=False):
        return
    from .verify.simulate import simulated_cuda

    stack = contextlib.ExitStack()
    stack.enter_context(simulated_cuda())
    config.stash[_STACK] = stack


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = config.stash.get(_STACK, None)
    if stack is not None:
        stack.close()


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("simulate_cuda", default=False):
        return "devmod: running on a simulated cuda:0"
    return None
