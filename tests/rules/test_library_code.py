"""Library code comes through unchanged: shapes from a review of devmod's diff of diffusers' src/
(issue 8, docs/real-repos.md). Each test fails on the code before its fix."""

from __future__ import annotations

import textwrap

from codemods.config import Config
from codemods.driver import process_files
from codemods.engine import transform_source


def _package_diff(tmp_path, files: dict[str, str]) -> dict[str, str]:
    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("_import_structure = {'encoders': ['encode']}\n")
    for name, code in files.items():
        (package / name).write_text(textwrap.dedent(code))
    paths = [str(package / name) for name in files]
    return {r.path.rsplit("/", 1)[-1]: r.diff or "" for r in process_files(paths, Config(), "diff", jobs=1)}


def test_a_package_module_that_runs_nothing_is_library_code(tmp_path):
    # Imported by name only (a lazy import structure): its cuda default stays its callers' to
    # override, and it gains no module-level device; a converter places none of its models.
    diffs = _package_diff(tmp_path, {
        "encoders.py": """\
            import torch


            def mask(frames, height, device="cuda"):
                return torch.ones(frames, height, device=device)
        """,
        "convert.py": """\
            import torch
            from torch import nn


            def convert(path, device=None):
                if device is None:
                    device = "cuda" if torch.cuda.is_available() else "cpu"
                state = torch.load(path, map_location=device)
                net = nn.Linear(4, 4)
                net.load_state_dict(state)
                return net
        """,
    })
    assert diffs == {"encoders.py": "", "convert.py": ""}


def test_a_parameter_tested_for_another_type_gives_no_device():
    source = textwrap.dedent("""\
        import torch


        def gaussian(size, sigma):
            if isinstance(sigma, float):
                sigma = torch.tensor([[sigma]])
            x = torch.arange(size, device=sigma.device, dtype=sigma.dtype) - size // 2
            return torch.exp(-x.pow(2.0) / (2 * sigma.pow(2.0)))
    """)
    assert transform_source(source).output == source


def test_removing_a_parts_weight_is_no_new_part():
    source = textwrap.dedent("""\
        import torch
        from torch import nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")



        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(4)

            def forward(self, x):
                return self.norm(x)


        if __name__ == "__main__":
            model = Encoder()
            model.norm.weight = None
            model.norm.bias = None
            print(model(torch.randn(2, 4)))
    """)
    result = transform_source(source)
    assert not [f for f in result.findings if not f.fixed]


def test_a_cuda_probe_inside_an_availability_check_stays_on_cuda():
    # diffusers' xformers check: a tiny tensor made on CUDA on purpose; the module's
    # parameters may still be on the CPU (or on meta, offloaded) when it runs.
    source = textwrap.dedent("""\
        import torch
        from torch import nn


        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def enable_fast_kernels(self):
                if not torch.cuda.is_available():
                    raise ValueError("needs a GPU")
                probe = torch.randn((1, 2, 40), device="cuda")
                return probe.sum()

            def forward(self, x):
                return self.proj(x)
    """)
    assert transform_source(source).output == source
