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


def test_a_library_factory_that_adds_parts_and_a_gpu_only_probe_get_no_report(tmp_path):
    # Library code gets no device, so devmod moves nothing there: a report that asks for a move
    # after the last new part would be false. A CUDA probe in the branch that runs only with a
    # GPU is correct code too.
    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("_import_structure = {'blocks': ['make_block']}\n")
    (package / "blocks.py").write_text(textwrap.dedent("""\
        import torch
        from torch import nn


        class Block(nn.Module):
            def __init__(self, layers):
                super().__init__()
                self.layers = layers

            def enable_fast_kernels(self, flag):
                if not flag:
                    return False
                elif not torch.cuda.is_available():
                    raise ValueError("needs a GPU")
                else:
                    probe = torch.randn((1, 2, 40), device="cuda")
                    return probe.sum() == probe.sum()


        def make_block(width, attention=None):
            block = Block(nn.ModuleList([nn.Linear(width, width)]))
            if attention is not None:
                block.attention = attention
            return block
    """))
    [report] = process_files([str(package / "blocks.py")], Config(), "diff", jobs=1)
    assert report.diff == ""
    assert report.findings == []


def test_library_code_leaves_what_the_author_places_later_or_keeps_on_the_host(tmp_path):
    # The ten wrong hunks left in diffusers' src/ (docs/real-repos.md), as one package:
    # - a model method with no input tensor gets no ``next(self.parameters())`` guess (weights may
    #   be offloaded to the meta device there);
    # - a float64 schedule, computed through torch.special and placed at its end;
    # - a tensor of sizes, read back on the host;
    # - statistics combined with a result the author brought to the host;
    # - values stored into another tensor (the store copies them);
    # - a helper nested in ``__init__`` (construction time, and its first parameter is no ``self``).
    diffs = _package_diff(tmp_path, {
        "encoders.py": """\
            import torch
            from torch import nn


            class Rotary(nn.Module):
                def __init__(self, dim, stats=None):
                    super().__init__()
                    self.dim = dim
                    self.proj = nn.Linear(dim, dim)

                    def as_tensor(value):
                        if isinstance(value, torch.Tensor):
                            return value.clone()
                        return torch.tensor(value, dtype=torch.float32)

                    self.stats = as_tensor(stats) if stats is not None else None

                def tables(self, length):
                    freqs = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                    pos = torch.arange(length, dtype=torch.float32)
                    return torch.outer(pos, freqs).cos()

                def causal_mask(self, size, dtype):
                    mask = torch.empty(size, size, dtype=dtype)
                    mask.fill_(torch.tensor(torch.finfo(dtype).min))
                    return mask.triu_(1)

                def forward(self, hidden, step: torch.Tensor):
                    grid = torch.stack([torch.tensor(h.shape[1:], dtype=torch.long) for h in hidden])
                    return [self.proj(h) for h in hidden], grid.tolist(), step


            def schedule(steps, mu, device=None):
                ticks = torch.linspace(0.0, 1.0, steps + 1, dtype=torch.float64)
                z = torch.special.ndtri(ticks)
                y = mu + z
                t = 1.0 - torch.special.expit(y)
                t = t.clamp(0.01, 0.99)
                return (1.0 - t).flip(0)[:-1].to(dtype=torch.float32, device=device)


            def normalize(vae, pixels: torch.Tensor, stats):
                mean = torch.tensor(stats).view(1, -1, 1, 1)
                latents = vae(pixels.float() / 255)
                latents = latents.float().cpu()
                return latents - mean


            def fill_positions(position_ids: torch.Tensor, rows, count, start):
                time = start + torch.arange(count, dtype=torch.float64)
                position_ids[rows, 0] = time
        """,
    })
    assert diffs == {"encoders.py": ""}


def test_a_library_factory_moved_in_its_chain_is_not_folded(tmp_path):
    # ``torch.zeros(n).to(x.device)`` works: folding it into ``device=`` changes no tensor, so
    # library code, already device-correct, comes through unchanged. (Driver code still folds.)
    diffs = _package_diff(tmp_path, {
        "noise.py": """\
            import torch


            def add_noise(sample, scale):
                noise = torch.tensor([0.0]).to(sample.device)
                return sample + scale * noise
        """,
    })
    assert diffs == {"noise.py": ""}
