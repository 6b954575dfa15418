"""Shapes from the seventh held-out trial (cleanrl, moco-v3, SRGAN, Pytorch-UNet, SimCLR, DiT,
improved-diffusion, pytorch-cnn-visualizations; docs/real-repos.md). Each test fails on the code
before its fix."""

from __future__ import annotations

from all_rules_support import rewrite as run


def test_a_flax_module_is_no_torch_model():
    # cleanrl's JAX files import torch only for SummaryWriter; ``nn`` is flax.linen there.
    source, result = run("""\
        import flax.linen as nn
        import jax
        from torch.utils.tensorboard import SummaryWriter


        class QNetwork(nn.Module):
            action_dim: int

            @nn.compact
            def __call__(self, x):
                return nn.Dense(self.action_dim)(x)


        if __name__ == "__main__":
            writer = SummaryWriter("runs")
            q_network = QNetwork(action_dim=2)
            q_network.apply = jax.jit(q_network.apply)
    """)
    assert result.output == source and not result.findings


def test_a_file_that_sets_the_default_device_gets_no_device_arguments():
    # cleanrl's ppo_trxl: ``torch.set_default_device(device)`` places every factory already, and
    # ``forward(self, seq_len)`` takes a count, not a tensor with a ``.device``.
    source, result = run("""\
        import torch
        from torch import nn


        class PositionalEncoding(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.register_buffer("inv_freqs", 1e4 ** (-torch.arange(0, dim, 2.0) / dim))

            def forward(self, seq_len):
                seq = torch.arange(seq_len - 1, -1, -1.0)
                return (seq[:, None] * self.inv_freqs[None, :]).sin()


        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            torch.set_default_device(device)
            encoding = PositionalEncoding(4)
            print(encoding(6) + torch.zeros(6, 2))
    """)
    # The class is also imported by a script that sets no default device (cleanrl's enjoy.py):
    # its forward follows its buffer; the file's own driver code gets nothing.
    assert "seq = torch.arange(seq_len - 1, -1, -1.0, device=self.inv_freqs.device)" in result.output
    assert result.output.replace(", device=self.inv_freqs.device", "") == source


def test_a_count_named_first_parameter_of_forward_is_no_tensor():
    source, result = run("""\
        import torch
        from torch import nn


        class Steps(nn.Module):
            def forward(self, num_steps):
                return torch.arange(num_steps)
    """)
    assert "num_steps.device" not in result.output


def test_cuda_with_the_index_the_script_set_as_its_device_is_not_reported():
    # moco-v3's main_lincls: ``torch.cuda.set_device(args.gpu)`` then ``.cuda(args.gpu)``.
    source, result = run("""\
        import argparse
        import torch
        from torch import nn

        if __name__ == "__main__":
            args = argparse.ArgumentParser().parse_args()
            if args.gpu is not None:
                torch.cuda.set_device(args.gpu)
            criterion = nn.CrossEntropyLoss().cuda(args.gpu)
    """)
    assert not [f for f in result.findings if f.code == "DM103"]


def test_cpu_staging_buffers_under_a_device_defined_in_the_main_block():
    # cleanrl's ppg_procgen: the device comes from the parsed arguments, earlier in the same main
    # block (no report that it "cannot be defined above"); buffers filled with ``.cpu()`` values and
    # moved a slice at a time stay on the CPU on purpose.
    source, result = run("""\
        import argparse
        import torch
        from torch import nn

        if __name__ == "__main__":
            args = argparse.ArgumentParser().parse_args()
            device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
            agent = nn.Linear(4, 2).to(device)
            staged = torch.zeros((8, 4), dtype=torch.uint8)
            outputs = torch.zeros((8, 2))
            for i in range(8):
                obs = torch.rand(4, device=device)
                staged[i] = obs.byte().cpu()
                outputs[i] = agent(obs).detach().cpu()
            for start in range(0, 8, 4):
                batch = staged[start:start + 4].to(device)
                print(agent(batch.float()), outputs[start:start + 4].to(device))
    """)
    assert result.output == source
    assert not result.findings


def test_the_input_of_a_model_method_moves_with_the_model():
    # cleanrl's ppo_trxl/enjoy.py: ``agent.get_action_and_value(obs)`` runs the model on ``obs``.
    source, result = run("""\
        import numpy as np
        import torch
        from torch import nn


        class Agent(nn.Module):
            def __init__(self):
                super().__init__()
                self.actor = nn.Linear(4, 2)

            def act(self, obs):
                return self.actor(obs).argmax(-1)


        if __name__ == "__main__":
            agent = Agent()
            obs = np.zeros(4, dtype=np.float32)
            for _ in range(3):
                obs = torch.Tensor(obs).unsqueeze(0)
                action = agent.act(obs)
                obs = np.random.rand(4).astype(np.float32)
    """)
    assert "agent = Agent().to(device)" in result.output
    assert "obs = torch.Tensor(obs).to(device).unsqueeze(0)" in result.output


def test_a_model_handed_to_an_object_that_makes_its_own_inputs_stays_and_is_reported():
    # pytorch-cnn-visualizations: the object optimises an image it makes on the CPU itself.
    source, result = run("""\
        import torch
        from torch import nn


        class Visualizer:
            def __init__(self, model):
                self.model = model
                self.image = torch.rand(1, 4, requires_grad=True)

            def step(self):
                return self.model(self.image).sum()


        if __name__ == "__main__":
            model = nn.Linear(4, 2)
            print(Visualizer(model).step())
    """)
    assert result.output == source
    [finding] = [f for f in result.findings if f.code == "DM202"]
    assert "Visualizer" in finding.message and not finding.fixed


def test_a_buffer_filled_with_values_brought_to_the_host_stays_there():
    # cleanrl's ppg_procgen: ``aux_pi`` keeps policy outputs on the CPU to save GPU memory.
    source, result = run("""\
        import torch
        from torch import nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        def flatten(t):
            return t.reshape(-1, *t.shape[2:])


        if __name__ == "__main__":
            agent = nn.Linear(4, 3).to(device)
            aux_pi = torch.zeros((5, 2, 3))
            for i in range(2):
                with torch.no_grad():
                    logits = agent(torch.rand(5, 4, device=device)).cpu().clone()
                aux_pi[:, i] = logits
            print(agent(torch.rand(10, 4, device=device)) - flatten(aux_pi).to(device))
    """)
    assert "aux_pi = torch.zeros((5, 2, 3))\n" in result.output
