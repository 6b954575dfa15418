"""DM104 cuda-only-call: GPU-only waits and resets run only where CUDA is available."""

from __future__ import annotations

import textwrap

from all_rules_support import rewrite

from codemods.engine import transform_source


def test_the_guard_uses_torch_as_the_file_spells_it():
    _, aliased = rewrite("""\
        import torch as th

        th.cuda.synchronize()
    """)
    assert "if th.cuda.is_available():\n    th.cuda.synchronize()\n" in aliased.output
    _, imported = rewrite("""\
        from torch import cuda

        def wait():
            cuda.synchronize()
    """)
    assert "    if cuda.is_available():\n        cuda.synchronize()\n" in imported.output


def test_lines_it_cannot_guard_alone_or_that_the_author_guarded_stay():
    source, result = rewrite("""\
        import torch

        def step(args, x):
            y = x * 2; torch.cuda.synchronize()
            if args.cuda: torch.cuda.synchronize()
            if args.cuda:
                torch.cuda.synchronize()
            torch.cuda.synchronize()  # devmod: ignore[DM104]
            print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
            return y
    """)
    assert result.output == source


def test_a_module_level_call_keeps_the_comments_above_it():
    _, result = rewrite("""\
        import torch

        # wait for the GPU before timing
        torch.cuda.synchronize()
        print("done")
    """)
    assert result.output.endswith("# wait for the GPU before timing\nif torch.cuda.is_available():\n"
                                  "    torch.cuda.synchronize()\nprint(\"done\")\n")
    assert [f.code for f in result.findings if f.fixed] == ["DM104"]


def test_a_second_run_changes_nothing():
    code = textwrap.dedent("""\
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    """)
    once = transform_source(code).output
    assert once.count("if torch.cuda.is_available():") == 1
    assert transform_source(once).output == once


def test_a_statement_that_reuses_the_id_of_a_guarded_node_is_not_guarded():
    # The guarded statements were kept as a set of ids; a node freed meanwhile could hand its id to
    # another statement, which then got guarded (``if print.is_available():``). They are compared
    # by identity now: a statement whose id is known but which is another object stays as it is.
    import libcst as cst

    from codemods.rules.cuda_only_call import CudaOnlyCall

    rule = CudaOnlyCall()
    guarded = cst.parse_statement("torch.cuda.synchronize()\n")
    other = cst.parse_statement("print('done')\n")
    rule._guarded = {id(other): guarded}  # the id collision, made by hand
    assert rule._with_guards([other]) == [other]
    rule._guarded = {id(guarded): guarded}
    assert cst.Module(body=rule._with_guards([guarded])).code.startswith("if torch.cuda.is_available():")
