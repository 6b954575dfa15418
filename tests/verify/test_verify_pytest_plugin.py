"""`pytest -p codemods.pytest_plugin --simulate-cuda` runs a user's suite on the simulated GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

# Import everything the simulation needs before pytester runs an inner session in this
# process: modules first imported there would be dropped from sys.modules afterwards.
import torch._dynamo  # noqa: E402,F401

import codemods.pytest_plugin  # noqa: E402,F401
import codemods.verify.runner  # noqa: E402,F401
import codemods.verify.simulate  # noqa: E402,F401
import codemods.verify.torch_patches  # noqa: E402,F401

pytest_plugins = ["pytester"]

USER_SUITE = """
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # at import time

    def test_forward_with_the_batch_left_on_the_cpu():
        model = torch.nn.Linear(2, 1).to(device)
        model(torch.randn(3, 2))

    def test_forward_done_right(devmod_cuda):
        model = torch.nn.Linear(2, 1).to(device)
        model(torch.randn(3, 2, device=device))
        if devmod_cuda is not None:
            assert devmod_cuda.stats.param_devices == {"cuda:0"}
"""


def test_a_device_bug_fails_only_on_the_simulated_gpu(pytester):
    pytester.makeconftest("""
        import torch
        GPU_AT_IMPORT = torch.cuda.is_available()
    """)
    pytester.makepyfile(test_user_model=USER_SUITE + """
    def test_conftest_saw_the_same_machine():
        import conftest
        assert conftest.GPU_AT_IMPORT == torch.cuda.is_available()
""")
    plain = pytester.runpytest("-p", "codemods.pytest_plugin")
    plain.assert_outcomes(passed=3)
    simulated = pytester.runpytest("-p", "codemods.pytest_plugin", "--simulate-cuda")
    simulated.assert_outcomes(passed=2, failed=1)
    simulated.stdout.fnmatch_lines([
        "devmod: tests run on a simulated cuda:0*",
        "*Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on cuda:0*",
        "FAILED test_user_model.py::test_forward_with_the_batch_left_on_the_cpu*",
    ])
    assert not torch.cuda.is_available()  # the inner session's simulation is gone


def test_subprocesses_of_the_tests_see_the_simulated_gpu_too(pytester, monkeypatch):
    import os

    pytester.makepyfile(test_launcher="""
        import subprocess, sys

        def test_a_launched_script_sees_the_gpu():
            code = "import torch; assert torch.cuda.is_available(); print(torch.ones(1, device='cuda').device)"
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            assert done.returncode == 0 and done.stdout.strip() == "cuda:0", done.stderr
    """)
    before = os.environ.get("PYTHONPATH")
    result = pytester.runpytest("-p", "codemods.pytest_plugin", "--simulate-cuda")
    result.assert_outcomes(passed=1)
    assert os.environ.get("PYTHONPATH") == before and "DEVMOD_SIMULATE_CUDA" not in os.environ  # restored


def test_the_option_is_documented(pytester):
    result = pytester.runpytest("-p", "codemods.pytest_plugin", "--help")
    result.stdout.fnmatch_lines(["*--simulate-cuda*simulated cuda:0*"])
