"""Shapes found by the twentieth held-out trial (docs/real-repos.md "Twentieth run"). Each test
fails on the code before its fix (1af8b7c)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from all_rules_support import rewrite as run

from codemods.config import Config
from codemods.driver import process_files


def _unfixed(result) -> list[str]:
    return [f.code for f in result.findings if not f.fixed]


def test_an_input_rebound_at_the_end_of_a_loop_moves_with_the_model():
    # Deep-RL's naive policy gradient: ``state`` is bound above the loop and rebound at the end
    # of its body; only the first binding moved, and the second pass met the model on the CPU.
    _, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn

        policy = nn.Linear(4, 2)
        state = torch.from_numpy(np.random.rand(4)).float()
        for t in range(3):
            probs = policy(state)
            state = np.random.rand(4)
            state = torch.from_numpy(state).float()
    """)
    assert "policy = nn.Linear(4, 2).to(device)" in result.output
    assert "    state = torch.from_numpy(state).float().to(device)" in result.output


def test_an_input_wrapped_in_variable_moves_with_the_model():
    # The same script: ``state = Variable(state)`` after each binding; neither binding moved.
    _, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn
        from torch.autograd import Variable

        policy = nn.Linear(4, 2)
        state = torch.from_numpy(np.random.rand(4)).float()
        state = Variable(state)
        for t in range(3):
            probs = policy(state)
            state = torch.from_numpy(np.random.rand(4)).float()
            state = Variable(state)
    """)
    assert result.output.count(".to(device)") == 3


def test_a_second_model_that_reads_a_held_back_input_stays_with_it():
    # REINFORCE with baseline: ``value_fn`` runs on copies of the ``state`` that holds ``policy``
    # back; ``value_fn`` alone moved.
    _, result = run("""\
        from copy import deepcopy

        import numpy as np
        import torch
        import torch.nn as nn

        policy = nn.Linear(4, 2)
        value_fn = nn.Linear(4, 1)
        seq = []
        for t in range(3):
            state = torch.from_numpy(np.random.rand(4)).unsqueeze(0).float()
            seq.append(deepcopy(state))
            probs = policy(state)
        for s in seq:
            print(value_fn(s))
    """)
    assert "to(device)" not in result.output
    assert _unfixed(result) == ["DM202", "DM202"]


def test_a_gpu_index_the_caller_hands_in_is_not_reported():
    # semantic-segmentation-pytorch's DataParallel scatter: ``obj.cuda(dev)`` with ``dev`` from
    # the caller's device ids.
    _, result = run("""\
        import torch


        def copy_to(obj, dev):
            if torch.is_tensor(obj):
                return obj.cuda(dev, non_blocking=True)
            return [copy_to(o, dev) for o in obj]
    """)
    assert result.findings == []


def test_a_module_kept_in_a_plain_list_is_told_to_use_a_module_list():
    # DomainBed's TRM: ``self.clist = [nn.Linear(...).cuda() ...]``; the advice "drop the move"
    # would leave those layers on the CPU, as ``model.to()`` does not see a plain list.
    _, result = run("""\
        import torch.nn as nn


        class Algo(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.head = nn.Linear(8, 2)
                self.heads = [nn.Linear(8, 2).cuda() for _ in range(n)]
    """)
    assert "nn.ModuleList" in result.findings[0].message


def test_a_model_only_loaded_and_saved_is_not_moved():
    # simple-faster-rcnn's weight converter: ``net[0].load_state_dict(...)`` then
    # ``torch.save(net.state_dict(), ...)``; moving ``net`` wrote a checkpoint of CUDA tensors.
    _, result = run("""\
        import torch
        import torch.nn as nn

        net = nn.Sequential(nn.Linear(4, 2), nn.ReLU())
        net[0].load_state_dict(torch.load("part.pth"))
        torch.save(net.state_dict(), "whole.pth")
    """)
    assert ".to(device)" not in result.output
    assert 'map_location="cpu"' in result.output


def test_the_input_of_a_model_built_by_a_class_handed_in_stays():
    # spinningup's ``def vpg(env_fn, actor_critic=MLPActorCritic)``: ``ac = actor_critic()`` is
    # never moved; its observation got ``device=device``.
    _, result = run("""\
        import torch
        import torch.nn as nn


        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.pi = nn.Linear(3, 1)

            def act(self, obs):
                return self.pi(obs)


        def run(actor_critic=Policy):
            ac = actor_critic()
            print(ac.act(torch.as_tensor([0.0, 1.0, 2.0], dtype=torch.float32)))


        if __name__ == "__main__":
            run()
    """)
    assert result.output == result.source


def test_a_pickled_model_run_only_through_its_own_method_stays_where_it_was_saved():
    # spinningup's ``test_policy.py``: ``model = torch.load(path)`` then ``model.act(x)``, whose
    # class (in another file) calls ``.numpy()``; the load got ``map_location=device``.
    _, result = run("""\
        import sys
        import torch


        def load_policy(fname):
            model = torch.load(fname, weights_only=False)

            def get_action(x):
                with torch.no_grad():
                    return model.act(torch.as_tensor(x, dtype=torch.float32))

            return get_action


        if __name__ == "__main__":
            print(load_policy(sys.argv[1])([0.0, 1.0, 2.0]))
    """)
    assert result.output == result.source


def test_a_package_module_whose_functions_use_the_device_defines_it_at_its_top(tmp_path: Path):
    # spinningup's ``spinup/utils/test_policy.py`` (found on a build between the runs): the device
    # went into the ``__main__`` block while ``load_policy`` reads it, so importing the module and
    # calling the function raised NameError.
    package = tmp_path / "pkg"
    package.mkdir()
    (tmp_path / "setup.py").write_text("")
    (package / "__init__.py").write_text("")
    module = package / "loader.py"
    module.write_text(textwrap.dedent("""\
        import torch


        def load_policy(fname):
            model = torch.load(fname, weights_only=False)

            def get_action(x):
                return model(torch.as_tensor(x, dtype=torch.float32))

            return get_action


        if __name__ == "__main__":
            import sys
            print(load_policy(sys.argv[1])([0.0, 1.0, 2.0]))
    """))
    reports = list(process_files([str(module)], Config(), "diff", jobs=1))
    assert '+device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in reports[0].diff


def test_characters_handed_to_a_function_that_places_its_tensors_hold_nothing_back():
    # Found by the regression of the handed-items rule (udacity's char-RNN notebook): ``for ch in
    # prime: predict(net, ch, h)``, where ``predict`` moves the tensor it makes of ``ch`` itself.
    _, result = run("""\
        import numpy as np
        import torch
        import torch.nn as nn

        train_on_gpu = torch.cuda.is_available()


        def predict(net, char, h):
            inputs = torch.from_numpy(np.array([[ord(char)]]))
            if train_on_gpu:
                inputs = inputs.cuda()
            return net(inputs.float()), h


        def sample(net, prime="The"):
            h = None
            for ch in prime:
                out, h = predict(net, ch, h)
            return out


        net = nn.Linear(1, 1)
        print(sample(net))
    """)
    assert [f.code for f in result.findings if not f.fixed] == []


def test_a_checkpoint_dict_read_with_pop_still_gets_its_map_location():
    # Found by the same regression (DALLE-pytorch's ``generate.py``): ``load_obj.pop("hparams")`` is
    # a dict method, not a model's; the load lost its ``map_location``.
    _, result = run("""\
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        load_obj = torch.load("dalle.pt")
        params, weights = load_obj.pop("hparams"), load_obj.pop("weights")
        print(params, weights.keys())
    """)
    assert 'torch.load("dalle.pt", map_location=device)' in result.output

